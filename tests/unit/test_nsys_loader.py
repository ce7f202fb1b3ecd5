"""The nsys SQLite loader on hand-built exports: NVTX flavours, API version suffixes, CUDA-graph
trace modes, several GPUs and processes, trimmed schemas, and every bad input (exit 2, one line).

Times in ns; the specs and their hand-worked numbers come from :mod:`tests.unit.test_gap_causes`.
"""
from __future__ import annotations

import dataclasses
import json
import os
import sqlite3
import stat
from contextlib import closing
from pathlib import Path

import numpy as np
import pytest

from launchgap.cli import main
from launchgap.errors import NoGpuActivityError, TraceFormatError, TraceTooLargeError
from launchgap.gaps import compute_gaps
from launchgap.loaders import load_trace
from launchgap.loaders.nsys import load_nsys
from launchgap.report import AnalysisOptions, analyze_trace
from launchgap.steps import StepOptions
from launchgap.trace import Api, Kind
from tests.builders import GpuOp, GraphReplay, TraceSpec, global_tid, write
from tests.unit.test_gap_causes import _no_cause, eager_spec, graph_spec, two_gpu_spec


def _nsys(spec: TraceSpec, tmp_path: Path, name: str = "trace", **opts) -> Path:
    return write(spec, "nsys", tmp_path, name, **opts)


def _sql(path: Path, *statements: str) -> None:
    with closing(sqlite3.connect(path)) as db:
        for s in statements:
            db.execute(s)
        db.commit()


def _annotations(trace) -> list[str]:
    return trace.name_of(np.flatnonzero(trace.kind == Kind.ANNOTATION)).tolist()


# ---- NVTX -------------------------------------------------------------------------------------

@pytest.mark.parametrize("nvtx", ["pushpop", "startend"])
@pytest.mark.parametrize("nvtx_text", ["text", "textId"])
def test_nvtx_ranges_become_steps(tmp_path: Path, nvtx: str, nvtx_text: str) -> None:
    trace = load_trace(_nsys(eager_spec(), tmp_path, nvtx=nvtx, nvtx_text=nvtx_text))
    assert _annotations(trace) == ["decode_step[bs=8]", "decode_step[bs=16]"]
    rep = analyze_trace(trace)
    assert rep.summary.step_source == "annotation"
    assert [s.batch_size for s in rep.steps] == [8, 16]
    # Same numbers as the Kineto trace of this spec (test_gap_causes): step 0 idle 22 us.
    assert rep.steps[0].idle_us_by_cause == _no_cause(host=4.0, launch=7.0, sync=1.0, gpu=5.0, unattributed=5.0)


def test_nvtx_marks_and_unfinished_ranges_are_skipped(tmp_path: Path) -> None:
    path = _nsys(eager_spec(), tmp_path)
    gt = global_tid(100, 1)
    _sql(path,
         # a mark (34) has no end; a push without its pop (59, end NULL); a domain-create record (75).
         f"INSERT INTO NVTX_EVENTS (start, end, eventType, text, globalTid) "
         f"VALUES (500, NULL, 34, 'decode_mark', {gt})",
         f"INSERT INTO NVTX_EVENTS (start, end, eventType, text, globalTid) "
         f"VALUES (150000, NULL, 59, 'decode_step[bs=99]', {gt})",
         f"INSERT INTO NVTX_EVENTS (start, end, eventType, text, globalTid) VALUES (0, NULL, 75, 'decode', {gt})")
    trace = load_trace(path)
    assert _annotations(trace) == ["decode_step[bs=8]", "decode_step[bs=16]"]
    assert "1 NVTX ranges never ended inside the capture and were left out" in trace.warnings
    assert analyze_trace(trace).summary.batch_sizes == [8, 16]


def test_step_regex_over_nvtx_text(tmp_path: Path) -> None:
    trace = load_trace(_nsys(eager_spec(), tmp_path))
    rep = analyze_trace(trace, AnalysisOptions(steps=StepOptions(step_regex=r"bs=16\]")))
    assert rep.summary.step_source == "user-regex"
    assert [(s.name, s.batch_size, s.dur_us) for s in rep.steps] == [("decode_step[bs=16]", 16, 30.0)]


