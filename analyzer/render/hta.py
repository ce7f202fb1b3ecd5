"""Holistic Trace Analysis's breakdowns of one trace (:class:`~launchgap.hta_bridge.HtaReport`),
and their comparison with launchgap's numbers (:class:`~launchgap.hta_bridge.Comparison`), as text."""
from __future__ import annotations

from ..hta_bridge import KERNEL_WAIT_THRESHOLD_US, Comparison, HtaReport, HtaSettings
from .table import table


def _num(x: float | None, digits: int = 1) -> str:
    """A number with thousands separators and ``digits`` decimals; ``-`` for none."""
    return "-" if x is None else f"{x:,.{digits}f}"


def settings_text(s: HtaSettings) -> str:
    """The HTA settings that change its numbers, in words."""
    parts = ["times rounded to whole us" if s.round_to_us else "times not rounded"]
    parts.append({"drop-last-step": "last ProfilerStep dropped", "keep-last-step": "last ProfilerStep kept",
                  "off": "no step filter"}[s.step_filter])
    return ", ".join(parts)


def render_hta(rep: HtaReport, cmp: Comparison | None = None, hta_version: str = "unknown") -> str:
    """The HTA report (and comparison) of one trace as plain-text tables; ``hta_version`` as installed."""
    lines = [f"== {rep.path}", f"HTA {hta_version} ({settings_text(rep.settings)}): "
                               f"{rep.kernels:,} kernels, {rep.gpu_ops:,} GPU ops kept"]
    t = rep.temporal
    if t is not None:
        share = (lambda v: f" ({100 * v / t.window_us:.1f}%)") if t.window_us > 0 else (lambda v: "")
        lines += ["", "Temporal breakdown (us)",
                  f"  window {_num(t.window_us)}   busy {_num(t.busy_us)}{share(t.busy_us)}   "
                  f"idle {_num(t.idle_us)}{share(t.idle_us)}   compute {_num(t.compute_us)}   "
                  f"non-compute {_num(t.non_compute_us)}"]
    if rep.kernel_types:
        lines += ["", "Kernel types"]
        lines += table(["type", "time_us", "share"],
                       [[k.kernel_type, _num(k.time_us), f"{k.percent:.1f}%"] for k in rep.kernel_types],
                       False, indent="  ")
    if rep.streams:
        lines += ["", f"Idle time per stream (us; kernel wait: intervals under {KERNEL_WAIT_THRESHOLD_US:g} us)"]
        lines += table(["stream", "host_wait", "kernel_wait", "other"],
                       [[s.stream, _num(s.host_wait_us), _num(s.kernel_wait_us), _num(s.other_us)]
                        for s in rep.streams], False, indent="  ", align="rrrr")
    if rep.launch is not None:
        la = rep.launch
        lines += ["", f"Launches (cudaLaunchKernel/ExC): {la.launches:,}; launch call mean {_num(la.cpu_us_mean, 2)} us;"
                      f" launch delay (op start - call end, >= 0) mean {_num(la.launch_delay_us_mean, 2)} us, "
                      f"p50 {_num(la.launch_delay_us_p50, 2)}, p90 {_num(la.launch_delay_us_p90, 2)}, "
                      f"max {_num(la.launch_delay_us_max, 2)}"]
    for name, err in rep.failures.items():
        lines.append(f"HTA failed in its {name} analysis: {err}")
    if cmp is not None:
        rows = []
        for r in cmp.rows:
            why = [f"{k} {v:+,.3f}" if v is not None else f"{k} (HTA failed)" for k, v in r.deltas.items()]
            why += [f"{k} {v:+,.3f}" for k, v in r.adjustments.items()]
            verdict = "yes" if r.agree else ("no" if r.aligned_agree else "NO*")
            rows.append([r.metric, _num(r.ours, 3), _num(r.hta, 3), _num(r.hta_aligned, 3), verdict, "; ".join(why)])
        lines += ["", "launchgap vs HTA (aligned: HTA with rounding, step filter, stream events and "
                      "event-#0 launch times switched off)"]
        lines += table(["metric", "launchgap", "HTA", "HTA aligned", "agree", "why they differ"], rows, False,
                       indent="  ", align="lrrrll")
        if any(not r.aligned_agree for r in cmp.rows):
            lines.append("  NO*: differs even with HTA's deviations off; see the notes in --format json")
    return "\n".join(lines)
