"""Vectorised reading of the dense record lines of one block: numpy over the block's bytes, no
Python work per line.

A record is found by its literal marker (:meth:`BlockScan.find`: one C ``bytes.split`` gives every
occurrence); each field by the first occurrence of its key after the marker on the same line
(:meth:`BlockScan.next_after`); its value is read from a fixed-width window of bytes at that offset
(:func:`read_uint`, :func:`read_decimal`). The bracketed ISO stamp that starts a line
(``[2025-11-11 04:06:27(.123)( TP0 …)]``) is read the same way (:func:`iso_stamps`). A row that
does not fit these fast forms is flagged, and the engine module reads that one line with its
regex: the fast path never decides alone what a line means.
"""
from __future__ import annotations

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

_EMPTY = np.zeros(0, dtype=np.int64)
#: Bytes of newline padding after the block, so a window that starts near its end stays in range.
PAD = 128
_P10 = 10 ** np.arange(19, dtype=np.int64)
#: Bytes that may continue a number token (``[-+\w.]``): a token followed by one of them is not plain.
_WORDISH = np.zeros(256, dtype=bool)
_WORDISH[[ord(c) for c in "-+._"]] = True
_WORDISH[ord("0"):ord("9") + 1] = True
_WORDISH[ord("a"):ord("z") + 1] = True
_WORDISH[ord("A"):ord("Z") + 1] = True


