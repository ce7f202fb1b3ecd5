"""torch.profiler / Kineto Chrome-trace JSON (``.json``, ``.json.gz``) -> :class:`Trace`.

Decoding is typed (msgspec Structs that name only the fields the analysis uses), so
unknown keys are skipped without building Python objects for them. Event categories
kept: ``kernel``, ``gpu_memcpy``, ``gpu_memset``, ``cuda_runtime``, ``cuda_driver``,
``cpu_op``, ``user_annotation``, ``gpu_user_annotation``; ``ac2g`` flow events fill in
a GPU op's correlation id when its args lack one. Everything else is dropped.

How a large file is read (memory follows the events kept, not the JSON text):

* The content is read (and gunzipped) in pieces of a few MB by a background thread
  (:func:`~analyzer.loaders._io.read_ahead`), so decompression overlaps decoding.
* Each piece is cut after the last complete event of ``traceEvents`` and read on its own as
  a JSON array (:func:`_add_text`). The C scan (``_kineto_scan.c``, compiled at install) reads
  it in one pass straight to one record per event (ts, dur, ids, and indices into the piece's
  distinct strings), which :meth:`_ColumnBuilder.add_scanned` turns into columns with a few
  numpy operations; it declines any text it cannot be sure to read exactly as msgspec's strict
  schema does (invalid JSON, a value of another type, a number it cannot convert exactly...).
  A declined text, or every text where the scan is missing, is decoded by msgspec in stretches
  of :data:`SUB_PIECE_BYTES`; each stretch's events become numpy columns at once, while their
  Structs are still in the CPU's cache. A cut that is not between two events cannot decode (a
  string or object would be left open), so a wrong cut is never silently accepted: the loader
  then decodes the rest of the piece, or the whole document, in one go instead.
* Without the scan, events decode into strict Structs first (``ts`` a number, ids integers...), which
  turn into columns in few passes: one codes every event, one puts every numeric field into
  a numpy record, one per object field (name, pid, tid, Input Dims). A file that breaks
  those types (string ids on ROCm, ``null`` fields) is read again with lenient Structs
  and converted value by value. All three give the same columns (see
  ``tests/unit/test_kineto_loader_equivalence.py`` and ``test_kineto_native_scan.py``).
* Structs are created with ``gc=False``: decoded JSON cannot form reference cycles, and
  without it the cyclic GC re-scans millions of live events over and over.
"""
from __future__ import annotations

import gc
import os
import pickle
import queue
import struct
import sys
import threading
from array import array
from itertools import chain, repeat
from pathlib import Path
from typing import Any, Iterable, Iterator, Union

import msgspec
import numpy as np

from ..errors import NoGpuActivityError, TraceFormatError, TraceTooLargeError
from ._io import (CHUNK_BYTES, DEFAULT_MAX_TRACE_BYTES, GZIP_MAGIC, HEAP, iter_content, mb_text, read_ahead,
                  read_head, read_text_bytes)
from ..trace import LAUNCH_CONFIG_COLUMNS, Kind, PythonCalls, Trace, build_trace, narrowest, no_python_calls

try:  # the fast path (_kineto_scan.c), where it was compiled at install
    from . import _kineto_scan
except ImportError:  # pragma: no cover - a platform without a C compiler: msgspec reads every text
    _kineto_scan = None
#: Fields of the scan's records this module reads; a build from an older source lacks some of them and
#: is not used (msgspec reads every text, with the same result) until the package is installed again.
_SCAN_FIELDS_NEEDED = frozenset(("ts", "dur", "pid", "tid", "corr", "device", "stream", "graph_id", "id", "ph", "cat",
                                 "name", "kernel", "dims", "pid_str", "tid_str", *LAUNCH_CONFIG_COLUMNS, "id_kind",
                                 "has_stack"))
if _kineto_scan is not None and not _SCAN_FIELDS_NEEDED <= {f[0] for f in _kineto_scan.EVENT_FIELDS}:
    _kineto_scan = None  # pragma: no cover - a stale build in a source checkout

_Scalar = Union[int, float, str, None]

#: ``LAUNCHGAP_NATIVE_SCAN=0`` turns the C scan off (every text is decoded by msgspec; same result).
NATIVE_SCAN_ENV = "LAUNCHGAP_NATIVE_SCAN"
#: The C scan of an event text (see :func:`_add_text`), or None where it is missing or turned off.
_SCAN = (_kineto_scan.scan if _kineto_scan is not None and os.environ.get(NATIVE_SCAN_ENV, "1") != "0"
         else None)
#: One record per event, as the C scan lays it out (``EVENT_FIELDS``: name, byte offset, type).
_SCAN_EVENT = (np.dtype({"names": [f[0] for f in _kineto_scan.EVENT_FIELDS],
                         "formats": [f[2] for f in _kineto_scan.EVENT_FIELDS],
                         "offsets": [f[1] for f in _kineto_scan.EVENT_FIELDS],
                         "itemsize": _kineto_scan.EVENT_SIZE}) if _kineto_scan is not None else None)

_CAT_KIND: dict[str, int] = {
    "kernel": Kind.KERNEL,
    "gpu_memcpy": Kind.MEMCPY,
    "gpu_memset": Kind.MEMSET,
    "cuda_runtime": Kind.RUNTIME,
    "cuda_driver": Kind.RUNTIME,
    "cpu_op": Kind.CPU_OP,
    "user_annotation": Kind.ANNOTATION,
    "gpu_user_annotation": Kind.GPU_ANNOTATION,
    # The TensorBoard-plugin-era schema (torch 1.8-1.9): capitalised categories, same args.
    "Kernel": Kind.KERNEL,
    "Memcpy": Kind.MEMCPY,
    "Memset": Kind.MEMSET,
    "Runtime": Kind.RUNTIME,
    "Operator": Kind.CPU_OP,
}
#: Category of Python function ranges (traces taken ``with_stack``), kept beside the event table.
_PYTHON_CAT = "python_function"
# Codes of the strict schema's one pass over a piece's events: a kept event's kind + 1, a Python
# function range, an ac2g flow end; 0 for anything else.
_PYTHON_CODE = max(_CAT_KIND.values()) + 2
_FLOW_CODE = _PYTHON_CODE + 1
_X_CODES: dict[str, int] = {**{cat: int(kind) + 1 for cat, kind in _CAT_KIND.items()}, _PYTHON_CAT: _PYTHON_CODE}


# --- lenient schema: any JSON scalar where Kineto writes one ------------------------------

class _Args(msgspec.Struct, gc=False):
    correlation: _Scalar = None
    device: _Scalar = None
    stream: _Scalar = None
    graph_id: _Scalar = msgspec.field(name="graph id", default=None)
    kernel: Any = None  # ROCm: the kernel a launch call launched, named on the call itself
    input_dims: msgspec.Raw = msgspec.field(name="Input Dims", default=msgspec.Raw(b""))
    call_stack: msgspec.Raw = msgspec.field(name="Call stack", default=msgspec.Raw(b""))
    grid: Any = None  # a kernel's launch configuration, [x, y, z] (see _dim3)
    block: Any = None


class _Event(msgspec.Struct, gc=False):
    ph: Any = None
    cat: Any = None
    name: Any = None
    pid: _Scalar = None
    tid: _Scalar = None
    ts: _Scalar = None
    dur: _Scalar = None
    id: _Scalar = None
    args: Union[_Args, None] = None


class _Device(msgspec.Struct, gc=False):
    """One entry of Kineto's top-level ``deviceProperties`` (CUDA and ROCm write the same keys)."""

    id: _Scalar = None
    name: Any = None
    totalGlobalMem: Any = None
    computeMajor: Any = None
    computeMinor: Any = None
    numSms: Any = None
    warpSize: Any = None
    maxThreadsPerBlock: Any = None
    maxThreadsPerMultiprocessor: Any = None
    regsPerBlock: Any = None
    regsPerMultiprocessor: Any = None
    sharedMemPerBlock: Any = None
    sharedMemPerBlockOptin: Any = None
    sharedMemPerMultiprocessor: Any = None
    maxSharedMemoryPerMultiProcessor: Any = None  # ROCm's spelling


#: Kineto ``deviceProperties`` key -> normalised key of :data:`analyzer.trace.DEVICE_PROPERTY_KEYS` (ints).
_DEVICE_INT_KEYS = {
    "totalGlobalMem": "total_memory_bytes", "numSms": "sm_count", "warpSize": "warp_size",
    "maxThreadsPerBlock": "max_threads_per_block", "maxThreadsPerMultiprocessor": "max_threads_per_sm",
    "regsPerBlock": "registers_per_block", "regsPerMultiprocessor": "registers_per_sm",
    "sharedMemPerBlock": "shared_memory_per_block_bytes",
    "sharedMemPerBlockOptin": "shared_memory_per_block_optin_bytes",
    "sharedMemPerMultiprocessor": "shared_memory_per_sm_bytes",
    "maxSharedMemoryPerMultiProcessor": "shared_memory_per_sm_bytes",
}


class _DistInfo(msgspec.Struct, gc=False):
    rank: _Scalar = None
    world_size: _Scalar = None


class _KinetoFile(msgspec.Struct, gc=False):
    traceEvents: list[_Event]
    deviceProperties: Union[list[_Device], None] = None
    distributedInfo: Union[_DistInfo, None] = None
    record_shapes: _Scalar = None  # torch.profiler writes its settings at the top level ("1" or 1 when on)
    with_stack: _Scalar = None
    with_flops: _Scalar = None
    with_modules: _Scalar = None
    profile_memory: _Scalar = None


# --- strict schema: what Kineto actually writes. Defaults are what the lenient conversion
# makes of a missing field (a missing name reads as "None", as str(None) does), so a file
# that decodes strictly gives the same columns as the lenient path.

class _FastArgs(msgspec.Struct, gc=False, frozen=True):
    correlation: int = -1
    device: int = -1
    stream: int = -1
    graph_id: int = msgspec.field(name="graph id", default=-1)
    kernel: str = ""
    input_dims: msgspec.Raw = msgspec.field(name="Input Dims", default=msgspec.Raw(b""))
    call_stack: msgspec.Raw = msgspec.field(name="Call stack", default=msgspec.Raw(b""))
    grid: Any = None  # any value: _dim3 reads [x, y, z] and makes -1s of anything else
    block: Any = None


