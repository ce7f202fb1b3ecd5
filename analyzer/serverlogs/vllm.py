"""vLLM server logs: the periodic stats line, the capture line and config, ``--cudagraph-metrics``
tables, ``VLLM_LOG_BATCHSIZE_INTERVAL`` forward times and ``VLLM_LOG_ITERATION_DETAILS`` lines,
in every format of releases 0.6.4 to 0.34.

Format strings (docs/serverlogs.md cites each with its file; paths in vllm-project/vllm):

* record prefix ``%(levelname)s %(asctime)s [%(fileinfo)s:%(lineno)d] %(message)s`` with datefmt
  ``%m-%d %H:%M:%S`` (no year; ``vllm/logger.py``), 0.6.4 without the brackets, and from 0.10 a
  ``(EngineCore_DP0 pid=...)`` / ``(Worker_TP0 pid=...)`` / ``(APIServer pid=...)`` process tag
  before it;
* stats: V0 ``Avg prompt throughput: %.1f tokens/s, Avg generation throughput: %.1f tokens/s,
  Running: %d reqs, Swapped: %d reqs, Pending: %d reqs, ...`` (``vllm/engine/metrics.py``), V1
  ``Engine %03d: Avg prompt throughput: ..., Running: %d reqs, Waiting: %d reqs, ...``
  (``vllm/v1/metrics/loggers.py``; optional parts after ``Waiting`` vary by version);
* capture: ``Graph capturing finished in %.0f secs, took %.2f GiB``
  (``vllm/worker/model_runner.py``, ``vllm/v1/worker/gpu_model_runner.py``,
  ``vllm/v1/worker/gpu/model_runner.py``; releases before 0.6 end at ``... in %.0f secs.``), newer
  ``CUDA graph pool memory: %s GiB (actual), %s
  GiB (estimated), difference: ...`` (``vllm/v1/worker/gpu_worker.py``);
* config: ``Initializing a V1 LLM engine (v%s) with config: ...`` whose
  ``compilation_config`` holds ``cudagraph_capture_sizes``, ``max_cudagraph_capture_size`` (older
  ``max_capture_size``) and ``cudagraph_mode``; ``non-default args: {... 'max_num_seqs': N}``;
* ``--cudagraph-metrics``: ``- Mode: ...``, ``- Capture sizes: [...]`` and rows
  ``| unpadded | padded | paddings | runtime mode | count |`` (``vllm/compilation/cuda_graph.py``);
* ``Batchsize forward time stats (batchsize, count, median_time(ms)): [(bs, n, ms), ...]``
  (``vllm/forward_context.py``; batch size = the forward's tokens);
* ``Iteration(N): X context requests, Y context tokens, Z generation requests, W generation
  tokens, iteration elapsed time: T ms`` (``vllm/v1/engine/core.py`` 0.16,
  ``vllm/v1/metrics/loggers.py`` 0.34).

The stats line does not say whether a graph ran; the ``--cudagraph-metrics`` table does, per
forward pass (runtime mode ``NONE`` = eager).
"""
from __future__ import annotations

import re
from collections import Counter

import numpy as np

from ._base import NO_YEAR, CaptureEvent, ForwardTime, Reader as BaseReader, gib_to_mib, int_list
from ._scan import BlockScan, literal_at, month_day_stamps, read_decimal_end, read_uint

ENGINE = "vllm"
CUES = ((b"Avg prompt throughput:", 4), (b"Graph capturing finished in", 4), (b"LLM engine (v", 5),
        (b"vLLM API server version", 5), (b"Batchsize forward time stats", 4), (b"CUDAGraph Stats", 4),
        (b"(EngineCore", 3), (b"[gpu_model_runner.py:", 3), (b"vllm", 1), (b"Iteration(", 1))

_STATS_MARK = b"Avg prompt throughput:"
#: The stats line's literals between its numbers, as the block-wide read checks them.
_STATS_LITERALS = (b" tokens/s, Avg generation throughput: ", b" tokens/s, Running: ", b" reqs")
_STATS = re.compile(rb"Avg prompt throughput: ([\d.]+) tokens/s, Avg generation throughput: ([\d.]+) tokens/s, "
                    rb"Running: (\d+) reqs")
