"""Each browser session's own traces, and the shared parse/analysis cache behind them.

A session holds its :class:`LoadedTrace` entries in its Streamlit session state (passed
in here as a plain mapping, so the functions are testable without a server). Entries
hold strong references to their parsed trace and report, so re-rendering never
re-parses; when the session ends they go with it, and only the bounded server cache
(:mod:`launchgap.dashboard.cache`) may still hold the parsed data, keyed by content hash.

Uploads are written to a private temporary file only for the duration of the parse
(the loaders take paths; in RAM-backed ``/dev/shm`` when it has room, see
:func:`launchgap.dashboard.uploads.staging_dir`; hashed while it is written) and deleted right after; the
cached trace carries the content hash as its path, never the uploader's file name. An upload is parsed and analysed in a child process
with a memory and a time limit (:mod:`launchgap.dashboard.worker`), so a huge file or a decompression bomb
costs its own session a one-line error and leaves the server and the other sessions alone.
"""
from __future__ import annotations

import dataclasses
import hashlib
import logging
import os
import tempfile
import threading
from collections.abc import Callable, MutableMapping
from dataclasses import dataclass
from pathlib import Path

from launchgap.errors import AnalyzerError
from launchgap.loaders import load_trace
from launchgap.ranks import analyze_for_plan
from launchgap.report import AnalysisOptions, TraceReport
from launchgap.trace import Trace
from launchgap.dashboard.cache import BoundedCache
from launchgap.dashboard.settings import Settings
from launchgap.dashboard.timing import stage
from launchgap.dashboard.uploads import discard_file, staging_dir
from launchgap.dashboard.worker import Limits, ParseJob, WorkerError

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
        with stage("load_trace", file=path.name):
            trace = load_trace(path, settings.max_trace_bytes)
        return dataclasses.replace(trace, path=f"sha256:{digest[:16]}")

    return cache.get_or_compute(key, compute)


def _suffix_of(name: str) -> str:
    low = name.lower()
    return next((s for s in _UPLOAD_SUFFIXES if low.endswith(s)), "")


class PendingDigest:
    """A SHA-256 being computed in a thread (hashlib releases the GIL, so it runs beside other work)."""

    def __init__(self, data: memoryview) -> None:
        self._h = hashlib.sha256()
        self._thread = threading.Thread(target=self._h.update, args=(data,), name="launchgap-upload-hash",
                                        daemon=True)
        self._thread.start()

    def result(self) -> str:
        self._thread.join()
        return self._h.hexdigest()


def stage_upload(data: bytes | memoryview, name: str) -> tuple[Path, PendingDigest]:
    """Write the upload to a private temporary file while its SHA-256 is computed in a thread.

    Returns (path, pending digest): the hash may still be running, so the caller can start the
    parse at once; the caller deletes the file.
    """
    view = memoryview(data).cast("B")
    pending = PendingDigest(view)
    with stage("upload.write", file=name):
        fd, tmp = tempfile.mkstemp(prefix="launchgap-upload-", suffix=_suffix_of(name), dir=staging_dir(len(view)))
        try:
            with os.fdopen(fd, "wb") as fh:
                fh.write(view)
        except BaseException:
            discard_file(tmp)
            pending.result()
            raise
    return Path(tmp), pending


def parse_upload(data: bytes | memoryview, digest: str, name: str, settings: Settings, cache: BoundedCache) -> Trace:
    """Parse uploaded bytes in this process (through the cache). The bytes live on disk only during the parse."""
    hit = cache.get(("trace", digest, settings.max_trace_bytes))
    if hit is not None:
        return hit
    fd, tmp = tempfile.mkstemp(prefix="launchgap-upload-", suffix=_suffix_of(name),
                               dir=staging_dir(memoryview(data).nbytes))
    try:
        with stage("upload.tempfile_write", file=name), os.fdopen(fd, "wb") as fh:
            fh.write(data)
        return _parse_path(Path(tmp), digest, settings, cache)
    finally:
        discard_file(tmp)


