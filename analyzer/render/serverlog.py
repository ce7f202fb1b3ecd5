"""One server log's or metrics scrape's diagnosis as text or Markdown."""
from __future__ import annotations

from ..engines import LABELS
from ..serverlogs.diagnosis import LogDiagnosis, inter_token_text, verdict
from .table import table as _table

#: Batch sizes listed in the distribution table at most (the JSON has every line).
MAX_SIZES = 16


def _sizes_text(sizes: list[int] | None) -> str:
    if not sizes:
        return "unknown"
    return "[" + ", ".join(map(str, sizes)) + "]" if len(sizes) <= 12 else \
        f"[{', '.join(map(str, sizes[:6]))}, ..., {', '.join(map(str, sizes[-3:]))}]"


def _num(x: float | None, fmt: str = ",.1f", unit: str = "") -> str:
    return "unknown" if x is None else f"{x:{fmt}}{unit}"


def render_server_log(d: LogDiagnosis, markdown: bool = False) -> str:
    lg = d.log
    h = "## " if markdown else ""
    label = LABELS.get(lg.engine, lg.engine)
    title = f"{lg.path}  [{label} {'metrics' if lg.kind == 'metrics' else 'log'}]"
    v, detail = verdict(d)
    lines = [f"{h}{title}" if markdown else title, "",
             f"{'**' if markdown else ''}Verdict: {v}{'**' if markdown else ''} — {detail}", ""]
    main = lg.main_capture()
    cap = f"{_sizes_text(lg.capture_sizes)}"
    if lg.capture_count is not None:
        cap += f", {lg.capture_count} sizes"
    if d.max_captured is not None:
        cap += f", largest {d.max_captured}"
    if lg.capture_mode:
        cap += f", mode {lg.capture_mode}"
    facts = [("engine", f"{label} {lg.version or '(version not in the file)'}"),
             ("model", ", ".join(lg.models) or "not in the file"), ("capture list", cap),
             ("capture cost", "not logged" if main is None else
              f"{_num(main.seconds, ',.2f', ' s')}, {_num(main.memory_mib, ',.1f', ' MiB')} (the server's own "
              f"figures{', ' + main.source if main.source else ''})"
              + (f"; its estimate {main.estimated_mib:,.1f} MiB" if main.estimated_mib is not None else ""))]
    if lg.max_running_requests is not None:
        facts.append(("max running requests", str(lg.max_running_requests)))
    n = len(lg.decode_batch)
    what = "scrapes" if lg.kind == "metrics" else "decode lines"
    if n:
        facts.append((what, f"{n}; batch median {d.batch_median:g}, max {lg.decode_batch.max()} "
                            f"({d.distribution_basis})"))
    if d.graph is not None:
        unit = "passes" if d.counted == "passes" else "lines"
        text = f"{d.graph:,} / {d.eager:,} {unit}"
        if d.eager_share is not None:
            text += f" ({d.eager_share:.1%} eager)"
        if d.eager_above_max is not None:
            text += (f": {d.eager_above_max:,} above the largest captured size (ceiling), "
                     f"{d.eager_within_captured:,} within (fallback)")
        facts.append(("graph / eager", text))
    if d.lines_above_max is not None:
        facts.append(("lines above the ceiling", f"{d.lines_above_max} of {n}"))
    if d.run is not None:
        r = d.run
        facts.append(("longest run above", f"{r.lines} lines from line {r.first_line}"
                      + (f", {r.seconds:,.0f} s" if r.seconds is not None else "")
                      + f", median batch {r.median_batch:g}" + (" (to the end of the log)" if r.to_end else "")))
    if d.graph_tok_s_per_req_near_max is not None or d.eager_tok_s_per_req_near_max is not None:
        g, e = d.graph_tok_s_per_req_near_max, d.eager_tok_s_per_req_near_max
        ratio = f" -> eager {e / g:.2f}x of graph" if g and e else ""
        facts.append(("throughput near the ceiling", f"graph {_num(g)} vs eager {_num(e)} token/s per request{ratio}"))
    if d.fallback_tok_s_per_req is not None:
        facts.append(("throughput of fallbacks", f"eager {_num(d.fallback_tok_s_per_req)} vs graph "
                      f"{_num(d.graph_tok_s_per_req_same_batch)} token/s per request at the same batch sizes"))
    if lg.forward_times:
        facts.append(("forward times", f"{len(lg.forward_times)} batch sizes "
                      f"(VLLM_LOG_BATCHSIZE_INTERVAL): " + ", ".join(f"{f.batch_size}: {f.median_ms:g} ms"
                                                                     for f in lg.forward_times[:6])))
    if lg.padding:
        p = lg.padding
        facts.append(("padding", f"{p['paddings']:,} padded rows over {p['unpadded_tokens']:,} real tokens "
                      f"({p['paddings'] / max(1, p['padded_tokens']):.1%} of the graphs' rows)"))
    if d.inter_token is not None:
        facts.append(("inter-token latency", inter_token_text(d)))
    if lg.kind == "log":
        facts.append(("prefill lines", f"{d.prefill_lines} (kept apart from the decode distribution)"))
    facts.append(("lines", f"{lg.lines:,} read, {lg.recognised_lines:,} recognised, {lg.skipped_lines} skipped "
                           f"(damaged or not text)"))
    if markdown:
        lines += _table(["metric", "value"], facts, True)
    else:
        w = max(len(k) for k, _ in facts)
        lines += [f"  {k:<{w}}  {val}" for k, val in facts]
    if d.distribution:
        top = sorted(d.distribution.items(), key=lambda kv: -kv[1])[:MAX_SIZES]
        total = sum(d.distribution.values())
        lines += ["", f"{h}Decode batch sizes" if markdown else "Decode batch sizes (most frequent)"]
        lines += _table(["batch", "lines", "share", "side"],
                        [(b, c, f"{c / total:.1%}", "-" if d.max_captured is None else
                          ("above the ceiling" if b > d.max_captured else "captured range")) for b, c in sorted(top)],
                        markdown, align="rrrl")
    if d.inter_token is not None and d.inter_token.by_batch:
        # the server's own time per output token at each running batch: the batches with most tokens, ascending
        top = sorted(sorted(d.inter_token.by_batch, key=lambda e: -e[2])[:MAX_SIZES])
        lines += ["", f"{h}Inter-token latency by running batch" if markdown else
                  "Inter-token latency by running batch (most tokens; intervals between scrapes, under the later's batch)"]
        lines += _table(["batch", "mean ms", "tokens", "intervals"],
                        [(b, f"{ms:,.2f}", f"{n:,}", k) for b, ms, n, k in top], markdown, align="rrrr")
    notes = list(lg.notes) + list(d.notes)
    if notes:
        lines += [""] + [f"note: {x}" for x in notes]
    return "\n".join(lines)
