"""TensorRT-LLM (PyTorch backend) server logs: the per-iteration line of ``print_iter_log`` and
the CUDA-graph warm-up lines.

Format strings (docs/serverlogs.md cites each; paths in NVIDIA/TensorRT-LLM):

* record prefix ``[MM/DD/YYYY-HH:MM:SS] [TRT-LLM] [I] ...`` (Python logger), C++ runtime
  ``[TensorRT-LLM][INFO] ...``; the version from ``TensorRT-LLM version: X``;
* iteration (``tensorrt_llm/_torch/pyexecutor/py_executor.py``, rank 0 only unless
  ``TLLM_PROFILE_LOG_RANKS``): ``iter = N, global_rank = R, rank = R, currank_total_requests =
  a/b, elapsed_time = Ts`` (early 2025) or ``host_step_time = Xms, prev_device_step_time = Yms``
  (``N/A`` on the first), ``timestamp = YYYY-MM-DD HH:MM:SS, num_scheduled_requests: N`` (2026:
  ``num_scheduled_requests = N, kv_cache_util = ...`` moved before ``currank_total_requests``,
  more fields after), ``states = {'num_ctx_requests': C, 'num_ctx_tokens': T,
  'num_generation_tokens': G, ...}``. ``num_generation_tokens`` includes CUDA-graph padding
  (PR #3914), so the decode batch is ``num_scheduled_requests - num_ctx_requests``.
  ``prev_device_step_time`` is the *previous* iteration's device time: it is given to the
  previous line's iteration (the last iteration's stays unknown);
* capture (``tensorrt_llm/_torch/pyexecutor/model_engine.py``): ``Creating CUDA graph instances
  for N batch sizes.``, per size ``Run generation only CUDA graph warmup for batch size=B``
  (``, draft_len=D`` in newer builds; oldest ``Run warmup for batch size=B``); the
  ``cuda_graph_config`` (``batch_sizes``, ``max_batch_size``, ``enable_padding``) where a config
  dump prints it.

The iteration line does not say whether a graph ran, and TensorRT-LLM logs neither the capture's
seconds nor its memory: those stay unknown (null).
"""
from __future__ import annotations

import re

import numpy as np

from ._base import Reader as BaseReader, int_list
from ._scan import BlockScan, literal_at, read_decimal_end, read_uint, run_length

ENGINE = "tensorrt_llm"
CUES = ((b"[TRT-LLM]", 4), (b"[TensorRT-LLM]", 4), (b"TensorRT-LLM version", 5), (b"currank_total_requests", 5),
        (b"CUDA graph warmup for batch size", 4), (b"tensorrt_llm", 1), (b"trtllm-serve", 2))

_ITER_AT = re.compile(rb"\biter = \d+,[^\n]*")
#: The iteration line with device times, both layouts (``num_scheduled_requests = N, kv_cache_util`` first,
#: 2026; or ``num_scheduled_requests: N`` after the timestamp, PR #3914): groups rank, scheduled (2026),
#: previous device ms or N/A, timestamp, scheduled (2025), context requests.
_ITER_FAST = re.compile(
    rb"iter = \d+, global_rank = \d+, rank = (\d+), (?:num_scheduled_requests = (\d+), kv_cache_util = [^,\n]*, )?"
    rb"currank_total_requests = \d+/\d+, host_step_time = [\d.]+ ?ms, prev_device_step_time = ([\d.]+|N/A)(?: ?ms)?, "
    rb"timestamp = ([^,\n]*), (?:num_scheduled_requests: (\d+), )?states = \{'num_ctx_requests': (\d+)")
