"""torch.profiler / Kineto Chrome-trace JSON (``.json``, ``.json.gz``) -> :class:`Trace`.

Decoding is typed (msgspec Structs that name only the fields the analysis uses), so
unknown keys are skipped without building Python objects for them. Event categories
kept: ``kernel``, ``gpu_memcpy``, ``gpu_memset``, ``cuda_runtime``, ``cuda_driver``,
``cpu_op``, ``user_annotation``, ``gpu_user_annotation``; ``ac2g`` flow events fill in
a GPU op's correlation id when its args lack one. Everything else is dropped.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Union

import msgspec
import numpy as np

from analyzer.errors import NoGpuActivityError, TraceFormatError
from analyzer.loaders._io import DEFAULT_MAX_TRACE_BYTES, read_text_bytes
from analyzer.trace import Kind, Trace, build_trace

_Scalar = Union[int, float, str, None]

_CAT_KIND: dict[str, int] = {
    "kernel": Kind.KERNEL,
    "gpu_memcpy": Kind.MEMCPY,
    "gpu_memset": Kind.MEMSET,
    "cuda_runtime": Kind.RUNTIME,
    "cuda_driver": Kind.RUNTIME,
    "cpu_op": Kind.CPU_OP,
    "user_annotation": Kind.ANNOTATION,
    "gpu_user_annotation": Kind.GPU_ANNOTATION,
}


class _Args(msgspec.Struct):
    correlation: _Scalar = None
    device: _Scalar = None
    stream: _Scalar = None
    graph_id: _Scalar = msgspec.field(name="graph id", default=None)
    input_dims: msgspec.Raw = msgspec.field(name="Input Dims", default=msgspec.Raw(b""))


class _Event(msgspec.Struct):
    ph: Any = None
    cat: Any = None
    name: Any = None
    pid: _Scalar = None
    tid: _Scalar = None
    ts: _Scalar = None
    dur: _Scalar = None
    id: _Scalar = None
    args: Union[_Args, None] = None


class _Device(msgspec.Struct):
    id: _Scalar = None
    name: Any = None


class _DistInfo(msgspec.Struct):
    rank: _Scalar = None
    world_size: _Scalar = None


class _KinetoFile(msgspec.Struct):
    traceEvents: list[_Event]
    deviceProperties: Union[list[_Device], None] = None
    distributedInfo: Union[_DistInfo, None] = None


_DECODER = msgspec.json.Decoder(_KinetoFile)


def _as_int(value: _Scalar, default: int = -1) -> int:
    """Kineto writes ids as ints, floats or strings (``"0x0"`` on ROCm); anything else -> default."""
    if value is None or isinstance(value, bool):
        return default
    if isinstance(value, int):
        return value if -(2**63) <= value < 2**63 else default
    if isinstance(value, float):
        return int(value) if value == value and abs(value) < 2**63 else default
    try:
        return int(value, 0)
    except (TypeError, ValueError):
        return default


def _as_us(value: _Scalar) -> float:
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    if isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            return float("nan")
    return float("nan")


def decode_kineto(data: bytes | bytearray, path: str) -> _KinetoFile:
    """Typed decode of Kineto JSON text, or a one-line :class:`TraceFormatError`."""
    if not data.strip():
        raise TraceFormatError("empty file", path)
    try:
        return _DECODER.decode(data)
    except msgspec.ValidationError as exc:
        if "traceEvents" in str(exc) and "missing required field" in str(exc):
            raise TraceFormatError("JSON without a 'traceEvents' list: not a Kineto/Chrome trace", path) from None
        raise TraceFormatError(f"not a Kineto trace: {exc}", path) from None
    except msgspec.DecodeError as exc:
        msg = str(exc)
        if "truncated" in msg.lower():
            raise TraceFormatError("truncated JSON: the file ends mid-document", path) from None
        if "depth" in msg.lower() or "recursion" in msg.lower():
            raise TraceFormatError("JSON nested too deeply to be a trace", path) from None
        raise TraceFormatError(f"not valid JSON ({msg})", path) from None
    except RecursionError:
        raise TraceFormatError("JSON nested too deeply to be a trace", path) from None


def load_kineto(path: str | Path, max_bytes: int = DEFAULT_MAX_TRACE_BYTES) -> Trace:
    """Load a Kineto trace file into the columnar :class:`Trace`."""
    p = Path(path)
    data = read_text_bytes(p, max_bytes)
    doc = decode_kineto(data, str(p))
    del data
    return kineto_to_trace(doc, str(p))


def kineto_to_trace(doc: _KinetoFile, path: str) -> Trace:
    """Turn decoded events into columns. The only per-event Python pass in the pipeline."""
    events = doc.traceEvents
    warnings: list[str] = []
    names: dict[str, int] = {}
    ids: dict[str, int] = {}  # string pid/tid -> negative int ids
    cat_kind = _CAT_KIND

    def str_id(value: _Scalar) -> int:
        if isinstance(value, int) and not isinstance(value, bool):
            return value if -(2**63) <= value < 2**63 else -1
        key = str(value)
        got = ids.get(key)
        if got is None:
            got = ids[key] = -2 - len(ids)
        return got

    kept = [e for e in events if e.ph == "X" and isinstance(e.cat, str) and e.cat in cat_kind]
    flows = [e for e in events if e.cat == "ac2g" and e.ph == "f"]
    n = len(kept)
    kind = np.fromiter((cat_kind[e.cat] for e in kept), dtype=np.int8, count=n)
    name_id = np.fromiter(
        (names.setdefault(e.name if isinstance(e.name, str) else str(e.name), len(names)) for e in kept),
        dtype=np.int32,
        count=n,
    )
    ts_us = np.fromiter((_as_us(e.ts) for e in kept), dtype=np.float64, count=n)
    dur_us = np.fromiter((_as_us(e.dur) if e.dur is not None else 0.0 for e in kept), dtype=np.float64, count=n)
    pid = np.fromiter((str_id(e.pid) for e in kept), dtype=np.int64, count=n)
    tid = np.fromiter((str_id(e.tid) for e in kept), dtype=np.int64, count=n)
    no_args = _Args()
    args = [e.args or no_args for e in kept]
    corr = np.fromiter((_as_int(a.correlation) for a in args), dtype=np.int64, count=n)
    device_arg = np.fromiter((_as_int(a.device) for a in args), dtype=np.int64, count=n)
    stream_arg = np.fromiter((_as_int(a.stream) for a in args), dtype=np.int64, count=n)
    graph_id = np.fromiter((_as_int(a.graph_id) for a in args), dtype=np.int64, count=n)
    dims_id = np.fromiter(
        (names.setdefault(bytes(a.input_dims).decode("utf-8", "replace"), len(names)) if a.input_dims else -1
         for a in args),
        dtype=np.int32,
        count=n,
    )
    del args, kept

    bad_time = ~np.isfinite(ts_us) | ~np.isfinite(dur_us)
    if bad_time.any():
        warnings.append(f"dropped {int(bad_time.sum())} events without a numeric ts/dur")

    gpu = (kind <= Kind.GRAPH) | (kind == Kind.GPU_ANNOTATION)
    # On GPU rows Kineto's pid is the device and tid the stream; args say so explicitly when present.
    device = np.where(gpu, np.where(device_arg >= 0, device_arg, pid), -1)
    stream = np.where(gpu, np.where(stream_arg >= 0, stream_arg, tid), -1)

    if flows and (gpu & (corr < 0) & (kind <= Kind.GRAPH)).any():
        corr = _fill_corr_from_flows(flows, kind, pid, tid, ts_us, corr, str_id)

    keep = ~bad_time
    start_ns = np.rint(np.where(keep, ts_us, 0.0) * 1000.0).astype(np.int64)
    dur_ns = np.rint(np.where(keep, dur_us, 0.0) * 1000.0).astype(np.int64)
    columns = {
        "kind": kind,
        "name_id": name_id,
        "device": device,
        "stream": stream,
        "pid": pid,
        "tid": tid,
        "start_ns": start_ns,
        "dur_ns": dur_ns,
        "corr": corr,
        "graph_id": graph_id,
        "dims_id": dims_id,
    }
    if not keep.all():
        columns = {k: v[keep] for k, v in columns.items()}

    device_names: dict[int, str] = {}
    for dev in doc.deviceProperties or []:
        dev_id = _as_int(dev.id)
        if dev_id >= 0 and isinstance(dev.name, str):
            device_names[dev_id] = dev.name
    rank = world = None
    if doc.distributedInfo is not None:
        r = _as_int(doc.distributedInfo.rank)
        w = _as_int(doc.distributedInfo.world_size)
        rank = r if r >= 0 else None
        world = w if w > 0 else None

    trace = build_trace(
        path=path,
        format="kineto",
        names=list(names),
        columns=columns,
        device_names=device_names,
        rank=rank,
        world_size=world,
        warnings=warnings,
    )
    if not trace.gpu_mask.any():
        cats = "CPU-only trace" if len(events) else "no events at all"
        raise NoGpuActivityError(f"no GPU kernels, copies or sets in the trace ({cats}); nothing to analyse", path)
    return trace


def _fill_corr_from_flows(flows, kind, pid, tid, ts_us, corr, str_id) -> np.ndarray:
    """Old Kineto versions put the correlation only on the ``ac2g`` flow end (``ph: f``).

    The flow end sits on the GPU op: same pid, tid and ts. Joined by sorting keys, not a loop.
    """
    f_pid = np.fromiter((str_id(f.pid) for f in flows), dtype=np.int64, count=len(flows))
    f_tid = np.fromiter((str_id(f.tid) for f in flows), dtype=np.int64, count=len(flows))
    f_ts = np.fromiter((_as_us(f.ts) for f in flows), dtype=np.float64, count=len(flows))
    f_id = np.fromiter((_as_int(f.id) for f in flows), dtype=np.int64, count=len(flows))
    need = np.flatnonzero((kind <= Kind.GRAPH) & (corr < 0))
    f_key = np.rec.fromarrays([f_pid, f_tid, np.rint(f_ts * 1000).astype(np.int64)])
    n_key = np.rec.fromarrays([pid[need], tid[need], np.rint(ts_us[need] * 1000).astype(np.int64)])
    order = np.argsort(f_key, kind="stable")
    pos = np.searchsorted(f_key[order], n_key)
    pos_ok = pos < order.size
    hit = np.zeros(need.size, dtype=bool)
    hit[pos_ok] = f_key[order[pos[pos_ok]]] == n_key[pos_ok]
    out = corr.copy()
    out[need[hit]] = f_id[order[pos[hit]]]
    return out
