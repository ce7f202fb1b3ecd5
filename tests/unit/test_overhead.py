"""The profiler's cost: settings detection, overhead per host event, speedup range, refit (exact numbers)."""
from __future__ import annotations

import json
from dataclasses import replace

import numpy as np
import pytest

from launchgap.loaders import load_trace
from launchgap.overhead import (
    DEFAULT_OVERHEAD, OverheadRate, OverheadTable, Recording, detect_profiler_settings, estimate_overhead,
    evaluate, evaluate_leave_one_out, fit_overhead, score, speedup_range, table_as_python,
)
from launchgap.overhead_fit import main as fit_main
from launchgap.predict import PredictionModel
from launchgap.report import AnalysisOptions, analyze_trace, with_observed_step
from tests.unit.kineto_tiny import HOST_PID, HOST_TID, ann, cpu_op, kernel, launch, runtime, write

DIMS = [[2, 8]]


def events(dims: list | None = DIMS) -> list[dict]:
    """One step [0, 200] (us) of four cpu_ops and two launches: 6 host events.

    aten::linear [1, 21] holds launch 1 [5, 9] -> k1 [10, 20]; aten::view [22, 23] and aten::empty
    [24, 27] are leaves (nothing inside): host reference = median(1, 3) = 2 us. aten::add
    [100, 140] holds launch 2 [105, 110] -> k2 [150, 160]. GPU window [10, 160] = 150 us, busy 20.
    Predicted graph step: 20 + 0.34 x 2 short kernels + 3 = 23.68 us.
    """
    return [ann("decode_step[bs=2]", 0, 200),
            cpu_op("aten::linear", 1, 20, dims), launch(5, 4, 1), kernel(10, 10, 1, name="k1"),
            cpu_op("aten::view", 22, 1, dims), cpu_op("aten::empty", 24, 3, dims),
            cpu_op("aten::add", 100, 40, dims), launch(105, 5, 2), kernel(150, 10, 2, name="k2")]


def python_function(ts: float, dur: float) -> dict:
    return {"ph": "X", "cat": "python_function", "name": "model.py(12): forward", "pid": HOST_PID, "tid": HOST_TID,
            "ts": ts, "dur": dur}


def memory_event(ts: float) -> dict:
    return {"ph": "i", "cat": "cpu_instant_event", "name": "[memory]", "pid": HOST_PID, "tid": HOST_TID, "ts": ts,
            "s": "t", "args": {"Bytes": 512}}


def settings_of(tmp_path, evs, **extra):
    return detect_profiler_settings(load_trace(write(tmp_path, evs, **extra)))


# --- detection ------------------------------------------------------------------------------------

def test_shapes_from_input_dims_and_host_reference(tmp_path) -> None:
    s = settings_of(tmp_path, events())
    assert s.tier == "shapes" and s.record_shapes is True and s.with_stack is False
    assert (s.cpu_ops, s.runtime_calls) == (4, 2)
    assert s.host_ref_us == 2.0  # leaves aten::view (1 us) and aten::empty (3 us)
    assert "Input Dims on 100% of 4 cpu_ops" in s.evidence


def test_plain_without_dims(tmp_path) -> None:
    s = settings_of(tmp_path, events(dims=None))
    assert s.tier == "plain" and s.record_shapes is False and s.with_stack is False


def test_metadata_flags_win(tmp_path) -> None:
    # torch.profiler writes its settings at the top level; "1" and 1 both mean on.
    s = settings_of(tmp_path, events(dims=None), record_shapes="1", with_stack=1)
    assert s.tier == "shapes+stack" and s.record_shapes is True and s.with_stack is True
    assert "record_shapes on (trace metadata)" in s.evidence and "with_stack on (trace metadata)" in s.evidence