def test_nvtx_host_rows_carry_pid_and_tid_from_global_tid(tmp_path: Path) -> None:
    trace = load_trace(_nsys(eager_spec(), tmp_path))
    host = np.flatnonzero(np.isin(trace.kind, (Kind.ANNOTATION, Kind.RUNTIME)))
    assert set(trace.pid[host].tolist()) == {100} and set(trace.tid[host].tolist()) == {1}
    assert set(trace.device[host].tolist()) == {-1} and set(trace.stream[host].tolist()) == {-1}
    gpu = np.flatnonzero(trace.gpu_mask)
    assert set(trace.pid[gpu].tolist()) == {100}
    assert sorted(set(trace.stream[gpu].tolist())) == [7, 8]


# ---- runtime names ----------------------------------------------------------------------------

def test_api_version_suffixes_are_classified(tmp_path: Path) -> None:
    spec = eager_spec()
    spec.call("cudaLaunchKernelExC", 180_000, 1_000, corr=40)
    spec.call("cudaDeviceSynchronize", 182_000, 1_000)
    spec.call("cudaMemcpyAsync", 184_000, 1_000, corr=41)
    spec.call("cudaGraphLaunch", 186_000, 1_000, corr=42)
    spec.call("cudaLaunchKernel_ptsz", 188_000, 1_000, corr=43)  # per-thread default stream variant
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    with_suffix = load_trace(_nsys(spec, tmp_path / "a"))
    plain = load_trace(_nsys(spec, tmp_path / "b", version_suffix=False))
    rt = np.flatnonzero(with_suffix.kind == Kind.RUNTIME)
    by_name = dict(zip(with_suffix.name_of(rt).tolist(), with_suffix.api[rt].tolist()))
    assert by_name == {
        "cudaLaunchKernel_v7000": Api.KERNEL_LAUNCH,
        "cudaLaunchKernelExC_v11060": Api.KERNEL_LAUNCH,
        "cudaLaunchKernel_ptsz_v3020": Api.KERNEL_LAUNCH,
        "cudaGraphLaunch_v10000": Api.GRAPH_LAUNCH,
        "cudaStreamSynchronize_v3020": Api.SYNC,
        "cudaDeviceSynchronize_v3020": Api.SYNC,
        "cudaMemcpyAsync_v3020": Api.OTHER,
    }
    np.testing.assert_array_equal(with_suffix.api, plain.api)


# ---- CUDA graphs ------------------------------------------------------------------------------

def _graph_trace_spec(annotate: bool = True) -> TraceSpec:
    """``graph_spec`` as nsys records it by default: each replay one GRAPH_TRACE row, no kernels.

    Replay 0 [15k, 30k) launched by cudaGraphLaunch [1k, 11k) corr 10; replay 1 [65k, 80k) by [51k, 61k) corr 11.
    """
    s = TraceSpec()
    for i, base in enumerate((0, 50_000)):
        if annotate:
            s.annotate("decode_step[bs=4]", base, 50_000)
        s.call("cudaGraphLaunch", base + 1_000, 10_000, corr=10 + i)
        s.replays.append(GraphReplay(graph_id=3, start_ns=base + 15_000, dur_ns=15_000, corr=10 + i))
    return s


def test_graph_trace_mode_one_busy_interval_per_replay(tmp_path: Path) -> None:
    trace = load_trace(_nsys(_graph_trace_spec(), tmp_path))
    assert np.count_nonzero(trace.kind == Kind.KERNEL) == 0
    graph_rows = np.flatnonzero(trace.kind == Kind.GRAPH)
    assert trace.start_ns[graph_rows].tolist() == [15_000, 65_000]
    assert trace.graph_id[graph_rows].tolist() == [3, 3]
    # Joined to their own cudaGraphLaunch by correlation id.
    assert trace.start_ns[trace.launch_idx[graph_rows]].tolist() == [1_000, 51_000]
    assert set(trace.api[trace.launch_idx[graph_rows]].tolist()) == {Api.GRAPH_LAUNCH}
    _, busy = compute_gaps(trace)
    assert busy[0].start_ns.tolist() == [15_000, 65_000] and busy[0].end_ns.tolist() == [30_000, 80_000]

    rep = analyze_trace(trace)
    assert rep.mode == "graph"
    assert rep.summary.graph_launches_per_step_median == 1.0
    assert any("--cuda-graph-trace=node" in w and w.startswith("2 CUDA-graph replays") for w in rep.warnings)
    for step in rep.steps:
        # The replay is one op: window = busy = 15 us, nothing idle inside; no kernels visible.
        assert (step.dur_us, step.gpu_busy_us, step.gpu_idle_us, step.kernels, step.graph_launches) == (
            15.0, 15.0, 0.0, 0, 1)
        # 10 us of cudaGraphLaunch for 15 us of replay; the replay starts 14 us after the call.
        assert (step.launch_api_us, step.launched_gpu_us, step.launch_delay_us_median) == (10.0, 15.0, 14.0)
    # Device: [15k, 80k) = 65 us, busy 30; the 35 us between replays: host 51k - 30k = 21, launch 65k - 51k = 14.
    (dev,) = rep.devices
    assert (dev.gpu_window_us, dev.gpu_busy_us, dev.gpu_idle_us, dev.kernels, dev.gpu_ops) == (65.0, 30.0, 35.0, 0, 2)
    assert dev.idle_us_by_cause == _no_cause(host=21.0, launch=14.0)


