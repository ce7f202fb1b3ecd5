"""SGLang server logs: the scheduler's periodic ``Decode batch`` / ``Prefill batch`` lines and the
CUDA-graph capture lines, in every format of releases 0.4.3 to 0.5.23.

Format strings (docs/serverlogs.md cites each with its file; ``python/sglang/srt/`` in
sgl-project/sglang):

* record prefix ``[%(asctime)s{ms}{prefix}] %(message)s`` (``utils/common.py``
  ``configure_logger``), prefix `` DP{n}`` / `` PP{n}`` / `` TP{n}`` (only if tp_size > 1) /
  `` EP{n}`` (``managers/scheduler.py``): ``[2025-03-08 12:29:28 TP0] ...``;
* decode: ``Decode batch. #running-req: ...`` (0.4.3-0.5.3), ``Decode batch [N], ...`` (0.5.4),
  ``Decode batch, ...`` (0.5.5+, `` [N]`` with ``SGLANG_LOG_FORWARD_ITERS``), then ``#token`` /
  ``token usage`` (or the SWA variants), optional ``accept len`` / ``accept rate`` /
  ``pre-allocated usage``, ``{cuda|cpu|npu|musa} graph: {True|False}`` (0.4.6+; absent in
  0.4.3), ``gen throughput (token/s): X``, ``#queue-req: N`` with or without a trailing comma
  (``managers/scheduler.py``, ``scheduler_metrics_mixin.py``,
  ``scheduler_components/metrics_reporter.py``);
* ``Prefill batch. #new-seq: N, #new-token: N, #cached-token: N, ... #running-req: N, ...``;
* capture: ``Capture cuda graph end. Time elapsed: 7.23 s. mem usage=0.93 GB. avail mem=...``
  (either order of mem usage / avail mem), 0.5.14+ ``Capture target decode CUDA graph end.
  elapsed=16.40 s, mem usage=..., avail mem=...`` (``model_runner.py``,
  ``model_runner_components/cuda_graph_setup.py``); the list from ``Capture cuda graph bs
  [1, 2, ...]`` (``cuda_graph_runner.py``), ``bs=[...]`` in 0.5.14's begin and 0.5.23's end
  line, the ``server_args=ServerArgs(... cuda_graph_bs=..., cuda_graph_max_bs=...)`` dump, or
  the tqdm bar ``Capturing batches (bs=256 avail_mem=...)``.

**Sampling.** A decode line is printed once every ``decode_log_interval`` decode steps
(default 40, ``server_args``): its ``#running-req`` and ``cuda graph`` flag are those of the one
step that triggered it, its throughput the whole interval's. Counting lines therefore samples
one decode step in ``decode_log_interval``; the ``sglang:cuda_graph_passes_total`` counter
(``--enable-metrics``) counts every step.

``GB`` in SGLang's lines is ``bytes / 2**30`` (``get_available_gpu_memory``): converted at 1024 MiB.
"""
from __future__ import annotations

import re

import numpy as np

from ._base import CaptureEvent, Reader as BaseReader, gib_to_mib, int_list
from ._scan import BlockScan, iso_stamps, read_decimal, read_uint

ENGINE = "sglang"
#: Texts that identify an SGLang log in its first MiB (detection by content, with weights).
CUES = ((b"Decode batch", 3), (b"Prefill batch", 3), (b"Capture cuda graph", 3), (b"server_args=ServerArgs(", 5),
        (b"CUDA graph end. elapsed=", 3), (b"decode CUDA graph end", 3), (b"Capture cuda graph end", 3), (b"Capturing batches (", 2), (b"sglang", 1),
        (b"The server is fired up and ready to roll", 5))
#: SGLang's default ``decode_log_interval`` (server_args.py).
DEFAULT_DECODE_LOG_INTERVAL = 40

