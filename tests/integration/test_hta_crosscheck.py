"""launchgap against Holistic Trace Analysis (HTA 0.5.0) on real traces.

For each trace, :func:`launchgap.hta_bridge.compare_with_hta` gives, per metric (kernel
count, GPU window/busy/idle from HTA's temporal breakdown, idle per stream split into host
wait / kernel wait / other, launch-delay statistics), launchgap's number, HTA's default
number, and HTA's number with its documented deviations switched off ("aligned"):

* aligned HTA must agree with launchgap within 1% on every metric (after the one
  difference HTA cannot switch off, overlapping ops on a stream, measured on our side);
* each deviation is then checked where it shows, against an independent count on the
  trace (last ProfilerStep, launch-less kernels, cuLaunchKernelEx, rounding, cuda_sync
  ranges, Triton's cpu_op with a stream argument, HTA's assertion on negative durations).

Reads the bundled traces/ (h200-1b, h200x2-tp2-1b, hta); skips only without HTA.
The large traces are marked slow (``make test-fast`` leaves them out).
"""
from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import pytest

from launchgap.hta_bridge import (
    HTA_LAUNCH_APIS,
    HtaError,
    HtaSettings,
    compare_with_hta,
    import_hta,
    run_hta,
)
from launchgap.loaders import load_trace
from launchgap.report import analyze_trace
from launchgap.trace import Api, Kind

SLOW = pytest.mark.slow
TRACES = [
    pytest.param("h200-1b/1b_bs8_eager.json.gz"),
    pytest.param("h200-1b/1b_bs8_graph.json.gz"),
    pytest.param("h200-1b/1b_bs1_eager.json.gz"),
    pytest.param("h200-1b/1b_bs1_graph.json.gz"),
    pytest.param("h200-1b/1b_bs64_eager.json.gz", marks=SLOW),
    pytest.param("h200-1b/1b_bs64_graph.json.gz", marks=SLOW),
    pytest.param("h200-1b/1b_bs256_eager.json.gz", marks=SLOW),
    pytest.param("h200-1b/1b_bs256_graph.json.gz", marks=SLOW),
    pytest.param("h200x2-tp2-1b/tp1b_bs1_eager_rank0.json.gz"),
    pytest.param("h200x2-tp2-1b/tp1b_bs1_eager_rank1.json.gz"),
    pytest.param("h200x2-tp2-1b/tp1b_bs1_graph_rank0.json.gz"),
    pytest.param("h200x2-tp2-1b/tp1b_bs1_graph_rank1.json.gz"),
    pytest.param("h200x2-tp2-1b/tp1b_bs64_eager_rank0.json.gz", marks=SLOW),
    pytest.param("h200x2-tp2-1b/tp1b_bs64_eager_rank1.json.gz", marks=SLOW),
    pytest.param("h200x2-tp2-1b/tp1b_bs64_graph_rank0.json.gz", marks=SLOW),
    pytest.param("h200x2-tp2-1b/tp1b_bs64_graph_rank1.json.gz", marks=SLOW),
    pytest.param("hta/amd_trace/mi250_minitoy_train_ROCm6_2_kineto.json.gz"),
    pytest.param("hta/call_stack/backward_thread.json.gz"),
    pytest.param("hta/critical_path/alexnet/benchmark_result_2869224_1695835535_trace.json.gz"),
    pytest.param("hta/critical_path/cuda_event_sync_multi_stream/event_sync_trace.json.gz"),
    pytest.param("hta/critical_path/simple_add/benchmark_result_493459_1694039959_trace.json.gz"),
    pytest.param("hta/df_index_resolver/df_index_resolver.json.gz", marks=SLOW),
    pytest.param("hta/execution_trace/benchmark_simple_add_trace.json.gz"),
    pytest.param("hta/nccl_parser_config/nccl_data.json.gz"),
    pytest.param("hta/negative_queue_length_values_check/rank0.json.gz", marks=SLOW),
    pytest.param("hta/ns_resolution_trace/rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz",
                 marks=SLOW),
    pytest.param("hta/trace_diff/control/control.json.gz", marks=SLOW),
    pytest.param("hta/trace_diff/test/test.json.gz", marks=SLOW),
    pytest.param("hta/trace_filter/sampled_rank-0.json.gz"),
    pytest.param("hta/trace_filter/sampled_rank-1.json.gz"),
    pytest.param("hta/triton_example/triton_example.json.gz"),
    pytest.param("hta/with_gpu_user_annotation/step_based_trace_2543932.json.gz"),
]


@pytest.fixture(scope="module")
def hta_ok() -> None:
    try:
        import_hta()
    except HtaError as exc:
        pytest.skip(f"HTA not usable here: {exc}")


