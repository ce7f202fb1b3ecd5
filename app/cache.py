"""A bounded, thread-safe LRU cache for parsed traces, shared by the sessions of one server.

Streamlit's own caches bound entries and age but not bytes; a parsed trace can hold
hundreds of MB of arrays, so this cache bounds all three. Keys are content hashes (plus
the options that change the result), so a session can only get back an entry by
presenting the same bytes: nothing one session uploaded is reachable by name from
another. Values are shared, read-only objects (frozen dataclasses of numpy arrays).
"""
from __future__ import annotations

import sys
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Hashable
from dataclasses import fields, is_dataclass
from typing import Any, Generic, TypeVar

import numpy as np

V = TypeVar("V")


def approx_nbytes(obj: Any, _depth: int = 0) -> int:
    """Approximate memory of a value: numpy buffers, strings, and dataclass/list/dict members.

    Object arrays (interned names) count their strings too. Meant for cache accounting,
    not exact to the byte.
    """
    if _depth > 4:
        return 0
    if isinstance(obj, np.ndarray):
        if obj.dtype == object:
            return int(obj.nbytes) + sum(sys.getsizeof(x) for x in obj.tolist())
        return int(obj.nbytes)
    if isinstance(obj, (str, bytes, bytearray)):
        return sys.getsizeof(obj)
    if is_dataclass(obj) and not isinstance(obj, type):
        return sum(approx_nbytes(getattr(obj, f.name), _depth + 1) for f in fields(obj)) + 64
    if isinstance(obj, dict):
        return sum(approx_nbytes(k, _depth + 1) + approx_nbytes(v, _depth + 1) for k, v in obj.items()) + 64
    if isinstance(obj, (list, tuple)):
        return sum(approx_nbytes(x, _depth + 1) for x in obj) + 56
    return sys.getsizeof(obj)


class BoundedCache(Generic[V]):
    """LRU cache bounded by ``max_entries``, ``max_bytes`` and ``ttl_s`` (seconds since last use).

    An entry larger than ``max_bytes`` on its own is returned to the caller but not kept.
    ``clock`` is injectable for tests.
    """

    def __init__(self, max_entries: int, max_bytes: int, ttl_s: float,
                 clock: Callable[[], float] = time.monotonic) -> None:
        if max_entries <= 0 or max_bytes <= 0 or ttl_s <= 0:
            raise ValueError("cache bounds must be positive")
        self.max_entries = max_entries
        self.max_bytes = max_bytes
        self.ttl_s = ttl_s
        self._clock = clock
        self._lock = threading.Lock()
        self._items: OrderedDict[Hashable, tuple[V, int, float]] = OrderedDict()
        self._bytes = 0
        self.hits = 0
        self.misses = 0
        self.evictions = 0

    def __len__(self) -> int:
        with self._lock:
            return len(self._items)

    @property
    def nbytes(self) -> int:
        with self._lock:
            return self._bytes

    def _expire(self, now: float) -> None:
        stale = [k for k, (_, _, used) in self._items.items() if now - used > self.ttl_s]
        for k in stale:
            self._drop(k)

    def _drop(self, key: Hashable) -> None:
        _, size, _ = self._items.pop(key)
        self._bytes -= size
        self.evictions += 1

    def get(self, key: Hashable) -> V | None:
        with self._lock:
            now = self._clock()
            self._expire(now)
            item = self._items.get(key)
            if item is None:
                self.misses += 1
                return None
            self.hits += 1
            self._items[key] = (item[0], item[1], now)
            self._items.move_to_end(key)
            return item[0]

    def put(self, key: Hashable, value: V, nbytes: int | None = None) -> V:
        size = approx_nbytes(value) if nbytes is None else int(nbytes)
        with self._lock:
            now = self._clock()
            old = self._items.pop(key, None)
            if old is not None:
                self._bytes -= old[1]
            self._expire(now)
            if size > self.max_bytes:
                return value
            while self._items and (len(self._items) >= self.max_entries or self._bytes + size > self.max_bytes):
                self._drop(next(iter(self._items)))
            self._items[key] = (value, size, now)
            self._bytes += size
        return value

    def get_or_compute(self, key: Hashable, compute: Callable[[], V]) -> V:
        """The cached value, or ``compute()`` stored under ``key``. Errors are not cached."""
        hit = self.get(key)
        if hit is not None:
            return hit
        return self.put(key, compute())

    def clear(self) -> None:
        with self._lock:
            self._items.clear()
            self._bytes = 0
