"""The optimised Kineto loader gives exactly what a plain ``json``-module loader gives.

``_reference_trace`` below is the straightforward reading of the loader's contract
(the semantics of the first, unoptimised loader, event by event in Python), kept here
as the oracle: every Trace column, the interned names, device names, rank and warnings,
and the whole analysis report must be identical, on the real traces in
``traces/`` (h200-1b, h200x2-tp2-1b, hta) and on hand-built and generated edge cases,
with the loader's streaming chunk size small enough to split every file many times.
"""
from __future__ import annotations

import dataclasses
import gzip
import json
import math
from pathlib import Path
from typing import Any
from unittest import mock

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from launchgap.errors import AnalyzerError, NoGpuActivityError, TraceFormatError
from launchgap.loaders.kineto import cutting, load_kineto
from launchgap.report import analyze_trace
from launchgap.trace import Kind, Trace, build_trace

_CAT_KIND = {
    "kernel": Kind.KERNEL, "gpu_memcpy": Kind.MEMCPY, "gpu_memset": Kind.MEMSET,
    "cuda_runtime": Kind.RUNTIME, "cuda_driver": Kind.RUNTIME, "cpu_op": Kind.CPU_OP,
    "user_annotation": Kind.ANNOTATION, "gpu_user_annotation": Kind.GPU_ANNOTATION,
}
_SCALARS = (int, float, str, type(None))


def _as_int(v: Any, default: int = -1) -> int:
    if v is None or isinstance(v, bool):
        return default
    if isinstance(v, int):
        return v if -(2**63) <= v < 2**63 else default
    if isinstance(v, float):
        return int(v) if v == v and abs(v) < 2**63 else default
    try:
        return int(v, 0)
    except (TypeError, ValueError):
        return default


def _as_us(v: Any) -> float:
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        try:
            return float(v)
        except OverflowError:
            return float("nan")
    if isinstance(v, str):
        try:
            return float(v)
        except ValueError:
            return float("nan")
    return float("nan")