_NO_ARGS = _FastArgs()


class _FastEvent(msgspec.Struct, gc=False):
    ph: str = ""
    cat: str = ""
    name: str = "None"
    pid: Union[int, str] = "None"
    tid: Union[int, str] = "None"
    ts: float = float("nan")
    dur: float = 0.0
    id: _Scalar = None  # only flows use it; other events put anything there
    args: _FastArgs = _NO_ARGS


class _FastKinetoFile(msgspec.Struct, gc=False):
    traceEvents: list[_FastEvent]
    deviceProperties: Union[list[_Device], None] = None
    distributedInfo: Union[_DistInfo, None] = None
    record_shapes: _Scalar = None  # torch.profiler writes its settings at the top level ("1" or 1 when on)
    with_stack: _Scalar = None
    with_flops: _Scalar = None
    with_modules: _Scalar = None
    profile_memory: _Scalar = None


class _Header(msgspec.Struct, gc=False):
    traceEvents: list[Any]
    deviceProperties: Union[list[_Device], None] = None
    distributedInfo: Union[_DistInfo, None] = None
    record_shapes: _Scalar = None  # torch.profiler writes its settings at the top level ("1" or 1 when on)
    with_stack: _Scalar = None
    with_flops: _Scalar = None
    with_modules: _Scalar = None
    profile_memory: _Scalar = None


#: Top-level profiler settings torch.profiler writes (see :func:`_settings_of`).
PROFILER_FLAGS = ("record_shapes", "with_stack", "with_flops", "with_modules", "profile_memory")
#: Events (in file order) looked at for traces of the profiler's settings that are not top-level flags.
SETTINGS_SAMPLE_EVENTS = 50_000
_NO_STACK = frozenset((b"", b'""', b"null", b"[]"))
# Codes of sampled events (see _ColumnBuilder._sample_settings); 4 is a cpu_op with a call stack.
_SAMPLE_CODES = {"python_function": 1, "cpu_instant_event": 2, "cpu_op": 3}


_DECODER = msgspec.json.Decoder(_KinetoFile)
_FILE_DECODERS = {True: msgspec.json.Decoder(_FastKinetoFile), False: _DECODER}
_EVENTS_DECODERS = {True: msgspec.json.Decoder(list[_FastEvent]), False: msgspec.json.Decoder(list[_Event])}
_HEADER_DECODER = msgspec.json.Decoder(_Header)


def _as_int(value: _Scalar, default: int = -1) -> int:
    """Kineto writes ids as ints, floats or strings (``"0x0"`` on ROCm); anything else -> default."""
    if value is None or isinstance(value, bool):
        return default
    if isinstance(value, int):
        return value if -(2**63) <= value < 2**63 else default
    if isinstance(value, float):
        return int(value) if value == value and abs(value) < 2**63 else default
    try:
        parsed = int(value, 0)
    except (TypeError, ValueError):
        return default
    return parsed if -(2**63) <= parsed < 2**63 else default


_NO_DIM3 = (-1, -1, -1)


def _dim3(value: Any) -> tuple[int, int, int]:
    """A kernel's ``grid`` or ``block`` arg: ``[x, y, z]`` of ints, each -1 unless in [0, 2^31); -1s for
    any other value (the C scan reads the same, or declines the text)."""
    if type(value) is list and len(value) == 3 and all(type(v) is int for v in value):
        return tuple(v if 0 <= v < 2**31 else -1 for v in value)  # type: ignore[return-value]
    return _NO_DIM3


def _launch_config(args: list, n: int) -> list[np.ndarray]:
    """Columns grid x, y, z, block x, y, z (int32) of each event's args, -1 where absent."""
    out = np.full((6, n), -1, dtype=np.int32)
    grids = [a.grid for a in args]
    blocks = [a.block for a in args]
    for col, values in ((0, grids), (3, blocks)):
        at = [i for i, v in enumerate(values) if v is not None]  # kernels only
        if at:
            out[col:col + 3, at] = np.array([_dim3(values[i]) for i in at], dtype=np.int32).T
    return list(out)


def _device_properties(devices: Iterable[_Device] | None) -> dict[int, dict[str, Any]]:
    """``deviceProperties`` under the normalised keys of :data:`analyzer.trace.DEVICE_PROPERTY_KEYS`:
    integers that are ints >= 0, the name when a str, ``compute_capability`` from both halves."""
    out: dict[int, dict[str, Any]] = {}
    for dev in devices or []:
        dev_id = _as_int(dev.id)
        if dev_id < 0:
            continue
        props: dict[str, Any] = {}
        if isinstance(dev.name, str):
            props["name"] = dev.name
        for src, key in _DEVICE_INT_KEYS.items():
            v = getattr(dev, src)
            if type(v) is int and v >= 0 and key not in props:
                props[key] = v
        major, minor = dev.computeMajor, dev.computeMinor
        if type(major) is int and type(minor) is int and major >= 0 and minor >= 0:
            props["compute_capability"] = f"{major}.{minor}"
        out[dev_id] = props
    return out


def _as_us(value: _Scalar) -> float:
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        try:
            return float(value)
        except OverflowError:  # an integer too large for a float
            return float("nan")
    if isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            return float("nan")
    return float("nan")


def decode_kineto(data: bytes | bytearray, path: str) -> _KinetoFile:
    """Typed (lenient) decode of a whole Kineto JSON text, or a one-line :class:`TraceFormatError`."""
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


def load_kineto(path: str | Path, max_bytes: int = DEFAULT_MAX_TRACE_BYTES, *,
                chunk_bytes: int = CHUNK_BYTES, decoders: int | None = None) -> Trace:
    """Load a Kineto trace file into the columnar :class:`Trace`.

    ``chunk_bytes`` is the size of the pieces the content is read and decoded in (tests
    make it small to cut files in many places); it changes memory use, never the result.
    ``decoders`` is how many processes decode (None: :func:`_decoders_for` decides); it changes
    the time taken, never the result.
    """
    p = Path(path)
    n = _decoders_for(p, decoders)
    reason = ""
    strict = True
    while True:
        try:
            return _load_streaming(p, max_bytes, chunk_bytes, strict, n)
        except _NotStrict:
            if not strict:
                break
            strict = False  # read again with the lenient schema
        except _WorkerFailed:
            if n == 1:
                raise
            n = 1  # read again in this process alone
        except _NotStreamable as exc:
            reason = str(exc)
            break
        except _TooDense as exc:
            raise TraceFormatError(str(exc), str(p)) from None
    # Not laid out as {..., "traceEvents": [...], ...} or not valid JSON: decode it whole,
    # which also gives the precise error for a broken file.
    doc = decode_kineto(_read_whole(p, max_bytes, reason), str(p))
    return kineto_to_trace(doc, str(p))


def _read_whole(path: Path, max_bytes: int, reason: str) -> bytes | bytearray:
    """The content for a whole-document decode: at most :data:`WHOLE_DECODE_MAX_BYTES` of it, since
    decoding it whole takes a multiple of its size in memory."""
    limit = min(max_bytes, WHOLE_DECODE_MAX_BYTES)
    try:
        data = read_text_bytes(path, limit)
        try:
            _check_density(data.count(b"{"), len(data))  # every event has a "{"
        except _TooDense as exc:
            raise TraceFormatError(str(exc), str(path)) from None
        return data
    except TraceTooLargeError:
        if limit == max_bytes:
            raise
        raise TraceFormatError(
            f"cannot be read piecewise ({reason or 'not laid out as a Kineto trace'}) and is over "
            f"{mb_text(limit)}, too large to decode whole", str(path)) from None


def kineto_to_trace(doc: _KinetoFile, path: str) -> Trace:
    """Columns from a whole decoded (lenient) document."""
    cols = _ColumnBuilder(strict=False)
    cols.add(doc.traceEvents)
    return cols.finish(path, doc.deviceProperties, doc.distributedInfo, _flags_of(doc))


# --- streaming ----------------------------------------------------------------------------

class _NotStreamable(Exception):
    """The text cannot be cut into event pieces (layout not recognised, or invalid JSON)."""


class _NotStrict(Exception):
    """An event breaks the strict schema's types; the lenient schema must read the file."""


class _WorkerFailed(Exception):
    """A decode worker process died or could not start; the file is read again without workers."""


_WS = frozenset(b" \t\r\n")
_KEY = b'"traceEvents"'
# Look this far for the start of traceEvents; past it the file is decoded whole.
_HEADER_LIMIT = 64 * 1024 * 1024
# Candidate cuts tried per piece, so text full of "{" cannot make the search quadratic.
_MAX_CUT_TRIES = 10_000
#: Longest stretch of traceEvents text read on without a place to cut it (whitespace between
#: values aside): one event or one non-event value this long is not a trace to read piecewise.
MAX_UNCUT_BYTES = 128 * 1024 * 1024
#: Largest content decoded whole when it cannot be read piecewise (the decode takes about 2.5x
#: this in memory); past it the file is refused with the reason it could not be read piecewise.
WHOLE_DECODE_MAX_BYTES = 384 * 1024 * 1024
#: Files at least this large (plain JSON; gzip: compressed size) are decoded by worker processes
#: beside the main one, when the machine has more than one core (see :func:`_decoders_for`).
PARALLEL_MIN_BYTES = 48 * 1024 * 1024
PARALLEL_MIN_GZIP_BYTES = 4 * 1024 * 1024
#: Environment variable: how many processes decode (1: no workers). Unset: :func:`_decoders_for`.
WORKERS_ENV = "LAUNCHGAP_LOAD_WORKERS"
# A run of insignificant whitespace (between JSON values) dropped from the text kept in memory:
# one space stands for it, so tokens on either side stay apart.
_GAP = b" "


def _array_start(buf: bytes) -> int | None:
    """Index just after the ``[`` that opens the top-level ``traceEvents`` array, None if not yet in ``buf``.

    The text before the key must decode as the start of a JSON object (it is checked by
    decoding it with an empty array put in), so a key inside a string or a nested object
    is never taken for it.
    """
    at = buf.find(_KEY)
    if at < 0:
        if len(buf) > _HEADER_LIMIT:
            raise _NotStreamable(f"no 'traceEvents' array in the first {mb_text(_HEADER_LIMIT)}")
        return None
    i = at + len(_KEY)
    for want in (b":", b"["):
        while i < len(buf) and buf[i] in _WS:
            i += 1
        if i >= len(buf):
            if len(buf) > _HEADER_LIMIT:
                raise _NotStreamable(f"no 'traceEvents' array in the first {mb_text(_HEADER_LIMIT)}")
            return None
        if buf[i] != want[0]:
            raise _NotStreamable("'traceEvents' is not followed by an array")
        i += 1
    return i


