"""Fuzzing the Kineto loader: random bytes, random JSON, mutated events, mutated real traces, gzip bombs.

Property (see :mod:`tests.fuzz`): load + analyse succeeds with a JSON-safe report of possible
times or raises an AnalyzerError naming the file in one line; the CLI exits 0 or 2. Seeds
(:data:`SEEDS`): small slices of the bundled ``traces/h200-1b`` traces (two decode steps, their
first launches, kernels, flows and CPU ops) and a hand-built trace with every kind of event.
"""
from __future__ import annotations

import copy
import functools
import gzip
import json
import subprocess
import sys
import tracemalloc
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from launchgap.errors import TraceTooLargeError
from launchgap.loaders import load_trace
from tests.fuzz import CORPUS, SETTINGS, check_cli, check_load_analyze, fresh_path

REPO = Path(__file__).resolve().parents[2]
REAL = {"eager": REPO / "traces/h200-1b/1b_bs8_eager.json.gz", "graph": REPO / "traces/h200-1b/1b_bs8_graph.json.gz"}
_GPU_CATS = ("kernel", "gpu_memcpy", "gpu_memset")
_HOST_CATS = ("cuda_runtime", "cuda_driver", "cpu_op", "user_annotation")


@functools.cache
def small_real_trace(which: str, n_steps: int = 2, window_us: float = 400.0, ops_per_launch: int = 4) -> str:
    """A seed trace as compact JSON text.

    ``"eager"``/``"graph"``: a slice of a real trace, the first ``window_us`` of the first ``n_steps``
    decode steps (annotations clipped to it), the host events inside, at most ``ops_per_launch`` GPU
    ops per launched correlation id, the ``ac2g`` flows on kept events, and all metadata events.
    ``"synthetic"``: :func:`synthetic_trace`.
    """
    if which == "synthetic":
        return json.dumps(synthetic_trace(), separators=(",", ":"))
    with gzip.open(REAL[which], "rt") as fh:
        doc = json.load(fh)
    ev = doc["traceEvents"]
    steps = sorted((e for e in ev if e.get("cat") == "user_annotation" and e.get("name", "").startswith("decode")),
                   key=lambda e: e["ts"])[:n_steps]
    windows = [(s["ts"], s["ts"] + window_us) for s in steps]
    out = [e for e in ev if e.get("ph") in ("M", "i") or e.get("cat") == "Trace"]
    host = [e for e in ev if e.get("ph") == "X" and e.get("cat") in _HOST_CATS
            and any(a <= e["ts"] <= b for a, b in windows)]
    out += [dict(e, dur=min(e["dur"], window_us)) if e["cat"] == "user_annotation" else e for e in host]
    launched = {e["args"]["correlation"] for e in host if "correlation" in e.get("args", {})}
    per_corr: dict[int, int] = {}
    for e in sorted((e for e in ev if e.get("cat") in _GPU_CATS and e.get("args", {}).get("correlation") in launched),
                    key=lambda e: e["ts"]):
        c = e["args"]["correlation"]
        if per_corr.get(c, 0) < ops_per_launch:
            per_corr[c] = per_corr.get(c, 0) + 1
            out.append(e)
    at = {(e["pid"], e["tid"], e["ts"]) for e in out if e.get("ph") == "X"}
    out += [e for e in ev if e.get("cat") == "ac2g" and (e.get("pid"), e.get("tid"), e.get("ts")) in at]
    meta = {k: v for k, v in doc.items() if k != "traceEvents"}
    return json.dumps({**meta, "traceEvents": out}, separators=(",", ":"))


