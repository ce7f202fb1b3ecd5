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

ENGINE = "sglang"
#: Texts that identify an SGLang log in its first MiB (detection by content, with weights).
CUES = ((b"Decode batch", 3), (b"Prefill batch", 3), (b"Capture cuda graph", 3), (b"server_args=ServerArgs(", 5),
        (b"CUDA graph end. elapsed=", 3), (b"decode CUDA graph end", 3), (b"Capture cuda graph end", 3), (b"Capturing batches (", 2), (b"sglang", 1),
        (b"The server is fired up and ready to roll", 5))
#: SGLang's default ``decode_log_interval`` (server_args.py).
DEFAULT_DECODE_LOG_INTERVAL = 40

#: One decode record with the ``[time tags]`` right before it, found block-wide by ``findall`` (C speed)
#: and converted with numpy.
_DECODE_ALL = re.compile(
    rb"\[([^\]\n]{0,80})\] Decode batch(?:(?: ?\[\d+\])?[.,]? #running-req: (\d+),"
    rb"(?:[^\n]* graph: (True|False)\b)?[^\n]* gen throughput \(token/s\): ([-+\w.]+))?")
#: The same record alone, for a block where some decode line does not fit ``_DECODE_ALL`` (damaged,
#: or a logging config without the ``[time]`` prefix): read line by line there.
_DECODE = re.compile(
    rb"Decode batch(?: ?\[\d+\])?[.,]? #running-req: (\d+),"
    rb"(?:[^\n]* graph: (True|False)\b)?[^\n]* gen throughput \(token/s\): ([-+\w.]+)")
_DECODE_AT = re.compile(rb"Decode batch[^\n]*")
_PREFILL_AT = re.compile(rb"Prefill batch[^\n]*")
_CAPTURE_AT = re.compile(rb"Captur(?:e|ing batches) [^\n]*")
_ARGS_AT = (re.compile(rb"ServerArgs\([^\n]*"), re.compile(rb"max_running_requests=[^\n]*"))

