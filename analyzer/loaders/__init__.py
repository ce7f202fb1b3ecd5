"""Input formats -> the same :class:`~launchgap.trace.Trace`.

The format is chosen by sniffing content (gzip/JSON vs SQLite), not by file name.
"""
from __future__ import annotations

from pathlib import Path

from ..errors import InputError, TraceFormatError
from ._io import DEFAULT_MAX_TRACE_BYTES, GZIP_MAGIC, SQLITE_MAGIC, read_head
from ..trace import Trace

__all__ = ["DEFAULT_MAX_TRACE_BYTES", "load_trace", "expand_paths", "sniff_format"]

_TRACE_SUFFIXES = (".json", ".json.gz", ".sqlite", ".nsys-rep", ".gz")


def sniff_format(path: Path) -> str:
    """``"kineto"``, ``"nsys"`` or ``"nsys-rep"`` from the first bytes; error for anything else."""
    head = read_head(path, 64)
    if not head:
        raise TraceFormatError("empty file", str(path))
    if head.startswith(SQLITE_MAGIC):
        return "nsys"
    if head.startswith(GZIP_MAGIC):
        return "kineto"
    if path.suffix == ".nsys-rep":
        return "nsys-rep"
    stripped = head.lstrip()
    if stripped[:1] in (b"{", b"["):
        return "kineto"
    if not stripped:
        raise TraceFormatError("file holds only whitespace", str(path))
    raise TraceFormatError(
        "not a trace: expected Kineto JSON (.json/.json.gz) or an Nsight Systems SQLite export", str(path)
    )


def load_trace(path: str | Path, max_bytes: int = DEFAULT_MAX_TRACE_BYTES) -> Trace:
    """Parse one trace file of any supported format."""
    p = Path(path)
    if not p.exists():
        raise InputError("no such file or directory", str(p))
    if p.is_dir():
        raise InputError("is a directory; pass the files in it or use expand_paths", str(p))
    fmt = sniff_format(p)
    if fmt == "kineto":
        from .kineto import load_kineto

        return load_kineto(p, max_bytes)
    from .nsys import load_nsys, load_nsys_rep

    if fmt == "nsys-rep":
        return load_nsys_rep(p, max_bytes)
    return load_nsys(p, max_bytes)


def _looks_like_trace(p: Path) -> bool:
    """Whether a file found in a directory is worth loading.

    Plain ``.json`` files beside traces are often timings or configs (``truth.json``,
    ``timings.json``): only those naming ``traceEvents`` in their first MiB are taken.
    """
    name = p.name.lower()
    if name.startswith(".") or not name.endswith(_TRACE_SUFFIXES):
        return False
    if name.endswith(".json"):
        with open(p, "rb") as fh:
            return b'"traceEvents"' in fh.read(1 << 20)
    return True


def expand_paths(paths: list[str | Path]) -> list[Path]:
    """Files to analyse: files as given, directories expanded (recursively) to the trace files in them."""
    out: list[Path] = []
    for raw in paths:
        p = Path(raw)
        if not p.exists():
            raise InputError("no such file or directory", str(p))
        if p.is_dir():
            found = sorted(f for f in p.rglob("*") if f.is_file() and _looks_like_trace(f))
            if not found:
                raise InputError("directory holds no trace files (.json, .json.gz, .sqlite, .nsys-rep)", str(p))
            out.extend(found)
        else:
            out.append(p)
    return out
