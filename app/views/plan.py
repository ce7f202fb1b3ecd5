"""Capture plan page: which batch sizes to capture as CUDA graphs, from costs and a distribution.

The page describes what it was given as a :class:`~launchgap.planning.request.PlanRequest` and
calls :func:`~launchgap.planning.request.build_plan`, as ``launchgap plan`` and ``fleet`` do:
on the same inputs with the defaults untouched it shows the command's plan.
"""
from __future__ import annotations

import dataclasses
import json

import pandas as pd
import streamlit as st

from launchgap.engines import engine
from launchgap.errors import AnalyzerError
from launchgap.files import MAX_SMALL_FILE_BYTES
from launchgap.planning.inputs import (
    distribution_from_steps,
    load_distribution,
    load_model_dims,
    looks_like_timings,
)
from launchgap.planning.planner import BASELINE_LABELS, SERVERS, PlanOptions
from launchgap.planning.request import (PlanInput, PlanRequest, build_plan, rank_note, server_log_input, trace_steps,
                                        traces_input)
from launchgap.render import render_plan
from launchgap.render.plan import (CROSSOVER_FLOOR_TEXT, EAGER_FLOOR_TEXT, TIE_CONFIG_NOTE, cost_band_text, memory_basis,
                                   seconds_text)
from launchgap.dashboard import session, uploads
from launchgap.dashboard.server_uploads import server_logs
from launchgap.dashboard.charts import pareto_figure, tradeoff_figure
from launchgap.dashboard.text import band_percent, json_safe, md_escape, page_words
from launchgap.dashboard.ui import settings, show_buckets_and_charts, show_load_errors, show_trace_notes
from launchgap.workload import tp_job
from launchgap.dashboard.workloads import pick_workload_entries, workload_name

state = st.session_state
st.title("Capture plan")
st.caption("Which batch sizes to capture as CUDA graphs: the exact best bucket set for your batch-size distribution "
           "under a graph-count, memory and start-up budget, against the servers' default lists.")
show_load_errors()
loaded = session.loaded_ok(state)
uploaded = [e for e in loaded if e.source == "upload" and e.report.workload is not None]
# Open on the workload of the latest upload (what the user came with), not the bundled samples'.
# A tensor-parallel job's ranks are one workload here: a server captures one list on every rank.
entries = pick_workload_entries(loaded, "lg_plan_workload",
                                default=tp_job(uploaded[-1].report.workload).id if uploaded else None,
                                ranks_together=True)
workload = workload_name(loaded, tp_job(entries[0].report.workload).id
                         if entries and entries[0].report.workload is not None else "unknown", ranks_together=True)
steps = [trace_steps(e.report, e.name) for e in entries]  # messages name the user's files


def _upload_once(label: str, key: str, types: list[str], parse) -> tuple[str, object] | None:
    """An uploader whose parsed result stays in the session after the page is left (stored as (name, value))."""
    f = st.file_uploader(label, type=types, key=f"{key}_widget")
    if f is not None and state.get(f"{key}_id") != f.file_id:
        state[f"{key}_id"] = f.file_id
        try:
            data = uploads.read_bytes(f, MAX_SMALL_FILE_BYTES)
            state[key] = (f.name, session.parse_small_upload(f.name, data, parse), None)
        except uploads.UploadTooLarge as exc:
            state[key] = (f.name, None, f"file is {exc.size_bytes / 1e6:.0f} MB, over the "
                                        f"{MAX_SMALL_FILE_BYTES / 1e6:.0f} MB cap")
        except AnalyzerError as exc:
            state[key] = (f.name, None, exc.message)
    got = state.get(key)
    if got is None:
        return None
    name, value, err = got
    if err:
        st.error(md_escape(f"{name}: {err}"))
        return None
    st.caption(md_escape(f"Using {name}"))
    return name, value


def _timings_models(path) -> list[str]:
    try:
        doc = json.loads(path.read_bytes())
        return sorted({str(r.get("model", "")) for r in doc.get("rows", []) if isinstance(r, dict)})
    except (OSError, ValueError, AttributeError):
        return []


def _timings_choice() -> tuple[str, bytes, str | None] | None:
    """The harness timings picked (bundled or uploaded): (name, bytes, model) or None."""
    root = settings().samples_dir
    bundled = [p for p in root.rglob("*.json") if looks_like_timings(p)] if root.is_dir() else []
    bundled_names = {p.relative_to(root).as_posix(): p for p in sorted(bundled)}
    choice = st.selectbox("Timings file", ["upload…"] + list(bundled_names), index=1 if bundled_names else 0,
                          key="lg_plan_timings_pick")
    if choice == "upload…":
        up = _upload_once("Upload timings.json", "lg_plan_timings", ["json"],
                          lambda p: (p.read_bytes(), _timings_models(p)))
        if not up:
            return None
        name, (raw, models) = up
    else:
        name, raw, models = choice, bundled_names[choice].read_bytes(), _timings_models(bundled_names[choice])
    model = st.selectbox("Model", models, key="lg_plan_model") if len(models) > 1 else None
    return name, raw, model


