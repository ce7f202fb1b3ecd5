"""What every server-log reader shares: the result type, the streaming block scanner, timestamps.

A reader never holds the file: :func:`iter_blocks` yields the content in pieces of at most
``BLOCK_BYTES`` cut at a line end (gunzipped on the fly), and each engine module finds its
records in a piece with a substring search first (``bytes.find`` / a regex that starts with a
literal: C speed over the lines that are not records) and runs its field regexes only on the
lines that carry a record's marker. Per-record values go into growable ``array`` columns (a
few bytes per record), so memory is bounded by the piece size plus the records kept.
"""
from __future__ import annotations

import calendar
import mmap
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..errors import InputError
from ..loaders._io import iter_content, read_head
from ._scan import BlockScan

#: Content bytes per piece handed to the readers.
BLOCK_BYTES = 1024 * 1024
#: Logs are streamed, so the cap on their decompressed size only guards against a bomb.
MAX_LOG_BYTES = 256 * 1024**3
#: Bytes sniffed to decide what a file is, and to refuse binary content.
SNIFF_BYTES = 1024 * 1024
#: A line longer than this is cut there (a runaway line must not hold a whole file in memory).
MAX_LINE_BYTES = 1024 * 1024
KINDS = ("log", "metrics")
ENGINES = ("vllm", "sglang", "tensorrt_llm")
_MIB_PER_GIB = 1024.0


