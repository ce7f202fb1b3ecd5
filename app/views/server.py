"""Server page: what the server's own logs and /metrics scrapes say about CUDA graphs, and the plan from them.

Logs and scrapes come from the Traces page's uploader (recognised by content,
:mod:`launchgap.dashboard.server_uploads`) or the bundled synthetic logs. The page shows the
log's verdict, the running batch against the largest captured size over time (graph / eager
coloured, the absorbing ceiling state shaded), the server's own capture cost, and the capture
plan built from the logs with :func:`~launchgap.planning.request.build_plan` (as ``launchgap plan
--server-log`` builds it), printed in the server's own syntax.
"""
from __future__ import annotations

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import streamlit as st

from launchgap.engines import LABELS, engine
from launchgap.errors import AnalyzerError
from launchgap.planning.planner import PlanOptions
from launchgap.planning.request import PlanRequest, build_plan, server_log_input
from launchgap.render import render_plan
from launchgap.serverlogs import merge_scrapes, read_server_file
from launchgap.serverlogs.diagnosis import LogDiagnosis, diagnose, inter_token_text, verdict
from launchgap.dashboard.server_uploads import ServerUpload, server_logs
from launchgap.dashboard.text import md_escape
from launchgap.dashboard.ui import settings

#: Above this many points the timeline draws with WebGL.
WEBGL_MIN_POINTS = 1500
COLORS = {1: "#2E7D32", 0: "#E45756", -1: "#9D9D9D"}
NAMES = {1: "graph", 0: "eager", -1: "not logged"}

state = st.session_state
st.title("Server")
st.caption("vLLM, SGLang and TensorRT-LLM server logs and /metrics scrapes: eager share (above the largest captured "
           "size, or a fallback within it), the running batch against the ceiling over time, the server's own capture "
           "cost, and the capture plan in the server's own syntax. Upload them on the Traces page.")

logs = server_logs(state)
bundled_dir = settings().samples_dir / "serverlogs"
bundled = sorted(p for p in bundled_dir.glob("*.gz") if p.is_file()) if bundled_dir.is_dir() else []
if bundled:
    pick = st.multiselect("Bundled server logs (synthetic, seeded)", [p.name for p in bundled],
                          default=[], key="lg_server_samples",
                          help=f"Generated from the engines' format strings ({bundled_dir.name}/PROVENANCE.md).")
    for name in pick:
        if name not in logs:
            try:
                log = read_server_file(bundled_dir / name)
                assert log is not None
                log.path = name
                logs[name] = ServerUpload(name, diagnose(log))
            except AnalyzerError as exc:
                logs[name] = ServerUpload(name, None, f"{name}: {exc.message}")

for up in logs.values():
    if up.error:
        st.error(md_escape(up.error))
good = {k: u.diagnosis for k, u in logs.items() if u.diagnosis is not None}
# one engine's scrapes in several files (a scrape every few minutes, saved one by one): also as one series
for eng in LABELS:
    scrapes = [d.log for d in good.values() if d.log.kind == "metrics" and d.log.engine == eng]
    series = merge_scrapes(scrapes) if len(scrapes) > 1 else []
    for merged in series:  # scrapes naming other models are other servers: a series each
        if len(merged.files) > 1:
            of = f" of {', '.join(merged.models)}" if len(series) > 1 and merged.models else ""
            good[f"{LABELS[eng]} scrapes{of}, {len(merged.files)} files as one series"] = diagnose(merged)
if not good:
    st.info("No server log yet: upload a vLLM / SGLang / TensorRT-LLM log or a /metrics scrape on the Traces page "
            "(plain or gzipped), or pick a bundled one above.")
    st.stop()

choice = st.selectbox("Log or scrape", list(good), index=len(good) - 1, key="lg_server_choice")
d: LogDiagnosis = good[choice]
lg = d.log
v, detail = verdict(d)
st.subheader(f"{LABELS.get(lg.engine, lg.engine)} {lg.kind}: {v}")
st.write(md_escape(detail))
st.caption(md_escape(f"Model: {', '.join(lg.models) or 'not in the file'}; "
                     f"{LABELS.get(lg.engine, lg.engine)} {lg.version or '(version not in the file)'}."))

cols = st.columns(5)
share = d.eager_share
cols[0].metric("Eager share", "unknown" if share is None else f"{share:.1%}",
               help=f"of the {'forward passes' if d.counted == 'passes' else 'logged decode steps'} counted")
cols[1].metric("Largest captured size", "unknown" if d.max_captured is None else str(d.max_captured))
cols[2].metric("Absorbing ceiling state", {True: "yes", False: "no", None: "unknown"}[d.absorbing])
main = lg.main_capture()
cols[3].metric("Capture time", "not logged" if main is None or main.seconds is None else f"{main.seconds:g} s")
cols[4].metric("Capture memory", "not logged" if main is None or main.memory_mib is None
               else f"{main.memory_mib:,.0f} MiB")
if d.inter_token is not None:  # the server's own time per output token (a /metrics histogram)
    st.caption(md_escape(f"Inter-token latency: {inter_token_text(d)}."))
