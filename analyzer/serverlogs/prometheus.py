"""Prometheus text exposition (a ``/metrics`` scrape, or several over time) of vLLM, SGLang and
TensorRT-LLM, read with ``prometheus_client.parser.text_string_to_metric_families``.

**Several scrapes.** One file may hold scrapes one after another (``curl /metrics >> f`` in a
loop), or each file one scrape. A new scrape starts where a metric family's ``# HELP`` / ``# TYPE``
comes again, after an OpenMetrics ``# EOF``, or at a line or comment holding a timestamp and no
sample (``date`` between the curls; that time is the scrape's). A scrape's time is otherwise the newest sample
timestamp it carries, else unknown (the scrapes keep their order). Lines that are neither
comments nor samples are counted in ``skipped_lines``.

**What is kept.** Per scrape, every sample's value summed over its label sets (histogram buckets
and ``_created`` samples left out), and every histogram's cumulative bucket counts summed over
label sets per ``le``. From the engines' metrics (names in ``vllm/v1/metrics/loggers.py``,
``sglang/srt/metrics/collector.py`` / ``observability/metrics_collector.py``,
``tensorrt_llm/metrics/collector.py``): the running requests per scrape (the decode batch),
SGLang's ``sglang:is_cuda_graph`` per scrape (graph flag of its latest batch) and
``sglang:cuda_graph_passes_total{mode=decode_cuda_graph|decode_none}`` (every decode forward
counted: the true eager share), SGLang's ``sglang:startup_cuda_graph_time_seconds``, and each engine's
inter-token latency histogram (:data:`INTER_TOKEN`; :func:`launchgap.serverlogs.diagnosis.inter_token_latency`).
"""
from __future__ import annotations

import math
import re
from pathlib import Path

import numpy as np

from ..errors import InputError
from ._base import CaptureEvent, ServerLog, iter_blocks

PREFIXES = {"vllm:": "vllm", "sglang:": "sglang", "trtllm_": "tensorrt_llm"}
#: The running-requests gauge of each engine: the decode batch per scrape.
RUNNING = {"vllm": "vllm:num_requests_running", "sglang": "sglang:num_running_reqs",
           "tensorrt_llm": "trtllm_num_requests_running"}
PASSES = "sglang:cuda_graph_passes"
#: Each engine's histogram of the time between a request's successive output tokens (seconds), newest name first:
#: vLLM V1 renamed ``vllm:time_per_output_token_seconds`` to ``vllm:inter_token_latency_seconds`` (0.11), SGLang
#: likewise (``sglang/srt/metrics/collector.py``); TensorRT-LLM's ``trtllm_time_per_output_token_seconds`` observes
#: the same interval (``tensorrt_llm/metrics/collector.py``).
INTER_TOKEN = {"vllm": ("vllm:inter_token_latency_seconds", "vllm:time_per_output_token_seconds"),
               "sglang": ("sglang:inter_token_latency_seconds", "sglang:time_per_output_token_seconds"),
               "tensorrt_llm": ("trtllm_time_per_output_token_seconds",)}
#: Bytes of one scrape's text at most (a real scrape is kilobytes to a few MB).
MAX_SCRAPE_BYTES = 64 * 1024 * 1024

_SAMPLE = re.compile(r"^[a-zA-Z_:][a-zA-Z0-9_:]*(?:\{.*\})?\s+[-+]?(?:\d[\d.eE+-]*|\.\d[\d.eE+-]*|NaN|Nan|nan|Inf|inf)"
                     r"(?:\s+-?\d+(?:\.\d+)?)?\s*$")
_META = re.compile(r"^#\s*(HELP|TYPE|UNIT)\s+(\S+)")
_STAMP = re.compile(r"(\d{4})-(\d\d)-(\d\d)[ T](\d\d):(\d\d):(\d\d)")
_STAMP_LINE = re.compile(r"^\s*\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d\S*(?: ?[A-Z]{1,5}|[+-]\d\d:?\d\d)?\s*$")
_ENGINE_NAME = re.compile(r"^(?:#\s*(?:HELP|TYPE)\s+)?(vllm:|sglang:|trtllm_)", re.MULTILINE)


