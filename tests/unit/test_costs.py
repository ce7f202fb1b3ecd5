"""Cost tables and distributions: exact numbers on tiny hand-built inputs."""
from __future__ import annotations

from dataclasses import replace
import json

import numpy as np
import pytest

from launchgap.costmodel import CostCurve, EagerCurve
from launchgap.errors import AnalyzerError, InputError
from launchgap.planning.costs import CostPoint, CostTable
from launchgap.planning.inputs import (
    no_costs_reason,
    TraceSteps,
    costs_from_curves,
    costs_from_steps,
    costs_from_timings,
    distribution_from_steps,
    left_out_steps_note,
    mixed_steps_note,
    load_distribution,
    looks_like_timings,
)


def _table(rows):
    return CostTable(tuple(CostPoint(b, e, g, "measured", None) for b, e, g in rows), "tiny")


# --- CostTable ----------------------------------------------------------------------------------

def test_at_observed_and_interpolated():
    t = _table([(1, 100.0, 20.0), (4, 100.0, 50.0), (8, 120.0, 80.0)])
    assert t.at(4) == CostPoint(4, 100.0, 50.0, "measured", None)
    p = t.at(2)
    assert (p.eager_us, p.graph_us, p.source) == (100.0, 30.0, "interpolated")
    p = t.at(6)
    assert (p.eager_us, p.graph_us) == (110.0, 65.0)
    e, g = t.costs_at([1, 2, 6, 8])
    assert e.tolist() == [100.0, 100.0, 110.0, 120.0]
    assert g.tolist() == [20.0, 30.0, 65.0, 80.0]


@pytest.mark.parametrize("bs", [0, 9, 1000])
def test_at_refuses_to_extrapolate(bs):
    t = _table([(1, 100.0, 20.0), (8, 120.0, 80.0)])
    with pytest.raises(InputError, match=f"batch size {bs} is outside the sizes with costs \\(1..8\\)"):
        t.at(bs)


def test_extended_to_clamps_below_and_extrapolates_above():
    # Upper sizes: >= 8 / 4, so bs 2, 4, 8 (bs 1 is left out of the fit). Eager grows 5 us per
    # row there, graph 10 us: at bs 16 eager 130 + 5 * 8 = 170, graph 80 + 10 * 8 = 160; at bs 32
    # eager's line (250) falls under the graph's (320), and eager is floored at the graph cost.
    t = _table([(1, 100.0, 10.0), (2, 100.0, 20.0), (4, 110.0, 40.0), (8, 130.0, 80.0)])
    ext = t.extrapolation()
    assert (ext.top_batch_size, ext.fit_batch_sizes) == (8, (2, 4, 8))
    assert (ext.eager_us_per_bs, ext.graph_us_per_bs) == (pytest.approx(5.0), pytest.approx(10.0))
    c = t.extended_to([1, 4, 16, 32])
    assert c.batch_sizes == [1, 2, 4, 8, 16, 32]
    assert c.at(16) == CostPoint(16, pytest.approx(170.0), pytest.approx(160.0), "extrapolated", None)
    assert c.at(32) == CostPoint(32, pytest.approx(320.0), pytest.approx(320.0), "extrapolated", None)
    assert len(c.warnings) == 1
    assert c.warnings[0].startswith("batch sizes 16, 32 are above the largest size with costs (8): extrapolated "
                                    "along the growth over bs 2, 4, 8 (eager +5 us, graph +10 us per batch row")
    # The band: half and twice the growth.
    lo, hi = t.extended_to([16], "low"), t.extended_to([16], "high")
    assert (lo.at(16).eager_us, lo.at(16).graph_us) == (pytest.approx(150.0), pytest.approx(120.0))
    assert (hi.at(16).eager_us, hi.at(16).graph_us) == (pytest.approx(240.0), pytest.approx(240.0))
    # Extending an extended table uses the same line (extrapolated points are not fitted on).
    assert c.extended_to([24]).at(24).graph_us == pytest.approx(240.0)
    assert t.extended_to([2, 5, 8]) is t
    # Below the smallest size: clamped, an overestimate, warned.
    b = _table([(2, 100.0, 20.0), (8, 120.0, 80.0)]).extended_to([1])
    assert b.at(1) == CostPoint(1, 100.0, 20.0, "interpolated", None)
    assert "batch sizes 1 are below the smallest size with costs (2)" in b.warnings[0]
    with pytest.raises(InputError, match="band must be one of"):
        t.extended_to([16], "middle")


