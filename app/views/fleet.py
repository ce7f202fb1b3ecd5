"""Fleet page: a ``launchgap fleet --out FILE.jsonl`` results file as one fleet diagnosis and capture plan."""
from __future__ import annotations

import dataclasses
import json
import os
from pathlib import Path

import pandas as pd
import streamlit as st

from launchgap.errors import AnalyzerError
from launchgap.fleet import FleetReport, load_fleet_results
from launchgap.planning.planner import BASELINE_LABELS
from launchgap.render import render_plan
from launchgap.render.plan import cost_band_text
from launchgap.workload import display_names
from launchgap.dashboard import session, uploads
from launchgap.dashboard.charts import batch_histogram_figure, fleet_idle_figure
from launchgap.dashboard.settings import MAX_FLEET_FILE_BYTES
from launchgap.dashboard.text import json_safe, md_escape
from launchgap.dashboard.ui import show_buckets_and_charts, show_trace_notes

state = st.session_state
FLEET_KEY = "lg_fleet"  # (file name, FleetReport | None, error | None) of this session's results file
st.title("Fleet")
st.caption("Results of `launchgap fleet DIR_OR_GLOB... --out fleet.jsonl` (many traces analysed on Dask): "
           "distributions across servers and ranks, the outliers, and one capture plan for the whole fleet.")


def _load(path: Path, name: str) -> FleetReport:
    """The report, with the private temporary path in its messages replaced by the uploaded file's name."""
    rep = load_fleet_results(path)
    return dataclasses.replace(rep, warnings=[w.replace(str(path), name) for w in rep.warnings])


f = st.file_uploader("Upload a fleet results file (.jsonl)", type=["jsonl", "json"], key="lg_fleet_widget")
if f is not None and state.get("lg_fleet_id") != f.file_id:
    state["lg_fleet_id"] = f.file_id
    try:
        data = uploads.read_bytes(f, MAX_FLEET_FILE_BYTES)
        rep = session.parse_small_upload(f.name, data, lambda p, n=f.name: _load(p, n))
        state[FLEET_KEY] = (f.name, rep, None)
    except uploads.UploadTooLarge as exc:
        state[FLEET_KEY] = (f.name, None, f"file is {exc.size_bytes / 1e6:.0f} MB, over the "
                                          f"{MAX_FLEET_FILE_BYTES / 1e6:.0f} MB cap")
    except AnalyzerError as exc:
        state[FLEET_KEY] = (f.name, None, exc.message)
    except Exception as exc:  # noqa: BLE001 - a damaged file must not show a traceback
        state[FLEET_KEY] = (f.name, None, f"cannot read it as fleet results ({type(exc).__name__})")

got = state.get(FLEET_KEY)
if got is None:
    st.info("Upload the `.jsonl` file written by `launchgap fleet ... --out fleet.jsonl`. Its first line is a "
            "`launchgap.fleet-run/1` header, then one summary per trace.")
    st.stop()
name, rep, err = got
if err:
    st.error(md_escape(f"{name}: {err}"), icon=":material/error:")
    st.stop()
st.caption(md_escape(f"Using {name}"))

m1, m2, m3, m4 = st.columns(4)
m1.metric("Traces", f"{rep.traces:,}", border=True, help="Analysed without error.")
m2.metric("Failed", f"{rep.failed:,}", border=True)
m3.metric("Steps", f"{rep.steps:,}", border=True)
m4.metric("Fleet GPU idle", f"{rep.gpu_idle_fraction:.1%}", border=True,
          help="Idle time over all step windows of all traces.")
st.caption(md_escape("Modes: " + ", ".join(f"{k} {v}" for k, v in rep.modes.items())
                     + "; verdicts: " + ", ".join(f"{k} {v}" for k, v in rep.verdicts.items())))

