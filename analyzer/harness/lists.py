"""Batch-size lists on the command line: sweep sizes, capture-list presets, named lists.

Standard library only. Sizes: ``8``, ``1-256`` (powers of two from 1 to 256), ``1..64``
(every size), ``8..256:8`` (every 8th), comma-separated. Capture lists: a preset name
(:func:`preset_sizes`), ``NAME=SIZES`` (a named explicit list) or ``SIZES`` (named by its text).
"""
from __future__ import annotations

import re
from collections.abc import Iterator, Sequence

from ..errors import InputError

#: Named capture lists (``N`` is any positive integer):
#: ``pow2-N`` 1, 2, 4, ... up to N; ``all-A-B`` every size A..B; ``single-N`` just N;
#: ``vllm-default`` 1, 2, 4 then steps of 8 up to 256 (vLLM's default list when its maximum
#: is 256; ``vllm-default-N`` cuts it at N, continuing in steps of 16 above 256 as vLLM does).
PRESET_EXAMPLES = ("pow2-128", "vllm-default", "all-1-128", "single-128")

_PRESET_RE = re.compile(r"^(?:pow2-(\d+)|all-(\d+)-(\d+)|single-(\d+)|vllm-default(?:-(\d+))?)$")
_MAX_SIZE = 1 << 16


def preset_sizes(name: str) -> list[int] | None:
    """The sizes of a preset capture list, or ``None`` if ``name`` is not a preset."""
    m = _PRESET_RE.match(name.strip())
    if not m:
        return None
    pow2, lo, hi, single, vtop = m.groups()
    if pow2 is not None:
        top = _bounded(int(pow2), name)
        sizes, b = [], 1
        while b <= top:
            sizes.append(b)
            b *= 2
        return sizes
    if lo is not None:
        a, z = int(lo), _bounded(int(hi), name)
        if a < 1 or z < a:
            raise InputError(f"capture list {name!r}: expected all-A-B with 1 <= A <= B")
        return list(range(a, z + 1))
    if single is not None:
        return [_bounded(int(single), name)]
    top = 256 if vtop is None else _bounded(int(vtop), name)
    sizes = [1, 2, 4] + list(range(8, 257, 8)) + list(range(272, top + 1, 16))
    return [s for s in sizes if s <= top] or [1]


def _bounded(v: int, name: str) -> int:
    if not 1 <= v <= _MAX_SIZE:
        raise InputError(f"capture list {name!r}: sizes must lie in 1..{_MAX_SIZE}")
    return v


def iter_batch_sizes(text: str) -> Iterator[int]:
    """Parse ``1,2,4``, power-of-two ranges ``1-256``, every-size ranges ``1..64`` and ``8..256:8``."""
    for part in text.split(","):
        part = part.strip()
        if not part:
            continue
        try:
            if ".." in part:
                span, _, step_s = part.partition(":")
                lo_s, hi_s = span.split("..", 1)
                lo, hi, step = int(lo_s), int(hi_s), int(step_s) if step_s else 1
                if lo <= 0 or hi < lo or step <= 0 or hi > _MAX_SIZE:
                    raise ValueError
                yield from range(lo, hi + 1, step)
            elif "-" in part:
                lo_s, hi_s = part.split("-", 1)
                lo, hi = int(lo_s), int(hi_s)
                if lo <= 0 or hi < lo or hi > _MAX_SIZE:
                    raise ValueError
                b = lo
                while b <= hi:
                    yield b
                    b *= 2
            else:
                v = int(part)
                if not 0 < v <= _MAX_SIZE:
                    raise ValueError
                yield v
        except ValueError:
            raise InputError(f"bad batch size {part!r}: use integers like 1,2,4, a power-of-two range 1-256, "
                             "every size 1..64 or a stepped range 8..256:8") from None


def parse_batch_sizes(text: str) -> tuple[int, ...]:
    """Sorted distinct sizes of :func:`iter_batch_sizes`; :class:`InputError` when there are none."""
    sizes = sorted(set(iter_batch_sizes(text)))
    if not sizes:
        raise InputError(f"no positive batch sizes in {text!r}")
    return tuple(sizes)


def parse_capture_list(text: str) -> tuple[str, list[int]]:
    """One capture list: ``PRESET``, ``NAME=SIZES``, ``NAME=PRESET`` or ``SIZES``; returns (name, sizes)."""
    text = text.strip()
    name, eq, body = text.partition("=")
    if not eq:
        name, body = text, text
    name, body = name.strip(), body.strip()
    if not name or not re.fullmatch(r"[A-Za-z0-9_.,:+-]+", name):
        raise InputError(f"capture list name {name!r}: use letters, digits and _ . , : + -")
    sizes = preset_sizes(body)
    if sizes is None:
        sizes = list(parse_batch_sizes(body))
    return name, sorted(set(sizes))


def parse_capture_lists(values: Sequence[str]) -> list[tuple[str, list[int]]]:
    """``--capture-lists`` occurrences: each is comma-separated preset names, or one list for
    :func:`parse_capture_list` (``1,2,4,8``, ``mine=4,8,16``). Later duplicates of a name are dropped."""
    out: dict[str, list[int]] = {}
    for value in values:
        parts = [p.strip() for p in value.split(",") if p.strip()]
        named = "=" in value
        unknown = [p for p in parts if not named and any(c.isalpha() for c in p) and preset_sizes(p) is None]
        if unknown:
            raise InputError(f"--capture-lists {value!r}: unknown preset {unknown[0]!r}; presets are "
                             f"{', '.join(PRESET_EXAMPLES)} (and pow2-N, all-A-B, single-N, vllm-default-N)")
        if parts and not named and all(preset_sizes(p) is not None for p in parts):
            items = [(p, preset_sizes(p) or []) for p in parts]
        else:
            items = [parse_capture_list(value)]
        for name, sizes in items:
            out.setdefault(name, sizes)
    if not out:
        raise InputError("no capture list given")
    return list(out.items())


def file_tag(name: str) -> str:
    """A capture-list name made safe for a file name (``1,2,4`` -> ``1-2-4``), at most 48 characters."""
    tag = re.sub(r"[^A-Za-z0-9_.]+", "-", name).strip("-.") or "list"
    return tag[:48]