def test_extrapolation_of_one_size_is_flat():
    t = _table([(4, 100.0, 50.0)])
    assert t.extended_to([8]).at(8) == CostPoint(8, 100.0, 50.0, "extrapolated", None)


def test_extrapolation_grows_no_faster_than_the_rows():
    """Two sizes one row apart whose costs double (a server log's 20 and 21 running requests): the fitted growth, +19
    ms a row, is capped at the top size's cost over its rows (time proportional to the batch)."""
    t = _table([(20, 27537.4, 16575.4), (21, 46567.3, 35605.3)])
    ext = t.extrapolation()
    assert (ext.eager_us_per_bs, ext.graph_us_per_bs) == (pytest.approx(46567.3 / 21), pytest.approx(35605.3 / 21))
    assert t.extended_to([24]).at(24).graph_us == pytest.approx(35605.3 * 24 / 21)
    # a growth below the cap is the fitted one
    t = _table([(8, 100.0, 50.0), (16, 116.0, 58.0)])
    assert (t.extrapolation().eager_us_per_bs, t.extrapolation().graph_us_per_bs) == (2.0, 1.0)


def test_constructor_refuses_bad_tables():
    with pytest.raises(InputError, match="must not decrease"):
        _table([(1, 100.0, 20.0), (2, 90.0, 30.0)])
    with pytest.raises(InputError, match="ascending"):
        _table([(2, 100.0, 20.0), (1, 100.0, 30.0)])
    with pytest.raises(InputError, match="positive finite"):
        _table([(1, 100.0, 0.0)])
    # the message names the sizes and costs at fault (a cost curve gone below zero, a cost not finite)
    with pytest.raises(InputError) as bad:
        _table([(1, -8100.0, 5.0), (2, -7900.0, 6.0), (3, 50.0, float("nan"))])
    assert str(bad.value) == ("step costs must be positive finite microseconds: eager cost at bs 1, 2 (-8,100.0 to "
                              "-7,900.0 us); graph cost at bs 3 (not finite) (tiny)")
    with pytest.raises(InputError, match="no batch sizes"):
        CostTable((), "x")
    with pytest.raises(InputError, match="unknown cost source"):
        CostTable((CostPoint(1, 1.0, 1.0, "guessed"),))


def test_fitted_is_isotonic_regression():
    # eager 10, 30, 20, 40 -> pool (30, 20) to 25; graph already monotone.
    pts = [CostPoint(b, e, g, "measured") for b, e, g in [(1, 10.0, 5.0), (2, 30.0, 6.0), (4, 20.0, 7.0),
                                                         (8, 40.0, 9.0)]]
    t = CostTable.fitted(pts[::-1], origin="x")
    assert [p.eager_us for p in t.points] == [10.0, 25.0, 25.0, 40.0]
    assert [p.graph_us for p in t.points] == [5.0, 6.0, 7.0, 9.0]
    assert [p.source for p in t.points] == ["measured"] * 4
    assert len(t.warnings) == 1
    assert t.warnings[0] == ("eager cost not monotone in batch size at bs 2, 4 (30.0, 20.0 us): "
                             "the monotone fit uses 25.0 us for all of them")


def test_many_dips_are_one_note():
    """Dips at several sizes, in both series: one "not monotone" line for the table, each run in it."""
    t = CostTable.fitted([CostPoint(b, e, g, "measured") for b, e, g in [
        (1, 30.0, 10.0), (2, 20.0, 12.0), (4, 40.0, 11.0), (8, 50.0, 14.0), (16, 44.0, 20.0), (32, 60.0, 22.0)]])
    notes = [w for w in t.warnings if "not monotone" in w]
    assert notes == ["costs not monotone in batch size at 3 places, each pooled to its mean by the monotone fit: "
                     "eager at bs 1, 2 (30.0, 20.0 us -> 25.0); eager at bs 8, 16 (50.0, 44.0 us -> 47.0); "
                     "graph at bs 2, 4 (12.0, 11.0 us -> 11.5)"]
    assert [p.eager_us for p in t.points] == [25.0, 25.0, 40.0, 47.0, 47.0, 60.0]


