"""Ranks page: the ranks of one tensor-parallel job side by side (collective waits, skew, group prediction)."""
from __future__ import annotations

import logging

import pandas as pd
import streamlit as st

from launchgap.errors import AnalyzerError
from launchgap.workload import shared_label
from launchgap.dashboard import session
from launchgap.dashboard.charts import rank_split_figure
from launchgap.dashboard.jobs import analyze_job_cached, find_jobs, job_label
from launchgap.dashboard.text import md_escape
from launchgap.dashboard.ui import show_load_errors, trace_cache

log = logging.getLogger("launchgap.app")
state = st.session_state
st.title("Ranks")
st.caption("Tensor-parallel jobs: every rank's trace of one run, aligned at their collectives. Time a collective "
           "spends waiting for the other ranks is idle with cause `peer`, not GPU work.")
show_load_errors()
jobs = find_jobs(session.loaded_ok(state))
if not jobs:
    st.info("No job with two or more ranks is loaded. Upload all ranks' trace files of one job together on the "
            "Traces page (names like `..._rank0.json.gz`, `..._rank1.json.gz`, or Kineto traces with "
            "distributedInfo; or one file holding every rank, as an nsys export of the server), or pick the bundled "
            "`h200x2-tp2-1b` rank files.")
    st.page_link("views/traces.py", label="Go to Traces", icon=":material/upload_file:")
    st.stop()

labels = [job_label(g) for g in jobs]
pick = st.selectbox("Job", range(len(jobs)), format_func=lambda i: labels[i], key="lg_ranks_job") \
    if len(jobs) > 1 else 0
group = jobs[pick if pick is not None and pick < len(jobs) else 0]
try:
    with st.spinner(f"Aligning {len(group)} ranks at their collectives…"):
        job = analyze_job_cached(group, session.options(state), trace_cache())
except Exception as exc:  # noqa: BLE001 - a job the analyzer cannot align must not show a traceback
    if not isinstance(exc, AnalyzerError):
        log.exception("analysing job %s failed", labels[pick])
    st.error(md_escape(session.error_line(exc)), icon=":material/error:")
    st.stop()

s = job.summary
if job.split:
    st.info(md_escape(job.split), icon=":material/info:")
labels_of = {shared_label(r.workload) for r in job.reports if r.workload is not None}
if labels_of:
    st.caption(md_escape("Workload: " + "; ".join(sorted(labels_of))))
m1, m2, m3, m4 = st.columns(4)
m1.metric("Group CUDA-graph step", f"{s.predicted_graph_step_us_median:,.1f} us", border=True,
          help="Predicted CUDA-graph step of the group: median over matched steps of the slowest rank's "
               "predicted graph step (the group moves at the pace of its slowest rank).")
m2.metric("Wait estimate", s.wait_estimate, border=True,
          help="aligned: each collective's wait taken from the peers' start times; single-rank: estimated from "
               "each rank alone (fastest instances of the same collective).")
m3.metric("Slowest rank", f"{s.slowest_rank}" if s.slowest_rank is not None else "none", border=True)
m4.metric("GPU start skew (median)", f"{s.start_skew_us_median:,.1f} us", border=True,
          help="Per matched collective, latest minus earliest start across ranks.")
st.caption(md_escape(f"Ranks {', '.join(str(r) for r in s.ranks)}"
                     + (f" of {s.world_size}" if s.world_size else "")
                     + f"; {s.aligned_collectives} collectives matched across ranks; steps matched by "
                       f"{s.step_match}; host launch lag {s.launch_lag_us_median:,.1f} us median per collective."))
st.markdown("**Slowest rank, and why**")
st.text(s.slowest_rank_reason)

rank_rows = pd.DataFrame([{
    "rank": r.rank, "trace": r.path, "estimate": r.wait_estimate,
    "step (us)": r.step_us_median, "host step (us)": r.cpu_step_us_median, "GPU busy (us)": r.gpu_busy_us_median,
    "host idle": r.host_idle_fraction, "peer idle": r.peer_idle_fraction,
    "wait per step (us)": r.collective_wait_us_per_step_median,
    "predicted graph, alone (us)": r.predicted_graph_step_us_alone,
    "predicted graph, with peers (us)": r.predicted_graph_step_us,
    "last at collectives": r.last_at_collectives,
} for r in job.ranks])
st.subheader("Ranks side by side")
st.dataframe(rank_rows, hide_index=True, column_config={
    "step (us)": st.column_config.NumberColumn(format="%.1f"),
    "host step (us)": st.column_config.NumberColumn(format="%.1f"),
    "GPU busy (us)": st.column_config.NumberColumn(format="%.1f"),
    "host idle": st.column_config.NumberColumn(format="percent",
                                               help="GPU idle waiting for this rank's own host"),
    "peer idle": st.column_config.NumberColumn(format="percent", help="collectives waiting for other ranks"),
    "wait per step (us)": st.column_config.NumberColumn(format="%.1f"),
    "predicted graph, alone (us)": st.column_config.NumberColumn(format="%.1f"),
    "predicted graph, with peers (us)": st.column_config.NumberColumn(format="%.1f"),
})
st.plotly_chart(rank_split_figure(job.ranks), width="stretch", key="lg_ranks_split")

st.subheader("Steps across ranks")
if job.steps:
    step_rows = pd.DataFrame([{
        "step": g.index, "name": g.name, "batch size": g.batch_size,
        **{f"predicted graph, rank {rk} (us)": p for rk, p in zip(s.ranks, g.predicted_graph_us_by_rank)},
        "group prediction (us)": g.predicted_graph_us, "collectives": g.collectives,
        "start skew p50 (us)": g.start_skew_us_median, "start skew max (us)": g.start_skew_us_max,
        "launch lag p50 (us)": g.launch_lag_us_median, "launch lag max (us)": g.launch_lag_us_max,
        "last rank": g.last_rank,
    } for g in job.steps])
    st.dataframe(step_rows, hide_index=True, column_config={
        c: st.column_config.NumberColumn(format="%.1f") for c in step_rows.columns if c.endswith("(us)")})
else:
    st.info("No step matched on every rank; the group's step is the largest of the ranks' medians.")
for w in job.warnings:
    st.warning(md_escape(w), icon=":material/info:")
