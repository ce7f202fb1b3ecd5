"""What a server log or scrape says about CUDA graphs: eager share, the capture ceiling, throughput.

Definitions (all vectorised over the log's decode-line columns):

* **Decode lines**: the engine's periodic decode record, one per logged interval (SGLang's
  ``Decode batch``: one decode step in ``decode_log_interval``, default 40; vLLM's stats line:
  one snapshot per stats interval, 10 s by default in V1; TensorRT-LLM's iteration line with no
  context request: every iteration), or per scrape for metrics. ``batch``: its running
  decode requests.
* **graph / eager** (``counted``): SGLang logs count *lines* by their ``cuda graph: True/False``
  flag (sampled steps); vLLM's ``--cudagraph-metrics`` tables and SGLang's
  ``sglang:cuda_graph_passes_total`` count forward *passes* (every step). Null when the input
  does not say (vLLM stats lines alone, TensorRT-LLM).
* **eager_above_max** (ceiling): eager with the batch above the largest captured size
  ``max_captured``; **eager_within_captured** (fallback): eager at or under it. vLLM's tables
  split by the pass's unpadded tokens.
* **lines_above_max**: decode lines whose batch is above ``max_captured`` (whatever the line says
  about graphs: every engine runs those eager).
* **Absorbing ceiling state**: the batch crosses above ``max_captured`` and stays above it for at
  least :data:`ABSORBING_MIN_LINES` consecutive decode lines of one process, spanning at least
  :data:`ABSORBING_MIN_SECONDS` where the lines carry times. (Eager steps are slower, requests stay
  longer, the batch grows: SGLang #33483.) Null when ``max_captured`` is unknown or the log has
  no decode line.
* **Throughput at similar batch**: per-request generation throughput (the line's gen throughput
  / its batch, token/s per request), median over graph lines with batch in
  ``[(1 - NEAR) x max, max]`` against eager lines in ``(max, (1 + NEAR) x max]``
  (:data:`NEAR` = 0.25); and over eager fallback lines against graph lines at the same batch.
  SGLang's throughput spans the whole interval while its flag is one step's. Where the lines do
  not flag graphs (vLLM, TensorRT-LLM), lines above the ceiling count as eager and the rest as graph.
* **Inter-token latency** (``/metrics`` only; :func:`inter_token_latency`): the engine's histogram of the time
  between a request's successive output tokens (:data:`launchgap.serverlogs.prometheus.INTER_TOKEN`), ``mean_ms``
  = its sum over its count: between the first and the last scrape where the series has two scrapes with tokens
  between them (counters summed over restarts), else since the server started (one scrape). ``p50_ms_low`` /
  ``_high``: the histogram bucket holding the median token of that window. ``by_batch``: the same per running batch,
  each interval between two scrapes under the running requests its later scrape read. Every token after a request's first
  counts: decode steps and the prefill or mixed steps they wait behind, so it is the server's time per output
  token as its clients see it, at the running batch of the same scrapes (``batch_median``), not one step's time.
* **Distribution**: decode lines per batch size (TensorRT-LLM and vLLM iteration lines: every
  iteration; SGLang lines: one step in ``decode_log_interval``; vLLM stats lines: one snapshot
  per stats interval, a time sample). Prefill lines are counted apart and never in it.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ._base import SLICE, ServerLog, bincount
from .prometheus import INTER_TOKEN, RUNNING, counter_total

ABSORBING_MIN_LINES = 20
ABSORBING_MIN_SECONDS = 60.0
NEAR = 0.25


@dataclass
class CeilingRun:
    """The longest stretch of consecutive decode lines (one process) above the ceiling."""

    first_line: int
    lines: int
    seconds: float | None
    median_batch: float
    to_end: bool


@dataclass(frozen=True)
class InterTokenLatency:
    """A ``/metrics`` series' inter-token latency (module text): the histogram read, its mean (ms), the tokens it
    counts, over which window, and the bucket holding the median token (ms; ``None`` where the scrapes hold no
    buckets)."""

    metric: str
    mean_ms: float
    tokens: int
    window: str
    p50_ms_low: float | None
    p50_ms_high: float | None
    #: Per running batch: (batch, mean ms, tokens, intervals) over the intervals between two scrapes whose later scrape
    #: read that many running requests (:func:`_by_running_batch`), ascending by batch.
    by_batch: tuple[tuple[int, float, int, int], ...] = ()

    def at_batch(self, batch: int | None) -> tuple[int, float, int, int] | None:
        """The per-batch entry of ``batch`` (None where no interval ran it)."""
        return next((e for e in self.by_batch if e[0] == batch), None)

    def to_dict(self) -> dict:
        return {"metric": self.metric, "mean_ms": round(self.mean_ms, 3), "tokens": self.tokens,
                "window": self.window, "p50_ms_low": self.p50_ms_low, "p50_ms_high": self.p50_ms_high,
                "by_batch": [{"batch": b, "mean_ms": round(m, 3), "tokens": n, "intervals": k}
                             for b, m, n, k in self.by_batch]}


def inter_token_latency(log: ServerLog) -> InterTokenLatency | None:
    """The inter-token latency of a ``/metrics`` series (module text); ``None`` for a log, or where no scrape holds
    the engine's histogram or it counts no token."""
    if log.kind != "metrics" or not log.scrapes:
        return None
    name = next((n for n in INTER_TOKEN.get(log.engine, ()) if any(f"{n}_count" in v for v in log.scrapes)), None)
    if name is None:
        return None
    have = [k for k, v in enumerate(log.scrapes) if f"{name}_count" in v and f"{name}_sum" in v]
    counts = [log.scrapes[k][f"{name}_count"] for k in have]
    sums = [log.scrapes[k][f"{name}_sum"] for k in have]
    tokens, total = counter_total(counts), counter_total(sums)
    window = "since the server started"
    if len(have) > 1 and tokens - counts[0] > 0:  # the tokens between the first and the last scrape
        tokens, total, window = tokens - counts[0], total - sums[0], "between the first and the last scrape"
    if tokens <= 0:
        return None
    lo, hi = _median_bucket([log.histograms[k].get(name, []) for k in have], window != "since the server started")
    run = [log.scrapes[k].get(RUNNING.get(log.engine, ""), np.nan) for k in have]
    return InterTokenLatency(name, 1e3 * total / tokens, int(round(tokens)), window, lo, hi,
                             _by_running_batch(np.array(sums), np.array(counts), np.array(run, dtype=float)))


