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
from launchgap.host_gaps import host_activity
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


def timeline_gpu_start(step: StepReport, cpu_start_ns: int, cpu_end_ns: int) -> tuple[float, float]:
    """Where the step's GPU window starts on its timeline (us from the timeline's start, the earlier of its
    CPU range and GPU window: :func:`step_events`) and how long after the CPU range ended it started (us; 0
    when the GPU work overlaps the CPU range)."""
    w0 = int(round(step.start_us * 1e3))
    t0 = min(w0, int(cpu_start_ns))
    return (w0 - t0) / 1e3, max(w0 - int(cpu_end_ns), 0) / 1e3


def step_events(trace: Trace, index: StepIndex, step: StepReport,
                labels: tuple[np.ndarray, np.ndarray] | None = None) -> tuple[pd.DataFrame, list[str]]:
    """Rows (one per event or gap segment) of one step, and the lanes top to bottom.

    Times are microseconds from the start of the step's span (the earlier of its CPU range
    and its GPU window). Lanes: the step's CPU range, one lane per host thread with launch
    or sync calls in the step, one per GPU stream of the step's device, and the device's
    idle gaps split into their causes. ``labels`` (rows, op names; ``None`` entries skipped): GPU
    rows shown as ``op: kernel`` (the kernels inside graph replays, named from a capture trace).
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
        names = trace.name_of(gpu)
        if labels is not None and labels[0].size:
            lab_rows, lab_ops = labels
            pos = np.searchsorted(lab_rows, gpu)  # lab_rows ascending (rows of the trace)
            hit = pos < lab_rows.size
            hit[hit] = lab_rows[pos[hit]] == gpu[hit]
            op = np.full(gpu.size, None, dtype=object)
            op[hit] = lab_ops[pos[hit]]
            has = op != None  # noqa: E711 (object array)
            names = names.copy()
            names[has] = op[has] + ": " + names[has]
        parts.append(_frame(lane, cat, trace.start_ns[gpu], trace.end_ns[gpu], names, t0))

    g = index.gaps
    sel = np.flatnonzero((g.device == dev) & (g.start_ns >= w0) & (g.end_ns <= w1))
    idle_lane = f"GPU {dev} idle"
    if sel.size:
        seg = np.stack([g.cause_ns(c)[sel] for c in GAP_SEGMENT_ORDER])  # causes x gaps
        ends = g.start_ns[sel] + np.cumsum(seg, axis=0)
        starts = ends - seg
        keep = seg > 0
        cause_idx, gap_idx = np.nonzero(keep)
        after = trace.name_of(g.next_row[sel][gap_idx]).astype(object)
        # what the CPU ran while the GPU waited for it: the host segments of the step's longest gaps
        cpu_ran = _cpu_ran(trace, index, g.start_ns[sel], g.end_ns[sel])
        host_seg = (np.array(GAP_SEGMENT_ORDER, dtype=object)[cause_idx] == "host") & (cpu_ran[gap_idx] != "")
        after[host_seg] = after[host_seg] + " — the CPU ran: " + cpu_ran[gap_idx][host_seg]
        parts.append(_frame(np.full(cause_idx.size, idle_lane, dtype=object),
                            np.array([f"idle: {c}" for c in GAP_SEGMENT_ORDER], dtype=object)[cause_idx],
                            starts[keep], ends[keep], after, t0))
    events = pd.concat(parts, ignore_index=True)
    lanes = ["CPU step"] + host_lanes + gpu_lanes + [idle_lane]
    return events, lanes


#: Gaps of a step whose CPU activity the hover names (the longest; painting each costs a pass over the host ranges).
HOVER_ACTIVITY_GAPS = 20


def _cpu_ran(trace: Trace, index: StepIndex, g0: np.ndarray, g1: np.ndarray) -> np.ndarray:
    """Per gap the top three innermost host ranges that ran during it (``"llama.py: forward 1,295 us; ..."``), for
    the :data:`HOVER_ACTIVITY_GAPS` longest gaps; ``""`` for the others."""
    out = np.full(g0.size, "", dtype=object)
    top = np.argsort(-(g1 - g0), kind="stable")[:HOVER_ACTIVITY_GAPS]
    for i, act in zip(top.tolist(), host_activity(trace, index.row_step, g0[top], g1[top])):  # a few gaps
        out[i] = "; ".join(f"{k} {v:,.0f} us" for k, v in sorted(act.items(), key=lambda kv: -kv[1])[:3])
    return out


def _lanes(ids: np.ndarray, fmt: str) -> tuple[np.ndarray, list[str]]:
    """Lane label of each event and the sorted lane names: one format per unique id, not per event."""
    uniq, inv = np.unique(ids, return_inverse=True)
    names = [fmt.format(u) for u in uniq.tolist()]
    return np.array(names, dtype=object)[inv], names


#: A step's timeline draws at most this many rows. A step with more (a trace without step
#: markers is one long step) has each lane's bars merged where they lie closer than a
#: resolution, doubled from span / limit until the rows fit: what is busy stays drawn busy.
MAX_TIMELINE_EVENTS = 20_000


def downsample_events(events: pd.DataFrame, max_events: int = MAX_TIMELINE_EVENTS) -> tuple[pd.DataFrame, float]:
    """The rows to draw and the merge resolution in us (0.0: nothing merged, the rows as given).

    Within one lane and category, rows sorted by start are merged into one bar while the next
    starts at most ``resolution`` after the end of the bar so far. A merged bar spans its rows
    (first start to last end); its ``dur_us`` is the sum of their durations (busy time, not the
    span) and its name says how many rows it holds and the first one's name.
    """
    if len(events) <= max_events:
        return events, 0.0
    start = events["start_us"].to_numpy(float)
    end = events["end_us"].to_numpy(float)
    span = float(end.max() - start.min()) or 1.0
    group = pd.MultiIndex.from_arrays([events["lane"], events["category"]]).factorize()[0]
    order = np.lexsort((start, group))
    start, end, group = start[order], end[order], group[order]
    dur = events["dur_us"].to_numpy(float)[order]
    names = events["name"].to_numpy(object)[order]
    lane = events["lane"].to_numpy(object)[order]
    cat = events["category"].to_numpy(object)[order]
    res = span / max_events
    while True:
        # Shift each group past the previous one so one running maximum serves all groups.
        shift = group * (2.0 * span + 4.0 * res + 1.0) - float(start.min())
        run_end = np.maximum.accumulate(end + shift)
        new = np.ones(start.size, dtype=bool)
        new[1:] = (group[1:] != group[:-1]) | (start[1:] + shift[1:] > run_end[:-1] + res)
        first = np.flatnonzero(new)
        if first.size <= max_events:
            break
        res *= 2.0
    count = np.diff(np.append(first, start.size))
    many = count > 1
    bar_name = names[first].copy()
    bar_name[many] = (pd.Series(count[many]).astype(str) + " ops merged, first: "
                      + pd.Series(bar_name[many]).astype(str)).to_numpy(object)
    out = pd.DataFrame({
        "lane": lane[first], "category": cat[first],
        "start_us": start[first], "end_us": np.maximum.reduceat(end, first),
        "dur_us": np.add.reduceat(dur, first), "name": bar_name,
    })
    return out, res