@pytest.fixture(scope="module")
def cmp(reference_traces: Path, hta_ok):
    """``cmp(rel) -> (path, trace, comparison)``, computed once per trace for the module."""
    cache: dict = {}

    def get(rel: str):
        if rel not in cache:
            p = reference_traces / rel
            tr = load_trace(p)
            cache[rel] = (p, tr, compare_with_hta(p, trace=tr))
        return cache[rel]

    return get


def _public_hta(path: Path, monkeypatch, disable_rounding: bool = False):
    """HTA's own public entry point on one file, its logging quiet."""
    from hta.trace_analysis import TraceAnalysis

    if disable_rounding:
        monkeypatch.setenv("HTA_DISABLE_NS_ROUNDING", "1")
    else:
        monkeypatch.delenv("HTA_DISABLE_NS_ROUNDING", raising=False)
    logging.getLogger("hta").setLevel(logging.CRITICAL)
    return TraceAnalysis(trace_files={0: str(path)}, trace_dir=str(path.parent))


# --- where definitions match: within 1% ---------------------------------------------------------


@pytest.mark.parametrize("rel", TRACES)
def test_aligned_hta_agrees_with_launchgap(rel, cmp):
    _, _, c = cmp(rel)
    bad = [(r.metric, r.ours, r.hta_aligned, r.adjustments) for r in c.rows if not r.aligned_agree]
    assert not bad, f"HTA with its deviations off differs from launchgap by more than 1%: {bad}"
    assert {"kernels", "gpu_window_us", "gpu_busy_us", "gpu_idle_us", "launch_delay_us_mean"} <= {
        r.metric for r in c.rows}


SINGLE_STREAM = [
    "h200-1b/1b_bs8_eager.json.gz", "h200-1b/1b_bs8_graph.json.gz", "h200-1b/1b_bs1_eager.json.gz",
    "h200x2-tp2-1b/tp1b_bs1_eager_rank0.json.gz", "h200x2-tp2-1b/tp1b_bs1_graph_rank1.json.gz",
    "hta/amd_trace/mi250_minitoy_train_ROCm6_2_kineto.json.gz",
    "hta/with_gpu_user_annotation/step_based_trace_2543932.json.gz",
]


@pytest.mark.parametrize("rel", SINGLE_STREAM)
def test_per_stream_split_is_launchgaps_own_gap_causes(rel, cmp):
    """On a one-stream device the per-stream numbers compared are launchgap's reported causes."""
    _, tr, c = cmp(rel)
    rep = analyze_trace(tr)
    streams = np.unique(tr.stream[tr.gpu_mask])
    assert len(rep.devices) == 1 and streams.size == 1
    (d,) = rep.devices
    s = int(streams[0])
    cause = d.idle_us_by_cause
    assert c.row(f"stream {s} host_wait_us").ours == pytest.approx(
        cause["host"] + cause["launch"] + cause["sync"], abs=0.01)
    waits = c.row(f"stream {s} kernel_wait_us").ours + c.row(f"stream {s} other_us").ours
    assert waits == pytest.approx(cause["gpu"] + cause["unattributed"] + cause["peer"], abs=0.01)
    assert c.row("gpu_idle_us").ours == pytest.approx(d.gpu_idle_us, abs=0.01)


@pytest.mark.parametrize("rel", ["h200-1b/1b_bs8_eager.json.gz", "hta/nccl_parser_config/nccl_data.json.gz",
                                 "hta/critical_path/simple_add/benchmark_result_493459_1694039959_trace.json.gz",
                                 "hta/triton_example/triton_example.json.gz"])
def test_default_settings_are_htas_public_numbers(rel, cmp, monkeypatch):
    """The bridge's default run equals HTA's own TraceAnalysis, exactly."""
    p, _, c = cmp(rel)
    ta = _public_hta(p, monkeypatch)
    tb = ta.get_temporal_breakdown(visualize=False).iloc[0]
    t = c.hta.temporal
    assert (t.window_us, t.idle_us, t.compute_us, t.non_compute_us) == (
        tb["kernel_time(us)"], tb["idle_time(us)"], tb["compute_time(us)"], tb["non_compute_time(us)"])
    idle = ta.get_idle_time_breakdown(visualize=False)[0]
    for s in c.hta.streams:
        got = idle[idle.stream == s.stream].set_index("idle_category")["idle_time"]
        assert (s.host_wait_us, s.kernel_wait_us, s.other_us) == tuple(
            float(got.get(k, 0.0)) for k in ("host_wait", "kernel_wait", "other"))
    ls = ta.get_cuda_kernel_launch_stats(include_memory_events=False, visualize=False)[0]
    assert c.hta.launch.launches == len(ls)
    if len(ls):
        assert c.hta.launch.launch_delay_us_mean == pytest.approx(ls["launch_delay"].mean(), rel=1e-12)