class Column:
    """A growable numeric column in its own anonymous memory map: grown by ``mremap`` (no copy, and no
    per-block pieces left in the heap), only the pages written are resident; read out once as a
    numpy array over the same memory. An integer column starts narrow (a batch size fits 16 bits,
    a process index 8) and moves to the next wider type when a value does not fit."""

    __slots__ = ("buf", "dtype", "n", "pending")
    #: Values appended one at a time are gathered in a list and written this many at once.
    FLUSH = 4096
    _WIDER = {"i1": "i2", "i2": "i4", "i4": "i8"}

    def __init__(self, dtype: str) -> None:
        self.dtype = np.dtype(dtype)
        self.buf: mmap.mmap | None = None
        self.n = 0
        self.pending: list = []

    def _reserve(self, k: int) -> None:
        need = (self.n + k) * self.dtype.itemsize
        cap = len(self.buf) if self.buf is not None else 0
        if need <= cap:
            return
        size = -(-max(need, 2 * cap, 1 << 16) // mmap.PAGESIZE) * mmap.PAGESIZE
        if self.buf is None:
            self.buf = mmap.mmap(-1, size, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
        else:
            self.buf.resize(size)

    def _fit(self, lo: float, hi: float) -> None:
        """Widen an integer column until ``lo`` and ``hi`` fit."""
        while self.dtype.kind == "i" and self.dtype.str[1:] in self._WIDER:
            info = np.iinfo(self.dtype)
            if info.min <= lo and hi <= info.max:
                return
            old = np.frombuffer(self.buf, dtype=self.dtype, count=self.n).copy() if self.n else np.zeros(0, self.dtype)
            self.dtype = np.dtype(self._WIDER[self.dtype.str[1:]])
            self.buf, self.n = None, 0
            self.extend(old)

    def append(self, v: float | int) -> None:
        self.pending.append(v)
        if len(self.pending) >= self.FLUSH:
            self._flush()

    def _flush(self) -> None:
        if self.pending:
            values, self.pending = np.array(self.pending), []
            self.extend(values)

    def extend(self, values: np.ndarray) -> None:
        if self.pending:
            self._flush()
        values = np.asarray(values)
        k = len(values)
        if not k:
            return
        if self.dtype.kind == "i" and values.dtype.kind in "iu":
            self._fit(values.min(), values.max())
        self._reserve(k)
        view = np.frombuffer(self.buf, dtype=self.dtype, count=k, offset=self.n * self.dtype.itemsize)
        view[:] = values
        del view  # no buffer may stay exported: the map is resized later
        self.n += k

    def __len__(self) -> int:
        return self.n + len(self.pending)

    def numpy(self) -> np.ndarray:
        """The values (over the column's own memory: append nothing after this)."""
        self._flush()
        if not self.n:
            return np.zeros(0, dtype=self.dtype)
        return np.frombuffer(self.buf, dtype=self.dtype, count=self.n)


@dataclass
class CaptureEvent:
    """One capture the server logged: which graphs (``what``, the engine's own words), the
    seconds and device memory it reported (``memory_mib``: its figure converted to MiB), the
    sizes it names, and the process that logged it (``source``: rank tag, '' when none)."""

    what: str
    seconds: float | None
    memory_mib: float | None
    sizes: list[int] | None
    source: str
    estimated_mib: float | None = None


@dataclass
class ForwardTime:
    """vLLM's ``Batchsize forward time stats`` for one batch size, over every line that named it:
    ``count`` forwards, ``median_ms`` the count-weighted mean of the lines' medians."""

    batch_size: int
    count: int
    median_ms: float


@dataclass
class ServerLog:
    """What one server log or metrics scrape says about CUDA graphs (the readers' common result).

    Capture: ``capture_sizes`` (ascending, or None), ``capture_count`` (graphs the server names,
    or the list's length), ``capture_mode`` (the engine's words: vLLM's ``cudagraph_mode``),
    ``capture_seconds`` / ``capture_memory_mib`` (the main decode capture's own figures, the
    engine's unit converted to MiB at 1 GiB = 1024 MiB), ``max_running_requests``.

    Decode lines, one entry per periodic line the engine printed (columns of equal length, in
    file order, compact types: a multi-GB log has millions): ``decode_time_rel_s`` (float32
    seconds after ``time_origin_s``, the first stamp, seconds since the epoch as the log's own clock
    states it; NaN when the line has none; :attr:`decode_time_s` gives absolute times),
    ``decode_batch`` (running decode requests), ``decode_graph``
    (1 a graph ran, 0 eager, -1 the line does not say), ``decode_tok_s`` (generation
    throughput the line reports, NaN if none), ``decode_source`` (index into ``sources``: the
    rank / engine tag of the process that printed it). Prefill lines likewise
    (``prefill_time_rel_s`` after ``time_origin_s`` as the decode lines', ``prefill_batch``: new
    sequences, -1 where the line does not say, ``prefill_tokens``).

    ``graph_passes`` / ``eager_passes`` count forward passes where the server counts them
    itself (vLLM's ``--cudagraph-metrics`` table, SGLang's ``cuda_graph_passes_total`` counter);
    ``eager_passes_above`` / ``eager_passes_within`` split vLLM's eager rows by the largest
    captured size. Per-iteration lines (TensorRT-LLM's ``print_iter_log``, vLLM's
    ``VLLM_LOG_ITERATION_DETAILS``): ``iter_time_rel_s`` (float32 after ``time_origin_s``;
    :attr:`iter_time_s` absolute), ``iter_batch`` (generation requests),
    ``iter_context`` (context requests: > 0 is a prefill or mixed iteration), ``iter_ms`` (the
    step's time as the line states it, NaN if none), ``iter_source``. ``capture_max``: the
    largest capture size the server states when its list is not known. ``forward_times``: vLLM's per-batch forward times. ``padding``: vLLM's table
    summed (``unpadded``, ``padded`` tokens, ``paddings``).

    Metrics (``kind == "metrics"``): ``scrapes``: per scrape, {sample name: value summed over
    label sets} (buckets left out); ``histograms``: per scrape, {histogram name: [(le, cumulative
    count summed over label sets), ...]}; ``scrape_time_s`` per scrape (NaN when unstated);
    ``scrape_passes``: per scrape, SGLang's ``cuda_graph_passes_total`` per ``mode``. ``files``: the
    files read (several when scrape files were merged into one series; ``path`` is the first).
    """

    path: str
    engine: str
    kind: str
    version: str | None = None
    capture_sizes: list[int] | None = None
    capture_count: int | None = None
    capture_mode: str | None = None
    captures: list[CaptureEvent] = field(default_factory=list)
    max_running_requests: int | None = None
    time_origin_s: float = float("nan")
    decode_time_rel_s: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.float32))
    decode_batch: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    decode_graph: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int8))
    decode_tok_s: np.ndarray = field(default_factory=lambda: np.zeros(0))
    decode_source: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    sources: list[str] = field(default_factory=list)
    prefill_time_rel_s: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.float32))
    prefill_batch: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    prefill_tokens: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    graph_passes: int | None = None
    eager_passes: int | None = None
    eager_passes_above: int | None = None
    eager_passes_within: int | None = None
    iter_time_rel_s: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.float32))
    iter_batch: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    iter_context: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    iter_ms: np.ndarray = field(default_factory=lambda: np.zeros(0))
    iter_source: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    capture_max: int | None = None
    forward_times: list[ForwardTime] = field(default_factory=list)
    padding: dict[str, int] | None = None
    scrapes: list[dict[str, float]] = field(default_factory=list)
    histograms: list[dict[str, list[tuple[float, float]]]] = field(default_factory=list)
    scrape_time_s: np.ndarray = field(default_factory=lambda: np.zeros(0))
    scrape_passes: list[dict[str, float]] = field(default_factory=list)
    files: list[str] = field(default_factory=list)
    #: The models the file names, in the order first seen: vLLM's engine config ``model='…'``, SGLang's
    #: ``server_args`` ``model_path='…'``, a scrape's ``model_name`` label (empty where it names none).
    models: list[str] = field(default_factory=list)
    lines: int = 0
    recognised_lines: int = 0
    skipped_lines: int = 0
    decode_log_interval: int | None = None
    notes: list[str] = field(default_factory=list)

    @property
    def decode_time_s(self) -> np.ndarray:
        """Absolute times of the decode lines (float64, built on demand: a large log has millions)."""
        return self.time_origin_s + self.decode_time_rel_s.astype(np.float64)

    @property
    def iter_time_s(self) -> np.ndarray:
        """Absolute times of the iteration lines (float64, built on demand)."""
        return self.time_origin_s + self.iter_time_rel_s.astype(np.float64)

    @property
    def prefill_time_s(self) -> np.ndarray:
        """Absolute times of the prefill lines (float64, built on demand)."""
        return self.time_origin_s + self.prefill_time_rel_s.astype(np.float64)

    @property
    def max_captured(self) -> int | None:
        """The largest captured size (the ceiling), when the capture list or its maximum is known."""
        return max(self.capture_sizes) if self.capture_sizes else self.capture_max

    def main_capture(self) -> CaptureEvent | None:
        """The decode capture whose figures the report gives: the first one logged by the process
        that logged the decode lines (TP0 where all ranks capture), else the first one."""
        main = [c for c in self.captures if c.what == "decode"] or list(self.captures)
        if not main:
            return None
        primary = self.sources[int(bincount(self.decode_source).argmax())] \
            if len(self.decode_source) and self.sources else None
        for c in main:
            if c.source == primary:
                return c
        return sorted(main, key=lambda c: _rank_order(c.source))[0]

    @property
    def capture_seconds(self) -> float | None:
        c = self.main_capture()
        return c.seconds if c is not None else None

    @property
    def capture_memory_mib(self) -> float | None:
        c = self.main_capture()
        return c.memory_mib if c is not None else None


