"""Serving engines' own logs and ``/metrics`` scrapes: one reader per engine, one result type.

:func:`read_server_file` reads one file (plain or gzipped) into a
:class:`~launchgap.serverlogs._base.ServerLog`; what it is comes from its content, never its name
(:func:`detect`): the engines' format strings in the first MiB (weighted cues per engine module,
``CUES``), else in the whole file; a Prometheus text exposition whose metric names carry an
engine's prefix. Readers stream the file in pieces with bounded memory
(:mod:`launchgap.serverlogs._base`). The diagnosis from a log is :mod:`launchgap.serverlogs.diagnosis`.

Engine modules (one per engine, as :mod:`launchgap.engines` is for traces): :mod:`.vllm`,
:mod:`.sglang`, :mod:`.tensorrt_llm`; metrics: :mod:`.prometheus`.

Refused, with one line naming the file: binary content, an empty file, a file with no line any
reader recognises.
"""
from __future__ import annotations

from pathlib import Path

from ..engines import LABELS
from ..errors import InputError
from ..loaders import expand_paths
from . import prometheus, sglang, tensorrt_llm, vllm
from ._scan import BlockScan
from ._base import ENGINES, KINDS, CaptureEvent, ForwardTime, ServerLog, count_bad_text, iter_blocks, sniff

READERS = {m.ENGINE: m for m in (vllm, sglang, tensorrt_llm)}
#: A log is taken as an engine's when its cues weigh at least this much.
MIN_SCORE = 3

__all__ = ["ENGINES", "KINDS", "CaptureEvent", "ForwardTime", "ServerLog", "detect", "is_server_file",
           "for_server_reader", "merge_scrapes", "read_server_file", "split_inputs"]


def _scores(text: bytes) -> dict[str, int]:
    return {name: sum(w * min(text.count(cue), 20) for cue, w in mod.CUES) for name, mod in READERS.items()}


def detect(path: Path, head: bytes | None = None) -> tuple[str, str] | None:
    """(engine, kind) of a file from its content, or None. ``head``: its sniffed first MiB."""
    head = sniff(path) if head is None else head
    engine = prometheus.looks_like_metrics(head)
    if engine is not None:
        return engine, "metrics"
    scores = _scores(head)
    best = max(scores, key=scores.get)
    if scores[best] >= MIN_SCORE:
        return best, "log"
    total = dict.fromkeys(scores, 0)
    for block in iter_blocks(path):  # no cue up front: look through the whole file once
        for k, v in _scores(block).items():
            total[k] += v
    best = max(total, key=total.get)
    return (best, "log") if total[best] >= MIN_SCORE else None


def is_server_file(path: Path) -> bool:
    """Whether ``path`` holds a server log or metrics scrape (its first MiB says so); never raises."""
    try:
        head = sniff(path)
    except (InputError, OSError):
        return False
    if _is_json(head):  # a Kineto trace quoting engine names, never a log
        return False
    if prometheus.looks_like_metrics(head) is not None:
        return True
    scores = _scores(head)
    return max(scores.values()) >= MIN_SCORE


#: Names of logs and scrapes: whatever their content, their errors come from the server-log readers
#: (a binary ``server.log`` is "binary content", not "not a trace").
LOG_SUFFIXES = (".log", ".log.gz", ".txt", ".txt.gz", ".out", ".out.gz", ".prom", ".prom.gz", ".metrics")
#: Names the trace loaders read; a file so named goes to them unless its content is a server log.
TRACE_SUFFIXES = (".json", ".json.gz", ".sqlite", ".nsys-rep", ".pt.trace.json", ".gz")