def _reference_trace(path: Path) -> Trace:
    """Event-by-event reading with the json module (Input Dims text as json.dumps writes it)."""
    raw = path.read_bytes()
    doc = json.loads(gzip.decompress(raw) if raw[:2] == b"\x1f\x8b" else raw)
    events = doc["traceEvents"]
    names: dict[str, int] = {}
    ids: dict[str, int] = {}

    def str_id(v: Any) -> int:
        if isinstance(v, int) and not isinstance(v, bool):
            return v if -(2**63) <= v < 2**63 else -1
        return ids.setdefault(str(v), -2 - len(ids))

    kept = [e for e in events if e.get("ph") == "X" and isinstance(e.get("cat"), str) and e["cat"] in _CAT_KIND]
    flows = [e for e in events if e.get("cat") == "ac2g" and e.get("ph") == "f"]
    kind, name_id, ts, dur, dims = [], [], [], [], []
    corr, dev_arg, stream_arg, graph_id, kernel_arg = [], [], [], [], []
    launch = []  # grid x, y, z, block x, y, z
    resources: dict[int, tuple[int, int]] = {}  # kernel name id -> the largest registers, shared memory
    for e in kept:
        kind.append(_CAT_KIND[e["cat"]])
        nm = e.get("name")
        name_id.append(names.setdefault(nm if isinstance(nm, str) else str(nm), len(names)))
        args = e.get("args") or {}
        assert isinstance(args, dict)
        ts.append(_as_us(e.get("ts")))
        dur.append(_as_us(e["dur"]) if e.get("dur") is not None else 0.0)
        corr.append(_as_int(args.get("correlation")))
        dev_arg.append(_as_int(args.get("device")))
        stream_arg.append(_as_int(args.get("stream")))
        graph_id.append(_as_int(args.get("graph id")))
        kernel_arg.append(args.get("kernel") if isinstance(args.get("kernel"), str) and args.get("kernel") else None)
        dims.append(json.dumps(args["Input Dims"]) if "Input Dims" in args else None)
        launch.append([*_dim3_reference(args.get("grid")), *_dim3_reference(args.get("block"))])
        regs, smem = _resource_reference(args.get("registers per thread")), _resource_reference(args.get("shared memory"))
        if kind[-1] == Kind.KERNEL and (regs >= 0 or smem >= 0):
            old = resources.get(name_id[-1], (-1, -1))
            resources[name_id[-1]] = (max(old[0], regs), max(old[1], smem))
    # Launch calls' kernel args (ROCm), then Input Dims texts share the name table, interned after every name.
    kernel_name_id = [names.setdefault(k, len(names)) if k is not None else -1 for k in kernel_arg]
    dims_id = [names.setdefault(d, len(names)) if d is not None else -1 for d in dims]
    pid = np.array([str_id(e.get("pid")) for e in kept], dtype=np.int64)
    tid = np.array([str_id(e.get("tid")) for e in kept], dtype=np.int64)
    kind_a = np.array(kind, dtype=np.int8)
    ts_a, dur_a = np.array(ts, dtype=np.float64), np.array(dur, dtype=np.float64)
    corr_a = np.array(corr, dtype=np.int64)
    dev_a, stream_a = np.array(dev_arg, dtype=np.int64), np.array(stream_arg, dtype=np.int64)
    gpu = (kind_a <= Kind.GRAPH) | (kind_a == Kind.GPU_ANNOTATION)
    device = np.where(gpu, np.where(dev_a >= 0, dev_a, pid), -1)
    stream = np.where(gpu, np.where(stream_a >= 0, stream_a, tid), -1)

    # Old Kineto: the correlation only on the ac2g flow end, which sits on the GPU op (pid, tid, ts).
    need = [i for i in range(len(kept)) if kind_a[i] <= Kind.GRAPH and corr_a[i] < 0]
    if flows and need:
        by_key: dict[tuple[int, int, int], int] = {}
        f_keys = [(str_id(f.get("pid")), str_id(f.get("tid")), _as_us(f.get("ts")), _as_int(f.get("id")))
                  for f in flows]
        for fp, ft, fts, fid in f_keys:
            key = (fp, ft, int(np.rint(fts * 1000)) if math.isfinite(fts) else -(2**63))
            by_key.setdefault(key, fid)  # the first flow of a key wins, like a stable sort
        for i in need:
            key = (int(pid[i]), int(tid[i]), int(np.rint(ts_a[i] * 1000)) if math.isfinite(ts_a[i]) else -(2**63))
            if key in by_key:
                corr_a[i] = by_key[key]

    with np.errstate(invalid="ignore"):
        bad = ~np.isfinite(ts_a) | ~np.isfinite(dur_a) | (np.abs(ts_a) >= 9.2e15) | (np.abs(dur_a) >= 9.2e15)
    warnings = [f"dropped {int(bad.sum())} events without a numeric ts/dur in range"] if bad.any() else []
    keep = ~bad
    columns = {
        "kind": kind_a, "name_id": np.array(name_id, dtype=np.int32), "device": device, "stream": stream,
        "pid": pid, "tid": tid,
        # ns precision for epoch-us times: a whole-us base first (as the loader does, independently here)
        "start_ns": _start_ns_reference(ts_a, keep),
        "dur_ns": np.rint(np.where(keep, dur_a, 0.0) * 1000.0).astype(np.int64),
        "corr": corr_a, "graph_id": np.array(graph_id, dtype=np.int64), "dims_id": np.array(dims_id, dtype=np.int32),
        "kernel_name_id": np.array(kernel_name_id, dtype=np.int32),
        **dict(zip(("grid_x", "grid_y", "grid_z", "block_x", "block_y", "block_z"),
                   np.array(launch, dtype=np.int64).reshape(-1, 6).T)),
    }
    columns = {k: v[keep] for k, v in columns.items()}
    device_names = {}
    for d in doc.get("deviceProperties") or []:
        if _as_int(d.get("id")) >= 0 and isinstance(d.get("name"), str):
            device_names[_as_int(d.get("id"))] = d["name"]
    device_properties = _device_properties_reference(doc.get("deviceProperties") or [])
    dist = doc.get("distributedInfo") or {}
    r, w = _as_int(dist.get("rank")), _as_int(dist.get("world_size"))
    trace = build_trace(path=str(path), format="kineto", names=list(names), columns=columns,
                        device_names=device_names, rank=r if r >= 0 else None, world_size=w if w > 0 else None,
                        warnings=warnings, profiler_settings=_settings_reference(doc, events),
                        device_properties=device_properties, kernel_resources=resources)
    if not trace.gpu_mask.any():
        raise NoGpuActivityError("no GPU kernels, copies or sets in the trace; nothing to analyse", str(path))
    return trace