#: Bytes of ``[\d.]`` and of ``[^,\n]`` (the block-wide read's runs), and the longest such run it takes.
_DOTTED = np.zeros(256, dtype=bool)
_DOTTED[list(b"0123456789.")] = True
_NOT_COMMA = np.ones(256, dtype=bool)
_NOT_COMMA[list(b",\n")] = False
_RUN = 64
_SCHEDULED = re.compile(rb"num_scheduled_requests(?: =|:) (\d+)")
_CTX = re.compile(rb"'num_ctx_requests': (\d+)")
_GEN_TOKENS = re.compile(rb"'num_generation_tokens': (\d+)")
_DEVICE_MS = re.compile(rb"prev_device_step_time = ([\d.]+) ?ms")
_HOST_MS = re.compile(rb"host_step_time = ([\d.]+) ?ms")
_ELAPSED = re.compile(rb"elapsed_time = ([\d.]+) ?s")
_STAMP = re.compile(rb"timestamp = ([^,]+),")
_RANK = re.compile(rb"\brank = (\d+)")
_WARMUP = re.compile(rb"(?:CUDA graph warmup|Run warmup) for batch size=(\d+)")
_INSTANCES = re.compile(rb"Creating CUDA graph instances for (\d+) batch sizes")
_CG_SIZES = re.compile(rb"cuda_graph_(?:batch_sizes|config)\W*[^\n]*?batch_sizes\W*\[([\d,\s]*)\]")
_CG_MAX = re.compile(rb"cuda_graph_(?:max_batch_size|config\W*[^\n]*?max_batch_size)\W*(\d+)")
#: starts with its literal (a leading look-behind made the regex engine try every byte): ``graph_`` before it is
#: the graph config's own, checked by hand
_MAX_BATCH = re.compile(rb"max_batch_size\W{1,3}(\d+)")
_PADDING = re.compile(rb"enable_padding\W*(True|False|true|false)")
_VERSION = re.compile(rb"TensorRT-LLM version:? v?(\d+\.\d+[\w.+-]*)")