def analyze_cached(trace: Trace, digest: str, options: AnalysisOptions, cache: BoundedCache) -> TraceReport:
    """The report of a parsed trace under ``options`` (through the cache).

    Collectives' waits for peers are split out (cause ``peer``) from the trace alone, exactly
    as ``launchgap analyze`` does for a lone file, so a tensor-parallel rank spinning in NCCL
    is not called GPU-bound; a trace without collectives gets the plain report. Of a file holding
    several ranks, the report is of the one rank ``launchgap plan`` reads, the line saying which first
    among its warnings (:func:`launchgap.ranks.analyze_for_plan`).
    """
    def compute() -> TraceReport:
        with stage("analyze", digest=digest[:12]):
            return analyze_for_plan(trace, options)[0]

    return cache.get_or_compute(("report", digest, options), compute)


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
    """Parse and analyse an uploaded file into the session (a repeat of the same bytes and name is kept once).

    With ``settings.parse_in_worker`` (the default) the parse and the analysis run in a child
    process under ``settings.worker_max_rss_bytes`` and ``settings.worker_timeout_s``; a file
    that passes either gets a one-line error. Otherwise they run in this thread.
    """
    if not settings.parse_in_worker:
        with stage("upload.digest", file=name):
            digest = content_digest(data)
        key = f"upload:{digest[:16]}:{name}"
        have = traces(state).get(key)
        if have is not None:
            return have
        return _finish(state, key, name, "upload", digest, memoryview(data).nbytes,
                       lambda: parse_upload(data, digest, name, settings, cache), settings, cache)
    size = memoryview(data).nbytes
    try:
        tmp, pending = stage_upload(data, name)
    except OSError as exc:  # the temporary copy could not be written (disk or /dev/shm full)
        entry = LoadedTrace(key=f"upload:?:{name}", name=name, source="upload", digest="", size_bytes=size,
                            error=f"cannot store the upload for parsing: {exc.strerror or exc}")
        traces(state)[entry.key] = entry
        return entry
    return _add_file(state, name, tmp, size, pending.result, None, settings, cache)


def add_staged_upload(state: MutableMapping, name: str, path: Path, size: int, digest: str, settings: Settings,
                      cache: BoundedCache) -> LoadedTrace:
    """Parse and analyse an upload already whole in a private file (``launchgap.dashboard.uploads``), in place: no
    copy, the hash already known. Like :func:`add_upload` otherwise; the file is deleted after."""
    return _add_file(state, name, path, size, lambda: digest, digest, settings, cache)


def _add_file(state: MutableMapping, name: str, tmp: Path, size: int, digest_of: Callable[[], str],
              known_digest: str | None, settings: Settings, cache: BoundedCache) -> LoadedTrace:
    """An upload's private file parsed in a child process (see :func:`add_upload`), then deleted.
    ``known_digest``: the hash when it is already known (a staged upload), else None."""
    limit = _limit_error(state, settings)  # checked after the repeat check below, as for samples
    job = None
    try:
        opts = options(state)
        # The parse starts before the hash is done: on two cores they run side by side. A hash
        # that finds the bytes already loaded (this session) or parsed (the server's cache)
        # cancels it. A hash known already says so before any child starts.
        done = known_digest is not None and (
            f"upload:{known_digest[:16]}:{name}" in traces(state)
            or (cache.get(("trace", known_digest, settings.max_trace_bytes)) is not None
                and cache.get(("report", known_digest, opts)) is not None))
        job_error = limit
        if limit is None and not done:
            try:
                job = ParseJob(tmp, settings.max_trace_bytes, opts, label="upload",  # never the temp file's name
                               timeout_s=settings.worker_timeout_s)
            except WorkerError as exc:
                job_error = exc.message
        with stage("upload.hash_wait", file=name):
            digest = digest_of()
        key = f"upload:{digest[:16]}:{name}"
        label = f"sha256:{digest[:16]}"
        have = traces(state).get(key)
        if have is not None:
            return have
        tkey, rkey = ("trace", digest, settings.max_trace_bytes), ("report", digest, opts)
        trace, report = cache.get(tkey), cache.get(rkey)
        error = job_error
        if limit is None and trace is not None and report is not None:
            error = None
        elif job is not None:
            try:
                with stage("upload.worker", file=name):
                    trace, report = job.result(Limits(settings.worker_max_rss_bytes, settings.worker_timeout_s))
                # The child called it "upload"; the session and the cache know it by its content hash.
                trace = dataclasses.replace(trace, path=label)
                report = dataclasses.replace(report, path=label)
                cache.put(tkey, trace)
                cache.put(rkey, report)
            except WorkerError as exc:
                error = exc.message
        if error is not None:
            entry = LoadedTrace(key=key, name=name, source="upload", digest=digest, size_bytes=size, error=error)
        else:
            entry = LoadedTrace(key=key, name=name, source="upload", digest=digest, size_bytes=size,
                                trace=trace, report=report)
        traces(state)[key] = entry
        return entry
    finally:
        if job is not None:
            job.cancel()  # no-op after result(); kills a child whose result was not needed
        discard_file(tmp)


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