def _by_running_batch(sums: np.ndarray, counts: np.ndarray, running: np.ndarray) -> tuple:
    """Per running batch, the inter-token latency of the intervals between consecutive scrapes (``sums`` and
    ``counts`` of the histogram and the running-requests gauge per scrape): an interval counts under the batch its
    later scrape read (a sample of the interval's batch), where tokens came in it and no restart (a counter's drop)
    lies inside; its tokens' time over its tokens. (batch, mean ms, tokens, intervals) ascending by batch."""
    if counts.size < 2:
        return ()
    ds, dc, r = np.diff(sums), np.diff(counts), running[1:]
    ok = (dc > 0) & (ds >= 0) & np.isfinite(r) & (r >= 0.5)
    if not ok.any():
        return ()
    b = np.rint(r[ok]).astype(np.int64)
    sizes, at = np.unique(b, return_inverse=True)
    s, c = np.bincount(at, weights=ds[ok]), np.bincount(at, weights=dc[ok])
    k = np.bincount(at)
    return tuple((int(sizes[i]), float(1e3 * s[i] / c[i]), int(round(c[i])), int(k[i])) for i in range(sizes.size))


def _median_bucket(hists: list[list[tuple[float, float]]], between: bool) -> tuple[float | None, float | None]:
    """The bucket (ms, its lower and upper bound) holding the median observation of the last scrape's cumulative
    buckets, less the first scrape's where ``between`` (the window of the mean); ``(None, None)`` where the scrapes
    hold no buckets, a restart came between them or the window has none."""
    last = dict(hists[-1]) if hists and hists[-1] else {}
    if not last:
        return None, None
    first = dict(hists[0]) if between else {}
    les = sorted(last)
    cum = np.array([last[le] - first.get(le, 0.0) for le in les])
    if cum[-1] <= 0 or (np.diff(cum) < 0).any():
        return None, None
    i = int(np.searchsorted(cum, cum[-1] / 2))
    if i == 0 and not np.isfinite(les[0]):  # the +Inf bucket alone: it bounds nothing
        return None, None
    lo = 0.0 if i == 0 else les[i - 1] * 1e3
    return round(lo, 3), (round(les[i] * 1e3, 3) if np.isfinite(les[i]) else None)