def test_graph_trace_mode_without_nvtx_steps_by_graph_launch(tmp_path: Path) -> None:
    rep = analyze_trace(load_trace(_nsys(_graph_trace_spec(annotate=False), tmp_path)))
    assert rep.summary.step_source == "graph-launch"
    assert rep.mode == "graph"
    assert [s.gpu_busy_us for s in rep.steps] == [15.0, 15.0]


def test_graph_trace_rows_without_timestamps_are_dropped(tmp_path: Path) -> None:
    path = _nsys(_graph_trace_spec(), tmp_path)
    _sql(path, "INSERT INTO CUPTI_ACTIVITY_KIND_GRAPH_TRACE (start, end, deviceId, streamId, correlationId, graphId) "
               "VALUES (0, 0, 0, 7, 12, 3)")
    trace = load_trace(path)
    assert np.count_nonzero(trace.kind == Kind.GRAPH) == 2
    assert "1 CUDA-graph replays have no timestamps in the export and were left out" in trace.warnings


def test_node_mode_kernels_carry_graph_id(tmp_path: Path) -> None:
    trace = load_trace(_nsys(graph_spec(), tmp_path))
    kernels = np.flatnonzero(trace.kind == Kind.KERNEL)
    assert kernels.size == 6 and set(trace.graph_id[kernels].tolist()) == {3}
    rep = analyze_trace(trace)
    assert rep.mode == "graph" and rep.summary.kernels_per_step_median == 3.0
    assert not any("cuda-graph-trace" in w for w in rep.warnings)


# ---- several GPUs and processes ---------------------------------------------------------------

def test_several_gpus_per_device_totals_and_names(tmp_path: Path) -> None:
    spec = two_gpu_spec()
    spec.device_names = {0: "NVIDIA H100 80GB HBM3", 1: "NVIDIA H200"}
    rep = analyze_trace(load_trace(_nsys(spec, tmp_path)))
    # Numbers worked out in test_gap_causes.test_two_devices_per_device_totals.
    assert [(d.device, d.name, d.kernels, d.gpu_busy_us, d.gpu_idle_us) for d in rep.devices] == [
        (0, "NVIDIA H100 80GB HBM3", 2, 16.0, 9.0), (1, "NVIDIA H200", 2, 7.0, 2.0)]


def _two_process_spec() -> TraceSpec:
    """Two ranks whose CUPTI correlation ids collide (both 1), each on its own GPU.

    pid 100: cudaLaunchKernel [1k, 3k)  -> kernel on device 0 [10k, 20k)
    pid 200: cudaLaunchKernel [8k, 9k)  -> kernel on device 1 [10k, 20k)
    """
    s = TraceSpec(device_names={0: "GPU A", 1: "GPU B"})
    s.launch("gemm", 1_000, 2_000, 10_000, 10_000, corr=1, device=0, pid=100)
    s.launch("gemm", 8_000, 1_000, 10_000, 10_000, corr=1, device=1, pid=200)
    return s


def test_correlation_ids_are_scoped_by_process(tmp_path: Path) -> None:
    trace = load_trace(_nsys(_two_process_spec(), tmp_path))
    k = np.flatnonzero(trace.kind == Kind.KERNEL)
    # Joined on the bare id, both kernels would take the earlier call (pid 100's at 1k).
    got = {int(trace.device[r]): (int(trace.pid[trace.launch_idx[r]]), int(trace.start_ns[trace.launch_idx[r]]))
           for r in k}
    assert got == {0: (100, 1_000), 1: (200, 8_000)}
    assert sorted(trace.corr[k].tolist()) == [(100 << 32) | 1, (200 << 32) | 1]