#: Lines per slice where a whole-column operation would make a wide temporary (``bincount`` and
#: fancy indexing convert their input to 64-bit integers first): 2 MiB at a time.
SLICE = 1 << 18


def bincount(x: np.ndarray) -> np.ndarray:
    """``np.bincount`` of small non-negative integers, a slice at a time."""
    out = np.zeros(int(x.max()) + 1 if len(x) else 0, dtype=np.int64)
    for i in range(0, len(x), SLICE):
        c = np.bincount(x[i:i + SLICE])
        out[:len(c)] += c
    return out


def _rank_order(tag: str) -> tuple[int, str]:
    m = re.search(r"\d+", tag)
    return (int(m.group()) if m else -1, tag)


def gib_to_mib(x: float) -> float:
    """An engine's GiB figure (vLLM ``GiB``; SGLang's ``GB`` is bytes / 2**30 too) in MiB."""
    return round(x * _MIB_PER_GIB, 6)


def sniff(path: Path) -> bytes:
    """The first :data:`SNIFF_BYTES` of content (gunzipped), or an error naming the file.

    Binary content (NUL bytes, or under 90% printable bytes in the sniffed piece) is refused:
    nothing the user gives is read as a log unless it is text."""
    try:
        read_head(path, 2)
    except OSError as exc:
        raise InputError(f"cannot read: {exc.strerror}", str(path)) from None
    out = b""
    for piece in iter_content(path, MAX_LOG_BYTES, SNIFF_BYTES):
        out = piece
        break
    if not out:
        raise InputError("empty file: no server-log or metrics line", str(path))
    if looks_binary(out):
        raise InputError("binary content, not a text log or metrics scrape", str(path))
    return out


