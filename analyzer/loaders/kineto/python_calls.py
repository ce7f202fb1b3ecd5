"""Python function ranges (``python_function`` events of a ``with_stack`` trace) beside the event table."""

from __future__ import annotations


import numpy as np

from ...trace import PythonCalls, no_python_calls, smallest_int
from .arrays import _intern_local, _narrowest_int
from .schema import _as_int, _as_us


class _PythonCallColumns:
    """Python function ranges, piece by piece, into a :class:`~launchgap.trace.PythonCalls` table.

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
            return out if out.flags.writeable else out.copy()  # ours to change in place (below)

        ts = take("ts_us")
        dur = take("dur_ns")
        ok = (np.abs(ts) < 9.2e15) & (dur >= 0)
        rows = None if ok.all() else np.flatnonzero(ok)
        del ok
        if rows is not None:
            ts, dur = ts[rows], dur[rows]
        # In place on this builder's own array (an 8-byte column per call at a time, not five):
        # rint((ts - base) * 1000) + base in ns, the same operations in the same order.
        ts -= base_us
        ts *= 1000.0
        np.rint(ts, out=ts)
        start = ts.astype(np.int64)
        del ts
        start += np.int64(int(base_us) * 1000)
        end = start + dur
        del dur
        # sorted by start: no argsort (8 bytes a call) where the file already has them in that order
        order = None if start.size < 2 or (start[1:] >= start[:-1]).all() else np.argsort(start, kind="stable")
        if order is not None:
            start = start[order]
            end = end[order]
        columns = []
        for key in ("name_id", "tid"):  # one at a time
            col = take(key)
            col = smallest_int(col if rows is None else col[rows])
            columns.append(col if order is None else col[order])
            del col
        names = np.empty(len(self.names), dtype=object)
        names[:] = list(self.names)
        return PythonCalls(names, columns[0], start, end, columns[1])