st.subheader("Distributions across traces")
DIST_LABELS = {"step_us": "step, profiled (us)", "estimated_unprofiled_step_us": "step, unprofiled estimate (us)",
               "gpu_idle_fraction": "GPU idle fraction", "host_idle_fraction": "host-side idle fraction",
               "predicted_speedup": "predicted CUDA-graph speedup"}
dist = pd.DataFrame([{"metric": DIST_LABELS.get(k, k), "traces": d.count, "p10": d.p10, "p50": d.p50, "p90": d.p90,
                      "max": d.max} for k, d in rep.distributions.items()])
st.dataframe(dist, hide_index=True, column_config={c: st.column_config.NumberColumn(format="%.3g")
                                                   for c in ("p10", "p50", "p90", "max")})

a, b = st.columns(2)
with a:
    st.plotly_chart(fleet_idle_figure(rep.idle_fraction_by_cause), width="stretch", key="lg_fleet_idle")
with b:
    if rep.batch_histogram:
        st.plotly_chart(batch_histogram_figure(rep.batch_histogram), width="stretch", key="lg_fleet_hist")
    else:
        st.info("No step has a known batch size.")
if rep.unknown_batch_steps:
    st.caption(f"{rep.unknown_batch_steps:,} step(s) without a known batch size are left out of the histogram.")

ROW_CONFIG = {
    "step_us_median": st.column_config.NumberColumn("step (us)", format="%.1f"),
    "estimated_unprofiled_step_us_median": st.column_config.NumberColumn("unprofiled step (us)", format="%.1f"),
    "gpu_idle_fraction": st.column_config.NumberColumn("GPU idle", format="percent"),
    "host_idle_fraction": st.column_config.NumberColumn("host-side idle", format="percent"),
    "predicted_speedup": st.column_config.NumberColumn("predicted speedup", format="%.2fx"),
    "step_vs_peers": st.column_config.NumberColumn("step vs peers", format="%.2fx"),
    "path": st.column_config.TextColumn("trace", width="medium"),
    "main_batch_size": st.column_config.TextColumn("batch size"),
    "workload": st.column_config.TextColumn(width="medium"),
}
# The figures first, then the workload: at 1400 px the long names must not push the numbers out of view.
COLS = ["path", "mode", "main_batch_size", "steps", "step_us_median", "estimated_unprofiled_step_us_median",
        "gpu_idle_fraction", "host_idle_fraction", "predicted_speedup", "step_vs_peers", "verdict", "workload",
        "rank"]
#: What each workload is called (its label, never the wl- id a results file keys it by).
NAMES = display_names(w.workload for w in rep.workloads)
#: The folder every trace of the fleet lies under: shown once, the table names the files below it.
try:
    ROOT = os.path.commonpath([r.path for r in rep.rows]) if len(rep.rows) > 1 else ""
except ValueError:  # absolute and relative paths mixed: no common folder
    ROOT = ""


def _rows(rows) -> pd.DataFrame:
    """Outlier rows as the table shows them: each trace below the fleet's common folder, the workload by
    name; a rank or batch size a trace does not say is a dash (text cells: a column mixing numbers and
    dashes breaks Arrow's conversion)."""
    out = [{**dataclasses.asdict(r), "path": os.path.relpath(r.path, ROOT) if ROOT else r.path,
            "workload": NAMES.get(r.workload_id or "unknown", r.workload_id or "—"),
            "rank": "—" if r.rank is None else str(r.rank),
            "main_batch_size": "—" if r.main_batch_size is None else str(r.main_batch_size)} for r in rows]
    return pd.DataFrame(out, columns=COLS) if out else pd.DataFrame(columns=COLS)


st.subheader("Outliers")
if ROOT:
    st.caption(md_escape(f"Traces under {ROOT}"))
st.markdown("**Slowest against their peers** (median step over that of the traces with the same mode and main "
            "batch size)")
