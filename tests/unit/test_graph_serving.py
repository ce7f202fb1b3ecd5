"""Graph-mode serving on hand-built traces: capture sizes, fallbacks, buckets, padding, host time between steps."""
from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from launchgap.costmodel import CostCurve
from launchgap.graph_mode import capture_list_conflict, marker_buckets, padding_cost, resolve_capture_sizes, serving_steps
from launchgap.host_gaps import host_gaps
from launchgap.verdict import async_scheduling_text
from launchgap.loaders import load_trace
from launchgap.predict import PredictionModel
from launchgap.engines import CaptureSettings, parse_server_config
from launchgap.render import render_trace
from launchgap.report import AnalysisOptions, analyze_trace, with_observed_step
from launchgap.steps import assign_rows_to_steps, find_steps
from launchgap.verdict import capture_sizes_basis, padding_basis
from tests.conftest import REPO
from tests.unit.kineto_tiny import HOST_PID, HOST_TID, ann, cpu_op, kernel, launch, write

NO_PROFILER_COST = PredictionModel(profiler_us_per_host_event=0.0)


def _graph_step(t0: float, text: str, corr: int) -> list[dict]:
    """A 50 us step range with one graph launch replaying 10 kernels of 1 us (busy 10 us)."""
    return [ann(text, t0, 50.0), launch(t0 + 5.0, 3.0, corr, name="cudaGraphLaunch")] + [
        kernel(t0 + 20.0 + i, 1.0, corr, name=f"g{i}") for i in range(10)]


def _eager_step(t0: float, text: str, corr0: int, kdur: float) -> list[dict]:
    """A 50 us step range with 4 eager launches (2 us) of kernels of ``kdur`` us, 10 us apart."""
    ev = [ann(text, t0, 50.0)]
    for i in range(4):
        ev += [launch(t0 + 5.0 + 10 * i, 2.0, corr0 + i), kernel(t0 + 10.0 + 10 * i, kdur, corr0 + i)]
    return ev


def _serving_events(with_buckets: bool = True) -> list[dict]:
    b = " bucket=4" if with_buckets else ""
    return (_graph_step(0.0, f"decode_step[bs=3{b} graph]", 1) + [cpu_op("sample", 60.0, 20.0)]
            + _graph_step(100.0, f"decode_step[bs=4{b} graph]", 2)
            + _eager_step(200.0, "decode_step[bs=2 eager]", 10, 1.0)
            + _eager_step(300.0, "decode_step[bs=6 eager]", 20, 2.0))


@pytest.fixture
def serving_trace(tmp_path: Path) -> Path:
    return write(tmp_path, _serving_events())


def test_fallbacks_buckets_padding_exact(serving_trace: Path) -> None:
    rep = analyze_trace(load_trace(serving_trace), AnalysisOptions(model=NO_PROFILER_COST))
    s = rep.summary
    # the markers write bucket 4: the capture list is [4], from the engine's own markers
    assert (s.capture_sizes, s.capture_sizes_source) == ([4], "markers")
    assert [st.fallback for st in rep.steps] == [False, False, True, False]
    assert (s.fallback_steps, s.uncaptured_steps) == ([2], [3])
    assert [st.bucket for st in rep.steps] == [4, 4, None, None]
    assert [st.padded_rows for st in rep.steps] == [1, 0, None, None]
    # predicted FULL-graph steps: graph steps 10 + 0.34*10 + 3 = 16.4 at bucket 4, bounded by the replay the trace
    # shows (10 us, no gaps: a graph step is never predicted above itself), so 10; eager steps at their batch:
    # bs 2: 4 + 0.34*4 + 3 = 8.36, bs 6: 8 + 1.36 + 3 = 12.36. The cost curve (launchgap.costmodel) passes through
    # 2 and 4; bs 3 lies between them: the element-wise kernels' measured rise (4 us at 2, 10 at 4) along their shape
    # from 2, g(b) = (b / (b + 16)) ** 0.116, and the rest of the step's (1.64 - 6 = -4.36 us) linearly, so
    # cost(3) = 8.36 + 6 * (g3/g2 - 1) / (g4/g2 - 1) - 4.36 / 2
    assert [st.predicted_graph_us for st in rep.steps] == [10.0, 10.0, pytest.approx(8.36), pytest.approx(12.36)]
    g = {b: (b / (b + 16)) ** 0.116 for b in (2, 3, 4)}
    frac = (g[3] / g[2] - 1) / (g[4] / g[2] - 1)
    pad = 10.0 - (8.36 + 6.0 * frac - 4.36 / 2)  # cost(4) - cost(3) = 0.282 us
    # band: the padding's measured error over the distance, 3.5% of cost(4) = 10 per e-fold: 0.035 x ln(4/3) x 10
    spread = 0.035 * np.log(4 / 3) * 10
    low, high = pad - spread, pad + spread
    assert [st.padding_us for st in rep.steps] == [pytest.approx(pad, abs=1e-3), 0.0, None, None]
    assert [st.padding_us_low for st in rep.steps] == [pytest.approx(low, abs=1e-3), 0.0, None, None]
    assert [st.padding_us_high for st in rep.steps] == [pytest.approx(high, abs=1e-3), 0.0, None, None]
    assert s.padded_rows_fraction == pytest.approx(1 / 8)
    assert s.padding_us_per_step == pytest.approx(pad / 4, abs=1e-3)
    assert (s.padding_us_per_step_low, s.padding_us_per_step_high) == (pytest.approx(low / 4, abs=1e-3),
                                                                       pytest.approx(high / 4, abs=1e-3))
    assert s.padding_estimated_steps == 1  # bs 3: its own cost is bounded, not measured
    assert s.padding_cost_source == "trace-estimate"
    # what the basis says is what was done: bs 3 costed on the batch-scaling model between the measured 2 and 4
    assert padding_basis(s).startswith(
        f"estimated: 1 padded batch not measured, costed on the batch-scaling model of the trace's kernels through the "
        f"sizes measured by the trace; band {low / 4:,.1f}-{high / 4:,.1f} us per step (the curve's measured error over "
        f"the distance from batch to bucket)")
    # the fallback's eager cost is the eager curve's at bs 2, the cost the planner gives an eager step: 7 kernels per
    # step x the 7.95 us prior (too few launches to measure the host's own), scaled to the two eager steps' own
    # costs (their 50 us CPU ranges, no profiler cost): 50 us; less cost(4) = 10
    assert rep.steps[2].fallback_eager_us == 50.0
    assert s.fallback_eager_detail == (
        "the eager curve at its batch (2 eager decode step(s) of the trace: 7 kernels x 7.95 us per launch (a prior, "
        "the H200 harness host: 6 intervals between eager launches in the trace, fewer than 50 to measure its own), "
        "scaled by 0.898 to agree with them)")
    assert rep.steps[2].fallback_lost_us == pytest.approx(50.0 - 10.0)
    assert "2      2              4      50.0             10.0     40.0  the step marker names it eager" in \
        render_trace(rep)
    assert s.fallback_lost_us_per_step == pytest.approx((50.0 - 10.0) / 4)
    assert rep.steps[2].fallback_cause == "the step marker names it eager (decode_step[bs=2 eager])"
    assert "; 1 of 4 decode steps fell back to eager although a captured size fits them (steps 2; capture sizes from " \
        "the trace, the sizes that ran): 10 us lost per step of the trace" in s.verdict_detail
    assert "capture sizes       [4] (from the trace, the sizes that ran: the padded sizes the step markers write)" in \
        render_trace(rep)