_DEVICE_KEYS = {"totalGlobalMem": "total_memory_bytes", "numSms": "sm_count", "warpSize": "warp_size",
                "maxThreadsPerBlock": "max_threads_per_block", "maxThreadsPerMultiprocessor": "max_threads_per_sm",
                "regsPerBlock": "registers_per_block", "regsPerMultiprocessor": "registers_per_sm",
                "sharedMemPerBlock": "shared_memory_per_block_bytes",
                "sharedMemPerBlockOptin": "shared_memory_per_block_optin_bytes",
                "sharedMemPerMultiprocessor": "shared_memory_per_sm_bytes",
                "maxSharedMemoryPerMultiProcessor": "shared_memory_per_sm_bytes"}


def _device_properties_reference(devices: list) -> dict:
    """deviceProperties under the normalised keys (launchgap.trace.DEVICE_PROPERTY_KEYS)."""
    def is_count(v: Any) -> bool:
        return isinstance(v, int) and not isinstance(v, bool) and v >= 0

    out: dict = {}
    for d in devices:
        dev = _as_int(d.get("id"))
        if dev < 0:
            continue
        props: dict = {"name": d["name"]} if isinstance(d.get("name"), str) else {}
        for src, key in _DEVICE_KEYS.items():
            if is_count(d.get(src)) and key not in props:
                props[key] = d[src]
        if is_count(d.get("computeMajor")) and is_count(d.get("computeMinor")):
            props["compute_capability"] = f"{d['computeMajor']}.{d['computeMinor']}"
        out[dev] = props
    return out


def _dim3_reference(v: Any) -> list[int]:
    """A kernel's grid/block: three ints, each -1 unless in [0, 2^31); anything else -1s."""
    if isinstance(v, list) and len(v) == 3 and all(isinstance(x, int) and not isinstance(x, bool) for x in v):
        return [x if 0 <= x < 2**31 else -1 for x in v]
    return [-1, -1, -1]


def _resource_reference(v: Any) -> int:
    """A kernel's registers per thread or shared memory: an int in [0, 2^31), else -1."""
    return v if isinstance(v, int) and not isinstance(v, bool) and 0 <= v < 2**31 else -1


def _settings_reference(doc: dict, events: list) -> dict:
    """The profiler settings as the loader records them: top-level flags, counts over the first events."""
    out: dict[str, Any] = {}
    for k in ("record_shapes", "with_stack", "with_flops", "with_modules", "profile_memory"):
        v = doc.get(k)
        if isinstance(v, str):
            out[k] = v.strip().lower() in ("1", "true", "yes", "on")
        else:
            out[k] = bool(v) if isinstance(v, (bool, int, float)) and v == v else None
    sample = [e if isinstance(e, dict) else {} for e in events[:50_000]]
    ops = [e for e in sample if e.get("cat") == "cpu_op"]
    out.update(python_function_events=sum(e.get("cat") == "python_function" for e in sample),
               instant_events=sum(e.get("cat") == "cpu_instant_event" for e in sample), cpu_ops=len(ops),
               cpu_ops_with_call_stack=sum(isinstance(e.get("args"), dict) and e["args"].get("Call stack")
                                           not in (None, "", []) for e in ops),
               events_sampled=len(sample))
    return out


