"""The parallel Kineto decode (worker processes, pieces cut at event boundaries, columns merged in
file order) gives exactly what the reference loader gives, wherever the pieces are cut.

Pieces are cut after the last ``}`` ws ``,`` ws ``{`` of each read piece; with tiny pieces the
cut points land inside strings (names holding ``}, {``, escaped quotes), inside nested objects,
between whitespace runs, and on every odd boundary, and each text goes to whichever process
has room. The string scanner that decides whether a whitespace run may be dropped is checked
against a byte-by-byte loop.
"""
from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from launchgap.loaders.kineto import columns, load_kineto, workers
from launchgap.loaders.kineto.cutting import _scan_strings
from launchgap.trace import Trace
from tests.unit.test_kineto_loader_equivalence import (
    _event, _events, _real_traces, _reference_trace_or_error, _write, assert_same_trace,
)


def _loop_scan(text: bytes, in_string: bool, backslashes: int) -> tuple[bool, int]:
    for b in text:
        if b == 0x5C:
            backslashes += 1
            continue
        if b == 0x22 and backslashes % 2 == 0:
            in_string = not in_string
        backslashes = 0
    return in_string, backslashes


@given(text=st.binary(max_size=60).map(lambda b: bytes(b'"\\a '[x % 4] for x in b)),
       cuts=st.lists(st.integers(0, 60), max_size=4))
@example(text=b'\\\\"', cuts=[1]).via("a run of backslashes split across pieces")
@example(text=b'"\\"', cuts=[2]).via("an escaped quote right after a cut")
def test_scan_strings_matches_a_byte_loop(text: bytes, cuts: list[int]) -> None:
    # The loop counts backslashes outside strings too, as the scanner does (JSON has none there).
    state, run = False, 0
    for a, b in zip([0, *sorted(cuts)], [*sorted(cuts), len(text)]):
        state, run = _scan_strings(text[a:b], state, run)
    assert (state, run) == _loop_scan(text, False, 0)


def _same(path: Path, chunk: int, decoders: int) -> None:
    want = _reference_trace_or_error(path)
    try:
        got: Trace | type = load_kineto(path, chunk_bytes=chunk, decoders=decoders)
    except Exception as exc:  # noqa: BLE001 - compared by type with the reference's
        got = type(exc)
    if isinstance(want, type):
        assert got is want, (path.name, chunk, got)
    else:
        assert isinstance(got, Trace), (path.name, chunk, got)
        assert_same_trace(got, want)


_tricky_names = st.sampled_from(['}, {', '"}, {"ph": "X"}, {', '\\" }, {', "  \n  ", "k{},{", "\\\\", "aten::mm"])