def test_mixed_decode_time_headline_exact(serving_trace: Path, tmp_path: Path) -> None:
    rep = analyze_trace(load_trace(serving_trace), AnalysisOptions(model=NO_PROFILER_COST))
    s, curve = rep.summary, rep.cost_curve
    # Two FULL replays (predicted FULL step 10 us each: real = FULL, no gain), a fallback at bs 2 (bucket 4) and an
    # uncaptured bs 6. Eager steps as run: the eager curve, 7 kernels x 7.95 us x 0.898 = 50 us at both batches (above
    # the cost curve's 10 and 12.36 there); all FULL: the fallback at the bucket it missed, cost(4) = 10, the
    # uncaptured step at its batch, cost(6) = 12.36 (its own predicted FULL step, the curve's point at 6)
    assert (curve.at(4), curve.at(6)) == (pytest.approx(10.0), pytest.approx(12.36))
    assert [st.fallback_eager_us for st in rep.steps] == [None, None, 50.0, None]
    assert s.predicted_speedup_rule == "decode time"
    assert (s.decode_us_as_run, s.decode_us_full_graph) == (pytest.approx(120.0), pytest.approx(42.36))
    assert s.predicted_speedup == pytest.approx(120.0 / 42.36, abs=1e-3)  # 2.833x: the median step's ratio read 1.00x
    # range: FULL steps exact; the eager steps' 100 us +-30%, their FULL cost at the cost curve's band
    hi4, hi6, lo4, lo6 = curve.high(4), curve.high(6), curve.low(4), curve.low(6)
    assert lo4 < 10.0 < hi4 and lo6 < 12.36 < hi6
    assert s.predicted_speedup_low == pytest.approx((20.0 + 70.0) / (20.0 + hi4 + hi6), abs=1e-3)
    assert s.predicted_speedup_high == pytest.approx((20.0 + 130.0) / (20.0 + lo4 + lo6), abs=1e-3)
    assert s.verdict_detail.startswith(
        "capturing the uncaptured step's size and replaying the fallback's captured graph would make decode 2.83x "
        f"faster over this trace's 4 decode steps (range {s.predicted_speedup_low:.2f}-{s.predicted_speedup_high:.2f}x): "
        "120 us as run (eager steps on the eager curve), 42 us with every step one FULL graph; ")
    assert "speedup 2.83x (decode time: 120 us as run over 42 us all FULL graphs; " in render_trace(rep)
    # a measured step cannot split graph replays from eager steps: the headline stays
    assert with_observed_step(rep, 20.0).summary.predicted_speedup == s.predicted_speedup
    # not mixed: the two FULL replays alone are 1.00x by rule, the two eager steps alone the median step's ratio
    graphs = _graph_step(0.0, "decode_step[bs=3 bucket=4 graph]", 1) + _graph_step(100.0, "decode_step[bs=4 bucket=4 graph]", 2)
    full = analyze_trace(load_trace(write(tmp_path, graphs, name="full.json")),
                         AnalysisOptions(model=NO_PROFILER_COST)).summary
    assert (full.steps_by_coverage["full"], full.steps, full.predicted_speedup_rule, full.predicted_speedup,
            full.decode_us_as_run) == (2, 2, "all FULL", 1.0, None)
    eagers = _eager_step(200.0, "decode_step[bs=2 eager]", 10, 1.0) + _eager_step(300.0, "decode_step[bs=6 eager]", 20, 2.0)
    eager = analyze_trace(load_trace(write(tmp_path, eagers, name="eager.json")),
                          AnalysisOptions(model=NO_PROFILER_COST)).summary
    assert (eager.steps_by_coverage["eager"], eager.steps, eager.predicted_speedup_rule, eager.decode_us_full_graph) \
        == (2, 2, "median step", None)