def test_same_cuda_ordinal_on_different_gpus_is_renumbered(tmp_path: Path) -> None:
    spec = _two_process_spec()
    # Each process sees only its own GPU as CUDA device 0 (CUDA_VISIBLE_DEVICES=0 / =1).
    spec.ops = [dataclasses.replace(o, device=0) for o in spec.ops]
    spec.cuda_devices = [(100, 0, 0), (200, 0, 1)]
    trace = load_trace(_nsys(spec, tmp_path))
    assert trace.devices == [0, 1]
    assert trace.device_names == {0: "GPU A", 1: "GPU B"}
    assert any("CUDA_VISIBLE_DEVICES" in w for w in trace.warnings)
    rep = analyze_trace(trace)
    assert [(d.device, d.gpu_busy_us) for d in rep.devices] == [(0, 10.0), (1, 10.0)]


def test_same_cuda_ordinal_without_mapping_is_merged_with_a_warning(tmp_path: Path) -> None:
    spec = _two_process_spec()
    spec.ops = [dataclasses.replace(o, device=0) for o in spec.ops]
    trace = load_trace(_nsys(spec, tmp_path))
    assert trace.devices == [0]
    assert any("busy time is merged" in w for w in trace.warnings)


# ---- trimmed schemas --------------------------------------------------------------------------

_TRIMS = {
    "no MEMCPY/MEMSET": dict(omit_tables=["CUPTI_ACTIVITY_KIND_MEMCPY", "CUPTI_ACTIVITY_KIND_MEMSET"]),
    "no TARGET_INFO_GPU": dict(omit_tables=["TARGET_INFO_GPU"]),
    "no META_DATA_EXPORT": dict(omit_tables=["META_DATA_EXPORT"]),
    "kernel shortName only": dict(drop_columns={"CUPTI_ACTIVITY_KIND_KERNEL": ["demangledName"]}),
    "no globalPid/globalTid": dict(drop_columns={"CUPTI_ACTIVITY_KIND_KERNEL": ["globalPid"],
                                                 "CUPTI_ACTIVITY_KIND_RUNTIME": ["globalTid"],
                                                 "NVTX_EVENTS": ["globalTid", "endGlobalTid"]}),
    "no graph columns": dict(drop_columns={"CUPTI_ACTIVITY_KIND_KERNEL": ["graphId", "graphNodeId"]}),
    "no NVTX eventType": dict(drop_columns={"NVTX_EVENTS": ["eventType"]}),
    "NVTX textId only": dict(nvtx_text="textId", drop_columns={"NVTX_EVENTS": ["text"]}),
    "NVTX text only": dict(drop_columns={"NVTX_EVENTS": ["textId"]}),
}


@pytest.mark.parametrize("trim", list(_TRIMS))
def test_missing_optional_tables_and_columns(tmp_path: Path, trim: str) -> None:
    rep = analyze_trace(load_trace(_nsys(eager_spec(), tmp_path, **_TRIMS[trim])))
    (dev,) = rep.devices
    # Device and step numbers of eager_spec, unchanged by the trim (see test_gap_causes).
    assert (dev.gpu_busy_us, dev.gpu_idle_us) == (58.0, 72.0)
    assert dev.idle_us_by_cause == _no_cause(host=40.0, launch=21.0, sync=1.0, gpu=5.0, unattributed=5.0)
    assert [s.batch_size for s in rep.steps] == [8, 16]
    assert dev.name == ("" if trim == "no TARGET_INFO_GPU" else "NVIDIA H200")


def test_without_nvtx_table_the_trace_is_one_window(tmp_path: Path) -> None:
    rep = analyze_trace(load_trace(_nsys(eager_spec(), tmp_path, omit_tables=["NVTX_EVENTS"])))
    assert rep.summary.step_source == "whole-trace"
    assert rep.devices[0].gpu_busy_us == 58.0


def test_kernel_names_prefer_demangled_then_short(tmp_path: Path) -> None:
    spec = TraceSpec()
    spec.launch("void at::native::vectorized_elementwise_kernel<4>(int)", 0, 1_000, 2_000, 1_000, corr=1)
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    full = load_trace(_nsys(spec, tmp_path / "a"))
    short = load_trace(_nsys(spec, tmp_path / "b", drop_columns={"CUPTI_ACTIVITY_KIND_KERNEL": ["demangledName"]}))
    k = lambda t: t.name_of(np.flatnonzero(t.kind == Kind.KERNEL)).tolist()  # noqa: E731
    assert k(full) == ["void at::native::vectorized_elementwise_kernel<4>(int)"]
    assert k(short) == ["void at::native::vectorized_elementwise_kernel"]


