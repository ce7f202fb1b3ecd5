"""Diagnosis page: one trace's metrics, verdict, a step timeline, idle by cause, gaps, kernels."""
from __future__ import annotations

import dataclasses
import json

import numpy as np
import pandas as pd
import streamlit as st

from launchgap.engines import LABELS
from launchgap.report import SCHEMA, with_observed_step
from launchgap.verdict import async_scheduling_text, batch_basis, capture_sizes_basis, fallback_basis, graphs_word, headline, \
    node_cost_text, padding_basis
from launchgap.dashboard import session
from launchgap.dashboard.capture import auto_pick, capture_entries, pairing
from launchgap.dashboard.charts import ZOOM_OPS, coverage_strip_figure, first_ops_end_us, gap_histogram_figure, host_phases_figure, \
    idle_by_cause_figure, timeline_figure
from launchgap.dashboard.text import hover_escape, json_safe, md_escape
from launchgap.dashboard.timeline import downsample_events, step_events, step_index, timeline_gpu_start
from launchgap.dashboard.timing import stage
from launchgap.dashboard.server_uploads import server_logs
from launchgap.serverlogs.diagnosis import beside_tpot_text, measured_step_us
from launchgap.dashboard.ui import loaded_traces_or_stop, pick_trace, trace_cache

state = st.session_state


def _dash(v: object) -> str:
    """A table cell: "—" where the trace does not say (never a literal "None"); text either way, so a column of
    numbers and dashes stays one type for Arrow."""
    return "—" if v is None else f"{v}"


def steps_have_engine_info(report) -> bool:
    """Whether the steps carry engine facts worth a table (an engine, or a graph trace with coverage mixes)."""
    cov = report.summary.steps_by_coverage
    return bool(report.summary.engine) or sum(1 for n in cov.values() if n) > 1


st.title("Diagnosis")
entries = loaded_traces_or_stop()

pick_col, obs_col = st.columns([3, 1])
with pick_col:
    entry = pick_trace("Trace", "lg_diag", entries)
obs_key = f"lg_obs_{entry.key}"
with obs_col:
    # A real step time (the server's inter-token latency at this batch size) replaces the estimate. Its first value is
    # the trace's own; once the page has set the field (a scrape's mean, below) the field's state holds it
    first = {} if obs_key in state else {"value": float(entry.report.summary.observed_step_us or 0.0)}
    measured = st.number_input(
        "Measured step time (us)", min_value=0.0, step=100.0, key=obs_key, **first,
        help="The real, unprofiled step of this workload at this batch size, e.g. the server's inter-token "
             "latency. It replaces the unprofiled estimate in the predicted speedup; 0 uses the estimate.")
rep = with_observed_step(entry.report, measured or None)
s = rep.summary
# The tiles speak for the steps the verdict speaks for: an engine trace's first group (decode first), as the CLI.
h = headline(s)
group = s.step_groups[0] if s.step_source == "engine" and len(s.step_groups) > 1 else None
of = f" ({group['phase'] or 'phase unknown'} steps)" if group else ""

c1, c2, c3, c4 = st.columns([1, 1, 1.3, 1])  # "61 of 64" steps fits its box
c1.metric("GPU idle" + of, f"{h.gpu_idle_fraction:.1%}", border=True,
          help="Idle time over the GPU windows of all steps (window = first to last GPU op a step launched).")
c2.metric("Launch-to-kernel ratio", f"{h.launch_to_kernel_ratio:.2f}", border=True,
          help="Host time in launch calls over the GPU time of the work they launched. Above 1 the CPU cannot "
               "keep the GPU fed.")
c3.metric("Predicted CUDA-graph speedup", f"{h.predicted_speedup:.2f}x", border=True,
          help=f"Range {h.predicted_speedup_low:.2f}-{h.predicted_speedup_high:.2f}x. " + (
              f"Decode time: the trace's decode steps as they ran ({s.decode_us_as_run / 1e3:,.1f} ms, eager steps "
              f"on the eager curve) over the same steps each replaying one FULL graph "
              f"({s.decode_us_full_graph / 1e3:,.1f} ms)." if s.predicted_speedup_rule == "decode time" else
              "The engine's whole step now (measured, else the profiled step less the estimated profiler overhead, "
              "with the time between steps) over its predicted whole step with CUDA graphs (the FULL-graph step and "
              "the GPU work between steps, whose host work async scheduling hides behind the replay)."
              if h.whole_step_us_before > 0 and s.predicted_speedup_rule == "whole step" else
              "Real step time (measured, else the profiled step less the estimated profiler overhead) over the "
              "predicted graph-replay step."))