_ENGINE_TAG = re.compile(rb"(Engine \d+): $")
_PROC_TAG = re.compile(rb"\(([A-Za-z]+(?:_[A-Za-z]*\d+)*)(?: pid=\d+)?\)")
_CAPTURE = re.compile(rb"Graph capturing finished in ([\d.]+) secs?(?:, took ([-\d.]+) GiB)?")
_POOL = re.compile(rb"CUDA graph pool memory: ([\d.]+) GiB \(actual\), ([\d.]+) GiB \(estimated\)")
_SIZES = re.compile(rb"""cudagraph_capture_sizes['"]?\s*[:=]\s*\[([\d,\s]*)\]""")
_MAX_SIZE = re.compile(rb"""max_(?:cudagraph_)?capture_size['"]?\s*[:=]\s*(\d+)""")
_MODE = re.compile(rb"""cudagraph_mode['"]?\s*[:=]\s*<?['"]?(?:CUDAGraphMode\.)?([A-Z_]+|\[\d, ?\d\]|\d)""")
#: ``cudagraph_mode`` as the JSON form of the config prints it (``vllm/config/compilation.py`` CUDAGraphMode values).
_MODE_VALUES = {b"0": "NONE", b"1": "PIECEWISE", b"2": "FULL", b"[2,0]": "FULL_DECODE_ONLY", b"[2,1]": "FULL_AND_PIECEWISE"}
#: 0.9-0.10 configs say it with two switches instead of ``cudagraph_mode``.
_FULL_GRAPH = re.compile(rb"""full_cuda_graph['"]?\s*[:=]\s*(true|false|True|False)""")
_EAGER = re.compile(rb"""(?<!')\benforce_eager['"]?\s*[:=]\s*(?:True|true)\b(?!')""")
_MAX_SEQS = re.compile(rb"""max_num_seqs['"]?\s*[:=]\s*(\d+)""")
#: The model in the engine's config dump (``with config: model='Qwen/Qwen3-8B', speculative_config=…``).
_MODEL = re.compile(rb"""with config: model=['"]([^'"\n]+)['"]""")
_VERSION = re.compile(rb"(?:LLM engine \(v|vLLM API server version |vLLM version:? v?)(\d+\.\d+[\w.+-]*)")
_TABLE_MODE = re.compile(rb"- Mode: (?:CUDAGraphMode\.)?([A-Z_]+)")
_TABLE_SIZES = re.compile(rb"- Capture sizes: \[([\d,\s]*)\]")
_ROW = re.compile(rb"\|\s*(\d+)\s*\|\s*(\d+)\s*\|\s*(\d+)\s*\|\s*(?:CUDAGraphMode\.)?([A-Z_]+)\s*\|\s*(\d+)\s*\|")
_FWD = re.compile(rb"Batchsize forward time stats \(batchsize, count, median_time\(ms\)\): \[([^\n]*)")
_FWD_ITEM = re.compile(rb"\((\d+), (\d+), ([\d.]+)\)")
_ITER_AT = re.compile(rb"Iteration\(\d+\)[^\n]*")
_ITER = re.compile(rb"Iteration\(\d+\): (\d+) context requests, (\d+) context tokens, (\d+) generation requests, "
                   rb"(\d+) generation tokens, iteration elapsed time: ([\d.]+) ms")
_PROFILED = re.compile(rb"Profiling CUDA graph memory: ([^\n]*)")
_PROFILED_ITEM = re.compile(rb"([A-Z_]+)=(\d+) \(largest=(\d+)\)")
_ESTIMATED = re.compile(rb"Estimated CUDA graph memory: ([\d.]+) GiB")


