"""Nsight Systems exports (``nsys export --type sqlite``, or ``.nsys-rep`` via ``nsys``) -> :class:`Trace`.

The file is opened read-only (``mode=ro&immutable=1``) and never modified. One SQL query,
a ``UNION ALL`` over the tables below with the names joined from ``StringIds``, returns
every kept event; its columns go straight into numpy arrays. Tables read (each optional):

* ``CUPTI_ACTIVITY_KIND_KERNEL`` -> kernels (name: demangledName, else shortName, else
  mangledName; ``graphId`` -> ``graph_id`` when kernels were traced per graph node;
  ``gridX/Y/Z``, ``blockX/Y/Z`` -> the launch configuration columns; ``registersPerThread`` and
  ``staticSharedMemory + dynamicSharedMemory``, the largest per kernel name, by a second query grouped by name
  -> :attr:`~launchgap.trace.Trace.kernel_resources`).
* ``CUPTI_ACTIVITY_KIND_MEMCPY`` / ``_MEMSET`` -> copies and sets.
* ``CUPTI_ACTIVITY_KIND_GRAPH_TRACE`` -> whole CUDA-graph replays (nsys'
  ``--cuda-graph-trace=graph``, the default): one :attr:`Kind.GRAPH` GPU op per replay,
  joined to its ``cudaGraphLaunch`` by correlation id. nsys records no kernels for them.
* ``CUPTI_ACTIVITY_KIND_RUNTIME`` / ``_DRIVER`` -> API calls. Names keep nsys' version
  suffix (``cudaLaunchKernel_v7000``); :func:`launchgap.trace.classify_api_name` ignores it.
* ``NVTX_EVENTS`` -> :attr:`Kind.ANNOTATION` for push/pop (eventType 59) and start/end (60)
  ranges, text from ``text`` or ``textId``. Marks and ranges that never ended are skipped.
* ``TARGET_INFO_GPU`` (+ ``TARGET_INFO_CUDA_DEVICE``) -> device names and
  :attr:`~launchgap.trace.Trace.device_properties` (:data:`GPU_PROPERTY_COLUMNS`).
* ``PROCESSES`` -> :attr:`~launchgap.trace.Trace.process_names` of the processes with events (a rank's
  worker names its rank there: :mod:`launchgap.rank_split`).

Times are nanoseconds already. ``globalTid`` packs the process and thread ids
(pid = ``(globalTid >> 24) & 0xFFFFFF``, tid = ``globalTid & 0xFFFFFF``; ``globalPid`` the
same way). CUPTI correlation ids are unique only within a process, so when GPU work of
several processes is present the correlation column becomes ``pid << 32 | correlationId``.
"""
from __future__ import annotations

import dataclasses
import shlex
import shutil
import sqlite3
import subprocess
import tempfile
from pathlib import Path

import numpy as np

from ..errors import NoGpuActivityError, TraceFormatError, TraceTooLargeError
from ._io import DEFAULT_MAX_TRACE_BYTES, mb_text
from ..trace import LAUNCH_CONFIG_COLUMNS, Kind, Trace, build_trace

KERNEL_TABLE = "CUPTI_ACTIVITY_KIND_KERNEL"
MEMCPY_TABLE = "CUPTI_ACTIVITY_KIND_MEMCPY"
MEMSET_TABLE = "CUPTI_ACTIVITY_KIND_MEMSET"
GRAPH_TABLE = "CUPTI_ACTIVITY_KIND_GRAPH_TRACE"
RUNTIME_TABLES = ("CUPTI_ACTIVITY_KIND_RUNTIME", "CUPTI_ACTIVITY_KIND_DRIVER")
NVTX_TABLE = "NVTX_EVENTS"
#: NVTX_EVENTS.eventType of ranges: 59 NvtxPushPopRange, 60 NvtxStartEndRange.
NVTX_RANGE_TYPES = (59, 60)
#: Seconds `nsys export` may take on a .nsys-rep before we give up.
NSYS_EXPORT_TIMEOUT_S = 900

# CUpti_ActivityMemcpyKind, spelled as Kineto spells copy directions.
_COPY_KINDS = {1: "HtoD", 2: "DtoH", 3: "HtoA", 4: "AtoH", 5: "AtoA", 6: "AtoD", 7: "DtoA", 8: "DtoD",
               9: "HtoH", 10: "PtoP", 11: "HtoD (unified)", 12: "DtoH (unified)", 13: "DtoD (unified)"}
