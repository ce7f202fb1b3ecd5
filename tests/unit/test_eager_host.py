"""The host's cost per eager launch measured on a trace, and the eager cost per size it gives a graph-only trace
(``launchgap.predict.host_us_per_launch``, ``launchgap.costmodel.eager_curve``), on hand-built traces."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from launchgap.costmodel import DEFAULT_HOST_US_PER_LAUNCH, EAGER_GAP_OVER_NODE_US, CostCurve, eager_curve
from launchgap.loaders import load_trace
from launchgap.predict import (
    MIN_HOST_INTERVALS, HostLaunchCost, PredictionModel, eager_launch_intervals_us, host_us_per_launch,
)
from launchgap.report import AnalysisOptions, analyze_trace
from launchgap.steps import assign_rows_to_steps, find_steps
from tests.unit.kineto_tiny import ann, cpu_op, kernel, launch, write


def _events() -> list[dict]:
    """An eager decode step with 4 launches (at 11, 22, 40, 45 us; ops around the first two) and a graph step with a
    launch before its graph launch (205), two after it (230, 236) and one recorded into a graph (240: it ran
    nothing)."""
    eager = [ann("decode_step[bs=2 eager]", 0.0, 100.0),
             cpu_op("aten::mul", 10.0, 6.0), launch(11.0, 2.0, 1), kernel(50.0, 1.0, 1),
             cpu_op("aten::add", 20.0, 10.0), launch(22.0, 2.0, 2), kernel(52.0, 1.0, 2),
             launch(40.0, 2.0, 3), kernel(54.0, 1.0, 3), launch(45.0, 2.0, 4), kernel(56.0, 1.0, 4)]
    graph = [ann("decode_step[bs=4 graph]", 200.0, 100.0),
             launch(205.0, 2.0, 5), kernel(250.0, 1.0, 5),
             launch(210.0, 3.0, 6, name="cudaGraphLaunch")] + [kernel(252.0 + i, 1.0, 6) for i in range(3)] + [
             launch(230.0, 2.0, 7), kernel(260.0, 1.0, 7), launch(236.0, 2.0, 8), kernel(262.0, 1.0, 8),
             launch(240.0, 2.0, 9)]
    return eager + graph


@pytest.fixture
def trace_path(tmp_path: Path) -> Path:
    return write(tmp_path, _events())


def test_intervals_between_eager_launches_exact(trace_path: Path) -> None:
    tr = load_trace(trace_path)
    row_step = assign_rows_to_steps(tr, find_steps(tr))
    # intervals (us, less 1 us per host event starting in them): 11 -> 22: 11 - 2 (the launch at 11, aten::add at
    # 20) = 9; 22 -> 40: 18 - 1 = 17; 40 -> 45: 5 - 1 = 4; 230 -> 236: 6 - 1 = 5. Not counted: 45 -> 205 (another
    # step), 205 -> 230 (a graph launch between), 236 -> 240 (240 ran nothing). Median of 4, 5, 9, 17 = 7
    assert sorted(eager_launch_intervals_us(tr, row_step, 1.0).tolist()) == [4.0, 5.0, 9.0, 17.0]
    assert host_us_per_launch(tr, row_step, 1.0, min_intervals=4) == HostLaunchCost(7.0, 4)
    # without the profiler's cost: 11, 18, 5, 6 -> 8.5
    assert host_us_per_launch(tr, row_step, 0.0, min_intervals=4) == HostLaunchCost(8.5, 4)
    # fewer intervals than the minimum: no figure, the count says why
    assert host_us_per_launch(tr, row_step, 1.0) == HostLaunchCost(None, 4)
    assert MIN_HOST_INTERVALS == 50
    # the eager step hidden: only the graph step's 230 -> 236 is left
    assert host_us_per_launch(tr, row_step, 1.0, rows=row_step != 0, min_intervals=1) == HostLaunchCost(5.0, 1)
    # a profiler cost that takes every interval to 0 or below gives no figure
    assert host_us_per_launch(tr, row_step, 20.0, min_intervals=4) == HostLaunchCost(None, 4)


def test_intervals_less_the_python_tracers_cost(tmp_path: Path) -> None:
    # the same trace taken with_stack: three Python calls between the launches at 11 and 22, one between 40 and 45,
    # one at 100 (between no two launches of a step); each priced 2 us here
    calls = [{"ph": "X", "cat": "python_function", "name": f"f{i}", "pid": 1, "tid": 1, "ts": ts, "dur": 0.5,
              "args": {"Python id": i}} for i, ts in enumerate((12.0, 13.0, 14.0, 41.0, 100.0))]
    tr = load_trace(write(tmp_path, _events() + calls))
    row_step = assign_rows_to_steps(tr, find_steps(tr))
    seen: list[tuple[list[int], list[int]]] = []

    def cost(n_calls: np.ndarray, events: np.ndarray) -> np.ndarray:
        seen.append((np.asarray(n_calls).tolist(), np.asarray(events).tolist()))
        return 2.0 * np.asarray(n_calls, dtype=float)

    # 9 - 3 x 2 = 3; 17; 4 - 2 = 2; 5
    assert sorted(eager_launch_intervals_us(tr, row_step, 1.0, python_us=cost).tolist()) == [2.0, 3.0, 5.0, 17.0]
    assert sorted(zip(*seen[0])) == [(0, 1), (0, 1), (1, 1), (3, 2)]  # calls and host events per interval
    assert host_us_per_launch(tr, row_step, 1.0, min_intervals=4, python_us=cost) == HostLaunchCost(4.0, 4)
    assert sorted(eager_launch_intervals_us(tr, row_step, 1.0).tolist()) == [4.0, 5.0, 9.0, 17.0]  # no cost given


def _curve() -> CostCurve:
    us = np.array([10.0, 20.0, 30.0])
    return CostCurve(us=us, low_us=us, high_us=us, source=("trace", "model", "model"))


def test_eager_curve_measured_host_cost() -> None:
    e = eager_curve(_curve(), 2.0, np.zeros(0), np.zeros(0), HostLaunchCost(7.0, 150))
    # 2 kernels x 7 us = 14, at least the graph step plus 1 us a kernel (12, 22, 32)
    assert EAGER_GAP_OVER_NODE_US == 1.0
    assert e.us.tolist() == [14.0, 22.0, 32.0] and e.source == "estimate"
    assert e.detail == ("estimated: 2 kernels per step x 7 us per launch (measured: median of 150 intervals between "
                        "the trace's eager launches) (a host-bound eager step), at least the graph step plus 1 us per kernel "
                        "(a GPU-bound eager step)")
    assert not e.floor  # the host's own cost: an estimate, not a floor


def test_eager_curve_falls_back_to_the_prior() -> None:
    e = eager_curve(_curve(), 2.0, np.zeros(0), np.zeros(0), HostLaunchCost(None, 4))
    assert DEFAULT_HOST_US_PER_LAUNCH == 7.95
    assert e.us.tolist() == [15.9, 22.0, 32.0] and e.source == "estimate"
    assert e.detail == ("estimated: 2 kernels per step x 7.95 us per launch (a prior, the H200 harness host: 4 "
                        "intervals between eager launches in the trace, fewer than 50 to measure its own) (a "
                        "host-bound eager step), at least the graph step plus 1 us per kernel (a GPU-bound eager step)")
    assert eager_curve(_curve(), 2.0, np.zeros(0), np.zeros(0)).us.tolist() == [15.9, 22.0, 32.0]
    assert e.floor and eager_curve(_curve(), 2.0, np.zeros(0), np.zeros(0)).floor  # a bare launch's cost: a floor
    # the flag survives a fleet summary's round trip
    from launchgap.costmodel import curve_from_dict, curve_to_dict
    assert curve_from_dict(curve_to_dict(_curve(), e))[1].floor
    assert not curve_from_dict(curve_to_dict(_curve(), eager_curve(_curve(), 2.0, np.zeros(0), np.zeros(0),
                                                                   HostLaunchCost(7.0, 150))))[1].floor
    many = eager_curve(_curve(), 2.0, np.zeros(0), np.zeros(0), HostLaunchCost(None, 150))
    assert many.detail.endswith("150 intervals between eager launches in the trace, their median, less the "
                                "profiler's cost, not above 0) (a host-bound eager step), at least the graph step "
                                "plus 1 us per kernel (a GPU-bound eager step)")


def test_eager_curve_gpu_bound_end_on_nvidia_and_amd() -> None:
    # 100 kernels x 0.05 us (a fast host): GPU-bound. NVIDIA (or an unknown GPU): graph + 100 x 1 us; an AMD GPU,
    # where the gap was not measured: the graph step alone (a tie)
    fast = HostLaunchCost(0.05, 150)
    assert eager_curve(_curve(), 100.0, np.zeros(0), np.zeros(0), fast, device_name="NVIDIA H100 80GB HBM3"
                       ).us.tolist() == [110.0, 120.0, 130.0]
    assert eager_curve(_curve(), 100.0, np.zeros(0), np.zeros(0), fast).us.tolist() == [110.0, 120.0, 130.0]
    amd = eager_curve(_curve(), 100.0, np.zeros(0), np.zeros(0), fast, device_name="AMD Instinct MI300X")
    assert amd.us.tolist() == [10.0, 20.0, 30.0]
    assert amd.detail.endswith("(a host-bound eager step), at least the graph step (a GPU-bound eager step's gap per "
                               "kernel was measured on NVIDIA GPUs only)")


def test_eager_steps_scale_the_estimate() -> None:
    # eager step at bs 1 measured 28 us: the estimate there (14) is scaled by 2 everywhere (14, 22, 32)
    e = eager_curve(_curve(), 2.0, np.array([1]), np.array([28.0]), HostLaunchCost(7.0, 150))
    assert e.us.tolist() == [28.0, 44.0, 64.0] and e.source == "eager steps" and not e.floor
    assert e.detail == ("1 eager decode step(s) of the trace: 2 kernels x 7 us per launch (measured: median of 150 "
                        "intervals between the trace's eager launches), scaled by 2 to agree with them")


def test_eager_steps_among_graph_replays_do_not_scale_a_measured_host_cost() -> None:
    # the same eager step in a trace that replays graphs: with the host's cost measured it stays 2 x 7 us (profiled
    # among graph replays an eager step runs far above its unprofiled time); with the prior, the step still scales
    steps = (np.array([1]), np.array([28.0]))
    e = eager_curve(_curve(), 2.0, *steps, HostLaunchCost(7.0, 150), among_graphs=True)
    assert e.us.tolist() == [14.0, 22.0, 32.0] and e.source == "estimate"
    assert e.detail == ("estimated: 2 kernels per step x 7 us per launch (measured: median of 150 intervals between "
                        "the trace's eager launches) (a host-bound eager step), at least the graph step plus 1 us per "
                        "kernel (a GPU-bound eager step); its 1 eager "
                        "decode step(s) among graph replays do not scale it (profiled there, an eager step runs "
                        "1.8-3.3x its unprofiled time)")
    prior = eager_curve(_curve(), 2.0, *steps, HostLaunchCost(None, 4), among_graphs=True)
    assert prior.us == pytest.approx([28.0, 22.0 * 28 / 15.9, 32.0 * 28 / 15.9]) and prior.source == "eager steps"
    assert not prior.floor  # scaled to a measured eager step


def test_analysis_reports_which_host_cost_it_used(trace_path: Path) -> None:
    rep = analyze_trace(load_trace(trace_path), AnalysisOptions(model=PredictionModel(profiler_us_per_host_event=0.0)))
    assert rep.eager_curve is not None and rep.eager_curve.source == "eager steps"
    assert ("7.95 us per launch (a prior, the H200 harness host: 4 intervals between eager launches in the trace, "
            "fewer than 50 to measure its own)") in rep.eager_curve.detail


@pytest.mark.parametrize("fmt", ["kineto", "nsys"])
def test_intervals_per_thread_in_both_formats(fmt: str, tmp_path: Path) -> None:
    """Runtime calls alone (no CPU ops, as Nsight Systems records): two threads' launches pair only within each."""
    from tests.builders import TraceSpec
    from tests.builders import write as write_spec

    spec = TraceSpec()
    spec.annotate("decode_step[bs=2 eager]", 0, 100_000)
    spec.launch("a", 1_000, 500, 40_000, 1_000, corr=1)
    spec.launch("b", 5_000, 500, 42_000, 1_000, corr=2)
    spec.call("cudaMemsetAsync", 6_000, 500, corr=3)
    spec.launch("c", 12_000, 500, 44_000, 1_000, corr=4)
    spec.graph_launch(20_000, 500, 5, 1, [("g", 46_000, 1_000)])
    spec.launch("d", 25_000, 500, 48_000, 1_000, corr=6)
    spec.launch("e", 3_000, 500, 50_000, 1_000, corr=7, tid=2)
    spec.launch("f", 4_000, 500, 52_000, 1_000, corr=8, tid=2)
    tr = load_trace(write_spec(spec, fmt, tmp_path))
    row_step = assign_rows_to_steps(tr, find_steps(tr))
    # thread 1: 1 -> 5 us: 4 - 0.5 (the launch at 1) = 3.5; 5 -> 12: 7 - 2 x 0.5 (launch, memset) = 6; 12 -> 25 has
    # the graph launch between. Thread 2: 3 -> 4: 1 - 0.5 = 0.5. Median of 0.5, 3.5, 6
    assert host_us_per_launch(tr, row_step, 0.5, min_intervals=3) == HostLaunchCost(3.5, 3)
