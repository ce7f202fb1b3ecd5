"""The C scan of event texts (``analyzer/loaders/kineto/_scan.c``) against msgspec's strict decode.

Its contract: for any text, either it declines (None, and the loader decodes the text with
msgspec as before), or the columns it gives are exactly the columns msgspec's path gives.
These tests hold it to both halves:

* exact records on a tiny hand-built text;
* texts it must decline (invalid JSON, values outside the strict schema, what it cannot read
  exactly), each of which msgspec refuses or would read differently;
* numbers written every way JSON allows, read to the same bits as msgspec reads them;
* generated strict-schema events in every layout ``json.dumps`` writes: never declined, same
  columns;
* the same texts mutated byte by byte: when msgspec refuses one the scan declines it, and when
  the scan reads one, msgspec reads the same;
* the bundled real traces: every piece read by the scan.

The loader-level tests (``test_kineto_loader_equivalence.py``, ``test_kineto_parallel.py``)
run with the scan on, as a user's loader does; ``test_loader_with_and_without_the_scan`` below
compares whole traces with it on and off.
"""
from __future__ import annotations

import json
import math
import struct
from pathlib import Path
from typing import Any
from unittest import mock

import numpy as np
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from launchgap.loaders.kineto import MIN_EVENT_BYTES, load_kineto, scan, schema
from launchgap.loaders.kineto import _scan as native
from launchgap.loaders.kineto.columns import _ColumnBuilder
from launchgap.loaders.kineto.cutting import _add_text

_STRICT = schema._EVENTS_DECODERS[True]


