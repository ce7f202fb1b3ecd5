"""Pages that pool traces (Compare, Capture plan) pool one workload at a time.

A workload is a model on a device (and a rank): :mod:`launchgap.workload`. With traces of
several workloads loaded, :func:`pick_workload_entries` shows a selectbox of them and a
warning that they are not pooled, and returns the chosen workload's entries. ``ranks_together``
(the Capture plan page): the ranks of one tensor-parallel job are one workload, as a server
captures one list on every rank (:func:`launchgap.workload.tp_job`).
"""
from __future__ import annotations

import streamlit as st

from launchgap.workload import WorkloadGroup, display_names, group_by_workload
from launchgap.dashboard.session import LoadedTrace
from launchgap.dashboard.text import md_escape


def workload_groups(entries: list[LoadedTrace], ranks_together: bool = False) -> list[WorkloadGroup[LoadedTrace]]:
    """Loaded traces grouped by their report's workload, in load order."""
    return group_by_workload(entries, lambda e: e.report.workload if e.report is not None else None,
                             ranks_together=ranks_together)


def workload_name(entries: list[LoadedTrace], workload_id: str, ranks_together: bool = False) -> str:
    """What the pages call one of the loaded traces' workloads (:func:`launchgap.workload.display_names`)."""
    return display_names(g.workload for g in workload_groups(entries, ranks_together)).get(workload_id, workload_id)


def pick_workload_entries(entries: list[LoadedTrace], key: str, default: str | None = None,
                          ranks_together: bool = False) -> list[LoadedTrace]:
    """The entries of one workload: all of them when there is one, else the one picked in a selectbox
    (its choice survives page switches, like :func:`launchgap.dashboard.ui.pick_trace`). ``default``: the workload id
    the selectbox opens on until a choice is made (else the first group's)."""
    groups = workload_groups(entries, ranks_together)
    if len(groups) <= 1:
        return entries
    by_id = {g.id: g for g in groups}
    state = st.session_state
    store_key, widget_key = f"{key}_choice", f"{key}_widget"
    if state.get(store_key) not in by_id:
        state[store_key] = default if default in by_id else groups[0].id
    if state.get(widget_key) not in by_id:
        state[widget_key] = state[store_key]
    st.warning(md_escape(f"The loaded traces hold {len(groups)} different workloads (models, devices or ranks). "
                         "Their step costs and batch sizes are not pooled: pick the workload to use."),
               icon=":material/warning:")
    names = display_names(g.workload for g in groups)
    choice = st.selectbox("Workload", list(by_id), key=widget_key,
                          format_func=lambda i: f"{names[i]} — {len(by_id[i].items)} trace(s): "
                                                + ", ".join(e.name for e in by_id[i].items[:3])
                                                + (" …" if len(by_id[i].items) > 3 else ""),
                          help="Traces of one model on one device (and rank): same kernels per step and kernel "
                               "families, whatever the batch size or eager/graph mode.")
    state[store_key] = choice
    return by_id[choice].items