def synthetic_trace() -> dict:
    """Every feature the loader and analysis read, in two decode steps (times in us).

    Step 1 (eager, ``bs=4`` in its name): a GEMM under ``aten::mm``, an NCCL all-reduce under
    ``record_param_comms`` with its message shape, a copy, a set, a stream sync, and a kernel
    whose correlation id is only on its ``ac2g`` flow (old Kineto). Step 2 (batch size from the
    ``aten::embedding`` input shape): one ``cudaGraphLaunch`` replaying three kernels (``graph id``).
    Also a kernel on device 1 with a string pid, device names and ``distributedInfo``.
    """
    host = {"pid": 100, "tid": 100}

    def x(cat: str, name: str, ts: float, dur: float, args: dict | None = None, **where) -> dict:
        e = {"ph": "X", "cat": cat, "name": name, **(where or host), "ts": ts, "dur": dur}
        if args is not None:
            e["args"] = args
        return e

    def gpu(cat: str, name: str, ts: float, dur: float, corr: int | None, dev: int = 0, stream: int = 7,
            **extra) -> dict:
        args = {"device": dev, "stream": stream, **extra}
        if corr is not None:
            args["correlation"] = corr
        return x(cat, name, ts, dur, args, pid=dev, tid=stream)

    def call(name: str, ts: float, dur: float, corr: int | None = None) -> dict:
        return x("cuda_runtime", name, ts, dur, {"correlation": corr} if corr is not None else {})

    ev = [
        x("user_annotation", "decode_step[bs=4]", 0, 100, {"External id": 1}),
        x("cpu_op", "aten::mm", 1, 10, {"Input Dims": [[4, 2048], [2048, 2048]]}),
        call("cudaLaunchKernel", 2, 5, 1),
        gpu("kernel", "sm90_xmma_gemm_bf16bf16_bf16f32", 10, 20, 1),
        x("cpu_op", "record_param_comms", 12, 10, {"Input Dims": [[[4, 2048]], [], []]}),
        call("cudaLaunchKernel", 13, 4, 2),
        gpu("kernel", "ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>)", 31, 15, 2),
        call("cudaMemcpyAsync", 25, 3, 3),
        gpu("gpu_memcpy", "Memcpy DtoH (Device -> Pinned)", 47, 2, 3),
        call("cudaMemsetAsync", 29, 2, 4),
        gpu("gpu_memset", "Memset (Device)", 50, 1, 4),
        call("cudaStreamSynchronize", 35, 20),
        {"ph": "X", "cat": "cuda_driver", "name": "cuLaunchKernel", **host, "ts": 56, "dur": 3,
         "args": {"correlation": 5}},
        gpu("kernel", "flow_only_kernel", 60, 5, None),
        {"ph": "s", "id": 5, **host, "ts": 56, "cat": "ac2g", "name": "ac2g"},
        {"ph": "f", "id": 5, "pid": 0, "tid": 7, "ts": 60, "cat": "ac2g", "name": "ac2g", "bp": "e"},
        gpu("gpu_user_annotation", "decode_step[bs=4]", 10, 55, None),
        x("user_annotation", "decode_step", 200, 100, {"External id": 2}),
        x("cpu_op", "aten::embedding", 201, 3, {"Input Dims": [[32000, 2048], [4, 1], [], [], []]}),
        call("cudaGraphLaunch", 205, 10, 10),
        *(gpu("kernel", f"graph_node_{i}", 220 + 6 * i, 5, 10, **{"graph id": 1, "graph node id": i + 1})
          for i in range(3)),
        call("cudaLaunchKernel", 240, 4, 11),
        {**gpu("kernel", "other_device_kernel", 250, 10, 11, dev=1, stream=3), "pid": "1"},
        {"ph": "M", "name": "process_name", "pid": 100, "tid": 0, "args": {"name": "python3"}},
    ]
    return {"schemaVersion": 1, "deviceProperties": [{"id": 0, "name": "NVIDIA H200"}, {"id": 1, "name": "H200"}],
            "distributedInfo": {"backend": "nccl", "rank": 0, "world_size": 1}, "traceEvents": ev}


SEEDS = ("eager", "graph", "synthetic")


