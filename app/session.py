"""Each browser session's own traces, and the shared parse/analysis cache behind them.

A session holds its :class:`LoadedTrace` entries in its Streamlit session state (passed
in here as a plain mapping, so the functions are testable without a server). Entries
hold strong references to their parsed trace and report, so re-rendering never
re-parses; when the session ends they go with it, and only the bounded server cache
(:mod:`app.cache`) may still hold the parsed data, keyed by content hash.

Uploads are written to a private temporary file only for the duration of the parse
(the loaders take paths) and deleted right after; the cached trace carries the content
hash as its path, never the uploader's file name.
"""
from __future__ import annotations

import dataclasses
import hashlib
import logging
import os
import tempfile
from collections.abc import Callable, MutableMapping
from dataclasses import dataclass
from pathlib import Path

from launchgap.errors import AnalyzerError
from launchgap.loaders import load_trace
from launchgap.ranks import analyze_with_collectives
from launchgap.report import AnalysisOptions, TraceReport
from launchgap.trace import Trace
from launchgap.dashboard.cache import BoundedCache
from launchgap.dashboard.settings import Settings

log = logging.getLogger("launchgap.app")

#: Session-state keys this module owns.
TRACES_KEY = "lg_traces"
OPTIONS_KEY = "lg_options"
SEEN_UPLOADS_KEY = "lg_seen_uploads"
STARTED_KEY = "lg_started"

_UPLOAD_SUFFIXES = (".json.gz", ".json", ".gz", ".sqlite")


@dataclass(frozen=True)
class LoadedTrace:
    """One trace a session loaded, or failed to load (``error`` set, no trace/report)."""

    key: str
    name: str
    source: str  # "sample" | "upload"
    digest: str
    size_bytes: int
    trace: Trace | None = None
    report: TraceReport | None = None
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.error is None and self.report is not None


def content_digest(data: bytes | bytearray | memoryview) -> str:
    """SHA-256 of the bytes, hex."""
    return hashlib.sha256(data).hexdigest()


def file_digest(path: Path, chunk_bytes: int = 8 * 1024 * 1024) -> str:
    """SHA-256 of a file's bytes, read in chunks."""
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        while block := fh.read(chunk_bytes):
            h.update(block)
    return h.hexdigest()


def error_line(exc: BaseException) -> str:
    """One line for the user: the analyzer's own message, or a plain note for anything else."""
    if isinstance(exc, AnalyzerError):
        text = exc.message
    elif isinstance(exc, MemoryError):
        text = "out of memory while parsing; split the trace or lower the trace size cap"
    else:
        text = f"internal error while analysing this file ({type(exc).__name__}); please report it"
    return " ".join(str(text).split())


def _parse_path(path: Path, digest: str, settings: Settings, cache: BoundedCache) -> Trace:
    key = ("trace", digest, settings.max_trace_bytes)

    def compute() -> Trace:
        trace = load_trace(path, settings.max_trace_bytes)
        return dataclasses.replace(trace, path=f"sha256:{digest[:16]}")

    return cache.get_or_compute(key, compute)


def _suffix_of(name: str) -> str:
    low = name.lower()
    return next((s for s in _UPLOAD_SUFFIXES if low.endswith(s)), "")


def parse_upload(data: bytes | memoryview, digest: str, name: str, settings: Settings, cache: BoundedCache) -> Trace:
    """Parse uploaded bytes (through the cache). The bytes live on disk only during the parse."""
    hit = cache.get(("trace", digest, settings.max_trace_bytes))
    if hit is not None:
        return hit
    fd, tmp = tempfile.mkstemp(prefix="launchgap-upload-", suffix=_suffix_of(name))
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        return _parse_path(Path(tmp), digest, settings, cache)
    finally:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass


def analyze_cached(trace: Trace, digest: str, options: AnalysisOptions, cache: BoundedCache) -> TraceReport:
    """The report of a parsed trace under ``options`` (through the cache).

    Collectives' waits for peers are split out (cause ``peer``) from the trace alone, exactly
    as ``launchgap analyze`` does for a lone file, so a tensor-parallel rank spinning in NCCL
    is not called GPU-bound; a trace without collectives gets the plain report.
    """
    return cache.get_or_compute(("report", digest, options), lambda: analyze_with_collectives(trace, options))


def traces(state: MutableMapping) -> dict[str, LoadedTrace]:
    """The session's entries (insertion order), created empty on first use."""
    if TRACES_KEY not in state:
        state[TRACES_KEY] = {}
    return state[TRACES_KEY]