def test_fitted_keeps_predicted_and_interpolated_sources():
    pts = [CostPoint(1, 10.0, 5.0, "predicted"), CostPoint(2, 11.0, 6.0, "interpolated"),
           CostPoint(4, 12.0, 7.0, "measured")]
    t = CostTable.fitted(pts)
    assert [p.source for p in t.points] == ["predicted", "interpolated", "measured"]


def test_graph_memory_bytes_ignores_non_positive():
    t = CostTable((CostPoint(1, 10.0, 5.0, "measured", 0), CostPoint(2, 10.0, 6.0, "measured", -4096),
                   CostPoint(4, 10.0, 7.0, "measured", 3 * 2**20)))
    assert t.graph_memory_bytes() == 3 * 2**20
    assert _table([(1, 10.0, 5.0)]).graph_memory_bytes() is None


# --- from traces ------------------------------------------------------------------------------

def _rep(mode, steps, step_med=100.0, unprof_med=80.0, path="t.json", phases=None):
    """One trace's planning view: steps (batch size or None, profiled us, predicted graph us)."""
    return TraceSteps(path, mode, TraceSteps.scale_of(step_med, unprof_med),
                      np.array([-1 if b is None else b for b, _, _ in steps], dtype=np.int64),
                      np.array([d for _, d, _ in steps], dtype=float), np.array([g for _, _, g in steps], dtype=float),
                      tuple(phases or [None] * len(steps)))


def test_costs_from_steps_eager_and_graph():
    eager1 = _rep("eager", [(1, 100.0, 20.0), (1, 110.0, 22.0), (1, 120.0, 24.0)])  # scale 0.8
    eager8 = _rep("eager", [(8, 150.0, 40.0), (8, 150.0, 40.0)], step_med=150.0, unprof_med=120.0)
    graph8 = _rep("graph", [(8, 50.0, 49.0), (8, 52.0, 51.0)], step_med=51.0, unprof_med=51.0)
    t = costs_from_steps([eager1, eager8, graph8])
    assert t.batch_sizes == [1, 8]
    p1, p8 = t.points
    # bs 1: eager median(80, 88, 96) = 88; graph predicted median(20, 22, 24) = 22.
    assert (p1.eager_us, p1.graph_us, p1.source) == (88.0, 22.0, "predicted")
    # bs 8: eager 150 * 0.8 = 120; graph measured median(50, 52) = 51 (scale 1): both measured.
    assert (p8.eager_us, p8.graph_us, p8.source) == (120.0, 51.0, "measured")
    assert t.origin == "2 eager and 1 graph trace(s)"
    assert any("predicted from eager traces" in w and "bs 1" in w for w in t.warnings)


