"""One trace's report as text or Markdown."""
from __future__ import annotations

from ..engines import LABELS
from ..gaps import CAUSES
from .table import table as _table
from ..report import TraceReport
from ..verdict import async_scheduling_text, batch_basis, capture_sizes_basis, fallback_basis, graphs_word, node_cost_text, \
    padding_basis, step_word, time_text


def _short(name: str, n: int = 60) -> str:
    name = " ".join(name.split())
    return name if len(name) <= n else name[: n - 1] + "…"


def _or_dash(v: object) -> object:
    return "-" if v is None else v


def _capture_lines(rep: TraceReport, markdown: bool) -> list[str]:
    """What a capture trace captured: one row per graph."""
    c = rep.capture
    assert c is not None
    h = "## " if markdown else ""
    facts = [("graphs captured", str(c.graphs)), ("launches recorded", f"{c.launches_recorded} (ran nothing)"),
             ("kernels that ran", str(c.kernels_run))]
    if rep.summary.engine:
        facts.insert(0, ("engine", LABELS.get(rep.summary.engine, rep.summary.engine)))
    lines = _table(["metric", "value"], facts, True) if markdown else [f"  {k:<17}  {v}" for k, v in facts]
    n = max(len(c.nodes_per_graph), len(c.sizes))
    if n:
        lines += ["", f"{h}Captured graphs" if markdown else "Captured graphs"]
        rows = [(i, _or_dash(c.sizes[i] if i < len(c.sizes) else None),
                 _or_dash(c.modes[i] if i < len(c.modes) else None),
                 _or_dash(c.nodes_per_graph[i] if i < len(c.nodes_per_graph) else None)) for i in range(min(n, 40))]
        lines += _table(["graph", "size", "mode", "launches_recorded"], rows, markdown)
        if n > 40:
            lines.append(f"  ... {n - 40} more graphs (use --format json for all)")
    if rep.warnings:
        lines += [""] + [f"warning: {w}" for w in rep.warnings]
    return lines


def _rule_words(s) -> str:
    """The decode-time rule's sums or the whole-step rule's steps before the speedup's range, empty under the others
    (the median step's ratio)."""
    if s.predicted_speedup_rule == "whole step":
        return (f"on the engine's whole step: {s.whole_step_us_before:,.0f} -> {s.whole_step_us_after:,.0f} us, the "
                f"time between steps included; ")
    if s.predicted_speedup_rule != "decode time":
        return ""
    return f"decode time: {time_text(s.decode_us_as_run)} as run over {time_text(s.decode_us_full_graph)} all FULL graphs; "


