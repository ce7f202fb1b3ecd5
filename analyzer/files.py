"""The one reader of small input files: timings, distributions, model configs, memory models.

Standard library only (the GPU harness reads timings and distributions through it). Every
file is read whole, after its size is checked against a cap, so a wrong or huge file costs a
one-line :class:`~launchgap.errors.InputError` naming the file and the reason, never unbounded
memory. Traces have their own streaming loaders (:mod:`launchgap.loaders`).
"""
from __future__ import annotations

import json
from pathlib import Path

from .errors import InputError

#: Refuse small input files larger than this (real ones are well under 1 MiB).
MAX_SMALL_FILE_BYTES = 64 << 20


def read_small_file(path: str | Path, what: str, max_bytes: int = MAX_SMALL_FILE_BYTES) -> bytes:
    """The bytes of a small input file (``what`` names its kind in messages: "timings", ...).

    :class:`InputError` naming the file when it is missing, a folder, over ``max_bytes``,
    unreadable or empty.
    """
    p = Path(path)
    try:
        size = p.stat().st_size
        if p.is_dir():
            raise InputError(f"is a folder, expected a {what} file", str(p))
        if size > max_bytes:
            raise InputError(f"{what} file is {size:,} bytes, over the {max_bytes >> 20} MiB cap", str(p))
        data = p.read_bytes()
    except FileNotFoundError:
        raise InputError("no such file", str(p)) from None
    except IsADirectoryError:
        raise InputError(f"is a folder, expected a {what} file", str(p)) from None
    except OSError as exc:
        raise InputError(f"cannot read ({exc.strerror or exc})", str(p)) from None
    if not data.strip():
        raise InputError(f"empty {what} file", str(p))
    return data


def read_small_text(path: str | Path, what: str, max_bytes: int = MAX_SMALL_FILE_BYTES) -> str:
    """:func:`read_small_file` decoded as UTF-8 (a byte-order mark is dropped)."""
    try:
        return read_small_file(path, what, max_bytes).decode("utf-8-sig")
    except UnicodeDecodeError:
        raise InputError(f"{what} file is not UTF-8 text", str(path)) from None


def read_json_file(path: str | Path, what: str, max_bytes: int = MAX_SMALL_FILE_BYTES) -> object:
    """:func:`read_small_text` parsed as JSON (``InputError`` naming the line of a syntax error)."""
    text = read_small_text(path, what, max_bytes)
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise InputError(f"{what} file is not valid JSON ({exc.msg} at line {exc.lineno})", str(path)) from None