_TEXT = bytes(range(32, 127)) + b"\t\n\r\x1b\x0b\x0c"


def looks_binary(data: bytes) -> bool:
    """More than 10% of the first 64 KiB not text (ASCII printable, whitespace, UTF-8): a binary file.
    A few damaged lines (NUL bytes, stray bytes) inside a text log are not: they are skipped and counted."""
    sample = data[:65536]
    other = len(sample.translate(None, _TEXT))
    if other == 0:
        return False
    try:
        sample.decode("utf-8")
        return b"\0" in sample and sample.count(b"\0") > 0.1 * len(sample)
    except UnicodeDecodeError:
        pass
    # UTF-8 multi-byte characters count as text: only the bytes outside valid sequences are "other"
    text = sample.decode("utf-8", "replace")
    bad = text.count("\ufffd") + text.count("\0")
    return bad > 0.1 * len(text)


def iter_blocks(path: Path, max_bytes: int = MAX_LOG_BYTES) -> Iterator[bytes]:
    """The content in pieces that end at a line end (the last may not), gunzipped on the fly.

    Carriage returns (tqdm progress bars) count as line ends: each piece has them turned into
    newlines. A line longer than :data:`MAX_LINE_BYTES` is cut into pieces of that size."""
    rest = b""
    for piece in iter_content(path, max_bytes, BLOCK_BYTES):
        data = rest + piece if rest else piece
        cut = data.rfind(b"\n") + 1
        if cut == 0 and len(data) < MAX_LINE_BYTES:
            rest = data
            continue
        if cut == 0:
            cut = len(data)
        rest = data[cut:]
        out = data[:cut]
        yield out.replace(b"\r", b"\n") if b"\r" in out else out
    if rest:
        yield rest.replace(b"\r", b"\n") + b"\n"


def line_at(block: bytes, pos: int) -> tuple[int, int]:
    """(start, end) of the line holding byte ``pos``."""
    return block.rfind(b"\n", 0, pos) + 1, _end(block, pos)


def _end(block: bytes, pos: int) -> int:
    e = block.find(b"\n", pos)
    return len(block) if e < 0 else e


def int_list(text: bytes | str) -> list[int]:
    """``[1, 2, 4]`` / ``1 2 4`` -> sorted unique ints."""
    s = text.decode("ascii", "replace") if isinstance(text, bytes) else text
    return sorted({int(x) for x in re.findall(r"\d+", s)})


# --- timestamps -----------------------------------------------------------------------------------

#: Timestamp layouts the engines' log formats write, tried in order on a line's prefix:
#: ISO-like ``2025-11-11 04:06:27(.123)`` (SGLang, TRT-LLM's ``timestamp =``, container runtimes'
#: ``2025-11-11T04:06:27.123Z``), vLLM's ``01-22 18:27:20(.123)`` (no year), TRT-LLM's
#: ``[11/11/2025-04:06:27]``.
_ISO = re.compile(rb"(\d{4})-(\d\d)-(\d\d)[ T](\d\d):(\d\d):(\d\d)(?:[.,](\d{1,9}))?")
_MDY = re.compile(rb"(\d\d)/(\d\d)/(\d{4})-(\d\d):(\d\d):(\d\d)")
_MD = re.compile(rb"(?<![\d-])(\d\d)-(\d\d) (\d\d):(\d\d):(\d\d)(?:[.,](\d{1,9}))?")
#: A year for vLLM's month-day stamps: relative times are what matter; 2000 is a leap year.
NO_YEAR = 2000


class Clock:
    """Parses the timestamps of one file, caching by the stamp's text (stamps repeat each second)."""

    def __init__(self) -> None:
        self.cache: dict[bytes, float] = {}

    def parse(self, prefix: bytes) -> float:
        """Seconds since the epoch (UTC assumed, as logs rarely say) of the first stamp in ``prefix``; NaN if none."""
        got = self.cache.get(prefix)
        if got is not None:
            return got
        t = _parse_stamp(prefix)
        if len(self.cache) > 200_000:
            self.cache.clear()
        self.cache[prefix] = t
        return t