inputs, knobs = st.columns([1, 1], gap="large")
plan_inputs: list[PlanInput] = []
timings = None
with inputs:
    st.subheader("Inputs")
    src = st.radio("Step costs from", ["loaded traces", "harness timings (JSON)"], horizontal=True, key="lg_plan_src",
                   help="Harness timings are unprofiled measurements (better); traces give profiled steps scaled to "
                        "an unprofiled estimate, with graph costs predicted where no graph trace exists.")
    if src == "loaded traces" and not steps:
        st.info("Load traces on the Traces page, or use harness timings.")
    elif src != "loaded traces":
        timings = _timings_choice()
    dsrc = st.radio("Batch-size distribution from", ["steps in the loaded traces", "a CSV / JSON histogram"],
                    horizontal=True, key="lg_plan_dsrc",
                    help="CSV `batch_size,count` (header optional) or JSON {\"8\": 120, ...}: what production runs.")
    roles = (("costs",) if src == "loaded traces" else ()) + (("distribution",) if dsrc.startswith("steps") else ())
    # their kernels per step size the graphs' capture time; a serving trace's capture list is the server's current one
    roles += ("graph_nodes", "capture_sizes") if roles else ()
    if roles and steps:
        plan_inputs.append(traces_input(steps, workload, roles))
    if dsrc.startswith("steps") and steps and all(t.benchmark for t in steps):
        st.info("The loaded traces are benchmarks of one batch size each (launchgap record sweeps): they give the "
                "step costs, never production's batch sizes. Load a serving trace, or upload a histogram.")
    elif dsrc.startswith("steps") and not any(t.batch_size.max(initial=-1) >= 0 for t in steps):
        st.info("No loaded step has a known batch size; upload a histogram instead.")
    elif not dsrc.startswith("steps"):
        up = _upload_once("Upload a distribution (CSV or JSON)", "lg_plan_dist", ["csv", "json", "txt"],
                          load_distribution)
        if up:
            plan_inputs.append(PlanInput("distribution", up[0], ("distribution",), value=up[1]))
    if st.toggle("Give the model's dimensions (config.json)", key="lg_plan_cfg_on",
                 help="Graph memory and capture time then come from the memory model for these dimensions "
                      "(harness timings with a 'models' section give them already)."):
        cfg = _upload_once("Model dimensions (Hugging Face config.json)", "lg_plan_model_cfg", ["json"],
                           load_model_dims)
        if cfg:
            plan_inputs.append(PlanInput("model_config", cfg[0], ("model_dims",), value=cfg[1]))

    # The server's own log uploaded beside the traces (the Traces page reads it): its capture list, graph memory and
    # capture time, and its cap on running requests, as `launchgap plan TRACE --server-log LOG` takes them; the
    # costs and the distribution stay what the radios above pick (the Server page plans from a log alone).
    logs = [u for u in server_logs(state).values() if u.diagnosis is not None and u.diagnosis.log.kind == "log"]
    if logs and plan_inputs:
        lg = logs[-1]
        plan_inputs.append(server_log_input(lg.diagnosis, lg.name, ("capture_sizes", "capture_cost")))
        st.caption(md_escape(f"Server log {lg.name}" + (f" (the latest of {len(logs)})" if len(logs) > 1 else "")
                             + ": the capture list, the server's own graph memory and capture time, and its cap on "
                               "running requests, where it states them."))

with knobs:
    st.subheader("Budget and policy")
    defaults = PlanOptions()  # the command's defaults: the same inputs give the same plan
    max_graphs = st.number_input("Max graphs (0 = no limit)", 0, 4096, defaults.max_graphs or 0, key="lg_plan_max_graphs",
                                 help="At most this many CUDA graphs; with no limit the plan takes every graph "
                                      "that lowers the expected step (the other budgets still apply).")
    mem_budget = st.slider("Memory budget for graphs (MiB; 0 = none)", 0, 16384, 0, step=64, key="lg_plan_mem")
    cap_budget = st.number_input("Capture-time budget (s; 0 = none)", 0.0, 3600.0, 0.0, step=1.0, key="lg_plan_cap",
                                 help="Start-up seconds the graphs may take to capture; needs the model's dimensions.")
    kv_bytes = st.number_input("KV-cache bytes per token (0 = from the model)", 0, 1 << 24, 0, step=1024,
                               key="lg_plan_kv")
    graph_mib = st.number_input("Memory per graph (MiB; 0 = measured or assumed)", 0.0, 65536.0, 0.0, step=8.0,
                                key="lg_plan_graph_mib")
    max_bs = st.number_input("Largest batch size to capture (0 = no limit)", 0, 65536, 0, key="lg_plan_max_bs")
    win = st.slider("Win threshold (%)", 0, 50, round(defaults.win_threshold * 100), 1, key="lg_plan_win",
                    help="The crossover is the batch size above which a graph makes the step less than this "
                         "much faster.") / 100
    padding = st.radio("Padding policy", ["pad", "exact"], horizontal=True, key="lg_plan_padding",
                       format_func={"pad": "pad up to the next captured size (server default)",
                                    "exact": "exact match only"}.get)