def test_host_time_between_steps_exact(serving_trace: Path) -> None:
    rep = analyze_trace(load_trace(serving_trace), AnalysisOptions(model=NO_PROFILER_COST))
    s = rep.summary
    # GPU windows [20, 30], [120, 130], [210, 241], [310, 341] -> gaps 90, 80, 69 us
    assert [st.inter_step_host_us for st in rep.steps] == [None, 90.0, 80.0, 69.0]
    assert s.inter_step_host_us_median == 80.0
    # top-level host ranges inside each gap: the cpu op "sample" (20 us) and the graph launch (3 us) before step 1;
    # the first eager launch (2 us) of steps 2 and 3
    assert [st.host_phases_us for st in rep.steps] == [
        {}, {"sample": 20.0, "cudaGraphLaunch": 3.0}, {"cudaLaunchKernel": 2.0}, {"cudaLaunchKernel": 2.0}]
    assert s.host_phases_us_per_step == {"sample": 6.667, "cudaLaunchKernel": 1.333,
                                         "cudaGraphLaunch": 1.0}
    assert s.host_phases_source == "top-level"
    # async what-if: min(gap, previous step's GPU busy) = 10, 10, 4 -> 24 us over 3 gaps
    assert s.async_hidden_us_per_step == 8.0
    text = render_trace(rep)
    assert "would hide up to 8.0 us per step" in text and "Padding by bucket" in text and "Fallbacks" in text
    assert "uncaptured sizes    1 step above the largest captured size (steps 3)" in text
    # the trace replays graphs: its typical step is not an eager one, and the prediction is the step as one FULL graph
    assert rep.mode == "mixed"
    # the headline is the decode time (test_mixed_decode_time_headline_exact): 2.83x; the median step's read 2.05x
    assert ("10.0 us -> speedup 2.83x (decode time: 120 us as run over 42 us all FULL graphs; 2.01-4.01x; estimated "
            "step; vs profiled step 2.05x;") in text
    assert "decode TPOT                  0.02 ms -> 0.01 ms as one FULL graph;" in text
    assert "; step estimated: 20 us profiled less 0 us (0-0) per recorded host event" in s.verdict_detail
    # the eager decode group (a fallback at bs 2, an uncaptured size at bs 6) among graph replays: its step is the
    # eager curve at bs 2 and 6 (50 us each), not its profiled windows (31 and 32 us); the predicted FULL graph at
    # those sizes 8.36 and 12.36 us, median 10.36: 50 / 10.36 = 4.826x, the graph step's +-3.1% band alone
    full, eager = s.step_groups
    assert full["verdict_detail"].startswith("1 graph launch(es) per step replay 10 kernels; 0 eager launches left per "
                                             "step; GPU idle 0% of the step; its FULL-graph steps already replay one "
                                             "graph each: a graph removes no more host time there; keeps 80 us")
    assert "eager_step_source" not in full
    assert {k: eager[k] for k in ("eager_step_source", "estimated_unprofiled_step_us_median", "step_us_median",
                                  "predicted_graph_step_us_median", "predicted_speedup", "predicted_speedup_low",
                                  "predicted_speedup_high")} == {
        "eager_step_source": "eager curve", "estimated_unprofiled_step_us_median": 50.0, "step_us_median": 31.5,
        "predicted_graph_step_us_median": 10.36, "predicted_speedup": 4.826, "predicted_speedup_low": 4.681,
        "predicted_speedup_high": 4.981}
    assert eager["verdict_detail"].endswith(
        "eager step from the eager curve at the steps' batches, 50 us (the cost launchgap plan gives an eager step; "
        "among graph replays the profiled 32 us window is no measure of it); graph step predicted from the GPU busy "
        "time")


def test_capture_sizes_flag_and_inferred(tmp_path: Path) -> None:
    path = write(tmp_path, _serving_events(with_buckets=False))
    trace = load_trace(path)
    # inferred: the graph steps ran bs 3 and 4 -> sizes [3, 4]; bs 2 eager is a fallback, bs 6 uncaptured
    s = analyze_trace(trace, AnalysisOptions(model=NO_PROFILER_COST)).summary
    assert (s.capture_sizes, s.capture_sizes_source, s.fallback_steps, s.uncaptured_steps) == ([3, 4], "inferred",
                                                                                                 [2], [3])
    # inferred sizes are a lower bound of the real list: padding is reported unknown, never 0 "measured"
    assert (s.padding_us_per_step, s.padding_us_per_step_low, s.padding_cost_source) == (None, None, "unknown")
    assert s.padding_unknown_reason.startswith("capture sizes inferred from the buckets the trace ran")
    assert ("capture sizes       [3, 4] (inferred, a lower bound: the batch sizes the trace's graph steps ran)"
            in render_trace(analyze_trace(trace, AnalysisOptions(model=NO_PROFILER_COST))))
    assert capture_sizes_basis(replace(s, capture_sizes_source="default", capture_sizes_detail="vLLM V1 default, "
                                       "maximum 512")) == ("assumed, the trace does not state it: vLLM V1 default, "
                                                           "maximum 512")
    assert "unknown: capture sizes inferred from the buckets" in render_trace(analyze_trace(trace, AnalysisOptions(
        model=NO_PROFILER_COST)))
    # the flag wins: with 8 captured, bs 6 is a fallback too, and bs 3 replays 8
    rep = analyze_trace(trace, AnalysisOptions(model=NO_PROFILER_COST, capture_sizes=(8,)))
    assert (rep.summary.capture_sizes, rep.summary.capture_sizes_source) == ([8], "flag")
    assert rep.summary.fallback_steps == [2, 3]
    assert [st.bucket for st in rep.steps] == [8, 8, None, None]
    assert [st.padded_rows for st in rep.steps] == [5, 4, None, None]
    # a pasted server config is the same list by another road: source "config", the settings named
    cfg = parse_server_config("vllm serve m --max-cudagraph-capture-size 8")
    rep = analyze_trace(trace, AnalysisOptions(model=NO_PROFILER_COST, server_config=cfg))
    s = rep.summary
    assert (s.capture_sizes, s.capture_sizes_source) == ([1, 2, 4, 8], "config")
    assert s.capture_sizes_detail == "vLLM server config: max_cudagraph_capture_size=8"
    assert [st.bucket for st in rep.steps] == [4, 4, None, None] and s.fallback_steps == [2, 3]
    assert s.padding_unknown_reason is None and s.padding_cost_source != "unknown"


def test_a_capture_list_the_trace_contradicts_is_warned(serving_trace: Path) -> None:
    trace = load_trace(serving_trace)
    # the graph steps' markers write bucket 4 and they ran bs 3 and 4: a given list [2] is not this server's
    rep = analyze_trace(trace, AnalysisOptions(model=NO_PROFILER_COST, capture_sizes=(2,)))
    assert rep.warnings == [
        "capture sizes from --capture-sizes (1 size, largest 2) disagree with the trace: its graph steps replayed "
        "size(s) 4 (their step markers write them), not in that list; 2 graph step(s) ran a batch above its largest "
        "size 2 (up to 4; a graph replays no batch above the largest captured size). Fallbacks and uncaptured sizes "
        "follow the given list: check that it is this server's list"]
    assert "warning: capture sizes from --capture-sizes (1 size, largest 2) disagree" in render_trace(rep)
    # a list holding what the trace replayed is no conflict
    assert analyze_trace(trace, AnalysisOptions(model=NO_PROFILER_COST, capture_sizes=(4, 8))).warnings == []
    # an engine default the graph steps outgrow; the trace's own markers and inferred sizes never conflict
    assert capture_list_conflict([1, 2], "default", "vLLM V1 default", np.array([-1, -1]), np.array([3, 2])) == (
        "capture sizes from vLLM V1 default (2 sizes, largest 2) disagree with the trace: 1 graph step(s) ran a batch "
        "above its largest size 2 (up to 3; a graph replays no batch above the largest captured size). Fallbacks and "
        "uncaptured sizes follow the engine's default: pass the server's --capture-sizes or its config")
    assert capture_list_conflict([4], "markers", "m", np.array([4]), np.array([9])) is None
    assert capture_list_conflict([3, 4], "inferred", "i", np.array([-1]), np.array([4])) is None


