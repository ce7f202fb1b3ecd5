"""Exact numbers on a hand-built one-step trace (times in us; arithmetic in comments)."""
from __future__ import annotations

import pytest

from launchgap.loaders import load_trace
from launchgap.predict import PredictionModel
from launchgap.report import AnalysisOptions, analyze_trace
from tests.unit.kineto_tiny import ann, kernel, launch, runtime, write

# step [0, 100]; kernels k1 [10,20], k2 [40,45], k3 [50,80], k4 [90,95]
EVENTS = [
    ann("decode_step[bs=2]", 0, 100),
    launch(1, 4, 1), kernel(10, 10, 1, name="k1"),
    launch(30, 5, 2), kernel(40, 5, 2, name="k2"),  # gap [20,40]: launch began at 30 -> host 10, launch 10
    launch(35, 3, 3), kernel(50, 30, 3, name="k3"),  # gap [45,50]: launch began at 35 < 45 -> gpu 5
    runtime(50, 32, "cudaStreamSynchronize"),  # host blocked [50,82]
    launch(85, 2, 4), kernel(90, 5, 4, name="k4"),  # gap [80,90]: before launch 5 = sync 2 + host 3; launch 5
]


@pytest.fixture()
def report(tmp_path):
    return analyze_trace(load_trace(write(tmp_path, EVENTS)))


def test_step_numbers(report) -> None:
    assert len(report.steps) == 1
    st = report.steps[0]
    assert st.batch_size == 2
    assert st.start_us == 10.0 and st.dur_us == 85.0  # window [10, 95]
    assert st.gpu_busy_us == 50.0  # 10 + 5 + 30 + 5
    assert st.gpu_idle_us == 35.0
    assert st.idle_us_by_cause == {"host": 13.0, "launch": 15.0, "sync": 2.0, "gpu": 5.0, "unattributed": 0.0,
                                   "peer": 0.0}
    assert sum(st.idle_us_by_cause.values()) == st.gpu_idle_us
    assert st.kernels == 4 and st.kernel_launches == 4 and st.graph_launches == 0
    assert st.launch_api_us == 14.0  # 4 + 5 + 3 + 2
    assert st.launched_gpu_us == 50.0
    assert st.launch_to_kernel_ratio == 0.28
    assert st.launch_delay_us_median == 9.0  # delays 9, 10, 15, 5 -> lower median 9
    assert st.host_events == 5  # 4 launches + 1 sync
    # busy 50 + 0.34 us x 3 short kernels (k3 is 30 us >= 20 us) + 3 us graph launch
    assert st.predicted_graph_us == pytest.approx(54.02)


def test_summary_and_devices(report) -> None:
    s = report.summary
    assert report.mode == "eager"
    assert s.steps == 1 and s.batch_sizes == [2]
    assert s.gpu_idle_fraction == pytest.approx(35 / 85, abs=1e-3)
    assert s.launch_delay_us_p50 == 9.5
    # Runtime calls only (no cpu_ops): the "cupti" tier, 0.8 us (0.4-1.4) per host event.
    assert s.profiler_settings["tier"] == "cupti"
    assert (s.profiler_overhead_us_per_event, s.profiler_overhead_us_per_event_low,
            s.profiler_overhead_us_per_event_high) == (0.8, 0.4, 1.4)
    assert s.estimated_unprofiled_step_us_median == 81.0  # 85 - 0.8 us x 5 host events
    assert (s.estimated_unprofiled_step_us_low, s.estimated_unprofiled_step_us_high) == (78.0, 83.0)  # 1.4 / 0.4 us
    assert s.predicted_speedup == pytest.approx(81.0 / 54.02, abs=1e-3)
    # Low end: 78 us over the graph step 3.1% slow; high end: 83 us over it 3.1% fast.
    assert s.predicted_speedup_low == pytest.approx(78.0 / (54.02 * 1.031), abs=1e-3)
    assert s.predicted_speedup_high == pytest.approx(83.0 / (54.02 * 0.969), abs=1e-3)
    assert s.eager_step_source == "estimated"
    assert "eager step estimated: 85 us profiled less 0.8 us (0.4-1.4)" in s.verdict_detail
    assert s.predicted_speedup_profiled == pytest.approx(85 / 54.02, abs=1e-3)
    assert s.verdict == "launch-bound"
    (dev,) = report.devices
    assert dev.device == 0 and dev.name == "Test GPU" and dev.kernels == 4
    assert dev.gpu_busy_us == 50.0 and dev.gpu_window_us == 85.0
    assert sum(dev.idle_us_by_cause.values()) == pytest.approx(dev.gpu_idle_us)