_FIELDS = ("kind", "name_id", "device", "stream", "pid", "tid", "start_ns", "dur_ns", "corr", "graph_id",
           "dims_id", "kernel_name_id", "grid_x", "grid_y", "grid_z", "block_x", "block_y", "block_z", "end_ns",
           "api", "launch_idx")


def _same_name_table(got: list[str], want: list[str]) -> bool:
    """Equal entry by entry, except that Input Dims may differ in JSON whitespace only.

    The loader keeps the file's own text of Input Dims; the reference only sees parsed
    values and writes them as json.dumps does. For Kineto's own traces the two are the
    same text; pretty-printed files differ in whitespace.
    """
    if len(got) != len(want):
        return False
    for g, w in zip(got, want):
        if g == w:
            continue
        try:
            if json.dumps(json.loads(g)) != w:
                return False
        except ValueError:
            return False
    return True


def assert_same_trace(got: Trace, want: Trace) -> None:
    assert _same_name_table(list(got.names), list(want.names)), (list(got.names), list(want.names))
    for f in _FIELDS:
        a, b = getattr(got, f), getattr(want, f)
        assert a.dtype == b.dtype, f
        np.testing.assert_array_equal(a, b, err_msg=f)
    assert got.device_names == want.device_names
    assert got.device_properties == want.device_properties
    assert ({got.names[k]: v for k, v in got.kernel_resources.items()}
            == {want.names[k]: v for k, v in want.kernel_resources.items()})
    assert (got.rank, got.world_size, got.warnings) == (want.rank, want.world_size, want.warnings)
    assert (got.path, got.format) == (want.path, want.format)
    assert got.profiler_settings == want.profiler_settings


def _load_both(path: Path, chunk_bytes: int | None) -> tuple[Trace | type, Trace | type]:
    def attempt(fn):
        try:
            return fn()
        except AnalyzerError as exc:
            return type(exc)

    kw = {} if chunk_bytes is None else {"chunk_bytes": chunk_bytes}
    return attempt(lambda: load_kineto(path, **kw)), attempt(lambda: _reference_trace(path))


# --- real traces ------------------------------------------------------------------------------

def _real_traces(root: Path) -> list[Path]:
    out = []
    for sub in ("h200-1b", "h200x2-tp2-1b", "hta"):
        out += sorted(p for p in (root / sub).rglob("*.json*") if p.name != "truth.json")
    return out