class Reader(BaseReader):
    ENGINE = ENGINE
    GRAPH_FLAG = False  # the iteration line says neither whether a graph ran nor a throughput
    THROUGHPUT = False
    #: Read iteration blocks with numpy where every line has the plain form (False: ``findall``; the tests
    #: compare the two).
    fast = True

    def __init__(self, path: str) -> None:
        super().__init__(path)
        self.warm: set[int] = set()
        # per rank, the iteration whose device time its next line brings
        self.pending: dict[int, tuple[float, int, int, int]] = {}
        self.listed: list[int] | None = None
        self.padded_note = False

    def feed(self, block: bytes) -> None:
        self.feed_scan(BlockScan(block))

    def feed_scan(self, scan: BlockScan) -> None:
        block = scan.block
        log = self.log
        if scan.has(b"iter = ") and not self._iterations_fast(block, scan):
            self._iterations_around(block)
        if b"for batch size=" in block:
            for m in _WARMUP.finditer(block):
                self.warm.add(int(m.group(1)))
                self.recognised += 1
        if b"Creating CUDA graph instances" in block:
            for m in _INSTANCES.finditer(block):
                log.capture_count = int(m.group(1))
                self.recognised += 1
        if b"batch_size" in block:
            for m in _CG_SIZES.finditer(block):
                self.listed = int_list(m.group(1))
            for m in _CG_MAX.finditer(block):
                log.capture_max = int(m.group(1))
            for m in _MAX_BATCH.finditer(block):
                if block[max(m.start() - 6, 0):m.start()] == b"graph_" or \
                        (m.start() and (block[m.start() - 1:m.start()].isalnum() or block[m.start() - 1] == 95)):
                    continue  # cuda_graph_max_batch_size, or inside a longer word (the old \b)
                start, end = block.rfind(b"\n", 0, m.start()) + 1, block.find(b"\n", m.start())
                if b"raph" not in block[start:end if end >= 0 else len(block)]:  # not the graph config's own
                    log.max_running_requests = int(m.group(1))
        if b"enable_padding" in block:
            for m in _PADDING.finditer(block):
                log.capture_mode = "padded" if m.group(1).lower() == b"true" else "exact"
        if log.version is None and b"TensorRT-LLM version" in block:
            v = _VERSION.search(block)
            if v:
                log.version = v.group(1).decode("ascii", "replace")

    def _iterations_around(self, block: bytes) -> None:
        """A block some of whose iteration lines the block-wide read does not take (damaged, another
        layout): those lines one by one, the stretches between them block-wide, in file order (a
        line's device time belongs to the line before it)."""
        starts = [m.start() for m in _ITER_AT.finditer(block)]
        fast = {m.start() for m in _ITER_FAST.finditer(block)}
        odd = [at for at in starts if at not in fast]
        if not odd or len(odd) > len(starts) // 10:  # many: every line on its own
            for m in _ITER_AT.finditer(block):
                self._iteration(block, m)
            return
        cut = 0
        for at in odd:
            start = block.rfind(b"\n", 0, at) + 1
            end = block.find(b"\n", at)
            end = len(block) if end < 0 else end + 1
            self._stretch(block[cut:start])
            for m in _ITER_AT.finditer(block, start, end):
                self._iteration(block, m)
            cut = end
        self._stretch(block[cut:])

    def _stretch(self, piece: bytes) -> None:
        if b"iter = " in piece and not self._iterations_fast(piece, BlockScan(piece)):
            for m in _ITER_AT.finditer(piece):
                self._iteration(piece, m)

    def _iterations_fast(self, block: bytes, scan: BlockScan | None = None) -> bool:
        """A block whose iteration lines all have the device-time layout (PR #3914 or 2026) and one rank:
        read at once (numpy over the bytes where every line has the plain form, else ``findall``).
        False: the caller reads it line by line."""
        got = self._scan_columns(scan) if scan is not None and self.fast else None
        if got is None:
            got = self._regex_columns(block)
        if got is None:
            return False
        rank, stamps, sched, ctx, dev = got
        src = self.sources.of(b"rank " + rank)
        if set(self.pending) - {src}:
            return False
        known = {u: self.clock.parse(u) for u in dict.fromkeys(stamps.tolist())}
        t = np.array([known[x] for x in stamps.tolist()])
        gen = sched - ctx
        # row i's device time is on row i + 1; the first row's belongs to the pending iteration
        first = self.pending.pop(src, None)
        if first is not None:
            self.iteration_line(*first[:3], float(dev[0]), first[3])
        n = len(gen)
        ms = np.append(dev[1:], np.nan)
        self.iteration_lines(t[:-1], gen[:-1], ctx[:-1], ms[:-1], np.full(n - 1, src))
        self.pending[src] = (float(t[-1]), int(gen[-1]), int(ctx[-1]), src)
        dec = ctx == 0
        self.decode_lines(t[dec], gen[dec], np.full(int(dec.sum()), -1, dtype=np.int8),
                          np.full(int(dec.sum()), np.nan, dtype=np.float32), np.full(int(dec.sum()), src))
        pre = ~dec  # prefill iterations: a few percent
        self.prefill_lines(t[pre], ctx[pre], np.full(int(pre.sum()), -1, dtype=np.int64))
        self.recognised += n
        return True

    @staticmethod
    def _regex_columns(block: bytes) -> tuple[bytes, np.ndarray, np.ndarray, np.ndarray, np.ndarray] | None:
        """(rank, stamp texts, scheduled, context requests, previous device ms) of every iteration line
        of the block by ``_ITER_FAST``; None unless every ``iter = `` is such a line, all of one rank."""
        found = _ITER_FAST.findall(block)
        if not found or len(found) != block.count(b"iter = "):
            return None
        cols = np.array(found, dtype="S40")
        ranks = np.unique(cols[:, 0])
        if len(ranks) != 1:
            return None
        prev = cols[:, 2]
        try:
            sched = np.where(cols[:, 1] != b"", cols[:, 1], cols[:, 4]).astype(np.int64)
            dev = np.where(prev == b"N/A", b"nan", prev).astype(np.float64)
        except ValueError:  # ``1.2.3ms``: the line path counts that line
            return None
        return bytes(ranks[0]), cols[:, 3], sched, cols[:, 5].astype(np.int64), dev

    @staticmethod
    def _scan_columns(scan: BlockScan) -> tuple[bytes, np.ndarray, np.ndarray, np.ndarray, np.ndarray] | None:
        """:meth:`_regex_columns` read with numpy: ``_ITER_FAST`` checked piece by piece at every
        ``iter = `` (each piece has one way to match). None where any line does not have the plain form
        (a number the regex takes that is not a plain decimal, a run of 64 bytes or more, several
        ranks): then the regex reads the block."""
        a, n = scan.a, scan.n
        p = scan.find(b"iter = ")
        if not len(p):
            return None
        st = _Steps(scan, p + 7)
        st.uint()
        st.lit(b", global_rank = ")
        st.uint()
        st.lit(b", rank = ")
        rank_at = st.at.copy()
        st.uint()
        rank_len = st.at - rank_at
        st.lit(b", ")
        new = st.lit(b"num_scheduled_requests = ", optional=True)
        sched = st.uint(new)
        st.lit(b", kv_cache_util = ", new)
        st.run(_NOT_COMMA, 0, new)
        st.lit(b", ", new)
        st.lit(b"currank_total_requests = ")
        st.uint()
        st.lit(b"/")
        st.uint()
        st.lit(b", host_step_time = ")
        st.run(_DOTTED, 1)
        st.lit(b" ", optional=True)
        st.lit(b"ms")
        st.lit(b", prev_device_step_time = ")
        na = st.lit(b"N/A", optional=True)
        dev_at = st.at.copy()
        dev, dev_end, plain = read_decimal_end(scan, np.minimum(dev_at, n), any_after=True)
        dotted = run_length(a, np.minimum(dev_at, n), _DOTTED, _RUN)
        st.ok &= na | ((dotted >= 1) & plain & (dev_end == dev_at + dotted))
        st.at = np.where(na, st.at, dev_at + dotted)
        dev = np.where(na, np.nan, dev)
        spaced = st.lit(b" ms", optional=True)  # ``(?: ?ms)?``
        st.lit(b"ms", ~spaced, optional=True)
        st.lit(b", timestamp = ")
        stamp_at = st.at.copy()
        st.run(_NOT_COMMA, 0)
        stamp_len = st.at - stamp_at
        st.lit(b", ")
        old = st.lit(b"num_scheduled_requests: ", optional=True)
        sched = np.where(new, sched, st.uint(old))  # the regex path takes the 2026 group where both are there
        st.lit(b", ", old)
        st.lit(b"states = {'num_ctx_requests': ")
        ctx = st.uint()
        # S40: the regex path's columns hold 40 bytes; a match that swallows the next ``iter = `` is not its
        ok = st.ok & (new | old) & (stamp_len <= 40)
        ok[:-1] &= p[1:] >= st.at[:-1]
        if not ok.all():
            return None
        ranks = scan.window(rank_at, 12)
        width = int(rank_len[0])
        if not ((rank_len == width).all() and (ranks[:, :width] == ranks[0, :width]).all()):
            return None
        w = int(stamp_len.max())
        stamps = scan.window(stamp_at, max(w, 1)).copy()
        stamps[np.arange(max(w, 1)) >= stamp_len[:, None]] = 0
        return bytes(ranks[0, :width]), stamps.view(f"S{max(w, 1)}").ravel(), sched, ctx, dev

    def _iteration(self, block: bytes, m: re.Match) -> None:
        text = m.group()
        sched = _SCHEDULED.search(text)
        ctx = _CTX.search(text)
        tokens = _GEN_TOKENS.search(text) if sched is None else None
        if ctx is None or (sched is None and tokens is None):
            self.skipped += 1
            return
        stamp = _STAMP.search(text)
        start = block.rfind(b"\n", 0, m.start()) + 1
        t = self.clock.parse(stamp.group(1) if stamp else block[start:m.start()])
        rank = _RANK.search(text)
        src = self.sources.of(b"rank " + rank.group(1) if rank else b"")
        c = int(ctx.group(1))
        if sched is not None:
            gen = int(sched.group(1)) - c
        else:  # before PR #3914 the line has no num_scheduled_requests: the generation tokens, padding included
            gen = int(tokens.group(1))
            if not self.padded_note:
                self.padded_note = True
                self.log.notes.append("iteration lines without num_scheduled_requests (before TensorRT-LLM PR #3914): "
                                      "the decode batch is num_generation_tokens, which counts CUDA-graph padding")
        dev = _DEVICE_MS.search(text)
        if dev is not None and dev.group(1).count(b".") > 1:  # ``[\d.]+`` also takes ``1.2.3``: damaged
            self.skipped += 1
            return
        if dev is not None or b"prev_device_step_time = N/A" in text:
            # the previous iteration's device time: it belongs to the same rank's previous line
            prev = self.pending.pop(src, None)
            if prev is not None:
                self.iteration_line(*prev[:3], float(dev.group(1)) if dev else float("nan"), prev[3])
            self.pending[src] = (t, gen, c, src)
        else:
            ms = _HOST_MS.search(text)
            el = _ELAPSED.search(text)
            step_ms = float(ms.group(1)) if ms else float(el.group(1)) * 1000.0 if el else float("nan")
            self.iteration_line(t, gen, c, step_ms, src)
        if c == 0:
            self.decode_line(t, gen, -1, float("nan"), src)
        else:
            self.prefill_line(t, c, -1)
        self.recognised += 1

    def finish(self):
        log = self.log
        for prev in self.pending.values():  # each rank's last iteration: its device time was never logged
            self.iteration_line(*prev[:3], float("nan"), prev[3])
        if self.warm:
            log.capture_sizes = sorted(self.warm)
        elif self.listed:
            log.capture_sizes = self.listed
        if log.capture_sizes and log.capture_count is not None and log.capture_count != len(log.capture_sizes):
            log.notes.append(f"the server announced {log.capture_count} graph sizes and warmed up "
                             f"{len(log.capture_sizes)}")
        return super().finish()