def test_an_eager_trace_gives_eager_costs_beyond_its_own_sizes_from_its_eager_curve():
    # one eager trace: steps at bs 2 (100, 100 us) and 4 (120 us), unprofiled as profiled; its FULL-graph curve 10..15
    # and its eager curve 50..100 us at bs 1..6
    g = np.array([10.0, 11.0, 12.0, 13.0, 14.0, 15.0])
    curve = CostCurve(g, 0.9 * g, 1.1 * g, ("model",) * 6)
    eager = EagerCurve(np.array([50.0, 60.0, 70.0, 80.0, 90.0, 100.0]), "eager steps", "the trace's own curve")
    t = _rep("eager", [(2, 100.0, 9.0), (2, 100.0, 9.0), (4, 120.0, 11.0)], step_med=100.0, unprof_med=100.0)
    t = TraceSteps(t.name, t.mode, t.unprofiled_scale, t.batch_size, t.dur_us, t.predicted_graph_us, t.phase,
                   graph_curve=curve, eager=eager)
    table = costs_from_curves([t])
    # traced: 100 (bs 2), 120 (bs 4), 110 between them; below bs 2 the curve scaled to meet it, 50 x 100/60; above
    # bs 4 scaled to meet 120 there: 90 x 120/80 = 135, 100 x 1.5 = 150
    assert table.batch_sizes == [1, 2, 3, 4, 5, 6]
    assert [p.eager_us for p in table.points] == pytest.approx([50 * 100 / 60, 100.0, 110.0, 120.0, 135.0, 150.0])
    assert [p.graph_us for p in table.points] == pytest.approx(list(g))
    assert [p.source for p in table.points] == ["predicted", "predicted", "interpolated", "predicted", "predicted",
                                                "predicted"]
    assert "eager costs from the eager traces' steps at bs 2, 4" in table.warnings
    assert any(w.startswith("eager costs at the other sizes, bs 1, 5, 6, follow the eager traces' eager curve scaled "
                            "to meet the nearest traced size (the trace's own curve)") for w in table.warnings)
    assert not any("left out" in w for w in table.warnings)
    # without an eager curve the eager costs stay at the traced sizes: the table covers bs 2..4 and says so
    bare = costs_from_curves([TraceSteps(t.name, t.mode, t.unprofiled_scale, t.batch_size, t.dur_us,
                                         t.predicted_graph_us, t.phase, graph_curve=curve)])
    assert bare.batch_sizes == [2, 3, 4] and any("left out" in w for w in bare.warnings)


def test_costs_from_steps_errors_and_unknown_batch():
    with pytest.raises(InputError, match="no decode steps with a known batch size") as err:
        costs_from_steps([_rep("eager", [(None, 100.0, 20.0)])])
    assert "(t.json: 1 step without a known batch size)" in str(err.value)
    with pytest.raises(InputError, match="only graph-mode traces"):
        costs_from_steps([_rep("graph", [(8, 50.0, 49.0)])])
    t = costs_from_steps([_rep("eager", [(None, 100.0, 20.0), (4, 100.0, 20.0)])])
    assert t.batch_sizes == [4]
    assert any("1 steps without a known batch size" in w for w in t.warnings)


def test_no_costs_reason_names_what_each_trace_holds():
    prefill = _rep("eager", [(1, 100.0, 20.0)], phases=["prefill"], path="pre.json")
    mixed = _rep("graph", [(4, 9.0, 9.0), (8, 9.0, 9.0)], phases=["mixed", "prefill"], path="pw.json")
    capture = _rep("capture", [], path="cap.json")
    none = _rep("graph", [], path="empty.json")
    unknown = _rep("eager", [(None, 1.0, 1.0), (None, 1.0, 1.0), (2, 1.0, 1.0)], phases=["decode", None, "prefill"],
                   path="u.json")
    msg = no_costs_reason([prefill, mixed, capture, none, unknown])
    assert msg == ("no decode steps with a known batch size in the traces: cannot tell what a step costs at which "
                   "batch size (pre.json: 1 prefill step, no decode step; pw.json: 2 mixed/prefill steps, no decode "
                   "step; cap.json: graph captures, no replayed step (pass it with --capture beside the run's trace); "
                   "empty.json: no step found; u.json: 2 steps without a known batch size). Profile a few "
                   "decode steps, annotate steps with bs=N, use --batch-regex/--batch-op, or pass --timings")
    with pytest.raises(InputError, match="pre.json: 1 prefill step, no decode step"):
        costs_from_steps([prefill])


def test_distribution_from_steps_counts_steps():
    reps = [_rep("eager", [(1, 1.0, 1.0), (1, 1.0, 1.0), (None, 1.0, 1.0)]), _rep("graph", [(8, 1.0, 1.0)])]
    assert distribution_from_steps(reps) == {1: 2.0, 8: 1.0}
    # a serving engine's prefill and mixed steps are not decode buckets; unknown phase counts
    reps = [_rep("eager", [(1, 1.0, 1.0), (2, 1.0, 1.0), (4, 1.0, 1.0), (4, 1.0, 1.0)],
                 phases=["decode", "prefill", "mixed", None])]
    assert distribution_from_steps(reps) == {1: 1.0, 4: 1.0}
    t = costs_from_steps(reps)
    assert t.batch_sizes == [1, 4] and not any("prefill" in w for w in t.warnings)  # the plan says it, once


