"""Reading files with a cap on decompressed size, shared by the loaders."""
from __future__ import annotations

import gzip
import zlib
from pathlib import Path

from analyzer.errors import TraceFormatError, TraceTooLargeError

#: Default cap on the decompressed bytes of one trace (``--max-trace-bytes``).
DEFAULT_MAX_TRACE_BYTES = 2 * 1024**3

GZIP_MAGIC = b"\x1f\x8b"
SQLITE_MAGIC = b"SQLite format 3\x00"
_CHUNK = 8 * 1024 * 1024


def read_head(path: Path, n: int = 64) -> bytes:
    """First ``n`` bytes of the file (compressed form), for sniffing the format."""
    with open(path, "rb") as fh:
        return fh.read(n)


def read_text_bytes(path: Path, max_bytes: int = DEFAULT_MAX_TRACE_BYTES) -> bytes | bytearray:
    """The file's content, gunzipped if it is gzip, refusing more than ``max_bytes``.

    The cap is checked while decompressing, so a decompression bomb costs at most
    ``max_bytes`` of memory. A truncated gzip stream is an error (JSON cut short
    cannot be analysed honestly).
    """
    head = read_head(path, 2)
    if head != GZIP_MAGIC:
        size = path.stat().st_size
        if size > max_bytes:
            raise TraceTooLargeError(
                f"file is {size / 1e6:.0f} MB, over the {max_bytes / 1e6:.0f} MB cap (--max-trace-bytes)", str(path)
            )
        return path.read_bytes()
    out = bytearray()
    try:
        with gzip.open(path, "rb") as fh:
            while True:
                chunk = fh.read(_CHUNK)
                if not chunk:
                    break
                out += chunk
                if len(out) > max_bytes:
                    raise TraceTooLargeError(
                        f"decompresses to more than {max_bytes / 1e6:.0f} MB, the cap (--max-trace-bytes)", str(path)
                    )
    except EOFError:
        raise TraceFormatError(
            f"truncated gzip stream: the file ends after {len(out) / 1e6:.1f} MB of data; re-copy or re-export it",
            str(path),
        ) from None
    except (OSError, zlib.error) as exc:
        raise TraceFormatError(f"corrupt gzip data ({exc})", str(path)) from None
    return out  # msgspec decodes a bytearray in place; bytes(out) would copy it
