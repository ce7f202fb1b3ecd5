"""Batch-size distribution files, standard library only (the GPU harness reads them too).

Formats: JSON ``{"8": 120, "16": 30}`` or CSV ``batch_size,count`` (header optional; blank
lines and ``#`` comments skipped; a header names the columns ``batch_size``/``bs``/``batch``
and ``count``/``steps``/``weight``/``n``/``frequency``, else the first two columns are used).
Repeated batch sizes add up. Bad content raises :class:`InputError` naming the file, the
line or key, and the reason.
"""
from __future__ import annotations

import json
import math
from pathlib import Path

from .errors import InputError
from .files import MAX_SMALL_FILE_BYTES, read_small_text

#: Refuse distribution files larger than this.
MAX_DISTRIBUTION_BYTES = MAX_SMALL_FILE_BYTES


def _bs(text: str, path: str, where: str) -> int:
    try:
        v = float(text)
    except ValueError:
        raise InputError(f"{where}: batch size {text!r} is not a number", path) from None
    if not math.isfinite(v) or v != int(v) or v < 1:
        raise InputError(f"{where}: batch size {text!r} is not a positive integer", path)
    return int(v)


def _count(value: object, path: str, where: str) -> float:
    try:
        v = float(value) if not isinstance(value, bool) else float("nan")  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise InputError(f"{where}: count {value!r} is not a number", path) from None
    if not math.isfinite(v) or v < 0:
        raise InputError(f"{where}: count {value!r} is not a non-negative number", path)
    return v


def _column(names: list[str], wanted: tuple[str, ...], path: str, lineno: int) -> int:
    for w in wanted:
        if w in names:
            return names.index(w)
    raise InputError(f"line {lineno}: header {','.join(names)!r} has no column named {' or '.join(wanted[:2])}",
                     path)


def parse_distribution(text: str, path: str = "distribution") -> dict[int, float]:
    """A histogram ``{batch_size: count}`` (sorted by size) from JSON or CSV text."""
    out: dict[int, float] = {}
    if text.lstrip().startswith(("{", "[")):
        try:
            doc = json.loads(text)
        except json.JSONDecodeError as exc:
            raise InputError(f"distribution file is not valid JSON ({exc.msg} at line {exc.lineno})", path) from None
        if not isinstance(doc, dict):
            raise InputError('JSON distribution must be an object {"batch_size": count, ...}', path)
        for k, v in doc.items():
            b = _bs(str(k), path, f"key {k!r}")
            out[b] = out.get(b, 0.0) + _count(v, path, f"key {k!r}")
    else:
        bs_col, n_col, header_seen = 0, 1, False
        for lineno, line in enumerate(text.splitlines(), 1):
            s = line.strip()
            if not s or s.startswith("#"):
                continue
            cells = [c.strip().strip('"') for c in s.split(",")]
            if not header_seen and not out and any(ch.isalpha() for ch in cells[0]):
                names = [c.lower() for c in cells]
                bs_col = _column(names, ("batch_size", "bs", "batch", "batchsize"), path, lineno)
                n_col = _column(names, ("count", "steps", "weight", "n", "frequency", "freq"), path, lineno)
                header_seen = True
                continue
            if len(cells) <= max(bs_col, n_col):
                raise InputError(f"line {lineno}: expected 'batch_size,count', got {s!r}", path)
            b = _bs(cells[bs_col], path, f"line {lineno}")
            out[b] = out.get(b, 0.0) + _count(cells[n_col], path, f"line {lineno}")
    if not out:
        raise InputError("distribution file holds no batch sizes", path)
    if sum(out.values()) <= 0:
        raise InputError("distribution counts are all zero", path)
    return dict(sorted(out.items()))


def load_distribution(path: str | Path) -> dict[int, float]:
    """Read a distribution file (see :func:`parse_distribution`) through the one capped small-file
    reader (:func:`launchgap.files.read_small_text`)."""
    return parse_distribution(read_small_text(path, "distribution", MAX_DISTRIBUTION_BYTES), str(path))