st.dataframe(_rows(rep.slowest), hide_index=True, column_config=ROW_CONFIG)
st.markdown("**Most launch-bound** (highest host-side idle)")
st.dataframe(_rows(rep.most_launch_bound), hide_index=True, column_config=ROW_CONFIG)
if rep.errors:
    with st.expander(f"{len(rep.errors)} trace(s) failed"):
        st.dataframe(pd.DataFrame([dataclasses.asdict(e) for e in rep.errors]), hide_index=True)

st.subheader("Capture plan for the fleet")
plan, note, inputs = rep.plan, rep.plan_note, rep.plan_inputs
said = rep.workloads[0].trace_notes if len(rep.workloads) == 1 else ()  # what the traces' analyses said
if plan is None and len(rep.workloads) > 1:  # one plan per workload: costs of different models are not pooled
    st.warning(md_escape(f"The fleet runs {len(rep.workloads)} workloads (models, devices or ranks); their costs "
                         "and batch sizes are not pooled: pick the workload to plan."), icon=":material/warning:")
    by_id = {w.id: w for w in rep.workloads}
    pick = st.selectbox("Workload", list(by_id), key="lg_fleet_workload",
                        format_func=lambda i: f"{NAMES[i]} — {by_id[i].traces} trace(s)")
    plan, note, said, inputs = by_id[pick].plan, by_id[pick].plan_note, by_id[pick].trace_notes, by_id[pick].inputs
if plan is None:
    st.info(md_escape(f"No plan: {note}"))
    show_trace_notes(said)
else:
    p1, p2, p3 = st.columns(3)
    p1.metric("Graphs to capture", f"{plan.score.n_graphs}", border=True)
    p2.metric("Expected step", f"{plan.expected_step_us:,.0f} us", border=True,
              help=f"All eager: {plan.all_eager_expected_step_us:,.0f} us.")
    p3.metric("Speedup vs all eager", f"{plan.speedup_vs_all_eager:.1f}x", border=True)
    if plan.cost_band is not None:  # costs from the traces' cost curves: the model's band on them
        st.caption(md_escape("Cost band: " + cost_band_text(plan.cost_band)))
    show_trace_notes(plan.trace_notes)
    show_buckets_and_charts(plan, "lg_fleet_plan")
    base = pd.DataFrame([{"setup": BASELINE_LABELS[k], "graphs": v.score.n_graphs,
                          "expected step (us)": v.score.expected_step_us, "within budget": v.within_budget,
                          "plan saves": 1 - plan.expected_step_us / v.score.expected_step_us
                          if v.score.expected_step_us > 0 else 0.0} for k, v in plan.baselines.items()]
                        + [{"setup": "all eager", "graphs": 0, "expected step (us)": plan.all_eager_expected_step_us,
                            "within budget": True,
                            "plan saves": 1 - plan.expected_step_us / plan.all_eager_expected_step_us
                            if plan.all_eager_expected_step_us > 0 else 0.0}])
    st.dataframe(base, hide_index=True, column_config={
        "expected step (us)": st.column_config.NumberColumn(format="%.1f"),
        "plan saves": st.column_config.NumberColumn(format="percent")})
    st.caption("Re-plan with other budgets from the same file: `launchgap fleet --out fleet.jsonl --max-graphs N` "
               "(no traces given: no analysis is repeated).")
    with st.expander("Inputs: which input gave what"):  # as the Capture plan page says it
        st.markdown("\n".join(f"- {md_escape(n)}" for n in inputs))

for w in [*rep.warnings, *(plan.warnings if plan is not None else [])]:
    st.warning(md_escape(w), icon=":material/info:")

d1, d2 = st.columns(2)
d1.download_button("Download fleet report (JSON)", json.dumps(json_safe(rep.to_dict()), indent=1, allow_nan=False),
                   file_name="launchgap-fleet.json", mime="application/json")
if plan is not None:
    d2.download_button("Download plan (Markdown)", render_plan(plan, markdown=True,
                                                           notes=[f"fleet results {name}", *inputs]),
                       file_name="launchgap-fleet-plan.md", mime="text/markdown")