c4.metric("Steps", f"{h.steps} of {s.steps}" if group else f"{s.steps}", border=True,
          help=f"Found from: {s.step_source}.")

d1, d2, d3, d4 = st.columns(4)
d1.metric("Step, profiled (median)", f"{h.step_us_median:,.0f} us")
# under the whole-step rule the speedup is the engine's whole steps' ratio: the two tiles beside it are those steps
whole = s.predicted_speedup_rule == "whole step" and h.whole_step_us_before > 0
if s.eager_step_source == "measured":
    d2.metric("Step, measured", f"{s.observed_step_us:,.0f} us",
              help=f"Given above. The estimate from the trace was {s.estimated_unprofiled_step_us_median:,.0f} us"
                   + (" (the steps' GPU windows; the time between steps besides)" if whole else "")
                   + f"; profiler inflation about {s.estimated_profiler_inflation:.2f}x.")
elif whole:
    d2.metric("Engine step, unprofiled estimate", f"{h.whole_step_us_before:,.0f} us",
              help=f"The steps' GPU windows {h.estimated_unprofiled_step_us_median:,.0f} us (range "
                   f"{h.estimated_unprofiled_step_us_low:,.0f}-{h.estimated_unprofiled_step_us_high:,.0f} us; profiler "
                   f"inflation about {s.estimated_profiler_inflation:.2f}x) and "
                   f"{h.whole_step_us_before - h.estimated_unprofiled_step_us_median:,.0f} us between them.")
else:
    d2.metric("Step, unprofiled estimate", f"{h.estimated_unprofiled_step_us_median:,.0f} us",
              help=f"Range {h.estimated_unprofiled_step_us_low:,.0f}-{h.estimated_unprofiled_step_us_high:,.0f} us; "
                   f"profiler inflation about {s.estimated_profiler_inflation:.2f}x.")
if whole:
    d3.metric("Predicted engine step, graphs", f"{h.whole_step_us_after:,.0f} us",
              help=f"The FULL-graph step {h.predicted_graph_step_us_median:,.0f} us ({node_cost_text(s)}) and the GPU "
                   f"work between steps, at least the host work between them, which async scheduling hides behind "
                   f"the replay.")
else:
    d3.metric("Predicted graph step", f"{h.predicted_graph_step_us_median:,.0f} us",
              help=f"The GPU busy time replayed, with a {node_cost_text(s)}.")
d4.metric("Kernels per step", f"{h.kernels_per_step_median:g}",
          help=f"Eager launches {h.kernel_launches_per_step_median:g}, graph launches "
               f"{h.graph_launches_per_step_median:g} per step (median).")