def _facts(rep: TraceReport) -> list[tuple[str, str]]:
    """The summary's figures, one (name, text) per line."""
    s = rep.summary
    bs = ", ".join(str(b) for b in s.batch_sizes) or "unknown"
    basis = batch_basis(rep.steps)
    facts = [
        ("steps", f"{s.steps} (from {s.step_source}); batch sizes: {bs}" + (f"; batch from {basis}" if basis else "")),
        ("step (GPU window, profiled)", f"{s.step_us_median:,.1f} us median"),
        ("estimated unprofiled step", f"{s.estimated_unprofiled_step_us_median:,.1f} us "
                                      f"({s.estimated_unprofiled_step_us_low:,.0f}-"
                                      f"{s.estimated_unprofiled_step_us_high:,.0f}; profiler inflation "
                                      f"~{s.estimated_profiler_inflation:.2f}x)"),
        ("profiler settings", f"{s.profiler_settings.get('tier', '?')}: "
                              + ("; ".join(s.profiler_settings.get("evidence") or []) or "nothing recorded") +
                              f" -> {s.profiler_overhead_us_per_event:.3g} us per host event "
                              f"({s.profiler_overhead_us_per_event_low:.3g}-{s.profiler_overhead_us_per_event_high:.3g})"
                              + (f"; {s.profiler_python_call_us:.3g} us per Python call past the host events' share "
                                 f"({s.profiler_python_call_us_low:.3g}-{s.profiler_python_call_us_high:.3g}; "
                                 f"{s.python_calls_per_step_median:,.0f} calls per step)"
                                 if s.profiler_python_call_us else "")),
        ("GPU busy", f"{s.gpu_busy_us_median:,.1f} us median per step"),
        ("GPU idle", f"{s.gpu_idle_fraction:.1%} of the step windows: " + ", ".join(
            f"{c} {s.idle_fraction_by_cause[c]:.1%}" for c in CAUSES if s.idle_fraction_by_cause[c] > 0) or "none"),
        ("kernels per step", f"{s.kernels_per_step_median:g} (eager launches {s.kernel_launches_per_step_median:g}, "
                             f"graph launches {s.graph_launches_per_step_median:g})"),
        ("launch API time", f"{s.launch_api_us_per_step_median:,.1f} us per step; launch-to-kernel ratio "
                            f"{s.launch_to_kernel_ratio:.2f}"),
        ("launch delay", f"p50 {s.launch_delay_us_p50:,.1f} us, p90 {s.launch_delay_us_p90:,.1f} us, "
                         f"p99 {s.launch_delay_us_p99:,.1f} us"),
        ("predicted CUDA-graph step", f"{s.predicted_graph_step_us_median:,.1f} us -> speedup "
                                      f"{s.predicted_speedup:.2f}x ({_rule_words(s)}{s.predicted_speedup_low:.2f}-"
                                      f"{s.predicted_speedup_high:.2f}x; {s.eager_step_source} {step_word(rep.mode)}; "
                                      f"vs profiled step {s.predicted_speedup_profiled:.2f}x; {node_cost_text(s)})"),
    ]
    if s.decode_tpot_ms_before is not None:
        tps = (f"; {s.decode_tokens_per_s_before:,.0f} -> {s.decode_tokens_per_s_after:,.0f} tokens/s at batch "
               f"{s.decode_batch_size}" if s.decode_tokens_per_s_before is not None else "")
        between = ""
        if s.decode_tpot_between_steps_us > 0:
            gpu = s.inter_step_gpu_busy_us_median
            eager = s.step_groups[0].get("graph_coverage") == "eager"  # its gap's host work is in the step too
            between = (f"; the engine's whole step: {s.decode_tpot_between_steps_us:,.0f} us between the steps' GPU "
                       f"work included" + (f" ({gpu:,.0f} us of it GPU work of no step)" if eager and gpu > 0 else
                                           " (GPU work of no step)" if not eager else "")
                       + (", whose host work async scheduling hides behind a graph's replay" if eager else "")
                       # the headline's ratio under the whole-step rule: said there
                       + (f": {s.decode_tpot_ms_before / s.decode_tpot_ms_after:.2f}x on it"
                          if s.decode_tpot_ms_after and s.decode_tpot_ms_before != s.decode_tpot_ms_after
                          and s.predicted_speedup_rule != "whole step" else ""))
        facts.append(("decode TPOT", f"{s.decode_tpot_ms_before:,.2f} ms -> {s.decode_tpot_ms_after:,.2f} ms "
                                     f"{graphs_word(rep.mode)}{tps}{between}"))
    if s.host_stall_us_per_step > 0:
        facts.append(("host stalls", f"{s.host_stall_us_per_step:,.1f} us per step, "
                                     f"{s.host_stall_in_graph_us_per_step:,.1f} inside the captured forward; "
                                     + ", ".join(f"{_short(f['frame'], 50)} {f['us']:,.0f} us" +
                                                 (" (in forward)" if f["in_graph_us"] > 0 else "")
                                                 for f in s.host_stall_frames[:3])))
    if s.compile_evidence:
        facts.append(("torch.compile", "; ".join(s.compile_evidence)))
    if rep.workload is not None:
        facts.append(("workload", f"{rep.workload.label} ({rep.workload.id})"))
    cov = ", ".join(f"{n} {c}" for c, n in s.steps_by_coverage.items() if n) or "none"
    facts.insert(1, ("graph coverage", f"steps: {cov}"))
    if s.engine:
        facts.insert(0, ("engine", LABELS.get(s.engine, s.engine)))
    return facts