has_costs = any("costs" in i.roles for i in plan_inputs) or timings is not None
if not has_costs or not any("distribution" in i.roles for i in plan_inputs):
    st.stop()
try:
    opts = PlanOptions(max_graphs=int(max_graphs) or None, memory_budget_mib=float(mem_budget) or None,
                       graph_memory_mib=graph_mib or None, max_batch_size=int(max_bs) or None, padding=padding,
                       win_threshold=win, capture_budget_s=float(cap_budget) or None,
                       kv_bytes_per_token=float(kv_bytes) or None)
    request = PlanRequest(tuple(plan_inputs), opts)
    if timings is not None:
        name, raw, model = timings
        plan, notes = session.parse_small_upload(name, raw, lambda p: build_plan(dataclasses.replace(
            request, inputs=(PlanInput("timings", name, ("costs", "model_dims", "graph_nodes"), path=str(p),
                                       model=model),
                             *request.inputs))))
    else:
        plan, notes = build_plan(request)
except AnalyzerError as exc:
    st.error(md_escape(page_words(exc.message)))
    st.stop()

with inputs:
    if plan.model_dims is not None:
        st.caption(md_escape(f"Graph memory and capture time from the memory model, for {plan.model_dims.name}'s "
                             f"dimensions."))
    dist = next(i.value if i.kind == "distribution" else distribution_from_steps(i.value)
                for i in plan_inputs if "distribution" in i.roles)
    st.caption(md_escape("Distribution: " + ", ".join(f"bs {b}: {n:g}" for b, n in list(dist.items())[:24])
                         + (" …" if len(dist) > 24 else "")))
    st.caption(md_escape("Sources: " + "; ".join(f"{role.replace('_', ' ')} from {name}"
                                                 for role, name in plan.sources.items() if name)))

st.divider()
m1, m2, m3, m4 = st.columns(4)
m1.metric("Graphs to capture", f"{plan.score.n_graphs}", border=True,
          help=f"Budget allows {plan.max_graphs_effective if plan.max_graphs_effective is not None else 'any number'}.")
m2.metric("Expected step", f"{plan.expected_step_us:,.0f} us", border=True)
m3.metric("Speedup vs all eager", f"{'≥ ' if plan.eager_floor else ''}{plan.speedup_vs_all_eager:.2f}x", border=True,
          help=f"At least{EAGER_FLOOR_TEXT}." if plan.eager_floor else None)
floor_cross = "≥ " if plan.eager_floor and not plan.crossover_on_tie else ""  # the win read from a floor: may lie higher
m4.metric("Crossover batch size",
          f"{floor_cross}{plan.crossover_batch_size}" if plan.crossover_batch_size is not None else "none",
          border=True, help=f"Above it a graph saves less than {win:.0%} of the step."
                            + (" Here it is where the eager estimate meets its floor, the graph step (no eager step "
                               "measured): not a measured end of the win." if plan.crossover_on_tie else
                               f" Here it is read {CROSSOVER_FLOOR_TEXT}." if plan.eager_floor else ""))
r1, r2, r3, r4 = st.columns(4)
r1.metric("Graph memory", f"{plan.memory_used_mib:,.0f} MiB", border=True, help=md_escape(plan.graph_memory_source))
r2.metric("Capture time", f"{seconds_text(plan.capture_s)} s" if plan.capture_s is not None else "unknown", border=True,
          help="Predicted start-up seconds to capture the plan's graphs, from the capture-time part of the memory "
               "model.")
r3.metric("KV-cache tokens lost", f"{plan.kv_tokens_lost:,}" if plan.kv_tokens_lost is not None else "unknown",
          border=True, help="The graphs' memory, in KV-cache tokens of this model (or the bytes per token given).")