if s.decode_tpot_ms_before is not None:
    t1, t2, t3 = st.columns([1, 1, 2])
    d_ms = s.decode_tpot_ms_after - s.decode_tpot_ms_before
    gain = abs(d_ms) >= 0.005  # below what the tile prints: no arrow (a red "+0.00" on a graphed trace misleads)
    t1.metric("Time per output token", f"{s.decode_tpot_ms_before:,.2f} ms",
              delta=f"{d_ms:+,.2f} ms {graphs_word(rep.mode)}" if gain else None, delta_color="inverse",
              help="A decode step gives each sequence one token: TPOT is the decode step (measured, else the "
                   "unprofiled estimate); with graphs, the predicted FULL-graph step."
                   + (f" A serving engine's step also holds what runs between the steps' GPU work: "
                      f"{s.decode_tpot_between_steps_us:,.0f} us unprofiled, included ({s.inter_step_gpu_busy_us_median:,.0f}"
                      f" us of GPU work of no step, such as sampling after the step's marker; an eager step's host work "
                      f"between steps, which async scheduling hides behind a graph's replay)."
                      if s.decode_tpot_between_steps_us > 0 else ""))
    if s.decode_tokens_per_s_before is not None:
        t2.metric(f"Tokens/s at batch {s.decode_batch_size}", f"{s.decode_tokens_per_s_before:,.0f}",
                  delta=f"{s.decode_tokens_per_s_after - s.decode_tokens_per_s_before:+,.0f} {graphs_word(rep.mode)}"
                  if gain else None, help="Batch over the decode step, before and after.")
    # the ratio on the whole step, where the headline is not it already
    on_whole = (f" ({s.decode_tpot_ms_before / s.decode_tpot_ms_after:.2f}x on the engine's whole step: the "
                f"{s.decode_tpot_between_steps_us:,.0f} us between steps included)"
                if s.decode_tpot_between_steps_us > 0 and not whole else "")
    t3.caption(md_escape(f"{graphs_word(rep.mode)[0].upper()}{graphs_word(rep.mode)[1:]}: {s.decode_tpot_ms_after:,.2f} ms per token"
                         + (f", {s.decode_tokens_per_s_after:,.0f} tokens/s" if s.decode_tokens_per_s_after else "")
                         + f"{on_whole}." if gain else "A FULL graph predicts no change to these decode steps."))
    # the same server's own figure beside the trace's: a /metrics scrape of its engine loaded on the Traces page
    for name, up in server_logs(state).items():
        dd = up.diagnosis
        if dd is not None and dd.inter_token is not None and s.engine and dd.log.engine == s.engine:
            own = entry.report.summary  # the trace's own TPOT, not one the measured step above set
            st.caption(md_escape(beside_tpot_text(dd, name, own.decode_tpot_ms_before or s.decode_tpot_ms_before,
                                                  s.decode_batch_size)))
            itl_us = measured_step_us(dd, s.decode_batch_size)  # at the trace's batch where the scrapes ran it
            st.button(f"Use {itl_us:,.0f} us as the measured step", key=f"lg_itl_{entry.key}_{name}",
                      on_click=state.__setitem__, args=(obs_key, itl_us),
                      help="Sets the measured step above to this scrape's mean inter-token latency at this trace's "
                           "batch where intervals between its scrapes ran it, else over all of them.")

with st.container(border=True):
    st.markdown(f"**Verdict: {md_escape(s.verdict)}** ({md_escape(rep.mode)} trace) — {md_escape(s.verdict_detail)}")
ps = s.profiler_settings
basis = batch_basis(rep.steps)
st.caption(md_escape(
    f"Speedup range {h.predicted_speedup_low:.2f}-{h.predicted_speedup_high:.2f}x. Profiler settings detected: "
    f"{ps.get('tier', '?')} (" + ("; ".join(ps.get("evidence") or []) or "nothing recorded") + "); its cost taken off "
    f"the step: {s.profiler_overhead_us_per_event:.3g} us per host event"
    + (f" and {s.profiler_python_call_us:.3g} us per recorded Python call past the host events' share "
       f"({s.python_calls_per_step_median:,.0f} calls per step)" if s.profiler_python_call_us else "") + "."
    + (f" Workload: {rep.workload.label}." if rep.workload else "")
    + (f" Batch per step from {basis}." if basis else "")))

if len(s.step_groups) > 1 or group:
    # decode and prefill apart, each with its own figures and verdict (the CLI's "Steps by phase" table)
    st.dataframe(pd.DataFrame([{
        "phase": g["phase"] or "—", "coverage": g["graph_coverage"], "steps": g["steps"],
        "step (us)": g["step_us_median"], "GPU busy (us)": g["gpu_busy_us_median"], "GPU idle": g["gpu_idle_fraction"],
        "speedup": g["predicted_speedup"], "verdict": g["verdict"]} for g in s.step_groups]), hide_index=True,
        key="lg_step_groups", column_config={
            "GPU idle": st.column_config.NumberColumn(format="percent"),
            "speedup": st.column_config.NumberColumn(format="%.2fx"),
            "step (us)": st.column_config.NumberColumn(format="%.1f"),
            "GPU busy (us)": st.column_config.NumberColumn(format="%.1f"),
            "verdict": st.column_config.TextColumn(width="medium")})