def test_left_out_steps_note_counts_prefill_and_mixed_steps_and_their_time():
    """Two serving traces: 1 prefill (50 us) and 1 mixed (30 us) step of 6, beside 4 decode or unknown-phase steps
    of 10 us: 2 of 6 steps (33%), 80 of 120 us (67%); a benchmark's prefill step is not the traffic's."""
    a = _rep("eager", [(1, 10.0, 1.0), (2, 50.0, 1.0), (4, 30.0, 1.0)], phases=["decode", "prefill", "mixed"])
    b = _rep("graph", [(8, 10.0, 1.0), (8, 10.0, 1.0), (None, 10.0, 1.0)], phases=["decode", None, "decode"])
    bench = replace(_rep("eager", [(4, 999.0, 1.0)], phases=["prefill"]), benchmark=True)
    assert left_out_steps_note([a, b, bench]) == (
        "2 mixed or prefill steps of the serving trace(s) left out of the plan (33% of their steps, 67% of their "
        "profiled step time): it is for decode batches, and that time is what it does not change")
    assert left_out_steps_note([b, bench]) is None and left_out_steps_note([]) is None
    one = _rep("eager", [(1, 10.0, 1.0), (2, 30.0, 1.0)], phases=["decode", "mixed"])
    assert left_out_steps_note([one]).startswith("1 mixed step of the serving trace(s) left out")


def test_mixed_steps_note_counts_what_fits_the_lists_where_the_engine_runs_them_on_it():
    """vLLM runs prefill and mixed steps on its capture list (PIECEWISE graphs, tokens padded up, eager above the
    largest): of a vLLM trace's 3 such steps (40, 100, 600 tokens; a decode step and one of unknown tokens aside), 2
    fit a list up to 128, 1 a list up to 64; an SGLang trace's list captures decode batches only: no note."""
    vllm = replace(_rep("graph", [(8, 10.0, 1.0), (8, 50.0, 1.0), (4, 30.0, 1.0), (16, 90.0, 1.0), (2, 9.0, 1.0),
                                  (1, 5.0, 1.0)], phases=["decode", "prefill", "mixed", "mixed", "decode", "mixed"]),
                   engine="vllm", tokens=np.array([8, 40, 100, 600, 2, -1]))
    assert mixed_steps_note([vllm], (1, 2, 4, 8, 16, 32, 64), (1, 2, 4, 8, 128), "from vLLM log v.log") == (
        "vLLM runs prefill and mixed steps as PIECEWISE graphs of the same list under cudagraph_mode FULL_AND_PIECEWISE, "
        "the default, their tokens padded to the next size, eager above the largest: of the serving trace(s)' 3 "
        "such steps (40-600 tokens), 1 fit this plan's list (largest 64) and 2 the current one (largest 128, from "
        "vLLM log v.log); the plan prices decode steps only")
    assert mixed_steps_note([vllm], (8,)).endswith("0 fit this plan's list (largest 8); the plan prices decode steps "
                                                   "only")
    assert mixed_steps_note([replace(vllm, engine="sglang")], (8,)) is None
    assert mixed_steps_note([replace(vllm, benchmark=True)], (8,)) is None
    assert mixed_steps_note([replace(vllm, tokens=None)], (8,)) is None  # a fleet summary: tokens not known
    decode_only = replace(vllm, phase=("decode",) * 6)
    assert mixed_steps_note([decode_only], (8,)) is None


# --- from timings files ---------------------------------------------------------------------