x, cb = plan.extrapolation, plan.cost_band
step = plan.expected_step_us
# as shares of the expected step: two step times in us do not fit the metric's width
if x is None and cb is not None:  # costs from a trace's cost curve: the model's band on them
    r4.metric("Cost-model band", band_percent(cb["expected_step_us_low"], cb["expected_step_us_high"], step),
              border=True, help="The expected step with every graph cost the batch-scaling model gave at its band's "
                                "low and high end, against the expected step; the line under the figures gives both "
                                "in us and what they do to the list.")
else:
    r4.metric("Extrapolation band", band_percent(x["expected_step_us_low"], x["expected_step_us_high"], step)
              if x is not None else "none", border=True,
              help="Costs above the largest measured batch size are extrapolated; the band takes half and twice the "
                   "fitted growth" + (f": the expected step {x['expected_step_us_low']:,.0f} to "
                                      f"{x['expected_step_us_high']:,.0f} us." if x is not None else "."))
if cb is not None:
    st.caption(md_escape("Cost band: " + cost_band_text(cb)))
show_trace_notes(plan.trace_notes)
st.caption(md_escape(memory_basis(plan)))
show_buckets_and_charts(plan, "lg_plan")

base = pd.DataFrame([{"setup": BASELINE_LABELS.get(k, k), "version": v.version or "—", "graphs": v.score.n_graphs,
                      "expected step (us)": v.score.expected_step_us,
                      "graph memory (MiB)": v.memory_mib, "capture (s)": v.capture_s, "within budget": v.within_budget,
                      "plan saves": 1 - plan.expected_step_us / v.score.expected_step_us
                      if v.score.expected_step_us > 0 else 0.0}
                     for k, v in plan.baselines.items()])
st.dataframe(base, hide_index=True, column_config={
    "expected step (us)": st.column_config.NumberColumn(format="%.1f"),
    "graph memory (MiB)": st.column_config.NumberColumn(format="%.0f"),
    "capture (s)": st.column_config.NumberColumn(format="%.1f"),
    "plan saves": st.column_config.NumberColumn(format="percent"),
})

st.subheader("Trade-off: expected step, graph memory, start-up")
st.plotly_chart(pareto_figure(plan, BASELINE_LABELS), width="stretch", key="lg_plan_pareto")
st.dataframe(pd.DataFrame([{"graphs": p.graphs, "expected step (us)": p.expected_step_us,
                            "graph memory (MiB)": p.memory_mib, "capture (s)": p.capture_s,
                            "within budget": p.within_budget, "buckets": ", ".join(str(b) for b in p.buckets)}
                           for p in plan.pareto]), hide_index=True, key="lg_plan_pareto_table",
             column_config={"expected step (us)": st.column_config.NumberColumn(format="%.1f"),
                            "graph memory (MiB)": st.column_config.NumberColumn(format="%.0f"),
                            "capture (s)": st.column_config.NumberColumn(format="%.1f")})

st.subheader("Configs to copy")
if not plan.buckets and plan.eager_equals_graph:
    st.caption(md_escape(TIE_CONFIG_NOTE))
# the loaded traces' own engine's tab first (st.tabs opens on the first)
ran = {e.report.summary.engine for e in entries}
servers = sorted(SERVERS, key=lambda s: s not in ran)
tabs = st.tabs([BASELINE_LABELS[s] for s in servers])
snippets = plan.config_snippets()
configs = plan.configs()
for tab, name in zip(tabs, servers):  # three servers
    with tab:
        st.code(json.dumps(configs[name]), language="json", wrap_lines=True)
        st.code(snippets[name], language=engine(name).SNIPPET_LANGUAGE)

with st.expander("Per batch size, and the trade-off curve"):
    st.dataframe(pd.DataFrame([dataclasses.asdict(r) for r in plan.per_batch]), hide_index=True,
                 column_config={"weight": st.column_config.NumberColumn("share", format="percent"),
                                "eager_us": st.column_config.NumberColumn(format="%.1f"),
                                "graph_us": st.column_config.NumberColumn(format="%.1f"),
                                "planned_us": st.column_config.NumberColumn(format="%.1f")})
    st.plotly_chart(tradeoff_figure(plan), width="stretch", key="lg_plan_tradeoff")

for w in plan.warnings:
    st.warning(md_escape(w), icon=":material/info:")
if note := rank_note([e.report.workload for e in entries]):
    notes = [*notes, note]
with st.expander("Inputs: which input gave what"):
    st.markdown("\n".join(f"- {md_escape(n)}" for n in notes))

d1, d2 = st.columns(2)
d1.download_button("Download plan (JSON)", json.dumps(json_safe(plan.to_dict()), indent=1, allow_nan=False),
                   file_name="launchgap-plan.json", mime="application/json")
d2.download_button("Download report (Markdown)", render_plan(plan, markdown=True, notes=notes),
                   file_name="launchgap-plan.md", mime="text/markdown")
