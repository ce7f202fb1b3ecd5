"""What splitting a file of several ranks per rank costs (:mod:`launchgap.rank_split`; not a test).

Run from the project root: ``python bench/rank_split.py FILE [RANKS] [REPEAT]``. It loads one trace, makes a
file of RANKS ranks (default 4) from it in memory (each copy's host pid and tid + r, device + r, correlation ids
apart, 2 us later: what an nsys export of a tensor-parallel server holds), then times :func:`split_ranks` and
:func:`plan_rank` on it: wall seconds, median over REPEAT runs (default 5), with the runs.
"""
from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from launchgap.loaders import load_trace  # noqa: E402
from launchgap.rank_split import plan_rank, split_ranks  # noqa: E402
from launchgap.trace import _COLUMNS, Trace, build_trace  # noqa: E402


def merged(trace: Trace, ranks: int) -> Trace:
    """``ranks`` copies of ``trace`` as the ranks of one file (columns, no loop over events)."""
    host = trace.device < 0
    cols = {}
    for c in _COLUMNS:
        parts = []
        for r in range(ranks):  # per rank
            a = getattr(trace, c).astype(np.int64)
            if c in ("pid", "tid"):
                a = np.where(host, a + r, a)
            elif c == "device":
                a = np.where(a >= 0, a + r, a)
            elif c == "corr":
                a = np.where(a >= 0, a + (r << 40), a)
            elif c == "start_ns":
                a = a + 2000 * r
            parts.append(a)
        cols[c] = np.concatenate(parts)
    return build_trace(path=f"{trace.path} x{ranks}", format=trace.format, names=list(trace.names), columns=cols)


def main() -> None:
    path = sys.argv[1]
    ranks = int(sys.argv[2]) if len(sys.argv) > 2 else 4
    repeat = int(sys.argv[3]) if len(sys.argv) > 3 else 5
    m = merged(load_trace(path), ranks)
    print(f"{path}: {len(m) // ranks:,} rows per rank, {len(m):,} rows in the {ranks}-rank file")
    for name, fn in (("split_ranks", lambda: split_ranks(m)), ("plan_rank", lambda: plan_rank(split))):
        runs = []
        for _ in range(repeat):
            t0 = time.perf_counter()
            got = fn()
            runs.append(time.perf_counter() - t0)
        if name == "split_ranks":
            split = got
            assert split is not None and len(split.traces) == ranks
        print(f"{name:<12} {statistics.median(runs):.3f} s median ({', '.join(f'{x:.3f}' for x in runs)})")


if __name__ == "__main__":
    main()