def test_costs_from_timings_schema(tmp_path):
    doc = {"schema": "launchgap.timings/1", "device": "NVIDIA H200", "torch": "2.11",
           "rows": [{"model": "m", "batch_size": 1, "eager_us": 100.0, "graph_us": 20.0, "eager_host_us": None,
                     "capture_s": 0.01, "graph_pool_bytes": 2**20, "kernels_per_step": 10},
                    {"model": "m", "batch_size": 4, "eager_us": 90.0, "graph_us": 40.0, "eager_host_us": None,
                     "capture_s": None, "graph_pool_bytes": None, "kernels_per_step": None},
                    {"model": "m", "batch_size": 4, "eager_us": 110.0, "graph_us": 44.0}]}
    f = tmp_path / "timings.json"
    f.write_text(json.dumps(doc))
    assert looks_like_timings(f)
    t = costs_from_timings(f)
    # bs 4 repeated: medians 100 and 42; eager 100, 100 stays monotone.
    assert [(p.batch_size, p.eager_us, p.graph_us, p.source, p.graph_pool_bytes) for p in t.points] == \
        [(1, 100.0, 20.0, "measured", 2**20), (4, 100.0, 42.0, "measured", None)]
    assert t.origin == "timings.json, model m, NVIDIA H200"


def test_costs_from_timings_truth_layout_and_model_choice(tmp_path):
    doc = {"info": {"gpu": "H200"}, "rows": [
        {"model": "a", "bs": 1, "eager_us": 10.0, "graph_us": 2.0, "graph_pool_bytes": -5},
        {"model": "a", "bs": 2, "eager_us": 11.0, "graph_us": 3.0},
        {"model": "b", "bs": 1, "eager_us": 50.0, "graph_us": 40.0}]}
    f = tmp_path / "truth.json"
    f.write_text(json.dumps(doc))
    with pytest.raises(InputError, match=r"several models \(a, b\): choose one with --model") as ei:
        costs_from_timings(f)
    assert str(f) in str(ei.value)
    with pytest.raises(InputError, match="model 'c' not in timings file"):
        costs_from_timings(f, "c")
    t = costs_from_timings(f, "a")
    assert [(p.batch_size, p.eager_us, p.graph_us) for p in t.points] == [(1, 10.0, 2.0), (2, 11.0, 3.0)]
    assert t.points[0].graph_pool_bytes == -5 and t.graph_memory_bytes() is None


@pytest.mark.parametrize("content, reason", [
    (b"", "empty timings file"),
    (b"\x00\xff garbage", "not UTF-8"),
    (b"{not json", "not a timings JSON file"),
    (b"[1, 2]", "not a timings file"),
    (b'{"schema": "other/9", "rows": [{}]}', "expected schema 'launchgap.timings/1', found 'other/9'"),
    (b'{"rows": []}', "has no rows"),
    (b'{"rows": [{"model": "m", "bs": 0, "eager_us": 1.0}]}', r"rows\[0\].bs is 0"),
    (b'{"rows": [{"model": "m", "bs": 1, "eager_us": "fast"}]}', r"rows\[0\].eager_us is 'fast'"),
    (b'{"rows": [{"model": "m", "bs": 1}]}', r"rows\[0\] times no mode"),
    (b'{"rows": [{"model": "m", "bs": 1, "graph_us": 2.0}]}', r"rows\[0\] has no 'eager_us': the plan compares graphs "
     r"with the eager step; these are graph-only timings \(launchgap record --modes graph\): record eager too "
     r"\(--modes eager,graph\), or give them to analyze --graph-timings for the padding cost$"),
    (b'{"rows": [{"model": "m", "bs": 1, "eager_us": 5.0, "graph_us": 2.0}, {"model": "m", "bs": 2, "graph_us": 3.0}]}',
     r"rows\[1\] has no 'eager_us': the plan compares graphs with the eager step$"),
    (b'{"rows": [{"model": "m", "bs": 1, "eager_us": 5.0, "graph_us": null}]}', "no graph_us"),
])
def test_costs_from_timings_bad_files(tmp_path, content, reason):
    f = tmp_path / "t.json"
    f.write_bytes(content)
    with pytest.raises(InputError, match=reason) as ei:
        costs_from_timings(f)
    assert str(ei.value).startswith(str(f))
    assert isinstance(ei.value, AnalyzerError)


def test_costs_from_timings_missing_file(tmp_path):
    with pytest.raises(InputError, match="no such file"):
        costs_from_timings(tmp_path / "nope.json")