def _steps_lines(rep: TraceReport, markdown: bool, max_steps: int, engine_steps: bool) -> list[str]:
    """One row per step (the first ``max_steps``)."""
    engine_cols = (["phase", "reqs", "tokens"] if engine_steps else []) + ["coverage"]
    rows = [(st.index, st.batch_size if st.batch_size is not None else "-",
             *([st.phase or "-", _or_dash(st.requests), _or_dash(st.tokens)] if engine_steps else []),
             st.graph_coverage + (" (fallback)" if st.fallback else ""), _or_dash(st.bucket), f"{st.dur_us:,.1f}",
             f"{st.gpu_busy_us:,.1f}", f"{st.gpu_idle_us:,.1f}",
             f"{st.idle_us_by_cause['host']:,.1f}", f"{st.idle_us_by_cause['launch']:,.1f}",
             f"{st.idle_us_by_cause['sync']:,.1f}", f"{st.idle_us_by_cause['gpu']:,.1f}",
             f"{st.idle_us_by_cause['peer']:,.1f}", f"{st.host_stall_us:,.1f}", st.kernels, st.graph_launches,
             f"{st.launch_api_us:,.1f}", f"{st.predicted_graph_us:,.1f}") for st in rep.steps[:max_steps]]
    lines = _table(["step", "bs", *engine_cols, "bucket", "dur_us", "busy_us", "idle_us", "host_us", "launch_us",
                    "sync_us", "gpu_us", "peer_us", "stall_us", "kernels", "graph_launches", "launch_api_us",
                    "pred_graph_us"], rows, markdown)
    if len(rep.steps) > max_steps:
        lines.append(f"  ... {len(rep.steps) - max_steps} more steps (use --format json for all)")
    return lines


def _heading(text: str, markdown: bool) -> list[str]:
    return ["", f"## {text}" if markdown else text]


def render_trace(rep: TraceReport, markdown: bool = False, max_steps: int = 20) -> str:
    s = rep.summary
    title = f"{rep.path}  [{rep.format}, {rep.mode}]"
    if rep.rank is not None:
        title += f"  rank {rep.rank}" + (f"/{rep.world_size}" if rep.world_size else "")
    lines = [f"## {title}" if markdown else title, "",
             f"{'**' if markdown else ''}Verdict: {s.verdict}{'**' if markdown else ''} — {s.verdict_detail}", ""]
    if rep.capture is not None:
        return "\n".join(lines + _capture_lines(rep, markdown))
    facts = _facts(rep)
    if markdown:
        lines += _table(["metric", "value"], facts, True)
    else:
        w = max(len(k) for k, _ in facts)
        lines += [f"  {k:<{w}}  {v}" for k, v in facts]
    engine_steps = any(st.phase is not None or st.requests is not None or st.tokens is not None for st in rep.steps)
    if len(s.step_groups) > 1 or engine_steps:
        lines += _heading("Steps by phase and graph coverage", markdown)
        lines += _table(["phase", "coverage", "steps", "step_us", "kernels", "graph_launches", "eager_launches",
                         "idle", "pred_speedup", "verdict"],
                        [(g["phase"] or "-", g["graph_coverage"], g["steps"], f"{g['step_us_median']:,.1f}",
                          f"{g['kernels_per_step_median']:g}", f"{g['graph_launches_per_step_median']:g}",
                          f"{g['eager_launches_per_step_median']:g}", f"{g['gpu_idle_fraction']:.1%}",
                          f"{g['predicted_speedup']:.2f}x", g["verdict"]) for g in s.step_groups], markdown)
    lines += _serving_lines(rep, markdown)
    lines += _heading("Steps", markdown) + _steps_lines(rep, markdown, max_steps, engine_steps)
    lines += _heading("Devices (whole trace)", markdown)
    lines += _table(["device", "name", "kernels", "busy_us", "window_us", "idle_us"] + [f"{c}_us" for c in CAUSES],
                    [(d.device, d.name or "-", d.kernels, f"{d.gpu_busy_us:,.1f}", f"{d.gpu_window_us:,.1f}",
                      f"{d.gpu_idle_us:,.1f}", *[f"{d.idle_us_by_cause[c]:,.1f}" for c in CAUSES])
                     for d in rep.devices], markdown)
    if rep.top_gaps:
        lines += _heading("Largest gaps", markdown)
        lines += _table(["dur_us", "cause", "step", "before", "after", "cpu_ran"],
                        [(f"{g.dur_us:,.1f}", g.cause, g.step if g.step is not None else "-", _short(g.before, 40),
                          _short(g.after, 40), _activity_text(g.host_activity_us)) for g in rep.top_gaps], markdown)
    if rep.top_kernels:
        lines += _heading("Kernels by launch cost", markdown)
        lines += _table(["kernel", "count", "kernel_us", "launch_api_us", "ratio", "delay_us_p50"],
                        [(_short(k["name"]), k["count"], f"{k['kernel_us']:,.1f}", f"{k['launch_api_us']:,.1f}",
                          f"{k['launch_to_kernel_ratio']:.2f}" if k["launch_to_kernel_ratio"] is not None else "-",
                          f"{k['launch_delay_us_median']:,.1f}") for k in rep.top_kernels], markdown)
    if rep.capture_pairing is not None:
        lines += [""] + _pairing_lines(rep.capture_pairing, markdown)
    if rep.warnings:
        lines += [""] + [f"warning: {w}" for w in rep.warnings]
    return "\n".join(lines)


