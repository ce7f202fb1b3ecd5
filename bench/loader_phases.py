"""Where the CPU seconds of reading one plain-JSON Kineto trace go, by stage (not a test).

Run from the project root: ``python bench/loader_phases.py FILE [REPEAT]``. In one process, with
the loader's own functions and sizes, it does what the loader does for each stretch of the
``traceEvents`` text (:data:`SUB_PIECE_BYTES`): the typed msgspec decode, the columns
(:meth:`_ColumnBuilder.add`), and freeing the decoded Structs; then the whole-file stage
(:meth:`_ColumnBuilder.finish`: concatenation, cleaning, sorting, :func:`build_trace`) and
:func:`analyze_trace`. It prints the CPU seconds (``time.process_time``) of each stage, medians
over REPEAT runs (default 3), and their share. Cutting is done before the clock starts, so it
counts stages, not the reading and cutting of the file (the same in every run).
"""
from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from launchgap.loaders import kineto  # noqa: E402
from launchgap.report import analyze_trace  # noqa: E402


def stretches(data: bytes) -> list[bytearray]:
    """The traceEvents text cut into ``[`` events ``]`` texts of about SUB_PIECE_BYTES each."""
    start = kineto._array_start(data)
    assert start is not None, "no traceEvents array"
    out, lo = [], start
    while True:
        cut = kineto._last_cut(data, lo, lo + kineto.SUB_PIECE_BYTES)
        if cut is None:
            break
        end, nxt = cut
        out.append(bytearray(b"[" + data[lo:end + 1] + b"]"))
        lo = nxt
    tail = data[lo:data.rindex(b"]")]
    out.append(bytearray(b"[" + tail + b"]"))
    return out


def one_run(texts: list[bytearray], path: str) -> dict[str, float]:
    decoder = kineto._EVENTS_DECODERS[True]
    cols = kineto._ColumnBuilder(True)
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
    a = time.process_time()
    trace = cols.finish(path, None, None)
    b = time.process_time()
    analyze_trace(trace)
    t["finish"] = b - a
    t["analysis"] = time.process_time() - b
    return t


def main() -> None:
    path = sys.argv[1]
    repeat = int(sys.argv[2]) if len(sys.argv) > 2 else 3
    data = Path(path).read_bytes()
    runs = []
    for _ in range(repeat):
        texts = stretches(data)  # decoding consumes nothing, but fresh buffers keep runs alike
        runs.append(one_run(texts, path))
    med = {k: statistics.median(r[k] for r in runs) for k in runs[0]}
    total = sum(med.values())
    print(f"{path}: {len(texts)} stretches of about {kineto.SUB_PIECE_BYTES // 1024} KiB, medians of {repeat}")
    for k, v in med.items():
        print(f"  {k:9s} {v:6.2f} s CPU  {v / total:5.1%}")
    print(f"  {'total':9s} {total:6.2f} s CPU")


if __name__ == "__main__":
    main()
