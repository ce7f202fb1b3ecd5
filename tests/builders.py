"""Tiny hand-built traces that can be written both as Kineto JSON and as an nsys SQLite export.

A :class:`TraceSpec` lists host API calls, GPU ops, annotations and (nsys only) whole-graph
replays, all in integer nanoseconds. :meth:`TraceSpec.to_kineto` gives the dict torch.profiler
writes (``traceEvents`` with ``cat`` kernel / gpu_memcpy / gpu_memset / cuda_runtime /
user_annotation, ``args.correlation/device/stream``, ``ts``/``dur`` in float microseconds);
:meth:`TraceSpec.write_nsys` writes the tables and columns ``nsys export --type sqlite`` writes
(``CUPTI_ACTIVITY_KIND_*``, ``StringIds``, ``NVTX_EVENTS``, ``TARGET_INFO_GPU``), with nsys'
version suffixes on API names and ``globalTid``/``globalPid`` packing. One spec, two loaders:
the same expectations must hold for both.
"""
from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterable
from contextlib import closing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

PID = 100  # host process of the spec
TID = 1  # host thread of the spec

#: nsys appends the CUDA version that introduced an API entry point.
NSYS_API_SUFFIX = {
    "cudaLaunchKernel": "_v7000",
    "cudaLaunchKernelExC": "_v11060",
    "cudaGraphLaunch": "_v10000",
}
_DEFAULT_SUFFIX = "_v3020"
_COPY_KIND = {"HtoD": 1, "DtoH": 2, "HtoA": 3, "AtoH": 4, "AtoA": 5, "AtoD": 6, "DtoA": 7, "DtoD": 8, "HtoH": 9,
              "PtoP": 10}
_GPU_CAT = {"kernel": "kernel", "memcpy": "gpu_memcpy", "memset": "gpu_memset"}


@dataclass(frozen=True)
class Call:
    """A CUDA runtime call on a host thread (cudaLaunchKernel, cudaStreamSynchronize, cudaGraphLaunch)."""

    name: str
    start_ns: int
    dur_ns: int
    corr: int = -1
    pid: int = PID
    tid: int = TID


@dataclass(frozen=True)
class GpuOp:
    """A kernel, copy (name ``Memcpy HtoD`` etc.) or set (name ``Memset``) on a device stream."""

    name: str
    start_ns: int
    dur_ns: int
    corr: int = -1
    kind: str = "kernel"
    device: int = 0
    stream: int = 7
    graph_id: int = -1
    graph_node_id: int = -1
    pid: int = PID
    grid: tuple[int, int, int] | None = None  # a kernel's launch configuration; None: not recorded
    block: tuple[int, int, int] | None = None
    registers: int | None = None  # a kernel's registers per thread; None: not recorded
    shared_memory: tuple[int, int] | None = None  # (static, dynamic) bytes; Kineto writes their sum


@dataclass(frozen=True)
class Annotation:
    """A host range: record_function in Kineto, an NVTX range in nsys."""

    text: str
    start_ns: int
    dur_ns: int
    pid: int = PID
    tid: int = TID


@dataclass(frozen=True)
class GraphReplay:
    """A whole CUDA-graph replay as nsys records it by default (``--cuda-graph-trace=graph``): no kernels."""

    graph_id: int
    start_ns: int
    dur_ns: int
    corr: int
    device: int = 0
    stream: int = 7
    pid: int = PID


def global_tid(pid: int, tid: int) -> int:
    """nsys' globalTid: a vm/host id in the top bits (1 here, as in real exports), then pid, then tid."""
    return (1 << 48) | (pid << 24) | tid


def global_pid(pid: int) -> int:
    return (1 << 48) | (pid << 24)