def looks_like_metrics(head: bytes) -> str | None:
    """The engine whose metrics a sniffed head holds (``# TYPE``/samples named ``vllm:``, ``sglang:``,
    ``trtllm_``), or None."""
    text = head.decode("utf-8", "replace")
    lines = [ln for ln in text.splitlines()[:2000] if ln.strip()]
    if not lines:
        return None
    # a scrape's own lines, and the time lines written between scrapes (``date -u '+%F %T'``)
    metricish = sum(1 for ln in lines if ln.startswith("#") or _SAMPLE.match(ln) or _STAMP_LINE.match(ln))
    if metricish < 0.8 * len(lines) or not any(_META.match(ln) for ln in lines[:200]) and metricish < len(lines):
        return None
    counts: dict[str, int] = {}
    for m in _ENGINE_NAME.finditer(text):
        e = PREFIXES[m.group(1)]
        counts[e] = counts.get(e, 0) + 1
    return max(counts, key=counts.get) if counts else None


def _scrape_texts(path: Path):
    """(scrape text, stated time or NaN, skipped lines, time lines) per scrape, streamed."""
    cur: list[str] = []
    size = 0
    seen: set[str] = set()
    when = math.nan
    skipped = stamps = 0
    for block in iter_blocks(path):
        for line in block.decode("utf-8", "replace").split("\n"):
            s = line.strip()
            if not s:
                continue
            meta = _META.match(s)
            stamp = None if meta or _SAMPLE.match(s) else _STAMP.search(s)
            new = (meta is not None and meta.group(1, 2) in seen) or s == "# EOF" or stamp is not None
            if new and cur:
                yield "\n".join(cur) + "\n", when, skipped, stamps
                cur, size, seen, when, skipped, stamps = [], 0, set(), math.nan, 0, 0
            if stamp is not None:
                when = _stamp_seconds(stamp)
                stamps += 1
                continue
            if s == "# EOF":
                continue
            if meta:
                seen.add(meta.group(1, 2))
            elif not s.startswith("#") and not _SAMPLE.match(s):
                skipped += 1
                continue
            cur.append(s)
            size += len(s) + 1
            if size > MAX_SCRAPE_BYTES:
                raise InputError(f"one metrics scrape is over {MAX_SCRAPE_BYTES >> 20} MiB", str(path))
    if cur:
        yield "\n".join(cur) + "\n", when, skipped, stamps


def _stamp_seconds(m: re.Match) -> float:
    import calendar

    y, mo, d, h, mi, s = (int(x) for x in m.groups())
    return float(calendar.timegm((y, mo, d, h, mi, s, 0, 0, 0)))


def read_metrics(path: Path, engine: str) -> ServerLog:
    """Every scrape in ``path`` (see the module text); ``engine`` from :func:`looks_like_metrics`."""
    from prometheus_client.parser import text_string_to_metric_families

    log = ServerLog(path=str(path), engine=engine, kind="metrics", files=[str(path)])
    times: list[float] = []
    skipped = 0
    lines = 0
    for text, when, bad, stamps in _scrape_texts(path):
        skipped += bad
        lines += text.count("\n") + bad + stamps
        values: dict[str, float] = {}
        hists: dict[str, dict[float, float]] = {}
        newest = math.nan
        scrape_passes: dict[str, float] = {}
        try:
            families = list(text_string_to_metric_families(text))
        except (ValueError, TypeError, IndexError) as exc:
            skipped += text.count("\n")
            log.notes.append(f"a scrape was skipped: {str(exc)[:120]}")
            continue
        for fam in families:
            for s in fam.samples:
                if s.timestamp is not None:
                    ts = float(s.timestamp)
                    newest = ts if math.isnan(newest) else max(newest, ts)
                if s.name.endswith("_bucket") and "le" in s.labels:
                    h = hists.setdefault(fam.name, {})
                    le = float(s.labels["le"])
                    h[le] = h.get(le, 0.0) + float(s.value)
                    continue
                if s.name.endswith("_created") or "quantile" in s.labels or not math.isfinite(float(s.value)):
                    continue
                values[s.name] = values.get(s.name, 0.0) + float(s.value)
                model = s.labels.get("model_name")
                if model and model not in log.models:
                    log.models.append(model)
                if s.name.startswith(PASSES) and "mode" in s.labels:
                    scrape_passes[s.labels["mode"]] = scrape_passes.get(s.labels["mode"], 0.0) + float(s.value)
        log.scrapes.append(values)
        log.histograms.append({k: sorted(v.items()) for k, v in hists.items()})
        log.scrape_passes.append(scrape_passes)
        times.append(when if not math.isnan(when) else newest)
    if not log.scrapes:
        raise InputError("no metrics scrape could be read", str(path))
    log.scrape_time_s = np.array(times, dtype=np.float64)
    log.lines = lines
    log.recognised_lines = lines - skipped
    log.skipped_lines = skipped
    return _series(log)