_PREFILL_ALL = re.compile(rb"\[([^\]\n]{0,80})\] Prefill batch(?:(?: ?\[\d+\])?[.,]? #new-seq: (\d+), #new-token: (\d+))?")
_PREFILL = re.compile(rb"Prefill batch(?: ?\[\d+\])?[.,]? #new-seq: (\d+), #new-token: (\d+)")
_PREFIX = re.compile(rb"\[[^\]\n]*?\d\d:\d\d:\d\d(?:\.\d+)?((?: [A-Z_]+\d+)*)\]\s*$")
_CAPTURE_END = re.compile(rb"Capture (.*?) end[.,] .*?(?:Time elapsed: |elapsed=)([\d.]+) ?s")
_MEM_USAGE = re.compile(rb"mem usage=([\d.]+) ?GB")
_BS_LIST = re.compile(rb"\bbs=?\s*\[([\d,\s]*)\]")
_BS_LINE = re.compile(rb"Capture cuda graph bs \[([\d,\s]*)\]")
_TQDM_BS = re.compile(rb"Capturing batches \(bs=(\d+)")
_ARG_BS = re.compile(rb"\bcuda_graph_bs(?:_decode)?=\[([\d,\s]*)\]")
_ARG_MAX_BS = re.compile(rb"\bcuda_graph_max_bs(?:_decode)?=(\d+)")
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
        self.stamp_cache: dict[bytes, tuple[float, int]] = {}
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

    def _stamps(self, prefixes: tuple[bytes, ...]) -> tuple[np.ndarray, np.ndarray]:
        """Times and source indices of the bracketed prefixes, each distinct one parsed once."""
        known = self.stamp_cache
        if len(known) > 100_000:
            known.clear()
        for p in dict.fromkeys(prefixes):  # distinct stamps in first-seen order: about one a second
            if p not in known:
                known[p] = self._prefix(b"[" + p + b"] ", len(p) + 3)
        pairs = np.array([known[p] for p in prefixes], dtype=np.float64).reshape(-1, 2)
        return pairs[:, 0].copy(), pairs[:, 1].astype(np.int16)

    def feed(self, block: bytes) -> None:
        if b"Decode batch" in block:
            found = _DECODE_ALL.findall(block)
            if len(found) != block.count(b"Decode batch"):
                self._decode_lines(block)
            elif found:
                cols = np.array(found, dtype="S80")  # one C pass over the records: (n, 4) byte strings
                del found
                ok = cols[:, 1] != b""  # a damaged line: the marker without its fields, counted and skipped
                if not ok.all():
                    self.skipped += int((~ok).sum())
                    cols = cols[ok]
                if not len(cols):
                    return self._rest(block)
                t, src = self._stamps(tuple(cols[:, 0].tolist()))
                f = cols[:, 2]
                try:
                    tok_s = cols[:, 3].astype(np.float64)
                except ValueError:  # a damaged number: convert one by one
                    tok_s = np.array([_float(x) for x in cols[:, 3].tolist()])
                self.decode_lines(t, cols[:, 1].astype(np.int32),
                                  np.where(f == b"True", 1, np.where(f == b"False", 0, -1)).astype(np.int8), tok_s, src)
                self.recognised += len(cols)
        self._rest(block)

    def _rest(self, block: bytes) -> None:
        """Everything but the decode lines: prefill lines, captures, the server's arguments."""
        found: list | None = []
        if b"Prefill batch" in block:
            found = _PREFILL_ALL.findall(block)
            if len(found) == block.count(b"Prefill batch"):
                pre, seqs, toks = zip(*found) if found else ((), (), ())
                keep = [i for i, x in enumerate(seqs) if x]
                self.skipped += len(seqs) - len(keep)
                if keep:
                    t, _ = self._stamps(tuple(pre[i] for i in keep))
                    self.p_t.extend(t)
                    self.p_b.extend(np.array([seqs[i] for i in keep]).astype(np.int64))
                    self.p_tok.extend(np.array([toks[i] for i in keep]).astype(np.int64))
                    self.recognised += len(keep)
                found = None
        if b"Prefill batch" in block and found is not None:
            for m in _PREFILL_AT.finditer(block):
                r = _PREFILL.match(m.group())
                if r is None:
                    self.skipped += 1
                    continue
                t, _ = self._prefix(block, m.start())
                self.prefill_line(t, int(r.group(1)), int(r.group(2)))
                self.recognised += 1
        if b"Captur" in block:
            for m in _CAPTURE_AT.finditer(block):
                self._capture(block, m)
        for marker, pattern in zip((b"ServerArgs(", b"max_running_requests="), _ARGS_AT):
            if marker in block:
                for m in pattern.finditer(block):
                    self._args(m.group())
        self.blocks += 1
        if self.log.version is None and self.blocks <= 4 and b"sglang" in block:  # start-up lines only
            v = _VERSION.search(block)
            if v:
                self.log.version = v.group(1).decode("ascii", "replace")

    def _decode_lines(self, block: bytes) -> None:
        """Decode records one line at a time (a block with a damaged or unprefixed decode line)."""
        for m in _DECODE_AT.finditer(block):
            r = _DECODE.match(m.group())
            if r is None:
                self.skipped += 1
                continue
            t, src = self._prefix(block, m.start())
            flag = r.group(2)
            self.decode_line(t, int(r.group(1)), -1 if flag is None else int(flag == b"True"), _float(r.group(3)), src)
            self.recognised += 1

    def _capture(self, block: bytes, m: re.Match) -> None:
        text = m.group()
        log = self.log
        tq = _TQDM_BS.match(text)
        if tq:
            self.tqdm_sizes.add(int(tq.group(1)))
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
        if not log.capture_sizes and self.tqdm_sizes:
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
