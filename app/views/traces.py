"""Traces page: upload traces or pick bundled samples; the table of what this session loaded."""
from __future__ import annotations

import dataclasses

import pandas as pd
import streamlit as st

from launchgap.engines import parse_server_config
from launchgap.errors import AnalyzerError
from launchgap.steps import StepOptions
from launchgap.dashboard import session, uploads
from launchgap.dashboard.server_uploads import latest_stated_capture, server_logs, take_server_file
from launchgap.dashboard.session import LoadedTrace
from launchgap.dashboard.text import md_escape
from launchgap.dashboard.timing import stage
from launchgap.dashboard.ui import (SAMPLES_KEY, SAMPLES_WIDGET, human_bytes, run_with_progress, sample_paths,
                    settings, show_load_errors, sync_samples, trace_cache)

state = st.session_state
st.title("Traces")
st.caption("Decode-step traces from torch.profiler / Kineto (`.json`, `.json.gz`) or Nsight Systems SQLite "
           "exports (`.sqlite`), and vLLM / SGLang / TensorRT-LLM server logs and `/metrics` scrapes (read on the "
           "Server page; recognised by content). Uploads stay in this browser session; parsed traces are cached by "
           "content hash.")

left, right = st.columns([3, 2], gap="large")
with left, stage("upload.widget"):
    picked = st.file_uploader("Upload traces, server logs, metrics", type=["json", "gz", "sqlite", "log", "txt", "out",
                                                                           "prom"], accept_multiple_files=True,
                               key="lg_uploader",
                               help="Several files at once; up to the server's upload limit each.")
with right:
    options = list(sample_paths())
    state.setdefault(SAMPLES_KEY, [])
    if SAMPLES_WIDGET not in state:  # the widget's own state is dropped when another page is shown
        state[SAMPLES_WIDGET] = [s for s in state[SAMPLES_KEY] if s in options]
    if options:
        chosen = st.multiselect("Bundled samples", options, key=SAMPLES_WIDGET,
                                help=f"Real traces shipped with launchgap (from {settings().samples_dir.name}/).")
    else:
        chosen = []
        st.caption("No bundled samples found.")
    state[SAMPLES_KEY] = chosen

seen: set[str] = state.setdefault(session.SEEN_UPLOADS_KEY, set())
new_files = [f for f in (picked or []) if f.file_id not in seen]
jobs = []
for f in new_files:
    seen.add(f.file_id)
    staged = uploads.take(f)  # streamed to a private file by the server (launchgap.dashboard.uploads), or None
    if take_server_file(state, f.name, staged.path if staged is not None else None,
                        None if staged is not None else f.getvalue()):  # a server log or scrape: the Server page
        if staged is not None:
            staged.path.unlink(missing_ok=True)
        uploads.release(f)
        f.close()
        continue

    def job(f=f, staged=staged):
        with stage("upload.add", file=f.name, staged=staged is not None):
            if staged is not None:  # parsed in place: no copy, hash known
                entry = session.add_staged_upload(state, f.name, staged.path, staged.size_bytes, staged.sha256,
                                                  settings(), trace_cache())
            else:
                # getvalue(): the bytes Streamlit holds, not a copy (getbuffer() would copy them out of
                # the BytesIO they share); once parsed, Streamlit's copy is dropped too.
                entry = session.add_upload(state, f.name, f.getvalue(), settings(), trace_cache())
        uploads.release(f)
        f.close()
        return entry
    jobs.append((f.name, staged.size_bytes if staged is not None else f.size, job))
# A server log that states its capture list: the traces of its engine are analysed under it (their fallbacks, padding
# and uncaptured sizes follow the server's own list), the ones loaded before re-analysed.
stated = latest_stated_capture(state)
if stated != session.options(state).log_capture:
    for msg in session.set_options(state, dataclasses.replace(session.options(state), log_capture=stated),
                                   trace_cache()):
        st.error(md_escape(msg))
fresh = [e for e in run_with_progress(jobs) if e.ok]
if fresh:  # the Diagnosis page opens on the file the user just uploaded
    state["lg_diag_choice"] = fresh[-1].key
    state.pop("lg_diag_widget", None)
sync_samples(chosen)
show_load_errors()
logs = server_logs(state)
for up in logs.values():
    if up.error:
        st.error(md_escape(up.error))
if stated is not None:
    st.caption(md_escape(f"Capture list from {stated.describe()}: the traces of its engine are analysed under it "
                         "(a server config pasted under Analysis options wins)."))
if any(up.diagnosis is not None for up in logs.values()):
    st.page_link("views/server.py", label=f"Server logs and metrics ({sum(u.diagnosis is not None for u in logs.values())}"
                 f"): open the Server page", icon=":material/dns:")


def _phase(group: dict) -> str:
    return f"{group['phase'] or 'unknown'} ({group['graph_coverage']})"