def merge_metrics(logs: list[ServerLog]) -> ServerLog:
    """Several scrape files of one engine as one time series: every scrape of every file in time order
    (stable; when a scrape's time is unknown the files keep the order given and their own order), a
    scrape that two files both hold (same time, same values) kept once; counters, gauges and
    histograms then read per scrape as for one file. The files' lines and notes add up."""
    if len(logs) == 1:
        return logs[0]
    first = logs[0]
    out = ServerLog(path=first.path, engine=first.engine, kind="metrics",
                    files=[f for lg in logs for f in (lg.files or [lg.path])],
                    models=list(dict.fromkeys(m for lg in logs for m in lg.models)))
    rows = [(float(t), i, k, lg) for i, lg in enumerate(logs) for k, t in enumerate(lg.scrape_time_s)]
    timed = all(not math.isnan(r[0]) for r in rows)
    if timed:
        rows.sort(key=lambda r: (r[0], r[1], r[2]))
    else:
        out.notes.append("some scrapes state no time: the files' scrapes are kept in the order the files were given")
    seen: set[tuple[float, tuple]] = set()
    dropped = 0
    times = []
    for t, _, k, lg in rows:
        key = (t, tuple(sorted(lg.scrapes[k].items())))
        if timed and key in seen:
            dropped += 1
            continue
        seen.add(key)
        out.scrapes.append(lg.scrapes[k])
        out.histograms.append(lg.histograms[k])
        out.scrape_passes.append(lg.scrape_passes[k] if k < len(lg.scrape_passes) else {})
        times.append(t)
    if dropped:
        out.notes.append(f"{dropped} scrapes held by two files were kept once")
    out.scrape_time_s = np.array(times, dtype=np.float64)
    out.lines = sum(lg.lines for lg in logs)
    out.recognised_lines = sum(lg.recognised_lines for lg in logs)
    out.skipped_lines = sum(lg.skipped_lines for lg in logs)
    out.notes += [f"{Path(lg.path).name}: {n}" for lg in logs for n in lg.notes]
    out.notes.append(f"{len(logs)} scrape files merged into one series of {len(out.scrapes)} scrapes")
    return _series(out)


def counter_total(values: list[float]) -> float:
    """A counter's count over a series of scrapes since the server started: its last value, plus the
    value before each drop (a drop is the server restarting, the counter starting again at zero)."""
    total = 0.0
    for prev, cur in zip(values, values[1:]):
        if cur < prev:
            total += prev
    return total + (values[-1] if values else 0.0)


def _series(log: ServerLog) -> ServerLog:
    """The running batch per scrape, the graph flag, pass totals and the capture time, from the scrapes."""
    engine = log.engine
    t = log.scrape_time_s
    running = [v.get(RUNNING[engine]) for v in log.scrapes]
    has = np.array([r is not None for r in running], dtype=bool)
    rt = t[has]
    finite = rt[np.isfinite(rt)]
    log.time_origin_s = float(finite[0]) if len(finite) else float("nan")
    log.decode_time_rel_s = (rt - (log.time_origin_s if len(finite) else 0.0)).astype(np.float32)
    log.decode_batch = np.array([int(round(r)) for r in running if r is not None], dtype=np.int64)
    log.decode_graph = np.array([-1 if v.get("sglang:is_cuda_graph") is None else int(v["sglang:is_cuda_graph"] > 0)
                                 for v, r in zip(log.scrapes, running) if r is not None], dtype=np.int8)
    log.decode_tok_s = np.full(len(log.decode_batch), np.nan)
    log.decode_source = np.zeros(len(log.decode_batch), dtype=np.int64)
    log.sources = [""]
    modes = sorted({m for p in log.scrape_passes for m in p})
    if modes:
        series = {m: [p[m] for p in log.scrape_passes if m in p] for m in modes}
        log.graph_passes = int(round(counter_total(series.get("decode_cuda_graph", []))))
        log.eager_passes = int(round(counter_total(series.get("decode_none", []))))
    cg = log.scrapes[-1].get("sglang:startup_cuda_graph_time_seconds")
    log.captures = [CaptureEvent("decode", cg, None, None, "")] if cg is not None and cg > 0 else []
    return log
