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
counted: the true eager share), and SGLang's ``sglang:startup_cuda_graph_time_seconds``.
"""
from __future__ import annotations

import math
import re
from pathlib import Path

import numpy as np

from ..errors import InputError
from ._base import Column, ServerLog, iter_blocks

PREFIXES = {"vllm:": "vllm", "sglang:": "sglang", "trtllm_": "tensorrt_llm"}
#: The running-requests gauge of each engine: the decode batch per scrape.
RUNNING = {"vllm": "vllm:num_requests_running", "sglang": "sglang:num_running_reqs",
           "tensorrt_llm": "trtllm_num_requests_running"}
PASSES = "sglang:cuda_graph_passes"
#: Bytes of one scrape's text at most (a real scrape is kilobytes to a few MB).
MAX_SCRAPE_BYTES = 64 * 1024 * 1024

_SAMPLE = re.compile(r"^[a-zA-Z_:][a-zA-Z0-9_:]*(?:\{.*\})?\s+[-+]?(?:\d[\d.eE+-]*|\.\d[\d.eE+-]*|NaN|Nan|nan|Inf|inf)"
                     r"(?:\s+-?\d+(?:\.\d+)?)?\s*$")
_META = re.compile(r"^#\s*(HELP|TYPE|UNIT)\s+(\S+)")
_STAMP = re.compile(r"(\d{4})-(\d\d)-(\d\d)[ T](\d\d):(\d\d):(\d\d)")
_ENGINE_NAME = re.compile(r"^(?:#\s*(?:HELP|TYPE)\s+)?(vllm:|sglang:|trtllm_)", re.MULTILINE)


def looks_like_metrics(head: bytes) -> str | None:
    """The engine whose metrics a sniffed head holds (``# TYPE``/samples named ``vllm:``, ``sglang:``,
    ``trtllm_``), or None."""
    text = head.decode("utf-8", "replace")
    lines = [ln for ln in text.splitlines()[:2000] if ln.strip()]
    if not lines:
        return None
    metricish = sum(1 for ln in lines if ln.startswith("#") or _SAMPLE.match(ln))
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

    log = ServerLog(path=str(path), engine=engine, kind="metrics")
    times = Column("f8")
    run_t, run_b, run_g = Column("f8"), Column("i8"), Column("i1")
    passes: dict[str, float] = {}
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
                if s.name.startswith(PASSES) and "mode" in s.labels:
                    scrape_passes[s.labels["mode"]] = scrape_passes.get(s.labels["mode"], 0.0) + float(s.value)
        t = when if not math.isnan(when) else newest
        log.scrapes.append(values)
        log.histograms.append({k: sorted(v.items()) for k, v in hists.items()})
        times.append(t)
        if scrape_passes:
            passes = scrape_passes
        running = values.get(RUNNING[engine])
        if running is not None:
            run_t.append(t)
            run_b.append(int(round(running)))
            g = values.get("sglang:is_cuda_graph")
            run_g.append(-1 if g is None else int(g > 0))
    if not log.scrapes:
        raise InputError("no metrics scrape could be read", str(path))
    log.scrape_time_s = times.numpy()
    t = run_t.numpy()
    finite = t[np.isfinite(t)]
    log.time_origin_s = float(finite[0]) if len(finite) else float("nan")
    log.decode_time_rel_s = (t - (log.time_origin_s if len(finite) else 0.0)).astype(np.float32)
    log.decode_batch = run_b.numpy().astype(np.int64)
    log.decode_graph = run_g.numpy().astype(np.int8)
    log.decode_tok_s = np.full(len(log.decode_batch), np.nan)
    log.decode_source = np.zeros(len(log.decode_batch), dtype=np.int64)
    log.sources = [""]
    if passes:
        log.graph_passes = int(round(passes.get("decode_cuda_graph", 0.0)))
        log.eager_passes = int(round(passes.get("decode_none", 0.0)))
    last = log.scrapes[-1]
    cg = last.get("sglang:startup_cuda_graph_time_seconds")
    if cg is not None and cg > 0:
        from ._base import CaptureEvent

        log.captures.append(CaptureEvent("decode", cg, None, None, ""))
    log.lines = lines
    log.recognised_lines = lines - skipped
    log.skipped_lines = skipped
    return log