def test_memcpy_and_memset_are_gpu_ops(tmp_path: Path) -> None:
    spec = TraceSpec()
    spec.call("cudaMemcpyAsync", 0, 1_000, corr=1)
    spec.ops.append(GpuOp("Memcpy HtoD", 2_000, 3_000, corr=1, kind="memcpy"))
    spec.call("cudaMemsetAsync", 1_000, 1_000, corr=2)
    spec.ops.append(GpuOp("Memset", 4_000, 2_000, corr=2, kind="memset"))
    trace = load_trace(_nsys(spec, tmp_path))
    gpu = np.flatnonzero(trace.gpu_mask)
    assert trace.kind[gpu].tolist() == [Kind.MEMCPY, Kind.MEMSET]
    assert trace.name_of(gpu).tolist() == ["Memcpy HtoD", "Memset"]
    # [2k, 5k) and [4k, 6k) overlap: busy is their union, 4 us.
    assert analyze_trace(trace).devices[0].gpu_busy_us == 4.0


def test_invalid_utf8_text_is_decoded_leniently(tmp_path: Path) -> None:
    path = _nsys(eager_spec(), tmp_path)
    _sql(path, "UPDATE NVTX_EVENTS SET text = CAST(X'6465636F64655F737465705B62733D385DFF' AS TEXT) "
               "WHERE text = 'decode_step[bs=8]'")  # 'decode_step[bs=8]' + a lone 0xFF byte
    trace = load_trace(path)
    assert _annotations(trace) == ["decode_step[bs=8]\ufffd", "decode_step[bs=16]"]
    assert analyze_trace(trace).summary.batch_sizes == [8, 16]


def test_file_is_not_modified(tmp_path: Path) -> None:
    path = _nsys(eager_spec(), tmp_path)
    before = (path.read_bytes(), path.stat().st_mtime_ns)
    path.chmod(stat.S_IRUSR)  # read-only, as uploaded files may be
    load_trace(path)
    assert (path.read_bytes(), path.stat().st_mtime_ns) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == [path.name]  # no -journal / -wal left beside it


# ---- bad input --------------------------------------------------------------------------------

def _one_line(capsys, argv: list[str], path: Path, reason: str) -> None:
    rc = main(argv)
    out, err = capsys.readouterr()
    assert rc == 2
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert str(path) in lines[0] and reason in lines[0], lines[0]
    assert "Traceback" not in err and out == ""