class BlockScan:
    """One block's bytes, padded with newlines, with the positions of its line ends."""

    def __init__(self, block: bytes) -> None:
        self.block = block
        self.n = len(block)
        a = np.empty(self.n + PAD, dtype=np.uint8)
        a[:self.n] = np.frombuffer(block, dtype=np.uint8)
        a[self.n:] = 10
        self.a = a
        self._bounds: np.ndarray | None = None
        self._freq: np.ndarray | None = None
        self._newlines: np.ndarray | None = None
        self._found: dict[bytes, np.ndarray] = {}
        self._windows: dict[int, np.ndarray] = {}

    def find(self, needle: bytes) -> np.ndarray:
        """Start offsets of every occurrence of ``needle``, ascending (see :meth:`find_many`)."""
        got = self._found.get(needle)
        if got is None:
            got = self.find_many((needle,))[0]
        return got

    def find_many(self, needles: tuple[bytes, ...]) -> list[np.ndarray]:
        """Every occurrence of each needle, from one numpy pass over the block: the offsets of each
        needle's rarest byte (in the block's first 64 KiB) found together, then kept where the
        needle's other bytes follow. Cached: a later :meth:`find` of the same needle is free."""
        if self._freq is None:
            self._freq = np.bincount(self.a[:min(self.n, 65536)], minlength=256)
        todo = [nd for nd in dict.fromkeys(needles) if nd not in self._found]
        if todo:
            keys = [min(range(len(nd)), key=lambda i, nd=nd: self._freq[nd[i]]) for nd in todo]
            body = self.a[:self.n]
            anchors = sorted({nd[k] for nd, k in zip(todo, keys)})
            mask = body == anchors[0]
            for ch in anchors[1:]:
                mask |= body == ch
            hits = np.flatnonzero(mask)
            del mask
            for nd, k in zip(todo, keys):
                at = hits[self.a[hits] == nd[k]] - k if len(anchors) > 1 else hits - k
                at = at[(at >= 0) & (at + len(nd) <= self.n)]
                for i, ch in enumerate(nd):
                    if i != k:
                        at = at[self.a[at + i] == ch]
                self._found[nd] = at
        return [self._found[nd] for nd in needles]

    @property
    def newlines(self) -> np.ndarray:
        """Offsets of the block's newlines."""
        if self._newlines is None:
            self._newlines = np.flatnonzero(self.a[:self.n] == 10)
        return self._newlines

    def has(self, needle: bytes) -> bool:
        """Whether ``needle`` occurs (a numpy pass over the block: faster than ``in`` when it does not)."""
        return len(self.find(needle)) > 0

    def lines(self, pos: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(start, end) of the line holding each offset; ``end`` is its newline (or the block's end)."""
        if self._bounds is None:
            self._bounds = np.concatenate(([-1], self.newlines, [self.n]))
        i = np.searchsorted(self._bounds, pos)  # bounds[i-1] < pos <= bounds[i]
        return self._bounds[i - 1] + 1, self._bounds[i]

    def strings(self, width: int) -> np.ndarray:
        """The padded bytes as overlapping ``S{width}`` strings, one starting at each offset."""
        key = -width
        view = self._windows.get(key)
        if view is None:
            view = self._windows[key] = np.ndarray(shape=(len(self.a) - width + 1,), dtype=f"S{width}",
                                                   buffer=self.a, strides=(1,))
        return view

    @staticmethod
    def next_after(pos: np.ndarray, end: np.ndarray, occurrences: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The first of ``occurrences`` at or after each ``pos`` and whether it is before ``end``."""
        j = np.searchsorted(occurrences, pos)
        at = np.append(occurrences, np.iinfo(np.int64).max)[j]
        return at, at < end

    def window(self, pos: np.ndarray, width: int) -> np.ndarray:
        """(len(pos), width) bytes starting at each offset (newlines past the block's end)."""
        view = self._windows.get(width)
        if view is None:  # building the view costs more than reading a few thousand rows of it
            view = self._windows[width] = sliding_window_view(self.a, width)
        return view[pos]


def read_uint(a: np.ndarray, at: np.ndarray, width: int = 12) -> tuple[np.ndarray, np.ndarray]:
    """The unsigned integer starting at each offset of the padded bytes ``a`` and its digit count
    (0: none), reading at most ``width`` digits: one column of bytes at a time, as long as any row
    still has digits (a batch size has one to four)."""
    val = np.zeros(len(at), dtype=np.int64)
    nd = np.zeros(len(at), dtype=np.int64)
    live = np.ones(len(at), dtype=bool)
    for j in range(width):
        c = a[at + j]
        live &= (c >= 48) & (c <= 57)
        if not live.any():
            break
        val = np.where(live, val * 10 + c - 48, val)
        nd += live
    return val, nd


def run_length(a: np.ndarray, at: np.ndarray, allowed: np.ndarray, width: int) -> np.ndarray:
    """How many bytes from each offset are in ``allowed`` (a 256-entry bool table), up to ``width``
    (a run that reaches ``width`` reads as ``width``: the caller treats it as too long)."""
    n = np.zeros(len(at), dtype=np.int64)
    live = np.ones(len(at), dtype=bool)
    for j in range(width):
        live &= allowed[a[at + j]]
        if not live.any():
            break
        n += live
    return n


def literal_at(scan: BlockScan, at: np.ndarray, text: bytes) -> np.ndarray:
    """Whether ``text`` starts at each offset (False past the block's end): the bytes from each
    offset read as one ``S{len}`` string and compared at once (``text`` holds no NUL)."""
    inside = at <= scan.n
    return inside & (scan.strings(len(text))[np.where(inside, at, scan.n)] == text)


def read_decimal(scan: BlockScan, at: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The plain decimal (``123``, ``968.35``) at each offset: (value, ok) (see :func:`read_decimal_end`)."""
    value, _, ok = read_decimal_end(scan, at)
    return value, ok


def read_decimal_end(scan: BlockScan, at: np.ndarray, any_after: bool = False) -> tuple[np.ndarray, np.ndarray,
                                                                                       np.ndarray]:
    """The plain decimal (``123``, ``968.35``) at each offset: (value, offset just after it, ok);
    ``any_after``: whatever byte follows (``6.3ms``), the caller checks the token's end.

    ``ok`` is False where the token (the bytes up to the first that cannot continue a number,
    ``[-+\\w.]``) is anything else (a sign, ``nan``, an exponent, over 15 digits): the caller reads
    those with ``float()``. The value is the digits as one integer divided by a power of ten, one
    correctly rounded division of exact numbers (15 digits stay under 2**53), so it equals ``float(token)``."""
    ip, nd = read_uint(scan.a, at, 17)
    dot = scan.a[at + nd] == ord(".")
    second = np.where(dot, at + nd + 1, at)
    fp, nf = read_uint(scan.a, second, 17)
    nf = np.where(dot, nf, 0)
    after = scan.a[np.where(dot, second + nf, at + nd)]
    ok = (nd >= 1) & (nd + nf <= 15) & ~(dot & (nf == 0) & (scan.a[second] == ord(".")))
    if not any_after:
        ok &= ~_WORDISH[after]
    mant = ip * _P10[nf] + np.where(dot, fp, 0)
    return mant / _P10[nf].astype(np.float64), np.where(dot, second + nf, at + nd), ok


# offsets in ``[YYYY-MM-DD HH:MM:SS``: the digits, and the separators between them
_DIGITS_AT = (1, 2, 3, 4, 6, 7, 9, 10, 12, 13, 15, 16, 18, 19)
_SEPS = {0: ord("["), 5: ord("-"), 8: ord("-"), 11: ord(" "), 14: ord(":"), 17: ord(":")}


def iso_stamps(a: np.ndarray, start: np.ndarray, end: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Prefixes ``a[start:end]`` of the form ``[YYYY-MM-DD HH:MM:SS(.fff)( TAG…)] ``: (seconds since
    the epoch, UTC as the log states it; offset where the tags start; ok). A prefix of another
    layout, or an impossible date, is not ok (the caller parses it with the general clock)."""
    ok = (end - start >= 22) & (a[np.maximum(end - 2, 0)] == ord("]")) & (a[np.maximum(end - 1, 0)] == ord(" "))
    for at, ch in _SEPS.items():
        ok &= a[start + at] == ch
    d = [a[start + k].astype(np.int64) - 48 for k in _DIGITS_AT]
    for x in d:
        ok &= (x >= 0) & (x <= 9)
    y = d[0] * 1000 + d[1] * 100 + d[2] * 10 + d[3]
    mo, dd, hh, mi, ss = (d[k] * 10 + d[k + 1] for k in (4, 6, 8, 10, 12))
    ok &= (mo >= 1) & (mo <= 12) & (dd >= 1) & (dd <= 31) & (hh < 24) & (mi < 60) & (ss < 62)
    c20 = a[start + 20]
    has_frac = c20 == ord(".")  # SGLANG_LOG_MS: ``.%03d``
    fval, nf = read_uint(a, start + 21, 9)
    nf = np.where(has_frac, nf, 0)
    ok &= (c20 == ord(" ")) | (c20 == ord("]")) | (has_frac & (nf >= 1))
    t = _days_from_civil(y, np.clip(mo, 1, 12), dd) * 86400 + hh * 3600 + mi * 60 + ss
    frac = np.where(nf > 0, fval / _P10[nf].astype(np.float64), 0.0)
    return t.astype(np.float64) + frac, start + np.where(has_frac, 21 + nf, 20), ok


def month_day_stamps(a: np.ndarray, start: np.ndarray, end: np.ndarray, year: int,
                     width: int = PAD) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Prefixes ``a[start:end]`` holding one month-day stamp ``MM-DD HH:MM:SS(.fff)`` (vLLM's datefmt)
    and no other ``-`` or ``/`` (so no other stamp layout the general clock would try first):
    (seconds since the epoch in ``year``, UTC as the log states it; offset of the stamp; ok). A prefix
    longer than ``width`` bytes, or of another form, is not ok (the caller parses it with the clock)."""
    n = len(start)
    ok = (end - start >= 14) & (end - start <= width)
    w = sliding_window_view(a, width)[np.where(ok, start, 0)]
    inside = np.arange(width) < (end - start)[:, None]
    dash = (w == ord("-")) & inside
    ok &= (dash.sum(axis=1) == 1) & ~((w == ord("/")) & inside).any(axis=1)
    s = np.where(ok, start + dash.argmax(axis=1) - 2, 0)
    ok &= s >= start
    before = a[np.maximum(s - 1, 0)]
    ok &= (s == start) | ~(((before >= 48) & (before <= 57)) | (before == ord("-")))
    ok &= (a[s + 5] == ord(" ")) & (a[s + 8] == ord(":")) & (a[s + 11] == ord(":")) & (s + 14 <= end)
    d = [a[s + k].astype(np.int64) - 48 for k in (0, 1, 3, 4, 6, 7, 9, 10, 12, 13)]
    for x in d:
        ok &= (x >= 0) & (x <= 9)
    mo, dd, hh, mi, ss = (d[k] * 10 + d[k + 1] for k in (0, 2, 4, 6, 8))
    ok &= (mo >= 1) & (mo <= 12) & (dd >= 1) & (dd <= 31) & (hh < 24) & (mi < 60) & (ss < 62)
    sep = a[s + 14]
    fval, nf = read_uint(a, s + 15, 9)
    nf = np.where((sep == ord(".")) | (sep == ord(",")), nf, 0)
    ok &= s + 15 + nf <= end  # a fraction the prefix cuts short: the clock reads what the prefix holds
    t = _days_from_civil(np.full(n, year, dtype=np.int64), np.clip(mo, 1, 12), dd) * 86400 \
        + hh * 3600 + mi * 60 + ss
    frac = np.where(nf > 0, fval / _P10[nf].astype(np.float64), 0.0)
    return t.astype(np.float64) + frac, s, ok


def _days_from_civil(y: np.ndarray, m: np.ndarray, d: np.ndarray) -> np.ndarray:
    """Days since 1970-01-01 of a proleptic Gregorian date (H. Hinnant's algorithm, vectorised)."""
    y = y - (m <= 2)
    era = np.floor_divide(y, 400)
    yoe = y - era * 400
    mp = (m + 9) % 12
    doy = (153 * mp + 2) // 5 + d - 1
    doe = yoe * 365 + yoe // 4 - yoe // 100 + doy
    return era * 146097 + doe - 719468