def split_inputs(paths: list[str]) -> tuple[list[Path], list[Path], list[str]]:
    """(server files given, server files found in directories, the other paths) among inputs, by content.

    A file is a server file when its first MiB holds an engine's log cues or metrics, or when it
    is text not named like a trace (so its error names what was looked for). A directory gives
    the files whose content looks like a server log (read with ``optional``: one that turns out
    to hold no record, such as a README quoting a log line, is passed over) and stays among the
    other paths when it holds anything else."""
    server: list[Path] = []
    in_dirs: list[Path] = []
    rest: list[str] = []
    for raw in paths:
        p = Path(raw)
        if p.is_dir():
            files = sorted(f for f in p.rglob("*") if f.is_file() and not f.name.startswith("."))
            found = [f for f in files if not f.name.lower().endswith(TRACE_SUFFIXES[:4]) and is_server_file(f)]
            in_dirs += found
            if not found:
                rest.append(raw)  # the trace loaders' own directory rule (and its error when empty)
                continue
            try:  # the directory's traces, as the loaders pick them, without its server files
                traces = [f for f in expand_paths([p]) if f not in set(found)]
            except InputError:
                traces = []
            rest += [str(f) for f in traces]
        elif p.is_file() and for_server_reader(p):
            server.append(p)
        else:
            rest.append(raw)
    return server, in_dirs, rest


def for_server_reader(path: Path, name: str | None = None) -> bool:
    """Whether a given file goes to the server-log readers: its content is a server log or scrape, it
    is named like a log (:data:`LOG_SUFFIXES`), or it is text not named like a trace (``name``: the
    name the user gave it, default the path's); so its error names what was looked for."""
    low = (name or path.name).lower()
    if is_server_file(path) or low.endswith(LOG_SUFFIXES):
        return True
    return not low.endswith(TRACE_SUFFIXES) and _is_text(path)


def _is_text(path: Path) -> bool:
    try:
        head = sniff(path)
    except (InputError, OSError):
        return False
    return not _is_json(head)


def _is_json(head: bytes) -> bool:
    """JSON text (an object, or an array of objects), not a log whose lines start with ``[time]``."""
    h = head.lstrip()
    return h[:1] == b"{" or (h[:1] == b"[" and h[1:].lstrip()[:1] in (b"{", b"]", b""))


def read_server_file(path: str | Path, optional: bool = False) -> ServerLog | None:
    """Read one server log or metrics scrape (see the module text); ``optional`` (a file found in a
    directory): None instead of an error when nothing in it is a server record."""
    p = Path(path)
    if not p.is_file():
        raise InputError("no such file", str(path))
    found = detect(p)
    if found is None and optional:
        return None
    if found is None:
        raise InputError("no vLLM, SGLang or TensorRT-LLM log line or metric in it", str(path))
    engine, kind = found
    if kind == "metrics":
        return prometheus.read_metrics(p, engine)
    log_files = [str(path)]
    reader = READERS[engine].Reader(str(path))
    lines = bad = 0
    for block in iter_blocks(p):
        scan = BlockScan(block)
        lines += len(scan.newlines)
        bad += count_bad_text(block)
        reader.feed_scan(scan)
        del scan, block  # the next piece is read before this one would be freed
    log = reader.finish()
    log.files = log_files
    log.lines = lines
    log.skipped_lines += bad
    if log.recognised_lines == 0:
        if optional:
            return None
        raise InputError(f"neither a {LABELS[engine]} log line nor a /metrics scrape it could read (the engine's name "
                         "appears; a scrape's lines are Prometheus samples, # HELP / # TYPE comments and time stamps)",
                         str(path))
    return log


def merge_scrapes(logs: list[ServerLog]) -> list[ServerLog]:
    """``logs`` with every engine's scrape files merged into one time series (at the place of its first
    file; :func:`~launchgap.serverlogs.prometheus.merge_metrics`): scrapes of one server taken over time
    into several files read as one. Scrapes naming other models (``model_name``) are other servers: never one
    series. Logs pass through as they are."""
    groups: dict[tuple[str, tuple[str, ...]], list[ServerLog]] = {}
    for lg in logs:
        if lg.kind == "metrics":
            groups.setdefault((lg.engine, tuple(sorted(lg.models))), []).append(lg)
    out: list[ServerLog] = []
    for lg in logs:
        key = (lg.engine, tuple(sorted(lg.models)))
        if lg.kind != "metrics":
            out.append(lg)
        elif groups.get(key) and groups[key][0] is lg:
            out.append(prometheus.merge_metrics(groups[key]))
    return out
