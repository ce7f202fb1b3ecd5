"""Streamlit glue shared by the pages: server-wide objects, session start-up, trace pickers.

Server-wide objects (settings, the bounded trace cache) are created once per server with
``st.cache_resource``; everything a user loads lives in that user's session state.
"""
from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path

import streamlit as st

from launchgap.dashboard import session
from launchgap.dashboard.cache import BoundedCache
from launchgap.dashboard.session import LoadedTrace
from launchgap.dashboard.settings import Settings, default_samples, discover_samples
from launchgap.dashboard.text import md_escape

SAMPLES_KEY = "lg_samples"  # persistent selection of bundled samples (relative paths)
SAMPLES_WIDGET = "lg_samples_widget"


@st.cache_resource
def settings() -> Settings:
    return Settings.from_env()


@st.cache_resource
def parse_worker_started() -> bool:
    """Once per server: the parse worker's zygote starts in the background (it imports the analyzer)."""
    if settings().parse_in_worker:
        from launchgap.dashboard.worker import warm_up

        threading.Thread(target=warm_up, name="launchgap-forkserver-start", daemon=True).start()
    return True


@st.cache_resource
def trace_cache() -> BoundedCache:
    """The one cache of parsed traces and reports of this server (bounded; see launchgap.dashboard.cache)."""
    s = settings()
    return BoundedCache(max_entries=s.cache_entries, max_bytes=s.cache_bytes, ttl_s=s.cache_ttl_s)


def sample_paths() -> dict[str, Path]:
    """Bundled samples by their path relative to the samples folder."""
    root = settings().samples_dir
    return {p.relative_to(root).as_posix(): p for p in discover_samples(root)}


def human_bytes(n: int) -> str:
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if n >= scale:
            return f"{n / scale:,.1f} {unit}"
    return f"{n} B"


def run_with_progress(jobs: list[tuple[str, int, Callable[[], LoadedTrace]]], quiet: bool = False
                      ) -> list[LoadedTrace]:
    """Run load jobs (name, size, job) inside a status box with a progress bar (``quiet``: a spinner only)."""
    if not jobs:
        return []
    done: list[LoadedTrace] = []
    if quiet:
        with st.spinner(f"Loading {len(jobs)} bundled sample trace(s)…"):
            return [job() for _, _, job in jobs]
    with st.status(f"Parsing {len(jobs)} trace file(s)…", expanded=True) as box:
        bar = st.progress(0.0)
        for i, (name, size, job) in enumerate(jobs):  # one per file
            bar.progress(i / len(jobs), text=md_escape(f"{name} ({human_bytes(size)})"))
            done.append(job())
        bar.progress(1.0, text="done")
        bad = sum(1 for e in done if e.error)
        label = f"Loaded {len(done) - bad} of {len(done)} file(s)" + (f"; {bad} failed" if bad else "")
        # any failure shows as an error (never a green check beside "n failed"); the error lines follow
        box.update(label=label, state="error" if bad else "complete", expanded=False)
    return done


def sync_samples(selected: list[str], quiet: bool = False) -> None:
    """Load newly selected samples and drop deselected ones from this session."""
    state = st.session_state
    paths = sample_paths()
    store = session.traces(state)
    gone = [k for k, e in store.items() if e.source == "sample" and e.name not in selected]
    session.remove(state, gone)
    jobs = []
    for rel in selected:
        if session.sample_key(rel) in store or rel not in paths:
            continue
        p = paths[rel]
        jobs.append((rel, p.stat().st_size,
                     lambda p=p: session.add_sample(state, p, settings(), trace_cache())))
    run_with_progress(jobs, quiet)


def start_session() -> None:
    """On a session's first run: select and load the default samples, so every page has data."""
    parse_worker_started()
    state = st.session_state
    if state.get(session.STARTED_KEY):
        return
    state[session.STARTED_KEY] = True
    root = settings().samples_dir
    defaults = default_samples(root, discover_samples(root))
    state[SAMPLES_KEY] = [p.relative_to(root).as_posix() for p in defaults]
    sync_samples(state[SAMPLES_KEY], quiet=True)