def test_an_engines_prefill_and_mixed_steps_tell_its_list() -> None:
    """Where the engine runs prefill and mixed steps on the capture list (vLLM V1), one that ran eager at or under the
    largest size says the list is shorter, one that replayed graphs above it says it is longer; decode steps, steps
    of unknown tokens, and an engine whose list is for decode only say nothing of it."""
    rule = "vLLM runs them as PIECEWISE graphs up to the largest size"
    none = np.array([-1, -1, -1, -1])
    tokens = np.array([219, 445, 600, -1])  # eager, eager, eager (above 512: as the list says), unknown
    graphed = np.array([False, False, False, True])
    assert capture_list_conflict([1, 2, 512], "default", "vLLM V1 default", none, none, tokens, graphed, rule) == (
        "capture sizes from vLLM V1 default (3 sizes, largest 512) disagree with the trace: 2 prefill or mixed step(s) "
        "of 219-445 tokens ran eager, at or under its largest size 512 (vLLM runs them as PIECEWISE graphs up to the "
        "largest size: its largest size is below 219, or the server runs another cudagraph_mode). Fallbacks and "
        "uncaptured sizes follow the engine's default: pass the server's --capture-sizes or its config")
    big = capture_list_conflict([1, 512], "default", "d", none[:1], none[:1], np.array([8192]), np.array([True]), rule)
    assert "1 prefill or mixed step(s) of 8,192 tokens replayed graphs, above its largest size 512 (vLLM runs them " \
           "as PIECEWISE graphs up to the largest size: its largest size is at least 8,192)" in big
    assert capture_list_conflict([1, 128], "default", "d", none, none, tokens, graphed, rule) is None  # all above 128
    assert capture_list_conflict([1, 512], "default", "d", none, none, tokens, graphed, None) is None  # decode-only list
    assert capture_list_conflict([1, 512], "default", "d", none, none, None, None, rule) is None  # no graph replayed


def test_harness_timings_drive_the_cost_curve(serving_trace: Path) -> None:
    opts = AnalysisOptions(model=NO_PROFILER_COST, graph_timings_us=((3, 15.0), (4, 16.0)))
    rep = analyze_trace(load_trace(serving_trace), opts)
    assert rep.steps[0].padding_us == 1.0  # 16 - 15: timings win over the trace's points at 3 and 4
    assert (rep.steps[0].padding_us_low, rep.steps[0].padding_us_high) == (1.0, 1.0)  # measured: no band
    assert rep.summary.padding_estimated_steps == 0
    assert rep.steps[2].fallback_lost_us == 34.0  # 50 - 16
    assert rep.summary.padding_cost_source == "timings+trace"


def test_pieces() -> None:
    assert marker_buckets(["decode_step[bs=37 bucket=48 graph]", "x padded_bs=16", "decode_step[bs=3 eager]"]
                          ).tolist() == [48, 16, -1]
    given = ([8, 2], "config", "vLLM server config: cudagraph_capture_sizes=[2, 8]")
    assert resolve_capture_sizes(given, np.array([16]), ([1], "d"), np.array([8])) == ([2, 8], *given[1:])
    assert resolve_capture_sizes(None, np.array([16, -1, 8]), ([1], "d"), np.array([8])) == (
        [8, 16], "markers", "the padded sizes the step markers write")
    assert resolve_capture_sizes(None, np.array([-1]), ([1, 2, 4], "vLLM V1 default"), np.array([8])) == (
        [1, 2, 4], "default", "vLLM V1 default")
    assert resolve_capture_sizes(None, np.array([-1]), None, np.array([8, -1, 3])) == (
        [3, 8], "inferred", "the batch sizes the trace's graph steps ran")
    assert resolve_capture_sizes(None, np.array([-1]), None, np.array([-1])) == (None, None, None)
    ss = serving_steps(["full", "eager", "eager", "piecewise", "eager"], np.array([5, 7, 9, 3, 2]),
                       np.array([True, True, True, True, False]), np.array([-1, -1, -1, -1, -1]), [4, 8])
    assert ss.bucket.tolist() == [8, -1, -1, 4, -1]
    assert ss.padded_rows.tolist() == [3, -1, -1, 1, -1]
    assert ss.fallback.tolist() == [False, True, False, False, False]  # a prefill step (not decode) is no fallback
    assert ss.uncaptured.tolist() == [False, False, True, False, False]


def test_padding_cost_on_the_curve_and_its_band() -> None:
    # a curve over 1..6: measured at 2 and 4 (the trace), modelled elsewhere, with a band
    c = CostCurve(us=np.array([10.0, 11, 13, 16, 20, 25]), low_us=np.array([9.0, 11, 12, 16, 18, 21]),
                  high_us=np.array([11.0, 11, 14, 16, 22, 29]),
                  source=("model", "trace", "model", "trace", "model", "model"))
    pc = padding_cost(c, np.array([4, 4, 6, 4, -1]), np.array([2, 3, 5, 4, 2]))
    # us = cost(bucket) - cost(batch): 16-11, 16-13, 25-20, 0; the band: the padding's measured error over the
    # distance, 3.5% of the bucket's cost per e-fold: bs 3 -> 4: 0.035 x ln(4/3) x 16 = 0.1611; bs 5 -> 6:
    # 0.035 x ln(6/5) x 25 = 0.1595; measured at both ends (2 -> 4) or no padding (4 -> 4): none
    assert pc.us[:4].tolist() == [5.0, 3.0, 5.0, 0.0] and np.isnan(pc.us[4])
    s34, s56 = 0.035 * np.log(4 / 3) * 16, 0.035 * np.log(6 / 5) * 25
    assert s34 == pytest.approx(0.16110, abs=1e-5) and s56 == pytest.approx(0.15953, abs=1e-5)
    assert pc.low[:4].tolist() == pytest.approx([5.0, 3.0 - s34, 5.0 - s56, 0.0])
    assert pc.high[:4].tolist() == pytest.approx([5.0, 3.0 + s34, 5.0 + s56, 0.0])
    assert pc.measured.tolist() == [True, False, False, True, False]  # both sizes measured: no band