def _parse_stamp(text: bytes) -> float:
    m = _ISO.search(text)
    if m:
        y, mo, d, h, mi, s = (int(x) for x in m.groups()[:6])
        frac = float(b"0." + m.group(7)) if m.group(7) else 0.0
        return _epoch(y, mo, d, h, mi, s) + frac
    m = _MDY.search(text)
    if m:
        mo, d, y, h, mi, s = (int(x) for x in m.groups())
        return _epoch(y, mo, d, h, mi, s)
    m = _MD.search(text)
    if m:
        mo, d, h, mi, s = (int(x) for x in m.groups()[:5])
        frac = float(b"0." + m.group(6)) if m.group(6) else 0.0
        return _epoch(NO_YEAR, mo, d, h, mi, s) + frac
    return float("nan")


def _epoch(y: int, mo: int, d: int, h: int, mi: int, s: int) -> float:
    if not (1 <= mo <= 12 and 1 <= d <= 31 and h < 24 and mi < 60 and s < 62):
        return float("nan")
    return float(calendar.timegm((y, mo, d, h, mi, s, 0, 0, 0)))


def unwrap_years(t: np.ndarray) -> np.ndarray:
    """Month-day stamps (no year) across New Year go backwards by most of a year: add it back."""
    if len(t) < 2 or not np.isfinite(t).any() or float(np.nanmax(t)) - float(np.nanmin(t)) < 180 * 86400.0:
        return t  # under half a year apart: no stamp went back across New Year (and no full-length diff)
    back = np.diff(t) < -180 * 86400.0
    if not back.any():
        return t
    out = t.copy()
    out[1:] += np.cumsum(np.where(back, 366 * 86400.0, 0.0)).astype(t.dtype)
    return out


class Sources:
    """Rank / engine tags of the processes that printed records, as small ints."""

    def __init__(self) -> None:
        self.names: list[str] = []
        self.index: dict[bytes, int] = {}

    def of(self, tag: bytes) -> int:
        i = self.index.get(tag)
        if i is None:
            i = self.index[tag] = len(self.names)
            self.names.append(tag.decode("utf-8", "replace"))
        return i


def count_bad_text(block: bytes) -> int:
    """Lines of ``block`` that are not text (a NUL byte or invalid UTF-8): counted, then skipped."""
    if block.isascii() and b"\0" not in block:
        return 0
    bad = 0
    if b"\0" in block:
        bad += sum(1 for ln in block.split(b"\n") if b"\0" in ln)
    try:
        block.decode("utf-8")
    except UnicodeDecodeError:
        for ln in block.split(b"\n"):
            if b"\0" in ln:
                continue
            try:
                ln.decode("utf-8")
            except UnicodeDecodeError:
                bad += 1
    return bad


