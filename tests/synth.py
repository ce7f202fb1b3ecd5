"""Scaled-up Kineto traces for the benchmark, built from one real trace.

The source's events (up to its trailing metadata: ``ph: M`` process/thread names, the
profiler span) are repeated back to back. Each copy is shifted as text, so the output
keeps Kineto's own layout and number formatting:

* ``ts`` by a whole number of microseconds (the source span plus 1 ms), so copies follow
  each other in time and never overlap;
* ``correlation`` and the ``ac2g`` flow ``id`` by the source's correlation range, so each
  launch still joins exactly its own kernels;
* ``External id`` by its range, so HTA's CPU-op <-> runtime links stay one-to-one;
* the N of ``ProfilerStep#N`` by the number of steps, so step numbers keep increasing
  (HTA drops the last profiler step by its number).

Steps (``ProfilerStep#N`` / ``decode_step[bs=N]`` annotations) are copied too, so a copy
is a few more decode steps of the same shape. The trailing metadata is written once.
"""
from __future__ import annotations

import gzip
import json
import math
import re
import zlib
from pathlib import Path

#: The real trace the benchmark scales up (relative to the project root).
DEFAULT_SOURCE = Path(__file__).resolve().parents[1] / "traces" / "h200-1b" / "1b_bs8_eager.json.gz"

_FIELD = re.compile(r'(?:"(ts|correlation|External id|id)": |(ProfilerStep)#)(\d+)')
_ARRAY_OPEN = '"traceEvents": ['


def _split_source(text: str) -> tuple[str, str, str, str]:
    """(header up to and including ``[``, repeated events, trailing events, closing text)."""
    start = text.index(_ARRAY_OPEN) + len(_ARRAY_OPEN)
    close = text.rindex("]")  # the traceEvents array is the last top-level value but traceName
    close = text.rindex("]", 0, text.index('"traceName"')) if '"traceName"' in text else close
    body = text[start:close]
    first_meta = body.find('"ph": "M"')
    if first_meta < 0:
        return text[:start], body.rstrip().rstrip(","), "", text[close:]
    cut = body.rindex("\n  {", 0, first_meta)
    events = body[:cut].rstrip().rstrip(",")
    return text[:start], events, body[cut:], text[close:]


def _template(events: str) -> tuple[list[str], list[str], list[int]]:
    """Literal pieces, the key of each number between them, and the numbers themselves."""
    pieces: list[str] = []
    keys: list[str] = []
    values: list[int] = []
    pos = 0
    for m in _FIELD.finditer(events):
        pieces.append(events[pos:m.start(3)])
        keys.append(m.group(1) or m.group(2))
        values.append(int(m.group(3)))
        pos = m.end(3)
    pieces.append(events[pos:])
    return pieces, keys, values


def _ranges(events: str, keys: list[str], values: list[int]) -> dict[str, int]:
    """Shift per copy for each field: its span (ts: plus the last event's duration and 1 ms)."""
    by_key: dict[str, list[int]] = {}
    for k, v in zip(keys, values):
        by_key.setdefault("correlation" if k == "id" else k, []).append(v)
    durs = [float(d) for d in re.findall(r'"dur": ([0-9.]+)', events)]
    ts = by_key["ts"]
    shift = {
        "ts": (max(ts) - min(ts)) + math.ceil(max(durs, default=0.0)) + 1000,
        "correlation": max(by_key.get("correlation", [0])) - min(by_key.get("correlation", [0])) + 1,
        "External id": max(by_key.get("External id", [0])) - min(by_key.get("External id", [0])) + 1,
        "ProfilerStep": max(by_key.get("ProfilerStep", [0])) - min(by_key.get("ProfilerStep", [0])) + 1,
    }
    shift["id"] = shift["correlation"]
    return shift


def meta_path(trace: Path) -> Path:
    return trace.with_name(trace.name + ".meta.json")


def scaled_trace(target_mb: float, out_dir: Path, *, source: Path = DEFAULT_SOURCE, gz: bool = False) -> Path:
    """Path of a trace of about ``target_mb`` MB (1e6 bytes) of JSON text, built once and cached.

    ``gz`` writes it gzip-compressed (level 6); the size target is always the JSON text.
    Beside it, ``<name>.meta.json`` holds ``json_bytes`` (the JSON text), ``file_bytes``,
    ``events`` (entries of traceEvents) and ``copies``.
    """
    out_dir.mkdir(parents=True, exist_ok=True)
    name = f"{source.name.split('.')[0]}_x{target_mb:g}MB.json" + (".gz" if gz else "")
    out = out_dir / name
    if out.exists() and meta_path(out).exists():
        return out
    text = gzip.decompress(source.read_bytes()).decode() if source.suffix == ".gz" else source.read_text()
    head, events, tail, close = _split_source(text)
    pieces, keys, values = _template(events)
    shift = _ranges(events, keys, values)
    fixed = len(head) + len(tail) + len(close)
    copies = max(1, round((target_mb * 1e6 - fixed) / (len(events) + 2)))
    tmp = out.with_name(out.name + ".tmp")
    opener = (lambda p: gzip.open(p, "wb", compresslevel=6)) if gz else (lambda p: open(p, "wb"))
    written = 0
    with opener(tmp) as fh:
        written += fh.write(head.encode())
        for c in range(copies):
            parts = [pieces[0]]
            for key, value, piece in zip(keys, values, pieces[1:]):
                parts.append(str(value + c * shift[key]))
                parts.append(piece)
            written += fh.write((("," if c else "") + "".join(parts)).encode())
        written += fh.write(("," + tail if tail.strip() else "\n").encode())
        written += fh.write(close.encode())
    per_copy = len(json.loads("[" + events + "]"))
    trailing = len(json.loads("[" + tail.strip().rstrip(",") + "]")) if tail.strip() else 0
    tmp.rename(out)
    meta = {"source": str(source), "json_bytes": written, "file_bytes": out.stat().st_size,
            "events": per_copy * copies + trailing, "copies": copies, "gzip": gz}
    meta_path(out).write_text(json.dumps(meta, indent=1))
    return out


def trace_meta(trace: Path) -> dict:
    """The sidecar facts :func:`scaled_trace` wrote for ``trace``."""
    return json.loads(meta_path(trace).read_text())


def gzip_bomb(path: Path, inflated: int, head: bytes = b'{"traceEvents": [', tail: bytes = b"]}",
              fill: bytes = b" ") -> Path:
    """``head`` + about ``inflated`` bytes of ``fill`` repeated + ``tail``, gzip level 1 (as ``gzip -1``),
    built in 1 MiB pieces: a few kB of gzip per hundred MB of whitespace (a decompression bomb)."""
    comp = zlib.compressobj(1, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    block = fill * ((1 << 20) // len(fill))
    with open(path, "wb") as fh:
        fh.write(comp.compress(head))
        for _ in range(inflated // len(block)):
            fh.write(comp.compress(block))
        fh.write(comp.compress(tail))
        fh.write(comp.flush())
    return path