def test_json_booleans_as_flags_read_too(tmp_path) -> None:
    # A trace re-saved by Python's json carries true/false: read as the flags, not refused as "not a Kineto trace".
    s = settings_of(tmp_path, events(dims=None), record_shapes=False, with_stack=True)
    assert s.tier == "stack" and s.record_shapes is False and s.with_stack is True
    assert "with_stack on (trace metadata)" in s.evidence


def test_python_function_events_mean_stacks(tmp_path) -> None:
    s = settings_of(tmp_path, events(dims=None) + [python_function(1, 5), python_function(100, 3)])
    assert s.tier == "stack" and s.with_stack is True and s.record_shapes is False
    assert "2 python_function events" in s.evidence


def test_call_stack_args_mean_stacks(tmp_path) -> None:
    evs = events()
    evs[1]["args"]["Call stack"] = "model.py(12): forward;main.py(3): <module>"
    assert settings_of(tmp_path, evs).tier == "shapes+stack"


def test_memory_events_raise_the_high_end(tmp_path) -> None:
    s = settings_of(tmp_path, events() + [memory_event(24)])
    assert s.profile_memory is True and s.tier == "shapes"
    est = estimate_overhead(s)
    assert (est.us_per_event, est.low, est.high) == (6.5832, 4.366, pytest.approx(8.322 * 1.3))


def test_runtime_calls_only_is_cupti(tmp_path) -> None:
    evs = [e for e in events() if e.get("cat") != "cpu_op"]
    s = settings_of(tmp_path, evs)
    assert s.tier == "cupti" and s.host_ref_us is None and s.record_shapes is None
    est = estimate_overhead(s)
    assert (est.us_per_event, est.low, est.high) == (0.8, 0.4, 1.4)


# --- overhead, estimate and range in the report ------------------------------------------------------

def test_shapes_rate_scales_with_the_host_reference(tmp_path) -> None:
    est = estimate_overhead(settings_of(tmp_path, events()))
    # shapes: 3.2916 (2.183-4.161) x the 2 us host reference
    assert (est.us_per_event, est.low, est.high) == (6.5832, 4.366, 8.322)


def test_report_summary_numbers(tmp_path) -> None:
    s = analyze_trace(load_trace(write(tmp_path, events()))).summary
    assert s.profiler_settings["tier"] == "shapes" and s.profiler_settings["host_ref_us"] == 2.0
    # the ratio model: share 0.3339 (0.2983-0.5423) of the 150 us step over its 6 host events = 8.3475 us
    # (7.4575-13.5575) per event; the range spans it and the host-reference rate's 4.366-8.322 us
    assert (s.profiler_overhead_us_per_event, s.profiler_overhead_us_per_event_low,
            s.profiler_overhead_us_per_event_high) == (8.348, 4.366, 13.557)
    assert s.step_us_median == 150.0 and s.gpu_busy_us_median == 20.0
    assert s.predicted_graph_step_us_median == pytest.approx(23.68)
    assert s.estimated_unprofiled_step_us_median == pytest.approx(99.915, abs=1e-3)  # 0.6661 x 150
    assert s.estimated_unprofiled_step_us_low == pytest.approx(68.655, abs=1e-3)  # 150 - 13.5575 x 6
    assert s.estimated_unprofiled_step_us_high == pytest.approx(123.804, abs=1e-3)  # 150 - 4.366 x 6
    assert s.predicted_speedup == pytest.approx(99.915 / 23.68, abs=1e-3)
    assert s.predicted_speedup_low == pytest.approx(68.655 / (23.68 * 1.031), abs=1e-3)
    assert s.predicted_speedup_high == pytest.approx(123.804 / (23.68 * 0.969), abs=1e-3)
    assert s.eager_step_source == "estimated"
    assert "150 us profiled less 8.35 us (4.37-13.6) per recorded host event for the profiler (record_shapes)" \
        in s.verdict_detail
    assert s.profiler_settings["overhead_source"].startswith("ratio model, fitted: 9 same-process H200")
    assert s.profiler_settings["notes"][0].startswith("ratio model: unprofiled step = 0.6661 x the profiled step")