def test_observed_step_calibrates_speedup(tmp_path) -> None:
    rep = analyze_trace(load_trace(write(tmp_path, EVENTS)), AnalysisOptions(observed_step_us=112.34))
    assert rep.summary.predicted_speedup == pytest.approx(112.34 / 54.02, abs=1e-3)
    assert rep.summary.estimated_profiler_inflation == pytest.approx(85 / 112.34, abs=1e-3)
    assert rep.summary.eager_step_source == "measured"
    # Measured eager step: the range is the graph step's band alone.
    assert rep.summary.predicted_speedup_low == pytest.approx(112.34 / (54.02 * 1.031), abs=1e-3)
    assert rep.summary.predicted_speedup_high == pytest.approx(112.34 / (54.02 * 0.969), abs=1e-3)
    assert "eager step measured: 112 us observed" in rep.summary.verdict_detail


def test_model_constants_are_parameters(tmp_path) -> None:
    model = PredictionModel(node_us=1.0, long_kernel_us=40.0, graph_launch_us=0.0)
    rep = analyze_trace(load_trace(write(tmp_path, EVENTS)), AnalysisOptions(model=model))
    assert rep.steps[0].predicted_graph_us == 54.0  # 50 + 1.0 x 4 kernels (all < 40 us)


def test_top_gaps_and_kernels(report) -> None:
    g = report.top_gaps[0]
    assert (g.dur_us, g.cause, g.before, g.after, g.step) == (20.0, "host", "k1", "k2", 0)
    names = {k["name"]: k for k in report.top_kernels}
    assert names["k2"]["launch_api_us"] == 5.0 and names["k2"]["launch_to_kernel_ratio"] == 1.0
    assert sum(report.gap_histogram["count"]) == 3  # [20,40], [45,50], [80,90]
    assert sum(report.gap_histogram["idle_us"]) == pytest.approx(35.0)


def test_top_gaps_leave_out_gaps_that_print_as_zero(tmp_path) -> None:
    ev = [ann("decode_step[bs=1]", 0.0, 100.0), launch(1.0, 2.0, 1), kernel(10.0, 10.0, 1, name="k1"),
          launch(4.0, 2.0, 2), kernel(20.01, 5.0, 2, name="k2"), launch(7.0, 2.0, 3), kernel(30.01, 5.0, 3, name="k3"),
          launch(8.0, 2.0, 4), kernel(35.06, 1.0, 4, name="k4")]
    rep = analyze_trace(load_trace(write(tmp_path, ev)))
    # k1 -> k2: 10 ns (prints 0.0 us), k2 -> k3: 5 us, k3 -> k4: 50 ns: the 10 ns one is not listed
    assert [(g.before, g.after, g.dur_us) for g in rep.top_gaps] == [("k2", "k3", 5.0), ("k3", "k4", 0.05)]


def test_graph_step_counts(tmp_path) -> None:
    ev = []
    for i in range(2):
        t0 = i * 100.0
        ev += [ann("decode_step[bs=4]", t0, 50), launch(t0 + 1, 5, 10 + i, name="cudaGraphLaunch"),
               kernel(t0 + 10, 3, 10 + i), kernel(t0 + 14, 3, 10 + i), kernel(t0 + 18, 3, 10 + i)]
    rep = analyze_trace(load_trace(write(tmp_path, ev)))
    s = rep.summary
    assert rep.mode == "graph" and s.verdict == "already graphed"
    assert s.kernels_per_step_median == 3 and s.graph_launches_per_step_median == 1
    assert s.kernel_launches_per_step_median == 0
    assert rep.steps[0].dur_us == 11.0 and rep.steps[0].gpu_busy_us == 9.0
    assert rep.steps[0].idle_us_by_cause["gpu"] == 2.0  # graph launch began before each node gap
    assert s.launch_delay_us_p50 == 9.0  # first replayed kernel 10 - launch 1


def test_mixed_mode(tmp_path) -> None:
    ev = [ann("decode_step[bs=1]", 0, 100), launch(1, 5, 1, name="cudaGraphLaunch"), kernel(10, 3, 1),
          launch(7, 2, 2), kernel(14, 3, 2), launch(9, 2, 3), kernel(18, 3, 3)]
    rep = analyze_trace(load_trace(write(tmp_path, ev)))
    assert rep.mode == "mixed"
    assert rep.summary.residual_eager_launches_per_step_median == 2


