"""One set of expectations, two loaders: the same tiny trace written as Kineto JSON and as an
nsys SQLite export must give the same gaps, causes, launch join, steps and report.

All times in the specs are ns; expected values are worked out by hand in the comments
(``k`` = 1,000 ns = 1 us, so ``4k`` ns reads as 4.0 us in the report).
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from launchgap.gaps import CAUSES, compute_gaps
from launchgap.loaders import load_trace
from launchgap.report import analyze_trace
from launchgap.trace import Api, Kind, Trace
from tests.builders import GpuOp, TraceSpec, write

FORMATS = ["kineto", "nsys"]


def eager_spec() -> TraceSpec:
    """Two eager decode steps on one device; every gap cause appears.

    Step 0, ``decode_step[bs=8]`` on the host over [0, 100k):
      L1 cudaLaunchKernel [1k, 5k)   corr 1 -> K1 gemm      [10k, 20k) stream 7
      L2 cudaLaunchKernel [6k, 10k)  corr 2 -> K2 add       [25k, 30k) stream 7
      L6 cudaLaunchKernel [10k, 11k) corr 6 -> K6 gemm_side [15k, 22k) stream 8 (overlaps K1)
      S  cudaStreamSynchronize [12k, 31k)
      L3 cudaLaunchKernel [35k, 40k) corr 3 -> K3 gemm      [42k, 50k)
      K4 orphan (no correlation, no launch call)            [55k, 58k)
      L5 cudaLaunchKernel [41k, 44k) corr 5 -> K5 add       [60k, 70k)
    Step 1, ``decode_step[bs=16]`` over [100k, 200k):
      L7 [101k, 104k) corr 7 -> K7 gemm [110k, 120k)
      L8 [125k, 128k) corr 8 -> K8 add  [130k, 140k)
    """
    s = TraceSpec()
    s.annotate("decode_step[bs=8]", 0, 100_000)
    s.launch("gemm", 1_000, 4_000, 10_000, 10_000, corr=1)
    s.launch("add", 6_000, 4_000, 25_000, 5_000, corr=2)
    s.launch("gemm_side", 10_000, 1_000, 15_000, 7_000, corr=6, stream=8)
    s.call("cudaStreamSynchronize", 12_000, 19_000)
    s.launch("gemm", 35_000, 5_000, 42_000, 8_000, corr=3)
    s.ops.append(GpuOp("orphan", 55_000, 3_000))
    s.launch("add", 41_000, 3_000, 60_000, 10_000, corr=5)
    s.annotate("decode_step[bs=16]", 100_000, 100_000)
    s.launch("gemm", 101_000, 3_000, 110_000, 10_000, corr=7)
    s.launch("add", 125_000, 3_000, 130_000, 10_000, corr=8)
    return s


def graph_spec() -> TraceSpec:
    """Two graph-replayed steps (``decode_step[bs=4]``), one cudaGraphLaunch each, three kernels per replay.

    Step 0 [0, 50k):   G0 cudaGraphLaunch [1k, 11k)  corr 10 -> gemm [15k, 20k), add [21k, 25k), gemm [25k, 30k)
    Step 1 [50k, 100k): G1 cudaGraphLaunch [51k, 61k) corr 11 -> gemm [65k, 70k), add [71k, 75k), gemm [75k, 80k)
    """
    s = TraceSpec()
    for i, base in enumerate((0, 50_000)):
        s.annotate("decode_step[bs=4]", base, 50_000)
        s.graph_launch(base + 1_000, 10_000, corr=10 + i, graph_id=3,
                       kernels=[("gemm", base + 15_000, 5_000), ("add", base + 21_000, 4_000),
                                ("gemm", base + 25_000, 5_000)])
    return s


def two_gpu_spec() -> TraceSpec:
    """One step (``decode_step[bs=2]``, [0, 40k)) that launches on two devices.

      L1 [1k, 3k)   corr 1 -> K1 dev 0 [5k, 15k)
      L2 [3k, 5k)   corr 2 -> K2 dev 1 [6k, 10k)
      L4 [5k, 7k)   corr 4 -> K4 dev 1 [12k, 15k)
      L3 [20k, 22k) corr 3 -> K3 dev 0 [24k, 30k)
    """
    s = TraceSpec(device_names={0: "NVIDIA H200", 1: "NVIDIA H200"})
    s.annotate("decode_step[bs=2]", 0, 40_000)
    s.launch("gemm", 1_000, 2_000, 5_000, 10_000, corr=1, device=0)
    s.launch("gemm", 3_000, 2_000, 6_000, 4_000, corr=2, device=1)
    s.launch("add", 5_000, 2_000, 12_000, 3_000, corr=4, device=1)
    s.launch("add", 20_000, 2_000, 24_000, 6_000, corr=3, device=0)
    return s


def _load(spec: TraceSpec, fmt: str, tmp_path: Path) -> Trace:
    trace = load_trace(write(spec, fmt, tmp_path))
    assert trace.format == fmt
    return trace


def _no_cause(**nonzero: float) -> dict[str, float]:
    return {c: float(nonzero.get(c, 0.0)) for c in CAUSES}


@pytest.mark.parametrize("fmt", FORMATS)
def test_gaps_by_cause_exact_ns(fmt: str, tmp_path: Path) -> None:
    trace = _load(eager_spec(), fmt, tmp_path)
    gaps, busy = compute_gaps(trace)
    # Device 0 sorted by start: K1 [10k,20k) K6 [15k,22k) K2 [25k,30k) K3 [42k,50k) K4 [55k,58k)
    # K5 [60k,70k) K7 [110k,120k) K8 [130k,140k); running end 20k,22k,30k,50k,58k,70k,120k,140k.
    assert gaps.start_ns.tolist() == [22_000, 30_000, 50_000, 58_000, 70_000, 120_000]
    assert gaps.end_ns.tolist() == [25_000, 42_000, 55_000, 60_000, 110_000, 130_000]
    # [22k,25k) -> K2; L2 began at 6k, before the GPU went idle: gpu 3k.
    # [30k,42k) -> K3; L3 began at 35k (late): 5k before it, of which S [12k,31k) covers 1k (sync),
    #            host 5k - 1k = 4k; launch 42k - 35k = 7k.
    # [50k,55k) -> K4 with no launch call: unattributed 5k.
    # [58k,60k) -> K5; L5 began at 41k: gpu 2k.
    # [70k,110k) -> K7; L7 began at 101k: host 101k - 70k = 31k, launch 110k - 101k = 9k.
    # [120k,130k) -> K8; L8 began at 125k: host 5k, launch 5k.
    assert gaps.host_ns.tolist() == [0, 4_000, 0, 0, 31_000, 5_000]
    assert gaps.sync_ns.tolist() == [0, 1_000, 0, 0, 0, 0]
    assert gaps.launch_ns.tolist() == [0, 7_000, 0, 0, 9_000, 5_000]
    assert gaps.gpu_ns.tolist() == [3_000, 0, 0, 2_000, 0, 0]
    assert gaps.unattributed_ns.tolist() == [0, 0, 5_000, 0, 0, 0]
    assert gaps.peer_ns.tolist() == [0] * 6
    total = sum(gaps.cause_ns(c) for c in CAUSES)
    np.testing.assert_array_equal(total, gaps.dur_ns)
    # Busy: [10k,22k) once although K1 and K6 overlap (12k, not 17k) + 5k + 8k + 3k + 10k + 10k + 10k = 58k.
    assert [b.device for b in busy] == [0]
    assert busy[0].busy_ns == 58_000
    assert busy[0].start_ns.tolist() == [10_000, 25_000, 42_000, 55_000, 60_000, 110_000, 130_000]


@pytest.mark.parametrize("fmt", FORMATS)
def test_launch_join_eager(fmt: str, tmp_path: Path) -> None:
    trace = _load(eager_spec(), fmt, tmp_path)
    gpu = np.flatnonzero(trace.gpu_mask)
    assert trace.kind[gpu].tolist() == [Kind.KERNEL] * 8
    launch = trace.launch_idx[gpu]
    names = trace.name_of(gpu).tolist()
    # Each kernel's launch call starts where the spec put it; the orphan has none.
    expected_call_start = {10_000: 1_000, 25_000: 6_000, 15_000: 10_000, 42_000: 35_000, 55_000: None,
                           60_000: 41_000, 110_000: 101_000, 130_000: 125_000}
    for row, li, name in zip(gpu.tolist(), launch.tolist(), names):
        want = expected_call_start[int(trace.start_ns[row])]
        if want is None:
            assert name == "orphan" and li == -1
        else:
            assert trace.start_ns[li] == want
            assert trace.api[li] == Api.KERNEL_LAUNCH
            assert trace.kind[li] == Kind.RUNTIME


@pytest.mark.parametrize("fmt", FORMATS)
def test_eager_report_per_step_and_device(fmt: str, tmp_path: Path) -> None:
    rep = analyze_trace(_load(eager_spec(), fmt, tmp_path))
    assert rep.format == fmt
    assert rep.mode == "eager"
    assert rep.summary.step_source == "annotation"
    assert rep.summary.batch_sizes == [8, 16]
    s0, s1 = rep.steps
    assert (s0.name, s0.batch_size, s1.name, s1.batch_size) == ("decode_step[bs=8]", 8, "decode_step[bs=16]", 16)
    # Step 0 window: first to last op it launched, K1 start 10k to K5 end 70k = 60 us; busy 38 us
    # ([10k,22k) 12 + K2 5 + K3 8 + orphan K4 3 (inside the window though not launched) + K5 10).
    assert (s0.start_us, s0.dur_us, s0.gpu_busy_us, s0.gpu_idle_us, s0.cpu_us) == (10.0, 60.0, 38.0, 22.0, 100.0)
    # The idle 22 us: gaps [22k,25k) gpu 3, [30k,42k) sync 1 + host 4 + launch 7, [50k,55k) unattributed 5,
    # [58k,60k) gpu 2.
    assert s0.idle_us_by_cause == _no_cause(host=4.0, launch=7.0, sync=1.0, gpu=5.0, unattributed=5.0)
    # Kernels launched by the step: K1 K2 K6 K3 K5 (the orphan belongs to no step).
    assert (s0.kernels, s0.kernel_launches, s0.graph_launches) == (5, 5, 0)
    # Launch API time 4 + 4 + 1 + 5 + 3 = 17 us over 10 + 5 + 7 + 8 + 10 = 40 us of kernels: 0.425.
    assert (s0.launch_api_us, s0.launched_gpu_us, s0.launch_to_kernel_ratio) == (17.0, 40.0, 0.425)
    # Delays (op start - call start): 9, 19, 5, 7, 19 us -> median 9.
    assert s0.launch_delay_us_median == 9.0
    # L1 L2 L6 S L3 L5: six runtime calls inside the step.
    assert s0.host_events == 6
    # Step 1: window [110k,140k) = 30 us, busy 20, idle 10 = host 5 (120k..125k) + launch 5 (125k..130k).
    assert (s1.dur_us, s1.gpu_busy_us, s1.gpu_idle_us) == (30.0, 20.0, 10.0)
    assert s1.idle_us_by_cause == _no_cause(host=5.0, launch=5.0)
    # Delays 9 and 5: the lower median is 5.
    assert (s1.kernels, s1.launch_api_us, s1.launch_delay_us_median) == (2, 6.0, 5.0)
    for step in rep.steps:
        assert sum(step.idle_us_by_cause.values()) == pytest.approx(step.gpu_idle_us, abs=1e-9)
    # Device: window K1 start 10k to K8 end 140k = 130 us, busy 58, idle 72 = host 4+31+5, launch 7+9+5,
    # sync 1, gpu 3+2, unattributed 5 (the 40 us between the steps counts for the device, not a step).
    (dev,) = rep.devices
    assert (dev.device, dev.name, dev.kernels, dev.gpu_ops) == (0, "NVIDIA H200", 8, 8)
    assert (dev.gpu_window_us, dev.gpu_busy_us, dev.gpu_idle_us) == (130.0, 58.0, 72.0)
    assert dev.idle_us_by_cause == _no_cause(host=40.0, launch=21.0, sync=1.0, gpu=5.0, unattributed=5.0)
    assert sum(dev.idle_us_by_cause.values()) == pytest.approx(dev.gpu_idle_us, abs=1e-9)


@pytest.mark.parametrize("fmt", FORMATS)
def test_graph_launch_join_and_mode(fmt: str, tmp_path: Path) -> None:
    trace = _load(graph_spec(), fmt, tmp_path)
    kernels = np.flatnonzero(trace.kind == Kind.KERNEL)
    launches = trace.launch_idx[kernels]
    # Three kernels per replay share one cudaGraphLaunch each.
    assert trace.start_ns[launches].tolist() == [1_000] * 3 + [51_000] * 3
    assert set(trace.api[launches].tolist()) == {Api.GRAPH_LAUNCH}
    assert trace.graph_id[kernels].tolist() == [3] * 6
    rep = analyze_trace(trace)
    assert rep.mode == "graph"
    assert rep.summary.graph_launches_per_step_median == 1.0
    assert rep.summary.kernel_launches_per_step_median == 0.0
    assert rep.summary.kernels_per_step_median == 3.0
    assert rep.summary.batch_sizes == [4]
    for step in rep.steps:
        # Window [15k,30k) (+50k for step 1) = 15 us, busy 5 + 4 + 5 = 14, one 1 us gap [20k,21k) whose
        # kernel was launched (by the graph launch at 1k) long before: gpu-side.
        assert (step.dur_us, step.gpu_busy_us, step.gpu_idle_us) == (15.0, 14.0, 1.0)
        assert step.idle_us_by_cause == _no_cause(gpu=1.0)
        assert (step.kernels, step.graph_launches, step.kernel_launches) == (3, 1, 0)
        # 10 us in the launch call for 14 us of kernels; delay of the replay's first kernel 15k - 1k.
        assert (step.launch_api_us, step.launched_gpu_us, step.launch_delay_us_median) == (10.0, 14.0, 14.0)
    # Device: [15k,80k) = 65 us, busy 28; idle 37 = gpu 1 + 1, and [30k,65k) before the second replay,
    # whose launch call began at 51k: host 51k - 30k = 21, launch 65k - 51k = 14.
    (dev,) = rep.devices
    assert (dev.gpu_window_us, dev.gpu_busy_us, dev.gpu_idle_us) == (65.0, 28.0, 37.0)
    assert dev.idle_us_by_cause == _no_cause(host=21.0, launch=14.0, gpu=2.0)


@pytest.mark.parametrize("fmt", FORMATS)
def test_two_devices_per_device_totals(fmt: str, tmp_path: Path) -> None:
    rep = analyze_trace(_load(two_gpu_spec(), fmt, tmp_path))
    d0, d1 = rep.devices
    # Device 0: K1 [5k,15k) K3 [24k,30k): window 25, busy 16, gap [15k,24k) with L3 at 20k: host 5, launch 4.
    assert (d0.device, d0.kernels, d0.gpu_window_us, d0.gpu_busy_us, d0.gpu_idle_us) == (0, 2, 25.0, 16.0, 9.0)
    assert d0.idle_us_by_cause == _no_cause(host=5.0, launch=4.0)
    # Device 1: K2 [6k,10k) K4 [12k,15k): window 9, busy 7, gap [10k,12k) with L4 at 5k: gpu 2.
    assert (d1.device, d1.kernels, d1.gpu_window_us, d1.gpu_busy_us, d1.gpu_idle_us) == (1, 2, 9.0, 7.0, 2.0)
    assert d1.idle_us_by_cause == _no_cause(gpu=2.0)
    assert (d0.name, d1.name) == ("NVIDIA H200", "NVIDIA H200")
    # The step is reported on the device it kept busiest (16 us on device 0 against 7 on device 1),
    # and counts the kernels it launched on both.
    (step,) = rep.steps
    assert (step.device, step.dur_us, step.gpu_busy_us, step.kernels, step.batch_size) == (0, 25.0, 16.0, 4, 2)
    assert step.idle_us_by_cause == _no_cause(host=5.0, launch=4.0)


@pytest.mark.parametrize("spec", [eager_spec, graph_spec, two_gpu_spec])
def test_both_loaders_give_the_same_report(spec, tmp_path: Path) -> None:
    """Beyond the numbers pinned above: the whole JSON contract agrees, except the path and format."""
    (tmp_path / "k").mkdir()
    (tmp_path / "n").mkdir()
    reports = [analyze_trace(_load(spec(), fmt, tmp_path / fmt[0])).to_dict() for fmt in FORMATS]
    for r in reports:
        r.pop("path")
        r.pop("format")
        # What the settings detection rests on names the format ("Nsight Systems export: ...").
        r["summary"]["profiler_settings"].pop("evidence")
        # Rows tied on launch time keep name-interning order, which differs between loaders.
        r["top_kernels"].sort(key=lambda row: (-row["launch_api_us"], row["name"]))
    assert reports[0] == reports[1]