def test_one_events_cost_anywhere_is_the_rate_not_the_share(tmp_path) -> None:
    """The ratio model's per-event figure is a share of the step spread over its events; the cost of one event
    wherever it falls (between two eager launches) is that figure at most the host-reference rate's point."""
    settings = settings_of(tmp_path, events())
    est = estimate_overhead(settings, step_us=150.0, host_events=6.0)
    assert est.us_per_event == 8.3475  # 0.3339 x 150 / 6
    assert est.event_rate_us == est.us_per_event_anywhere == 6.5832  # shapes: 3.2916 x the 2 us host reference
    # a share below the rate stands: 0.3339 x 30 / 6
    assert estimate_overhead(settings, step_us=30.0, host_events=6.0).us_per_event_anywhere == 1.6695
    # the rate alone (no step): the same figure both ways
    rate_only = estimate_overhead(settings)
    assert rate_only.event_rate_us is None and rate_only.us_per_event_anywhere == rate_only.us_per_event == 6.5832
    assert estimate_overhead(settings, override_us=2.0).us_per_event_anywhere == 2.0  # the user's figure stands


def test_plain_ratio_model_numbers(tmp_path) -> None:
    s = analyze_trace(load_trace(write(tmp_path, events(dims=None)))).summary
    # plain: share 0.235 (0.2097-0.2633) x 25 us per event = 5.875 (5.2425-6.5825); ref rate 2.2185
    # (1.9022-2.6186) x 2 us = 4.437 (3.8044-5.2372): range 3.8044-6.5825
    assert (s.profiler_overhead_us_per_event, s.profiler_overhead_us_per_event_low,
            s.profiler_overhead_us_per_event_high) == (5.875, 3.804, 6.582)
    assert s.estimated_unprofiled_step_us_median == pytest.approx(114.75)  # 0.765 x 150


def test_ratio_model_point_and_union_range() -> None:
    t = OverheadTable(rates=(OverheadRate("shapes", 2.0, 1.0, 3.0, "x", "ref"),),
                      shares=(OverheadRate("shapes", 0.3, 0.2, 0.5, "y", "share"),))
    # 1000 us over 100 events: share 0.3 -> 3 us (2-5); ref rate x 1.5 us: 3 (1.5-4.5)
    assert t.per_event_us("shapes", 1.5, 1000.0, 100.0) == (3.0, 1.5, 5.0)
    assert t.per_event_us("shapes", 1.5) == (3.0, 1.5, 4.5)  # no step: the rate alone
    assert t.share("plain") is None and t.share("shapes").value == 0.3


def test_stack_tier_in_us(tmp_path) -> None:
    s = analyze_trace(load_trace(write(tmp_path, events(), with_stack=1))).summary
    assert s.profiler_overhead_us_per_event == 2.45
    assert s.estimated_unprofiled_step_us_median == pytest.approx(150 - 2.45 * 6)


def test_user_figure_overrides_the_estimate(tmp_path) -> None:
    opts = AnalysisOptions(model=PredictionModel(profiler_us_per_host_event=2.0))
    s = analyze_trace(load_trace(write(tmp_path, events())), opts).summary
    assert s.estimated_unprofiled_step_us_median == 138.0  # 150 - 2 x 6
    assert s.profiler_settings["overhead_source"] == "given by the user"


def test_never_below_gpu_busy(tmp_path) -> None:
    opts = AnalysisOptions(model=PredictionModel(profiler_us_per_host_event=100.0))
    s = analyze_trace(load_trace(write(tmp_path, events())), opts).summary
    assert s.estimated_unprofiled_step_us_median == 20.0  # 150 - 600 -> busy 20


