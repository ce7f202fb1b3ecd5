"""What a Kineto file holds, as msgspec Structs, and how its values read.

Two schemas: the strict one (what Kineto actually writes: ``ts`` a number, ids integers...), which
the C scan and msgspec's fast path read, and the lenient one (any JSON scalar where Kineto writes
one), read value by value when a file breaks the strict types (string ids on ROCm, ``null``
fields). Their defaults agree, so a file that decodes strictly gives the same columns either way.
Also here: the event categories kept and their codes, the top-level profiler settings, device
properties and distributed info, and the value converters both schemas share.
"""

from __future__ import annotations

from typing import Any, Iterable, Union

import msgspec

from ...errors import TraceFormatError
from ...trace import Kind


_Scalar = Union[int, float, str, None]
#: A top-level profiler setting: torch.profiler writes "1" or 1; a file re-saved by Python's json (or another tool)
#: carries ``true``, which must not make a trace unreadable.
_Flag = Union[bool, int, float, str, None]


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
    registers: Any = msgspec.field(name="registers per thread", default=None)  # a kernel's resources (_resource)
    shared_memory: Any = msgspec.field(name="shared memory", default=None)


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


#: Kineto ``deviceProperties`` key -> normalised key of :data:`launchgap.trace.DEVICE_PROPERTY_KEYS` (ints).
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


class _TopLevel(msgspec.Struct, kw_only=True, gc=False):
    """A Kineto file's top-level fields besides ``traceEvents`` (each file schema below adds its own event type)."""

    deviceProperties: Union[list[_Device], None] = None
    distributedInfo: Union[_DistInfo, None] = None
    record_shapes: _Flag = None  # torch.profiler writes its settings at the top level ("1" or 1 when on)
    with_stack: _Flag = None
    with_flops: _Flag = None
    with_modules: _Flag = None
    profile_memory: _Flag = None


class _KinetoFile(_TopLevel, gc=False):
    traceEvents: list[_Event]


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
    registers: Any = msgspec.field(name="registers per thread", default=None)  # any value: see _resource
    shared_memory: Any = msgspec.field(name="shared memory", default=None)


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


class _FastKinetoFile(_TopLevel, gc=False):
    traceEvents: list[_FastEvent]


class _Header(_TopLevel, gc=False):
    traceEvents: list[Any]


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


def _resource(value: Any) -> int:
    """A kernel's ``registers per thread`` or ``shared memory`` (bytes) arg: an int in [0, 2^31), else -1 (the C
    scan reads the same, or declines the text)."""
    return value if type(value) is int and 0 <= value < 2**31 else -1


def _device_properties(devices: Iterable[_Device] | None) -> dict[int, dict[str, Any]]:
    """``deviceProperties`` under the normalised keys of :data:`launchgap.trace.DEVICE_PROPERTY_KEYS`:
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


def _flags_of(doc: Any) -> dict[str, _Scalar]:
    return {k: getattr(doc, k) for k in PROFILER_FLAGS}


def _rank_of(dist: _DistInfo | None) -> dict[str, int | None]:
    """``rank`` and ``world_size`` from ``distributedInfo`` (None where absent or not a valid number)."""
    if dist is None:
        return {"rank": None, "world_size": None}
    r, w = _as_int(dist.rank), _as_int(dist.world_size)
    return {"rank": r if r >= 0 else None, "world_size": w if w > 0 else None}


def _settings_of(flags: dict[str, _Flag], sample: dict[str, int], sampled: int) -> dict:
    """What the file says of the profiler's settings (read by :mod:`launchgap.overhead`).

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


def _flag(value: _Flag) -> bool | None:
    if value is None:
        return None
    if isinstance(value, str):
        return value.strip().lower() in ("1", "true", "yes", "on")
    return bool(value) if isinstance(value, (bool, int, float)) and value == value else None