def _last_cut(buf: bytes | bytearray | memoryview, lo: int, hi: int | None = None) -> tuple[int, int] | None:
    """The last ``}`` ws ``,`` ws ``{`` in ``buf[lo:hi]``: (index of ``}``, index of ``{``).

    A candidate may lie inside a string or a nested object; decoding the piece tells.
    """
    raw = buf if isinstance(buf, (bytes, bytearray)) else bytes(buf)
    k = len(raw) if hi is None else hi
    for _ in range(_MAX_CUT_TRIES):
        k = raw.rfind(b"{", lo, k)
        if k <= lo:
            return None
        j = k - 1
        while j > lo and raw[j] in _WS:
            j -= 1
        if raw[j] != 0x2C:  # ","
            continue
        j -= 1
        while j > lo and raw[j] in _WS:
            j -= 1
        if raw[j] == 0x7D:  # "}"
            return j, k
    return None  # a piece full of "{" that are not event starts: read on and cut later


def _scan_strings(text: bytes, in_string: bool, backslashes: int) -> tuple[bool, int]:
    """JSON string state after ``text``: (inside a string, backslashes ending it), from the state before it.

    Vectorised: a ``"`` toggles the state unless a run of an odd number of backslashes ends just
    before it (``backslashes`` carries a run across pieces). Exact for valid JSON; in invalid JSON
    it may say "inside" wrongly, which only keeps text that could have been dropped.
    """
    a = np.frombuffer(text, dtype=np.uint8)
    if a.size == 0:
        return in_string, backslashes
    quotes = np.flatnonzero(a == 0x22)
    bs = np.flatnonzero(a == 0x5C)
    run_start = np.zeros(0, dtype=np.int64)
    if bs.size:
        starts = np.ones(bs.size, dtype=bool)
        starts[1:] = bs[1:] != bs[:-1] + 1
        run_start = bs[np.maximum.accumulate(np.where(starts, np.arange(bs.size), 0))]
    escaped = np.zeros(quotes.size, dtype=bool)
    if quotes.size:
        length = np.zeros(quotes.size, dtype=np.int64)
        if bs.size:  # the run of backslashes just before each quote, if any
            j = np.minimum(np.searchsorted(bs, quotes - 1), bs.size - 1)
            rs = run_start[j]
            length = np.where(bs[j] == quotes - 1, quotes - rs + np.where(rs == 0, backslashes, 0), 0)
        length = np.where(quotes == 0, backslashes, length)  # first in the text: only the carried run
        escaped = length % 2 == 1
    toggles = int(quotes.size - escaped.sum())
    if a[-1] == 0x5C:
        trailing = int(a.size - run_start[-1]) + (backslashes if run_start[-1] == 0 else 0)
    else:
        trailing = 0
    return in_string ^ bool(toggles % 2), trailing


class _StringState:
    """Whether the carried text (a list of pieces, from an event's start) ends inside a JSON string."""

    def __init__(self) -> None:
        self.scanned = 0
        self.in_string = False
        self.backslashes = 0

    def ends_outside(self, parts: list[bytes]) -> bool:
        for part in parts[self.scanned:]:  # each piece is scanned once
            self.in_string, self.backslashes = _scan_strings(part, self.in_string, self.backslashes)
        self.scanned = len(parts)
        return not self.in_string


def _all_whitespace(data: bytes) -> bool:
    """Whether ``data`` is only JSON whitespace (space, tab, CR, LF). ``lstrip()`` also strips
    vertical tab and form feed, which JSON does not allow, so those are looked for apart."""
    return not data.lstrip() and b"\x0b" not in data and b"\x0c" not in data


def _event_texts(pieces: Iterable[bytes], first: bytes, first_at: int, plain: bool,
                 ) -> Iterator[tuple[bool, list, int]]:
    """The traceEvents text cut at event boundaries, as ``(is_tail, parts, offset)``.

    Event texts come first, in file order: ``parts`` joined are whole events (``[`` + it + ``]``
    decodes as a list). Last comes the tail (``is_tail``): the text after the last cut, which
    closes the array and the document. ``offset`` is where the parts lie in the file, when they
    are one stretch of a plain (not gzip) file, else -1: a worker can then read them itself.

    ``first`` is the text just after the array's ``[`` (at ``first_at`` in the content). A piece
    without a cut joins the text carried to the next one, except when it is all whitespace
    outside any string: then it is dropped (one space stands for the run), so whitespace,
    however much, costs no memory. More than :data:`MAX_UNCUT_BYTES` carried raises
    :class:`_NotStreamable`.
    """
    carry: list = []
    size = 0
    at = first_at if plain else -1  # where carry starts in the file; -1: not one stretch of it
    pos = first_at  # content offset of the next piece
    state = _StringState()
    for data in chain((first,), pieces):
        cut = _last_cut(data, 0)
        if cut is None:
            if _all_whitespace(data) and state.ends_outside(carry):
                if not carry or carry[-1] is not _GAP:
                    carry.append(_GAP)
                    size += 1
                at = -1
                pos += len(data)
                continue
            carry.append(data)
            size += len(data)
            pos += len(data)
            if size > MAX_UNCUT_BYTES:
                raise _NotStreamable(f"more than {mb_text(MAX_UNCUT_BYTES)} of traceEvents without a place "
                                     "to cut between two events")
            continue
        end, nxt = cut
        carry.append(memoryview(data)[: end + 1])
        yield False, carry, at
        carry = [memoryview(data)[nxt:]]
        size = len(data) - nxt
        at = pos + nxt if plain else -1
        pos += len(data)
        state = _StringState()
    yield True, carry, -1


def _decode_piece(decoder: msgspec.json.Decoder, text: bytes | bytearray | memoryview, check: bool = True) -> Any:
    try:
        out = decoder.decode(text)
    except msgspec.ValidationError:
        raise _NotStrict from None
    except (msgspec.DecodeError, RecursionError) as exc:
        raise _NotStreamable(f"not valid JSON ({exc})") from None
    if check:
        _check_density(len(out if isinstance(out, list) else out.traceEvents), len(text))
    return out


#: Size of the stretches an event text is decoded in, each turned into columns at once: the Structs
#: of one stretch are still in the CPU's cache when their fields are read (a quarter less CPU time
#: than 8 MB stretches on the bench trace).
SUB_PIECE_BYTES = 512 * 1024


