"""The process's heap: glibc keeps freed blocks resident until it is trimmed.

glibc raises its mmap threshold to the size of each large block freed (up to 32 MiB), so after the first
few pieces of a large trace the pieces, the per-piece columns and the analysis's column-long temporaries
all come from the heap, and a freed block stays resident (counted in the process's RSS) until the heap is
trimmed, even when it is never reused: about 90 MiB of a 1 GB trace's load, and as much again over its
analysis, was such blocks. ``malloc_trim(0)`` returns the free pages wherever they lie in the heap; the
loader and the analysis call :meth:`_Heap.trim` after each stage that frees tens of MiB (a few ms each).
A fixed mmap threshold (``mallopt``) would keep large blocks out of the heap from the start, but costs a
page fault per page of every piece: 1.5-1.8 s more system time on a 1 GB trace; and a freed block inside
the heap is reused first anyway. Elsewhere (no glibc) it does nothing. Standard library only.
"""
from __future__ import annotations


class _Heap:
    """glibc's allocator: :meth:`trim` gives the heap's free pages back to the system."""

    def __init__(self) -> None:
        self._trim = None
        try:
            import ctypes

            libc = ctypes.CDLL(None)
            if hasattr(libc, "malloc_trim") and hasattr(libc, "gnu_get_libc_version"):
                self._trim = libc.malloc_trim
        except (OSError, ImportError):  # pragma: no cover - not glibc, or no ctypes
            pass

    def trim(self) -> None:
        """Return the heap's free pages to the system."""
        if self._trim is not None:
            self._trim(0)


#: The process's allocator (see :class:`_Heap`).
HEAP = _Heap()