def options(state: MutableMapping) -> AnalysisOptions:
    if OPTIONS_KEY not in state:
        state[OPTIONS_KEY] = AnalysisOptions()
    return state[OPTIONS_KEY]


def loaded_ok(state: MutableMapping) -> list[LoadedTrace]:
    """Entries with a report, in load order."""
    return [t for t in traces(state).values() if t.ok]


def _limit_error(state: MutableMapping, settings: Settings) -> str | None:
    n = len(traces(state))
    if n >= settings.session_traces:
        return f"this session already holds {n} traces (limit {settings.session_traces}); remove some first"
    return None


def _finish(state: MutableMapping, key: str, name: str, source: str, digest: str, size: int,
            load: Callable[[], Trace], settings: Settings, cache: BoundedCache) -> LoadedTrace:
    limit = _limit_error(state, settings)
    if limit:
        entry = LoadedTrace(key=key, name=name, source=source, digest=digest, size_bytes=size, error=limit)
    else:
        try:
            trace = load()
            report = analyze_cached(trace, digest, options(state), cache)
            entry = LoadedTrace(key=key, name=name, source=source, digest=digest, size_bytes=size,
                                trace=trace, report=report)
        except Exception as exc:  # noqa: BLE001 - one bad file must not stop the others loading
            if not isinstance(exc, AnalyzerError):
                log.exception("analysing %s failed", name)
            entry = LoadedTrace(key=key, name=name, source=source, digest=digest, size_bytes=size,
                                error=error_line(exc))
    traces(state)[key] = entry
    return entry


def add_upload(state: MutableMapping, name: str, data: bytes | memoryview, settings: Settings,
               cache: BoundedCache) -> LoadedTrace:
    """Parse and analyse an uploaded file into the session (a repeat of the same bytes and name is kept once)."""
    digest = content_digest(data)
    key = f"upload:{digest[:16]}:{name}"
    have = traces(state).get(key)
    if have is not None:
        return have
    return _finish(state, key, name, "upload", digest, memoryview(data).nbytes,
                   lambda: parse_upload(data, digest, name, settings, cache), settings, cache)


def sample_key(rel: str) -> str:
    return f"sample:{rel}"


def add_sample(state: MutableMapping, path: Path, settings: Settings, cache: BoundedCache) -> LoadedTrace:
    """Parse and analyse a bundled sample into the session (by its path relative to the samples folder)."""
    rel = path.relative_to(settings.samples_dir).as_posix()
    key = sample_key(rel)
    have = traces(state).get(key)
    if have is not None:
        return have
    try:
        digest = file_digest(path)
        size = path.stat().st_size
    except OSError as exc:
        entry = LoadedTrace(key=key, name=rel, source="sample", digest="", size_bytes=0,
                            error=f"cannot read the sample: {exc.strerror or exc}")
        traces(state)[key] = entry
        return entry
    return _finish(state, key, rel, "sample", digest, size,
                   lambda: _parse_path(path, digest, settings, cache), settings, cache)


def remove(state: MutableMapping, keys: list[str]) -> None:
    store = traces(state)
    for k in keys:
        store.pop(k, None)


def set_options(state: MutableMapping, new: AnalysisOptions, cache: BoundedCache) -> list[str]:
    """Re-analyse the session's traces under new options (no re-parse). Returns per-file errors."""
    errors: list[str] = []
    store = traces(state)
    results: dict[str, LoadedTrace] = {}
    for key, entry in store.items():  # one per loaded trace
        if entry.trace is None:
            results[key] = entry
            continue
        try:
            results[key] = dataclasses.replace(entry, report=analyze_cached(entry.trace, entry.digest, new, cache),
                                               error=None)
        except AnalyzerError as exc:
            errors.append(f"{entry.name}: {error_line(exc)}")
    if errors:
        return errors  # keep the old options and reports: the new ones do not fit every trace
    store.update(results)
    state[OPTIONS_KEY] = new
    return []


def parse_small_upload(name: str, data: bytes, parse: Callable[[Path], object]) -> object:
    """Run an analyzer file reader (distribution CSV/JSON, harness timings) on uploaded bytes.

    The bytes are written to a private temporary file for the call and deleted after it;
    ``parse`` raises :class:`AnalyzerError` for bad content (its path is the temp file, so
    callers show ``exc.message`` next to ``name``).
    """
    fd, tmp = tempfile.mkstemp(prefix="launchgap-aux-", suffix=_suffix_of(name) or ".txt")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        return parse(Path(tmp))
    finally:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