@dataclass
class LogDiagnosis:
    log: ServerLog
    counted: str | None
    graph: int | None
    eager: int | None
    eager_above_max: int | None
    eager_within_captured: int | None
    max_captured: int | None
    lines_above_max: int | None
    absorbing: bool | None
    run: CeilingRun | None
    distribution: dict[int, int]
    distribution_basis: str
    prefill_lines: int
    graph_tok_s_per_req_near_max: float | None
    eager_tok_s_per_req_near_max: float | None
    fallback_tok_s_per_req: float | None
    graph_tok_s_per_req_same_batch: float | None
    batch_median: float | None = None
    inter_token: InterTokenLatency | None = None
    notes: list[str] = field(default_factory=list)

    @property
    def eager_share(self) -> float | None:
        """Eager share of the decode iterations counted (graph + eager), or None."""
        if self.graph is None or self.eager is None or self.graph + self.eager == 0:
            return None
        return self.eager / (self.graph + self.eager)

    def to_dict(self) -> dict:
        """The ``logs[]`` entry of ``launchgap.report/1`` (docs/json.md)."""
        lg = self.log
        last = lg.scrapes[-1] if lg.scrapes else {}
        return {
            "file": lg.path, "files": list(lg.files or [lg.path]), "engine": lg.engine, "kind": lg.kind, "version": lg.version,
            "models": list(lg.models),
            "capture": {"sizes": list(lg.capture_sizes) if lg.capture_sizes else None,
                        "count": lg.capture_count, "mode": lg.capture_mode,
                        "seconds": lg.capture_seconds, "memory_mib": lg.capture_memory_mib},
            "max_running_requests": lg.max_running_requests,
            "decode": {"lines": int(len(lg.decode_batch)) if lg.kind == "log" else None,
                       "counted": self.counted, "graph": self.graph, "eager": self.eager,
                       "eager_above_max": self.eager_above_max, "eager_within_captured": self.eager_within_captured,
                       "batch": lg.decode_batch.tolist()},
            "ceiling": {"max_captured": self.max_captured, "absorbing": self.absorbing,
                        "lines_above_max": self.lines_above_max,
                        "absorbing_from_line": self.run.first_line if self.absorbing and self.run else None},
            "metrics": {k: round(v, 6) for k, v in sorted(last.items())},
            "inter_token_latency": self.inter_token.to_dict() if self.inter_token else None,
            "skipped_lines": lg.skipped_lines,
            "notes": list(lg.notes) + list(self.notes),
        }


def _runs_above(batch: np.ndarray, top: int) -> tuple[np.ndarray, np.ndarray]:
    """(start, length) of each run of lines with ``batch > top``, a slice at a time (a log has millions)."""
    n = len(batch)
    if not n:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    edges = []
    for i in range(0, n, SLICE):
        lo = max(i - 1, 0)  # one line of overlap: a change at a slice's first line is seen
        above = batch[lo:i + SLICE] > top
        edges.append(np.flatnonzero(above[1:] != above[:-1]) + lo + 1)
    bounds = np.concatenate([[0], *edges, [n]])
    runs = batch[bounds[:-1]] > top
    starts = bounds[:-1][runs]
    return starts, bounds[1:][runs] - starts


def ceiling_run(batch: np.ndarray, time_s: np.ndarray, source: np.ndarray, top: int) -> CeilingRun | None:
    """The longest run above ``top`` among each process's lines (None if no line is above)."""
    best: CeilingRun | None = None
    one = len(source) == 0 or _count(lambda s: s != source[0], source) == 0
    for s in (source[:1] if one else np.unique(source)):  # one loop per process (a handful), not per line
        mine = None if one else source == s  # one process: no mask or copies (millions of lines)
        bs = batch if mine is None else batch[mine]
        starts, lengths = _runs_above(bs, top)
        if not len(starts):
            continue
        t = time_s if mine is None else time_s[mine]
        ends = starts + lengths - 1
        span = t[ends].astype(np.float64) - t[starts]
        qualifies = (lengths >= ABSORBING_MIN_LINES) & (np.isnan(span) | (span >= ABSORBING_MIN_SECONDS))
        order = np.lexsort((lengths, qualifies))  # qualifying first, then longest
        k = int(order[-1])
        first = int(starts[k]) if mine is None else int(np.flatnonzero(mine)[starts[k]])
        run = CeilingRun(first_line=first, lines=int(lengths[k]),
                         seconds=None if np.isnan(span[k]) else float(span[k]),
                         median_batch=float(np.median(bs[starts[k]:ends[k] + 1])),
                         to_end=bool(ends[k] == len(bs) - 1))
        if best is None or (_qualifies(run), run.lines) > (_qualifies(best), best.lines):
            best = run
    return best


