"""Cutting the ``traceEvents`` text into pieces at event boundaries, and decoding one piece.

A piece ends after the last complete event of the text read so far (:func:`_event_texts`); a wrong
cut cannot decode (a string or object would be left open), so it is never silently accepted.
:func:`_add_text` reads one piece into a column builder: the C scan when it takes the text, else
msgspec in stretches of :data:`SUB_PIECE_BYTES`. Runs of whitespace between values are dropped as
they stream by, and texts denser than :data:`MIN_EVENT_BYTES` per event are refused (bombs).
"""

from __future__ import annotations

from typing import Any, Iterable, Iterator

import msgspec
import numpy as np

from .._io import (mb_text)
from .columns import _ColumnBuilder
from . import scan


class _NotStreamable(Exception):
    """The text cannot be cut into event pieces (layout not recognised, or invalid JSON)."""


class _NotStrict(Exception):
    """An event breaks the strict schema's types; the lenient schema must read the file."""


_WS = frozenset(b" \t\r\n")


_KEY = b'"traceEvents"'


# Look this far for the start of traceEvents; past it the file is decoded whole.
_HEADER_LIMIT = 64 * 1024 * 1024


# Candidate cuts tried per piece, so text full of "{" cannot make the search quadratic.
_MAX_CUT_TRIES = 10_000


#: Longest stretch of traceEvents text read on without a place to cut it (whitespace between
#: values aside): one event or one non-event value this long is not a trace to read piecewise.
MAX_UNCUT_BYTES = 128 * 1024 * 1024


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


def _event_texts(pieces: Iterable[bytes], first: list[bytes], first_at: int, plain: bool,
                 ) -> Iterator[tuple[bool, list, int]]:
    """The traceEvents text cut at event boundaries, as ``(is_tail, parts, offset)``.

    Event texts come first, in file order: ``parts`` joined are whole events (``[`` + it + ``]``
    decodes as a list). Last comes the tail (``is_tail``): the text after the last cut, which
    closes the array and the document. ``offset`` is where the parts lie in the file, when they
    are one stretch of a plain (not gzip) file, else -1: a worker can then read them itself.

    ``first`` holds the text just after the array's ``[`` (at ``first_at`` in the content), taken out
    of it when read, so that no one holds that piece past its use (8 MiB for the whole stream). A piece
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
    for data in _first_then(first, pieces):
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


def _first_then(first: list[bytes], pieces: Iterable[bytes]) -> Iterator[bytes]:
    """The piece in ``first`` (taken out of it), then ``pieces``."""
    yield first.pop()
    yield from pieces


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
    if cols.strict and scan._SCAN is not None:
        # The C scan reads the whole text to columns, or declines (None) wherever it cannot be sure to
        # read it exactly as msgspec would; then msgspec decodes it, below. At most one event per
        # MIN_EVENT_BYTES: a denser text is declined, and msgspec's path reports it.
        scanned = scan._SCAN(text, n // MIN_EVENT_BYTES + 16)
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