if s.host_stall_frames:
    st.markdown("**Host stalls** — the host thread sat in a frame with nothing recorded under it while the GPU "
                "waited")
    st.dataframe(pd.DataFrame([{"frame": f["frame"], "GPU waited (us)": f["us"],
                                "a FULL graph": "removes it (inside the captured forward)" if f["in_graph_us"] >= 0.5 * f["us"]
                                else "keeps it (outside the forward)"} for f in s.host_stall_frames]),
                 hide_index=True, key="lg_host_stalls", column_config={
                     "frame": st.column_config.TextColumn(width="large"),
                     "GPU waited (us)": st.column_config.NumberColumn(format="%.0f")})

for w in rep.warnings:
    st.warning(md_escape(w), icon=":material/warning:")

# --- serving engine: what each engine iteration was (phase, requests, tokens, graph coverage) ----
if rep.mode == "capture" and rep.capture is not None:
    cap = rep.capture
    st.info(md_escape(f"CUDA-graph capture trace{' (' + LABELS.get(s.engine, s.engine) + ')' if s.engine else ''}: "
                      f"{cap.graphs} graph(s) captured"
                      + (f" for sizes {', '.join(str(x) for x in cap.sizes if x is not None)}" if any(
                          x is not None for x in cap.sizes) else "")
                      + f"; {cap.launches_recorded} launches recorded into graphs, {cap.kernels_run} kernels ran. "
                      "No gap diagnosis or speedup for a capture trace."), icon=":material/photo_camera:")
elif steps_have_engine_info(rep):
    st.subheader(f"Engine steps ({LABELS.get(s.engine, s.engine)})" if s.engine else "Steps")
    cov = ", ".join(f"{n} {c}" for c, n in s.steps_by_coverage.items() if n)
    st.caption(md_escape(f"Graph coverage per step: {cov}. Phase, requests and tokens come from the "
                         + ("engine's own step markers" if s.engine else "step annotations")
                         + " or the kernels' launch grids; blank where the trace does not say."))
    st.dataframe(pd.DataFrame([{
        "step": x.index, "phase": x.phase or "—", "batch": _dash(x.batch_size),
        # without a batch, why: tokens that are not the requests (a prefill, or no kernel says the phase)
        "batch from": x.batch_source if x.batch_size is not None else (x.batch_note or "—"),
        "requests": _dash(x.requests),
        "tokens": _dash(x.tokens),
        "coverage": x.graph_coverage, "graph launches": x.graph_launches, "eager launches": x.kernel_launches,
        "step (us)": x.dur_us} for x in rep.steps]), hide_index=True, key="lg_engine_steps",
        column_config={"step (us)": st.column_config.NumberColumn(format="%.1f")})

# --- graph-mode serving: coverage strip, fallbacks, padding by bucket, host time between steps ----
graph_steps = [x for x in rep.steps if x.graph_launches > 0]
if rep.mode != "capture" and len(rep.steps) <= 1 and s.capture_sizes is not None:  # no serving section for one step
    st.caption(md_escape(f"Capture sizes ({capture_sizes_basis(s)}): " + ", ".join(str(x) for x in s.capture_sizes[:40])
                         + (", ..." if len(s.capture_sizes) > 40 else "")))