# Columns of the real export (nsys 2024-2026) that the builder fills; the rest of a real table is omitted.
NSYS_COLUMNS: dict[str, tuple[str, ...]] = {
    "StringIds": ("id", "value"),
    "CUPTI_ACTIVITY_KIND_KERNEL": ("start", "end", "deviceId", "contextId", "streamId", "correlationId",
                                   "globalPid", "demangledName", "shortName", "gridX", "gridY", "gridZ", "blockX",
                                   "blockY", "blockZ", "graphNodeId", "graphId", "registersPerThread",
                                   "staticSharedMemory", "dynamicSharedMemory"),
    "CUPTI_ACTIVITY_KIND_MEMCPY": ("start", "end", "deviceId", "contextId", "streamId", "correlationId", "globalPid",
                                   "bytes", "copyKind", "graphNodeId"),
    "CUPTI_ACTIVITY_KIND_MEMSET": ("start", "end", "deviceId", "contextId", "streamId", "correlationId", "globalPid",
                                   "value", "bytes", "graphNodeId"),
    "CUPTI_ACTIVITY_KIND_RUNTIME": ("start", "end", "eventClass", "globalTid", "correlationId", "nameId",
                                    "returnValue", "callchainId"),
    "CUPTI_ACTIVITY_KIND_GRAPH_TRACE": ("start", "end", "deviceId", "contextId", "greenContextId", "streamId",
                                        "correlationId", "globalPid", "graphId", "graphExecId"),
    "NVTX_EVENTS": ("start", "end", "eventType", "rangeId", "category", "color", "text", "globalTid", "endGlobalTid",
                    "textId", "domainId"),
    "TARGET_INFO_GPU": ("id", "name", "totalMemory", "smCount", "memoryBandwidth", "clockRate", "computeMajor",
                        "computeMinor", "threadsPerWarp", "chipName", "maxRegistersPerSm", "maxShmemPerSm",
                        "maxShmemPerBlockOptin"),
    "TARGET_INFO_CUDA_DEVICE": ("gpuId", "cudaId", "pid"),
    "META_DATA_EXPORT": ("name", "value"),
}