class _Steps:
    """The block-wide check of a regex at many offsets, one piece at a time: ``at`` each row's position,
    ``ok`` whether the row still matches; a step applies to the rows of ``where`` (default: all)."""

    def __init__(self, scan: BlockScan, at: np.ndarray) -> None:
        self.scan, self.at, self.ok = scan, at, np.ones(len(at), dtype=bool)

    def _pos(self) -> np.ndarray:
        return np.minimum(self.at, self.scan.n)

    def lit(self, text: bytes, where: np.ndarray | None = None, optional: bool = False) -> np.ndarray:
        """``text`` next (``optional``: taken where present; the rows that have it are returned)."""
        hit = literal_at(self.scan, self._pos(), text) & (self.at <= self.scan.n)
        on = hit if where is None else hit & where
        if not optional:
            self.ok &= hit if where is None else hit | ~where
        self.at = np.where(on, self.at + len(text), self.at)
        return on

    def uint(self, where: np.ndarray | None = None) -> np.ndarray:
        """``\\d+`` next: its value."""
        v, nd = read_uint(self.scan.a, self._pos(), 12)
        good = (nd >= 1) & (nd < 12)
        self.ok &= good if where is None else good | ~where
        self.at = self.at + (nd if where is None else np.where(where, nd, 0))
        return v

    def run(self, allowed: np.ndarray, least: int, where: np.ndarray | None = None) -> None:
        """A run of ``allowed`` bytes next, at least ``least`` long (greedy, as the regex takes it)."""
        k = run_length(self.scan.a, self._pos(), allowed, _RUN)
        good = (k >= least) & (k < _RUN)
        self.ok &= good if where is None else good | ~where
        self.at = self.at + (k if where is None else np.where(where, k, 0))