#: One decode record from its marker, for a line the vectorised path does not take (another prefix layout, the
#: ``[N]`` counter, an unusual number, damage): read with this regex, at the marker.
_DECODE = re.compile(
    rb"Decode batch(?: ?\[\d+\])?[.,]? #running-req: (\d+),"
    rb"(?:[^\n]* graph: (True|False)\b)?[^\n]* gen throughput \(token/s\): ([-+\w.]+)")
#: Every literal the reader looks for in a block.
_MARKERS = (b"Decode batch", b"Prefill batch", b" gen throughput (token/s): ", b"Captur", b"ServerArgs(",
            b"max_running_requests=")
#: Bytes of a line before a record's marker read as its ``[time tags]`` prefix (a longer one: line by line).
PREFIX_BYTES = 80
_TAGS = re.compile(rb"(?: [A-Z_]+\d+)*")
_DOT_COMMA = np.array([ord("."), ord(",")], dtype=np.uint8)
_RUNNING = np.frombuffer(b" #running-req: ", dtype=np.uint8)
_GRAPH_TRUE = np.frombuffer(b"graph: True,", dtype=np.uint8)
_GRAPH_FALSE = np.frombuffer(b"graph: False,", dtype=np.uint8)
_NEW_TOKEN = np.frombuffer(b" #new-token: ", dtype=np.uint8)
_CAPTURE_AT = re.compile(rb"Captur(?:e|ing batches) [^\n]*")
_ARGS_AT = (re.compile(rb"ServerArgs\([^\n]*"), re.compile(rb"max_running_requests=[^\n]*"))

_PREFILL = re.compile(rb"Prefill batch(?: ?\[\d+\])?[.,]? #new-seq: (\d+), #new-token: (\d+)")
_PREFIX = re.compile(rb"\[[^\]\n]*?\d\d:\d\d:\d\d(?:\.\d+)?((?: [A-Z_]+\d+)*)\]\s*$")
_CAPTURE_END = re.compile(rb"Capture (.*?) end[.,] .*?(?:Time elapsed: |elapsed=)([\d.]+) ?s")
_MEM_USAGE = re.compile(rb"mem usage=([\d.]+) ?GB")
_BS_LIST = re.compile(rb"\bbs=?\s*\[([\d,\s]*)\]")
_BS_LINE = re.compile(rb"Capture cuda graph bs \[([\d,\s]*)\]")
_TQDM_BS = re.compile(rb"Capturing batches \(bs=(\d+)")
#: tqdm's ``| done/total [`` counter on the same bar: how many sizes the capture ran.
_TQDM_TOTAL = re.compile(rb"\|\s*\d+/(\d+) \[")
_ARG_BS = re.compile(rb"\bcuda_graph_bs(?:_decode)?=\[([\d,\s]*)\]")
_ARG_MAX_BS = re.compile(rb"\bcuda_graph_max_bs(?:_decode)?=(\d+)")
_ARG_MODEL = re.compile(rb"\bmodel_path=['\"]([^'\"\n]+)['\"]")
_ARG_DISABLE = re.compile(rb"\bdisable_cuda_graph=True")
_ARG_INTERVAL = re.compile(rb"\bdecode_log_interval=(\d+)")
_ARG_MAX_RUNNING = re.compile(rb"\bmax_running_requests=(\d+)")
_VERSION = re.compile(rb"\bsglang(?:==| version:? v?)(\d+\.\d+[\w.+-]*)", re.IGNORECASE)


def _float(x: bytes) -> float:
    try:
        return float(x)
    except ValueError:
        return float("nan")


def _what(text: bytes) -> str:
    """The capture's kind: ``decode`` for the (target) decode graphs, else the engine's own words."""
    w = text.decode("utf-8", "replace").strip().lower()
    if any(k in w for k in ("draft", "piecewise", "prefill", "extend", "verify")):
        return w
    return "decode"