def _rows(e: LoadedTrace) -> list[dict]:
    """One row per trace; an engine trace with several (phase, coverage) groups gets one row per group, each with
    its own figures and verdict (decode and prefill apart, as the CLI's table)."""
    r = e.report
    s = r.summary
    base = {
        "trace": e.name,
        "verdict": s.verdict,
        "step (us, median)": s.step_us_median,
        "size": human_bytes(e.size_bytes),
        "phase": "—",
        "mode": r.mode,
        "steps": s.steps,
        "batch sizes": ", ".join(str(b) for b in s.batch_sizes) or "unknown",
        "GPU idle": s.gpu_idle_fraction,
        "kernels / step": s.kernels_per_step_median,
        "device": ", ".join(f"{d.device}: {d.name}" if d.name else str(d.device) for d in r.devices) or "—",
        "format": r.format,
        "source": e.source,
    }
    groups = s.step_groups if s.step_source == "engine" else []
    if len(groups) == 1:  # one phase and coverage: named on the trace's own row
        return [{**base, "phase": _phase(groups[0])}]
    if not groups:
        return [base]
    return [{**base, "verdict": g["verdict"], "step (us, median)": g["step_us_median"],
             "phase": _phase(g), "steps": g["steps"],
             "batch sizes": ", ".join(str(b) for b in g["batch_sizes"]) or "unknown",
             "GPU idle": g["gpu_idle_fraction"], "kernels / step": g["kernels_per_step_median"]}
            for g in s.step_groups]


ok = session.loaded_ok(state)
st.subheader(f"Loaded traces ({len(ok)})")
if ok:
    st.dataframe(
        pd.DataFrame([row for e in ok for row in _rows(e)]), hide_index=True,
        column_config={
            "trace": st.column_config.TextColumn(width="medium"),
            "verdict": st.column_config.TextColumn(width="medium"),
            "GPU idle": st.column_config.ProgressColumn("GPU idle", format="percent", min_value=0.0, max_value=1.0,
                                                        width="small"),
            "step (us, median)": st.column_config.NumberColumn(format="%.1f"),
            "kernels / step": st.column_config.NumberColumn(format="%g"),
        },
    )
    st.page_link("views/diagnosis.py", label="Open the diagnosis", icon=":material/troubleshoot:")
else:
    st.info("Nothing loaded yet: upload a trace or pick a bundled sample.")

store = session.traces(state)
if store:
    with st.expander("Remove traces from this session"):
        names = {k: e.name for k, e in store.items()}
        drop = st.multiselect("Traces to remove", list(names), format_func=names.get, key="lg_remove")
        if st.button("Remove", disabled=not drop):
            session.remove(state, drop)
            state[SAMPLES_KEY] = [s for s in state[SAMPLES_KEY] if session.sample_key(s) not in drop]
            state.pop(SAMPLES_WIDGET, None)
            st.rerun()

with st.expander("Analysis options"):
    cur = session.options(state)
    with st.form("lg_options_form", border=False):
        step_regex = st.text_input("Step regex", cur.steps.step_regex or "",
                                   help="Regex over annotation / NVTX text that marks one decode step. "
                                        "Empty: ProfilerStep#N or the default decode-step pattern.")
        batch_regex = st.text_input("Batch-size regex", cur.steps.batch_regex or "",
                                    help="Regex whose first group is the batch size (default reads bs=8, "
                                         "batch_size=8, batch 8).")
        observed = st.number_input("Observed step time (us)", min_value=0.0, value=float(cur.observed_step_us or 0.0),
                                   help="A real, unprofiled step time (e.g. measured inter-token latency) to "
                                        "calibrate the predicted speedup. 0: estimate it from the trace.")
        shown = cur.server_config.describe() if cur.server_config else \
            ",".join(map(str, cur.capture_sizes)) if cur.capture_sizes else ""
        config_text = st.text_area(
            "Server config (capture sizes)", state.get("lg_server_config_text", shown), height=80,
            help="The CUDA-graph capture settings the server ran with, pasted as the server takes them: sizes "
                 "(1,2,4,8), a vLLM compilation_config JSON or --cudagraph-capture-sizes / "
                 "--max-cudagraph-capture-size, SGLang --cuda-graph-bs / --cuda-graph-max-bs or its server_args "
                 "line, a TensorRT-LLM cuda_graph_config YAML. Empty: the step markers, else the engine's default "
                 "for the trace's GPU, else inferred from the trace (padding then not costed).")
        if st.form_submit_button("Apply to all traces"):
            try:
                cfg = parse_server_config(config_text) if config_text.strip() else None
                plain = cfg is not None and not cfg.engine
                new = dataclasses.replace(
                    cur, steps=StepOptions(step_regex=step_regex or None, batch_regex=batch_regex or None,
                                           batch_op=cur.steps.batch_op),
                    observed_step_us=observed or None, capture_sizes=cfg.sizes if plain else None,
                    server_config=None if plain else cfg)
                state["lg_server_config_text"] = config_text
                errs = session.set_options(state, new, trace_cache())
            except AnalyzerError as exc:
                errs = [exc.message]
            for msg in errs:
                st.error(md_escape(msg))
            if not errs:
                st.rerun()