def test_padding_never_costs_less_than_0_where_the_curve_falls() -> None:
    # traced at 2 and 4, the steps at 4 under other conditions (shorter contexts): the curve falls from 2 to 4 (14 ->
    # 12); each traced size's own prediction rises with the rows (from 4: 9, 10, 11, 12, 14, 16)
    c = CostCurve(us=np.array([13.0, 14, 13, 12, 14, 16]), low_us=np.array([12.0, 14, 12, 12, 13, 15]),
                  high_us=np.array([14.0, 14, 14, 12, 15, 17]),
                  source=("model", "trace", "model", "trace", "model", "model"), sample_sizes=(2, 4),
                  sample_us=np.array([[13.0, 14, 15, 16, 18, 20], [9.0, 10, 11, 12, 14, 16]]))
    assert c.own_change(np.array([4, 4, 6]), np.array([3, 2, 5])).tolist()[:2] == [1.0, 2.0]
    assert np.isnan(c.own_change(np.array([6]), np.array([5]))[0])  # 6 was not traced
    pc = padding_cost(c, np.array([4, 4, 6]), np.array([3, 2, 5]))
    # 3 -> 4 and 2 -> 4 on the curve: -1 and -2; on the bucket's own prediction: 12 - 11 and 12 - 10; 5 -> 6 rises
    # on the curve (16 - 14) and keeps it
    assert pc.us.tolist() == [1.0, 2.0, 2.0] and pc.own.tolist() == [True, True, False]
    s34, s24 = 0.035 * np.log(4 / 3) * 12, 0.035 * np.log(4 / 2) * 12
    assert pc.low.tolist() == pytest.approx([max(1.0 - s34, 0.0), max(2.0 - s24, 0.0), 2.0 - 0.035 * np.log(6 / 5) * 16])
    assert pc.high.tolist() == pytest.approx([1.0 + s34, 2.0 + s24, 2.0 + 0.035 * np.log(6 / 5) * 16])
    # 2 -> 4: both sizes traced, but not under the same conditions: not "measured"
    assert pc.measured.tolist() == [False, False, False]
    # a curve without its sizes' own predictions (read back from a fleet summary): never below 0
    bare = padding_cost(replace(c, sample_sizes=(), sample_us=None), np.array([4]), np.array([3]))
    assert bare.us.tolist() == [0.0] and bare.low.tolist() == [0.0] and bare.own.tolist() == [True]


def test_vllm_arrivals_trace_pads_no_bucket_below_0() -> None:
    # vLLM 0.24's arrivals trace (requests arrive during decode): its FULL steps at 8 cost more than at 16 (longer
    # contexts by then); the one step padded 12 -> 16 read -126 us on the curve
    src = REPO / "traces" / "h200-vllm-2026-12-04" / "full-nostack" / "arrivals.pt.trace.json.gz"
    rep = analyze_trace(load_trace(src), AnalysisOptions())
    graph = [st for st in rep.steps if st.padding_us is not None]
    padded = [st for st in graph if st.padded_rows]
    assert len(padded) == 15 and min(st.padding_us_low for st in graph) >= 0.0
    twelve = [st for st in padded if (st.batch_size, st.bucket) == (12, 16)]
    assert len(twelve) == 1 and 0.0 < twelve[0].padding_us < 40.0
    assert rep.summary.padding_own_steps == 1
    assert "1 of them on their bucket's own steps' prediction" in padding_basis(rep.summary)


def _pyfn(name: str, ts: float, dur: float) -> dict:
    return {"ph": "X", "cat": "python_function", "name": name, "pid": HOST_PID, "tid": HOST_TID, "ts": ts,
            "dur": dur, "args": {"Python id": 1}}


def _gap_between_two_graph_steps(tmp_path: Path, ev: list[dict], engine: str | None):
    """Host gaps of ``ev`` (a graph step at 0 and its host ranges) followed by a graph step at 100 us: GPU
    windows [20, 30] and [120, 130] us, so one gap of 90 us."""
    trace = load_trace(write(tmp_path, ev + _graph_step(100.0, "decode_step[bs=4 graph]", 2)))
    steps = find_steps(trace)
    rs = assign_rows_to_steps(trace, steps)
    return host_gaps(trace, rs, steps.cpu_start_ns, np.array([20_000, 120_000]), np.array([30_000, 130_000]),
                     np.array([10.0, 10.0]), engine)


def test_vllm_host_phase_map_innermost_wins(tmp_path: Path) -> None:
    runner = "vllm/v1/worker/gpu_model_runner.py({}): {}"
    ev = _graph_step(0.0, "decode_step[bs=4 graph]", 1)
    # between the steps: the scheduler (10 us), then preprocess (30 us) holding _update_states (5) and
    # _prepare_inputs (15), then an unmapped Python function (ignored once the map names something)
    ev += [_pyfn("vllm/v1/core/sched/scheduler.py(300): schedule", 35.0, 10.0),
           ann("gpu_model_runner: preprocess", 50.0, 30.0),
           _pyfn(runner.format(1, "_update_states"), 52.0, 5.0),
           _pyfn(runner.format(2, "_prepare_inputs"), 60.0, 15.0),
           _pyfn("mylib.py(3): other", 85.0, 5.0)]
    hg = _gap_between_two_graph_steps(tmp_path, ev, "vllm")
    assert hg.source == "engine:vllm"
    assert hg.gap_us.tolist() == [-1.0, 90.0]
    assert hg.phases_us[1] == {"scheduler": 10.0, "preprocess": 10.0, "_update_states": 5.0, "_prepare_inputs": 15.0}
    assert hg.hidden_us.tolist() == [0.0, 10.0]
    # what the profiler recorded in the gap: the four Python calls, no host event (an annotation is not one)
    assert (hg.host_events.tolist(), hg.python_calls.tolist()) == ([0, 0], [0, 4])


def test_top_level_labels_merge_line_numbers(tmp_path: Path) -> None:
    # two top-level Python calls of one function from different lines (12 us and 8 us) and a cpu op of the
    # same text: the line numbers go, so both calls add up under one label; the op keeps its own
    ev = _graph_step(0.0, "decode_step[bs=4 graph]", 1)
    ev += [_pyfn("serve.py(12): schedule", 35.0, 12.0), _pyfn("serve.py(40): schedule", 50.0, 8.0),
           cpu_op("aten::copy_", 70.0, 5.0)]
    hg = _gap_between_two_graph_steps(tmp_path, ev, None)
    assert hg.source == "top-level"
    assert hg.phases_us[1] == {"serve.py: schedule": 20.0, "aten::copy_": 5.0, "cudaGraphLaunch": 3.0}
    # the copy is the one host event of no step in the gap; the next step's graph launch lies in the gap too, but
    # is that step's own (priced with it)
    assert (hg.host_events.tolist(), hg.python_calls.tolist()) == ([0, 1], [0, 2])