def _bad_sqlite(tmp_path: Path) -> dict[str, tuple[Path, str, type]]:
    out: dict[str, tuple[Path, str, type]] = {}
    other = tmp_path / "launchgap.dashboard.sqlite"
    _sql(other, "CREATE TABLE users (id INTEGER, name TEXT)", "INSERT INTO users VALUES (1, 'a')")
    out["not nsys"] = (other, "not an Nsight Systems export", TraceFormatError)
    garbage = tmp_path / "garbage.sqlite"
    garbage.write_bytes(b"SQLite format 3\x00" + bytes(range(256)) * 64)
    out["corrupt"] = (garbage, "corrupt or unreadable SQLite file", TraceFormatError)
    good = _nsys(eager_spec(), tmp_path, "good").read_bytes()
    cut = tmp_path / "cut.sqlite"
    cut.write_bytes(good[: len(good) // 2])
    out["truncated"] = (cut, "corrupt or unreadable SQLite file", TraceFormatError)
    empty = TraceSpec()
    empty.annotate("decode_step[bs=1]", 0, 1_000)
    empty.call("cudaStreamSynchronize", 0, 500)
    out["no gpu activity"] = (_nsys(empty, tmp_path, "idle"), "no GPU kernels", NoGpuActivityError)
    nvtx_only = tmp_path / "nvtx_only.sqlite"
    _sql(nvtx_only, "CREATE TABLE NVTX_EVENTS (start INTEGER, end INTEGER, eventType INTEGER, text TEXT)",
         "INSERT INTO NVTX_EVENTS VALUES (0, 10, 59, 'decode')")
    out["no cuda tables"] = (nvtx_only, "--trace=cuda", NoGpuActivityError)
    no_end = tmp_path / "no_end.sqlite"
    _sql(no_end, "CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL (start INTEGER, deviceId INTEGER)",
         "INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL VALUES (0, 0)")
    out["no end column"] = (no_end, "has no 'end' column", TraceFormatError)
    return out


@pytest.mark.parametrize("case", ["not nsys", "corrupt", "truncated", "no gpu activity", "no cuda tables",
                                  "no end column"])
def test_bad_sqlite_raises(tmp_path: Path, case: str) -> None:
    path, reason, err = _bad_sqlite(tmp_path)[case]
    with pytest.raises(err) as exc:
        load_trace(path)
    assert reason in str(exc.value) and str(path) in str(exc.value)
    assert "\n" not in str(exc.value)


@pytest.mark.parametrize("case", ["not nsys", "corrupt", "truncated", "no gpu activity", "no cuda tables",
                                  "no end column"])
def test_bad_sqlite_exits_2_with_one_line(tmp_path: Path, capsys, case: str) -> None:
    path, reason, _ = _bad_sqlite(tmp_path)[case]
    _one_line(capsys, ["analyze", str(path)], path, reason)


def test_size_cap(tmp_path: Path, capsys) -> None:
    path = _nsys(eager_spec(), tmp_path)
    with pytest.raises(TraceTooLargeError):
        load_nsys(path, max_bytes=1_000)
    _one_line(capsys, ["analyze", str(path), "--max-trace-bytes", "1000"], path, "cap (--max-trace-bytes)")


def test_cli_json_on_nsys_export(tmp_path: Path, capsys) -> None:
    path = _nsys(eager_spec(), tmp_path)
    assert main(["analyze", str(path), "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    (t,) = doc["traces"]
    assert (t["format"], t["mode"], t["summary"]["batch_sizes"]) == ("nsys", "eager", [8, 16])
    assert t["devices"][0]["idle_us_by_cause"]["host"] == 40.0


# ---- .nsys-rep --------------------------------------------------------------------------------

def _rep(tmp_path: Path) -> Path:
    rep = tmp_path / "run.nsys-rep"
    rep.write_bytes(b"NSYS-REPORT not an export\x00\x01")
    return rep


def test_nsys_rep_without_nsys_names_the_export_command(tmp_path: Path, capsys, monkeypatch) -> None:
    empty_bin = tmp_path / "bin"
    empty_bin.mkdir()
    monkeypatch.setenv("PATH", str(empty_bin))
    rep = _rep(tmp_path)
    command = f"nsys export --type sqlite --output {tmp_path / 'run.sqlite'} {rep}"
    with pytest.raises(TraceFormatError) as exc:
        load_trace(rep)
    assert command in str(exc.value)
    _one_line(capsys, ["analyze", str(rep)], rep, command)


def _fake_nsys(folder: Path, body: str) -> None:
    """An `nsys` stand-in on PATH for the test (our own script, not an uploaded file)."""
    folder.mkdir(exist_ok=True)
    script = folder / "nsys"
    script.write_text("#!/bin/sh\n" + body)
    script.chmod(0o755)


def test_nsys_rep_is_exported_with_nsys_and_loaded(tmp_path: Path, monkeypatch) -> None:
    export = _nsys(eager_spec(), tmp_path, "prepared")
    # Copy the prepared export to the path after --output, as `nsys export` would write it.
    _fake_nsys(tmp_path / "bin", f'while [ "$1" != "--output" ]; do shift; done\ncp "{export}" "$2"\n')
    monkeypatch.setenv("PATH", str(tmp_path / "bin") + os.pathsep + os.environ.get("PATH", ""))
    rep = _rep(tmp_path)
    trace = load_trace(rep)
    assert trace.path == str(rep) and trace.format == "nsys"
    assert analyze_trace(trace).devices[0].gpu_busy_us == 58.0


def test_nsys_rep_export_failure_is_one_line(tmp_path: Path, capsys, monkeypatch) -> None:
    _fake_nsys(tmp_path / "bin", 'echo "some progress" >&2\necho "ERROR: cannot open report" >&2\nexit 1\n')
    monkeypatch.setenv("PATH", str(tmp_path / "bin") + os.pathsep + os.environ.get("PATH", ""))
    rep = _rep(tmp_path)
    _one_line(capsys, ["analyze", str(rep)], rep, "`nsys export` failed: ERROR: cannot open report")