def test_measured_step_replaces_the_estimate(tmp_path) -> None:
    rep = analyze_trace(load_trace(write(tmp_path, events())))
    m = with_observed_step(rep, 100.0).summary
    assert m.eager_step_source == "measured" and m.observed_step_us == 100.0
    assert m.predicted_speedup == pytest.approx(100 / 23.68, abs=1e-3)
    # the range is the graph step's band alone: +-3.1%
    assert m.predicted_speedup_low == pytest.approx(100 / (23.68 * 1.031), abs=1e-3)
    assert m.predicted_speedup_high == pytest.approx(100 / (23.68 * 0.969), abs=1e-3)
    assert m.estimated_profiler_inflation == 1.5
    assert "eager step measured: 100 us observed (150 us profiled)" in m.verdict_detail
    back = with_observed_step(with_observed_step(rep, 100.0), None).summary
    assert back == rep.summary


def test_speedup_range_arithmetic() -> None:
    r = speedup_range(100.0, 90.0, 110.0, 50.0, 0.1)
    assert (r.speedup, r.speedup_low, r.speedup_high) == (2.0, pytest.approx(90 / 55), pytest.approx(110 / 45))


# --- refit --------------------------------------------------------------------------------------------

def rec(eager_us: float, ref: float, name: str = "r") -> Recording:
    """Profiled 1000 us with 100 host events; graph predicted and measured 100 us."""
    return Recording(name=name, tier="shapes", settings="shapes", profiled_step_us=1000.0, host_events=100.0,
                     busy_us=100.0, predicted_graph_us=100.0, eager_us=eager_us, graph_us=100.0, host_ref_us=ref)


RECS = [rec(800.0, 1.0, "a"), rec(700.0, 1.5, "b"), rec(900.0, 0.5, "c")]  # implied 2, 3, 1 us = 2x the reference


def test_fit_in_us_and_in_host_reference_units() -> None:
    t = fit_overhead(RECS, DEFAULT_OVERHEAD, coverage=0.8, unit="us").rate("shapes")
    # median, and the prediction interval of 3 values: below 9 the minimum to the maximum
    assert (t.value, t.low, t.high, t.unit) == (2.0, 1.0, 3.0, "us")
    r = fit_overhead(RECS, DEFAULT_OVERHEAD, coverage=0.8, unit="ref").rate("shapes")
    assert (r.value, r.low, r.high, r.unit) == (2.0, 2.0, 2.0, "ref")
    assert fit_overhead(RECS, DEFAULT_OVERHEAD).graph_rel_err == 0.0
    assert fit_overhead(RECS, DEFAULT_OVERHEAD).rate("plain") == DEFAULT_OVERHEAD.rate("plain")  # no recording


def test_score_and_evaluations() -> None:
    ref_table = fit_overhead(RECS, DEFAULT_OVERHEAD, unit="ref")
    s = score(RECS[1], ref_table)
    assert (s.us_per_event, s.eager_est_us, s.eager_err) == (3.0, 700.0, 0.0)
    assert (s.speedup_pred, s.speedup_measured, s.speedup_err, s.in_range) == (7.0, 7.0, 0.0, True)
    us_table = fit_overhead(RECS, DEFAULT_OVERHEAD, unit="us")
    assert score(RECS[1], us_table).eager_err == pytest.approx(800 / 700 - 1)
    ev = evaluate(RECS, ref_table, "ref")
    assert (ev.median_abs_err, ev.worst_abs_err, ev.coverage, ev.n_speedup) == (0.0, 0.0, 1.0, 3)
    loo = evaluate_leave_one_out(RECS, DEFAULT_OVERHEAD, unit="us")
    # a: fitted on b, c (3 and 1 us: median 2) -> exact; b: on a, c (2, 1: 1.5) -> 850 vs 700
    assert [round(x.eager_est_us, 6) for x in loo.scored] == [800.0, 850.0, 750.0]