class Reader(BaseReader):
    ENGINE = ENGINE

    def __init__(self, path: str) -> None:
        super().__init__(path)
        self.table_seen = False
        self.rows: dict[tuple[int, int, int, str], int] = {}
        self.fwd: dict[int, list[float]] = {}  # bs -> [count, count x median]
        self.sizes_from: str | None = None
        self.estimated_mib: float | None = None
        self.tag_cache: dict[bytes, int] = {}
        self.raw_rows: dict[tuple[bytes, ...], int] = {}

    def _where(self, block: bytes, at: int) -> tuple[float, bytes]:
        start = block.rfind(b"\n", 0, at) + 1
        prefix = block[start:at]
        return self.clock.parse(prefix), prefix

    def _tag(self, prefix: bytes) -> int:
        got = self.tag_cache.get(prefix)
        if got is None:
            if len(self.tag_cache) > 100_000:
                self.tag_cache.clear()
            got = self.tag_cache[prefix] = self._tag_of(prefix)
        return got

    def _tag_of(self, prefix: bytes) -> int:
        e = _ENGINE_TAG.search(prefix)
        if e:
            return self.sources.of(e.group(1))
        p = _PROC_TAG.search(prefix)
        return self.sources.of(p.group(1) if p else b"")

    #: Read stats lines block-wide (False: every one with the regex; the tests compare the two).
    fast = True

    def feed(self, block: bytes) -> None:
        self.feed_scan(BlockScan(block))

    def feed_scan(self, scan: BlockScan) -> None:
        if scan.has(_STATS_MARK):
            self._stats_block(scan)
        self._rest(scan.block)

    def _stats_block(self, scan: BlockScan) -> None:
        """Every stats line of the block: numbers, month-day stamp and process tag read with numpy where
        the line has the plain form; any other line (or every line, ``fast`` False) with the regexes."""
        block, a = scan.block, scan.a
        pos = scan.find(_STATS_MARK)
        start, end = scan.lines(pos)
        n = len(pos)
        ok = np.full(n, self.fast) & (a[pos + 22] == ord(" "))
        prompt, at, good = read_decimal_end(scan, pos + 23)
        ok &= good
        gen = np.zeros(n)
        run = np.zeros(n, dtype=np.int64)
        for k, lit in enumerate(_STATS_LITERALS):
            at = np.where(ok & (at <= scan.n), at, scan.n)
            ok &= literal_at(scan, at, lit)
            at = at + len(lit)
            if k == 0:
                gen, at, good = read_decimal_end(scan, np.minimum(at, scan.n))
                ok &= good
            elif k == 1:
                run, nd = read_uint(a, np.minimum(at, scan.n), 12)
                ok &= nd >= 1
                at = at + nd
        t, stamp_at, good = month_day_stamps(a, start, pos, NO_YEAR)
        ok &= good
        src = np.zeros(n, dtype=np.int64)
        keep = ok.copy()
        # sources are numbered in the order they first print: resolve each new tag at its first line
        events: list[tuple[int, int]] = []  # (row, key index or -1: a line read with the regex)
        inverse = np.zeros(n, dtype=np.int64)
        if ok.any():
            width = int((pos - start)[ok].max())
            keys = scan.window(np.where(ok, start, 0), width).copy()
            cols = np.arange(width)
            keys[cols >= (pos - start)[:, None]] = 0
            keys[(cols >= (stamp_at - start)[:, None]) & (cols < (stamp_at - start + 14)[:, None])] = 0
            rows = np.flatnonzero(ok)
            _, first, inv = np.unique(keys[rows].view(f"V{width}").ravel(), return_index=True, return_inverse=True)
            inverse[rows] = inv.ravel()
            events += [(int(rows[f]), k) for k, f in enumerate(first.tolist())]
        slow = np.flatnonzero(~ok).tolist()
        matched = {}
        for i in slow:
            r = _STATS.match(block, int(pos[i]), int(end[i]))
            try:  # ``[\d.]+`` also takes ``1.2.3``: a damaged line, counted
                matched[i] = (float(r.group(1)), float(r.group(2)), int(r.group(3))) if r else None
            except ValueError:
                matched[i] = None
            if matched[i] is None:
                self.skipped += 1
                continue
            events.append((i, -1))
        ids = {}
        for i, k in sorted(events):
            prefix = block[int(start[i]):int(pos[i])]
            if k >= 0:
                ids[k] = self._tag(prefix)
            else:
                t[i], src[i] = self.clock.parse(prefix), self._tag(prefix)
                prompt[i], gen[i], run[i] = matched[i]
                keep[i] = True
        if ids:
            lut = np.array([ids[k] for k in range(len(ids))], dtype=np.int64)
            src[ok] = lut[inverse[ok]]
        if keep.any():
            t, run, gen, src, prompt = t[keep], run[keep], gen[keep], src[keep], prompt[keep]
            self.decode_lines(t, run, np.full(len(t), -1, dtype=np.int8), gen, src)
            pre = prompt > 0
            k = int(pre.sum())
            if k:
                self.prefill_lines(t[pre], np.full(k, -1, dtype=np.int64), np.full(k, -1, dtype=np.int64))
            self.recognised += len(t)

    def _rest(self, block: bytes) -> None:
        log = self.log
        if b"Iteration(" in block:
            for m in _ITER_AT.finditer(block):
                r = _ITER.match(m.group())
                if r is None:
                    continue  # Iteration(...) is a common word; only the engine's line counts
                t, prefix = self._where(block, m.start())
                self.iteration_line(t, int(r.group(3)), int(r.group(1)), float(r.group(5)), self._tag(prefix))
                self.recognised += 1
        if b"Graph capturing finished" in block:
            for m in _CAPTURE.finditer(block):
                _, prefix = self._where(block, m.start())
                mem = gib_to_mib(float(m.group(2))) if m.group(2) else None  # older releases: seconds only
                log.captures.append(CaptureEvent("decode", float(m.group(1)), mem, None,
                                                 self.sources.names[self._tag(prefix)]))
                self.recognised += 1
        if b"CUDA graph pool memory" in block:
            for m in _POOL.finditer(block):
                _, prefix = self._where(block, m.start())
                tag = self.sources.names[self._tag(prefix)]
                ev = next((c for c in reversed(log.captures) if c.source == tag), None)
                if ev is None:
                    log.captures.append(CaptureEvent("decode", None, gib_to_mib(float(m.group(1))), None, tag,
                                                     gib_to_mib(float(m.group(2)))))
                else:
                    ev.estimated_mib = gib_to_mib(float(m.group(2)))
                self.recognised += 1
        if b"cudagraph" in block or b"capture_size" in block or b"max_num_seqs" in block or b"enforce_eager" in block:
            self._config(block)
        if b"with config: model=" in block:
            for m in _MODEL.finditer(block):
                name = m.group(1).decode("utf-8", "replace")
                if name not in log.models:
                    log.models.append(name)
        if b"CUDAGraph" in block or b"- Capture sizes:" in block:
            self.table_seen = True
            at = len(block)
            while (at := block.rfind(b"- Mode: ", 0, at)) >= 0:  # the last table's mode is the one kept
                m = _TABLE_MODE.match(block, at)
                if m:
                    log.capture_mode = m.group(1).decode("ascii")
                    break
            for text in dict.fromkeys(_TABLE_SIZES.findall(block)):  # one table per interval
                self._sizes(int_list(text), "table")
        if self.table_seen and b"|" in block:
            found = _ROW.findall(block)  # (unpadded, padded, paddings, mode, count) as bytes: summed per key
            raw = self.raw_rows
            for (*key, n), times in Counter(found).items():  # tables repeat their rows: each kind once
                key = tuple(key)
                raw[key] = raw.get(key, 0) + int(n) * times
            self.recognised += len(found)
        if b"Batchsize forward time stats" in block:
            for m in _FWD.finditer(block):
                items = _FWD_ITEM.findall(m.group(1))
                if not items:
                    self.skipped += 1
                    continue
                for bs, n, ms in items:
                    acc = self.fwd.setdefault(int(bs), [0.0, 0.0])
                    acc[0] += int(n)
                    acc[1] += int(n) * float(ms)
                self.recognised += 1
        if b"CUDA graph memory" in block:
            for m in _PROFILED.finditer(block):
                items = _PROFILED_ITEM.findall(m.group(1))
                if items and log.capture_max is None:
                    log.capture_max = max(int(x[2]) for x in items)
                    log.capture_count = log.capture_count or max(int(x[1]) for x in items)
            for m in _ESTIMATED.finditer(block):
                self.estimated_mib = gib_to_mib(float(m.group(1)))
        if log.version is None and (b"LLM engine (v" in block or b"version" in block):
            v = _VERSION.search(block)
            if v:
                log.version = v.group(1).decode("ascii", "replace")

    def _sizes(self, sizes: list[int], origin: str) -> None:
        if sizes and (self.sizes_from is None or origin == "config" or self.sizes_from == origin):
            self.log.capture_sizes = sizes
            self.sizes_from = origin

    def _config(self, block: bytes) -> None:
        log = self.log
        for m in _SIZES.finditer(block):
            self._sizes(int_list(m.group(1)), "config")
        for m in _MAX_SIZE.finditer(block):
            log.capture_max = int(m.group(1))
        for m in _MODE.finditer(block):
            v = m.group(1).replace(b" ", b"")
            log.capture_mode = _MODE_VALUES.get(v) or v.decode("ascii")
        if log.capture_mode is None and b"enforce_eager" in block and _EAGER.search(block):
            log.capture_mode = "NONE"
        if log.capture_mode is None:
            full = _FULL_GRAPH.search(block)
            if full:
                log.capture_mode = "FULL" if full.group(1).lower() == b"true" else "PIECEWISE"
        for m in _MAX_SEQS.finditer(block):
            log.max_running_requests = int(m.group(1))

    def finish(self):
        log = self.log
        for (u, p, k, mode), n in self.raw_rows.items():
            key = (int(u), int(p), int(k), mode.decode("ascii"))
            self.rows[key] = self.rows.get(key, 0) + n
        if self.rows:
            top = max(log.capture_sizes) if log.capture_sizes else log.capture_max
            eager = {k: n for k, n in self.rows.items() if k[3] == "NONE"}
            log.graph_passes = sum(n for k, n in self.rows.items() if k[3] != "NONE")
            log.eager_passes = sum(eager.values())
            if top is not None:
                log.eager_passes_above = sum(n for k, n in eager.items() if k[0] > top)
                log.eager_passes_within = log.eager_passes - log.eager_passes_above
            log.padding = {"unpadded_tokens": sum(k[0] * n for k, n in self.rows.items()),
                           "padded_tokens": sum(k[1] * n for k, n in self.rows.items()),
                           "paddings": sum(k[2] * n for k, n in self.rows.items())}
        log.forward_times = [ForwardTime(bs, int(c), round(s / c, 4)) for bs, (c, s) in sorted(self.fwd.items()) if c]
        if self.estimated_mib is not None and log.captures and log.captures[0].estimated_mib is None:
            log.captures[0].estimated_mib = self.estimated_mib
        return super().finish()