class Reader:
    """Base of the engine readers: the columns every log fills, fed one block at a time.

    A subclass sets ``ENGINE`` and implements :meth:`feed` (find its records in a block) and
    may extend :meth:`finish`. ``skipped`` counts lines that carry a record's marker but do not
    parse (garbage, truncated lines): they are skipped, never fatal."""

    ENGINE = ""
    #: Whether the engine's decode lines say if a graph ran and state a throughput; when not
    #: (TensorRT-LLM's iteration lines), those columns are not stored: a read-only view of -1 / NaN
    #: stands in (no memory per line).
    GRAPH_FLAG = True
    THROUGHPUT = True

    def __init__(self, path: str) -> None:
        self.path = path
        self.clock = Clock()
        self.sources = Sources()
        self.prefix_cache: dict[bytes, tuple[float, int]] = {}
        self.log = ServerLog(path=path, engine=self.ENGINE, kind="log")
        # compact types: a multi-GB log has millions of records (docs/serverlogs.md, speed and memory)
        self.d_t, self.d_b, self.d_g, self.d_tok, self.d_src = (Column("f4"), Column("i2"), Column("i1"),
                                                               Column("f4"), Column("i1"))
        self.t0 = float("nan")  # the first stamp: decode times are kept as float32 offsets from it
        self.p_t, self.p_b, self.p_tok = Column("f4"), Column("i2"), Column("i4")  # p_t: offsets as d_t
        # i_t: offsets as d_t; i_ms: a step's milliseconds (float32 keeps 7 digits)
        self.i_t, self.i_b, self.i_c, self.i_ms, self.i_src = (Column("f4"), Column("i2"), Column("i2"), Column("f4"),
                                                               Column("i1"))
        self.recognised = 0
        self.skipped = 0

    def feed(self, block: bytes) -> None:
        raise NotImplementedError

    def feed_scan(self, scan: BlockScan) -> None:
        """A block with its vectorised view (readers of dense records use it; the others read the bytes)."""
        self.feed(scan.block)

    def rel(self, t: np.ndarray | float) -> np.ndarray | float:
        """Times as offsets from the file's first stamp (kept as float32)."""
        if self.t0 != self.t0:  # NaN: no stamp yet
            first = np.asarray(t, dtype=np.float64).ravel()
            first = first[np.isfinite(first)]
            if len(first):
                self.t0 = float(first[0])
        return np.asarray(t, dtype=np.float64) - (self.t0 if self.t0 == self.t0 else 0.0)

    def decode_lines(self, t: np.ndarray, batch: np.ndarray, graph: np.ndarray, tok_s: np.ndarray,
                     src: np.ndarray) -> None:
        """A block's decode records at once."""
        self.d_t.extend(self.rel(t).astype(np.float32))
        self.d_b.extend(batch)
        if self.GRAPH_FLAG:
            self.d_g.extend(graph)
        if self.THROUGHPUT:
            self.d_tok.extend(tok_s)
        self.d_src.extend(src)

    def decode_line(self, t: float, batch: int, graph: int, tok_s: float, src: int) -> None:
        self.d_t.append(float(self.rel(t)))
        self.d_b.append(batch)
        if self.GRAPH_FLAG:
            self.d_g.append(graph)
        if self.THROUGHPUT:
            self.d_tok.append(tok_s)
        self.d_src.append(src)

    def prefill_lines(self, t: np.ndarray, batch: np.ndarray, tokens: np.ndarray) -> None:
        """A block's prefill records at once."""
        self.p_t.extend(self.rel(t).astype(np.float32))
        self.p_b.extend(batch)
        self.p_tok.extend(tokens)

    def prefill_line(self, t: float, batch: int, tokens: int) -> None:
        self.p_t.append(float(self.rel(t)))
        self.p_b.append(batch)
        self.p_tok.append(tokens)

    def iteration_lines(self, t: np.ndarray, batch: np.ndarray, context: np.ndarray, ms: np.ndarray,
                        src: np.ndarray) -> None:
        """A block's iteration records at once."""
        self.i_t.extend(self.rel(t).astype(np.float32))
        self.i_b.extend(batch)
        self.i_c.extend(context)
        self.i_ms.extend(ms)
        self.i_src.extend(src)

    def iteration_line(self, t: float, batch: int, context: int, ms: float, src: int) -> None:
        self.i_t.append(float(self.rel(t)))
        self.i_b.append(batch)
        self.i_c.append(context)
        self.i_ms.append(ms)
        self.i_src.append(src)

    def finish(self) -> ServerLog:
        log = self.log
        log.time_origin_s = self.t0
        log.decode_time_rel_s = unwrap_years(self.d_t.numpy())
        log.decode_batch = self.d_b.numpy()
        n = len(log.decode_batch)
        log.decode_graph = self.d_g.numpy() if self.GRAPH_FLAG else np.broadcast_to(np.int8(-1), (n,))
        log.decode_tok_s = self.d_tok.numpy() if self.THROUGHPUT else np.broadcast_to(np.float32(np.nan), (n,))
        log.decode_source = self.d_src.numpy()
        log.prefill_time_rel_s = unwrap_years(self.p_t.numpy())
        log.prefill_batch = self.p_b.numpy()
        log.prefill_tokens = self.p_tok.numpy()
        log.iter_time_rel_s = unwrap_years(self.i_t.numpy())
        log.iter_batch = self.i_b.numpy()
        log.iter_context = self.i_c.numpy()
        log.iter_ms = self.i_ms.numpy()
        log.iter_source = self.i_src.numpy()
        log.sources = list(self.sources.names)
        log.recognised_lines = self.recognised
        log.skipped_lines = self.skipped
        if log.capture_sizes:
            log.capture_sizes = sorted(set(log.capture_sizes))
            if log.capture_count is None:
                log.capture_count = len(log.capture_sizes)
        return log