def _activity_text(act: dict[str, float]) -> str:
    """What the CPU ran in a gap, its top two names: ``llama.py: forward 1,295 us; cudaLaunchKernel 5 us``."""
    return "; ".join(f"{_short(k, 36)} {v:,.0f} us" for k, v in list(act.items())[:2]) or "-"


def _serving_lines(rep: TraceReport, markdown: bool) -> list[str]:
    """Graph-mode serving: capture sizes, fallbacks, padding, host time between steps."""
    s = rep.summary
    h = "## " if markdown else ""
    padded = [st for st in rep.steps if st.padded_rows is not None]
    if s.capture_sizes is None and not padded and s.inter_step_host_us_median <= 0:
        return []
    facts: list[tuple[str, str]] = []
    if s.capture_sizes is not None:
        facts.append(("capture sizes", f"{_sizes_text(s.capture_sizes)} ({capture_sizes_basis(s)})"))
        n = len(rep.steps)
        if s.fallback_steps:
            facts.append(("eager fallbacks", f"{len(s.fallback_steps)} of {n} steps ran eager although a captured size "
                                             f"fits them (steps {', '.join(map(str, s.fallback_steps))}): "
                                             f"{s.fallback_lost_us_per_step:,.1f} us lost per step of the trace "
                                             f"({fallback_basis(s)})"))
        else:
            facts.append(("eager fallbacks", "none"))
        if s.uncaptured_steps:
            k = len(s.uncaptured_steps)
            facts.append(("uncaptured sizes", f"{k} step{'s' if k != 1 else ''} above the largest captured size "
                                              f"(steps {', '.join(map(str, s.uncaptured_steps))})"))
    if s.padding_unknown_reason:
        facts.append(("padding", f"unknown: {s.padding_unknown_reason}"))
    elif padded:
        facts.append(("padding", f"{s.padded_rows_fraction:.1%} of graph rows are padding; "
                                 f"{s.padding_us_per_step:,.1f} us per step ({padding_basis(s)})"))
    pc = s.planner_comparison
    if pc:
        # priced as the plan prices them: every decode step at its bucket (fallbacks too), so its padding is not
        # the padding line's (the graph steps that ran)
        facts.append(("planner's list", f"{pc['graphs']} graphs {_sizes_text(pc['capture_sizes'])}: padded rows "
                                        f"{pc['padded_rows_fraction']:.1%}, padding {pc['padding_waste_us']:,.1f} us/step, "
                                        f"expected step {pc['expected_step_us']:,.1f} us; current list priced the same "
                                        f"{pc['current_padded_rows_fraction']:.1%}, "
                                        f"{pc['current_padding_waste_us']:,.1f} us/step, "
                                        f"{pc['current_expected_step_us']:,.1f} us (every decode step at its bucket, "
                                        f"eager above the largest, on launchgap plan's costs)"))
    if len(rep.steps) > 1:
        top = list(s.host_phases_us_per_step.items())[:6]
        phases = ", ".join(f"{k} {v:,.1f}" for k, v in top) or "none named"
        facts.append(("host between steps", "no GPU idle between steps (each step's GPU work follows the previous "
                                            "one's)" if s.host_phases_source == "none" else
                      f"{s.inter_step_host_us_median:,.1f} us median between steps' GPU work "
                      f"({s.inter_step_host_us_unprofiled_median:,.1f} us without the profiler; GPU work of no step "
                      f"{s.inter_step_gpu_busy_us_median:,.1f} us of it); "
                      f"host phases per step ({s.host_phases_source}): {phases} us"))
        facts.append(("async scheduling", async_scheduling_text(s.host_ahead_steps, len(rep.steps) - 1,
                                                                s.async_hidden_us_per_step)))
    title = "Graph-mode serving" if s.capture_sizes is not None or padded else "Host time between steps"
    lines = ["", f"{h}{title}"]
    if markdown:
        lines += _table(["metric", "value"], facts, True)
    else:
        w = max(len(k) for k, _ in facts)
        lines += [f"  {k:<{w}}  {v}" for k, v in facts]
    fb = [st for st in rep.steps if st.fallback]
    if fb:
        lines += ["", f"{h}Fallbacks" if markdown else "Fallbacks"]
        # lost_us = eager_us - bucket_graph_us, each column the cost it is made of (not the profiled step's window)
        lines += _table(["step", "bs", "should_replay", "eager_us", "bucket_graph_us", "lost_us", "cause"],
                        [(st.index, st.batch_size, _fallback_bucket(st.batch_size, s.capture_sizes),
                          _us(st.fallback_eager_us),
                          _us(st.fallback_bucket_graph_us), _us(st.fallback_lost_us),
                          _short(st.fallback_cause or "not shown in the trace", 70)) for st in fb], markdown)
    if padded:
        by: dict[int, list] = {}
        for st in padded:  # report rows
            by.setdefault(st.bucket, []).append(st)
        lines += ["", f"{h}Padding by bucket" if markdown else "Padding by bucket"]
        lines += _table(["bucket", "steps", "padded_rows", "padding_us", "padding_us_band"],
                        [(b, len(v), sum(x.padded_rows for x in v),
                          f"{sum(x.padding_us or 0.0 for x in v):,.1f}",
                          f"{sum(x.padding_us_low or 0.0 for x in v):,.1f}-{sum(x.padding_us_high or 0.0 for x in v):,.1f}")
                         for b, v in sorted(by.items())], markdown)
    return lines