#: Launch configuration columns of CUPTI_ACTIVITY_KIND_KERNEL, in the order of the Trace's launch columns.
LAUNCH_COLUMNS = ("gridX", "gridY", "gridZ", "blockX", "blockY", "blockZ")
#: TARGET_INFO_GPU column -> normalised key of :data:`launchgap.trace.DEVICE_PROPERTY_KEYS` (integers;
#: nsys' schema gives memoryBandwidth in bytes/s and clockRate in Hz).
GPU_PROPERTY_COLUMNS = {
    "totalMemory": "total_memory_bytes", "smCount": "sm_count", "memoryBandwidth": "memory_bandwidth_bytes_per_s",
    "clockRate": "clock_rate_hz", "l2CacheSize": "l2_cache_bytes", "threadsPerWarp": "warp_size",
    "maxThreadsPerBlock": "max_threads_per_block", "maxRegistersPerBlock": "registers_per_block",
    "maxRegistersPerSm": "registers_per_sm", "maxShmemPerBlock": "shared_memory_per_block_bytes",
    "maxShmemPerBlockOptin": "shared_memory_per_block_optin_bytes", "maxShmemPerSm": "shared_memory_per_sm_bytes",
}
#: TARGET_INFO_GPU text columns -> normalised key.
GPU_TEXT_COLUMNS = {"name": "name", "chipName": "chip_name", "busLocation": "bus_location", "uuid": "uuid"}
_MASK24 = 0xFFFFFF
_CORR_BITS = 32  # CUPTI correlation ids are uint32


def export_command(rep: Path) -> str:
    """The ``nsys export`` command that turns ``rep`` into the SQLite file this loader reads."""
    out = rep.with_suffix(".sqlite")
    return f"nsys export --type sqlite --output {shlex.quote(str(out))} {shlex.quote(str(rep))}"