def _engine_eager_steps(between: list[dict] | None = None, kdur: float = 1.0) -> list[dict]:
    """Three vLLM-marked eager decode steps of batch 4 at 0, 100, 200 us (:func:`_eager_step`: GPU windows
    [t0 + 10, t0 + 40 + kdur], 4 launches each), with a 20 us CPU op ``schedule`` of no step in the first two gaps,
    plus ``between`` (shifted to each of them)."""
    ev: list[dict] = []
    for k, t0 in enumerate((0.0, 100.0, 200.0)):
        ev += _eager_step(t0, "execute_context_0(0)_generation_4(4)", 10 * k + 1, kdur)
        if k < 2:
            ev += [cpu_op("schedule", t0 + 60.0, 20.0)] + [dict(e, ts=e["ts"] + t0) for e in between or []]
    return ev


def test_engine_eager_tpot_holds_the_host_work_between_steps(tmp_path: Path) -> None:
    model = PredictionModel(profiler_us_per_host_event=2.0)
    rep = analyze_trace(load_trace(write(tmp_path, _engine_eager_steps())), AnalysisOptions(model=model))
    s = rep.summary
    assert (rep.mode, s.step_source, s.step_groups[0]["graph_coverage"]) == ("eager", "engine", "eager")
    # gaps [41, 110] and [141, 210]: 69 us, less 2 us for the one host event of no step in each
    assert [st.inter_step_host_us for st in rep.steps] == [None, 69.0, 69.0]
    assert [st.inter_step_host_unprofiled_us for st in rep.steps] == [None, 67.0, 67.0]
    assert (s.inter_step_host_us_median, s.inter_step_host_us_unprofiled_median) == (69.0, 67.0)
    # the step: window 31 us less 4 launches x 2 us = 23 us; its FULL graph 4 x 1 us busy + 4 x 0.34 + 3 = 8.36 us.
    # TPOT before: the engine's step, 23 + 67 = 90 us; after: the graph step, the host work between steps hidden
    # behind the replay up to its length: max(8.36, 67) = 67 us
    assert (s.estimated_unprofiled_step_us_median, s.predicted_graph_step_us_median) == (23.0, 8.36)
    assert (s.decode_tpot_ms_before, s.decode_tpot_ms_after, s.decode_tpot_between_steps_us) == (0.09, 0.067, 67.0)
    assert s.decode_tokens_per_s_before == pytest.approx(4e6 / 90.0, abs=1e-3)
    # the headline speaks for the same whole steps (rule "whole step"): 90 / 67, not the windows' 23 / 8.36 = 2.75x
    assert (s.predicted_speedup_rule, s.whole_step_us_before, s.whole_step_us_after) == ("whole step", 90.0, 67.0)
    assert (s.predicted_speedup, s.predicted_speedup_low, s.predicted_speedup_high) == (1.343, 1.343, 1.343)
    assert s.step_groups[0]["predicted_speedup"] == 1.343
    assert ("CUDA graphs predicted to take the engine's whole step from 90 us to 67 us (GPU windows 23 -> 8 us; the "
            "rest between steps): 1.34x (range 1.34-1.34x)") in s.verdict_detail
    assert ("keeps 67 us (67 us between steps: scheduling, input preparation, sampling; async scheduling hides its host "
            "work behind a graph's replay)") in s.verdict_detail
    text = render_trace(rep)
    assert ("8.4 us -> speedup 1.34x (on the engine's whole step: 90 -> 67 us, the time between steps included; "
            "1.34-1.34x; estimated eager step; ") in text
    # the TPOT line does not say the ratio a second time
    assert ("0.09 ms -> 0.07 ms with CUDA graphs; 44,444 -> 59,701 tokens/s at batch 4; the engine's whole step: 67 us "
            "between the steps' GPU work included, whose host work async scheduling hides behind a graph's replay\n") \
        in text
    # a measured step is the engine's whole step: nothing added, and the graph step no longer than it (max(8.36, 67)
    # = 67 us of whole step capped at the measured 50 us): 1.00x
    measured_rep = with_observed_step(rep, 50.0)
    measured = measured_rep.summary
    assert (measured.decode_tpot_ms_before, measured.decode_tpot_between_steps_us) == (0.05, 0.0)
    assert (measured.predicted_speedup, measured.whole_step_us_before, measured.whole_step_us_after) == (1.0, 50.0, 50.0)
    assert with_observed_step(measured_rep, None).summary == s  # the estimate back, exactly
    # measured 120 us: 120 / 67; the host time a graph removes is the step's, the 67 us between steps kept apart:
    # 120 - 67 - 8.36 = 44.64 us (the estimate's 23 - 8.36 = 14.64)
    longer = with_observed_step(rep, 120.0).summary
    assert (longer.predicted_speedup, longer.whole_step_us_after) == (round(120 / 67, 3), 67.0)
    assert (longer.graph_removes_host_us_per_step, s.graph_removes_host_us_per_step) == (44.64, 14.64)
    assert longer.step_groups[0]["graph_removes_host_us_per_step"] == 44.64
    assert "a FULL graph removes 45 us of host time per step; keeps 67 us" in longer.verdict_detail
    # the same steps under markers of no engine (a harness's steps, timed alone): the step itself
    plain = [dict(e, name="decode_step[bs=4 eager]") if e["name"].startswith("execute_context") else e
             for e in _engine_eager_steps()]
    other = analyze_trace(load_trace(write(tmp_path, plain, name="plain.json")), AnalysisOptions(model=model)).summary
    assert (other.step_source, other.decode_tpot_ms_before, other.decode_tpot_between_steps_us) == \
        ("annotation", 0.023, 0.0)


def test_the_plan_prices_an_engines_whole_steps(tmp_path: Path) -> None:
    # the eager engine steps above: the plan from the trace alone prices bs 4's eager step as the TPOT does, 23 + 67 =
    # 90 us; its graph step is not floored at the eager trace's host gap (one host measurement would flatten every
    # size's graph cost): 8.36 us. A note says so; the Diagnosis's planner line agrees
    from launchgap.planning.request import PlanRequest, build_plan, trace_steps, traces_input
    rep = analyze_trace(load_trace(write(tmp_path, _engine_eager_steps())),
                        AnalysisOptions(model=PredictionModel(profiler_us_per_host_event=2.0)))
    plan = build_plan(PlanRequest((traces_input([trace_steps(rep)], "w"),)))[0].to_dict()
    pts = {p["batch_size"]: (p["eager_us"], p["graph_us"]) for p in plan["costs"]["points"]}
    assert pts[4] == (90.0, 8.36)
    # the other sizes' eager steps follow the trace's eager curve, met at bs 4: flat here (a host-bound step)
    assert sorted(pts) == list(range(1, 513)) and {e for e, _ in pts.values()} == {90.0}
    assert (plan["expected_step_us"], plan["all_eager_expected_step_us"]) == (8.36, 90.0)
    assert rep.summary.planner_comparison["expected_step_us"] == 8.36
    assert (f"costs are the engine's whole steps ({tmp_path / 't.json'}): an eager step waits through the whole 67 us "
            "between steps (its host work, unprofiled), which a graph step hides behind its replay (async "
            "scheduling)") in plan["costs"]["warnings"]