def test_looks_like_timings_rejects_traces(tmp_path):
    f = tmp_path / "trace.json"
    f.write_text(json.dumps({"traceEvents": [], "rows": []}))
    assert not looks_like_timings(f)
    g = tmp_path / "x.json"
    g.write_bytes(b"\x1f\x8b\x08")
    assert not looks_like_timings(g)


# --- distributions -----------------------------------------------------------------------------

@pytest.mark.parametrize("text", [
    "batch_size,count\n8,120\n1,30\n8,10\n",
    "8,120\n# comment\n\n1,30\n8,10\n",
    "count,bs\n120,8\n30,1\n10,8\n",
    '{"8": 130, "1": 30}',
])
def test_load_distribution_formats(tmp_path, text):
    f = tmp_path / "d.txt"
    f.write_text(text)
    assert load_distribution(f) == {1: 30.0, 8: 130.0}


@pytest.mark.parametrize("text, reason", [
    ("", "empty distribution file"),
    ("batch_size,count\n", "holds no batch sizes"),
    ("8\n", r"line 1: expected 'batch_size,count'"),
    ("8,x\n", "line 1: count 'x' is not a number"),
    ("8,-1\n", "line 1: count '-1' is not a non-negative number"),
    ("0,5\n", "line 1: batch size '0' is not a positive integer"),
    ("2.5,5\n", "line 1: batch size '2.5' is not a positive integer"),
    ("8,0\n", "counts are all zero"),
    ("size,n\n8,3\n", "has no column named batch_size or bs"),
    ('{"8": "many"}', "key '8': count 'many' is not a number"),
    ('{"eight": 3}', "key 'eight': batch size 'eight' is not a number"),
    ("[1, 2]", "must be an object"),
    ("{bad", "not valid JSON"),
])
def test_load_distribution_bad(tmp_path, text, reason):
    f = tmp_path / "d.csv"
    f.write_text(text)
    with pytest.raises(InputError, match=reason) as ei:
        load_distribution(f)
    assert str(ei.value).startswith(str(f))


def test_load_distribution_binary_garbage(tmp_path):
    f = tmp_path / "d.csv"
    f.write_bytes(bytes(np.random.default_rng(0).integers(128, 256, 64, dtype=np.uint8)))
    with pytest.raises(InputError, match="not UTF-8"):
        load_distribution(f)


def test_graph_band_ends_are_kept_non_decreasing():
    t = _table([(1, 100.0, 20.0), (4, 100.0, 50.0), (8, 120.0, 80.0)])
    assert t.graph_band_sizes == 0
    b = t.with_graph_band({1: 1.3, 4: 0.5}, {1: 1.5, 4: 1.1})  # bs 8 has no band
    assert [(p.graph_us_low, p.graph_us_high) for p in b.points] == [(26.0, 30.0), (25.0, 55.00000000000001),
                                                                     (None, None)]
    assert b.graph_band_sizes == 2
    # the low end: 26, 25 -> 26 (a running maximum keeps it non-decreasing), bs 8 as it is; no band on the ends
    assert [p.graph_us for p in b.at_graph_band("low").points] == [26.0, 26.0, 80.0]
    assert [p.graph_us for p in b.at_graph_band("high").points] == [30.0, 55.00000000000001, 80.0]
    assert b.at_graph_band("low").graph_band_sizes == 0
    assert [p.eager_us for p in b.at_graph_band("high").points] == [100.0, 100.0, 120.0]
    assert b.to_dict()["points"][0]["graph_us_low"] == 26.0
    with pytest.raises(ValueError):
        b.at_graph_band("middle")