def _scan(text: bytes) -> Any:
    return native.scan(text, len(text) // MIN_EVENT_BYTES + 16)


def _records(text: bytes) -> tuple[np.ndarray, list[str], list[bytes]]:
    out = _scan(text)
    assert out is not None, text
    records, strings, raws, _resources = out
    return np.frombuffer(records, dtype=scan._SCAN_EVENT), strings, raws


def _native(text: bytes) -> _ColumnBuilder | None:
    """The builder the scan's path gives, or None where it declined."""
    scanned = _scan(text)
    if scanned is None:
        return None
    cols = _ColumnBuilder(strict=True)
    return cols if cols.add_scanned(*scanned) is not None else None


def _msgspec(text: bytes) -> _ColumnBuilder | type:
    """The builder msgspec's path gives (the scan off), or the exception type it raised."""
    cols = _ColumnBuilder(strict=True)
    try:
        with mock.patch.object(scan, "_SCAN", None):
            _add_text(cols, _STRICT, bytearray(text))
    except Exception as exc:  # noqa: BLE001 - which one is compared by the callers
        return type(exc)
    return cols


def _same_array(a: np.ndarray, b: np.ndarray) -> bool:
    if a.dtype != b.dtype or a.shape != b.shape:
        return False
    if a.dtype.kind == "f":  # the same bits: NaN where NaN, -0.0 where -0.0
        return bool(np.array_equal(a, b, equal_nan=True) and np.array_equal(np.signbit(a), np.signbit(b)))
    return bool(np.array_equal(a, b))


def _cat(arrays: list[np.ndarray]) -> np.ndarray | None:
    return np.concatenate(arrays) if arrays else None


def assert_same_builder(got: _ColumnBuilder, want: _ColumnBuilder) -> None:
    """Every piece of state a builder carries into :meth:`_ColumnBuilder.finish` and :meth:`merge`."""
    for key in want.parts:
        g, w = _cat(got.parts[key]), _cat(want.parts[key])
        assert (g is None) == (w is None), key
        assert g is None or _same_array(g, w), (key, g, w)
    for key in want.flows:
        g, w = _cat(got.flows[key]), _cat(want.flows[key])
        assert (g is None) == (w is None), key
        assert g is None or _same_array(g, w), (key, g, w)
    assert list(got.names) == list(want.names)
    assert got.kernel_texts == want.kernel_texts
    assert got.resources == want.resources
    assert len(got.dims) == len(want.dims)
    for (gr, gl, gt), (wr, wl, wt) in zip(got.dims, want.dims):
        assert _same_array(gr, wr) and _same_array(gl, wl) and gt == wt
    for group in want.host.pending:
        gp, wp = got.host.pending[group], want.host.pending[group]
        assert len(gp) == len(wp), group
        for (go, grows, gkeys), (wo, wrows, wkeys) in zip(gp, wp):
            assert _same_array(go, wo) and _same_array(grows, wrows) and gkeys == wkeys
    assert (got.n_kept, got.n_events, got.sampled) == (want.n_kept, want.n_events, want.sampled)
    assert (got.gpu_seen, got.mtia_events) == (want.gpu_seen, want.mtia_events)
    g, w = _cat(got.sample_codes), _cat(want.sample_codes)
    assert (g is None) == (w is None) and (g is None or _same_array(g, w))
    assert list(got.python.names) == list(want.python.names)
    for key in want.python.parts:
        g, w = _cat(got.python.parts[key]), _cat(want.python.parts[key])
        assert (g is None) == (w is None), key
        assert g is None or _same_array(g, w), (key, g, w)


def assert_equivalent(text: bytes) -> _ColumnBuilder | None:
    """The contract: declined, or the same builder as msgspec's; msgspec refusing means declined."""
    native, ref = _native(text), _msgspec(text)
    if isinstance(ref, type):
        assert native is None, f"msgspec raised {ref.__name__}, the scan read it: {text[:200]!r}"
    elif native is not None:
        assert_same_builder(native, ref)
    return native


# --- exact records on a hand-built text -------------------------------------------------------

def test_records_of_a_tiny_text() -> None:
    text = (b'[{"ph": "X", "cat": "kernel", "name": "gemm \\"a\\"\\u00e9", "pid": 0, "tid": "stream 7",'
            b' "ts": 1733084245123456.789, "dur": 2.5, "extra": {"x": [1, -2.5e3, true, null]},'
            b' "args": {"correlation": 41, "device": 0, "stream": 7, "graph id": 3, "kernel": "k",'
            b' "Input Dims": [[8, 2048], []], "Call stack": "a.py(1): f", "Ev Idx": 9,'
            b' "grid": [ 132, 2,3000000000 ], "block": [128,1,1]}},\n'
            b' {"ph": "f", "cat": "ac2g", "id": 41, "pid": 1, "tid": 2, "ts": 100},'
            b' {"cat": "cpu_op", "args": {"Call stack": [], "grid": null}}]')
    ev, strings, raws = _records(text)
    assert strings == ["X", "kernel", 'gemm "a"\u00e9', "stream 7", "k", "f", "ac2g", "cpu_op"]
    assert raws == [b"[[8, 2048], []]"]
    assert ev.size == 3
    k, f, c = ev
    assert (k["ts"], k["dur"]) == (1733084245123456.789, 2.5)
    assert (k["ph"], k["cat"], k["name"], k["kernel"], k["dims"]) == (0, 1, 2, 4, 0)
    assert (k["pid"], k["pid_str"], k["tid_str"]) == (0, -1, 3)
    assert (k["corr"], k["device"], k["stream"], k["graph_id"]) == (41, 0, 7, 3)
    assert (k["id_kind"], k["has_stack"]) == (0, 1)
    assert [int(k[f]) for f in ("grid_x", "grid_y", "grid_z", "block_x", "block_y", "block_z")] == \
        [132, 2, -1, 128, 1, 1]  # 3e9 is past 2^31: -1
    assert (f["ph"], f["cat"], f["id_kind"], f["id"], f["ts"], f["dur"]) == (5, 6, 1, 41, 100.0, 0.0)
    assert (f["pid"], f["tid"], f["pid_str"], f["tid_str"]) == (1, 2, -1, -1)
    # missing fields: the strict schema's defaults (NaN ts, -1 ids, no strings, pid/tid absent)
    assert math.isnan(c["ts"]) and c["dur"] == 0.0
    assert (c["ph"], c["cat"], c["name"], c["kernel"], c["dims"]) == (-1, 7, -1, -1, -1)
    assert (c["corr"], c["device"], c["stream"], c["graph_id"]) == (-1, -1, -1, -1)
    assert (c["pid_str"], c["tid_str"], c["has_stack"]) == (-2, -2, 0)
    assert [int(c[f]) for f in ("grid_x", "grid_y", "grid_z", "block_x", "block_y", "block_z")] == [-1] * 6
    assert_same_builder(_native(text), _msgspec(text))


def test_empty_and_whitespace_arrays() -> None:
    for text in (b"[]", b" [ ] ", b"\n[\t]\r\n"):
        ev, strings, raws = _records(text)
        assert ev.size == 0 and strings == [] and raws == []
        assert_equivalent(text)


def test_record_layout_matches_the_module() -> None:
    assert scan._SCAN_EVENT.itemsize == native.EVENT_SIZE
    assert [f[0] for f in native.EVENT_FIELDS] == list(scan._SCAN_EVENT.names)


def test_the_scan_is_built_and_on() -> None:
    """The package builds it at install (a C compiler is part of the set-up); the loader uses it."""
    assert scan._SCAN is native.scan


# --- what it declines -----------------------------------------------------------------------

_GOOD = b'{"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 1.5, "dur": 2.0}'


@pytest.mark.parametrize("text", [
    # not JSON, or not an array of objects
    b"", b"[", b"[" + _GOOD, b"[" + _GOOD + b",]", b"[" + _GOOD + b"] x", b"{}", b"[1]", b"[null]", b"[[]]",
    b'[{"ph": "X",}]', b'[{"ph" "X"}]', b'[{ph: "X"}]', b"[{'ph': 'X'}]", b'[{"ts": 01}]', b'[{"ts": 1.}]',
    b'[{"ts": .5}]', b'[{"ts": +1}]', b'[{"ts": 1e}]', b'[{"ts": -}]', b'[{"x": tru}]', b'[{"x": nul}]',
    b'[{"x": "a\x01b"}]', b'[{"x": "\\q"}]', b'[{"x": "\\u12"}]', b'[{"x": "\\ud800"}]', b'[{"x": "\\udc00x"}]',
    b'[{"x": "open}]', b'[{"x": [1, 2}]', b'[{"x": {"a" 1}}]', b'[\x00]',
    # outside the strict schema: msgspec raises ValidationError, the loader reads it leniently
    b'[{"ts": "1.5"}]', b'[{"ts": null}]', b'[{"dur": true}]', b'[{"name": null}]', b'[{"name": 5}]',
    b'[{"ph": 1}]', b'[{"cat": ["x"]}]', b'[{"pid": 1.5}]', b'[{"tid": null}]', b'[{"pid": true}]',
    b'[{"args": null}]', b'[{"args": []}]', b'[{"args": {"correlation": 1.0}}]',
    b'[{"args": {"correlation": "7"}}]', b'[{"args": {"device": null}}]', b'[{"args": {"kernel": 3}}]',
    b'[{"id": {"a": 1}}]', b'[{"id": [1]}]',
    # launch configurations Kineto does not write: msgspec reads them (as -1s)
    b'[{"args": {"grid": [1, 2]}}]', b'[{"args": {"grid": [1, 2, 3, 4]}}]', b'[{"args": {"grid": [1.0, 1, 1]}}]',
    b'[{"args": {"block": "128"}}]', b'[{"args": {"block": {"x": 1}}}]', b'[{"args": {"grid": [[1], 1, 1]}}]',
    b'[{"args": {"grid": [true, 1, 1]}}]', b'[{"args": {"grid": 5}}]', b'[{"args": {"grid": []}}]',
    b'[{"args": {"grid": [1, 1, 1], "grid": [1, 1, 1]}}]',
    # what the scan cannot be sure to read as msgspec does
    b'[{"args": {"correlation": 1234567890123456789}}]',  # 19 digits: msgspec gives a Python int
    b'[{"pid": 99999999999999999999}]', b'[{"ts": 1e400}]', b'[{"ts": -1e400}]', b'[{"ts": 1e-400}]',
    b'[{"ts": 12345678901234567890}]', b'[{"id": 1e999}]', b'[{"id": -17976931348623155e+308}]',  # out of range
    b'[{"ph": "X", "ph": "X"}]', b'[{"args": {"stream": 1, "stream": 2}}]',  # a key twice
    b'[{"name": "\xff"}]', b'[{"name": "\xed\xa0\x80"}]', b'[{"name": "\xc0\x80"}]',  # invalid UTF-8
    b'[{"x": ' + b"[" * 300 + b"]" * 300 + b"}]",  # nested past MAX_DEPTH
    b'[{"ts": 1' + b"0" * 80 + b'.5}]',  # a number too long to hand on
])
def test_declined(text: bytes) -> None:
    assert _scan(text) is None
    assert_equivalent(text)


def test_declines_more_events_than_the_bound() -> None:
    text = b"[" + b",".join([b"{}"] * 50) + b"]"
    assert native.scan(text, 49) is None
    assert native.scan(text, 50) is not None


def test_flow_with_a_text_id_is_left_to_msgspec() -> None:
    text = b'[{"ph": "f", "cat": "ac2g", "id": "0x1f", "pid": 1, "tid": 1, "ts": 2.0}]'
    assert _scan(text) is not None  # any scalar is an id to the scan ...
    assert _native(text) is None  # ... but a flow's that is not an int is converted by msgspec's path
    assert isinstance(_msgspec(text), _ColumnBuilder)


def test_escaped_and_non_ascii_keys_match_as_msgspec_matches_them() -> None:
    """msgspec unescapes keys before matching field names, and skips keys that are not UTF-8."""
    for text in (b'[{"p\\u0068": "X", "c\\u0061t": "kernel", "\\u0061rgs": {"corr\\u0065lation": 4}}]',
                 b'[{"\xc3\xa9": 1, "\xff": 2, "cat": "kernel", "ph": "X"}]'):
        native = assert_equivalent(text)
        assert native is not None and native.n_kept == 1


@pytest.mark.parametrize("field", [b'"name"', b'"ph"', b'"cat"', b'"pid"', b'"tid"', b'"id"'])
def test_invalid_utf8_in_a_decoded_string_is_declined(field: bytes) -> None:
    """Every string value msgspec decodes (the id of any event too) has its UTF-8 checked; a fuzzer found
    the id unchecked here."""
    text = b'[{' + field + b': "ab\xc3{~"}]'
    assert _scan(text) is None
    assert_equivalent(text)


def test_skipped_strings_are_not_utf8_checked_by_either() -> None:
    """msgspec does not check the UTF-8 of values it skips; neither does the scan (both read it)."""
    text = b'[{"ph": "X", "cat": "kernel", "name": "k", "ts": 1, "skip": "\xff\xfe"}]'
    assert assert_equivalent(text) is not None


# --- numbers ----------------------------------------------------------------------------------

_NUMBERS = ["0", "-0", "0.0", "-0.0", "1", "-1", "1E5", "1e+5", "1e-5", "-1.5E-3", "0.1", "0.30000000000000004",
            "123456789012345678", "-123456789012345678", "1733084245123456.789", "5183319729955.785",
            "9007199254740993.0", "9007199254740993", "1e22", "1e23", "4.9e-324", "5e-324", "2.2250738585072014e-308",
            "2.2250738585072011e-308", "1.7976931348623157e308", "0.000000000000000000000000000001",
            "12345678901234567890.5", "1.00000000000000011102230246251565404236316680908203125",
            "0.1000000000000000055511151231257827021181583404541015625", "3.14159265358979323846264338327950288",
            "7e-10", "100e-2", "0e10", "-0e-10"]


@pytest.mark.parametrize("number", _NUMBERS)
def test_numbers_read_as_msgspec_reads_them(number: str) -> None:
    text = b'[{"ph": "X", "cat": "kernel", "ts": ' + number.encode() + b', "dur": ' + number.encode() + b"}]"
    ev, _, _ = _records(text)
    want = _msgspec(text)
    assert isinstance(want, _ColumnBuilder)
    got_bits = struct.pack("<dd", float(ev["ts"][0]), float(ev["dur"][0]))
    assert got_bits == struct.pack("<dd", want.parts["ts_us"][0][0], want.parts["dur_us"][0][0])
    assert float(ev["ts"][0]) == float(number) or math.isnan(float(number))


@settings(suppress_health_check=[HealthCheck.too_slow])
@given(x=st.floats(allow_nan=False, allow_infinity=False), digits=st.integers(1, 25), exp=st.integers(-30, 30))
@example(x=1733084245123456.8, digits=20, exp=0)
def test_floats_read_to_the_same_bits(x: float, digits: int, exp: int) -> None:
    """repr (what json.dumps writes), and a decimal of `digits` digits times 10**exp."""
    texts = [repr(x), f"{int(abs(x)) % 10**digits}e{exp}" if x else f"0e{exp}", f"{x:.{min(digits, 17)}e}"]
    for t in texts:
        text = f'[{{"ph": "X", "cat": "kernel", "ts": {t}, "dur": 0}}]'.encode()
        native, ref = _native(text), _msgspec(text)
        if native is None:  # only an underflow (or overflow) is declined
            assert isinstance(ref, type) or float(t) == 0.0 or not math.isfinite(float(t))
            continue
        assert isinstance(ref, _ColumnBuilder)
        assert_same_builder(native, ref)


# --- generated strict-schema events -----------------------------------------------------------

_texts = st.text(alphabet=st.characters(exclude_categories=("Cs",)), max_size=12)
_json_scalars = st.one_of(st.none(), st.booleans(), st.integers(-10**17, 10**17),
                          st.floats(allow_nan=False, allow_infinity=False), _texts)
_json = st.recursive(_json_scalars, lambda inner: st.one_of(st.lists(inner, max_size=4),
                                                            st.dictionaries(_texts, inner, max_size=4)), max_leaves=12)
_ints = st.integers(-(10**18) + 1, 10**18 - 1)
_times = st.one_of(st.floats(allow_nan=False, allow_infinity=False), _ints)
_cats = st.sampled_from(list(schema._CAT_KIND) + ["ac2g", "python_function", "mtia_op", "Trace", ""])


@st.composite
def _strict_event(draw: Any) -> dict:
    """An event msgspec's strict schema takes (any field may be missing; unknown keys anywhere)."""
    e: dict[str, Any] = {}
    fields = {"ph": st.sampled_from(["X", "X", "f", "s", "i", "M", ""]), "cat": st.one_of(_cats, _texts),
              "name": st.one_of(_texts, st.sampled_from(["aten::mm", 'k "q" {', "None"])),
              "pid": st.one_of(_ints, _texts), "tid": st.one_of(_ints, _texts), "ts": _times, "dur": _times}
    for key, strat in fields.items():
        if draw(st.integers(0, 9)) > 0:
            e[key] = draw(strat)
    if draw(st.integers(0, 3)) > 0:  # a flow's id is an int (or null); other events put anything there
        e["id"] = draw(st.one_of(_ints, st.none()) if e.get("ph") == "f" else
                       st.one_of(st.none(), _ints, st.floats(allow_nan=False, allow_infinity=False), _texts))
    if draw(st.booleans()):
        e["extra " + draw(_texts)] = draw(_json)
    if draw(st.booleans()):
        args: dict[str, Any] = {}
        for key in ("correlation", "device", "stream", "graph id"):
            if draw(st.booleans()):
                args[key] = draw(_ints)
        if draw(st.booleans()):
            args["kernel"] = draw(st.one_of(_texts, st.just("")))
        if draw(st.booleans()):
            args["Input Dims"] = draw(st.one_of(_json, st.lists(st.lists(st.integers(0, 64), max_size=3), max_size=3)))
        if draw(st.booleans()):
            args["Call stack"] = draw(st.one_of(st.sampled_from(["", [], None, "a.py(3): f", [""]]), _json))
        if draw(st.booleans()):
            args["External id"] = draw(_json)
        for key in ("grid", "block"):
            if draw(st.booleans()):
                args[key] = draw(st.one_of(st.none(), st.lists(st.one_of(st.integers(0, 2**31 + 5), _ints),
                                                                min_size=3, max_size=3)))
        for key in ("registers per thread", "shared memory"):
            if draw(st.booleans()):
                args[key] = draw(st.one_of(st.none(), st.integers(-5, 2**31 + 5), _ints))
        e["args"] = args
    return e


_layouts = st.sampled_from([dict(), dict(indent=1), dict(indent=4), dict(separators=(",", ":")),
                            dict(indent="\t"), dict(ensure_ascii=False), dict(indent=2, ensure_ascii=False)])


@settings(suppress_health_check=[HealthCheck.too_slow])
@given(events=st.lists(_strict_event(), max_size=30), layout=_layouts)
def test_strict_events_are_read_and_match_msgspec(events: list[dict], layout: dict) -> None:
    text = json.dumps(events, **layout).encode()
    if "\\ud" in text.decode("ascii", "replace").lower():  # ensure_ascii writes astral characters as
        text = json.dumps(events, **{**layout, "ensure_ascii": False}).encode()  # surrogate pairs: declined
    native = assert_equivalent(text)
    assert native is not None, text[:300]


@settings(suppress_health_check=[HealthCheck.too_slow])
@given(events=st.lists(_strict_event(), min_size=1, max_size=8), layout=_layouts,
       edits=st.lists(st.tuples(st.floats(0, 1, exclude_max=True), st.sampled_from(["set", "del", "ins"]),
                                st.sampled_from(list(b'{}[],:"\\ 0123456789.-+eEtrufalsn\xff\x01X'))),
                      min_size=1, max_size=4))
def test_mutated_texts_are_declined_or_read_as_msgspec_reads_them(events: list[dict], layout: dict,
                                                                  edits: list[tuple[float, str, int]]) -> None:
    text = bytearray(json.dumps(events, **layout).encode())
    for where, op, byte in edits:
        at = int(where * len(text))
        if op == "set":
            text[at] = byte
        elif op == "del":
            del text[at]
        else:
            text[at:at] = bytes([byte])
    assert_equivalent(bytes(text))


# --- the loader with the scan on and off, and on real traces ---------------------------------

def _pieces_read(path: Path) -> dict[str, int]:
    counts = {"scan": 0, "declined": 0}
    real = scan._SCAN

    def counting(text: Any, bound: int) -> Any:
        out = real(text, bound)
        counts["scan" if out is not None else "declined"] += 1
        return out

    with mock.patch.object(scan, "_SCAN", counting):
        load_kineto(path, chunk_bytes=1 << 20, decoders=1)
    return counts


def test_real_traces_are_read_by_the_scan(reference_traces: Path) -> None:
    """CUDA traces from torch.profiler (H200 decode, eager and graphs; the TP2 ranks): no piece declined."""
    paths = sorted((reference_traces / "h200-1b").glob("*.json.gz")) + sorted(
        (reference_traces / "h200x2-tp2-1b").glob("*.json.gz"))
    assert paths
    for path in paths:
        counts = _pieces_read(path)
        assert counts["scan"] >= 1 and counts["declined"] == 0, (path.name, counts)


def test_loader_with_and_without_the_scan(reference_traces: Path) -> None:
    from tests.unit.test_kineto_loader_equivalence import assert_same_trace

    paths = [*sorted((reference_traces / "h200-1b").glob("*bs8*.json.gz")),
             *sorted((reference_traces / "engines").glob("*/*.json.gz"))[:3]]
    for path in paths:
        on = load_kineto(path, chunk_bytes=1 << 18)
        with mock.patch.object(scan, "_SCAN", None):
            off = load_kineto(path, chunk_bytes=1 << 18)
        assert_same_trace(on, off)