@pytest.fixture(scope="module")
def folder(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("fuzz_kineto")


def _write(folder: Path, data: bytes, gz: bool = False) -> Path:
    p = fresh_path(folder, ".json.gz" if gz else ".json")
    p.write_bytes(gzip.compress(data, mtime=0) if gz else data)
    return p


# ---- values --------------------------------------------------------------------------------------
BIG_INTS = st.sampled_from([2**31, 2**32, 2**53 + 1, 2**63 - 1, 2**63, -(2**63), -(2**63) - 1, 2**64, 2**70, -(2**70),
                            10**30, -1, 0])
NUMBER_STRINGS = st.sampled_from(["NaN", "nan", "inf", "-inf", "Infinity", "1e999", "-1e999", "1e300", "0x0", "0x7",
                                  "0x7fffffffffffffff", "0x8000000000000000", "0xffffffffffffffffffff",
                                  "99999999999999999999", "-99999999999999999999", "1_000", " 12 ", "", "12.5",
                                  "-0", "\u0661\u0662", "0b101", "0o17", "true"])
# The interesting values are listed twice: ``one_of`` picks a branch uniformly.
SCALARS = st.one_of(
    st.none(), st.booleans(), st.integers(-(2**70), 2**70), BIG_INTS, BIG_INTS, NUMBER_STRINGS,
    st.floats(allow_nan=False, allow_infinity=False), st.sampled_from([1e300, -1e300, 1e-300, 5e-324, 1.5e308]),
    st.text(max_size=12), NUMBER_STRINGS,
)
#: JSON values of any shape, small.
JSON = st.recursive(SCALARS, lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner,
                                                                                           max_size=4), max_leaves=12)
#: A field's new value: mostly scalars, which the typed decoder accepts, so the analysis sees them.
FIELD = st.one_of(SCALARS, SCALARS, SCALARS, JSON)
EVENT_KEYS = ("ph", "cat", "name", "pid", "tid", "ts", "dur", "id", "args", "bp", "s")
ARG_KEYS = ("correlation", "device", "stream", "graph id", "Input Dims", "External id", "context", "grid", "block")
CATS = ("kernel", "gpu_memcpy", "gpu_memset", "cuda_runtime", "cuda_driver", "cpu_op", "user_annotation",
        "gpu_user_annotation", "ac2g", "Trace", "python_function", "KERNEL", "")
PHASES = ("X", "f", "s", "M", "i", "B", "E", "x", "")
#: Names that steer the analysis: step and batch markers, API classes, collectives, markup.
NAMES = ("decode_step[bs=8]", "decode_step[bs=99999999999999999999]", "decode bs=0", "step[bs=-1]", "decode_step",
         "ProfilerStep#1", "ProfilerStep#99999999999999999999", "cudaLaunchKernel", "cudaGraphLaunch",
         "cudaStreamSynchronize", "cuLaunchKernelEx", "cudaMemcpyAsync", "record_param_comms",
         "ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>)", "all_reduce", "aten::mm",
         "<script>alert(1)</script>", "**bold** [x](javascript:1)", "", "\u00e9\u4e2d\U0001f600", "a" * 300)
_DIM = st.one_of(st.integers(-4, 4096), BIG_INTS, st.sampled_from([1e300, 0.5]))
INPUT_DIMS = st.one_of(JSON, st.lists(st.lists(_DIM, max_size=3), max_size=3),
                       st.lists(st.lists(st.lists(BIG_INTS, min_size=1, max_size=3), max_size=2), min_size=1,
                                max_size=2))
#: Step marker texts with odd batch sizes.
STEP_NAMES = st.one_of(st.sampled_from(NAMES), st.builds("decode_step[bs={}]".format, st.one_of(BIG_INTS, SCALARS)),
                       st.builds("ProfilerStep#{}".format, BIG_INTS))


# ---- random bytes and random JSON ---------------------------------------------------------------
@SETTINGS
@given(data=st.one_of(
    st.binary(max_size=2048),
    st.binary(max_size=512).map(lambda b: b"{" + b),
    st.binary(max_size=512).map(lambda b: b" [" + b),
    st.binary(max_size=512).map(lambda b: b"\x1f\x8b" + b),
    st.binary(max_size=512).map(lambda b: gzip.compress(b, mtime=0)),
))
def test_fuzz_random_bytes(folder, data) -> None:
    check_load_analyze(_write(folder, data))


