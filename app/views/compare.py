"""Compare page: eager vs CUDA-graph traces paired by batch size, and any two traces side by side."""
from __future__ import annotations

import numpy as np
import pandas as pd
import streamlit as st

from launchgap.dashboard import session
from launchgap.dashboard.charts import side_by_side_figure, speedup_figure, step_time_figure
from launchgap.dashboard.pairing import crossover_batch_size, pair_by_batch_size
from launchgap.dashboard.text import md_escape
from launchgap.dashboard.ui import loaded_traces_or_stop, pick_trace
from launchgap.dashboard.workloads import pick_workload_entries, workload_name
from launchgap.verdict import headline

state = st.session_state
st.title("Compare")
entries = loaded_traces_or_stop()

st.subheader("Eager vs CUDA graph by batch size")
threshold = st.slider("Win threshold (%)", 0, 50, 5, 1, key="lg_cmp_win",
                      help="A graph is worth it while it makes the step more than this much faster.") / 100
# Pairs are made within one workload: an 8B and a 1B model at batch 8 are not one "batch size 8".
same_workload = pick_workload_entries(entries, "lg_cmp_workload")
table = pair_by_batch_size([(e.name, e.report) for e in same_workload], session.options(state).model)
if table.empty:
    st.info("None of the loaded traces has steps with a known batch size (annotations like `bs=8`). Set a "
            "batch-size regex under Analysis options on the Traces page.")
else:
    speed = table["measured_speedup"].fillna(table["predicted_speedup"]).to_numpy(float)
    cross = crossover_batch_size(table["batch_size"].to_numpy(float), speed, threshold)
    a, b = st.columns(2)
    with a:
        st.plotly_chart(speedup_figure(table, threshold, cross), width="stretch", key="lg_speedup")
    with b:
        st.plotly_chart(step_time_figure(table), width="stretch", key="lg_steptime")
    measured = int(table["measured_speedup"].notna().sum())
    if cross is None:
        st.markdown(f"No crossover up to batch size {int(table['batch_size'].max())}: CUDA graphs save more than "
                    f"{threshold:.0%} at every batch size loaded.")
    else:
        st.markdown(f"**Crossover at about batch size {cross:g}**: above it CUDA graphs save less than "
                    f"{threshold:.0%} of the step (measured pairs where both traces exist — {measured} here — "
                    "predicted from the eager trace otherwise).")
    st.dataframe(table, hide_index=True, column_config={
        "batch_size": st.column_config.NumberColumn("batch size"),
        "eager_traces": st.column_config.TextColumn("eager trace(s)"),
        "eager_steps": st.column_config.NumberColumn("eager steps"),
        "eager_step_profiled_us": st.column_config.NumberColumn("eager step, profiled (us)", format="%.1f"),
        "eager_step_us": st.column_config.NumberColumn("eager step (us)", format="%.1f"),
        "eager_busy_us": st.column_config.NumberColumn("eager busy (us)", format="%.1f"),
        "eager_idle_fraction": st.column_config.NumberColumn("eager idle", format="percent"),
        "predicted_graph_us": st.column_config.NumberColumn("predicted graph step (us)", format="%.1f"),
        "predicted_speedup": st.column_config.NumberColumn("predicted speedup", format="%.2fx"),
        "graph_traces": st.column_config.TextColumn("graph trace(s)"),
        "graph_steps": st.column_config.NumberColumn("graph steps"),
        "graph_step_us": st.column_config.NumberColumn("graph step (us)", format="%.1f"),
        "graph_busy_us": st.column_config.NumberColumn("graph busy (us)", format="%.1f"),
        "graph_idle_fraction": st.column_config.NumberColumn("graph idle", format="percent"),
        "measured_speedup": st.column_config.NumberColumn("measured speedup", format="%.2fx"),
    })
    st.caption("Step times are unprofiled estimates (the profiled step less the profiler's cost per recorded "
               "host event for the profiler settings each trace shows); medians over the steps of each batch size.")

st.subheader("Two traces side by side")
if len(entries) < 2:
    st.info("Load a second trace to compare two traces side by side.")
    st.stop()
ca, cb = st.columns(2)
with ca:
    ea = pick_trace("Trace A", "lg_cmp_a", entries, 0)
with cb:
    eb = pick_trace("Trace B", "lg_cmp_b", entries, 1)


def _facts(rep) -> dict[str, float]:
    # the steps the verdict speaks for: an engine trace's first group (decode first), never decode and prefill pooled
    s = headline(rep.summary)
    return {
        "steps": s.steps, "step, profiled (us)": s.step_us_median,
        "step, unprofiled estimate (us)": s.estimated_unprofiled_step_us_median,
        "GPU busy (us)": s.gpu_busy_us_median, "GPU idle (fraction)": s.gpu_idle_fraction,
        "kernels per step": s.kernels_per_step_median, "launch API time per step (us)": s.launch_api_us_per_step_median,
        "launch-to-kernel ratio": s.launch_to_kernel_ratio,
        "predicted graph step (us)": s.predicted_graph_step_us_median,
        # a serving engine's whole step, the time between steps included: the speedup's ratio under "whole step"
        "engine's whole step (us)": s.whole_step_us_before or np.nan,
        "engine's whole step with graphs (us)": s.whole_step_us_after or np.nan,
        "predicted CUDA-graph speedup": s.predicted_speedup,
    }


fa, fb = _facts(ea.report), _facts(eb.report)
for k in [k for k in fa if k.startswith("engine's whole step") and np.isnan(fa[k]) and np.isnan(fb[k])]:
    fa.pop(k), fb.pop(k)  # neither trace is an engine's decode steps with time between them
side = pd.DataFrame({"metric": list(fa), "A": list(fa.values()), "B": list(fb.values())})
with np.errstate(divide="ignore", invalid="ignore"):
    side["B / A"] = np.where(side["A"] != 0, side["B"] / side["A"], np.nan)
def _phase(rep) -> str:
    s = rep.summary
    return (f", {s.step_groups[0]['phase'] or 'phase unknown'} steps" if s.step_source == "engine"
            and len(s.step_groups) > 1 else "")


st.caption(md_escape(f"A = {ea.name} ({ea.report.mode}, {ea.report.summary.verdict}{_phase(ea.report)}); "
                     f"B = {eb.name} ({eb.report.mode}, {eb.report.summary.verdict}{_phase(eb.report)})"))
wa, wb = ea.report.workload, eb.report.workload
if wa is not None and wb is not None and wa.id != wb.id:
    st.caption(md_escape(f"A and B are different workloads: {workload_name(entries, wa.id)} and "
                         f"{workload_name(entries, wb.id)}."))
left, right = st.columns([2, 3])
with left:
    st.dataframe(side, hide_index=True, column_config={
        "A": st.column_config.NumberColumn(format="%.3g"), "B": st.column_config.NumberColumn(format="%.3g"),
        "B / A": st.column_config.NumberColumn(format="%.2f"),
    })
with right:
    st.plotly_chart(side_by_side_figure([("A: " + ea.name, ea.report), ("B: " + eb.name, eb.report)]),
                    width="stretch", key="lg_side")