def test_real_traces_match_reference(reference_traces: Path) -> None:
    files = _real_traces(reference_traces)
    assert len(files) > 20
    compared = 0
    for path in files:
        doc = json.loads(gzip.decompress(path.read_bytes()) if path.suffix == ".gz" else path.read_bytes())
        if not isinstance(doc, dict) or "traceEvents" not in doc:
            continue  # an execution trace, not a Kineto one
        want = _reference_trace_or_error(path)
        # Default chunking, and chunks small enough to cut the file in about a hundred places.
        small = max(1 << 12, path.stat().st_size * 10 // 100)
        for chunk in (None, small):
            got = _loaded_or_error(path, chunk)
            if isinstance(want, type):
                assert got is want, (path, chunk)
                continue
            assert isinstance(got, Trace), (path, chunk, got)
            assert_same_trace(got, want)
            if chunk is None:  # same columns give the same report; check it once
                # The reference reads columns only; profiler-settings detection (metadata and
                # sampled events) has its own tests, so both reports start from the loader's.
                same = dataclasses.replace(want, profiler_settings=got.profiler_settings)
                assert analyze_trace(got).to_dict() == analyze_trace(same).to_dict(), path
        compared += 1
    assert compared > 20


def _reference_trace_or_error(path: Path) -> Trace | type:
    try:
        return _reference_trace(path)
    except AnalyzerError as exc:
        return type(exc)


def _loaded_or_error(path: Path, chunk: int | None, stretch: int | None = None) -> Trace | type:
    """The loader's trace or error type; ``stretch``: decode each piece in stretches of this many
    bytes instead of :data:`SUB_PIECE_BYTES` (so small files are cut there too)."""
    try:
        with mock.patch.object(cutting, "SUB_PIECE_BYTES", stretch or cutting.SUB_PIECE_BYTES):
            return load_kineto(path) if chunk is None else load_kineto(path, chunk_bytes=chunk)
    except AnalyzerError as exc:
        return type(exc)


# --- hand-built edge cases ------------------------------------------------------------------

def _ev(cat: str, name: str, ts: Any, dur: Any = 1.0, pid: Any = 1, tid: Any = 1, **args: Any) -> dict:
    e: dict[str, Any] = {"ph": "X", "cat": cat, "name": name, "pid": pid, "tid": tid, "ts": ts, "dur": dur}
    if args:
        e["args"] = {k.replace("_", " ") if k == "graph_id" else k: v for k, v in args.items()}
    return e


def _step(i: int, t: float) -> list[dict]:
    """One annotated step: a CPU op with shapes, a launch, its kernel, a memcpy."""
    return [
        _ev("user_annotation", f"decode_step[bs={i + 1}]", t, 50.0),
        _ev("cpu_op", "aten::mm", t + 1, 10.0, **{"Input Dims": [[i + 1, 8], [8, 8]], "External id": i}),
        _ev("cuda_runtime", "cudaLaunchKernel", t + 2, 5.0, correlation=100 + i),
        _ev("kernel", "gemm {with} braces}, {", t + 9, 3.0, pid=0, tid=7, device=0, stream=7, correlation=100 + i),
        _ev("gpu_memcpy", "Memcpy DtoH", t + 20, 2.0, pid=0, tid=7, device=0, stream=7, correlation=900 + i),
    ]


def _write(tmp: Path, name: str, doc: Any, *, indent: int | None = None, sep: tuple[str, str] | None = None,
           gz: bool = False) -> Path:
    text = json.dumps(doc, indent=indent, separators=sep).encode()
    p = tmp / (name + (".json.gz" if gz else ".json"))
    p.write_bytes(gzip.compress(text) if gz else text)
    return p


def _check(path: Path, chunks: tuple[int, ...] = (1, 7, 64, 1 << 20), stretches: tuple[int, ...] = (1, 40, 300)
           ) -> None:
    want = _reference_trace_or_error(path)
    # pieces of every size, then the whole text in one piece decoded in stretches of every size
    for chunk, stretch in [(c, None) for c in chunks] + [(1 << 20, s) for s in stretches]:
        got = _loaded_or_error(path, chunk, stretch)
        if isinstance(want, type):
            assert got is want, (path.name, chunk, stretch, got)
        else:
            assert isinstance(got, Trace), (path.name, chunk, stretch, got)
            assert_same_trace(got, want)


def _events(n_steps: int = 4) -> list[dict]:
    evs: list[dict] = []
    for i in range(n_steps):
        evs += _step(i, 1000.0 + 100.0 * i)
    return evs


@pytest.mark.parametrize("layout", ["compact", "spaced", "pretty", "gzip"])
def test_layouts_and_cuts(tmp_path: Path, layout: str) -> None:
    evs = _events()
    # Strings and unknown args holding "}, {" and nested objects: cut candidates that are not cuts.
    evs.insert(3, {"ph": "X", "cat": "python_function", "name": '}, {"ph": "X"}, {', "pid": 1, "tid": 1,
                   "ts": 1001.5, "dur": 0.5, "args": {"nested": [{"a": 1}, {"b": "},{"}], "s": "{{{"}})
    evs.append({"ph": "M", "name": "process_name", "pid": "Spans", "tid": 0, "args": {"name": "x"}})
    doc = {"schemaVersion": 1, "deviceProperties": [{"id": 0, "name": "NVIDIA H200"}], "traceEvents": evs,
           "traceName": "t"}
    kw = {"compact": dict(sep=(",", ":")), "spaced": {}, "pretty": dict(indent=2), "gzip": dict(gz=True)}[layout]
    _check(_write(tmp_path, layout, doc, **kw))


def test_keys_around_trace_events(tmp_path: Path) -> None:
    evs = _events()
    # distributedInfo and deviceProperties after the events; a decoy "traceEvents" text before them.
    doc = {"traceName": 'has "traceEvents": [ in it', "traceEvents": evs,
           "deviceProperties": [{"id": 0, "name": "GPU A"}, {"id": 1, "name": 5}],
           "distributedInfo": {"rank": 1, "world_size": 2}}
    _check(_write(tmp_path, "after", doc))
    nested = {"meta": {"traceEvents": [1]}, "traceEvents": evs}
    _check(_write(tmp_path, "nested", nested))
    _check(_write(tmp_path, "empty", {"traceEvents": []}))


def test_values_outside_the_strict_schema(tmp_path: Path) -> None:
    evs = _events()
    evs[0]["pid"] = "host one"  # a string pid on a kept row
    evs[1]["tid"] = 2**64  # past int64
    evs[2]["ts"] = "1002"  # a number as a string
    evs[3]["args"]["stream"] = "0x7"  # ROCm writes some ids as strings
    evs[4]["dur"] = None
    del evs[5]["name"]
    evs[6]["args"]["correlation"] = 2**63  # past int64
    evs[7]["ts"] = None  # dropped, with a warning
    evs[8]["args"]["Input Dims"] = None
    evs[9]["pid"] = 3.5
    _check(_write(tmp_path, "odd", {"traceEvents": evs}))


def test_ints_past_int64_in_strict_fields(tmp_path: Path) -> None:
    evs = _events()
    evs[2]["args"]["correlation"] = 2**63 + 5  # an int the strict schema takes but int64 cannot hold
    evs[4]["tid"] = -(2**63) - 1
    evs[6]["ts"] = 1200  # an int where Kineto writes a float
    _check(_write(tmp_path, "bigints", {"traceEvents": evs}))


def test_old_kineto_correlation_on_flows(tmp_path: Path) -> None:
    evs = _events()
    flows = []
    for e in evs:
        if e["cat"] in ("kernel", "gpu_memcpy"):
            corr = e["args"].pop("correlation")
            flows.append({"ph": "f", "id": corr, "pid": e["pid"], "tid": e["tid"], "ts": e["ts"], "cat": "ac2g",
                          "name": "ac2g", "bp": "e"})
    _check(_write(tmp_path, "flows", {"traceEvents": evs + flows}))
    t = load_kineto(tmp_path / "flows.json", chunk_bytes=64)
    kernels = t.kind == Kind.KERNEL
    assert kernels.sum() == 4 and (t.launch_idx[kernels] >= 0).all()  # joined through the flows' ids


def test_concatenated_gzip_members(tmp_path: Path) -> None:
    text = json.dumps({"traceEvents": _events()}).encode()
    p = tmp_path / "multi.json.gz"
    p.write_bytes(gzip.compress(text[:1000]) + gzip.compress(text[1000:]) + b"\0" * 16)
    _check(p)


def test_broken_files_give_the_whole_document_error(tmp_path: Path) -> None:
    text = json.dumps({"traceEvents": _events()}).encode()
    cut = tmp_path / "cut.json"
    cut.write_bytes(text[: len(text) * 2 // 3])
    with pytest.raises(TraceFormatError, match="truncated JSON"):
        load_kineto(cut, chunk_bytes=64)
    trailing = tmp_path / "trailing.json"
    trailing.write_bytes(text + b" {}")
    with pytest.raises(TraceFormatError, match="not valid JSON"):
        load_kineto(trailing, chunk_bytes=64)
    gz = tmp_path / "cut.json.gz"
    gz.write_bytes(gzip.compress(text * 50)[:-40])
    with pytest.raises(TraceFormatError, match="truncated gzip"):
        load_kineto(gz, chunk_bytes=256)
    garbage = tmp_path / "garbage.json.gz"
    garbage.write_bytes(gzip.compress(text) + b"not gzip")
    with pytest.raises(TraceFormatError, match="corrupt gzip"):
        load_kineto(garbage)


# --- generated traces -----------------------------------------------------------------------

_ids = st.one_of(st.integers(-5, 2**40), st.sampled_from([None, "7", "0x1f", "host"]),
                 st.integers(2**63, 2**63 + 10), st.floats(0, 1e6, allow_nan=False))
_times = st.one_of(st.floats(0, 1e7, allow_nan=False).map(lambda x: round(x, 3)), st.integers(0, 10**7),
                   st.sampled_from([None, "12.5"]))
_cats = st.sampled_from(list(_CAT_KIND) + ["ac2g", "python_function", "Trace", None])


@st.composite
def _event(draw: Any) -> dict:
    e: dict[str, Any] = {}
    for key, strat in (("ph", st.sampled_from(["X", "X", "X", "f", "s", "M", "i"])), ("cat", _cats),
                       ("name", st.one_of(st.text(max_size=6), st.sampled_from(["cudaLaunchKernel", "k{},{"]))),
                       ("pid", st.one_of(st.integers(0, 3), _ids)), ("tid", st.one_of(st.integers(0, 3), _ids)),
                       ("ts", _times), ("dur", _times), ("id", _ids)):
        if draw(st.integers(0, 9)) > 0:  # most fields present, some missing
            e[key] = draw(strat)
    if draw(st.booleans()):
        args: dict[str, Any] = {}
        for key in ("correlation", "device", "stream", "graph id"):
            if draw(st.booleans()):
                args[key] = draw(st.one_of(st.integers(-1, 50), _ids))
        if draw(st.booleans()):
            args["Input Dims"] = draw(st.lists(st.lists(st.integers(0, 64), max_size=3), max_size=3))
        e["args"] = args
    return e


@settings(suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(events=st.lists(_event(), min_size=0, max_size=40), chunk=st.integers(1, 400),
       indent=st.sampled_from([None, 1]), gz=st.booleans(), stretch=st.sampled_from([None, 1, 30, 200]))
def test_generated_traces_match_reference(tmp_path: Path, events: list[dict], chunk: int, indent: int | None,
                                          gz: bool, stretch: int | None) -> None:
    # A GPU op that always exists, so most examples get past "no GPU activity".
    events = events + [_ev("kernel", "k", 5.0, 1.0, pid=0, tid=7, device=0, stream=7, correlation=1)]
    path = _write(tmp_path, "gen", {"traceEvents": events}, indent=indent, gz=gz)
    want = _reference_trace_or_error(path)
    got = _loaded_or_error(path, chunk if stretch is None else 1 << 20, stretch)
    if isinstance(want, type):
        assert got is want
    else:
        assert isinstance(got, Trace), got
        assert_same_trace(got, want)


def _start_ns_reference(ts_us: np.ndarray, keep: np.ndarray) -> np.ndarray:
    base = math.floor(float(ts_us[keep].min())) if keep.any() else 0
    if not abs(base) < 9.2e15:
        base = 0
    return np.rint((np.where(keep, ts_us, float(base)) - base) * 1000.0).astype(np.int64) + base * 1000