def test_an_eager_cost_tied_to_its_graph_cost_moves_with_the_band():
    """A GPU-bound eager estimate (eager = graph: the estimate at its floor) keeps the tie at both ends of the band,
    so a plan at either end has no graph to gain from; an eager cost above the graph stays, at least the graph's end."""
    t = _table([(1, 100.0, 100.0), (2, 120.0, 100.0), (4, 120.0, 110.0)])
    b = t.with_graph_band({1: 0.9, 2: 0.9, 4: 0.9}, {1: 1.1, 2: 1.1, 4: 1.1})
    low, high = b.at_graph_band("low"), b.at_graph_band("high")
    assert [p.graph_us for p in low.points] == pytest.approx([90.0, 90.0, 99.0])
    assert [p.eager_us for p in low.points] == pytest.approx([90.0, 120.0, 120.0])  # tied: moves; above: stays
    assert [p.graph_us for p in high.points] == pytest.approx([110.0, 110.0, 121.0])
    assert [p.eager_us for p in high.points] == pytest.approx([110.0, 120.0, 121.0])  # above, but not below the graph


def test_eager_costs_at_the_prior_are_a_floor_the_plan_says():
    """A graph-only trace whose eager curve is its kernels times the prior host cost per launch (a floor): the cost
    table says so, keeps saying so through the planner's transforms, and the plan reads its speedup and crossover as
    lower bounds. Graph 10..15 us at bs 1..6, eager 40 us flat (5 kernels x 7.95 us, at least the graph step): graphs
    win 40/14 - 1 = 186% at bs 5 and 208% at bs 4 (40/13 - 1): at a 200% threshold the crossover is bs 5."""
    from launchgap.planning.planner import PlanOptions, plan_capture
    from launchgap.render.plan import render_plan

    g = np.array([10.0, 11.0, 12.0, 13.0, 14.0, 15.0])
    curve = CostCurve(g, 0.9 * g, 1.1 * g, ("trace",) + ("model",) * 5)

    def graph_trace(floor: bool) -> TraceSteps:
        t = _rep("graph", [(1, 10.0, 10.0)], step_med=10.0, unprof_med=10.0)
        return TraceSteps(t.name, t.mode, t.unprofiled_scale, t.batch_size, t.dur_us, t.predicted_graph_us, t.phase,
                          graph_curve=curve, eager=EagerCurve(np.full(6, 40.0), "estimate", "5 kernels x 7.95 us",
                                                              floor=floor))
    table = costs_from_curves([graph_trace(True)])
    assert table.eager_floor and [p.eager_us for p in table.points] == [40.0] * 6
    assert table.extended_to([1, 9]).eager_floor and table.at_graph_band("high").eager_floor
    assert table.to_dict()["eager_floor"] is True
    assert not costs_from_curves([graph_trace(False)]).eager_floor  # the host's own cost per launch: no floor
    # an eager trace's own steps give the eager costs: no floor
    eager = _rep("eager", [(2, 100.0, 9.0), (4, 120.0, 11.0)], step_med=100.0, unprof_med=100.0)
    eager = TraceSteps(eager.name, eager.mode, eager.unprofiled_scale, eager.batch_size, eager.dur_us,
                       eager.predicted_graph_us, eager.phase, graph_curve=curve)
    assert not costs_from_curves([graph_trace(True), eager]).eager_floor
    plan = plan_capture(table, {1: 1.0, 4: 1.0, 6: 1.0}, PlanOptions(win_threshold=2.0))
    assert plan.eager_floor and plan.to_dict()["eager_floor"] is True
    assert plan.crossover_batch_size == 5 and not plan.crossover_on_tie
    text = render_plan(plan)
    assert "us vs at least 40.0 us all-eager (at least " in text
    assert ("graphs win less than 200% from batch size 5 up by an eager estimate that is a floor (a bare launch's "
            "host cost per kernel, at least the graph step plus the GPU's gap per kernel): graphs may win further up; "
            "measure an eager step to place it") in text
    assert text.splitlines()[0] == (
        "Capture 3 graphs [1, 4, 6]: expected step 12.7 us vs at least 40.0 us all-eager (at least 3.16x: eager "
        "estimated at a floor for model code (a bare launch's host cost per kernel, at least the graph step plus the "
        "GPU's gap per kernel)); 5.0% faster than the best server default (vLLM, 51 graphs).")
    plain = plan_capture(costs_from_curves([graph_trace(False)]), {1: 1.0, 4: 1.0, 6: 1.0}, PlanOptions(win_threshold=2.0))
    assert not plain.eager_floor and "at least" not in render_plan(plain).split("\n")[0]