def _order_keys(v: np.ndarray) -> np.ndarray:
    """float32 values as uint32 keys in the same order (IEEE bits, negatives flipped)."""
    bits = v.view(np.uint32)
    return np.where(bits >> 31 == 1, ~bits, bits | np.uint32(0x80000000))


def _from_key(k: int) -> np.float32:
    bits = np.uint32(k & 0x7FFFFFFF) if k >> 31 else np.uint32(~k & 0xFFFFFFFF)
    return np.array([bits], dtype=np.uint32).view(np.float32)[0]


def streamed_median(values) -> float | None:
    """``np.median`` of the float32 values that ``values()`` yields in pieces, without holding them:
    an exact radix select over their bits (a histogram of the high 16 bits, then of the low 16 bits
    within the bins that hold the middle ranks). Two passes over the pieces; None when there are none."""
    high = np.zeros(1 << 16, dtype=np.int64)
    for v in values():
        high += np.bincount(_order_keys(v) >> 16, minlength=1 << 16)
    n = int(high.sum())
    if not n:
        return None
    cum = np.cumsum(high)
    ranks = sorted({(n - 1) // 2, n // 2})
    bins = {r: int(np.searchsorted(cum, r, side="right")) for r in ranks}
    low = {h: np.zeros(1 << 16, dtype=np.int64) for h in set(bins.values())}
    for v in values():
        k = _order_keys(v)
        for h, counts in low.items():
            counts += np.bincount(k[(k >> 16) == h] & 0xFFFF, minlength=1 << 16)
    picked = []
    for r in ranks:
        h = bins[r]
        before = int(cum[h - 1]) if h else 0
        lo = int(np.searchsorted(np.cumsum(low[h]), r - before, side="right"))
        picked.append(_from_key((h << 16) | lo))
    a, z = picked[0], picked[-1]
    return float(np.float32((a + z) / np.float32(2))) if len(picked) > 1 else float(a)


def _slices(*cols: np.ndarray):
    """The columns a :data:`SLICE` of lines at a time."""
    n = len(cols[0])
    for i in range(0, n, SLICE):
        yield tuple(c[i:i + SLICE] for c in cols)


def _count(cond, *cols: np.ndarray) -> int:
    """Lines where ``cond(*columns)`` holds, counted a slice at a time (no full-length masks)."""
    return sum(int(cond(*part).sum()) for part in _slices(*cols))


def _in(x: np.ndarray, values: np.ndarray) -> np.ndarray:
    """``np.isin`` for small non-negative integers, through a lookup table a slice at a time."""
    lut = np.zeros(max(int(x.max()) if len(x) else 0, int(values.max()) if len(values) else 0) + 1, dtype=bool)
    lut[values[values >= 0]] = True
    out = np.zeros(len(x), dtype=bool)
    for i in range(0, len(x), SLICE):
        xs = x[i:i + SLICE]
        out[i:i + SLICE] = (xs >= 0) & lut[np.maximum(xs, 0)]
    return out


def _qualifies(run: CeilingRun) -> bool:
    return run.lines >= ABSORBING_MIN_LINES and (run.seconds is None or run.seconds >= ABSORBING_MIN_SECONDS)


def _median(x: np.ndarray) -> float | None:
    x = x[np.isfinite(x)]
    return float(np.median(x)) if len(x) else None


def diagnose(log: ServerLog) -> LogDiagnosis:
    """The diagnosis of one log or scrape file (definitions in the module text)."""
    b = log.decode_batch
    g = log.decode_graph
    top = log.max_captured
    notes: list[str] = []
    counted = graph = eager = above = within = None
    if log.graph_passes is not None:
        counted, graph, eager = "passes", log.graph_passes, log.eager_passes
        above, within = log.eager_passes_above, log.eager_passes_within
    elif len(g) and (g >= 0).any():
        counted = "lines"
        graph, eager = int((g == 1).sum()), int((g == 0).sum())
        if top is not None:
            above = _count(lambda bs, gs: (gs == 0) & (bs > top), b, g)
            within = eager - above
        if graph + eager < len(g):
            notes.append(f"{len(g) - graph - eager} decode lines do not say whether a graph ran (left out of the "
                         "counts)")
    lines_above = _count(lambda bs: bs > top, b) if top is not None and log.kind == "log" else None
    run = ceiling_run(b, log.decode_time_rel_s, log.decode_source, top) if top is not None and len(b) else None
    absorbing = None if top is None or not len(b) else bool(run is not None and _qualifies(run))
    # the distribution: iteration lines where the engine logs every iteration, else decode lines
    if len(log.iter_batch):
        dec = np.concatenate([ib[(ic == 0) & (ib > 0)] for ib, ic in _slices(log.iter_batch, log.iter_context)]
                             or [np.zeros(0, dtype=np.int64)])
        basis = "every decode iteration (per-iteration log lines, prefill and mixed iterations left out)"
    else:
        dec = None  # the decode lines themselves: counted below without a copy
        basis = {"sglang": f"decode lines: one decode step in decode_log_interval={log.decode_log_interval}",
                 "vllm": "stats lines: the running requests once per stats interval (a time sample)",
                 "tensorrt_llm": "every decode iteration"}.get(log.engine, "decode lines")
        if log.kind == "metrics":
            basis = "the running-requests gauge once per scrape"
    hist = bincount(b if not len(b) or b.min() >= 0 else b[b >= 0])  # batch sizes are small ints
    counts = bincount(dec) if dec is not None else hist.copy()
    counts[:1] = 0  # an idle line (batch 0) is no decode step
    sizes = np.flatnonzero(counts)
    dist = {int(s): int(counts[s]) for s in sizes}
    batch_median = float(np.searchsorted(np.cumsum(hist), (hist.sum() + 1) / 2)) if hist.sum() else None
    prefill = int(len(log.prefill_time_rel_s)) + (int(((log.iter_context > 0)).sum()) if log.engine == "vllm" else 0)
    g_near = e_near = fb = g_same = None
    if top is not None and len(b) and not (g >= 0).any():
        # the lines do not say (vLLM, TensorRT-LLM): above the ceiling is eager on every engine, under it a graph
        g = (b <= top).view(np.int8)  # 1 graph, 0 eager (one byte per line, no 64-bit temporary)
        notes.append("graph vs eager throughput compares lines by the ceiling (the lines do not flag graphs)")
    def per_req(cond) -> float | None:
        """Median per-request throughput (token/s, float32) of the lines where ``cond(batch, graph)`` holds."""
        def values():
            for i in range(0, len(b), SLICE):
                bs = b[i:i + SLICE]
                sel = cond(bs, g[i:i + SLICE]) & (bs > 0)
                v = log.decode_tok_s[i:i + SLICE][sel].astype(np.float32) / bs[sel].astype(np.float32)
                yield v[np.isfinite(v)]
        return streamed_median(values)

    if top is not None and len(b):
        lo, hi = (1 - NEAR) * top, (1 + NEAR) * top
        g_near = per_req(lambda bs, gs: (gs == 1) & (bs <= top) & (bs >= lo))
        e_near = per_req(lambda bs, gs: (gs == 0) & (bs > top) & (bs <= hi))
        fallback = np.zeros(top + 1, dtype=np.int64)  # eager lines per batch size within the captured range
        for bs, gs in _slices(b, g):
            fallback += np.bincount(bs[(gs == 0) & (bs <= top) & (bs >= 0)], minlength=top + 1)
        if fallback.any():
            fb = per_req(lambda bs, gs: (gs == 0) & (bs <= top))
            sizes_fb = np.flatnonzero(fallback)
            g_same = per_req(lambda bs, gs: (gs == 1) & _in(bs, sizes_fb))
    return LogDiagnosis(log=log, counted=counted, graph=graph, eager=eager, eager_above_max=above,
                        eager_within_captured=within, max_captured=top, lines_above_max=lines_above,
                        absorbing=absorbing, run=run, distribution=dist, distribution_basis=basis,
                        prefill_lines=prefill, graph_tok_s_per_req_near_max=g_near,
                        eager_tok_s_per_req_near_max=e_near, fallback_tok_s_per_req=fb,
                        graph_tok_s_per_req_same_batch=g_same, batch_median=batch_median,
                        inter_token=inter_token_latency(log), notes=notes)


def inter_token_text(d: LogDiagnosis) -> str:
    """The inter-token latency in one sentence, for the CLI and the Server page alike; empty where none is known:
    ``18.0 ms mean over 2,000 tokens between the first and the last scrape (vllm:inter_token_latency_seconds; the
    median token in its 10-25 ms bucket), at a median 20 running requests: the server's time per output token, the
    prefill steps its decode steps wait behind included``."""
    it = d.inter_token
    if it is None:
        return ""
    bucket = ("" if it.p50_ms_low is None else f"; the median token in its {it.p50_ms_low:g}-{it.p50_ms_high:g} ms "
              f"bucket" if it.p50_ms_high is not None else f"; the median token above {it.p50_ms_low:g} ms")
    batch = f", at a median {d.batch_median:g} running requests" if d.batch_median is not None else ""
    return (f"{it.mean_ms:,.1f} ms mean over {it.tokens:,} tokens {it.window} ({it.metric}{bucket}){batch}: the "
            f"server's time per output token, the prefill steps its decode steps wait behind included")


def beside_tpot_text(d: LogDiagnosis, name: str, tpot_ms: float, batch: int | None) -> str:
    """A scrape's inter-token latency beside a trace's time per output token (``tpot_ms`` at ``batch``) of the same
    engine, in two sentences, for the CLI and the Diagnosis page alike; empty where the scrape holds none."""
    if d.inter_token is None:
        return ""
    at = f" at batch {batch}" if batch else ""
    same = d.inter_token.at_batch(batch)
    if same is None:
        return (f"The server's /metrics ({name}): inter-token latency {inter_token_text(d)}. This trace's TPOT is "
                f"{tpot_ms:,.2f} ms{at}; where the server's running batch matches it, give its mean as the measured "
                f"step (--observed-step-us, or the Diagnosis page's field).")
    _, ms, tokens, intervals = same
    return (f"The server's /metrics ({name}): inter-token latency {inter_token_text(d)}; at batch {batch}, "
            f"{ms:,.1f} ms mean over {tokens:,} tokens in {intervals} interval{'s' if intervals != 1 else ''} between "
            f"scrapes that read {batch} running requests. This trace's TPOT is {tpot_ms:,.2f} ms{at}: give that mean "
            f"as the measured step (--observed-step-us, or the Diagnosis page's field).")


def measured_step_us(d: LogDiagnosis, batch: int | None) -> float | None:
    """The scrape's inter-token latency as a measured step for a trace at ``batch`` (us): its mean at that running
    batch where intervals ran it, else its mean over the window; None where the scrape holds none."""
    if d.inter_token is None:
        return None
    same = d.inter_token.at_batch(batch)
    return round((same[1] if same is not None else d.inter_token.mean_ms) * 1e3, 1)


def _pct(x: float) -> str:
    return f"{100 * x:.1f}%"


def verdict(d: LogDiagnosis) -> tuple[str, str]:
    """The one-line verdict of a log and its detail (what a serving engineer reads first)."""
    top = d.max_captured
    unit = "forward passes" if d.counted == "passes" else "logged decode steps"
    share = d.eager_share
    if d.log.kind == "log" and not len(d.log.decode_batch):
        return "no decode lines", "the log holds no periodic decode record (is the server's stats logging on?)"
    if d.absorbing and d.run is not None:
        r = d.run
        span = f", {r.seconds:,.0f} s" if r.seconds is not None else ""
        end = "to the end of the log" if r.to_end else "then came back under"
        detail = (f"the running batch crossed the largest captured size ({top}) and stayed above it for {r.lines} "
                  f"consecutive lines{span} ({end}; median batch {r.median_batch:g})")
        if share is not None:
            detail += f"; {_pct(share)} of the {unit} ran eager"
        return "absorbing ceiling state", detail
    if share is not None and d.eager_above_max is not None and d.eager:
        if d.eager_above_max >= (d.eager_within_captured or 0):
            return "eager above the ceiling", (f"{_pct(share)} of the {unit} ran eager, {d.eager_above_max} of "
                                               f"{d.eager} above the largest captured size ({top})")
        return "eager fallbacks", (f"{_pct(share)} of the {unit} ran eager, {d.eager_within_captured} of {d.eager} "
                                   f"within a captured size ({top} is the largest)")
    if share is not None:
        return ("graphs serve decode" if share < 0.05 else "eager decode"), f"{_pct(share)} of the {unit} ran eager"
    if d.lines_above_max:
        return "batches above the ceiling", (f"{d.lines_above_max} of {len(d.log.decode_batch)} decode lines ran a "
                                             f"batch above the largest captured size ({top}): those run eager")
    if top is not None:
        return "under the ceiling", f"every logged decode batch fits the largest captured size ({top})"
    if d.log.kind == "metrics":  # no engine's /metrics states its capture list
        return "capture list unknown", ("a /metrics scrape names no capture list: give the server's log or config "
                                        "beside it (docs/serverlogs.md)")
    return "capture list unknown", ("the log names no capture list: pass the server's config, or turn on the lines "
                                    "that print it (docs/serverlogs.md)")
