"""The one parsed form of every trace: a columnar event table.

Every loader returns a :class:`Trace`; every analysis is a pure function of it.
Times are nanoseconds, int64 (durations int32 where every one is under
2^31 ns; Kineto's float microseconds are rounded to the nearest ns; nsys is already ns). Names are interned: ``name_id`` indexes
``names``. Launch calls and the GPU work they launched are joined once, by
correlation id, into ``launch_idx`` (see :func:`build_trace`).
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from enum import IntEnum
from typing import Any

import numpy as np

from .heap import HEAP


class Kind(IntEnum):
    """What one row of the event table is. The kinds that occupy a device come first (KERNEL to
    GRAPH; their union is the GPU busy time), so ``kind <= Kind.GRAPH`` selects them."""

    KERNEL = 0  # a GPU kernel
    MEMCPY = 1  # a GPU copy
    MEMSET = 2  # a GPU memset
    GRAPH = 3  # a whole CUDA-graph replay recorded as one GPU op (nsys graph-trace mode)
    RUNTIME = 4  # a CUDA/HIP runtime or driver API call on a host thread
    CPU_OP = 5  # a framework op on a host thread (aten::mm, ...)
    ANNOTATION = 6  # a host range: record_function, NVTX push/pop or start/end
    GPU_ANNOTATION = 7  # a range Kineto mirrors onto a GPU stream


class Api(IntEnum):
    """Class of a runtime/driver call, decided once per interned name."""

    NONE = 0  # not a runtime call, or one we do not classify
    KERNEL_LAUNCH = 1  # cudaLaunchKernel, cudaLaunchKernelExC, cuLaunchKernel(Ex), hipLaunchKernel, ...
    GRAPH_LAUNCH = 2  # cudaGraphLaunch, cuGraphLaunch, hipGraphLaunch
    SYNC = 3  # host blocks: stream/device/event/context synchronize, blocking memcpy
    OTHER = 4  # any other runtime call (cudaMemcpyAsync, cudaEventRecord, ...)


# nsys appends a version suffix (`cudaLaunchKernel_v7000`); ROCm uses hip*.
_VERSION_SUFFIX = r"(?:_v\d+|_ptsz|_ptds|_spt)*$"
_KERNEL_LAUNCH_RE = re.compile(
    r"^(?:cuda|cu|hip)(?:Ext)?(?:Module)?Launch(?:Cooperative)?Kernel(?:ExC|Ex|GGL|MultiDevice)?"
    + _VERSION_SUFFIX
)
_GRAPH_LAUNCH_RE = re.compile(r"^(?:cuda|cu|hip)GraphLaunch" + _VERSION_SUFFIX)
_SYNC_RE = re.compile(
    r"^(?:cuda|cu|hip)(?:StreamSynchronize|DeviceSynchronize|EventSynchronize|CtxSynchronize|ThreadSynchronize"
    r"|Memcpy|Memcpy2D|Memcpy3D|MemcpyDtoH|MemcpyHtoD|MemcpyWithStream|MemcpyPeer|MemcpyToSymbol|MemcpyFromSymbol)"
    + _VERSION_SUFFIX
)


def classify_api_name(name: str) -> Api:
    """Classify one runtime/driver API name (called once per unique name)."""
    if _KERNEL_LAUNCH_RE.match(name):
        return Api.KERNEL_LAUNCH
    if _GRAPH_LAUNCH_RE.match(name):
        return Api.GRAPH_LAUNCH
    if _SYNC_RE.match(name):
        return Api.SYNC
    return Api.OTHER


#: The table's columns and their types; those of :data:`_NARROW_COLUMNS` are int32 when every value
#: fits, else the int64 given here (ids as the trace writes them: most traces' fit, some do not).
_COLUMNS: dict[str, Any] = {
    "kind": np.int8,
    "name_id": np.int32,
    "device": np.int32,  # -1 on host rows
    "stream": np.int64,  # -1 on host rows
    "pid": np.int64,
    "tid": np.int64,
    "start_ns": np.int64,
    "dur_ns": np.int64,  # int32 when every duration is under 2^31 ns (2.1 s): a 1 GB trace's 1.9 M rows save 7 MiB
    "corr": np.int64,  # correlation id, -1 when absent
    "graph_id": np.int64,  # CUDA graph id of a kernel replayed from a graph, -1 when absent/unknown
    "dims_id": np.int32,  # interned "Input Dims" text of a CPU op, -1 when absent
    # interned name of the kernel a launch call names itself (ROCm's `kernel` arg), -1 when absent;
    # optional: a loader that never has it may leave it out
    "kernel_name_id": np.int32,
    # launch configuration of a kernel (Kineto args "grid"/"block", nsys gridX.../blockX...), -1 where
    # absent (every non-kernel row); optional. A grid dimension is below 2^31, a block one at most 1024.
    "grid_x": np.int32,
    "grid_y": np.int32,
    "grid_z": np.int32,
    "block_x": np.int16,
    "block_y": np.int16,
    "block_z": np.int16,
}
_NARROW_COLUMNS = ("pid", "tid", "corr", "dur_ns")
#: Columns read only by comparison and as indices, nearly all -1 or small ids on most traces: stored at the
#: smallest integer type that holds every value (:func:`smallest_int`; int8 when all are -1), at most the type
#: of :data:`_COLUMNS`.
_SMALLEST_COLUMNS = ("device", "stream", "graph_id", "dims_id", "kernel_name_id", "grid_x", "grid_y", "grid_z",
                     "block_x", "block_y", "block_z")
_OPTIONAL_COLUMNS = ("kernel_name_id", "grid_x", "grid_y", "grid_z", "block_x", "block_y", "block_z")
#: The launch-configuration columns, in the order (grid x, y, z, block x, y, z).
LAUNCH_CONFIG_COLUMNS = ("grid_x", "grid_y", "grid_z", "block_x", "block_y", "block_z")

#: The normalised keys of :attr:`Trace.device_properties`, each present only where the trace gives it
#: (Kineto: top-level ``deviceProperties``; nsys: ``TARGET_INFO_GPU``), with the unit in the name:
DEVICE_PROPERTY_KEYS: dict[str, str] = {
    "name": "device name as the profiler wrote it (str; ROCm traces may leave it empty)",
    "total_memory_bytes": "device memory (Kineto totalGlobalMem, nsys totalMemory)",
    "sm_count": "streaming multiprocessors / compute units (Kineto numSms, nsys smCount)",
    "compute_capability": 'major.minor as a str, e.g. "9.0" (Kineto computeMajor/Minor, nsys computeMajor/Minor)',
    "memory_bandwidth_bytes_per_s": "peak memory bandwidth (nsys memoryBandwidth; Kineto does not write it)",
    "clock_rate_hz": "SM clock (nsys clockRate, which its schema gives in Hz)",
    "l2_cache_bytes": "L2 cache size (nsys l2CacheSize)",
    "warp_size": "threads per warp/wavefront (Kineto warpSize, nsys threadsPerWarp)",
    "max_threads_per_block": "(Kineto maxThreadsPerBlock, nsys maxThreadsPerBlock)",
    "max_threads_per_sm": "(Kineto maxThreadsPerMultiprocessor)",
    "registers_per_block": "32-bit registers per block (Kineto regsPerBlock, nsys maxRegistersPerBlock)",
    "registers_per_sm": "32-bit registers per SM (Kineto regsPerMultiprocessor, nsys maxRegistersPerSm)",
    "shared_memory_per_block_bytes": "(Kineto sharedMemPerBlock, nsys maxShmemPerBlock)",
    "shared_memory_per_block_optin_bytes": "opt-in maximum (Kineto sharedMemPerBlockOptin, nsys maxShmemPerBlockOptin)",
    "shared_memory_per_sm_bytes": "(Kineto sharedMemPerMultiprocessor, ROCm maxSharedMemoryPerMultiProcessor, "
                                  "nsys maxShmemPerSm)",
    "chip_name": "(nsys chipName)",
    "bus_location": "PCI bus location (nsys busLocation)",
    "uuid": "(nsys uuid)",
}


@dataclass(frozen=True, eq=False)
class PythonCalls:
    """Python function ranges of a torch.profiler trace taken ``with_stack`` (Kineto
    ``python_function`` events), kept beside the event table rather than in it: they are host
    call-stack frames, which no metric counts; serving engines' step markers and detection cues
    are read from them (:mod:`launchgap.steps`, :mod:`launchgap.engines`). Sorted by ``start_ns``;
    ``name_id`` indexes ``names`` (``"path.py(line): function"``); ``tid`` is -1 when not an integer.
    A with_stack trace holds millions of them, so ``name_id`` and ``tid`` are at the smallest integer
    type their values allow (:func:`smallest_int`): cast before arithmetic that could leave it.
    """

    names: np.ndarray
    name_id: np.ndarray
    start_ns: np.ndarray
    end_ns: np.ndarray
    tid: np.ndarray

    def __len__(self) -> int:
        return int(self.start_ns.shape[0])


def no_python_calls() -> PythonCalls:
    """The empty table (traces without Python function events, Nsight exports)."""
    empty_i = np.zeros(0, dtype=np.int64)
    return PythonCalls(np.empty(0, dtype=object), np.zeros(0, dtype=np.int32), empty_i, empty_i.copy(),
                       empty_i.copy())


@dataclass(frozen=True, eq=False)
class Trace:
    """A parsed trace: one row per event, all columns the same length, sorted by ``start_ns``.

    Columns (numpy arrays): ``kind`` (:class:`Kind`), ``name_id``, ``device``, ``stream``,
    ``pid``, ``tid``, ``start_ns``, ``dur_ns``, ``corr``, ``graph_id``, ``dims_id``,
    ``kernel_name_id`` (on a launch call: the kernel it launched, as the call itself names it, which
    ROCm traces do; a capture trace needs it, as its kernels never run), ``grid_x/y/z`` (at most int32) and
    ``block_x/y/z`` (at most int16): a kernel's launch configuration, -1 where absent. ``graph_id``,
    ``dims_id``, ``kernel_name_id`` and the launch configuration are stored at the smallest integer type
    their values allow (mostly -1: int8), as are ``device`` and ``stream`` (a few small ids: int8 on most
    traces); ``pid``, ``tid``, ``corr`` and ``dur_ns`` are int32 when every value fits. Cast before arithmetic
    that could leave the type; derived
    once at build time: ``end_ns``, ``api`` (:class:`Api` of runtime rows) and ``launch_idx``
    (for GPU ops: row index of the runtime call with the same correlation id, else -1).
    ``python_calls`` holds the Python function ranges of a ``with_stack`` trace, beside the table.
    ``device_properties`` maps a device id to what the trace says of it, under the normalised keys of
    :data:`DEVICE_PROPERTY_KEYS` (only those the trace gives). ``kernel_resources`` maps a kernel's name id to
    ``(registers per thread, shared memory bytes per block)`` as the profiler recorded them (static plus dynamic
    shared memory; the largest over the name's launches; -1 where not recorded): one entry per kernel name, not
    per event (Kineto args ``registers per thread`` / ``shared memory``; nsys ``registersPerThread``,
    ``staticSharedMemory + dynamicSharedMemory``).
    """

    path: str
    format: str  # "kineto" | "nsys"
    names: np.ndarray  # object array of str; name_id indexes it
    kind: np.ndarray
    name_id: np.ndarray
    device: np.ndarray
    stream: np.ndarray
    pid: np.ndarray
    tid: np.ndarray
    start_ns: np.ndarray
    dur_ns: np.ndarray
    corr: np.ndarray
    graph_id: np.ndarray
    dims_id: np.ndarray
    kernel_name_id: np.ndarray
    grid_x: np.ndarray
    grid_y: np.ndarray
    grid_z: np.ndarray
    block_x: np.ndarray
    block_y: np.ndarray
    block_z: np.ndarray
    end_ns: np.ndarray
    api: np.ndarray
    launch_idx: np.ndarray
    device_names: dict[int, str] = field(default_factory=dict)
    rank: int | None = None
    world_size: int | None = None
    warnings: tuple[str, ...] = ()
    python_calls: PythonCalls = field(default_factory=no_python_calls)
    #: What the loader saw of the profiler's settings (Kineto: top-level flags and event counts; see
    #: :func:`launchgap.loaders.kineto.schema._settings_of`); empty when the format says nothing of them.
    profiler_settings: dict[str, Any] = field(default_factory=dict)
    device_properties: dict[int, dict[str, Any]] = field(default_factory=dict)
    kernel_resources: dict[int, tuple[int, int]] = field(default_factory=dict)
    #: Host process id -> the name the profiler recorded for it (nsys ``PROCESSES``), where the format has one.
    process_names: dict[int, str] = field(default_factory=dict)

    def __len__(self) -> int:
        return int(self.kind.shape[0])

    @property
    def gpu_mask(self) -> np.ndarray:
        """Rows that occupy a device (kernels, copies, sets, whole-graph replays)."""
        return self.kind <= Kind.GRAPH  # the device kinds come first (see Kind)

    def name_counts(self, mask: np.ndarray) -> np.ndarray:
        """Rows per name id (int64, one entry per name) among the rows where ``mask`` holds, counted in blocks
        of rows: no copy of the row list or of its name ids (a 1 GB trace has over a million CPU ops).
        ``np.flatnonzero`` of it gives the distinct names of those rows, ascending."""
        out = np.zeros(len(self.names), dtype=np.int64)
        for lo in range(0, len(self), _ROW_BLOCK):
            ids = self.name_id[lo:lo + _ROW_BLOCK][mask[lo:lo + _ROW_BLOCK]]
            if ids.size:
                out += np.bincount(ids, minlength=out.size)
        return out

    def named(self, ids: Any) -> np.ndarray:
        """Rows whose name id is one of ``ids``: a byte a row, through a table per name (``np.isin`` would sort
        copies of the column)."""
        hit = np.zeros(len(self.names), dtype=bool)
        hit[np.asarray(ids, dtype=np.int64)] = True
        return hit[self.name_id]

    def name_of(self, rows: np.ndarray) -> np.ndarray:
        """Names (str objects) of the given row indices."""
        return self.names[self.name_id[rows]]

    @property
    def devices(self) -> list[int]:
        """Devices that ran at least one GPU op, ascending."""
        return sorted(int(d) for d in np.unique(self.device[self.gpu_mask]))


_MAX_TIME_NS = 2**62
#: Rows per block where a helper walks the whole table (its per-block temporaries stay small).
_ROW_BLOCK = 1 << 18


def build_trace(
    *,
    path: str,
    format: str,
    names: list[str],
    columns: dict[str, np.ndarray],
    device_names: dict[int, str] | None = None,
    rank: int | None = None,
    world_size: int | None = None,
    warnings: list[str] | None = None,
    python_calls: PythonCalls | None = None,
    profiler_settings: dict[str, Any] | None = None,
    device_properties: dict[int, dict[str, Any]] | None = None,
    kernel_resources: dict[int, tuple[int, int]] | None = None,
    process_names: dict[int, str] | None = None,
) -> Trace:
    """Validate raw columns from a loader, sort by start time and join launches to GPU work.

    ``columns`` must hold every column of :data:`_COLUMNS` but the optional ones (``kernel_name_id``
    and the launch configuration, -1 when left out); a loader fills absent values with -1; a launch
    dimension outside its column's range (negative, or a block dimension past int16) reads as -1.
    Sorting is stable, so equal start times keep the loader's order. ``columns`` is emptied as its
    arrays are taken, so that each can be freed once converted (a loader holds no other reference).
    """
    warnings = list(warnings or ())
    cols = _checked_columns(columns, warnings)
    HEAP.trim()  # the loader's columns, converted, are freed (launchgap.heap)
    n = int(cols["kind"].shape[0])
    # Stable sort, one column at a time: the table's memory plus one column at its peak.
    order = np.argsort(cols["start_ns"], kind="stable")
    if n and not np.all(order[1:] > order[:-1]):
        for key in list(cols):
            cols[key] = cols[key][order]
    del order
    HEAP.trim()  # and the unsorted columns
    if (cols["dur_ns"] < 0).any():
        warnings.append(f"{int((cols['dur_ns'] < 0).sum())} events had a negative duration, counted as 0")
        cols["dur_ns"] = np.maximum(cols["dur_ns"], 0)
    end_ns = cols["start_ns"] + cols["dur_ns"]

    names_arr = np.empty(len(names), dtype=object)
    names_arr[:] = names
    api_of_name = np.zeros(len(names), dtype=np.int8)
    runtime = cols["kind"] == Kind.RUNTIME
    for nid in np.unique(cols["name_id"][runtime]):
        api_of_name[nid] = classify_api_name(names[nid])
    api = np.where(runtime, api_of_name[cols["name_id"]] if n else api_of_name[:0], Api.NONE).astype(np.int8)

    launch_idx = _join_launches(cols["kind"], cols["corr"], runtime)
    return Trace(
        path=path,
        format=format,
        names=names_arr,
        end_ns=end_ns,
        api=api,
        launch_idx=launch_idx,
        device_names=dict(device_names or {}),
        rank=rank,
        world_size=world_size,
        warnings=tuple(warnings),
        python_calls=python_calls if python_calls is not None else no_python_calls(),
        profiler_settings=dict(profiler_settings or {}),
        device_properties={int(k): dict(v) for k, v in (device_properties or {}).items()},
        kernel_resources={int(k): (int(v[0]), int(v[1])) for k, v in (kernel_resources or {}).items()},
        process_names={int(k): str(v) for k, v in (process_names or {}).items()},
        **cols,
    )


def _checked_columns(columns: dict[str, np.ndarray], warnings: list[str]) -> dict[str, np.ndarray]:
    """The loader's columns at the table's types (:func:`narrowest` for :data:`_NARROW_COLUMNS`), rows
    with a device id, time or duration out of range dropped (with a warning). Column by column, each
    taken out of ``columns`` as it is converted, so the peak is about the table plus a column."""
    n = len(columns["kind"])
    for key in _OPTIONAL_COLUMNS:
        if key not in columns:
            columns[key] = np.full(n, -1, dtype=_COLUMNS[key])
    for key in columns:
        if np.shape(columns[key]) != (n,):
            raise ValueError(f"column {key} has shape {np.shape(columns[key])}, expected ({n},)")
    kind = np.asarray(columns["kind"])
    if n and not (int(kind.min()) >= 0 and int(kind.max()) <= max(Kind)):
        raise ValueError("column kind holds a value that is not a Kind")  # gpu_mask relies on it
    del kind
    # Device ids are int32 here: a larger one would alias another device, so such rows are corrupt.
    dev = np.asarray(columns["device"])
    keep = (dev <= np.iinfo(np.int32).max) & (dev >= -1)
    if not keep.all():
        warnings.append(f"dropped {int((~keep).sum())} events with a device id out of range")
    # Times beyond ±2^62 ns (146 years) are corrupt values; end = start + dur must not overflow.
    # (No np.abs: it overflows on int64's minimum and leaves it negative.)
    start = np.asarray(columns["start_ns"], dtype=np.int64)
    dur = np.asarray(columns["dur_ns"], dtype=np.int64)
    sane = (start > -_MAX_TIME_NS) & (start < _MAX_TIME_NS) & (dur > -_MAX_TIME_NS) & (dur < _MAX_TIME_NS)
    del start, dur, dev
    if not sane[keep].all():
        warnings.append(f"dropped {int((~sane[keep]).sum())} events with timestamps or durations out of range")
    keep &= sane
    del sane
    rows = None if keep.all() else np.flatnonzero(keep)
    del keep
    cols: dict[str, np.ndarray] = {}
    for key, dtype in _COLUMNS.items():
        arr = np.asarray(columns.pop(key))
        if rows is not None:
            arr = arr[rows]
        if key in LAUNCH_CONFIG_COLUMNS:
            arr = np.where((arr >= 0) & (arr <= np.iinfo(dtype).max), arr, -1)
        cols[key] = (narrowest(arr) if key in _NARROW_COLUMNS else smallest_int(arr, dtype) if key in _SMALLEST_COLUMNS
                     else arr.astype(dtype, copy=False))
        del arr
    columns.clear()
    return cols


def narrowest(values: np.ndarray) -> np.ndarray:
    """``values`` as int32 when every one fits, else int64 (a copy only when the type changes)."""
    values = np.asarray(values)
    if values.dtype == np.int32:
        return values
    if values.size == 0 or (int(values.min()) >= -(2**31) and int(values.max()) < 2**31):
        return values.astype(np.int32)
    return values.astype(np.int64, copy=False)


_SMALL_INTS = tuple((t, np.iinfo(t)) for t in (np.int8, np.int16, np.int32, np.int64))


def one_of(column: np.ndarray, values: tuple[int, ...]) -> np.ndarray:
    """Where ``column`` (e.g. ``kind``, ``api``) holds one of ``values``: a byte a row. ``np.isin`` would first
    make a copy of the column as wide as its lookup table's index (10 MiB for 1.9 M int8 rows)."""
    out = column == values[0]
    for v in values[1:]:
        out |= column == v
    return out


def smallest_int(values: np.ndarray, widest: Any = np.int64) -> np.ndarray:
    """``values`` as the smallest signed integer type that holds every one, at most ``widest`` (values past
    it must not occur: the caller has checked them); int8 when empty."""
    values = np.asarray(values)
    lo, hi = (int(values.min()), int(values.max())) if values.size else (0, 0)
    for t, info in _SMALL_INTS:
        if (info.min <= lo and hi <= info.max) or t == widest:
            return values.astype(t, copy=False)
    return values.astype(widest, copy=False)


def kernel_own_name(name: str) -> str:
    """A demangled kernel name without its parameter list and return type, template arguments kept:
    ``void at::native::vectorized_elementwise_kernel<4, ...>(int, ...)`` -> ``at::native::vectorized_elementwise_kernel<4,
    ...>``. The return type may itself hold parentheses and spaces (cuBLAS's ``std::enable_if<!(false), void>::type
    internal::gemvx::kernel<...>(...)``, vLLM's ``std::enable_if<(((8)>(0)))&&..., void>::type
    vllm::fused_add_rms_norm_kernel<...>(...)``), so the cut is at the trailing balanced ``(...)`` and at the last space
    outside brackets, not at the first ``(``. A name whose trailing ``)`` opens nowhere is returned as it is. Fast
    paths first (a name holds one ``(`` group; a return type without template arguments): the scans run only for
    names that need them."""
    s = name.replace("(anonymous namespace)::", "").replace("(anonymous namespace)", "").strip()
    if s.endswith(")") and s.count("(") == 1:  # the one group is the parameter list (most names): no scan
        s = s[:s.index("(")].rstrip()
    elif s.endswith(")"):  # the parameter list: the balanced group that ends the name
        depth = 0
        for i in range(len(s) - 1, -1, -1):  # one name, not events: callers run it once per distinct name
            depth += {")": 1, "(": -1}.get(s[i], 0)
            if depth == 0:
                s = s[:i].rstrip()
                break
        else:
            return name
    first = s.find("<")
    head = s if first < 0 else s[:first]
    if " " in head:  # a return type without template arguments ("void "): the last space before the first "<"
        return s[head.rindex(" ") + 1:]
    if first < 0 or ">::type " not in s:  # no return type, or none that a scan would find (std::enable_if<...>::type)
        return s
    paren, angle, cut = 0, 0, -1
    for i, ch in enumerate(s):  # the return type ends at the last space outside <...> and (...)
        if ch == "(":
            paren += 1
        elif ch == ")":
            paren -= 1
        elif paren == 0 and ch == "<":  # inside (...) a < or > compares: enable_if<((8)>(0))>
            angle += 1
        elif paren == 0 and ch == ">" and s[i - 1] != "-":
            angle -= 1
        elif ch == " " and paren == 0 and angle == 0:
            cut = i
        if paren < 0 or angle < 0:
            return s
    return s[cut + 1:] if paren == 0 and angle == 0 and cut >= 0 and s[cut + 1:] else s


def kernel_base_name(name: str) -> str:
    """:func:`kernel_own_name` without template arguments (``vllm::reshape_and_cache_flash_kernel``); the name's first
    60 characters where nothing is left."""
    return kernel_own_name(name).split("<", 1)[0].strip() or name[:60]


def _join_launches(kind: np.ndarray, corr: np.ndarray, runtime: np.ndarray) -> np.ndarray:
    """For each GPU op, the row of the runtime call with its correlation id (-1 if none).

    A cudaGraphLaunch shares its correlation id with every kernel it replays, so many GPU
    ops may point at one call. When several runtime rows share an id (a driver call nested
    in a runtime call), the earliest wins.
    """
    launch_idx = np.full(kind.shape[0], -1, dtype=np.int32 if kind.shape[0] < 2**31 else np.int64)
    rt_rows = np.flatnonzero(runtime & (corr >= 0))
    gpu_rows = np.flatnonzero((kind <= Kind.GRAPH) & (corr >= 0))
    if rt_rows.size == 0 or gpu_rows.size == 0:
        return launch_idx
    rt_corr = corr[rt_rows]
    order = np.argsort(rt_corr, kind="stable")  # stable: earliest row first among equal ids
    rt_corr_sorted = rt_corr[order]
    pos = np.searchsorted(rt_corr_sorted, corr[gpu_rows], side="left")
    pos_ok = pos < rt_corr_sorted.size
    hit = np.zeros(gpu_rows.size, dtype=bool)
    hit[pos_ok] = rt_corr_sorted[pos[pos_ok]] == corr[gpu_rows][pos_ok]
    launch_idx[gpu_rows[hit]] = rt_rows[order[pos[hit]]]
    return launch_idx