class Reader(BaseReader):
    ENGINE = ENGINE

    def __init__(self, path: str) -> None:
        super().__init__(path)
        self.tqdm_sizes: set[int] = set()
        self.tqdm_total = 0
        self.blocks = 0
        self.list_from: str | None = None

    def _prefix(self, block: bytes, at: int) -> tuple[float, int]:
        """Time and source of the record at ``at`` from the text before it on its line."""
        start = block.rfind(b"\n", 0, at) + 1
        key = block[start:at]
        got = self.prefix_cache.get(key)
        if got is None:
            m = _PREFIX.search(key)
            tag = m.group(1).strip() if m else b""
            got = (self.clock.parse(key), self.sources.of(tag))
            if len(self.prefix_cache) > 100_000:
                self.prefix_cache.clear()
            self.prefix_cache[key] = got
        return got

    def _stamps(self, scan: BlockScan, pos: np.ndarray, start: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Times and source indices of the records at ``pos`` (lines starting at ``start``): the
        ``[YYYY-MM-DD HH:MM:SS(.fff)( TAG)*] `` prefix read vectorised; any other prefix line by line."""
        t, tags_at, ok = iso_stamps(scan.a, start, pos)
        ok &= pos - start <= PREFIX_BYTES
        src = np.zeros(len(pos), dtype=np.int16)
        if ok.any():
            tag_len = np.where(ok, pos - 2 - tags_at, 0)
            width = max(int(tag_len.max()), 1)
            tags = scan.window(np.where(ok, tags_at, 0), width)
            tags[np.arange(width) >= tag_len[:, None]] = 0
            tags = tags[ok]
            if (tags == tags[0]).all():  # one process (or every line of the block from one)
                src[ok] = self._source_of_tag(tags[0].tobytes().rstrip(b"\0"))
            else:
                keys, first, inverse = np.unique(tags.view(f"S{width}").ravel(), return_index=True,
                                                 return_inverse=True)
                ids = np.zeros(len(keys), dtype=np.int16)
                for k in np.argsort(first).tolist():  # sources numbered in the order they first print
                    ids[k] = self._source_of_tag(keys[k])
                src[ok] = ids[inverse.ravel()]
        for i in np.flatnonzero(~ok).tolist():  # another prefix layout: parsed (and cached) one by one
            t[i], src[i] = self._prefix(scan.block, int(pos[i]))
        return t, src

    def _source_of_tag(self, tag: bytes) -> int:
        """Source index of a prefix's rank tags (`` TP0 EP1``); anything else is the untagged process."""
        return self.sources.of(tag.strip() if _TAGS.fullmatch(tag) else b"")

    def feed(self, block: bytes) -> None:
        self.feed_scan(BlockScan(block))

    def feed_scan(self, scan: BlockScan) -> None:
        scan.find_many(_MARKERS)  # one pass over the block for every marker
        if scan.has(b"Decode batch"):
            self._decode_block(scan)
        if scan.has(b"Prefill batch"):
            self._prefill_block(scan)
        self._rest(scan)

    def _decode_block(self, scan: BlockScan) -> None:
        """Every decode record of a block: the fields read vectorised where the line has the engines'
        plain form, the rest (another prefix, the ``[N]`` counter, damage) by ``_DECODE`` line by line."""
        pos = scan.find(b"Decode batch")
        start, end = scan.lines(pos)
        # ", #running-req: " (0.5.5+), ". #running-req: " (0.4-0.5.3) or " #running-req: " right after the marker
        head = scan.window(pos + 12, 16)
        plain = (head[:, 1:] == _RUNNING).all(axis=1)
        gap = np.where(plain & np.isin(head[:, 0], _DOT_COMMA), 1, -1)
        gap = np.where((head[:, :15] == _RUNNING).all(axis=1), 0, gap)
        ok = gap >= 0
        first = np.where(ok, pos + 12 + gap + 15, 0)
        batch, nd = read_uint(scan.a, first, 10)
        ok &= (nd >= 1) & (nd <= 9) & (scan.a[first + nd] == ord(","))
        thr_at, thr_ok = scan.next_after(pos, end, scan.find(b" gen throughput (token/s): "))
        ok &= thr_ok
        thr_at = np.where(ok, thr_at, 16)
        tok, tok_ok = read_decimal(scan, thr_at + 27)
        ok &= tok_ok
        # the graph flag comes right before the throughput in every version that prints it (0.4.6+)
        true = (scan.window(thr_at - 12, 12) == _GRAPH_TRUE).all(axis=1)
        false = (scan.window(thr_at - 13, 13) == _GRAPH_FALSE).all(axis=1)
        graph = np.where(true, 1, np.where(false, 0, -1)).astype(np.int8)
        # without it a line may still carry the flag elsewhere (or none, as 0.4.3): the regex decides
        ok &= true | false
        tok = tok.astype(np.float32)
        keep = np.ones(len(pos), dtype=bool)
        for i in np.flatnonzero(~ok).tolist():  # not the plain form: the regex, at the marker
            r = _DECODE.match(scan.block, int(pos[i]), int(end[i]))
            if r is None:
                keep[i] = False
                continue
            flag = r.group(2)
            batch[i], tok[i] = int(r.group(1)), _float(r.group(3))
            graph[i] = -1 if flag is None else int(flag == b"True")
        self.skipped += int((~keep).sum())
        if not keep.all():
            pos, start, batch, graph, tok = pos[keep], start[keep], batch[keep], graph[keep], tok[keep]
        if len(pos):
            t, src = self._stamps(scan, pos, start)
            self.decode_lines(t, batch, graph, tok, src)
            self.recognised += len(pos)

    def _prefill_block(self, scan: BlockScan) -> None:
        """Every prefill record of a block (new sequences, new tokens), as :meth:`_decode_block`."""
        pos = scan.find(b"Prefill batch")
        start, end = scan.lines(pos)
        seq_at, ok = scan.next_after(pos, end, scan.find(b" #new-seq: "))
        gap = seq_at - (pos + 13)
        ok &= (gap == 0) | ((gap == 1) & np.isin(scan.a[np.minimum(pos + 13, scan.n)], _DOT_COMMA))
        first = np.where(ok, seq_at + 11, 0)
        seqs, nd = read_uint(scan.a, first, 10)
        ok &= (nd >= 1) & (nd <= 9) & (scan.a[first + nd] == ord(","))
        tok_first = first + nd + 1
        ok &= (scan.window(np.where(ok, tok_first, 0), 13) == _NEW_TOKEN).all(axis=1)
        second = np.where(ok, tok_first + 13, 0)
        toks, nd2 = read_uint(scan.a, second, 13)
        ok &= (nd2 >= 1) & (nd2 <= 12)
        keep = np.ones(len(pos), dtype=bool)
        for i in np.flatnonzero(~ok).tolist():
            r = _PREFILL.match(scan.block, int(pos[i]), int(end[i]))
            if r is None:
                keep[i] = False
                continue
            seqs[i], toks[i] = int(r.group(1)), int(r.group(2))
        self.skipped += int((~keep).sum())
        if not keep.all():
            pos, start, seqs, toks = pos[keep], start[keep], seqs[keep], toks[keep]
        if len(pos):
            t, _ = self._stamps(scan, pos, start)
            self.prefill_lines(t, seqs, toks)
            self.recognised += len(pos)

    def _rest(self, scan: BlockScan) -> None:
        """Everything but the decode and prefill lines: captures, the server's arguments, the version."""
        block = scan.block
        if scan.has(b"Captur"):
            for m in _CAPTURE_AT.finditer(block):
                self._capture(block, m)
        for marker, pattern in zip((b"ServerArgs(", b"max_running_requests="), _ARGS_AT):
            if scan.has(marker):
                for m in pattern.finditer(block):
                    self._args(m.group())
        self.blocks += 1
        if self.log.version is None and self.blocks <= 4 and b"sglang" in block:  # start-up lines only
            v = _VERSION.search(block)
            if v:
                self.log.version = v.group(1).decode("ascii", "replace")

    def _capture(self, block: bytes, m: re.Match) -> None:
        text = m.group()
        log = self.log
        tq = _TQDM_BS.match(text)
        if tq:
            self.tqdm_sizes.add(int(tq.group(1)))
            total = _TQDM_TOTAL.search(text)
            if total:
                self.tqdm_total = max(self.tqdm_total, int(total.group(1)))
            return
        end = _CAPTURE_END.match(text)
        lst = _BS_LINE.match(text)
        if lst:
            self._sizes(int_list(lst.group(1)), "capture")
            self.recognised += 1
            return
        if end is None:
            if b" begin" in text:
                bs = _BS_LIST.search(text)
                if bs and _what(text.split(b" begin")[0][len(b"Capture "):]) == "decode":
                    self._sizes(int_list(bs.group(1)), "capture")
                self.recognised += 1
            return
        mem = _MEM_USAGE.search(text)
        bs = _BS_LIST.search(text)
        what = _what(end.group(1))
        sizes = int_list(bs.group(1)) if bs else None
        if sizes and what == "decode":
            self._sizes(sizes, "capture")
        _, src = self._prefix(block, m.start())
        log.captures.append(CaptureEvent(what, float(end.group(2)), gib_to_mib(float(mem.group(1))) if mem else None,
                                         sizes, self.sources.names[src]))
        self.recognised += 1

    def _sizes(self, sizes: list[int], origin: str) -> None:
        if not sizes:
            return
        if origin == "capture" or self.list_from != "capture":
            self.log.capture_sizes = sizes
            self.list_from = origin

    def _args(self, text: bytes) -> None:
        log = self.log
        model = _ARG_MODEL.search(text)
        if model and model.group(1).decode("utf-8", "replace") not in log.models:
            log.models.append(model.group(1).decode("utf-8", "replace"))
        bs = _ARG_BS.search(text)
        if bs:
            self._sizes(int_list(bs.group(1)), "server_args")
        mx = _ARG_MAX_BS.search(text)
        if mx and log.capture_max is None:
            log.capture_max = int(mx.group(1))
        if _ARG_DISABLE.search(text):
            log.capture_mode = "disabled"
        iv = _ARG_INTERVAL.search(text)
        if iv:
            log.decode_log_interval = int(iv.group(1))
        mr = _ARG_MAX_RUNNING.search(text)
        if mr:
            log.max_running_requests = int(mr.group(1))
        self.recognised += 1

    def finish(self):
        log = self.log
        if not log.capture_sizes and self.tqdm_sizes and len(self.tqdm_sizes) < self.tqdm_total:
            # a terminal (or a paste of it) keeps only the bar's last state: the count, not the sizes
            log.capture_count = self.tqdm_total
            log.notes.append(f"the capture progress bar counts {self.tqdm_total} sizes but shows only "
                             f"{sorted(self.tqdm_sizes)}: the capture list is not in the log")
        elif not log.capture_sizes and self.tqdm_sizes:
            log.capture_sizes = sorted(self.tqdm_sizes)
            log.notes.append("capture list from the capture progress bar (Capturing batches (bs=...))")
        if log.decode_log_interval is None:
            log.decode_log_interval = DEFAULT_DECODE_LOG_INTERVAL
            log.notes.append(f"decode_log_interval not in the log: SGLang's default "
                             f"{DEFAULT_DECODE_LOG_INTERVAL} assumed (one decode step in "
                             f"{DEFAULT_DECODE_LOG_INTERVAL} is logged)")
        out = super().finish()
        if out.capture_sizes and out.capture_max is not None and max(out.capture_sizes) != out.capture_max:
            out.notes.append(f"cuda_graph_max_bs={out.capture_max} but the captured list ends at "
                             f"{max(out.capture_sizes)}: the list wins")
        return out