if rep.mode != "capture" and len(rep.steps) > 1 and (graph_steps or s.capture_sizes is not None):
    st.subheader("Graph-mode serving")
    g1, g2, g3, g4 = st.columns(4)
    g1.metric("Eager fallbacks", f"{len(s.fallback_steps)} of {s.steps}", border=True,
              help="Decode steps that ran eager although a captured size at or above their batch exists.")
    # per step in the label, the unit alone in the value: "5,323 us/step" did not fit a quarter of 1,400 px
    g2.metric("Fallback time lost per step", f"{s.fallback_lost_us_per_step:,.0f} us", border=True,
              help=md_escape(f"Per fallback: its eager step less the graph step of its bucket; summed, over all "
                             f"steps; {fallback_basis(s)}."))
    g3.metric("Padded rows", f"{s.padded_rows_fraction:.1%}", border=True,
              help="Padding rows over all rows the graph steps computed (bucket minus batch).")
    estimated = s.padding_cost_source.endswith("-estimate")
    if s.padding_us_per_step is None:
        g4.metric("Padding cost", "unknown", border=True, help=md_escape(s.padding_unknown_reason or ""))
    else:
        g4.metric("Padding cost per step" + (" (estimate)" if estimated else ""), f"{s.padding_us_per_step:,.1f} us",
                  border=True, help=md_escape(f"cost(bucket) - cost(batch) per graph step, over all steps; "
                                              f"{padding_basis(s)}."))
    if s.capture_sizes is not None:
        st.caption(md_escape(f"Capture sizes ({capture_sizes_basis(s)}): "
                             + ", ".join(str(x) for x in s.capture_sizes[:40])
                             + (", ..." if len(s.capture_sizes) > 40 else "")
                             + (f"; uncaptured sizes at steps {', '.join(map(str, s.uncaptured_steps))}"
                                if s.uncaptured_steps else "")))
    st.plotly_chart(coverage_strip_figure(rep), width="stretch", key="lg_coverage_strip")
    fb = [x for x in rep.steps if x.fallback]
    if fb:
        st.markdown("**Fallbacks to eager**")
        st.dataframe(pd.DataFrame([{
            "step": x.index, "batch": x.batch_size, "eager step (us)": x.fallback_eager_us,
            "graph at bucket (us)": x.fallback_bucket_graph_us,
            "time lost (us)": x.fallback_lost_us,
            "cause": x.fallback_cause or "not shown in the trace"} for x in fb]), hide_index=True,
            key="lg_fallbacks", column_config={c: st.column_config.NumberColumn(format="%.1f")
                                               for c in ("eager step (us)", "graph at bucket (us)", "time lost (us)")})
        st.caption(md_escape(f"Time lost = eager step - graph at bucket: {fallback_basis(s)}."))
    padded = [x for x in rep.steps if x.padded_rows is not None]
    pad_col, host_col = st.columns(2)
    with pad_col:
        if padded:
            st.markdown("**Padding by bucket**")
            by = pd.DataFrame([{"bucket": x.bucket, "padded rows": x.padded_rows, "padding (us)": x.padding_us or 0.0,
                                "low": x.padding_us_low or 0.0, "high": x.padding_us_high or 0.0}
                               for x in padded]).groupby("bucket", as_index=False).agg(
                steps=("padded rows", "size"), padded_rows=("padded rows", "sum"), padding_us=("padding (us)", "sum"),
                padding_us_low=("low", "sum"), padding_us_high=("high", "sum"))
            by["padding_us"] = by["padding_us"].round(1)
            by["band_us"] = [f"{lo:,.0f} to {hi:,.0f}" for lo, hi in zip(by.pop("padding_us_low"),
                                                                      by.pop("padding_us_high"))]
            st.dataframe(by, hide_index=True, key="lg_padding")
            st.caption(md_escape(f"Padding cost {s.padding_us_per_step:,.1f} us/step, {padding_basis(s)}."))
            pc = s.planner_comparison
            if pc:
                # priced as the plan prices them: every decode step at its bucket, fallbacks too, so the current
                # list's padding here is not the figure above (the graph steps that ran)
                st.caption(md_escape(f"The planner's {pc['graphs']} graphs on the same decode steps, each priced at "
                                     f"its bucket (fallbacks too) on launchgap plan's costs: padded rows "
                                     f"{pc['padded_rows_fraction']:.1%}, padding {pc['padding_waste_us']:,.1f} us/step, "
                                     f"expected step {pc['expected_step_us']:,.1f} us; the current list priced the "
                                     f"same: {pc['current_padded_rows_fraction']:.1%}, "
                                     f"{pc['current_padding_waste_us']:,.1f} us/step, "
                                     f"{pc['current_expected_step_us']:,.1f} us."))
    with host_col:
        st.markdown("**Host time between steps**")
        if s.host_phases_us_per_step:
            st.plotly_chart(host_phases_figure(s.host_phases_us_per_step), width="stretch", key="lg_host_phases")
        overlap = async_scheduling_text(s.host_ahead_steps, len(rep.steps) - 1, s.async_hidden_us_per_step)
        st.caption(md_escape(f"{s.inter_step_host_us_median:,.1f} us median between steps' GPU work, "
                             f"{s.inter_step_host_us_unprofiled_median:,.1f} us without the profiler, "
                             f"{s.inter_step_gpu_busy_us_median:,.1f} us of it GPU work of no step (phases: "
                             f"{s.host_phases_source}); "
                             + (f"async scheduling is {overlap}." if overlap.startswith("already on") else f"{overlap}.")))

