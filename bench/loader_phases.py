"""Where the CPU seconds of reading one plain-JSON Kineto trace go, by stage (not a test).

Run from the project root: ``python bench/loader_phases.py FILE [REPEAT]``. In one process, with
the loader's own functions and sizes, it does what the loader does, both ways:

* **scan**: for each piece of the ``traceEvents`` text (:data:`~launchgap.loaders._io.CHUNK_BYTES`),
  the C scan (``kineto._scan.scan``) and the columns from its records
  (:meth:`_ColumnBuilder.add_scanned`);
* **msgspec** (the path of a text the scan declines, or of every text without it): for each
  stretch (:data:`SUB_PIECE_BYTES`), the typed msgspec decode, the columns
  (:meth:`_ColumnBuilder.add`), and freeing the decoded Structs;

then, for each, the whole-file stage (:meth:`_ColumnBuilder.finish`: concatenation, cleaning,
sorting, :func:`build_trace`) and :func:`analyze_trace`. It prints the CPU seconds
(``time.process_time``) of each stage, medians over REPEAT runs (default 3), and their share.
Cutting is done before the clock starts, so it counts stages, not the reading and cutting of the
file (the same in every run).
"""
from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from launchgap.loaders import _io  # noqa: E402
from launchgap.loaders.kineto import columns, cutting, scan, schema  # noqa: E402
from launchgap.report import analyze_trace  # noqa: E402


def stretches(data: bytes, size: int) -> list[bytearray]:
    """The traceEvents text cut into ``[`` events ``]`` texts of about ``size`` bytes each."""
    start = cutting._array_start(data)
    assert start is not None, "no traceEvents array"
    out, lo = [], start
    while True:
        cut = cutting._last_cut(data, lo, lo + size)
        if cut is None:
            break
        end, nxt = cut
        out.append(bytearray(b"[" + data[lo:end + 1] + b"]"))
        lo = nxt
    tail = data[lo:data.rindex(b"]")]
    out.append(bytearray(b"[" + tail + b"]"))
    return out


def one_run_scan(texts: list[bytearray], path: str) -> dict[str, float]:
    cols = columns._ColumnBuilder(True)
    t = {"scan": 0.0, "columns": 0.0}
    for text in texts:
        a = time.process_time()
        scanned = scan._SCAN(text, len(text) // cutting.MIN_EVENT_BYTES + 16)
        b = time.process_time()
        assert scanned is not None, "the scan declined a piece: this file is read by msgspec"
        cols.add_scanned(*scanned)
        t["scan"] += b - a
        t["columns"] += time.process_time() - b
        del scanned
    return _finish_and_analyse(cols, path, t)


def _finish_and_analyse(cols: columns._ColumnBuilder, path: str, t: dict[str, float]) -> dict[str, float]:
    a = time.process_time()
    trace = cols.finish(path, None, None)
    b = time.process_time()
    analyze_trace(trace)
    t["finish"] = b - a
    t["analysis"] = time.process_time() - b
    return t


def one_run(texts: list[bytearray], path: str) -> dict[str, float]:
    decoder = schema._EVENTS_DECODERS[True]
    cols = columns._ColumnBuilder(True)
    t = {"decode": 0.0, "columns": 0.0, "free": 0.0}
    for text in texts:
        a = time.process_time()
        events = decoder.decode(text)
        b = time.process_time()
        cols.add(events)
        c = time.process_time()
        del events
        d = time.process_time()
        t["decode"] += b - a
        t["columns"] += c - b
        t["free"] += d - c
    return _finish_and_analyse(cols, path, t)


def main() -> None:
    path = sys.argv[1]
    repeat = int(sys.argv[2]) if len(sys.argv) > 2 else 3
    data = Path(path).read_bytes()
    ways = [("msgspec", one_run, cutting.SUB_PIECE_BYTES)]
    if scan._SCAN is not None:
        ways.insert(0, ("scan", one_run_scan, _io.CHUNK_BYTES))
    for way, run, size in ways:
        runs = []
        for _ in range(repeat):
            texts = stretches(data, size)  # fresh buffers keep runs alike (the msgspec path writes to them)
            runs.append(run(texts, path))
        med = {k: statistics.median(r[k] for r in runs) for k in runs[0]}
        total = sum(med.values())
        print(f"{path}, {way}: {len(texts)} texts of about {size // 1024} KiB, medians of {repeat}")
        for k, v in med.items():
            print(f"  {k:9s} {v:6.2f} s CPU  {v / total:5.1%}")
        print(f"  {'total':9s} {total:6.2f} s CPU")


if __name__ == "__main__":
    main()
