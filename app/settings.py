"""Limits and locations of one dashboard server, read from the environment.

``launchgap app`` sets these variables for the Streamlit process it starts; tests set them
too. Every limit has a unit in its name.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from launchgap.loaders import DEFAULT_MAX_TRACE_BYTES

#: Where the bundled sample traces live: ``traces/`` beside the ``app`` package.
DEFAULT_SAMPLES_DIR = Path(__file__).resolve().parents[1] / "traces"
#: Sample files the Traces page offers (plain ``.json`` is left out: folders also hold truth.json).
SAMPLE_PATTERNS = ("*.json.gz", "*.sqlite")
#: Samples loaded when a session starts, so ``make app`` shows something at once: an eager/graph
#: pair and a second batch size. Named, because traces/h200-1b holds all eight of the reference set.
DEFAULT_SAMPLE_FILES = ("h200-1b/1b_bs64_eager.json.gz", "h200-1b/1b_bs8_eager.json.gz", "h200-1b/1b_bs8_graph.json.gz")
#: Without those files (another samples folder): the first few of this folder, else of the whole list.
DEFAULT_SAMPLE_DIR_NAME = "h200-1b"
DEFAULT_SAMPLE_COUNT = 3
#: A fleet results file (JSON lines, a few kB per trace) larger than this is refused on upload.
MAX_FLEET_FILE_BYTES = 256 * 1024 * 1024

ENV_SAMPLES_DIR = "LAUNCHGAP_SAMPLES_DIR"
ENV_MAX_TRACE_BYTES = "LAUNCHGAP_MAX_TRACE_BYTES"
ENV_CACHE_ENTRIES = "LAUNCHGAP_CACHE_ENTRIES"
ENV_CACHE_BYTES = "LAUNCHGAP_CACHE_BYTES"
ENV_CACHE_TTL_S = "LAUNCHGAP_CACHE_TTL_S"
ENV_SESSION_TRACES = "LAUNCHGAP_SESSION_TRACES"
ENV_PARSE_IN_WORKER = "LAUNCHGAP_PARSE_IN_WORKER"
ENV_WORKER_MAX_RSS_BYTES = "LAUNCHGAP_WORKER_MAX_RSS_BYTES"
ENV_WORKER_TIMEOUT_S = "LAUNCHGAP_WORKER_TIMEOUT_S"


def _int_env(name: str, default: int) -> int:
    raw = os.environ.get(name, "").strip()
    if not raw:
        return default
    try:
        value = int(raw)
    except ValueError:
        return default
    return value if value > 0 else default


@dataclass(frozen=True)
class Settings:
    """Limits of one server.

    * ``max_trace_bytes``: a trace that decompresses past this is refused (per file).
    * ``cache_entries`` / ``cache_bytes`` / ``cache_ttl_s``: the server-wide cache of parsed
      traces keeps at most this many entries and this many bytes of arrays, each for at
      most this long since its last use; least recently used entries go first.
    * ``session_traces``: traces one browser session may hold at once.
    * ``parse_in_worker``: parse and analyse uploads in a child process (``LAUNCHGAP_PARSE_IN_WORKER=0``:
      in the session's script thread, as bundled samples always are);
      ``worker_max_rss_bytes`` / ``worker_timeout_s``: that child (and anything it starts) is
      killed, and the upload refused with a one-line reason, past this resident memory or
      this wall time.
    """

    samples_dir: Path = DEFAULT_SAMPLES_DIR
    max_trace_bytes: int = DEFAULT_MAX_TRACE_BYTES
    cache_entries: int = 32
    cache_bytes: int = 4 * 1024**3
    cache_ttl_s: int = 3600
    session_traces: int = 24
    parse_in_worker: bool = True
    worker_max_rss_bytes: int = 3 * 1024**3 // 2
    worker_timeout_s: int = 60

    @classmethod
    def from_env(cls) -> Settings:
        samples = os.environ.get(ENV_SAMPLES_DIR, "").strip()
        return cls(
            samples_dir=Path(samples) if samples else DEFAULT_SAMPLES_DIR,
            max_trace_bytes=_int_env(ENV_MAX_TRACE_BYTES, DEFAULT_MAX_TRACE_BYTES),
            cache_entries=_int_env(ENV_CACHE_ENTRIES, cls.cache_entries),
            cache_bytes=_int_env(ENV_CACHE_BYTES, cls.cache_bytes),
            cache_ttl_s=_int_env(ENV_CACHE_TTL_S, cls.cache_ttl_s),
            session_traces=_int_env(ENV_SESSION_TRACES, cls.session_traces),
            parse_in_worker=os.environ.get(ENV_PARSE_IN_WORKER, "").strip() not in ("0", "false", "no"),
            worker_max_rss_bytes=_int_env(ENV_WORKER_MAX_RSS_BYTES, cls.worker_max_rss_bytes),
            worker_timeout_s=_int_env(ENV_WORKER_TIMEOUT_S, cls.worker_timeout_s),
        )


def discover_samples(root: Path) -> list[Path]:
    """Sample trace files under ``root`` (recursively), sorted by relative path; [] if absent."""
    if not root.is_dir():
        return []
    found = {p for pat in SAMPLE_PATTERNS for p in root.rglob(pat) if p.is_file() and not p.name.startswith(".")}
    return sorted(found, key=lambda p: p.relative_to(root).as_posix())


def default_samples(root: Path, samples: list[Path]) -> list[Path]:
    """The samples a new session starts with: :data:`DEFAULT_SAMPLE_FILES` if present, else the first
    few of the h200-1b folder, else the first few."""
    named = [p for p in samples if p.relative_to(root).as_posix() in DEFAULT_SAMPLE_FILES]
    preferred = [p for p in samples if p.parent.name == DEFAULT_SAMPLE_DIR_NAME]
    return (named or preferred or samples)[:DEFAULT_SAMPLE_COUNT]