def test_gpu_work_between_steps_is_neither_idle_nor_the_profilers(tmp_path: Path) -> None:
    # steps of 4 x 5 us kernels (windows [t0 + 10, t0 + 45], busy 20 us); a kernel of no step in each gap (an engine
    # sampling after its step marker ends): launched at t0 + 50.5, it runs 56 us from t0 + 52. The profiler priced at
    # 40 us per host event (the schedule op and the launch: 80 us)
    ev = _engine_eager_steps([launch(50.5, 1.0, 900), kernel(52.0, 56.0, 900, name="sample")], kdur=5.0)
    for k, e in enumerate(x for x in ev if x.get("args", {}).get("correlation") == 900):
        e["args"] = {**e["args"], "correlation": 900 + k // 2}  # one id per launch and its kernel
    rep = analyze_trace(load_trace(write(tmp_path, ev)),
                        AnalysisOptions(model=PredictionModel(profiler_us_per_host_event=40.0)))
    s = rep.summary
    assert [st.inter_step_host_us for st in rep.steps] == [None, 65.0, 65.0]
    assert [st.inter_step_gpu_busy_us for st in rep.steps] == [None, 56.0, 56.0]
    # 65 - 2 x 40 is below the GPU work in the gap: the gap without the profiler is that work, 56 us
    assert [st.inter_step_host_unprofiled_us for st in rep.steps] == [None, 56.0, 56.0]
    assert (s.inter_step_gpu_busy_us_median, s.inter_step_host_us_unprofiled_median) == (56.0, 56.0)
    # the async what-if hides the gap's idle part at most (65 - 56 = 9 us; the previous step's GPU busy is 20 us)
    assert s.async_hidden_us_per_step == 9.0
    assert "65.0 us median between steps' GPU work (56.0 us without the profiler; GPU work of no step 56.0 us of it)" \
        in render_trace(rep)
    # TPOT: the step (window 35 us less 4 x 40 us, at least its 20 us busy) and the 56 us between; with graphs the
    # graph step (no longer than the step it replaces: 20 us) and the GPU work between steps, at least the whole gap
    assert (s.estimated_unprofiled_step_us_median, s.predicted_graph_step_us_median) == (20.0, 20.0)
    assert (s.decode_tpot_ms_before, s.decode_tpot_ms_after, s.decode_tpot_between_steps_us) == (0.076, 0.076, 56.0)
    # the headline is that whole step's ratio: 76 / 76 (the windows' 20 / 20 alike)
    assert (s.predicted_speedup_rule, s.whole_step_us_before, s.whole_step_us_after, s.predicted_speedup) == \
        ("whole step", 76.0, 76.0, 1.0)


def test_graph_steps_tpot_holds_the_gpu_work_between_steps(tmp_path: Path) -> None:
    # three vLLM-marked FULL-graph decode steps (10 x 1 us kernels, replay 10 us busy) 100 us apart, a kernel of no
    # step (sampling after the marker) of 30 us in each gap, and a host op between them
    ev: list[dict] = []
    for k, t0 in enumerate((0.0, 100.0, 200.0)):
        ev += _graph_step(t0, "execute_context_0(0)_generation_4(4)", k + 1)
        if k < 2:
            ev += [cpu_op("schedule", t0 + 60.0, 20.0), launch(t0 + 52.0, 2.0, 50 + k),
                   kernel(t0 + 55.0, 30.0, 50 + k, name="sample")]
    rep = analyze_trace(load_trace(write(tmp_path, ev)), AnalysisOptions(model=NO_PROFILER_COST))
    s = rep.summary
    assert (rep.mode, s.step_source, s.step_groups[0]["graph_coverage"]) == ("graph", "engine", "full")
    # windows [t0 + 20, t0 + 30]: gaps of 90 us, 30 of them GPU work
    assert [st.inter_step_gpu_busy_us for st in rep.steps] == [None, 30.0, 30.0]
    # the step is its FULL replay (10 us, all FULL: after = before); the engine's step adds the 30 us of sampling,
    # not the host work between steps (async scheduling overlaps it with the replay)
    assert s.estimated_unprofiled_step_us_median == 10.0
    assert (s.decode_tpot_ms_before, s.decode_tpot_ms_after, s.decode_tpot_between_steps_us) == (0.04, 0.04, 30.0)
    # steps already one FULL graph each keep their rule and 1.00x; their whole step is 40 us on both sides
    assert (s.predicted_speedup_rule, s.predicted_speedup, s.whole_step_us_before, s.whole_step_us_after) == \
        ("all FULL", 1.0, 40.0, 40.0)
    assert "0.04 ms -> 0.04 ms as one FULL graph; 100,000 -> 100,000 tokens/s at batch 4; the engine's whole step: 30 us " \
        "between the steps' GPU work included (GPU work of no step)\n" in render_trace(rep)


def test_decode_time_headline_keeps_its_sums_and_the_tpot_its_whole_step(tmp_path: Path) -> None:
    # three vLLM-marked FULL-graph decode steps at bs 4 with 30 us of sampling after each marker, then an eager step at
    # bs 2 that a captured size (4) fits: a fallback, so the headline is the decode time's sums (rule "decode time"),
    # which the whole-step rule leaves alone; the TPOT is still the engine's whole step, the FULL steps' 10 us replay
    # and the 30 us of GPU work between steps on both sides
    ev: list[dict] = []
    for k, t0 in enumerate((0.0, 100.0, 200.0)):
        ev += _graph_step(t0, "execute_context_0(0)_generation_4(4)", k + 1)
        ev += [launch(t0 + 52.0, 2.0, 50 + k), kernel(t0 + 55.0, 30.0, 50 + k, name="sample")]
    ev += _eager_step(300.0, "execute_context_0(0)_generation_2(2)", 10, 1.0)
    rep = analyze_trace(load_trace(write(tmp_path, ev)), AnalysisOptions(model=NO_PROFILER_COST, capture_sizes=(4,)))
    s = rep.summary
    assert (s.fallback_steps, s.predicted_speedup_rule) == ([3], "decode time")
    assert s.predicted_speedup == pytest.approx(s.decode_us_as_run / s.decode_us_full_graph, abs=1e-3)
    assert (s.whole_step_us_before, s.whole_step_us_after) == (40.0, 40.0)
    assert (s.decode_tpot_ms_before, s.decode_tpot_ms_after, s.decode_tpot_between_steps_us) == (0.04, 0.04, 30.0)
    # the groups keep their own figures: the FULL group's whole step is the summary's, no group reads "whole step"
    assert [g.get("whole_step_us_before") for g in s.step_groups] == [0.0, 0.0]


def test_python_calls_between_steps_are_priced(tmp_path: Path) -> None:
    # with Python stacks: two Python calls in each gap, and a CPU op inside the next step's marker (its own)
    ev = _engine_eager_steps([_pyfn("vllm/v1/core/sched/scheduler.py(300): schedule", 45.0, 10.0),
                              _pyfn("vllm/v1/engine/core.py(9): step", 85.0, 5.0)])
    rep = analyze_trace(load_trace(write(tmp_path, ev)))
    s = rep.summary
    k, py = s.profiler_overhead_us_per_event, s.profiler_python_call_us
    assert py > 0 and k > 0  # the stack tier: Python calls are priced
    # 69 us less one host event and the calls past 0.25 per host event: 2 - 0.25 = 1.75 calls
    want = max(69.0 - k - 1.75 * py, 0.0)
    assert want == pytest.approx(4.551, abs=1e-3)  # 2.149 us per event, 35.6 us per call (a 20 us host reference)
    assert [st.inter_step_host_unprofiled_us for st in rep.steps] == [None, pytest.approx(want, abs=1e-3),
                                                                      pytest.approx(want, abs=1e-3)]
    assert s.decode_tpot_between_steps_us == pytest.approx(want, abs=1e-3)


def test_padding_basis_says_no_batch_padded_and_an_assumed_list() -> None:
    from types import SimpleNamespace
    s = SimpleNamespace(padding_cost_source="trace", padded_rows_fraction=0.0, capture_sizes_source="markers")
    assert padding_basis(s) == "no batch was padded: every graph step ran at its own size"
    s.capture_sizes_source = "default"  # the engine's default list, which the trace does not state
    assert padding_basis(s) == ("no batch was padded: every graph step ran at its own size; on the assumed capture "
                                "list (the engine's default, which the trace does not state): another list pads other "
                                "batches")
    s.padded_rows_fraction = 0.25
    assert padding_basis(s).startswith("measured: every padded batch and bucket has its own cost, from trace; on the "
                                       "assumed capture list")
    # the real vLLM V1 FULL-graph trace (MI300X, one step at bs 32, no capture list stated): the default assumed
    from tests.conftest import TRACES
    rep = analyze_trace(load_trace(TRACES / "engines" / "tracelens-vllm-decode-fullgraph-mi300x" /
                                   "graph_execution.json.gz"))
    assert rep.summary.capture_sizes_source == "default"
    assert padding_basis(rep.summary).startswith("no batch was padded") and "assumed capture list" in \
        padding_basis(rep.summary)


def test_host_ahead_of_the_previous_steps_gpu_work_says_async_scheduling_is_on(tmp_path: Path) -> None:
    from launchgap.host_gaps import host_ahead

    trace = load_trace(write(tmp_path, _graph_step(0.0, "decode_step[bs=4 graph]", 1)
                             + _graph_step(100.0, "decode_step[bs=4 graph]", 2)))
    w1 = np.array([30_000, 130_000])
    # the second step's host work began at 25 us, before the first step's GPU work ended at 30 us: ahead
    assert host_ahead(np.array([0, 25_000]), w1).tolist() == [False, True]
    # at 100 us, after it: a loop that waited for the GPU
    assert host_ahead(np.array([0, 100_000]), w1).tolist() == [False, False]
    # the report counts them: this trace's second step begins at 100 us, after the first's GPU work
    assert analyze_trace(trace).summary.host_ahead_steps == 0
    assert async_scheduling_text(1, 2, 8.0) == (
        "already on: 1 of 2 steps' host work began before the previous step's GPU work ended; the GPU idle left "
        "between steps is host work longer than the GPU's step (under the profiler's cost), which overlapping "
        "cannot hide")
    assert async_scheduling_text(0, 2, 8.0) == \
        "overlapping the host work with the GPU (async scheduling) would hide up to 8.0 us per step"


def test_host_ahead_per_step_and_device() -> None:
    from launchgap.host_gaps import host_ahead

    cpu0 = np.array([0, 25, 100, 110, -1])
    w1 = np.array([30, 60, 130, 140, 150])
    # step 1 began at 25 < 30 (ahead); step 2 at 100 >= 60; step 3 at 110 < 130; step 4's CPU start unknown
    assert host_ahead(cpu0, w1).tolist() == [False, True, False, True, False]
    # step 3 on another device than step 2: not ahead of it
    assert host_ahead(cpu0, w1, np.array([0, 0, 0, 1, 1])).tolist() == [False, True, False, False, False]


def test_a_server_logs_list_is_the_traces_where_none_is_given(tmp_path: Path) -> None:
    """The list a server log states (``AnalysisOptions.log_capture``) is the one a trace of the log's engine is analysed
    under, above the engine's default; a log of another engine says nothing of this server; a given list wins."""
    trace = load_trace(write(tmp_path, _engine_eager_steps()))  # vLLM-marked eager decode steps of batch 4
    logged = CaptureSettings("vllm", (2,), 2, None, False, ("vLLM log vllm.log: capture sizes [2]",))
    default = analyze_trace(trace, AnalysisOptions()).summary
    assert default.capture_sizes_source == "default" and 4 in default.capture_sizes
    s = analyze_trace(trace, AnalysisOptions(log_capture=logged)).summary
    assert (s.capture_sizes, s.capture_sizes_source, s.capture_sizes_detail) == (
        [2], "config", "vLLM log vllm.log: capture sizes [2]")
    assert "given: vLLM log vllm.log: capture sizes [2]" in render_trace(analyze_trace(trace, AnalysisOptions(
        log_capture=logged)))
    other = analyze_trace(trace, AnalysisOptions(log_capture=replace(logged, engine="sglang"))).summary
    assert other.capture_sizes_source == "default"
    given = analyze_trace(trace, AnalysisOptions(log_capture=logged, capture_sizes=(4, 8))).summary
    assert (given.capture_sizes, given.capture_sizes_source) == ([4, 8], "flag")