# --- where they differ: the documented reason, measured --------------------------------------


def test_last_profiler_step_is_dropped(cmp):
    _, tr, c = cmp("h200-1b/1b_bs8_eager.json.gz")
    last_step_kernels = analyze_trace(tr).steps[-1].kernels
    assert last_step_kernels == 536
    row = c.row("kernels")
    assert (row.ours, row.hta) == (3216, 3216 - 536)
    assert row.deltas == {"last_profiler_step_dropped": -536}


def test_kernels_without_a_launch_call_are_dropped(cmp):
    """Graph traces: replayed kernels whose cudaGraphLaunch lies before the trace has none."""
    _, tr, c = cmp("h200-1b/1b_bs8_graph.json.gz")
    launchless = int(np.count_nonzero((tr.kind == Kind.KERNEL) & (tr.launch_idx < 0)))
    assert launchless == 743
    assert c.row("kernels").deltas["launched_before_last_step_end"] == -launchless


def test_launch_stats_count_only_cudaLaunchKernel(cmp):
    _, tr, c = cmp("h200-1b/1b_bs8_eager.json.gz")
    names = tr.names[tr.name_id[tr.api == Api.KERNEL_LAUNCH]]  # every kernel launch launchgap counts
    assert names.size == 3216
    assert c.row("launches (cudaLaunchKernel/ExC)").hta_aligned == int(np.isin(names, HTA_LAUNCH_APIS).sum()) == 2730
    assert int((names == "cuLaunchKernelEx").sum()) == 3216 - 2730  # the driver-API launches HTA skips
    # Graph replays: HTA has no launch statistics at all; launchgap counts the cudaGraphLaunch calls.
    _, gtr, g = cmp("h200-1b/1b_bs8_graph.json.gz")
    assert g.row("launches (cudaLaunchKernel/ExC)").hta == 0
    assert int(np.count_nonzero(gtr.api == Api.GRAPH_LAUNCH)) == 6


def test_rounding_shrinks_each_launch_call_to_whole_us(cmp):
    """HTA's rounding: start up to the next us, end down to the previous one (ceil / floor)."""
    _, tr, c = cmp("h200-1b/1b_bs8_eager.json.gz")
    rows = np.flatnonzero((tr.kind == Kind.RUNTIME) & np.isin(tr.names[tr.name_id], HTA_LAUNCH_APIS))
    ops = np.flatnonzero(tr.gpu_mask & np.isin(tr.launch_idx, rows))
    li = tr.launch_idx[ops]
    rounded = np.floor(tr.end_ns[li] / 1e3) - np.ceil(tr.start_ns[li] / 1e3)
    expected = rounded.mean() - tr.dur_ns[li].mean() / 1e3
    assert c.row("launch_cpu_us_mean").deltas["rounding_to_us"] == pytest.approx(expected, abs=1e-3)
    assert expected == pytest.approx(-1.0, abs=0.05)  # every call loses about a microsecond


def test_htas_temporal_breakdown_asserts_after_rounding(cmp, monkeypatch):
    """5 of the 8 h200-1b traces: rounding leaves sub-us kernels with negative durations and HTA's
    own ``assert non_compute_time >= 0`` fails; without the rounding it runs."""
    p, _, c = cmp("h200-1b/1b_bs8_graph.json.gz")
    assert c.hta.temporal is None
    assert c.hta.failures["temporal"].startswith("AssertionError")
    assert "26 GPU events have a negative duration after HTA's rounding" in c.hta.failures["temporal"]
    with pytest.raises(AssertionError):
        _public_hta(p, monkeypatch).get_temporal_breakdown(visualize=False)
    tb = _public_hta(p, monkeypatch, disable_rounding=True).get_temporal_breakdown(visualize=False).iloc[0]
    assert tb["kernel_time(us)"] == pytest.approx(run_hta(p, HtaSettings(round_to_us=False)).temporal.window_us)


@pytest.mark.parametrize("rel", [
    "hta/critical_path/simple_add/benchmark_result_493459_1694039959_trace.json.gz",
    "hta/critical_path/alexnet/benchmark_result_2869224_1695835535_trace.json.gz",
])
def test_cuda_sync_ranges_count_as_gpu_time(rel, cmp):
    """No ProfilerStep (HTA filters nothing) and whole-us timestamps (rounding is a no-op):
    the cuda_sync ranges are HTA's whole difference."""
    _, _, c = cmp(rel)
    for metric in ("gpu_window_us", "gpu_busy_us", "gpu_idle_us"):
        r = c.row(metric)
        assert set(r.deltas) == {"stream_events_as_gpu"}, r
        assert r.hta == pytest.approx(r.hta_aligned + r.deltas["stream_events_as_gpu"], abs=1e-6)
    assert c.row("gpu_window_us").deltas["stream_events_as_gpu"] > 0