@SETTINGS
@given(value=st.one_of(
    JSON,
    JSON.map(lambda v: {"traceEvents": v}),
    st.lists(st.dictionaries(st.sampled_from(EVENT_KEYS), JSON, max_size=8), max_size=8).map(
        lambda ev: {"traceEvents": ev}),
    st.fixed_dictionaries({"traceEvents": st.lists(JSON, max_size=4), "deviceProperties": JSON,
                           "distributedInfo": JSON}),
), gz=st.booleans())
def test_fuzz_random_json(folder, value, gz) -> None:
    check_load_analyze(_write(folder, json.dumps(value).encode(), gz))


# ---- structurally valid traces, mutated events --------------------------------------------------
# A mutation is a small recipe (op, three selectors, a value) resolved against the document when
# applied, so a failing example prints as a few tuples, not as a whole trace.
_SEL = st.integers(0, 2**16)
_EVENT_VALUES = {
    "set": FIELD, "set_arg": FIELD, "del": st.none(), "del_arg": st.none(), "drop": st.none(), "dup": st.none(),
    "same_corr": BIG_INTS, "recat": st.tuples(st.sampled_from(CATS), st.sampled_from(PHASES)),
    "rename": st.sampled_from(NAMES), "step_name": STEP_NAMES, "shape_dims": INPUT_DIMS, "dims": INPUT_DIMS,
    "junk_event": JSON,
    "top": st.tuples(st.sampled_from(["deviceProperties", "distributedInfo"]), st.one_of(
        JSON, st.lists(st.fixed_dictionaries({"id": JSON, "name": JSON}), max_size=3),
        st.fixed_dictionaries({"rank": SCALARS, "world_size": SCALARS, "backend": st.just("nccl")}))),
}
_EVENT_OPS = ("set", "set", "set_arg", "set_arg", *_EVENT_VALUES)
EVENT_MUTATION = st.sampled_from(_EVENT_OPS).flatmap(
    lambda op: st.tuples(st.just(op), _SEL, _SEL, _SEL, _EVENT_VALUES[op]))


def _args(e: dict) -> dict:
    if not isinstance(e.get("args"), dict):
        e["args"] = {}
    return e["args"]