# --- a capture trace of the same engine run names the kernels inside the graph replays ----------
pair = None
caps = capture_entries(entries, entry)
if caps:
    opts_steps = session.options(state).steps
    index = trace_cache().get_or_compute(("steps", entry.digest, opts_steps),
                                         lambda: step_index(entry.trace, opts_steps))

    def _pair_with(c):
        return pairing(entry, c, index.row_step, opts_steps, trace_cache())

    auto = auto_pick(caps, _pair_with)
    by_key = {c.key: c for c in caps}
    options = ["none"] + list(by_key)
    cap_key = st.selectbox(
        "Capture trace of this engine run", options, index=options.index(auto.key) if auto else 0,
        key=f"lg_capture_{entry.key}", format_func=lambda k: "none" if k == "none" else by_key[k].name,
        help="A CUDA-graph capture trace of the same engine run names the kernels inside each graph replay by "
             "the op that launched them at capture. Picked automatically when one matches the replays.")
    if cap_key != "none":
        pair = _pair_with(by_key[cap_key])
        d = pair.to_dict(session.options(state).top_kernels)
        st.subheader("Inside the graph replays")
        st.caption(md_escape(
            f"Paired with {by_key[cap_key].name}: {d['replays_matched']} of {d['replays']} replays matched a "
            f"captured graph ({d['matched_by']}); {d['replay_kernels_named']} of {d['replay_kernels']} replay "
            f"kernels named, {d['named_share_of_replay_time']:.1%} of {d['replay_kernel_us']:,.0f} us of replay "
            "kernel time. Share = GPU time over all kernels replayed from graphs."))
        st.dataframe(pd.DataFrame(d["kernels"]), hide_index=True, key="lg_capture_kernels", column_config={
            "op": st.column_config.TextColumn("op (at capture)"),
            "name": st.column_config.TextColumn("kernel", width="large"),
            "kernel_us": st.column_config.NumberColumn("GPU time (us)", format="%.1f"),
            "share_of_replay_time": st.column_config.NumberColumn("share", format="percent")})
        with st.expander(f"Per captured graph ({len(d['graphs'])} replayed)"):
            st.dataframe(pd.DataFrame(d["graphs"]), hide_index=True, key="lg_capture_graphs", column_config={
                "kernel_us": st.column_config.NumberColumn("GPU time (us)", format="%.1f"),
                "share_of_replay_time": st.column_config.NumberColumn("share", format="percent")})

# --- timeline of one step ---------------------------------------------------------------
st.subheader("One step on the timeline")
steps = rep.steps
if steps:
    durs = np.array([x.dur_us for x in steps])
    median_pos = int(np.argmin(np.abs(durs - np.median(durs))))
    labels = {i: f"step {x.index}" + (f" (bs {x.batch_size})" if x.batch_size is not None else "")
                 + f" — {x.dur_us:,.0f} us" for i, x in enumerate(steps)}
    pick_key = f"lg_step_{entry.key}"
    pos = st.selectbox("Step", list(labels), index=median_pos, format_func=labels.get, key=pick_key,
                       help="The median-length step is selected first.")
    step = steps[pos]
    with stage("diagnosis.step_index"):
        index = trace_cache().get_or_compute(("steps", entry.digest, session.options(state).steps),
                                             lambda: step_index(entry.trace, session.options(state).steps))
    with stage("diagnosis.step_events"):
        events, lanes = step_events(entry.trace, index, step,
                                    labels=(pair.rows, pair.op) if pair is not None else None)
        drawn, merge_us = downsample_events(events)
    with stage("diagnosis.timeline_figure", events=len(drawn)):
        fig = timeline_figure(drawn, lanes, title=f"step {step.index}: {hover_escape([step.name], 80)[0]}")
    first_n = first_ops_end_us(events, ZOOM_OPS)
    view = st.radio("Show", ["start of the step", "whole step"], horizontal=True, key="lg_tl_view",
                    help=f"A decode step repeats the same layers: its first {ZOOM_OPS} GPU ops show each kernel, "
                         "launch and gap at a readable width. Double-click the chart to see the whole step.")
    # CPU and GPU share one time base (us from the earlier of the step's CPU range and its GPU window). A step
    # whose GPU work began after its CPU range ended (a graph replay queued behind earlier steps: the host runs
    # ahead) opens on its GPU work, and says how far ahead the host was.
    gpu_from, lag_us = timeline_gpu_start(step, index.steps.cpu_start_ns[step.index], index.steps.cpu_end_ns[step.index])
    if view == "start of the step" and first_n is not None:
        fig.update_xaxes(range=[max(gpu_from - 0.02 * (first_n - gpu_from), 0.0), first_n])
    if lag_us > 0:
        st.caption(md_escape(f"The host issued this step {lag_us:,.0f} us before its GPU work began: the GPU was still "
                             "running earlier steps (the host runs ahead of a graph replay). \"whole step\" shows "
                             "both."))
    with stage("diagnosis.timeline_chart"):
        st.plotly_chart(fig, width="stretch", key="lg_timeline")
    if merge_us:
        st.caption(f"This step has {len(events):,} events: bars closer than {merge_us:,.2f} us in one lane are "
                   f"drawn as one ({len(drawn):,} bars; hover says how many each holds).")
    st.caption(("Kernels inside graph replays are named `op: kernel` from the paired capture trace. "
                if pair is not None else "")
               + "Top: the step's CPU range and the launch/sync calls of each host thread. Then each GPU stream of "
               f"device {step.device}, and the device's idle gaps coloured by cause: red = the CPU was late, "
               "orange = inside the late launch call, purple = host blocked in a sync, brown = GPU-side wait, "
               "grey = no launch call matched, pink = waiting for peer ranks. Drag to zoom; double-click to reset.")