def _us(v: float | None) -> str:
    return "-" if v is None else f"{v:,.1f}"


def _sizes_text(sizes: list[int]) -> str:
    return "[" + ", ".join(map(str, sizes[:24])) + (", ..." if len(sizes) > 24 else "") + "]"


def _fallback_bucket(batch: int | None, sizes: list[int] | None) -> object:
    if batch is None or not sizes:
        return "-"
    fit = [x for x in sizes if x >= batch]
    return min(fit) if fit else "-"

def _pairing_lines(p: dict, markdown: bool) -> list[str]:
    """Inside the graph replays, named from the capture trace: per graph, then per (op, kernel)."""
    h = "## " if markdown else ""
    lines = [f"{h}Inside graph replays (capture trace {p['capture_path']})" if markdown
             else f"Inside graph replays (capture trace {p['capture_path']})",
             f"  {p['replays_matched']} of {p['replays']} replays matched a captured graph ({p['matched_by']}; "
             f"{p['graphs_captured']} graphs captured); {p['replay_kernels_named']} of {p['replay_kernels']} replay "
             f"kernels named, {p['named_share_of_replay_time']:.1%} of {p['replay_kernel_us']:,.1f} us replay "
             "kernel time"]
    if p["graphs"]:
        rows = [(g["graph"], _or_dash(g["size"]), _or_dash(g["mode"]), g["nodes"], g["replays"],
                 f"{g['kernel_us']:,.1f}", f"{g['share_of_replay_time']:.1%}") for g in p["graphs"][:40]]
        lines += _table(["graph", "size", "mode", "nodes", "replays", "kernel_us", "share"], rows, markdown)
        if len(p["graphs"]) > 40:
            lines.append(f"  ... {len(p['graphs']) - 40} more graphs (use --format json for all)")
    if p["kernels"]:
        lines += ["", f"{h}Kernels inside graph replays" if markdown else "Kernels inside graph replays"]
        lines += _table(["op (at capture)", "kernel", "count", "kernel_us", "share"],
                        [(_short(k["op"] or "-", 36), _short(k["name"], 50), k["count"], f"{k['kernel_us']:,.1f}",
                          f"{k['share_of_replay_time']:.1%}") for k in p["kernels"]], markdown)
    return lines