def _pick(ev: list, a: int, b: int) -> int:
    """An event index: uniform half the time, else uniform within a category (so the few
    annotations and launches of a seed are hit as often as its many CPU ops)."""
    if a % 2 == 0:
        return b % len(ev)
    cats = sorted({str(e.get("cat")) for e in ev if isinstance(e, dict)})
    rows = [i for i, e in enumerate(ev) if isinstance(e, dict) and cats and str(e.get("cat")) == cats[b % len(cats)]]
    return rows[(b // 7) % len(rows)] if rows else 0


def mutate_events(doc: dict, ops: list[tuple]) -> dict:
    """Apply event mutations (see :data:`EVENT_MUTATION`) to a decoded trace, in place."""
    ev = doc["traceEvents"]
    for op, a, b, c, value in ops:
        if not ev:
            ev.append({"ph": "X", "cat": "kernel", "name": "k", "ts": 0, "dur": 1})
        i = _pick(ev, a, b)
        e = ev[i] if isinstance(ev[i], dict) else {}
        if op == "set":
            e[EVENT_KEYS[c % len(EVENT_KEYS)]] = value
        elif op == "set_arg":
            _args(e)[ARG_KEYS[c % len(ARG_KEYS)]] = value
        elif op == "del":
            e.pop(EVENT_KEYS[c % len(EVENT_KEYS)], None)
        elif op == "del_arg":
            _args(e).pop(ARG_KEYS[c % len(ARG_KEYS)], None)
        elif op == "drop":  # e.g. a launch call gone: its kernels have no launch
            del ev[i]
        elif op == "dup":  # duplicate correlation ids, duplicate steps
            ev.insert(c % (len(ev) + 1), copy.deepcopy(ev[i]))
        elif op == "same_corr":
            other = ev[c % len(ev)]
            corr = other["args"].get("correlation") if isinstance(other, dict) and isinstance(
                other.get("args"), dict) else None
            _args(e)["correlation"] = corr if corr is not None else value
        elif op == "recat":
            e["cat"], e["ph"] = value
        elif op == "rename":
            e["name"] = value
        elif op == "step_name":  # any annotation: step and batch-size markers
            rows = [j for j, x in enumerate(ev) if isinstance(x, dict) and x.get("cat") == "user_annotation"]
            if rows:
                ev[rows[c % len(rows)]]["name"] = value
        elif op == "shape_dims":  # shapes the analysis reads: a collective's message, a batch size
            rows = [j for j, x in enumerate(ev) if isinstance(x, dict) and isinstance(x.get("args"), dict)
                    and "Input Dims" in x["args"] and x.get("name") in ("record_param_comms", "aten::embedding")]
            if rows:
                ev[rows[c % len(rows)]]["args"]["Input Dims"] = value
        elif op == "dims":
            _args(e)["Input Dims"] = value
        elif op == "junk_event":
            ev[i] = value
        elif op == "top":
            doc[value[0]] = value[1]
    return doc


#: (seed name, mutations): a seed (:data:`SEEDS`) with 1-8 mutations of events, their args or the top level.
MUTATED_TRACE = st.tuples(st.sampled_from(SEEDS), st.lists(EVENT_MUTATION, min_size=1, max_size=8))


def build_mutated_trace(case: tuple[str, list[tuple]]) -> bytes:
    seed, ops = case
    return json.dumps(mutate_events(json.loads(small_real_trace(seed)), ops)).encode()


@pytest.mark.parametrize("which", SEEDS)
def test_fuzz_seed_analyses(folder, which) -> None:
    """The seeds themselves load and analyse: mutations start from a trace that works."""
    assert check_load_analyze(_write(folder, small_real_trace(which).encode())) == "ok"


@SETTINGS
@given(case=MUTATED_TRACE, gz=st.booleans())
def test_fuzz_mutated_events(folder, case, gz) -> None:
    check_load_analyze(_write(folder, build_mutated_trace(case), gz))


@SETTINGS
@given(case=MUTATED_TRACE, fmt=st.sampled_from(["json", "json", "text", "markdown"]))
def test_fuzz_mutated_events_cli(folder, case, fmt) -> None:
    """Through ``launchgap analyze``: it also splits collective waits and renders the report."""
    check_cli(_write(folder, build_mutated_trace(case)), fmt)


# ---- byte-level mutations of a small real trace, plain and gzipped ------------------------------
_DIGITS = (b"0", b"9", b"99999999999999999999", b"1e308", b"0.5", b"-1")
_TOKENS = (b"{", b"}", b"[", b"]", b",", b'"', b"\\", b"-", b"e9", b"null", b"99999999999999999999", b"\xff\xfe",
           b"\x00")
BYTE_MUTATION = st.tuples(
    st.sampled_from(["truncate", "flip", "insert", "delete", "overwrite", "repeat", "digits", "digits"]),
    _SEL, st.integers(1, 256), st.one_of(st.binary(min_size=1, max_size=16), st.sampled_from(_TOKENS)))


def mutate_bytes(seed: bytes, ops: list[tuple]) -> bytes:
    """Apply byte mutations (op, position selector, count, payload); positions wrap around the data."""
    data = bytearray(seed)
    for op, at, n, payload in ops:
        pos = at % len(data) if data else 0
        if op == "digits":  # rewrite the next digit: JSON stays valid and numbers go wild
            j = next((j for j in range(pos, len(data)) if 48 <= data[j] <= 57), None)
            if j is not None:
                data[j:j + 1] = _DIGITS[n % len(_DIGITS)]
        elif op == "truncate":
            del data[pos:]
        elif op == "flip" and data:
            data[pos] ^= 1 << (n % 8)
        elif op == "insert":
            data[pos:pos] = payload
        elif op == "delete":
            del data[pos:pos + (n % 64) + 1]
        elif op == "overwrite":
            data[pos:pos + len(payload)] = payload
        elif op == "repeat":
            data[pos:pos] = data[pos:pos + n] * (n % 4 + 1)
    return bytes(data)


#: (seed, how, mutations): mutate the JSON and serve it plain or gzipped, or gzip it and mutate the gzip.
MUTATED_REAL_FILE = st.tuples(st.sampled_from(SEEDS), st.sampled_from(["plain", "gzip-of-mutated", "mutated-gzip"]),
                              st.lists(BYTE_MUTATION, min_size=1, max_size=6))


def write_mutated_real_file(folder: Path, case: tuple[str, str, list[tuple]]) -> Path:
    seed_name, how, ops = case
    seed = small_real_trace(seed_name).encode()
    if how == "mutated-gzip":
        data, gz = mutate_bytes(gzip.compress(seed, mtime=0), ops), True
    else:
        data, gz = mutate_bytes(seed, ops), how == "gzip-of-mutated"
        data = gzip.compress(data, mtime=0) if gz else data
    p = fresh_path(folder, ".json.gz" if gz else ".json")
    p.write_bytes(data)
    return p


@SETTINGS
@given(case=MUTATED_REAL_FILE)
def test_fuzz_mutated_real_bytes(folder, case) -> None:
    check_load_analyze(write_mutated_real_file(folder, case))


@SETTINGS
@given(case=MUTATED_REAL_FILE)
def test_fuzz_mutated_real_bytes_cli(folder, case) -> None:
    check_cli(write_mutated_real_file(folder, case))


# ---- memory cap ------------------------------------------------------------------------------------
BOMB_BYTES = 64 * 1024**2  # decompressed size of the bomb
CAP_BYTES = 8 * 1024**2


@pytest.fixture(scope="module")
def bomb(folder) -> Path:
    p = folder / "bomb.json.gz"
    with gzip.open(p, "wb", compresslevel=9) as fh:
        fh.write(b"{" + b" " * (BOMB_BYTES - 1))
    assert p.stat().st_size < 200_000  # a real bomb: ~0.1 MB on disk
    return p


def test_fuzz_gzip_bomb_refused_within_memory(bomb) -> None:
    """64 MiB of spaces behind an 8 MiB cap: TraceTooLargeError, Python allocations peak under 4x the cap."""
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        with pytest.raises(TraceTooLargeError, match="cap"):
            load_trace(bomb, CAP_BYTES)
        peak = tracemalloc.get_traced_memory()[1] - base
    finally:
        tracemalloc.stop()
    assert peak < 4 * CAP_BYTES, f"peak {peak / 2**20:.1f} MiB for a {CAP_BYTES / 2**20:.0f} MiB cap"


_RSS_PROBE = """
import resource, sys
from launchgap.errors import TraceTooLargeError
from launchgap.loaders import load_trace
load_trace  # imports done: the baseline below includes numpy and msgspec
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
try:
    load_trace(sys.argv[1], int(sys.argv[2]))
except TraceTooLargeError:
    pass
else:
    raise SystemExit("bomb was not refused")
print(before, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)
"""


def test_fuzz_gzip_bomb_rss(bomb) -> None:
    """Same bomb in a fresh process: the resident set grows by under 4x the cap (C buffers included)."""
    out = subprocess.run([sys.executable, "-c", _RSS_PROBE, str(bomb), str(CAP_BYTES)], capture_output=True,
                         text=True, check=True, cwd=REPO).stdout.split()
    grown = (int(out[1]) - int(out[0])) * 1024  # ru_maxrss is KiB on Linux
    assert grown < 4 * CAP_BYTES, f"RSS grew {grown / 2**20:.1f} MiB for a {CAP_BYTES / 2**20:.0f} MiB cap"


def test_fuzz_plain_file_over_cap_refused_unread(folder) -> None:
    p = folder / "big.json"
    p.write_bytes(b"[" + b" " * CAP_BYTES)
    tracemalloc.start()
    try:
        with pytest.raises(TraceTooLargeError, match="cap"):
            load_trace(p, CAP_BYTES)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 1024**2  # the size is checked before reading


# ---- regression corpus -----------------------------------------------------------------------------
KINETO_CORPUS = sorted(p for p in CORPUS.glob("kineto_*") if p.suffix in (".json", ".gz"))


@pytest.mark.parametrize("path", KINETO_CORPUS, ids=[p.name for p in KINETO_CORPUS])
def test_fuzz_corpus_kineto(path) -> None:
    """Inputs the fuzzer once found crashing: now refused or analysed, in the library and the CLI."""
    check_load_analyze(path)
    check_cli(path)
