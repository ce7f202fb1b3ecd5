"""A tensor-parallel job's section (:class:`~launchgap.ranks.JobReport`) as text or Markdown."""
from __future__ import annotations

from ..ranks import JobReport
from .table import table as _table


def render_job(job: JobReport, markdown: bool = False) -> str:
    """The job section as text or Markdown (the per-rank reports render as single traces)."""
    s = job.summary
    h = "## " if markdown else ""
    lines = [f"{h}Job {job.key}: ranks {', '.join(str(r) for r in s.ranks)}"
             + (f" of {s.world_size}" if s.world_size else ""), ""]
    if job.split:
        lines += [job.split, ""]
    facts = [
        ("collective wait estimate", f"{s.wait_estimate} ({s.aligned_collectives} collectives matched across ranks, "
                                     f"steps matched by {s.step_match})"),
        ("predicted CUDA-graph step (group)",
         f"{s.predicted_graph_step_us_median:,.1f} us (the slowest rank per step)"),
        ("slowest rank", f"{s.slowest_rank if s.slowest_rank is not None else '-'}: {s.slowest_rank_reason}"),
        ("rank skew", f"GPU start skew {s.start_skew_us_median:,.1f} us median, host launch lag "
                      f"{s.launch_lag_us_median:,.1f} us median per collective"),
        ("clocks", "offsets " + ", ".join(f"{o:,.3f}" for o in s.clock_offset_us_by_rank)
         + f" us; ends of matched collectives agree to {s.end_residual_us_median:,.3f} us median"),
    ]
    if markdown:
        lines += _table(["metric", "value"], facts, True)
    else:
        w = max(len(k) for k, _ in facts)
        lines += [f"  {k:<{w}}  {v}" for k, v in facts]
    lines += ["", f"{h}Ranks" if markdown else "Ranks"]
    lines += _table(["rank", "estimate", "step_us", "cpu_step_us", "busy_us", "host_idle", "peer_idle",
                     "wait_us/step", "pred_alone_us", "pred_us", "last_at"],
                    [(r.rank, r.wait_estimate, f"{r.step_us_median:,.1f}", f"{r.cpu_step_us_median:,.1f}",
                      f"{r.gpu_busy_us_median:,.1f}", f"{r.host_idle_fraction:.0%}", f"{r.peer_idle_fraction:.0%}",
                      f"{r.collective_wait_us_per_step_median:,.1f}", f"{r.predicted_graph_step_us_alone:,.1f}",
                      f"{r.predicted_graph_step_us:,.1f}", r.last_at_collectives) for r in job.ranks], markdown)
    if job.steps:
        lines += ["", f"{h}Steps across ranks" if markdown else "Steps across ranks"]
        lines += _table(["step", "name", "bs", "pred_by_rank_us", "group_pred_us", "collectives", "skew_us_p50",
                         "skew_us_max", "lag_us_p50", "lag_us_max", "last_rank"],
                        [(st.index, st.name, st.batch_size if st.batch_size is not None else "-",
                          " / ".join(f"{p:,.1f}" for p in st.predicted_graph_us_by_rank),
                          f"{st.predicted_graph_us:,.1f}", st.collectives, f"{st.start_skew_us_median:,.1f}",
                          f"{st.start_skew_us_max:,.1f}", f"{st.launch_lag_us_median:,.1f}",
                          f"{st.launch_lag_us_max:,.1f}", st.last_rank if st.last_rank is not None else "-")
                         for st in job.steps], markdown)
    if job.warnings:
        lines.append("")
        lines += [f"warning: {w}" for w in job.warnings]
    return "\n".join(lines)
