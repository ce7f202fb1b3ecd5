"""Text and Markdown renderings of reports (strings only; the CLI prints them)."""
from __future__ import annotations

from collections.abc import Sequence

from analyzer.gaps import CAUSES
from analyzer.report import TraceReport


def _table(headers: Sequence[str], rows: Sequence[Sequence[object]], markdown: bool) -> list[str]:
    cells = [[str(c) for c in r] for r in rows]
    if markdown:
        esc = [[c.replace("|", "\\|") for c in r] for r in cells]
        out = ["| " + " | ".join(headers) + " |", "|" + "|".join("---" for _ in headers) + "|"]
        out += ["| " + " | ".join(r) + " |" for r in esc]
        return out
    widths = [max([len(h)] + [len(r[i]) for r in cells]) for i, h in enumerate(headers)]
    fmt = "  ".join("{:>%d}" % w if i else "{:<%d}" % w for i, w in enumerate(widths))
    return [fmt.format(*headers), fmt.format(*["-" * w for w in widths])] + [fmt.format(*r) for r in cells]


def _short(name: str, n: int = 60) -> str:
    name = " ".join(name.split())
    return name if len(name) <= n else name[: n - 1] + "…"


def render_trace(rep: TraceReport, markdown: bool = False, max_steps: int = 20) -> str:
    s = rep.summary
    h = "## " if markdown else ""
    lines: list[str] = []
    title = f"{rep.path}  [{rep.format}, {rep.mode}]"
    if rep.rank is not None:
        title += f"  rank {rep.rank}" + (f"/{rep.world_size}" if rep.world_size else "")
    lines.append(f"{h}{title}" if markdown else title)
    lines.append("")
    lines.append(f"{'**' if markdown else ''}Verdict: {s.verdict}{'**' if markdown else ''} — {s.verdict_detail}")
    lines.append("")
    bs = ", ".join(str(b) for b in s.batch_sizes) or "unknown"
    facts = [
        ("steps", f"{s.steps} (from {s.step_source}); batch sizes: {bs}"),
        ("step (GPU window, profiled)", f"{s.step_us_median:,.1f} us median"),
        ("estimated unprofiled step", f"{s.estimated_unprofiled_step_us_median:,.1f} us "
                                      f"({s.estimated_unprofiled_step_us_low:,.0f}-"
                                      f"{s.estimated_unprofiled_step_us_high:,.0f}; profiler inflation "
                                      f"~{s.estimated_profiler_inflation:.2f}x)"),
        ("profiler settings", f"{s.profiler_settings.get('tier', '?')}: "
                              + ("; ".join(s.profiler_settings.get("evidence") or []) or "nothing recorded") +
                              f" -> {s.profiler_overhead_us_per_event:.3g} us per host event "
                              f"({s.profiler_overhead_us_per_event_low:.3g}-{s.profiler_overhead_us_per_event_high:.3g})"),
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
                                      f"{s.predicted_speedup:.2f}x ({s.predicted_speedup_low:.2f}-"
                                      f"{s.predicted_speedup_high:.2f}x; {s.eager_step_source} eager step; "
                                      f"vs profiled step {s.predicted_speedup_profiled:.2f}x)"),
    ]
    if rep.workload is not None:
        facts.append(("workload", f"{rep.workload.id}: {rep.workload.label}"))
    if markdown:
        lines += _table(["metric", "value"], facts, True)
    else:
        w = max(len(k) for k, _ in facts)
        lines += [f"  {k:<{w}}  {v}" for k, v in facts]
    lines.append("")
    lines.append(f"{h}Steps" if markdown else "Steps")
    rows = [(st.index, st.batch_size if st.batch_size is not None else "-", f"{st.dur_us:,.1f}",
             f"{st.gpu_busy_us:,.1f}", f"{st.gpu_idle_us:,.1f}",
             f"{st.idle_us_by_cause['host']:,.1f}", f"{st.idle_us_by_cause['launch']:,.1f}",
             f"{st.idle_us_by_cause['sync']:,.1f}", f"{st.idle_us_by_cause['gpu']:,.1f}",
             f"{st.idle_us_by_cause['peer']:,.1f}", st.kernels, f"{st.launch_api_us:,.1f}",
             f"{st.predicted_graph_us:,.1f}") for st in rep.steps[:max_steps]]
    lines += _table(["step", "bs", "dur_us", "busy_us", "idle_us", "host_us", "launch_us", "sync_us", "gpu_us",
                     "peer_us", "kernels", "launch_api_us", "pred_graph_us"], rows, markdown)
    if len(rep.steps) > max_steps:
        lines.append(f"  ... {len(rep.steps) - max_steps} more steps (use --format json for all)")
    lines.append("")
    lines.append(f"{h}Devices (whole trace)" if markdown else "Devices (whole trace)")
    lines += _table(["device", "name", "kernels", "busy_us", "window_us", "idle_us"] + [f"{c}_us" for c in CAUSES],
                    [(d.device, d.name or "-", d.kernels, f"{d.gpu_busy_us:,.1f}", f"{d.gpu_window_us:,.1f}",
                      f"{d.gpu_idle_us:,.1f}", *[f"{d.idle_us_by_cause[c]:,.1f}" for c in CAUSES])
                     for d in rep.devices], markdown)
    if rep.top_gaps:
        lines.append("")
        lines.append(f"{h}Largest gaps" if markdown else "Largest gaps")
        lines += _table(["dur_us", "cause", "step", "before", "after"],
                        [(f"{g.dur_us:,.1f}", g.cause, g.step if g.step is not None else "-", _short(g.before, 40),
                          _short(g.after, 40)) for g in rep.top_gaps], markdown)
    if rep.top_kernels:
        lines.append("")
        lines.append(f"{h}Kernels by launch cost" if markdown else "Kernels by launch cost")
        lines += _table(["kernel", "count", "kernel_us", "launch_api_us", "ratio", "delay_us_p50"],
                        [(_short(k["name"]), k["count"], f"{k['kernel_us']:,.1f}", f"{k['launch_api_us']:,.1f}",
                          f"{k['launch_to_kernel_ratio']:.2f}" if k["launch_to_kernel_ratio"] is not None else "-", f"{k['launch_delay_us_median']:,.1f}")
                         for k in rep.top_kernels], markdown)
    if rep.warnings:
        lines.append("")
        lines += [f"warning: {w}" for w in rep.warnings]
    return "\n".join(lines)