@dataclass
class TraceSpec:
    """Events of one tiny trace, in ns. Helpers add a launch call together with what it launched."""

    calls: list[Call] = field(default_factory=list)
    ops: list[GpuOp] = field(default_factory=list)
    annotations: list[Annotation] = field(default_factory=list)
    replays: list[GraphReplay] = field(default_factory=list)
    device_names: dict[int, str] = field(default_factory=lambda: {0: "NVIDIA H200"})
    #: (pid, CUDA ordinal, nsys GPU id) rows of TARGET_INFO_CUDA_DEVICE; empty = table omitted.
    cuda_devices: list[tuple[int, int, int]] = field(default_factory=list)
    #: More of each device's properties as Kineto's deviceProperties spells them (totalGlobalMem, ...).
    kineto_device_extra: dict[int, dict[str, Any]] = field(default_factory=dict)
    #: More TARGET_INFO_GPU columns per nsys GPU id (totalMemory, smCount, ...; see NSYS_COLUMNS).
    nsys_gpu_extra: dict[int, dict[str, Any]] = field(default_factory=dict)

    def launch(self, name: str, call_start_ns: int, call_dur_ns: int, op_start_ns: int, op_dur_ns: int, corr: int,
               **op: Any) -> None:
        """``cudaLaunchKernel`` at ``call_start_ns`` and the kernel it launched (same correlation id)."""
        pid = op.get("pid", PID)
        self.calls.append(Call("cudaLaunchKernel", call_start_ns, call_dur_ns, corr, pid=pid, tid=op.pop("tid", TID)))
        self.ops.append(GpuOp(name, op_start_ns, op_dur_ns, corr, **op))

    def graph_launch(self, call_start_ns: int, call_dur_ns: int, corr: int, graph_id: int,
                     kernels: Iterable[tuple[str, int, int]], **op: Any) -> None:
        """One ``cudaGraphLaunch`` and the kernels (name, start, dur) it replays, all with its correlation id."""
        self.calls.append(Call("cudaGraphLaunch", call_start_ns, call_dur_ns, corr))
        for node, (name, start, dur) in enumerate(kernels, start=1):
            self.ops.append(GpuOp(name, start, dur, corr, graph_id=graph_id, graph_node_id=node, **op))

    def call(self, name: str, start_ns: int, dur_ns: int, corr: int = -1, **kw: Any) -> None:
        self.calls.append(Call(name, start_ns, dur_ns, corr, **kw))

    def annotate(self, text: str, start_ns: int, dur_ns: int, **kw: Any) -> None:
        self.annotations.append(Annotation(text, start_ns, dur_ns, **kw))

    # ---- Kineto ------------------------------------------------------------------------------
    def to_kineto(self) -> dict:
        """The Chrome-trace dict torch.profiler writes for these events."""
        if self.replays:
            raise ValueError("Kineto records the kernels of a graph replay, never a whole-graph row")
        ev: list[dict] = []
        for a in self.annotations:
            ev.append({"ph": "X", "cat": "user_annotation", "name": a.text, "pid": a.pid, "tid": a.tid,
                       "ts": a.start_ns / 1e3, "dur": a.dur_ns / 1e3, "args": {"External id": 1}})
        for c in self.calls:
            args = {"correlation": c.corr} if c.corr >= 0 else {}
            ev.append({"ph": "X", "cat": "cuda_runtime", "name": c.name, "pid": c.pid, "tid": c.tid,
                       "ts": c.start_ns / 1e3, "dur": c.dur_ns / 1e3, "args": args})
        for o in self.ops:
            args: dict[str, Any] = {"device": o.device, "stream": o.stream}
            if o.corr >= 0:
                args["correlation"] = o.corr
            if o.graph_id >= 0:
                args["graph id"] = o.graph_id
                args["graph node id"] = o.graph_node_id
            if o.grid is not None:
                args["grid"] = list(o.grid)
            if o.block is not None:
                args["block"] = list(o.block)
            if o.registers is not None:
                args["registers per thread"] = o.registers
            if o.shared_memory is not None:
                args["shared memory"] = sum(o.shared_memory)
            ev.append({"ph": "X", "cat": _GPU_CAT[o.kind], "name": o.name, "pid": o.device, "tid": o.stream,
                       "ts": o.start_ns / 1e3, "dur": o.dur_ns / 1e3, "args": args})
        return {"schemaVersion": 1,
                "deviceProperties": [{"id": d, "name": n, **self.kineto_device_extra.get(d, {})}
                                     for d, n in sorted(self.device_names.items())],
                "traceEvents": ev}

    def write_kineto(self, path: Path) -> Path:
        path.write_text(json.dumps(self.to_kineto()))
        return path

    # ---- nsys --------------------------------------------------------------------------------
    def write_nsys(self, path: Path, *, version_suffix: bool = True, nvtx: str = "pushpop",
                   nvtx_text: str = "text", omit_tables: Iterable[str] = (),
                   drop_columns: dict[str, Iterable[str]] | None = None) -> Path:
        """Write an nsys-style SQLite export.

        ``nvtx`` is ``"pushpop"`` (eventType 59) or ``"startend"`` (60); ``nvtx_text`` puts range
        text in ``text`` or in ``StringIds`` via ``textId``. ``omit_tables`` and ``drop_columns``
        leave tables or columns out, as older or trimmed exports do.
        """
        omit = set(omit_tables)
        drop = {t: set(c) for t, c in (drop_columns or {}).items()}
        strings: dict[str, int] = {}

        def sid(text: str) -> int:
            return strings.setdefault(text, len(strings) + 1)

        rows: dict[str, list[dict[str, Any]]] = {t: [] for t in NSYS_COLUMNS}
        for c in self.calls:
            name = c.name + (NSYS_API_SUFFIX.get(c.name, _DEFAULT_SUFFIX) if version_suffix else "")
            rows["CUPTI_ACTIVITY_KIND_RUNTIME"].append(dict(
                start=c.start_ns, end=c.start_ns + c.dur_ns, eventClass=1, globalTid=global_tid(c.pid, c.tid),
                correlationId=c.corr if c.corr >= 0 else 0, nameId=sid(name), returnValue=0, callchainId=None))
        for o in self.ops:
            common = dict(start=o.start_ns, end=o.start_ns + o.dur_ns, deviceId=o.device, contextId=1,
                          streamId=o.stream, correlationId=o.corr if o.corr >= 0 else None,
                          globalPid=global_pid(o.pid), graphNodeId=o.graph_node_id if o.graph_node_id >= 0 else None)
            if o.kind == "kernel":
                rows["CUPTI_ACTIVITY_KIND_KERNEL"].append(dict(
                    common, demangledName=sid(o.name), shortName=sid(o.name.split("<")[0].split("(")[0]),
                    **dict(zip(("gridX", "gridY", "gridZ"), o.grid or (None,) * 3)),
                    **dict(zip(("blockX", "blockY", "blockZ"), o.block or (None,) * 3)),
                    graphId=o.graph_id if o.graph_id >= 0 else None, registersPerThread=o.registers,
                    **dict(zip(("staticSharedMemory", "dynamicSharedMemory"), o.shared_memory or (None, None)))))
            elif o.kind == "memcpy":
                direction = o.name.removeprefix("Memcpy ")
                if direction not in _COPY_KIND:
                    raise ValueError(f"memcpy op names are 'Memcpy HtoD' etc., got {o.name!r}")
                rows["CUPTI_ACTIVITY_KIND_MEMCPY"].append(dict(common, bytes=4096, copyKind=_COPY_KIND[direction]))
            elif o.kind == "memset":
                if o.name != "Memset":
                    raise ValueError(f"memset op names are 'Memset', got {o.name!r}")
                rows["CUPTI_ACTIVITY_KIND_MEMSET"].append(dict(common, value=0, bytes=4096))
            else:
                raise ValueError(f"unknown GPU op kind {o.kind!r}")
        for r in self.replays:
            rows["CUPTI_ACTIVITY_KIND_GRAPH_TRACE"].append(dict(
                start=r.start_ns, end=r.start_ns + r.dur_ns, deviceId=r.device, contextId=1, greenContextId=None,
                streamId=r.stream, correlationId=r.corr, globalPid=global_pid(r.pid), graphId=r.graph_id,
                graphExecId=r.graph_id + 1000))
        event_type = {"pushpop": 59, "startend": 60}[nvtx]
        for a in self.annotations:
            gt = global_tid(a.pid, a.tid)
            by_id = nvtx_text == "textId"
            rows["NVTX_EVENTS"].append(dict(
                start=a.start_ns, end=a.start_ns + a.dur_ns, eventType=event_type, rangeId=None, category=None,
                color=None, text=None if by_id else a.text, globalTid=gt,
                endGlobalTid=gt if event_type == 60 else None, textId=sid(a.text) if by_id else None, domainId=0))
        for dev, name in self.device_names.items():
            extra = self.nsys_gpu_extra.get(dev, {})
            rows["TARGET_INFO_GPU"].append(dict(id=dev, name=name, **{c: extra.get(c) for c in
                                                                     NSYS_COLUMNS["TARGET_INFO_GPU"][2:]}))
        for pid, cuda_id, gpu_id in self.cuda_devices:
            rows["TARGET_INFO_CUDA_DEVICE"].append(dict(gpuId=gpu_id, cudaId=cuda_id, pid=pid))
        if not self.cuda_devices:
            omit.add("TARGET_INFO_CUDA_DEVICE")
        if not self.replays:
            omit.add("CUPTI_ACTIVITY_KIND_GRAPH_TRACE")  # nsys creates tables lazily
        rows["StringIds"] = [dict(id=i, value=s) for s, i in strings.items()]
        rows["META_DATA_EXPORT"] = [dict(name="EXPORT_PRODUCT_NAME", value="NVIDIA Nsight Systems"),
                                    dict(name="EXPORT_SCHEMA_VERSION", value="3.25.0")]
        with closing(sqlite3.connect(path)) as db:
            for table, cols in NSYS_COLUMNS.items():
                if table in omit:
                    continue
                keep = [c for c in cols if c not in drop.get(table, set())]
                decl = ", ".join(f'"{c}" {"TEXT" if c in ("value", "name", "text", "chipName") else "INTEGER"}'
                                 + (" PRIMARY KEY" if table == "StringIds" and c == "id" else "") for c in keep)
                db.execute(f'CREATE TABLE "{table}" ({decl})')
                if rows[table]:
                    db.executemany(
                        f'INSERT INTO "{table}" ({", ".join(chr(34) + c + chr(34) for c in keep)}) '
                        f'VALUES ({", ".join("?" * len(keep))})',
                        [tuple(r[c] for c in keep) for r in rows[table]])
            db.commit()
        return path


def write(spec: TraceSpec, fmt: str, folder: Path, name: str = "trace", **nsys_options: Any) -> Path:
    """Write ``spec`` as ``fmt`` (``"kineto"`` or ``"nsys"``) into ``folder``; return the file."""
    if fmt == "kineto":
        return spec.write_kineto(folder / f"{name}.json")
    if fmt == "nsys":
        return spec.write_nsys(folder / f"{name}.sqlite", **nsys_options)
    raise ValueError(f"unknown format {fmt!r}")
