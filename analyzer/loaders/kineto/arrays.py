"""Small numpy helpers of the column builders: integer columns, narrowing, interning by first appearance."""

from __future__ import annotations

from array import array

import numpy as np

from .schema import _as_int


def _int_column(values: list, n: int) -> np.ndarray:
    """int64 column of ints; anything else (or an int past int64) goes through :func:`_as_int`.

    ``array('q', ...)`` converts in C and refuses a str (numpy would parse ``"12"``) or an
    out-of-range int, so one call both checks and converts. (msgspec never gives a bool
    for the strict schema's int fields, which ``array`` would take as 0/1.)
    """
    try:
        return np.frombuffer(array("q", values), dtype=np.int64)
    except (TypeError, OverflowError):
        return np.fromiter(map(_as_int, values), dtype=np.int64, count=n)


_INT_TYPES = tuple((t, np.iinfo(t)) for t in (np.int8, np.int16, np.int32))


def _narrowest_int(values: np.ndarray) -> np.ndarray:
    """``values`` as the narrowest signed integer type that holds every one (itself if none is narrower)."""
    if values.size == 0:
        return values.astype(np.int8)
    lo, hi = int(values.min()), int(values.max())
    for t, info in _INT_TYPES:
        if info.min <= lo and hi <= info.max:
            return values if values.dtype == t else values.astype(t)
    return values


def _first_appearance(ids: np.ndarray) -> np.ndarray:
    """The distinct values of ``ids``, in the order they first appear."""
    uniq, first = np.unique(ids, return_index=True)
    return uniq[np.argsort(first)]


def _intern_local(local: np.ndarray, table: list[str], names: dict[str, int]) -> np.ndarray:
    """Ids in ``names`` (new texts added in first-appearance order) of indices into ``table``."""
    uniq = _first_appearance(local)
    remap = np.zeros(len(table), dtype=np.int32)
    remap[uniq] = [names.setdefault(table[i], len(names)) for i in uniq.tolist()]
    return remap[local]