if d.eager_above_max is not None:
    st.caption(md_escape(f"Eager: {d.eager_above_max:,} above the largest captured size (ceiling), "
                         f"{d.eager_within_captured:,} within a captured size (fallback); "
                         f"distribution basis: {d.distribution_basis}."))


def timeline(d: LogDiagnosis) -> go.Figure:
    """Running decode batch per logged line against the largest captured size, graph / eager coloured."""
    lg = d.log
    b = lg.decode_batch
    t = lg.decode_time_s
    timed = len(t) and np.isfinite(t).all()
    x = pd.to_datetime(t, unit="s", utc=True) if timed else np.arange(len(b))
    fig = go.Figure()
    scatter = go.Scattergl if len(b) > WEBGL_MIN_POINTS else go.Scatter
    for flag in (1, 0, -1):
        m = lg.decode_graph == flag
        if not m.any():
            continue
        fig.add_trace(scatter(x=x[m], y=b[m], mode="markers", name=NAMES[flag],
                              marker=dict(color=COLORS[flag], size=4),
                              hovertemplate="batch %{y}<br>%{x}<extra>" + NAMES[flag] + "</extra>"))
    if d.max_captured is not None:
        fig.add_hline(y=d.max_captured, line_dash="dash", line_color="#333333",
                      annotation_text=f"largest captured size {d.max_captured}", annotation_position="top left")
    if d.absorbing and d.run is not None:
        r = d.run
        fig.add_vrect(x0=x[r.first_line], x1=x[min(r.first_line + r.lines, len(b)) - 1], fillcolor="#E45756",
                      opacity=0.08, line_width=0, annotation_text="absorbing ceiling state",
                      annotation_position="top right")
    fig.update_layout(template="plotly_white", height=380, margin=dict(l=10, r=10, t=40, b=10),
                      title=f"Running decode batch ({'per scrape' if lg.kind == 'metrics' else 'per logged line'})",
                      xaxis_title=(("time (UTC as the log states it; vLLM's stamps carry no year)" if lg.engine == "vllm"
                                    else "time (UTC as the log states it)") if timed else "logged line"),
                      yaxis_title="running requests", legend=dict(orientation="h", y=-0.2))
    return fig


if len(lg.decode_batch):
    st.plotly_chart(timeline(d), width="stretch")
else:
    st.info("This file holds no decode line (is the server's stats logging on? see docs/serverlogs.md).")

if lg.captures:
    st.markdown("**Capture cost (the server's own figures)**")
    st.dataframe(pd.DataFrame([{"graphs": c.what, "process": c.source or "-", "seconds": c.seconds,
                                "memory (MiB)": c.memory_mib, "its estimate (MiB)": c.estimated_mib}
                               for c in lg.captures]), hide_index=True)
if lg.capture_sizes:
    st.caption(md_escape(f"Capture list: {lg.capture_sizes} ({lg.capture_count} sizes"
                         + (f", mode {lg.capture_mode}" if lg.capture_mode else "") + ")."))

st.subheader("Capture plan from the logs")
c1, c2 = st.columns(2)
# no limit by default, as `launchgap plan --server-log` (the Capture plan page's default too)
max_graphs = c1.number_input("Max graphs (0 = no limit)", min_value=0, value=0, step=1, key="lg_server_max_graphs")
budget = c2.number_input("Graph memory budget, MiB (0: none)", min_value=0.0, value=0.0, step=256.0,
                         key="lg_server_memory")
inputs = []
for name, dd in good.items():
    roles = ("costs", "distribution", "capture_sizes", "capture_cost") if dd.log.kind == "log" else ("distribution",)
    inputs.append(server_log_input(dd, name, roles))
logs_only = [i for i in inputs if "costs" in i.roles]
if not logs_only:
    st.info("A plan needs a log with decode lines (a scrape gives the distribution only).")
    st.stop()
try:
    # the log shown (or, for a scrape, the latest log) gives costs, distribution, list and capture cost
    chosen = [i for i in inputs if i.value is d] if d.log.kind == "log" else [logs_only[-1]]
    request = PlanRequest(tuple(chosen), PlanOptions(max_graphs=int(max_graphs) or None,
                                                     memory_budget_mib=float(budget) or None))
    plan, notes = build_plan(request)
except AnalyzerError as exc:
    st.error(md_escape(exc.message))
    st.stop()

eng = engine(chosen[0].value.log.engine)
top = chosen[0].value.max_captured
# which file planned: for a scrape shown, the latest log (the scrape's own figures above are not the plan's)
st.write(md_escape(f"From {chosen[0].name}: capture {len(plan.buckets)} graphs up to "
                   f"{max(plan.buckets) if plan.buckets else '-'}: "
                   f"expected step {plan.expected_step_us:,.0f} us vs {plan.all_eager_expected_step_us:,.0f} us "
                   f"all eager"
                   + (f"; the server captures up to {top} now" if top is not None else "") + "."))
st.markdown(f"**{md_escape(eng.LABEL)}: this plan as the server's own settings**")
st.code(eng.config_snippet(list(plan.buckets), "pad"), language=eng.SNIPPET_LANGUAGE)
for n in notes:
    if n.startswith("ceiling:"):
        st.caption(md_escape(n))
with st.expander("The whole plan (as `launchgap plan` prints it)"):
    st.code(render_plan(plan, notes=notes), language=None)