def load_nsys_rep(path: str | Path, max_bytes: int = DEFAULT_MAX_TRACE_BYTES) -> Trace:
    """Export a ``.nsys-rep`` to SQLite with ``nsys`` (in a temporary folder) and load that.

    Without ``nsys`` on PATH this raises an error that gives the export command to run.
    """
    p = Path(path)
    _check_size(p, max_bytes)
    nsys = shutil.which("nsys")
    if nsys is None:
        raise TraceFormatError(
            f"an Nsight Systems report needs `nsys` to read, and it is not on PATH; export it with "
            f"`{export_command(p)}` and analyse the .sqlite file", str(p))
    with tempfile.TemporaryDirectory(prefix="launchgap-nsys-") as tmp:
        out = Path(tmp) / "x.sqlite"
        try:
            proc = subprocess.run([nsys, "export", "--type", "sqlite", "--output", str(out), str(p.resolve())],
                                  cwd=tmp, capture_output=True, text=True, timeout=NSYS_EXPORT_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            raise TraceFormatError(f"`nsys export` ran longer than {NSYS_EXPORT_TIMEOUT_S} s; "
                                   f"export it yourself with `{export_command(p)}`", str(p)) from None
        except OSError as exc:
            raise TraceFormatError(f"could not run nsys ({exc}); export with `{export_command(p)}`", str(p)) from None
        if proc.returncode != 0 or not out.is_file():
            last = (proc.stderr or proc.stdout or "").strip().splitlines()
            why = last[-1] if last else f"exit code {proc.returncode}"
            raise TraceFormatError(f"`nsys export` failed: {why}", str(p))
        trace = load_nsys(out, max_bytes)
    return dataclasses.replace(trace, path=str(p))


def _check_size(p: Path, max_bytes: int) -> None:
    size = p.stat().st_size
    if size > max_bytes:
        raise TraceTooLargeError(
            f"file is {mb_text(size)}, over the {mb_text(max_bytes)} cap (--max-trace-bytes)", str(p))


def load_nsys(path: str | Path, max_bytes: int = DEFAULT_MAX_TRACE_BYTES) -> Trace:
    """Load an Nsight Systems SQLite export into the columnar :class:`Trace` (format ``"nsys"``)."""
    p = Path(path)
    _check_size(p, max_bytes)
    uri = p.resolve().as_uri() + "?mode=ro&immutable=1"
    try:
        con = sqlite3.connect(uri, uri=True)
    except sqlite3.Error as exc:
        raise TraceFormatError(f"cannot open as SQLite ({exc})", str(p)) from None
    try:
        try:
            return _load(con, str(p))
        except UnicodeDecodeError:
            # Names that are not UTF-8 (a damaged file): read values leniently; sqlite3 still decodes
            # schema names strictly, and a file damaged there is refused.
            con.text_factory = lambda b: b.decode("utf-8", "replace")
            try:
                return _load(con, str(p))
            except UnicodeDecodeError:
                raise TraceFormatError("table or column names are not valid UTF-8: a damaged file, not an "
                                       "Nsight Systems export we can read", str(p)) from None
    except _SchemaError as exc:
        raise TraceFormatError(str(exc), str(p)) from None
    except sqlite3.Error as exc:
        raise TraceFormatError(f"corrupt or unreadable SQLite file ({exc})", str(p)) from None
    finally:
        con.close()


class _SchemaError(Exception):
    """A table lacks a column we cannot do without; turned into a TraceFormatError naming the file."""


class _Schema:
    """Which tables exist and the columns of each (names as the export spells them)."""

    def __init__(self, con: sqlite3.Connection) -> None:
        rows = con.execute("SELECT name FROM sqlite_master WHERE type IN ('table', 'view')").fetchall()
        self.tables = {r[0] for r in rows}
        self._cols: dict[str, set[str]] = {}
        self._con = con

    def cols(self, table: str) -> set[str]:
        if table not in self._cols:
            self._cols[table] = ({r[1] for r in self._con.execute(f'PRAGMA table_info("{table}")')}
                                 if table in self.tables else set())
        return self._cols[table]


def _int(cols: set[str], col: str, alias: str = "t", default: int = -1) -> str:
    """SQL for an integer column that may be absent or NULL (then ``default``)."""
    if col not in cols:
        return str(default)
    return f'COALESCE(CAST({alias}."{col}" AS INTEGER), {default})'


def _coalesce(exprs: list[str]) -> str:
    return exprs[0] if len(exprs) == 1 else f"COALESCE({', '.join(exprs)})"


def _pid_tid(cols: set[str], col: str) -> tuple[str, str]:
    if col not in cols:
        return "-1", "-1"
    # A NULL global id (seen in damaged exports) means "unknown process/thread": -1, like an absent column.
    return (f'COALESCE((CAST(t."{col}" AS INTEGER) >> 24) & {_MASK24}, -1)',
            f'COALESCE(CAST(t."{col}" AS INTEGER) & {_MASK24}, -1)' if col == "globalTid" else "-1")


def _select(table: str, cols: set[str], kind: int, name: str, joins: str = "", gpu: bool = True,
            graph_col: str | None = None, where: tuple[str, ...] = ()) -> str:
    """One branch of the UNION: kind, start, dur, device, stream, pid, tid, corr, graph_id, name, then
    the launch configuration (:data:`LAUNCH_COLUMNS`, -1 where absent: every table but the kernels')."""
    for need in ("start", "end"):
        if need not in cols:
            raise _SchemaError(f"table {table} has no '{need}' column: not an Nsight Systems export we can read")
    pid, tid = _pid_tid(cols, "globalPid" if gpu else "globalTid")
    device = _int(cols, "deviceId", default=0) if gpu else "-1"
    stream = _int(cols, "streamId") if gpu else "-1"
    graph = _int(cols, graph_col) if graph_col else "-1"
    conds = ["t.start IS NOT NULL", 't."end" IS NOT NULL', *where]
    launch = ", ".join(_int(cols, c) if table == KERNEL_TABLE else "-1" for c in LAUNCH_COLUMNS)
    return (f"SELECT {int(kind)}, CAST(t.start AS INTEGER), CAST(t.\"end\" AS INTEGER) - CAST(t.start AS INTEGER), "
            f"{device}, {stream}, {pid}, {tid}, {_int(cols, 'correlationId')}, {graph}, CAST({name} AS TEXT), {launch} "
            f'FROM "{table}" t {joins} WHERE {" AND ".join(conds)}')


def _string_join(schema: _Schema, cols: set[str], col: str, alias: str) -> tuple[str, str] | None:
    """(join clause, value expression) resolving an id column through StringIds."""
    if col not in cols or "StringIds" not in schema.tables:
        return None
    return f'LEFT JOIN StringIds {alias} ON {alias}.id = t."{col}"', f"{alias}.value"


def _kernel_name(schema: _Schema, cols: set[str]) -> tuple[str, str]:
    """(value expression, join clauses) of a kernel's name: demangledName, else shortName, else mangledName."""
    joins, names = [], []
    for i, col in enumerate(("demangledName", "shortName", "mangledName")):
        j = _string_join(schema, cols, col, f"s{i}")
        if j:
            joins.append(j[0])
            names.append(j[1])
    return _coalesce([*names, "'kernel'"]), " ".join(joins)


def _branches(schema: _Schema, warnings: list[str]) -> list[str]:
    out: list[str] = []
    cols = schema.cols(KERNEL_TABLE)
    if cols:
        name, joins = _kernel_name(schema, cols)
        out.append(_select(KERNEL_TABLE, cols, Kind.KERNEL, name, joins, graph_col="graphId"))
    cols = schema.cols(MEMCPY_TABLE)
    if cols:
        if "copyKind" in cols:
            cases = " ".join(f"WHEN {k} THEN 'Memcpy {v}'" for k, v in _COPY_KINDS.items())
            name = f"CASE CAST(t.copyKind AS INTEGER) {cases} ELSE 'Memcpy' END"
        else:
            name = "'Memcpy'"
        out.append(_select(MEMCPY_TABLE, cols, Kind.MEMCPY, name))
    cols = schema.cols(MEMSET_TABLE)
    if cols:
        out.append(_select(MEMSET_TABLE, cols, Kind.MEMSET, "'Memset'"))
    cols = schema.cols(GRAPH_TABLE)
    if cols:
        graph_name = ("'CUDA graph ' || COALESCE(CAST(t.graphId AS TEXT), '?') || ' (whole replay)'"
                      if "graphId" in cols else "'CUDA graph (whole replay)'")
        # CUPTI writes start = end = 0 when it could not time a replay.
        out.append(_select(GRAPH_TABLE, cols, Kind.GRAPH, graph_name, graph_col="graphId",
                           where=('NOT (t.start = 0 AND t."end" = 0)',)))
    for table in RUNTIME_TABLES:
        cols = schema.cols(table)
        if cols:
            j = _string_join(schema, cols, "nameId", "s")
            name = _coalesce([j[1], "'unknown API call'"]) if j else "'unknown API call'"
            out.append(_select(table, cols, Kind.RUNTIME, name, j[0] if j else "", gpu=False))
    cols = schema.cols(NVTX_TABLE)
    if cols:
        joins, names = [], []
        if "text" in cols:
            names.append("t.text")
        j = _string_join(schema, cols, "textId", "s")
        if j:
            joins.append(j[0])
            names.append(j[1])
        if names:
            where = ['t."end" >= t.start', f"{_coalesce(names)} IS NOT NULL"]
            if "eventType" in cols:
                where.append(f"t.eventType IN ({', '.join(map(str, NVTX_RANGE_TYPES))})")
            out.append(_select(NVTX_TABLE, cols, Kind.ANNOTATION, _coalesce(names), " ".join(joins), gpu=False,
                               where=tuple(where)))
        else:
            warnings.append("NVTX_EVENTS has neither a text nor a textId column; NVTX ranges ignored")
    return out


def _kernel_resources(con: sqlite3.Connection, schema: _Schema, names: dict[str, int]) -> dict[int, tuple[int, int]]:
    """Per kernel name id (``names``: the name table) its largest ``registersPerThread`` and static plus dynamic
    shared memory (bytes) over its launches, -1 where the export has neither (or a value outside [0, 2^31)): one
    query grouped by name, a row per kernel name."""
    cols = schema.cols(KERNEL_TABLE)
    smem_cols = [c for c in ("staticSharedMemory", "dynamicSharedMemory") if c in cols]
    if "registersPerThread" not in cols and not smem_cols:
        return {}
    name, joins = _kernel_name(schema, cols)
    regs = _int(cols, "registersPerThread")
    parts = [f'CAST(t."{c}" AS INTEGER)' for c in smem_cols]
    smem = ("-1" if not parts else
            f"CASE WHEN {' AND '.join(p + ' IS NULL' for p in parts)} THEN -1 ELSE "
            f"{' + '.join(f'COALESCE({p}, 0)' for p in parts)} END")
    out: dict[int, tuple[int, int]] = {}
    for text, r, m in con.execute(f'SELECT CAST({name} AS TEXT), MAX({regs}), MAX({smem}) FROM "{KERNEL_TABLE}" t '
                                  f'{joins} WHERE t.start IS NOT NULL AND t."end" IS NOT NULL GROUP BY 1'):
        r = r if type(r) is int and 0 <= r < 2**31 else -1
        m = m if type(m) is int and 0 <= m < 2**31 else -1
        if (r >= 0 or m >= 0) and text in names:
            out[names[text]] = (r, m)
    return out


def _count(con: sqlite3.Connection, sql: str) -> int:
    return int(con.execute(sql).fetchone()[0] or 0)


def _load(con: sqlite3.Connection, path: str) -> Trace:
    schema = _Schema(con)
    known = {KERNEL_TABLE, MEMCPY_TABLE, MEMSET_TABLE, GRAPH_TABLE, NVTX_TABLE, *RUNTIME_TABLES}
    if not schema.tables & known and not any(t.startswith("CUPTI_ACTIVITY_KIND_") for t in schema.tables):
        raise TraceFormatError(
            "SQLite database, but not an Nsight Systems export (no CUPTI_ACTIVITY_KIND_* or NVTX_EVENTS tables)", path)
    warnings: list[str] = []
    branches = _branches(schema, warnings)
    gpu_tables = [t for t in (KERNEL_TABLE, MEMCPY_TABLE, MEMSET_TABLE, GRAPH_TABLE) if t in schema.tables]
    if not gpu_tables:
        raise NoGpuActivityError("export has no CUDA activity tables (record with `nsys profile --trace=cuda`); "
                                 "nothing to analyse", path)
    query = " UNION ALL ".join(branches)
    try:
        rows = con.execute(query).fetchall()
    except sqlite3.OperationalError as exc:
        if "decode" not in str(exc).lower():
            raise
        # A name that is not valid UTF-8 (a stray NVTX payload): decode leniently rather than refuse the file.
        con.text_factory = lambda b: b.decode("utf-8", "replace")
        rows = con.execute(query).fetchall()
    if not rows:
        raise NoGpuActivityError("no GPU kernels, copies, sets or graph replays in the export; nothing to analyse",
                                 path)
    kind_t, start_t, dur_t, dev_t, stream_t, pid_t, tid_t, corr_t, graph_t, name_t, *launch_t = zip(*rows)
    del rows
    try:
        kind = np.array(kind_t, dtype=np.int8)
        start_ns = np.array(start_t, dtype=np.int64)
        dur_ns = np.array(dur_t, dtype=np.int64)
        device = np.array(dev_t, dtype=np.int64)
        stream = np.array(stream_t, dtype=np.int64)
        pid = np.array(pid_t, dtype=np.int64)
        tid = np.array(tid_t, dtype=np.int64)
        corr = np.array(corr_t, dtype=np.int64)
        graph_id = np.array(graph_t, dtype=np.int64)
        # out of range (a damaged row): -1 in build_trace, like any launch dimension past its column's type
        launch = {key: np.array(v, dtype=np.int64) for key, v in zip(LAUNCH_CONFIG_COLUMNS, launch_t)}
    except (OverflowError, TypeError, ValueError):
        raise TraceFormatError("a time, id or device column holds a value that is not a 64-bit integer: "
                               "not a valid nsys export", path) from None
    # Interning through a dict is several times faster than np.unique over Python strings.
    names: dict[str, int] = {}
    name_id = np.fromiter((names.setdefault(n, len(names)) for n in name_t), dtype=np.int32, count=len(name_t))
    del name_t

    gpu = kind <= Kind.GRAPH
    if not gpu.any():
        raise NoGpuActivityError("no GPU kernels, copies, sets or graph replays in the export; nothing to analyse",
                                 path)
    corr = _process_scoped_corr(corr, pid, warnings)
    device, device_names, device_properties = _devices(con, schema, gpu, device, pid, warnings)
    _note_skipped(con, schema, kind, warnings)
    kernel_resources = _kernel_resources(con, schema, names)
    process_names = _process_names(con, schema, pid)

    trace = build_trace(
        path=path,
        format="nsys",
        names=list(names),
        columns={"kind": kind, "name_id": name_id, "device": device,
                 "stream": stream, "pid": pid, "tid": tid, "start_ns": start_ns, "dur_ns": dur_ns, "corr": corr,
                 "graph_id": graph_id, "dims_id": np.full(kind.shape[0], -1, dtype=np.int32), **launch},
        device_names=device_names,
        device_properties=device_properties,
        kernel_resources=kernel_resources,
        process_names=process_names,
        warnings=warnings,
    )
    return trace


def _process_names(con: sqlite3.Connection, schema: _Schema, pid: np.ndarray) -> dict[int, str]:
    """``PROCESSES`` names of the processes that have events (a row per process, not per event)."""
    if not {"pid", "name"} <= schema.cols("PROCESSES"):
        return {}
    seen = set(np.unique(pid).tolist())
    return {int(p): str(n) for p, n in con.execute("SELECT CAST(pid AS INTEGER), name FROM PROCESSES "
                                                   "WHERE pid IS NOT NULL AND name IS NOT NULL")
            if type(p) is int and p in seen}


def _process_scoped_corr(corr: np.ndarray, pid: np.ndarray, warnings: list[str]) -> np.ndarray:
    """Correlation ids qualified by process when several processes are in the export.

    CUPTI numbers correlations per process, so two ranks can both have id 1438831; joining
    on the bare id would pair a kernel with another process's launch call.
    """
    has = corr >= 0
    pids = np.unique(pid[has])
    if np.count_nonzero(pids >= 0) <= 1:
        return corr
    if pids[0] < 0:
        warnings.append("several processes, but some rows lack globalPid/globalTid: launches are joined by "
                        "correlation id alone and may pair across processes")
        return corr
    return np.where(has, (pid << _CORR_BITS) | (corr & ((1 << _CORR_BITS) - 1)), -1)


def _gpu_properties(con: sqlite3.Connection, schema: _Schema) -> dict[int, dict]:
    """TARGET_INFO_GPU by nsys GPU id, under the normalised keys (:data:`GPU_PROPERTY_COLUMNS`,
    :data:`GPU_TEXT_COLUMNS`, ``compute_capability`` from computeMajor/Minor); NULLs and negative
    numbers left out."""
    gcols = schema.cols("TARGET_INFO_GPU")
    if "id" not in gcols:
        return {}
    ints = [c for c in (*GPU_PROPERTY_COLUMNS, "computeMajor", "computeMinor") if c in gcols]
    texts = [c for c in GPU_TEXT_COLUMNS if c in gcols]
    select = ", ".join(["CAST(id AS INTEGER)", *(f'CAST("{c}" AS INTEGER)' for c in ints),
                        *(f'CAST("{c}" AS TEXT)' for c in texts)])
    out: dict[int, dict] = {}
    for row in con.execute(f"SELECT {select} FROM TARGET_INFO_GPU WHERE id IS NOT NULL"):
        values = dict(zip(ints, row[1:1 + len(ints)]))
        props: dict = {GPU_TEXT_COLUMNS[c]: v for c, v in zip(texts, row[1 + len(ints):]) if v is not None}
        props.update({GPU_PROPERTY_COLUMNS[c]: v for c, v in values.items()
                      if c in GPU_PROPERTY_COLUMNS and v is not None and v >= 0})
        major, minor = values.get("computeMajor"), values.get("computeMinor")
        if major is not None and minor is not None and major >= 0 and minor >= 0:
            props["compute_capability"] = f"{major}.{minor}"
        out[int(row[0])] = props
    return out


def _devices(con: sqlite3.Connection, schema: _Schema, gpu: np.ndarray, device: np.ndarray, pid: np.ndarray,
             warnings: list[str]) -> tuple[np.ndarray, dict[int, str], dict[int, dict]]:
    """Device column, names and properties. CUDA device ordinals are per process: if two processes both
    call different GPUs "device 0" (CUDA_VISIBLE_DEVICES), renumber by nsys' GPU id."""
    gpu_props = _gpu_properties(con, schema)
    gpu_names = {g: str(p["name"]) for g, p in gpu_props.items() if "name" in p}
    cuda_map: list[tuple[int, int, int]] = []  # (pid, cudaId, gpuId)
    ccols = schema.cols("TARGET_INFO_CUDA_DEVICE")
    if {"gpuId", "cudaId"} <= ccols:
        pid_sql = "COALESCE(CAST(pid AS INTEGER), -1)" if "pid" in ccols else "-1"
        cuda_map = [(int(a), int(b), int(c)) for a, b, c in con.execute(
            f"SELECT {pid_sql}, CAST(cudaId AS INTEGER), CAST(gpuId AS INTEGER) FROM TARGET_INFO_CUDA_DEVICE "
            "WHERE cudaId IS NOT NULL AND gpuId IS NOT NULL")]

    pairs = np.unique(np.stack([pid[gpu], device[gpu]], axis=1), axis=0)
    shared = np.unique(pairs[:, 1], return_counts=True)[1].max() > 1 if pairs.size else False
    if shared and pairs[:, 0].min() >= 0:
        lookup = {(p, c): g for p, c, g in cuda_map}
        gpu_of_pair = [lookup.get((int(p), int(d))) for p, d in pairs]
        if all(g is not None for g in gpu_of_pair) and len(set(gpu_of_pair)) == len(gpu_of_pair):
            key_pairs = pairs[:, 0] * (1 << 20) + pairs[:, 1]
            rows_key = pid[gpu] * (1 << 20) + device[gpu]
            out = device.copy()
            out[gpu] = np.array(gpu_of_pair, dtype=np.int64)[np.searchsorted(key_pairs, rows_key)]
            warnings.append("processes use the same CUDA device ordinal for different GPUs (CUDA_VISIBLE_DEVICES); "
                            "devices are numbered by nsys GPU id (TARGET_INFO_CUDA_DEVICE.gpuId)")
            used = set(gpu_of_pair)
            return (out, {g: n for g, n in gpu_names.items() if g in used},
                    {g: p for g, p in gpu_props.items() if g in used})
        warnings.append("several processes report GPU work on the same CUDA device ordinal; if they ran on different "
                        "GPUs their busy time is merged (the export has no TARGET_INFO_CUDA_DEVICE mapping)")
    names: dict[int, str] = {}
    props: dict[int, dict] = {}
    if cuda_map:
        for _p, cuda_id, gpu_id in cuda_map:
            if gpu_id in gpu_names:
                names.setdefault(cuda_id, gpu_names[gpu_id])
            if gpu_id in gpu_props:
                props.setdefault(cuda_id, gpu_props[gpu_id])
    else:
        names, props = dict(gpu_names), dict(gpu_props)
    return device, names, props


def _note_skipped(con: sqlite3.Connection, schema: _Schema, kind: np.ndarray, warnings: list[str]) -> None:
    """Warnings for what the export holds but the analysis cannot use as is."""
    if GRAPH_TABLE in schema.tables:
        replays = int(np.count_nonzero(kind == Kind.GRAPH))
        if replays:
            warnings.append(
                f"{replays} CUDA-graph replays were traced as whole graphs (nsys --cuda-graph-trace=graph, the "
                "default): each counts as one GPU op and its kernels are not visible; per-kernel detail needs "
                "`nsys profile --cuda-graph-trace=node`")
        untimed = _count(con, f'SELECT count(*) FROM {GRAPH_TABLE} WHERE start = 0 AND "end" = 0')
        if untimed:
            warnings.append(f"{untimed} CUDA-graph replays have no timestamps in the export and were left out")
    cols = schema.cols(NVTX_TABLE)
    if {"end", "eventType"} <= cols:
        types = ", ".join(map(str, NVTX_RANGE_TYPES))
        open_ranges = _count(con, f'SELECT count(*) FROM {NVTX_TABLE} WHERE eventType IN ({types}) AND "end" IS NULL')
        if open_ranges:
            warnings.append(f"{open_ranges} NVTX ranges never ended inside the capture and were left out")