else:
    st.info("No step launched GPU work, so there is no timeline to draw.")

# --- per-step idle, gap histogram ---------------------------------------------------------
left, right = st.columns(2)
with left:
    if steps:
        st.plotly_chart(idle_by_cause_figure(rep), width="stretch", key="lg_idle_bars")
with right:
    st.plotly_chart(gap_histogram_figure(rep), width="stretch", key="lg_gap_hist")

# --- kernels and gaps tables -------------------------------------------------------------
st.subheader("Top offending kernels")
st.caption("Eager launches by kernel name, sorted by the host time their launch calls cost.")
if rep.top_kernels:
    kdf = pd.DataFrame(rep.top_kernels)
    kdf["launch_to_kernel_ratio"] = kdf["launch_to_kernel_ratio"].replace([np.inf], np.nan)
    st.dataframe(kdf, hide_index=True, column_config={
        "name": st.column_config.TextColumn("kernel", width="large"),
        "count": st.column_config.NumberColumn("launches"),
        "kernel_us": st.column_config.NumberColumn("GPU time (us)", format="%.1f"),
        "launch_api_us": st.column_config.NumberColumn("launch calls (us)", format="%.1f"),
        "launch_to_kernel_ratio": st.column_config.NumberColumn("launch / kernel", format="%.2f"),
        "launch_delay_us_median": st.column_config.NumberColumn("launch delay, median (us)", format="%.1f"),
    })
else:
    st.caption("No eager kernel launches in this trace (graph replays only).")

if rep.top_gaps:
    with st.expander("Longest gaps"):
        gdf = pd.DataFrame([dataclasses.asdict(g) for g in rep.top_gaps])
        gdf["host_activity_us"] = ["; ".join(f"{k} {v:,.0f} us" for k, v in list(a.items())[:3]) or "—"
                                   for a in gdf["host_activity_us"]]
        gdf["step"] = ["—" if pd.isna(v) else str(int(v)) for v in gdf["step"]]
        st.dataframe(gdf, hide_index=True, column_config={
            "host_activity_us": st.column_config.TextColumn("the CPU ran (us)", width="large"),
            "start_us": st.column_config.NumberColumn("start (us)", format="%.1f"),
            "dur_us": st.column_config.NumberColumn("length (us)", format="%.1f"),
            "before": st.column_config.TextColumn("op before", width="medium"),
            "after": st.column_config.TextColumn("op after (waited)", width="medium"),
        })

doc = {"schema": SCHEMA, "traces": [dataclasses.replace(rep, path=entry.name).to_dict()], "errors": []}
st.download_button("Download this report (JSON)", json.dumps(json_safe(doc), indent=1, allow_nan=False),
                   file_name=f"{entry.name.rsplit('/', 1)[-1]}.launchgap.json", mime="application/json")