@settings(suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(events=st.lists(_event(), min_size=0, max_size=30), names=st.lists(_tricky_names, max_size=6),
       chunk=st.integers(1, 300), indent=st.sampled_from([None, 1, 3]), gz=st.booleans(),
       pad=st.integers(0, 3000), decoders=st.integers(2, 3))
def test_parallel_decode_matches_reference(tmp_path: Path, events: list[dict], names: list[str], chunk: int,
                                           indent: int | None, gz: bool, pad: int, decoders: int) -> None:
    events = events + [{"ph": "X", "cat": "kernel", "name": n, "pid": 0, "tid": 7, "ts": 5.0 + i, "dur": 1.0,
                        "args": {"device": 0, "stream": 7, "correlation": i}} for i, n in enumerate(names)]
    events.append({"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 5.0, "dur": 1.0,
                   "args": {"device": 0, "stream": 7, "correlation": 1}})
    text = json.dumps({"traceEvents": events}, indent=indent)
    if pad:  # a whitespace run between two events (several pieces long for small chunks)
        text = text.replace("}, {", "}," + " " * pad + "{", 1).replace("},\n", "},\n" + " " * pad, 1)
    path = tmp_path / ("gen.json.gz" if gz else "gen.json")
    path.write_bytes(gzip.compress(text.encode()) if gz else text.encode())
    _same(path, chunk, decoders)


@pytest.mark.parametrize("decoders", [2, 3])
def test_parallel_on_the_hand_built_layouts(tmp_path: Path, decoders: int, monkeypatch) -> None:
    sent: list[int] = []
    submit = workers._Worker.submit
    monkeypatch.setattr(workers._Worker, "submit", lambda self, seq, limit, parts, offset: (sent.append(seq),
                                                                                   submit(self, seq, limit, parts, offset)))
    evs = _events(20)
    evs.insert(3, {"ph": "X", "cat": "python_function", "name": '}, {"ph": "X"}, {', "pid": 1, "tid": 1,
                   "ts": 1001.5, "dur": 0.5, "args": {"nested": [{"a": 1}, {"b": "},{"}], "s": "{{{"}})
    doc = {"schemaVersion": 1, "deviceProperties": [{"id": 0, "name": "NVIDIA H200"}], "traceEvents": evs,
           "distributedInfo": {"rank": 0, "world_size": 1}, "traceName": "t"}
    for kw in ({}, {"indent": 2}, {"gz": True}, {"sep": (",", ":")}):
        p = _write(tmp_path, "layout", doc, **kw)
        for chunk in (1, 7, 64, 333, 1 << 20):
            _same(p, chunk, decoders)
    assert len(sent) > 10  # the workers did decode pieces


def test_parallel_lenient_values_and_flows(tmp_path: Path) -> None:
    evs = _events(6)
    evs[0]["pid"] = "host one"
    evs[2]["ts"] = "1002"
    evs[3]["args"]["stream"] = "0x7"
    flows = [{"ph": "f", "id": 100 + i, "pid": 0, "tid": 7, "ts": 1009.0 + 100 * i, "cat": "ac2g", "name": "ac2g"}
             for i in range(6)]
    for e in evs:
        if e["cat"] == "kernel":
            e["args"].pop("correlation")
    p = _write(tmp_path, "lenient", {"traceEvents": evs + flows})
    for chunk in (1, 50, 400):
        _same(p, chunk, 2)


def test_parallel_on_real_traces(reference_traces: Path) -> None:
    compared = 0
    for path in _real_traces(reference_traces)[:12]:
        doc = json.loads(gzip.decompress(path.read_bytes()) if path.suffix == ".gz" else path.read_bytes())
        if not isinstance(doc, dict) or "traceEvents" not in doc:
            continue
        # Pieces of 1/40 of the file: about 40 texts, shared between the two processes.
        _same(path, max(1 << 12, path.stat().st_size // 40), 2)
        compared += 1
    assert compared >= 8


def test_parallel_with_a_fresh_interpreter_worker(tmp_path: Path, monkeypatch) -> None:
    # What a process with threads (the dashboard) gets: a subprocess worker, not a fork.
    monkeypatch.setattr(workers, "_can_fork", lambda: False)
    evs = _events(30)
    for kw in ({}, {"gz": True}):
        p = _write(tmp_path, "fresh", {"traceEvents": evs, "deviceProperties": [{"id": 0, "name": "GPU"}]}, **kw)
        _same(p, 500, 2)


def test_a_worker_that_dies_is_replaced_by_a_decode_here(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(workers, "_BOOT", "import os; os._exit(3)")
    monkeypatch.setattr(workers, "_can_fork", lambda: False)
    p = _write(tmp_path, "dies", {"traceEvents": _events(30)})
    _same(p, 500, 2)


def test_merge_knows_every_column() -> None:
    # _ColumnBuilder.merge appends each column of a later builder, remapping name_id onto the
    # merged name table. A column added later that holds ids local to a builder (into a text list of
    # its own) must be remapped there too, or a parallel decode gives wrong ids without failing:
    # extend merge() for it, then this set.
    assert set(columns._ColumnBuilder(True).parts) == {
        "kind", "name_id", "ts_us", "dur_us", "pid", "tid", "corr", "device_arg", "stream_arg", "graph_id", "kernel_name_id",
        "grid_x", "grid_y", "grid_z", "block_x", "block_y", "block_z"}


def test_parallel_keeps_launch_kernel_names(reference_traces: Path) -> None:
    """Capture traces name the kernel of each launch call (``kernel_name_id``, ids local to each
    decoder until merged): pieces decoded apart give the same names as one decode."""
    paths = sorted((reference_traces / "engines").rglob("capture_traces__*.json.gz"))
    assert len(paths) >= 3
    for path in paths:
        _same(path, max(1 << 12, path.stat().st_size // 40), 2)
