"""Reading files with a cap on decompressed size, shared by the loaders.

Two ways in: :func:`read_text_bytes` gives the whole content at once; :func:`iter_content`
gives it in pieces (gunzipped on the fly) so a loader can decode while the rest is still
being read, and :func:`read_ahead` runs that reading in a background thread. The inflater
(ISA-L where python-isal is installed, else zlib) and file reads release the GIL, so on a
machine with two cores decompression overlaps decoding.
"""
from __future__ import annotations

import queue
import threading
import zlib
from collections.abc import Iterator
from pathlib import Path

from ..errors import TraceFormatError, TraceTooLargeError
from ..heap import HEAP  # noqa: F401 (the loaders' trims: launchgap.heap)

try:  # ISA-L's inflate (python-isal): zlib's API, output and checks (CRC32, length) at about 3x the speed
    from isal import isal_zlib as _inflate

    _INFLATE_ERRORS: tuple[type[Exception], ...] = (zlib.error, _inflate.error)
except ImportError:  # no wheel for this platform: the standard library's zlib
    _inflate = zlib  # type: ignore[assignment]
    _INFLATE_ERRORS = (zlib.error,)

#: Default cap on the decompressed bytes of one trace (``--max-trace-bytes``).
DEFAULT_MAX_TRACE_BYTES = 8 * 1024**3

GZIP_MAGIC = b"\x1f\x8b"
SQLITE_MAGIC = b"SQLite format 3\x00"
#: Decompressed bytes per piece. Pieces bound the memory in flight, not the file size.
CHUNK_BYTES = 8 * 1024 * 1024
# Compressed bytes read per zlib call: large, so each call runs long without the GIL.
_COMPRESSED_BLOCK = 1024 * 1024


def read_head(path: Path, n: int = 64) -> bytes:
    """First ``n`` bytes of the file (compressed form), for sniffing the format."""
    with open(path, "rb") as fh:
        return fh.read(n)


def _too_large(path: Path, max_bytes: int) -> TraceTooLargeError:
    try:
        packed = f" (from {_mb(path.stat().st_size)} of gzip)"
    except OSError:
        packed = ""
    return TraceTooLargeError(
        f"decompresses to more than {_mb(max_bytes)}{packed}, the cap (--max-trace-bytes)", str(path)
    )


def iter_content(path: Path, max_bytes: int = DEFAULT_MAX_TRACE_BYTES,
                 chunk_bytes: int = CHUNK_BYTES) -> Iterator[bytes]:
    """The file's content in pieces of at most ``chunk_bytes``, gunzipped if it is gzip.

    More than ``max_bytes`` of content raises :class:`TraceTooLargeError` as soon as the
    cap is passed, so a decompression bomb costs at most one piece of memory beyond it.
    Concatenated gzip members are read as one stream (as ``gzip`` does); zero padding
    after the last member is ignored. A stream that ends early is a
    :class:`TraceFormatError` (JSON cut short cannot be analysed honestly), as is corrupt
    data or a failed CRC check.
    """
    if read_head(path, 2) != GZIP_MAGIC:
        size = path.stat().st_size
        if size > max_bytes:
            raise TraceTooLargeError(
                f"file is {_mb(size)}, over the {_mb(max_bytes)} cap (--max-trace-bytes)", str(path)
            )
        with open(path, "rb") as fh:
            while data := fh.read(chunk_bytes):
                yield data
        return
    yield from _gunzip(path, max_bytes, chunk_bytes)


def _gunzip(path: Path, max_bytes: int, chunk_bytes: int) -> Iterator[bytes]:
    total = 0
    # 16 + MAX_WBITS: a gzip wrapper; the inflater checks the trailer's CRC32 and length itself.
    dec = _inflate.decompressobj(16 + zlib.MAX_WBITS)
    with open(path, "rb") as fh:
        pending = b""
        at_eof = False
        while True:
            if not pending and not at_eof:
                pending = fh.read(_COMPRESSED_BLOCK)
                at_eof = not pending
            try:
                # Called with no input too: zlib may still hold output that max_length held back.
                # Never decompress far past the cap: a bomb then costs about the cap, not a whole piece more.
                out = dec.decompress(pending, max(1, min(chunk_bytes, max_bytes - total + 1)))
            except _INFLATE_ERRORS as exc:
                raise TraceFormatError(f"corrupt gzip data ({exc})", str(path)) from None
            pending = dec.unconsumed_tail
            if out:
                total += len(out)
                if total > max_bytes:
                    raise _too_large(path, max_bytes)
                yield out
            if dec.eof:
                # At the end of a member everything after it is in unused_data (unconsumed_tail
                # is left stale by zlib then, and must not be read again).
                rest = (dec.unused_data + (b"" if at_eof else fh.read())).lstrip(b"\x00")
                if not rest:
                    return
                if not rest.startswith(GZIP_MAGIC):
                    raise TraceFormatError("corrupt gzip data (garbage after the compressed stream)", str(path))
                dec = _inflate.decompressobj(16 + zlib.MAX_WBITS)  # the next gzip member
                pending, at_eof = rest, True
            elif at_eof and not pending and not out:
                raise TraceFormatError(
                    f"truncated gzip stream: the file ends after {total / 1e6:.1f} MB of data; re-copy or re-export it",
                    str(path),
                )


def read_text_bytes(path: Path, max_bytes: int = DEFAULT_MAX_TRACE_BYTES) -> bytes | bytearray:
    """The file's content, gunzipped if it is gzip, refusing more than ``max_bytes``.

    The cap is checked while decompressing, so a decompression bomb costs at most
    ``max_bytes`` of memory. A truncated gzip stream is an error (JSON cut short
    cannot be analysed honestly).
    """
    out = bytearray()
    for piece in iter_content(path, max_bytes):
        out += piece
    return out  # msgspec decodes a bytearray in place; bytes(out) would copy it


_DONE = object()




def read_ahead(pieces: Iterator[bytes], depth: int = 2) -> Iterator[bytes]:
    """Iterate ``pieces`` in a background thread, at most ``depth`` pieces ahead of the consumer.

    Exceptions raised while reading are re-raised in the consumer. Closing this iterator
    (or dropping it) stops the thread and closes ``pieces``.
    """
    q: queue.Queue = queue.Queue(maxsize=depth)
    stop = threading.Event()

    def put(item: object) -> bool:
        while not stop.is_set():
            try:
                q.put(item, timeout=0.05)
                return True
            except queue.Full:
                continue
        return False

    def pump() -> None:
        try:
            for piece in pieces:
                if not put(piece):
                    return
            put(_DONE)
        except BaseException as exc:  # handed to the consumer, which re-raises it
            put(exc)

    worker = threading.Thread(target=pump, name="launchgap-read-ahead", daemon=True)
    worker.start()
    try:
        while True:
            item = q.get()
            if item is _DONE:
                return
            if isinstance(item, BaseException):
                raise item
            yield item
    finally:
        stop.set()
        worker.join()
        close = getattr(pieces, "close", None)
        if close is not None:
            close()


def mb_text(n_bytes: int) -> str:
    """A byte count for messages: MB above 1 MB, else bytes (a 64 KiB cap is not "0 MB")."""
    return f"{n_bytes / 1e6:,.0f} MB" if n_bytes >= 1_000_000 else f"{n_bytes:,} bytes"


_mb = mb_text
