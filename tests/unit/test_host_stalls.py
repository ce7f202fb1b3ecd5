"""Host stalls on tiny hand-built traces: exact stall time, frame, inside/outside the captured forward, what the
predicted FULL-graph step keeps, the verdict that names them, and what the CPU did in the longest gaps."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from launchgap import host_stalls
from launchgap.loaders import load_trace
from launchgap.predict import PredictionModel
from launchgap.report import AnalysisOptions, analyze_trace, with_observed_step
from tests.unit.kineto_tiny import HOST_PID, HOST_TID, ann, cpu_op, kernel, launch, write

NO_PROFILER_COST = AnalysisOptions(model=PredictionModel(profiler_us_per_host_event=0.0))
FORWARD = "vllm/model_executor/models/llama.py(100): forward"
SAMPLER = "vllm/v1/sample/sampler.py(50): forward"


def _pyfn(name: str, ts: float, dur: float) -> dict:
    return {"ph": "X", "cat": "python_function", "name": name, "pid": HOST_PID, "tid": HOST_TID, "ts": ts,
            "dur": dur, "args": {}}


def _trace(tmp_path: Path, sampler_launch_us: float) -> Path:
    """One 5 ms step: the model's forward (100-1550 us) launches K1 and, after 1,345 us of silence, K2; the
    sampler (1555-4500 us) launches K3 and, after a silence, K4 at ``sampler_launch_us``. Kernels of 40-50 us
    (long: no node cost), so the predicted graph step is busy + 3 us."""
    s = sampler_launch_us
    return write(tmp_path, [
        ann("decode_step[bs=4]", 0.0, 5000.0), _pyfn(FORWARD, 100.0, 1450.0), _pyfn(SAMPLER, 1555.0, 2945.0),
        launch(150.0, 5.0, 1), kernel(160.0, 50.0, 1, "k1"),
        launch(1500.0, 5.0, 2), kernel(1510.0, 50.0, 2, "k2"),
        launch(1600.0, 5.0, 3), kernel(1610.0, 40.0, 3, "k3"),
        launch(s, 5.0, 4), kernel(s + 10.0, 40.0, 4, "k4")])


def test_a_stall_inside_the_forward_is_removed_and_named(tmp_path: Path) -> None:
    rep = analyze_trace(load_trace(_trace(tmp_path, 2400.0)), NO_PROFILER_COST)
    st, s = rep.steps[0], rep.summary
    # GPU gaps the GPU waited on the host for: [210, 1510] (host 1290 + launch 10), [1560, 1610], [1650, 2410].
    # Silent host stretches of >= 500 us held by a Python frame: [155, 1500] in the forward (overlap 1,290 us
    # with the first gap's waited part) and [1605, 2400] in the sampler (overlap 750 us with the third).
    assert (st.host_stall_us, st.host_stall_in_graph_us) == (2040.0, 1290.0)
    assert st.host_stall_frame == "vllm/model_executor/models/llama.py: forward"
    assert s.host_stall_frames == [
        {"frame": "vllm/model_executor/models/llama.py: forward", "us": 1290.0, "in_graph_us": 1290.0},
        {"frame": "vllm/v1/sample/sampler.py: forward", "us": 750.0, "in_graph_us": 0.0}]
    # the graph step keeps the sampler's stall: busy 180 + 3 + 750
    assert st.predicted_graph_us == 933.0
    assert s.estimated_unprofiled_step_us_median == 2290.0  # window 160-2450, no profiler cost
    assert s.predicted_speedup == pytest.approx(2290.0 / 933.0, abs=1e-3)
    assert (s.graph_removes_host_us_per_step, s.graph_keeps_host_us_per_step) == (2290.0 - 933.0, 750.0)
    assert s.verdict == "host stall"
    assert ("sits 2,040 us per step (89% of the step) in vllm/model_executor/models/llama.py: forward with no op, "
            "launch or Python call recorded under it" in s.verdict_detail)
    assert "inside the captured forward: a FULL graph replays it without its Python, so the stall goes" in \
        s.verdict_detail
    assert "a FULL graph removes 1,357 us of host time per step (with 1,290 us of host stall inside the captured " \
           "forward); keeps 750 us (750 us of host stall outside the forward)" in s.verdict_detail


def test_a_stall_outside_the_forward_stays_in_the_graph_step(tmp_path: Path) -> None:
    rep = analyze_trace(load_trace(_trace(tmp_path, 4000.0)), NO_PROFILER_COST)
    st, s = rep.steps[0], rep.summary
    # the sampler's silence is now [1605, 4000]: 2,350 us of it the GPU waits ([1650, 4010] less the launch)
    assert (st.host_stall_us, st.host_stall_in_graph_us) == (3640.0, 1290.0)
    assert st.host_stall_frame == "vllm/v1/sample/sampler.py: forward"
    assert st.predicted_graph_us == 180.0 + 3.0 + 2350.0
    assert s.verdict == "host stall"
    assert "in vllm/v1/sample/sampler.py: forward" in s.verdict_detail
    assert "outside the captured forward: a graph keeps it" in s.verdict_detail
    assert s.graph_keeps_host_us_per_step == 2350.0
    # a measured step keeps the same verdict (one verdict function for every page)
    assert with_observed_step(rep, None).summary.verdict == s.verdict
    assert with_observed_step(rep, 3000.0).summary.verdict == "host stall"


def test_the_longest_gaps_say_what_the_cpu_ran(tmp_path: Path) -> None:
    rep = analyze_trace(load_trace(_trace(tmp_path, 2400.0)), NO_PROFILER_COST)
    g = rep.top_gaps[0]
    assert (g.start_us, g.dur_us) == (210.0, 1300.0)
    # [210, 1500] inside the forward alone, [1500, 1505] in the launch call, [1505, 1510] the forward again
    assert g.host_activity_us == {"vllm/model_executor/models/llama.py: forward": 1295.0, "cudaLaunchKernel": 5.0}


def test_no_stall_without_a_frame_holding_it(tmp_path: Path) -> None:
    # the same silences with no Python frame and no annotation around them: launch-bound, not a stall
    p = write(tmp_path, [launch(150.0, 5.0, 1), kernel(160.0, 50.0, 1), launch(1500.0, 5.0, 2),
                         kernel(1510.0, 50.0, 2)], name="bare.json")
    rep = analyze_trace(load_trace(p), NO_PROFILER_COST)
    assert rep.summary.host_stall_us_per_step == 0.0 and rep.summary.host_stall_frames == []
    assert rep.summary.verdict == "launch-bound"


def test_serving_units_of_the_decode_headline(tmp_path: Path) -> None:
    s = analyze_trace(load_trace(_trace(tmp_path, 2400.0)), NO_PROFILER_COST).summary
    # one decode step of batch 4: the step is the time per output token; tokens/s = 4 / step
    assert (s.decode_batch_size, s.decode_tpot_ms_before, s.decode_tpot_ms_after) == (4, 2.29, 0.933)
    assert s.decode_tokens_per_s_before == pytest.approx(4e6 / 2290.0, abs=1e-3)
    assert s.decode_tokens_per_s_after == pytest.approx(4e6 / 933.0, abs=1e-3)


def _random_host_trace(tmp_path: Path, seed: int) -> Path:
    """Steps of nested Python frames, annotations and CPU ops on the launching thread (some crossing, some sharing
    a start, some of zero length), launches with silences of 0.2-3 ms between them, and Python calls on another
    thread: every case :func:`launchgap.host_stalls._quiet_stretches` carries from one window of time to the next."""
    rng = np.random.default_rng(seed)
    frames = [FORWARD, SAMPLER, "vllm/v1/worker/gpu_model_runner.py(900): _prepare_inputs", "x.py(1): f"]
    ev, corr, t = [], 1, 0.0
    for step in range(6):
        t0 = t
        ev.append(ann(f"decode_step[bs={step + 1}]", t0, 0.0))  # its length is set below
        depth_stack: list[float] = []
        for _ in range(int(rng.integers(5, 15))):
            kind = int(rng.integers(0, 5))
            dur = float(rng.choice([0.0, 20.0, 400.0, 900.0, 2500.0]))
            if kind == 0:
                ev.append(_pyfn(frames[int(rng.integers(0, len(frames)))], t, dur + 600.0))
                depth_stack.append(t + dur + 600.0)
            elif kind == 1:
                ev.append(ann("region", t, dur))  # may cross the frame around it
            elif kind == 2:
                ev.append(cpu_op("aten::mm", t, dur))
            elif kind == 3:
                ev.append(dict(_pyfn(frames[0], t, 50.0), tid=HOST_TID + 1))  # another thread
            t += float(rng.choice([0.0, 5.0, 200.0, 700.0, 3000.0]))
            ev += [launch(t, 5.0, corr), kernel(t + 10.0, 30.0, corr, "k")]
            corr += 1
            t += 40.0
        ev[next(i for i in range(len(ev) - 1, -1, -1) if ev[i]["name"].startswith("decode_step"))]["dur"] = t - t0
        t += float(rng.choice([100.0, 1500.0]))
    return write(tmp_path, ev, name=f"random{seed}.json")


@pytest.mark.parametrize("seed", range(6))
def test_windows_of_time_give_the_whole_threads_stalls(tmp_path: Path, seed: int,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    # the stalls are computed over windows of time for memory; a window of 1-5 ranges finds every stall, depth
    # and holder that one window over the whole thread finds
    trace = load_trace(_random_host_trace(tmp_path, seed))
    whole = analyze_trace(trace, NO_PROFILER_COST)
    assert any(s.host_stall_us > 0 for s in whole.steps)  # the trace has stalls to find
    for window in (1, 2, 5):
        monkeypatch.setattr(host_stalls, "_WINDOW_RANGES", window)
        rep = analyze_trace(trace, NO_PROFILER_COST)
        assert [(s.host_stall_us, s.host_stall_in_graph_us, s.host_stall_frame) for s in rep.steps] == \
            [(s.host_stall_us, s.host_stall_in_graph_us, s.host_stall_frame) for s in whole.steps]
        assert rep.summary.host_stall_frames == whole.summary.host_stall_frames