def test_ref_rate_without_leaf_ops_uses_the_typical_reference() -> None:
    t = OverheadTable(rates=(OverheadRate("shapes", 2.0, 1.0, 3.0, "x", "ref"),), typical_ref_us=0.5)
    assert t.rate("shapes").in_us(None, t.typical_ref_us) == (1.0, 0.5, 1.5)
    assert t.rate("shapes").in_us(2.0, t.typical_ref_us) == (4.0, 2.0, 6.0)


def test_fit_share_and_ratio_plus_ref() -> None:
    # shares of the profiled 1000 us: 0.2, 0.3, 0.1 -> median 0.2, range their minimum to maximum
    r = fit_overhead(RECS, DEFAULT_OVERHEAD, unit="share").rate("shapes")
    assert (r.value, r.low, r.high, r.unit) == (0.2, 0.1, 0.3, "share")
    assert fit_overhead(RECS, DEFAULT_OVERHEAD, unit="ref").shares == ()  # one model alone
    both = fit_overhead(RECS, DEFAULT_OVERHEAD, unit="ratio+ref")
    assert both.rate("shapes").unit == "ref" and both.share("shapes") == r and both.share("plain") is None
    s = score(RECS[1], both)  # share 0.2 -> 2 us per event (range: 1-3 share, 3 us ref -> 1-3)
    assert (s.us_per_event, s.eager_est_us, s.speedup_pred) == (2.0, 800.0, 8.0)
    assert (s.speedup_low, s.speedup_high, s.in_range) == (7.0, 9.0, True)
    loo = evaluate_leave_one_out(RECS, DEFAULT_OVERHEAD, unit="share")
    # a: on b, c (0.3, 0.1: 0.2) -> 800; b: on a, c (0.2, 0.1: 0.15) -> 850; c: on a, b (0.25) -> 750
    assert [round(x.eager_est_us, 6) for x in loo.scored] == [800.0, 850.0, 750.0]
    exec_ns: dict = {"OverheadTable": OverheadTable, "OverheadRate": OverheadRate}
    exec(table_as_python(both), exec_ns)  # the pasteable table is the table
    assert exec_ns["DEFAULT_OVERHEAD"] == both


def test_ratio_model_never_below_gpu_busy() -> None:
    gpu_bound = replace(RECS[0], busy_us=900.0)
    s = score(gpu_bound, fit_overhead(RECS, DEFAULT_OVERHEAD, unit="ratio+ref"))
    assert s.eager_est_us == 900.0  # 0.8 x 1000 = 800 -> busy 900
    m = PredictionModel()  # default: the shapes tier's ratio model, each step x 0.6661, at least busy
    assert m.unprofiled_step_us(np.array([150.0, 150.0]), np.array([6.0, 6.0]), np.array([20.0, 120.0])).tolist() \
        == [pytest.approx(99.915), 120.0]