def test_tritons_cpu_op_with_a_stream_arg_counts_as_gpu_time(cmp):
    p, _, c = cmp("hta/triton_example/triton_example.json.gz")
    w = c.row("gpu_window_us")
    assert (w.ours, w.hta, w.hta_aligned) == (1.76, 94.0, 1.76)
    assert w.deltas["stream_events_as_gpu"] == pytest.approx(94.052, abs=1e-3)
    # ... and its cuLaunchKernel is not in HTA's launch statistics.
    assert c.row("launches (cudaLaunchKernel/ExC)").hta == 0 and "1 launch calls" in c.row("launch_delay_us_p50").note


def test_overlapping_ops_on_a_stream_are_negative_idle_for_hta(cmp):
    _, tr, c = cmp("h200-1b/1b_bs1_eager.json.gz")
    gpu = np.flatnonzero(tr.gpu_mask)
    order = np.argsort(tr.start_ns[gpu], kind="stable")  # one stream in this trace
    starts, ends = tr.start_ns[gpu][order], tr.end_ns[gpu][order]
    step = starts[1:] - ends[:-1]
    assert int((step < 0).sum()) == 40  # back-to-back kernels reported overlapping by < 0.1 us
    row = c.row("stream 7 kernel_wait_us")
    assert row.adjustments["overlap_as_negative_idle"] == pytest.approx(step[step < 0].sum() / 1e3, abs=1e-3)
    assert row.aligned_agree and row.hta_aligned == pytest.approx(row.ours + row.adjustments[
        "overlap_as_negative_idle"], abs=0.01)


def test_epoch_microsecond_timestamps_keep_ns_precision(reference_traces):
    """Epoch-based timestamps (whole microseconds near 1.7e15 us) keep ns precision: every start is a
    whole multiple of 1000 ns (float64 ts*1000 alone would snap them to multiples of 256 ns)."""
    p = reference_traces / "hta/critical_path/cuda_event_sync_multi_stream/event_sync_trace.json.gz"
    tr = load_trace(p)
    off = tr.start_ns % 1000 != 0
    assert not off.any(), (f"{int(off.sum())} of {len(tr)} starts are off whole us; all are multiples of 256 ns: "
                           f"{bool(np.all(tr.start_ns % 256 == 0))}")


# --- traces one tool loads and the other does not ----------------------------------------------


@pytest.mark.parametrize(("rel", "message"), [
    ("hta/cpu_only/rank-34.Jul_15_10_52_41.1074.pt.trace.json.gz", "HTA sees no GPU events"),
    # The kernel carries no args: launchgap falls back to pid/tid for device/stream, HTA sees no stream.
    ("hta/large_integer_trace/rank-70.Mar_25_20_48_12.2861.pt.trace.json.gz", "args.stream only"),
    ("hta/execution_trace/benchmark_simple_add_et.json.gz", "HTA could not parse it (AttributeError"),
])
def test_traces_hta_cannot_analyse(rel, message, reference_traces, hta_ok):
    p = reference_traces / rel
    with pytest.raises(HtaError) as exc:
        run_hta(p)
    assert message in str(exc.value) and "\n" not in str(exc.value)


def test_mtia_trace_hta_analyses_and_launchgap_refuses(reference_traces, hta_ok):
    from launchgap.errors import NoGpuActivityError

    p = reference_traces / "hta/mtia_inference_trace/mtia_inference_rank_0.json.gz"
    r = run_hta(p)
    assert (r.kernels, r.temporal.window_us, len(r.streams)) == (0, 443275.0, 12)  # MTIA ops, no CUDA kernels
    with pytest.raises(NoGpuActivityError):
        load_trace(p)


def test_compact_json_rank_is_lost_on_htas_side_only(tmp_path, hta_ok):
    """HTA finds a file's rank with the regex ``"rank":\\s+(\\d+)``: compact JSON has no space,
    so every such file becomes rank 0 (two ranks in one folder collide)."""
    import json

    from hta.common.trace_file import create_rank_to_trace_dict

    doc = {"distributedInfo": {"rank": 3, "world_size": 4}, "traceEvents": [
        {"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 1.0, "dur": 2.0,
         "args": {"device": 0, "stream": 7}}]}
    p = tmp_path / "rank3.json"
    p.write_text(json.dumps(doc, separators=(",", ":")))
    logging.getLogger("hta").setLevel(logging.CRITICAL)
    assert create_rank_to_trace_dict([str(p)]) == (True, {0: str(p)})
    assert load_trace(p).rank == 3