def test_zero_length_kernel_has_no_ratio_and_json_still_serialises(tmp_path) -> None:
    import json

    ev = [ann("decode_step[bs=1]", 0, 100), launch(1, 4, 1), kernel(10, 0, 1, name="empty"),
          launch(6, 4, 2), kernel(20, 5, 2, name="real")]
    rep = analyze_trace(load_trace(write(tmp_path, ev)))
    rows = {k["name"]: k for k in rep.top_kernels}
    assert rows["empty"]["launch_to_kernel_ratio"] is None
    assert rows["real"]["launch_to_kernel_ratio"] == 0.8
    json.dumps(rep.to_dict(), allow_nan=False)
    from launchgap.render import render_trace

    assert "empty" in render_trace(rep)


def test_corrupt_rows_are_dropped_or_clamped_with_a_warning(tmp_path) -> None:
    ev = [ann("decode_step[bs=1]", 0, 100), launch(1, 4, 1), kernel(10, 5, 1, name="good"),
          launch(6, 4, 2), kernel(20, 5, 2, name="alias", device=2**32),  # would alias device 0 as int32
          launch(12, 4, 3), kernel(30, -3, 3, name="negative")]
    t = load_trace(write(tmp_path, ev))
    assert "alias" not in set(t.names[t.name_id])  # the row is gone (its name may stay interned)
    assert any("device id out of range" in w for w in t.warnings)
    assert any("negative duration" in w for w in t.warnings)
    rep = analyze_trace(t)
    assert [d.device for d in rep.devices] == [0] and rep.devices[0].kernels == 2


def _copy(ts: float, dur: float, corr: int, kind: str) -> dict:
    names = {"DtoD": "Memcpy DtoD (Device -> Device)", "HtoD": "Memcpy HtoD (Host -> Device)"}
    return {"ph": "X", "cat": "gpu_memcpy", "name": names[kind], "pid": 0, "tid": 7, "ts": ts, "dur": dur,
            "args": {"device": 0, "stream": 7, "correlation": corr}}


def test_piecewise_staging_copies_are_left_out_of_the_full_graph_step(tmp_path) -> None:
    """A piecewise step: an input copy (HtoD) before the first piece, piece A (two kernels and a copy node of its
    own), an eager kernel, an eager device-to-device copy staging piece B's input, piece B (two kernels). Busy 20 us,
    8 GPU ops under 20 us. The staging copy (1 us) is no work of a FULL graph: the FULL step is 19 + 0.34 x 7 + 3 =
    24.38 us, not 20 + 0.34 x 8 + 3 = 25.72; the input copy and the piece's own copy node stay."""
    ev = [ann("decode_step[bs=4]", 0, 200),
          launch(1, 2, 1, name="cudaMemcpyAsync"), _copy(10, 2, 1, "HtoD"),
          launch(3, 5, 2, name="cudaGraphLaunch"), kernel(20, 3, 2), kernel(24, 3, 2), _copy(28, 1, 2, "DtoD"),
          launch(30, 2, 3), kernel(40, 4, 3, name="attn"),
          launch(35, 2, 4, name="cudaMemcpyAsync"), _copy(45, 1, 4, "DtoD"),
          launch(38, 5, 5, name="cudaGraphLaunch"), kernel(50, 3, 5), kernel(54, 3, 5)]
    rep = analyze_trace(load_trace(write(tmp_path, ev)))
    st = rep.steps[0]
    assert st.gpu_busy_us == 20.0 and st.graph_launches == 2
    assert st.predicted_graph_us == pytest.approx(19 + 0.34 * 7 + 3)
    assert ("1 device-to-device copies a step between graph pieces (1.0 us, median; 1 of 1 steps) left out of their "
            "predicted FULL-graph step: a piecewise runner's staging of each piece's inputs, which a FULL graph does "
            "not run (docs/prediction.md, Piecewise steps)") in rep.warnings
    # without the second piece the copy is after the step's only replay: no staging, nothing left out
    one = [e for e in ev if e.get("args", {}).get("correlation") != 5]
    rep1 = analyze_trace(load_trace(write(tmp_path, one, name="one.json")))
    assert not any("staging" in w for w in rep1.warnings)
    assert rep1.steps[0].predicted_graph_us == pytest.approx(14 + 0.34 * 6 + 3)
    # one replay whose kernels run either side of the copy (a FULL step, the copy on another stream): no pieces
    full = one + [kernel(50, 3, 2, stream=9)]
    rep2 = analyze_trace(load_trace(write(tmp_path, full, name="full.json")))
    assert rep2.steps[0].graph_launches == 1 and not any("staging" in w for w in rep2.warnings)