def test_fit_command_on_a_same_process_recording(tmp_path, capsys) -> None:
    (tmp_path / "traces").mkdir()
    write(tmp_path / "traces", events(), name="tiny_bs2_eager_shapes.json")  # found in a folder below
    doc = {"schema": "launchgap.timings/1", "rows": [{"model": "tiny", "batch_size": 2, "graph_us": 30.0}],
           "profiled_vs_unprofiled": [  # the harness's layout (analyzer/timings.py)
               {"model": "tiny", "batch_size": 2, "profiler": "shapes", "unprofiled_eager_us_before": 120.0,
                "unprofiled_eager_us_after": 124.0, "unprofiled_graph_us": 25.0,
                "trace": "tiny_bs2_eager_shapes.json"},
               {"model": "tiny", "batch_size": 2, "profiler": "stack", "unprofiled_eager_us_before": 120.0,
                "unprofiled_eager_us_after": 124.0, "unprofiled_graph_us": 25.0, "trace": None}]}  # no trace kept
    (tmp_path / "timings.json").write_text(json.dumps(doc))
    assert fit_main(["fit", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    # eager 122 (mean of 120 and 124) over the record's graph step 25 us: 4.88x measured; implied (150-122)/6
    rows = [line for line in out.splitlines() if line.startswith(f"{tmp_path.name}/tiny bs2")]
    assert len(rows) == 1
    assert "shapes [shapes]" in rows[0] and "4.88x" in rows[0] and "4.67" in rows[0]
    assert "OverheadRate('shapes'" in out
    assert "ratio+ref, leave-one-out: speedup error median" in out and "shares=(" in out


def test_fit_command_refuses_a_folder_without_timings(tmp_path, capsys) -> None:
    assert fit_main(["fit", str(tmp_path)]) == 2
    assert "no timings.json, truth.json, timings_overhead.json in this folder" in capsys.readouterr().err


def test_the_range_is_a_prediction_interval_for_the_next_recording() -> None:
    """Order statistics k and n + 1 - k, k = floor((n + 1)(1 - coverage) / 2): they hold a new value with
    probability (n + 1 - 2k) / (n + 1); below 9 values the range is the minimum to the maximum."""
    from launchgap.overhead import _band
    assert _band(np.array([5.0, 1.0, 3.0, 2.0, 4.0]), 0.8) == (3.0, 1.0, 5.0)  # n = 5: k = 1
    nineteen = np.arange(1.0, 20.0)  # n = 19: k = 2, holding 16 / 20 = 80% of new values
    assert _band(nineteen, 0.8) == (10.0, 2.0, 18.0)
    assert _band(np.arange(1.0, 40.0), 0.9) == (20.0, 2.0, 38.0)  # n = 39: k = 2, 36 / 40 = 90%


def test_kernel_scale_only_with_the_traces_own_replay_node_cost() -> None:
    m = PredictionModel()
    assert m.kernel_scale("trace replays") == 0.987
    assert m.kernel_scale("prior") == 1.0
    assert PredictionModel(replay_kernel_scale=0.95).kernel_scale("trace replays") == 0.95


def test_python_calls_past_the_fitted_share_are_priced_first(tmp_path) -> None:
    # with_stack: 12 Python calls in the GPU window [10, 160] besides the 6 host events; 0.25 per host event (1.5)
    # are in the stack rates already, the other 10.5 cost 1.78 (0.9-2.31) x the 2 us host reference each:
    # 3.56 us (1.8-4.62), 37.38 us for the step
    calls = [python_function(30 + 5 * i, 1) for i in range(12)]
    s = analyze_trace(load_trace(write(tmp_path, events(dims=None) + calls))).summary
    assert s.profiler_settings["tier"] == "stack" and s.python_calls_per_step_median == 12
    assert (s.profiler_python_call_us, s.profiler_python_call_us_low, s.profiler_python_call_us_high) == \
        (3.56, 1.8, 4.62)
    # the stack share 0.2773 (0.1234-0.3141) is of the step less its calls, 112.62 us over 6 events: 5.2049 us
    # (2.3162-5.8957) per event; the ref rate 2.7761 (1.2187-3.1711) x 2 us widens the range to 2.3162-6.3422
    assert (s.profiler_overhead_us_per_event, s.profiler_overhead_us_per_event_low,
            s.profiler_overhead_us_per_event_high) == (5.205, 2.316, 6.342)
    assert s.estimated_unprofiled_step_us_median == pytest.approx(81.391, abs=1e-3)  # 150 - 37.38 - 6 x 5.2049
    assert s.estimated_unprofiled_step_us_low == pytest.approx(63.437, abs=1e-3)  # 150 - 10.5 x 4.62 - 6 x 6.3422
    assert s.estimated_unprofiled_step_us_high == pytest.approx(117.203, abs=1e-3)  # 150 - 10.5 x 1.8 - 6 x 2.3162
    assert "and 3.56 us (1.8-4.62) per recorded Python call past the host events' share (12 in the median step)" \
        in s.verdict_detail
    assert s.profiler_settings["notes"][0].startswith("ratio model: unprofiled step = 0.7227 x the profiled step "
                                                      "less its Python calls (113 us over 6 host events")
    # without the calls (or with only as many as the rates hold) nothing changes: 0.7227 x 150
    few = analyze_trace(load_trace(write(tmp_path, events(dims=None) + calls[:1]))).summary
    assert few.estimated_unprofiled_step_us_median == pytest.approx(108.405, abs=1e-3)
    assert few.profiler_python_call_us == 3.56 and few.python_calls_per_step_median == 1


def test_pricing_python_calls_takes_a_full_graph_step_to_its_replay_at_most(tmp_path) -> None:
    # one FULL-graph step: a copy [10, 12], 100 Python calls [20, 218] while the host prepares the replay, then one
    # cudaGraphLaunch -> two 20 us kernels [300, 342]: window 332 us, busy 42 us, 3 host events, host reference 2 us
    memcpy = {"ph": "X", "cat": "gpu_memcpy", "name": "Memcpy HtoD", "pid": 0, "tid": 7, "ts": 10, "dur": 2,
              "args": {"device": 0, "stream": 7, "correlation": 1}}
    evs = [ann("decode_step[bs=2]", 0, 400), cpu_op("aten::empty", 1, 2), runtime(3, 2, "cudaMemcpyAsync", corr=1),
           memcpy, *[python_function(20 + 2 * i, 1) for i in range(100)],
           launch(250, 10, 2, name="cudaGraphLaunch"), kernel(300, 20, 2, name="g1"), kernel(322, 20, 2, name="g2")]
    s = analyze_trace(load_trace(write(tmp_path, evs))).summary
    assert s.steps == 1 and s.graph_launches_per_step_median == 1 and s.python_calls_per_step_median == 100
    assert (s.step_us_median, s.gpu_busy_us_median) == (332.0, 42.0)
    # its 99.25 priced calls at 3.56 us (353 us) would take it below its busy time; it stops at its predicted
    # replay, which the estimate without them (332 - 3 x 5.5522 us per host event) is above
    assert s.profiler_python_call_us == 3.56 and s.profiler_overhead_us_per_event == pytest.approx(5.552, abs=1e-3)
    assert s.estimated_unprofiled_step_us_median == s.predicted_graph_step_us_median > s.gpu_busy_us_median
    # without stacks the same step keeps its window less the per-event cost
    plain = analyze_trace(load_trace(write(tmp_path, [e for e in evs if e.get("cat") != "python_function"]))).summary
    assert plain.estimated_unprofiled_step_us_median > 300


def test_op_mix_warning_past_the_fits_host_events_per_launch() -> None:
    """Eager steps with more host events per kernel launch than the harness decoder the model was fitted on (3.97)
    get one line saying the estimate likely reads high; within 10% of it, compiled steps and no launches: none."""
    from launchgap.overhead import DEFAULT_OVERHEAD, op_mix_warning

    assert op_mix_warning(DEFAULT_OVERHEAD, 436.0, 100.0) is None  # 4.36 <= 3.97 x 1.1 = 4.367
    assert op_mix_warning(DEFAULT_OVERHEAD, 4570.0, 1000.0) == (
        "the eager steps record 4.57 host events per kernel launch, the profiler-overhead model was fitted on 3.97 "
        "(the harness decoder): where more of a step's events launch nothing the profiler takes a larger share of it "
        "(measured: transformers' eager decode at 4.5-4.9, its unprofiled step +24..+82% high; vLLM 0.24's eager runner "
        "at 6.6, +28%), so the estimated unprofiled step and the speedup likely read high; a measured step "
        "(--observed-step-us, a server's inter-token latency) settles it (docs/profiler-overhead.md)")
    assert op_mix_warning(DEFAULT_OVERHEAD, 4570.0, 1000.0, compiled=True) is None
    assert op_mix_warning(DEFAULT_OVERHEAD, 4570.0, 0.0) is None and op_mix_warning(DEFAULT_OVERHEAD, None, 10.0) is None