def show_load_errors() -> None:
    """Each failed file of this session with the analyzer's one-line reason, as plain text."""
    for e in session.traces(st.session_state).values():
        if e.error:
            st.error(md_escape(f"{e.name}: {e.error}"), icon=":material/error:")


def pick_trace(label: str, key: str, entries: list[LoadedTrace], default_index: int = 0) -> LoadedTrace:
    """A selectbox over loaded traces whose choice survives page switches (stored outside the widget)."""
    keys = [e.key for e in entries]
    store_key = f"{key}_choice"
    widget_key = f"{key}_widget"
    state = st.session_state
    if state.get(store_key) not in keys:
        state[store_key] = keys[min(default_index, len(keys) - 1)]
    if state.get(widget_key) not in keys:
        state[widget_key] = state[store_key]
    by_key = {e.key: e for e in entries}
    choice = st.selectbox(label, keys, key=widget_key, format_func=lambda k: by_key[k].name)
    state[store_key] = choice
    return by_key[choice]


def no_traces_note() -> None:
    st.info("No trace is loaded yet. Upload one or pick a bundled sample on the Traces page.")
    st.page_link("views/traces.py", label="Go to Traces", icon=":material/upload_file:")


def loaded_traces_or_stop() -> list[LoadedTrace]:
    """The page preamble of trace pages: load errors, then the loaded traces, or a note and stop."""
    show_load_errors()
    entries = session.loaded_ok(st.session_state)
    if not entries:
        no_traces_note()
        st.stop()
    return entries


def show_buckets_and_charts(plan, key: str) -> None:
    """A plan's buckets to capture, then its expected step against the servers' lists and the
    distribution coloured by what runs as a graph (the Capture plan and Fleet pages)."""
    from launchgap.dashboard.charts import distribution_figure, plan_comparison_figure
    from launchgap.planning.planner import BASELINE_LABELS
    from launchgap.render.plan import tied_eager_text

    st.markdown("**Capture these batch sizes:**")
    # the box does not wrap: a line that fits 1,400 px
    none = ("none: the costs tie (eager only estimated): measure eager steps first" if plan.eager_equals_graph
            else "none: run eager")
    st.code(", ".join(str(b) for b in plan.buckets) or none, language=None)
    if tied := tied_eager_text(plan):  # sizes left eager on an estimate: beside the list, not only in the notes
        st.warning(md_escape(tied.strip()))
    left, right = st.columns(2)
    with left:
        st.plotly_chart(plan_comparison_figure(plan, BASELINE_LABELS), width="stretch", key=f"{key}_cmp")
    with right:
        st.plotly_chart(distribution_figure(plan), width="stretch", key=f"{key}_dist")


def show_trace_notes(trace_notes) -> None:
    """What the analyses of a plan's traces warned about and noted (``Plan.trace_notes``, or a fleet workload's
    with no plan), each said once with the traces that said it, under the plan's figures (the Capture plan and
    Fleet pages): why its verdict may not hold."""
    from launchgap.render.plan import TRACE_NOTES_SHOWN, trace_note_line, trace_notes_title

    if not trace_notes:
        return
    st.markdown(f"**{md_escape(trace_notes_title(trace_notes))}**")
    shown = trace_notes[:TRACE_NOTES_SHOWN]
    for n in shown:  # at most TRACE_NOTES_SHOWN
        if n.kind == "warning":
            st.warning(md_escape(trace_note_line(n)), icon=":material/warning:")
    notes = [n for n in shown if n.kind != "warning"]
    if notes:
        st.info("\n".join(f"- {md_escape(trace_note_line(n))}" for n in notes), icon=":material/info:")
    if len(trace_notes) > len(shown):
        st.caption(f"… {len(trace_notes) - len(shown)} more in the plan's JSON (trace_notes).")
