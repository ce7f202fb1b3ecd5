"""Event tables for one decode step: what the CPU launched and what each GPU stream ran.

This is rendering support, not analysis: it reuses the analyzer's steps, row-to-step
assignment and gaps, and lays the events of one step out as rows for a chart. (A helper
"events of step i as a small table" would sit well in :mod:`analyzer`; it lives here until
the analyzer offers one.)
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from launchgap.gaps import Gaps, compute_gaps
from launchgap.report import StepReport
from launchgap.steps import StepOptions, Steps, assign_rows_to_steps, find_steps
from launchgap.trace import Api, Kind, Trace

#: Order of the cause segments inside one gap, as they happen in time: the host part (the CPU
#: was late; sync time lies somewhere inside it), then the late launch call, or the GPU-side
#: wait, and the wait for peers at the very end.
GAP_SEGMENT_ORDER = ("host", "sync", "launch", "gpu", "unattributed", "peer")

_GPU_CATEGORY = {Kind.KERNEL: "kernel", Kind.MEMCPY: "memcpy", Kind.MEMSET: "memset", Kind.GRAPH: "graph replay"}
_HOST_CATEGORY = {Api.KERNEL_LAUNCH: "launch call", Api.GRAPH_LAUNCH: "graph launch", Api.SYNC: "sync call"}
COLUMNS = ("lane", "category", "start_us", "end_us", "dur_us", "name")


@dataclass(frozen=True, eq=False)
class StepIndex:
    """The analyzer's view of a trace's steps and gaps, computed once per (trace, step options)."""

    steps: Steps
    row_step: np.ndarray
    gaps: Gaps


def step_index(trace: Trace, options: StepOptions) -> StepIndex:
    steps = find_steps(trace, options)
    gaps, _ = compute_gaps(trace)
    return StepIndex(steps=steps, row_step=assign_rows_to_steps(trace, steps), gaps=gaps)


def _frame(lane: np.ndarray, category: np.ndarray, start_ns: np.ndarray, end_ns: np.ndarray,
           name: np.ndarray, t0_ns: int) -> pd.DataFrame:
    return pd.DataFrame({
        "lane": lane, "category": category,
        "start_us": (start_ns - t0_ns) / 1e3, "end_us": (end_ns - t0_ns) / 1e3,
        "dur_us": (end_ns - start_ns) / 1e3, "name": name,
    })


def step_events(trace: Trace, index: StepIndex, step: StepReport) -> tuple[pd.DataFrame, list[str]]:
    """Rows (one per event or gap segment) of one step, and the lanes top to bottom.

    Times are microseconds from the start of the step's span (the earlier of its CPU range
    and its GPU window). Lanes: the step's CPU range, one lane per host thread with launch
    or sync calls in the step, one per GPU stream of the step's device, and the device's
    idle gaps split into their causes.
    """
    s = step.index
    dev = step.device
    w0 = int(round(step.start_us * 1e3))
    w1 = w0 + int(round(step.dur_us * 1e3))
    c0 = int(index.steps.cpu_start_ns[s])
    c1 = int(index.steps.cpu_end_ns[s])
    t0 = min(w0, c0)
    parts: list[pd.DataFrame] = []

    parts.append(_frame(np.array(["CPU step"]), np.array(["step range"]), np.array([c0]), np.array([c1]),
                        np.array([step.name], dtype=object), t0))

    host = np.flatnonzero((index.row_step == s) & np.isin(trace.api, list(_HOST_CATEGORY)))
    host_lanes: list[str] = []
    if host.size:
        lane, host_lanes = _lanes(trace.tid[host], "CPU thread {}")
        cat = pd.Series(trace.api[host]).map({int(k): v for k, v in _HOST_CATEGORY.items()}).to_numpy(dtype=object)
        parts.append(_frame(lane, cat, trace.start_ns[host], trace.end_ns[host], trace.name_of(host), t0))

    gpu = np.flatnonzero(trace.gpu_mask & (trace.device == dev) & (trace.end_ns > w0) & (trace.start_ns < w1))
    gpu_lanes: list[str] = []
    if gpu.size:
        lane, gpu_lanes = _lanes(trace.stream[gpu], f"GPU {dev} stream {{}}")
        cat = pd.Series(trace.kind[gpu]).map({int(k): v for k, v in _GPU_CATEGORY.items()}).to_numpy(dtype=object)
        parts.append(_frame(lane, cat, trace.start_ns[gpu], trace.end_ns[gpu], trace.name_of(gpu), t0))

    g = index.gaps
    sel = np.flatnonzero((g.device == dev) & (g.start_ns >= w0) & (g.end_ns <= w1))
    idle_lane = f"GPU {dev} idle"
    if sel.size:
        seg = np.stack([g.cause_ns(c)[sel] for c in GAP_SEGMENT_ORDER])  # causes x gaps
        ends = g.start_ns[sel] + np.cumsum(seg, axis=0)
        starts = ends - seg
        keep = seg > 0
        cause_idx, gap_idx = np.nonzero(keep)
        after = trace.name_of(g.next_row[sel][gap_idx])
        parts.append(_frame(np.full(cause_idx.size, idle_lane, dtype=object),
                            np.array([f"idle: {c}" for c in GAP_SEGMENT_ORDER], dtype=object)[cause_idx],
                            starts[keep], ends[keep], after, t0))
    events = pd.concat(parts, ignore_index=True)
    lanes = ["CPU step"] + host_lanes + gpu_lanes + [idle_lane]
    return events, lanes


def _lanes(ids: np.ndarray, fmt: str) -> tuple[np.ndarray, list[str]]:
    """Lane label of each event and the sorted lane names: one format per unique id, not per event."""
    uniq, inv = np.unique(ids, return_inverse=True)
    names = [fmt.format(u) for u in uniq.tolist()]
    return np.array(names, dtype=object)[inv], names