def _add_text(cols: _ColumnBuilder, decoder: msgspec.json.Decoder, text: bytearray) -> None:
    """Decode ``text`` (``[`` events ``]``, consumed: its separators are overwritten) into ``cols``: by
    the C scan when it is there and takes the text, else by msgspec in stretches of about
    :data:`SUB_PIECE_BYTES`.

    A stretch ends at a candidate cut between two events: the separator after it becomes ``]`` for
    the decode (and is put back), the one before the next stretch becomes its ``[``, so nothing is
    copied. A cut inside a string or a nested value leaves something open, so that stretch cannot
    decode: the rest of the text is then decoded in one go, which raises what decoding the whole
    text would have raised.
    """
    n = len(text)
    if cols.strict and _SCAN is not None:
        # The C scan reads the whole text to columns, or declines (None) wherever it cannot be sure to
        # read it exactly as msgspec would; then msgspec decodes it, below. At most one event per
        # MIN_EVENT_BYTES: a denser text is declined, and msgspec's path reports it.
        scanned = _SCAN(text, n // MIN_EVENT_BYTES + 16)
        if scanned is not None:
            added = cols.add_scanned(*scanned)
            if added is not None:
                _check_density(added, n)
                return
    with memoryview(text) as view:
        lo = 1  # first byte after the "[" that opens this stretch
        events = 0
        span = SUB_PIECE_BYTES
        while lo + span < n - 1:
            cut = _last_cut(text, lo, lo + span)
            if cut is None:
                span *= 2  # an event longer than a stretch, or no cut among the first candidates: look further
                continue
            end, nxt = cut
            saved = text[end + 1]
            text[end + 1] = 0x5D  # "]"
            try:
                stretch = decoder.decode(view[lo - 1:end + 2])
            except (msgspec.DecodeError, RecursionError):
                break  # not a cut between two events: decode the rest whole
            except msgspec.ValidationError:
                raise _NotStrict from None
            finally:
                text[end + 1] = saved
            events += len(stretch)
            _check_density(events, nxt)
            cols.add(stretch)
            del stretch
            lo = nxt
            text[lo - 1] = 0x5B  # "["
            span = SUB_PIECE_BYTES
        rest = _decode_piece(decoder, view[lo - 1:], check=False)
        events += len(rest)
        _check_density(events, n)
        cols.add(rest)


class _TooDense(Exception):
    """Events far smaller than any profiler writes: a pile of empty objects, not a trace."""


#: Fewest bytes of text per event, on average over a piece of 1 MiB or more, that a trace may have.
#: The smallest events Kineto writes (flow ends, instant events) take about 90 bytes; ``{},``
#: takes 3, and a gzip of those makes a bomb whose decoded objects, not its text, fill memory.
MIN_EVENT_BYTES = 24


def _check_density(n_events: int, n_bytes: int) -> None:
    if n_bytes >= 1 << 20 and n_events * MIN_EVENT_BYTES > n_bytes:
        raise _TooDense(f"{n_events:,} events in {mb_text(n_bytes)} of text ({n_bytes / n_events:.1f} bytes each): "
                        f"not a profiler trace (its events take {MIN_EVENT_BYTES} bytes or more)")


def _load_streaming(path: Path, max_bytes: int, chunk_bytes: int, strict: bool, decoders: int) -> Trace:
    plain = read_head(path, 2) != GZIP_MAGIC
    workers = _start_workers(path if plain else None, strict, decoders - 1)  # before our threads start (fork)
    try:
        pieces = read_ahead(iter_content(path, max_bytes, chunk_bytes))
        try:
            return _decode_stream(pieces, str(path), strict, workers, plain)
        finally:
            pieces.close()
    finally:
        for w in workers:
            w.close()


def _decode_stream(pieces: Iterator[bytes], path: str, strict: bool, workers: list[_Worker], plain: bool = False,
                   ) -> Trace:
    buf = b""
    start = None
    for data in pieces:
        buf += data
        start = _array_start(buf)
        if start is not None:
            break
    if start is None:
        raise _NotStreamable("no 'traceEvents' array")  # let the whole-document decode say why
    try:
        head = _HEADER_DECODER.decode(buf[: buf.rfind(_KEY, 0, start)] + b'"traceEvents":[]}')
    except (msgspec.DecodeError, msgspec.ValidationError, RecursionError):
        raise _NotStreamable("the text before 'traceEvents' is not the start of a JSON object") from None
    first = buf[start:]
    del buf
    jobs = _Jobs(strict, workers)
    for is_tail, parts, offset in _event_texts(pieces, first, start, plain):
        if is_tail:
            tail = _decode_piece(_FILE_DECODERS[strict], b"".join((b'{"traceEvents":[', *parts)))
            del parts
            cols = jobs.finish(tail.traceEvents)
            break
        jobs.submit(parts, offset)
        del parts
    devices = tail.deviceProperties if tail.deviceProperties is not None else head.deviceProperties
    dist = tail.distributedInfo if tail.distributedInfo is not None else head.distributedInfo
    flags = {k: v if v is not None else _flags_of(head)[k] for k, v in _flags_of(tail).items()}
    return cols.finish(path, devices, dist, flags)


def _flags_of(doc: Any) -> dict[str, _Scalar]:
    return {k: getattr(doc, k) for k in PROFILER_FLAGS}


# --- decoding in worker processes -------------------------------------------------------------

def _cpus() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def _decoders_for(path: Path, decoders: int | None) -> int:
    """Processes that decode ``path``: ``decoders`` if given, else ``$LAUNCHGAP_LOAD_WORKERS``, else
    2 on a machine with two or more cores for a file of :data:`PARALLEL_MIN_BYTES` or more
    (gzip: :data:`PARALLEL_MIN_GZIP_BYTES` compressed; four times that where the worker cannot
    be a fork, see :func:`_can_fork`), else 1. At most 8."""
    if decoders is None:
        env = os.environ.get(WORKERS_ENV, "").strip()
        if env.isdigit() and int(env) >= 1:
            decoders = int(env)
        else:
            size = path.stat().st_size
            gz = read_head(path, 2) == GZIP_MAGIC
            # A fresh interpreter (no fork) costs a few tenths of a second to start: only for more text.
            least = (PARALLEL_MIN_GZIP_BYTES if gz else PARALLEL_MIN_BYTES) * (1 if _can_fork() else 4)
            decoders = min(2, _cpus()) if size >= least else 1
    return max(1, min(int(decoders), 8))


def _can_fork() -> bool:
    """Whether a worker may be a fork of this process: on Linux, from a process with one thread (the
    CLI). A process with threads (the dashboard) starts a fresh interpreter instead, as a plain
    subprocess: never a fork of threads, and never a re-run of the caller's main module (which
    multiprocessing's spawn and forkserver methods do)."""
    return sys.platform.startswith("linux") and threading.active_count() == 1 and hasattr(os, "fork")


def _start_workers(path: Path | None, strict: bool, n: int) -> list[_Worker]:
    if n <= 0:
        return []
    workers: list[_Worker] = []
    try:
        fork = _can_fork()
        for _ in range(n):
            workers.append(_Worker(path, strict, fork, [fd for w in workers for fd in w.own_fds()]))
    except (OSError, ValueError, RuntimeError):  # no processes here (sandbox, limits): decode alone
        for w in workers:
            w.close()
        return []
    for w in workers:  # the sender threads start after every fork
        w.start_sender()
    return workers


# A fresh interpreter's worker: python -c _BOOT jobs_fd results_fd path strict. This module by the
# name it was imported under (the package may be installed under another name than its folder's).
_BOOT = (f"import sys; from {__name__} import _worker_main; "
         "_worker_main(int(sys.argv[1]), int(sys.argv[2]), sys.argv[3] or None, sys.argv[4] == '1', [])")


_JOB_HEAD = struct.Struct("<qqqq")  # order number, events to sample, file offset (-1: text follows), length
_ACK = struct.Struct("<qq")  # order number, events; the pickled columns follow
_F_SETPIPE_SZ = 1031  # Linux fcntl


def _write_all(fd: int, data: bytes | memoryview) -> None:
    view = memoryview(data)
    while view.nbytes:
        view = view[os.write(fd, view):]


def _read_into(fd: int, view: memoryview) -> None:
    while view.nbytes:
        n = os.readv(fd, [view])
        if n == 0:
            raise EOFError
        view = view[n:]


class _Worker:
    """One decode worker process.

    Texts go to it through a pipe, written by a thread of ours (so the decoding here never waits
    on the pipe) straight from the pieces, without joining them first; a text that is one
    stretch of a plain file goes as its offset and length, and the worker reads it from the file
    itself. Each text's columns come back, pickled, as soon as they are done, read whenever the
    main process looks (:meth:`poll`, :meth:`collect`).
    """

    def __init__(self, path: Path | None, strict: bool, fork: bool, close_in_child: list[int]) -> None:
        from multiprocessing.connection import Connection

        jobs_r, self.jobs_fd = os.pipe()
        results_r, results_w = os.pipe()
        try:
            for fd in (self.jobs_fd, results_w):
                try:  # bigger pipes: fewer wake-ups per text (Linux; elsewhere the default size)
                    import fcntl

                    fcntl.fcntl(fd, _F_SETPIPE_SZ, 1 << 20)
                except (ImportError, OSError):
                    pass
            spath = "" if path is None else str(path)
            if fork:
                import multiprocessing as mp

                # The child closes the parent's ends (and earlier workers'), so it sees EOF if we die.
                self.proc: Any = mp.get_context("fork").Process(
                    target=_worker_main, args=(jobs_r, results_w, spath or None, strict,
                                               [self.jobs_fd, results_r, *close_in_child]),
                    daemon=True, name="launchgap-decode")
                self.proc.start()
            else:
                import subprocess

                # The folder holding this package's folder: lets a source checkout import it (an
                # installed package imports anyway, through the same interpreter).
                root = str(Path(__file__).resolve().parents[2])
                env = {**os.environ, "PYTHONPATH": root + os.pathsep + os.environ.get("PYTHONPATH", "")}
                self.proc = subprocess.Popen(
                    [sys.executable, "-c", _BOOT, str(jobs_r), str(results_w), spath, "1" if strict else "0"],
                    pass_fds=(jobs_r, results_w), env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL)
        except BaseException:
            for fd in (jobs_r, self.jobs_fd, results_r, results_w):
                os.close(fd)
            raise
        os.close(jobs_r)
        os.close(results_w)
        self.results = Connection(results_r)
        self.outstanding = 0
        self.done: list[tuple[int, _ColumnBuilder]] = []  # columns back from the worker, with order numbers
        self.queue: queue.SimpleQueue = queue.SimpleQueue()
        self.sender: threading.Thread | None = None
        self.closed = False

    def own_fds(self) -> list[int]:
        return [self.jobs_fd, self.results.fileno()]

    def start_sender(self) -> None:
        self.sender = threading.Thread(target=self._send_loop, name="launchgap-decode-feed", daemon=True)
        self.sender.start()

    def _send_loop(self) -> None:
        fd = self.jobs_fd
        try:
            while True:
                item = self.queue.get()
                if item is None:
                    _write_all(fd, _JOB_HEAD.pack(-1, 0, 0, 0))
                    return
                seq, limit, parts, offset = item
                del item
                length = sum(len(p) for p in parts)
                _write_all(fd, _JOB_HEAD.pack(seq, limit, offset, length))
                if offset < 0:
                    for part in parts:
                        _write_all(fd, part)
                del parts
        except (OSError, ValueError):  # the worker is gone: poll/collect report it
            return

    def submit(self, seq: int, sample_limit: int, parts: list, offset: int) -> None:
        self.outstanding += 1
        self.queue.put((seq, sample_limit, parts, offset))

    def poll(self, counts: dict[int, int]) -> None:
        """Read the acknowledgements that have come (never waits): event counts into ``counts``."""
        try:
            while self.results.poll():
                self._ack(self.results.recv_bytes(), counts)
        except (EOFError, OSError):
            raise _WorkerFailed("decode worker exited") from None

    def _ack(self, msg: bytes, counts: dict[int, int]) -> None:
        if msg[:1] == b"A":
            seq, n = _ACK.unpack_from(msg, 1)
            counts[seq] = n
            self.outstanding -= 1
            self.done.append((seq, pickle.loads(memoryview(msg)[1 + _ACK.size:])))
            return
        if msg[:2] == b"E\x01":
            raise _NotStrict
        if msg[:2] == b"E\x02":
            raise _NotStreamable(msg[2:].decode(errors="replace"))
        if msg[:2] == b"E\x04":
            raise _TooDense(msg[2:].decode(errors="replace"))
        raise _WorkerFailed(msg[2:].decode(errors="replace"))

    def collect(self, counts: dict[int, int]) -> list[tuple[int, _ColumnBuilder]]:
        """Tell the worker that no more text comes; its columns, per text, with their order numbers."""
        self.queue.put(None)
        try:
            while True:
                msg = self.results.recv_bytes()
                if msg[:1] == b"R":
                    done, self.done = self.done, []  # ours no longer: merged and freed by the caller
                    return done
                self._ack(msg, counts)
        except (EOFError, OSError):
            raise _WorkerFailed("decode worker exited") from None

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        if hasattr(self.proc, "is_alive"):  # a fork (multiprocessing.Process)
            if self.proc.is_alive():
                self.proc.terminate()
            self.proc.join(5)
        else:  # a subprocess.Popen
            if self.proc.poll() is None:
                self.proc.terminate()
            try:
                self.proc.wait(5)
            except Exception:  # noqa: BLE001 - it is killed below
                self.proc.kill()
        if self.sender is not None:
            self.queue.put(None)
            self.sender.join(5)
        os.close(self.jobs_fd)
        self.results.close()


def _worker_main(jobs_fd: int, results_fd: int, path: str | None, strict: bool, close: list[int]) -> None:
    """A worker process: decode each text it is sent into columns of its own and send them back,
    pickled, with its order number and event count; ``R`` when told that no more text comes."""
    import signal
    from multiprocessing.connection import Connection

    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the main process's to handle; it ends us
    for fd in close:
        os.close(fd)
    results = Connection(results_fd)
    outbox: queue.SimpleQueue = queue.SimpleQueue()

    def post() -> None:  # a thread: writing to the pipe never holds up the decoding
        while (msg := outbox.get()) is not None:
            try:
                results.send_bytes(msg)
            except OSError:  # the parent is gone (or gave up on us): nothing to tell
                return

    poster = threading.Thread(target=post, name="launchgap-decode-post", daemon=True)
    poster.start()
    decoder = _EVENTS_DECODERS[strict]
    fd = jobs_fd
    head = bytearray(_JOB_HEAD.size)
    src = os.open(path, os.O_RDONLY) if path is not None else -1
    reply = b"R"
    try:
        while True:
            _read_into(fd, memoryview(head))
            seq, sample_limit, offset, length = _JOB_HEAD.unpack(head)
            if seq < 0:
                break
            text = bytearray(length + 2)
            text[0], text[-1] = 0x5B, 0x5D  # "[" ... "]"
            view = memoryview(text)[1:-1]
            if offset < 0:
                _read_into(fd, view)
            else:
                while view.nbytes:
                    n = os.preadv(src, [view], offset)
                    if n == 0:
                        raise _WorkerFailed("the file changed while it was read")
                    view, offset = view[n:], offset + n
            del view
            cols = _ColumnBuilder(strict, sample_limit=sample_limit)
            _add_text(cols, decoder, text)
            del text
            # Sent as soon as done: the columns wait in the main process, not here as well.
            outbox.put(b"A" + _ACK.pack(seq, cols.n_events) + pickle.dumps(cols, protocol=pickle.HIGHEST_PROTOCOL))
            del cols
    except _NotStrict:
        reply = b"E\x01"
    except _NotStreamable as exc:
        reply = b"E\x02" + str(exc).encode()
    except _TooDense as exc:
        reply = b"E\x04" + str(exc).encode()
    except Exception as exc:  # noqa: BLE001 - reported to the parent, which reads the file without workers
        reply = b"E\x03" + repr(exc).encode()[:500]
    finally:
        if src >= 0:
            os.close(src)
    outbox.put(reply)
    outbox.put(None)
    poster.join()


class _Jobs:
    """Event texts, in file order, to columns: decoded here, or by a worker that has room.

    Without workers one builder takes every text as it comes. With workers each text gets a
    builder of its own, and the builders are merged in file order at the end; each is told how
    many of its events to sample for the profiler settings (none once the texts before it are
    known to hold :data:`SETTINGS_SAMPLE_EVENTS`).
    """

    def __init__(self, strict: bool, workers: list[_Worker]) -> None:
        self.strict = strict
        self.workers = workers
        self.decoder = _EVENTS_DECODERS[strict]
        self.acc = _ColumnBuilder(strict)
        self.parts: dict[int, _ColumnBuilder] = {}
        self.counts: dict[int, int] = {}
        self.seq = 0

    def _sample_limit(self, seq: int) -> int:
        before = sum(n for s, n in self.counts.items() if s < seq)
        return SETTINGS_SAMPLE_EVENTS if before < SETTINGS_SAMPLE_EVENTS else 0

    def submit(self, parts: list, offset: int) -> None:
        if not self.workers:
            _add_text(self.acc, self.decoder, bytearray().join((b"[", *parts, b"]")))
            return
        seq = self.seq
        self.seq += 1
        for w in self.workers:
            w.poll(self.counts)
        limit = self._sample_limit(seq)
        free = min(self.workers, key=lambda w: w.outstanding)
        if free.outstanding < 2:  # one being decoded, one waiting: the worker never idles
            free.submit(seq, limit, parts, offset)
            return
        cols = _ColumnBuilder(self.strict, sample_limit=limit)
        _add_text(cols, self.decoder, bytearray().join((b"[", *parts, b"]")))
        self.parts[seq] = cols
        self.counts[seq] = cols.n_events

    def finish(self, tail_events: list) -> _ColumnBuilder:
        """The columns of every text, the tail's events last."""
        if not self.workers:
            self.acc.add(tail_events)
            return self.acc
        tail = _ColumnBuilder(self.strict, sample_limit=self._sample_limit(self.seq))
        tail.add(tail_events)
        self.parts[self.seq] = tail
        for w in self.workers:
            self.parts.update(w.collect(self.counts))
        for seq in sorted(self.parts):
            self.acc.merge(self.parts.pop(seq))
        return self.acc


# --- events -> columns ----------------------------------------------------------------------

# One kept event's numeric fields under the strict schema (see _ColumnBuilder._add_kept_strict).
_KEPT_RECORD = np.dtype([("ts", np.float64), ("dur", np.float64), ("corr", np.int64),
                         ("device", np.int64), ("stream", np.int64), ("graph_id", np.int64)])


def _int_column(values: list, n: int) -> np.ndarray:
    """int64 column of ints; anything else (or an int past int64) goes through :func:`_as_int`.

    ``array('q', ...)`` converts in C and refuses a str (numpy would parse ``"12"``) or an
    out-of-range int, so one call both checks and converts. (msgspec never gives a bool
    for the strict schema's int fields, which ``array`` would take as 0/1.)
    """
    try:
        return np.frombuffer(array("q", values), dtype=np.int64)
    except (TypeError, OverflowError):
        return np.fromiter(map(_as_int, values), dtype=np.int64, count=n)


_INT_TYPES = tuple((t, np.iinfo(t)) for t in (np.int8, np.int16, np.int32))


def _narrowest_int(values: np.ndarray) -> np.ndarray:
    """``values`` as the narrowest signed integer type that holds every one (itself if none is narrower)."""
    if values.size == 0:
        return values.astype(np.int8)
    lo, hi = int(values.min()), int(values.max())
    for t, info in _INT_TYPES:
        if info.min <= lo and hi <= info.max:
            return values if values.dtype == t else values.astype(t)
    return values


def _first_appearance(ids: np.ndarray) -> np.ndarray:
    """The distinct values of ``ids``, in the order they first appear."""
    uniq, first = np.unique(ids, return_index=True)
    return uniq[np.argsort(first)]


def _intern_local(local: np.ndarray, table: list[str], names: dict[str, int]) -> np.ndarray:
    """Ids in ``names`` (new texts added in first-appearance order) of indices into ``table``."""
    uniq = _first_appearance(local)
    remap = np.zeros(len(table), dtype=np.int32)
    remap[uniq] = [names.setdefault(table[i], len(names)) for i in uniq.tolist()]
    return remap[local]


class _HostIds:
    """pid/tid values as int64: ints as they are, anything else interned to ids -2, -3, ...

    Ids follow first appearance over all kept pids, then all kept tids, then flows (the
    order of a single pass over the columns), so they do not depend on how the file was cut.
    """

    def __init__(self) -> None:
        self.pending: dict[str, list[tuple[np.ndarray, np.ndarray, list[str]]]] = {"pid": [], "tid": [], "flow": []}

    def column(self, values: list, n: int, group: str) -> np.ndarray:
        try:  # the usual case: all ints (msgspec gives no bools for these fields)
            return np.frombuffer(array("q", values), dtype=np.int64)
        except (TypeError, OverflowError):
            pass
        out = np.empty(n, dtype=np.int64)
        rows: list[int] = []
        keys: list[str] = []
        for i, v in enumerate(values):  # only files with non-integer pids/tids come here
            if isinstance(v, int) and not isinstance(v, bool):
                out[i] = v if -(2**63) <= v < 2**63 else -1
            else:
                out[i] = -1
                rows.append(i)
                keys.append(str(v))
        if rows:
            self.pending[group].append((out, np.array(rows, dtype=np.int64), keys))
        return out

    def resolve(self) -> None:
        """Fill the interned ids in, in first-appearance order (see the class docstring)."""
        ids: dict[str, int] = {}
        for group in ("pid", "tid", "flow"):
            for out, rows, keys in self.pending[group]:
                out[rows] = [ids.setdefault(k, -2 - len(ids)) for k in keys]


class _ColumnBuilder:
    """Turns decoded events, piece by piece in file order, into the loader's columns.

    Names are interned in first-appearance order, all event names before any Input Dims
    text (they share one table), whatever the pieces were.
    """

    def __init__(self, strict: bool, sample_limit: int = SETTINGS_SAMPLE_EVENTS) -> None:
        self.strict = strict
        self.names: dict[str, int] = {}
        self.parts: dict[str, list[np.ndarray]] = {k: [] for k in (
            "kind", "name_id", "ts_us", "dur_us", "pid", "tid", "corr", "device_arg", "stream_arg", "graph_id",
            "kernel_name_id", *LAUNCH_CONFIG_COLUMNS)}
        self.dims: list[tuple[np.ndarray, np.ndarray, list[str]]] = []  # (rows, local ids, local texts)
        self.kernel_texts: list[str] = []  # kernel args in first appearance, one entry per piece and text
        self.flows: dict[str, list[np.ndarray]] = {"pid": [], "tid": [], "ts_us": [], "id": []}
        self.host = _HostIds()
        self.n_kept = 0
        self.n_events = 0
        self.mtia_events = False  # MTIA device/runtime categories seen: say so when there is no GPU work
        self.python = _PythonCallColumns(strict)
        self.gpu_seen = False
        self.sample_limit = sample_limit
        self.sampled = 0
        self.sample_codes: list[np.ndarray] = []  # per sampled event: a code of _SAMPLE_CODES (4: cpu_op with a stack)

    def add(self, events: list) -> None:
        self.n_events += len(events)
        # List comprehensions, not map/attrgetter: CPython 3.11 specialises attribute
        # loads on Structs, which makes them the fastest way to read one field of each.
        kinds = None
        if self.strict:  # one pass gives every event a code; the three lists are picked by it
            codes = np.fromiter([_X_CODES.get(e.cat, 0) if e.ph == "X" else _FLOW_CODE if e.ph == "f" and
                                 e.cat == "ac2g" else 0 for e in events], dtype=np.int8, count=len(events))
            rows = np.flatnonzero((codes > 0) & (codes < _PYTHON_CODE))
            kinds = codes[rows] - 1
            kept = list(map(events.__getitem__, rows.tolist()))
            flows = list(map(events.__getitem__, np.flatnonzero(codes == _FLOW_CODE).tolist()))
            python = list(map(events.__getitem__, np.flatnonzero(codes == _PYTHON_CODE).tolist()))
        else:
            kept = [e for e in events if e.ph == "X" and isinstance(e.cat, str) and e.cat in _CAT_KIND]
            flows = [e for e in events if e.cat == "ac2g" and e.ph == "f"]
            python = [e for e in events if e.cat == _PYTHON_CAT and e.ph == "X"]
        if flows:
            self._add_flows(flows)
        if python:
            self.python.add(python)
        if kept:
            self._add_kept(kept, kinds)
            self._narrow_last()
            self.gpu_seen = self.gpu_seen or bool((self.parts["kind"][-1] <= Kind.GRAPH).any())
        if not self.gpu_seen and not self.mtia_events:  # only traces without GPU work pay for this scan
            self.mtia_events = any(isinstance(e.cat, str) and e.cat.startswith("mtia") for e in events)
        if self.sampled < self.sample_limit:  # the profiler's settings show in any stretch of events
            self._sample_settings(events[: self.sample_limit - self.sampled])

    def add_scanned(self, records: bytes, strings: list[str], raws: list[bytes]) -> int | None:
        """The C scan's result for one text (see :func:`_add_text`), added exactly as :meth:`add` adds the
        same events decoded by msgspec. Returns how many events were added, or None, having added
        nothing, for a text left to msgspec (a flow whose id is not an integer: rare enough)."""
        ev = np.frombuffer(records, dtype=_SCAN_EVENT)
        n = ev.size
        table = [*strings, "None", ""]  # what a missing name, and a missing ph/cat/kernel, read as
        none_at, empty_at = len(strings), len(strings) + 1
        text = {field: np.where(ev[field] < 0, absent, ev[field])  # indices into table, missing ones included
                for field, absent in (("ph", empty_at), ("cat", empty_at), ("name", none_at), ("kernel", empty_at))}
        ph, cat = text["ph"], text["cat"]
        x_code = np.array([_X_CODES.get(t, 0) for t in table], dtype=np.int8)
        is_x = np.array([t == "X" for t in table])
        is_f = np.array([t == "f" for t in table])
        is_ac2g = np.array([t == "ac2g" for t in table])
        codes = np.where(is_x[ph], x_code[cat], np.where(is_f[ph] & is_ac2g[cat], _FLOW_CODE, 0)).astype(np.int8)
        flows = np.flatnonzero(codes == _FLOW_CODE)
        if flows.size and (ev["id_kind"][flows] == 2).any():
            return None
        self.n_events += n
        if flows.size:
            self.flows["pid"].append(self._scanned_host(ev, flows, "pid", table, "flow"))
            self.flows["tid"].append(self._scanned_host(ev, flows, "tid", table, "flow"))
            self.flows["ts_us"].append(ev["ts"][flows])
            self.flows["id"].append(np.where(ev["id_kind"][flows] == 1, ev["id"][flows], -1))
        python = np.flatnonzero(codes == _PYTHON_CODE)
        if python.size:
            self.python.add_scanned(text["name"][python], ev["ts"][python], ev["dur"][python], ev["tid"][python],
                                    ev["tid_str"][python], table, none_at)
        rows = np.flatnonzero((codes > 0) & (codes < _PYTHON_CODE))
        if rows.size:
            self._add_kept_scanned(ev, rows, codes[rows] - 1, text["name"][rows], text["kernel"][rows], table, raws)
            self._narrow_last()
            self.gpu_seen = self.gpu_seen or bool((self.parts["kind"][-1] <= Kind.GRAPH).any())
        if not self.gpu_seen and not self.mtia_events:
            self.mtia_events = any(table[i].startswith("mtia") for i in np.unique(cat).tolist())
        if self.sampled < self.sample_limit:
            m = min(n, self.sample_limit - self.sampled)
            sample = np.array([_SAMPLE_CODES.get(t, 0) for t in table], dtype=np.int8)[cat[:m]]
            sample[(sample == 3) & (ev["has_stack"][:m] != 0)] = 4
            self.sampled += m
            self.sample_codes.append(sample)
        return n

    #: Integer columns kept at the narrowest type their values fit while the pieces wait to be
    #: concatenated (which widens them back to the widest piece's type): most are -1 or small.
    _NARROWED = ("corr", "device_arg", "stream_arg", "graph_id", "pid", "tid", *LAUNCH_CONFIG_COLUMNS)

    def _narrow_last(self) -> None:
        """Narrow the pieces just added (a pid/tid piece that waits for its texts' ids is left alone)."""
        waiting = {id(out) for group in ("pid", "tid") for out, _, _ in self.host.pending[group]}
        for key in self._NARROWED:
            parts = self.parts[key]
            if parts and id(parts[-1]) not in waiting:
                parts[-1] = _narrowest_int(parts[-1])

    def _scanned_host(self, ev: np.ndarray, rows: np.ndarray, field: str, table: list[str], group: str) -> np.ndarray:
        """pid or tid of the scanned events at ``rows``, as :meth:`_HostIds.column` makes them."""
        values = ev[field][rows]
        texts = ev[field + "_str"][rows]
        if (texts == -1).all():  # the usual case: all ints
            return values
        listed = [v if t == -1 else "None" if t == -2 else table[t] for v, t in zip(values.tolist(), texts.tolist())]
        return self.host.column(listed, rows.size, group)

    def _add_kept_scanned(self, ev: np.ndarray, rows: np.ndarray, kinds: np.ndarray, name: np.ndarray,
                          kernel: np.ndarray, table: list[str], raws: list[bytes]) -> None:
        """:meth:`_add_kept_strict` for the scanned events at ``rows`` (``name``, ``kernel``: their indices
        into ``table``)."""
        p = self.parts
        n = rows.size
        self.n_kept += n
        p["kind"].append(kinds)
        for key, field in (("ts_us", "ts"), ("dur_us", "dur"), ("corr", "corr"), ("device_arg", "device"),
                           ("stream_arg", "stream"), ("graph_id", "graph_id")):
            p[key].append(ev[field][rows])
        for field in LAUNCH_CONFIG_COLUMNS:
            p[field].append(ev[field][rows])
        p["pid"].append(self._scanned_host(ev, rows, "pid", table, "pid"))
        p["tid"].append(self._scanned_host(ev, rows, "tid", table, "tid"))
        p["name_id"].append(_intern_local(name, table, self.names))
        named = np.array([t != "" for t in table])[kernel]  # "" reads as no kernel named, as in add()
        if not named.any():
            p["kernel_name_id"].append(np.full(n, -1, dtype=np.int32))
        else:
            uniq = _first_appearance(kernel[named])
            local = np.full(len(table), -1, dtype=np.int32)
            local[uniq] = np.arange(len(self.kernel_texts), len(self.kernel_texts) + uniq.size, dtype=np.int32)
            self.kernel_texts.extend(table[i] for i in uniq.tolist())
            p["kernel_name_id"].append(local[kernel])
        dims = ev["dims"][rows]
        at = np.flatnonzero(dims >= 0)
        if at.size:  # as _add_dims: texts keyed by their decoded text, in first appearance
            by_text: dict[str, int] = {}
            uniq = _first_appearance(dims[at])
            local = np.zeros(len(raws), dtype=np.int32)
            local[uniq] = [by_text.setdefault(raws[i].decode("utf-8", "replace"), len(by_text)) for i in uniq.tolist()]
            self.dims.append((self.n_kept - n + at, local[dims[at]], list(by_text)))

    def _sample_settings(self, sample: list) -> None:
        """A code per event, over the first events of the file, of what only some profiler settings record."""
        n = len(sample)
        self.sampled += n
        cats = [e.cat for e in sample] if self.strict else [e.cat if isinstance(e.cat, str) else "" for e in sample]
        codes = np.fromiter(map(_SAMPLE_CODES.get, cats, repeat(0)), dtype=np.int8, count=n)
        ops = np.flatnonzero(codes == 3)
        if ops.size:
            stack = np.fromiter([e.args is not None and bytes(e.args.call_stack) not in _NO_STACK
                                 for e in map(sample.__getitem__, ops.tolist())], dtype=bool, count=ops.size)
            codes[ops[stack]] = 4
        self.sample_codes.append(codes)

    def settings_sample(self) -> tuple[dict[str, int], int]:
        """Counts over the sampled events (see :func:`_settings_of`), and how many were sampled."""
        codes = np.concatenate(self.sample_codes) if self.sample_codes else np.zeros(0, dtype=np.int8)
        codes = codes[:SETTINGS_SAMPLE_EVENTS]
        counts = np.bincount(codes, minlength=5)
        return ({"python_function": int(counts[1]), "cpu_instant_event": int(counts[2]),
                 "cpu_op": int(counts[3] + counts[4]), "call_stack": int(counts[4])}, int(codes.size))

    def merge(self, other: _ColumnBuilder) -> None:
        """Append ``other``'s columns, as if its events had been added here after this builder's.

        Its name ids are remapped onto this table (first appearance order is kept: its own table
        is in first-appearance order); its Input Dims rows shift by the rows kept here; its
        pid/tid texts, sampled events and Python calls follow this builder's.
        """
        remap = np.fromiter((self.names.setdefault(s, len(self.names)) for s in other.names), dtype=np.int32,
                            count=len(other.names))
        for key, arrays in other.parts.items():
            if key == "name_id":
                arrays = [remap[a] for a in arrays]
            elif key == "kernel_name_id":  # local ids index kernel_texts: shift past this builder's
                arrays = [np.where(a >= 0, a + len(self.kernel_texts), -1).astype(np.int32) for a in arrays]
            self.parts[key].extend(arrays)
        self.kernel_texts.extend(other.kernel_texts)
        self.dims.extend((rows + self.n_kept, local, texts) for rows, local, texts in other.dims)
        for key, arrays in other.flows.items():
            self.flows[key].extend(arrays)
        for group, pending in other.host.pending.items():
            self.host.pending[group].extend(pending)
        self.mtia_events = self.mtia_events or (not self.gpu_seen and other.mtia_events)
        self.gpu_seen = self.gpu_seen or other.gpu_seen
        self.n_kept += other.n_kept
        self.n_events += other.n_events
        wanted = SETTINGS_SAMPLE_EVENTS - self.sampled
        if wanted > 0 and other.sample_codes:
            codes = np.concatenate(other.sample_codes)[:wanted]
            self.sample_codes.append(codes)
            self.sampled += codes.size
        self.python.merge(other.python)

    def _add_kept(self, kept: list, kinds: np.ndarray | None) -> None:
        n = len(kept)
        self.n_kept += n
        if kinds is not None:
            self._add_kept_strict(kept, kinds)
            return
        p = self.parts  # the lenient schema: any JSON scalar, converted value by value
        p["kind"].append(np.fromiter([_CAT_KIND[e.cat] for e in kept], dtype=np.int8, count=n))
        names = [e.name if isinstance(e.name, str) else str(e.name) for e in kept]
        p["ts_us"].append(np.fromiter([_as_us(e.ts) for e in kept], dtype=np.float64, count=n))
        p["dur_us"].append(np.fromiter([_as_us(e.dur) if e.dur is not None else 0.0 for e in kept],
                                       dtype=np.float64, count=n))
        no_args = _Args()
        args = [e.args or no_args for e in kept]
        p["corr"].append(np.fromiter([_as_int(a.correlation) for a in args], dtype=np.int64, count=n))
        p["device_arg"].append(np.fromiter([_as_int(a.device) for a in args], dtype=np.int64, count=n))
        p["stream_arg"].append(np.fromiter([_as_int(a.stream) for a in args], dtype=np.int64, count=n))
        p["graph_id"].append(np.fromiter([_as_int(a.graph_id) for a in args], dtype=np.int64, count=n))
        p["pid"].append(self.host.column([e.pid for e in kept], n, "pid"))
        p["tid"].append(self.host.column([e.tid for e in kept], n, "tid"))
        p["name_id"].append(self._intern_names(names))
        p["kernel_name_id"].append(self._launch_kernel_names([a.kernel for a in args], n))
        for key, column in zip(LAUNCH_CONFIG_COLUMNS, _launch_config(args, n)):
            p[key].append(column)
        self._add_dims([bytes(a.input_dims) if a.input_dims else b"" for a in args])

    def _add_kept_strict(self, kept: list, kinds: np.ndarray) -> None:
        """The strict schema's events: every numeric field in one pass over the events, into one record
        per event (the values are already ints and floats: msgspec checked them). Each pass over a
        million Structs costs tens of milliseconds, most of it reaching the objects, so passes are few."""
        p = self.parts
        n = len(kept)
        collecting = gc.isenabled()
        gc.disable()  # a tuple per event: the collector would run every 700 of them and find nothing
        try:
            rec = np.fromiter([(e.ts, e.dur, a.correlation, a.device, a.stream, a.graph_id)
                               for e in kept for a in (e.args,)], dtype=_KEPT_RECORD, count=n)
        except OverflowError:  # an id past int64: those columns value by value (it reads as -1)
            args = [e.args for e in kept]
            rec = np.empty(n, dtype=_KEPT_RECORD)
            rec["ts"] = [e.ts for e in kept]
            rec["dur"] = [e.dur for e in kept]
            for field, attr in (("corr", "correlation"), ("device", "device"), ("stream", "stream"),
                                ("graph_id", "graph_id")):
                rec[field] = _int_column([getattr(a, attr) for a in args], n)
        finally:
            if collecting:
                gc.enable()
        p["kind"].append(kinds)
        p["ts_us"].append(rec["ts"].copy())
        p["dur_us"].append(rec["dur"].copy())
        p["corr"].append(rec["corr"].copy())
        p["device_arg"].append(rec["device"].copy())
        p["stream_arg"].append(rec["stream"].copy())
        p["graph_id"].append(rec["graph_id"].copy())
        del rec
        p["pid"].append(self.host.column([e.pid for e in kept], n, "pid"))
        p["tid"].append(self.host.column([e.tid for e in kept], n, "tid"))
        p["name_id"].append(self._intern_names([e.name for e in kept]))
        p["kernel_name_id"].append(self._launch_kernel_names([e.args.kernel for e in kept], n))
        for key, column in zip(LAUNCH_CONFIG_COLUMNS, _launch_config([e.args for e in kept], n)):
            p[key].append(column)
        dims = [e.args.input_dims for e in kept]
        self._add_dims(list(map(bytes, dims)) if any(dims) else [])  # bytes of an empty Raw: b""

    def _intern_names(self, names: list[str]) -> np.ndarray:
        local = dict.fromkeys(names)  # unique names, first appearance first
        table = self.names
        for s in local:  # a loop over unique names, not events
            local[s] = table.setdefault(s, len(table))
        return np.fromiter(map(local.__getitem__, names), dtype=np.int32, count=len(names))

    def _launch_kernel_names(self, kernels: list, n: int) -> np.ndarray:
        """Local ids of the ``kernel`` arg of each event, -1 where absent (ROCm's launch calls name their
        kernel; a capture trace needs it, since the kernels it records never run). Interned into the
        name table in :meth:`finish`, after every event name, so the table does not depend on the pieces."""
        if not any(kernels):  # the strict schema's default is "", the lenient one's None
            return np.full(n, -1, dtype=np.int32)
        texts = [k if isinstance(k, str) else "" for k in kernels]
        if not any(texts):
            return np.full(n, -1, dtype=np.int32)
        local = dict.fromkeys(texts, -1)
        uniq = [t for t in local if t]
        for i, t in enumerate(uniq):  # unique texts, not events
            local[t] = len(self.kernel_texts) + i
        self.kernel_texts.extend(uniq)
        return np.fromiter(map(local.__getitem__, texts), dtype=np.int32, count=n)

    def _add_dims(self, texts: list[bytes]) -> None:
        """Input Dims as the file's own text (b"" when absent; an empty list: absent on every event
        added last); interned at the end, after every name."""
        by_bytes = dict.fromkeys(texts)
        by_text: dict[str, int] = {}
        for b in by_bytes:  # unique texts only
            by_bytes[b] = by_text.setdefault(b.decode("utf-8", "replace"), len(by_text)) if b else -1
        if len(by_text) == 0:
            return
        local = np.fromiter(map(by_bytes.__getitem__, texts), dtype=np.int32, count=len(texts))
        rows = np.flatnonzero(local >= 0)
        self.dims.append((self.n_kept - len(texts) + rows, local[rows], list(by_text)))

    def _add_flows(self, flows: list) -> None:
        n = len(flows)
        self.flows["pid"].append(self.host.column([f.pid for f in flows], n, "flow"))
        self.flows["tid"].append(self.host.column([f.tid for f in flows], n, "flow"))
        if self.strict:
            self.flows["ts_us"].append(np.fromiter([f.ts for f in flows], dtype=np.float64, count=n))
            self.flows["id"].append(_int_column([f.id for f in flows], n))
        else:
            self.flows["ts_us"].append(np.fromiter([_as_us(f.ts) for f in flows], dtype=np.float64, count=n))
            self.flows["id"].append(np.fromiter([_as_int(f.id) for f in flows], dtype=np.int64, count=n))

    def _take(self, key: str, empty: Any = np.int64) -> np.ndarray:
        """One column of every piece, concatenated; the pieces are let go (folded in, memory freed)."""
        parts = self.parts[key]
        out = np.concatenate(parts) if len(parts) > 1 else parts[0] if parts else np.zeros(0, dtype=empty)
        parts.clear()
        return out

    def _name_columns(self) -> tuple[np.ndarray, np.ndarray]:
        """``kernel_name_id`` and ``dims_id``: their texts interned after every event name, kernels first."""
        table = self.names
        k_local = self._take("kernel_name_id", np.int32)
        k_remap = np.array([table.setdefault(t, len(table)) for t in self.kernel_texts], dtype=np.int32)
        kernel_name_id = np.where(k_local >= 0, k_remap[np.maximum(k_local, 0)] if k_remap.size else -1, -1)
        del k_local
        dims_id = np.full(self.n_kept, -1, dtype=np.int32)
        for rows, local, texts in self.dims:  # one entry per piece
            remap = np.array([table.setdefault(t, len(table)) for t in texts], dtype=np.int32)
            dims_id[rows] = remap[local]
        self.dims.clear()
        return kernel_name_id.astype(np.int32, copy=False), dims_id

    def _device_stream(self, kind: np.ndarray, pid: np.ndarray, tid: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """On GPU rows Kineto's pid is the device and tid the stream; args say so explicitly when present."""
        gpu = (kind <= Kind.GRAPH) | (kind == Kind.GPU_ANNOTATION)
        arg = self._take("device_arg")
        device = np.where(gpu, np.where(arg >= 0, arg, pid), -1)
        arg = self._take("stream_arg")
        stream = np.where(gpu, np.where(arg >= 0, arg, tid), -1)
        return device, stream

    def finish(self, path: str, device_props: Iterable[_Device] | None, dist: _DistInfo | None,
               flags: dict[str, _Scalar] | None = None) -> Trace:
        """All columns, the cleaning steps of the loader, and :func:`build_trace`.

        Column by column: each is concatenated from its pieces, which are let go at once, so the peak
        is about the finished table plus a few columns (the pieces of a column and its result never
        live beside every other column's pieces and results)."""
        self.host.resolve()
        HEAP.trim()  # the pieces' buffers are gone; their holes in the heap go back before the columns grow
        ts_us, dur_us = self._take("ts_us", np.float64), self._take("dur_us", np.float64)
        warnings: list[str] = []
        # |t| < 9.2e15 us keeps t * 1000 inside int64 ns (NaN and inf fail the test too).
        keep = (np.abs(ts_us) < 9.2e15) & (np.abs(dur_us) < 9.2e15)
        if not keep.all():
            warnings.append(f"dropped {int((~keep).sum())} events without a numeric ts/dur in range")
        # Epoch-based traces have ts near 1.7e15 us: times 1000 that exceeds 2^53 and float64
        # would snap every start to a multiple of 256 ns. Subtract a whole-us base first.
        base_us = float(np.floor(ts_us[keep].min())) if keep.any() else 0.0
        if not abs(base_us) < 9.2e15:
            base_us = 0.0
        python_calls = self.python.finish(base_us)  # its pieces go before the table's columns are built
        kind = self._take("kind", np.int8).astype(np.int8, copy=False)
        pid, tid = self._take("pid"), self._take("tid")
        device, stream = self._device_stream(kind, pid, tid)
        corr = self._take("corr")
        if self.flows["id"] and ((kind <= Kind.GRAPH) & (corr < 0)).any():
            flows = {k: np.concatenate(v) for k, v in self.flows.items()}
            corr = _fill_corr_from_flows(flows, kind, pid, tid, ts_us, corr)
        self.flows = {k: [] for k in self.flows}
        if not keep.all():
            ts_us, dur_us = np.where(keep, ts_us, base_us), np.where(keep, dur_us, 0.0)
        start_ns = np.rint((ts_us - base_us) * 1000.0).astype(np.int64) + np.int64(int(base_us) * 1000)
        del ts_us
        dur_ns = np.rint(dur_us * 1000.0).astype(np.int64)
        del dur_us
        kernel_name_id, dims_id = self._name_columns()
        columns = {"kind": kind, "name_id": self._take("name_id", np.int32).astype(np.int32, copy=False),
                   "device": device, "stream": stream, "pid": pid, "tid": tid, "start_ns": start_ns,
                   "dur_ns": dur_ns, "corr": corr, "graph_id": self._take("graph_id"), "dims_id": dims_id,
                   "kernel_name_id": kernel_name_id}
        del kind, device, stream, pid, tid, start_ns, dur_ns, corr, kernel_name_id, dims_id
        for key in LAUNCH_CONFIG_COLUMNS:
            columns[key] = self._take(key, np.int32)
        if not keep.all():
            for key in columns:  # one column at a time
                columns[key] = columns[key][keep]
        del keep
        device_properties = _device_properties(device_props)
        HEAP.trim()
        trace = build_trace(
            path=path, format="kineto", names=list(self.names), columns=columns,
            device_names={d: p["name"] for d, p in device_properties.items() if "name" in p},
            warnings=warnings, python_calls=python_calls,
            profiler_settings=_settings_of(flags or {}, *self.settings_sample()),
            device_properties=device_properties, **_rank_of(dist))
        if not trace.gpu_mask.any():
            cats = ("MTIA trace: launchgap reads CUDA and ROCm GPU events only" if self.mtia_events
                    else "CPU-only trace" if self.n_events else "no events at all")
            raise NoGpuActivityError(f"no GPU kernels, copies or sets in the trace ({cats}); nothing to analyse", path)
        HEAP.trim()
        return trace


def _rank_of(dist: _DistInfo | None) -> dict[str, int | None]:
    """``rank`` and ``world_size`` from ``distributedInfo`` (None where absent or not a valid number)."""
    if dist is None:
        return {"rank": None, "world_size": None}
    r, w = _as_int(dist.rank), _as_int(dist.world_size)
    return {"rank": r if r >= 0 else None, "world_size": w if w > 0 else None}


def _settings_of(flags: dict[str, _Scalar], sample: dict[str, int], sampled: int) -> dict:
    """What the file says of the profiler's settings (read by :mod:`analyzer.overhead`).

    The top-level flags (True/False; None when the file does not name one: older torch writes
    none), then counts over the first ``events_sampled`` events of the file: ``python_function``
    events (the Python tracer of with_stack/with_modules), ``cpu_instant_event`` (profile_memory's
    allocations), ``cpu_op`` events and those of them with a ``Call stack`` argument (with_stack
    in older torch).
    """
    out: dict = {k: _flag(v) for k, v in flags.items()}
    out.update({"python_function_events": sample["python_function"], "instant_events": sample["cpu_instant_event"],
                "cpu_ops": sample["cpu_op"], "cpu_ops_with_call_stack": sample["call_stack"],
                "events_sampled": sampled})
    return out


def _flag(value: _Scalar) -> bool | None:
    if value is None:
        return None
    if isinstance(value, str):
        return value.strip().lower() in ("1", "true", "yes", "on")
    return bool(value) if isinstance(value, (bool, int, float)) and value == value else None


def _fill_corr_from_flows(flows: dict[str, np.ndarray], kind: np.ndarray, pid: np.ndarray, tid: np.ndarray,
                          ts_us: np.ndarray, corr: np.ndarray) -> np.ndarray:
    """Old Kineto versions put the correlation only on the ``ac2g`` flow end (``ph: f``).

    The flow end sits on the GPU op: same pid, tid and ts. Joined by sorting keys, not a loop.
    """
    need = np.flatnonzero((kind <= Kind.GRAPH) & (corr < 0))
    i64 = np.int64  # both keys of one type (the event columns may be narrower than the flows')
    f_key = np.rec.fromarrays([flows["pid"].astype(i64), flows["tid"].astype(i64), _ns_key(flows["ts_us"])])
    n_key = np.rec.fromarrays([pid[need].astype(i64), tid[need].astype(i64), _ns_key(ts_us[need])])
    order = np.argsort(f_key, kind="stable")
    pos = np.searchsorted(f_key[order], n_key)
    pos_ok = pos < order.size
    hit = np.zeros(need.size, dtype=bool)
    hit[pos_ok] = f_key[order[pos[pos_ok]]] == n_key[pos_ok]
    out = corr.astype(np.int64)  # a copy, wide enough for any flow id
    out[need[hit]] = flows["id"][order[pos[hit]]]
    return out


def _ns_key(ts_us: np.ndarray) -> np.ndarray:
    """Time in integer ns for joining; a missing or absurd time gets int64's minimum (what the
    float-to-int cast gives on x86, now without relying on it or warning)."""
    out = np.full(ts_us.shape, np.iinfo(np.int64).min, dtype=np.int64)
    ok = np.abs(ts_us) < 9.2e15  # False for NaN and inf too
    out[ok] = np.rint(ts_us[ok] * 1000).astype(np.int64)
    return out


class _PythonCallColumns:
    """Python function ranges, piece by piece, into a :class:`~analyzer.trace.PythonCalls` table.

    Names go to a table of their own, so the event table (its names, ids and columns) is what it
    would be without them. A with_stack trace holds more of these than anything else, so each piece
    keeps little per call: its name id, ``ts`` (float us: the ns base is known only at the end),
    the duration already in ns (-1 where it is not a number in range, or negative: such calls are
    dropped) and the tid, both at the narrowest integer type their piece allows.
    """

    def __init__(self, strict: bool) -> None:
        self.strict = strict
        self.names: dict[str, int] = {}
        self.parts: dict[str, list[np.ndarray]] = {"name_id": [], "ts_us": [], "dur_ns": [], "tid": []}

    def _add_times(self, ts: np.ndarray, dur_us: np.ndarray, tid: np.ndarray) -> None:
        self.parts["ts_us"].append(ts)
        ok = (np.abs(dur_us) < 9.2e15) & (dur_us >= 0)  # False for NaN
        self.parts["dur_ns"].append(_narrowest_int(np.where(ok, np.rint(dur_us * 1000.0), -1).astype(np.int64)))
        self.parts["tid"].append(_narrowest_int(tid))

    def add(self, events: list) -> None:
        n = len(events)
        if self.strict:
            names = [e.name for e in events]
            ts = np.fromiter([e.ts for e in events], dtype=np.float64, count=n)
            dur = np.fromiter([e.dur for e in events], dtype=np.float64, count=n)
        else:
            names = [e.name if isinstance(e.name, str) else str(e.name) for e in events]
            ts = np.fromiter([_as_us(e.ts) for e in events], dtype=np.float64, count=n)
            dur = np.fromiter([_as_us(e.dur) if e.dur is not None else 0.0 for e in events], dtype=np.float64, count=n)
        local = dict.fromkeys(names)
        for s in local:  # unique names only
            local[s] = self.names.setdefault(s, len(self.names))
        self.parts["name_id"].append(np.fromiter(map(local.__getitem__, names), dtype=np.int32, count=n))
        self._add_times(ts, dur, np.fromiter([_as_int(e.tid) for e in events], dtype=np.int64, count=n))

    def add_scanned(self, name: np.ndarray, ts: np.ndarray, dur: np.ndarray, tid: np.ndarray, tid_text: np.ndarray,
                    table: list[str], none_at: int) -> None:
        """:meth:`add` for scanned events: names as indices into ``table``, a tid given as text where
        ``tid_text`` >= 0 (-2: no tid, which reads as "None", ``table[none_at]``)."""
        self.parts["name_id"].append(_intern_local(name, table, self.names))
        if (tid_text != -1).any():  # tids written as text: what _as_int makes of them
            text = np.where(tid_text == -2, none_at, tid_text)
            as_int = np.array([_as_int(t) for t in table], dtype=np.int64)
            tid = np.where(text == -1, tid, as_int[np.maximum(text, 0)])
        self._add_times(ts, dur, tid)

    def merge(self, other: _PythonCallColumns) -> None:
        """Append ``other``'s calls after these (its name ids remapped onto this table)."""
        remap = np.fromiter((self.names.setdefault(s, len(self.names)) for s in other.names), dtype=np.int32,
                            count=len(other.names))
        for key, arrays in other.parts.items():
            self.parts[key].extend([remap[a] for a in arrays] if key == "name_id" else arrays)

    def finish(self, base_us: float) -> PythonCalls:
        """The table, times in ns on the event table's base (``base_us``), sorted by start."""
        if not self.parts["ts_us"]:
            return no_python_calls()

        def take(key: str) -> np.ndarray:  # one column of every piece; the pieces are let go
            parts = self.parts[key]
            out = np.concatenate(parts) if len(parts) > 1 else parts[0]
            parts.clear()
            return out

        ts = take("ts_us")
        dur = take("dur_ns")
        ok = (np.abs(ts) < 9.2e15) & (dur >= 0)
        rows = None if ok.all() else np.flatnonzero(ok)
        del ok
        start = np.rint(((ts if rows is None else ts[rows]) - base_us) * 1000.0).astype(np.int64) \
            + np.int64(int(base_us) * 1000)
        del ts
        end = start + (dur if rows is None else dur[rows])
        del dur
        order = np.argsort(start, kind="stable")
        start, end = start[order], end[order]
        columns = []
        for key in ("name_id", "tid"):  # one at a time
            col = take(key)
            columns.append(narrowest(col if rows is None else col[rows])[order])
            del col
        names = np.empty(len(self.names), dtype=object)
        names[:] = list(self.names)
        return PythonCalls(names, columns[0].astype(np.int32, copy=False), start, end, columns[1])
