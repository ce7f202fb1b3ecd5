"""Decode steps and their batch sizes.

A **step** is one decode iteration, found from, in order of preference:

1. annotations (record_function / NVTX ranges) whose text matches a user's ``step_regex``;
2. ``ProfilerStep#N`` ranges, unless annotations matching :data:`DEFAULT_STEP_REGEX` are more
   numerous (then each ProfilerStep holds several decode steps and those finer ranges win);
3. annotations matching :data:`DEFAULT_STEP_REGEX`;
4. in graph-replay traces without markers, one ``cudaGraphLaunch`` per step;
5. otherwise the whole trace is one window.

Only outermost matching ranges count (a matching range nested in another is part of it).
A GPU op belongs to a step when the start of the call that launched it lies in the step's
CPU range; the step's **GPU window** runs from the first to the last GPU op it launched.

The **batch size** of a step is read from the step's own text, else from the first
annotation inside it, with :data:`DEFAULT_BATCH_REGEX` (``bs=8``, ``batch_size=8``,
``batch 8``, ``decode_step[bs=8]``) or a user pattern whose first group is the number;
else from the recorded input shapes of a chosen CPU op (``batch_op``; by default the first
of :data:`DEFAULT_BATCH_OPS` found in the step); else unknown (-1).
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass

import numpy as np

from analyzer.errors import InputError
from analyzer.trace import Api, Kind, Trace

DEFAULT_STEP_REGEX = r"(?i)(decode|model_step|execute_model|generate_step|forward_step|^step\b|\bstep[\[#_ (]|iteration)"
DEFAULT_BATCH_REGEX = r"(?i)(?:\bbs|\bbatch(?:[_ ]?size)?)\s*[=: ]\s*(\d+)"
_PROFILER_STEP = re.compile(r"^ProfilerStep#\d+$")
#: Where a decode step's batch shows in recorded input shapes when no text names it (needs
#: ``record_shapes=True``): the token ids fed to the embedding (``[batch, 1]`` or, flattened,
#: ``[tokens]``), else the logits the next token is picked from (``argmax`` over ``[batch, vocab]``).
DEFAULT_BATCH_OPS = ("aten::embedding:1:0", "aten::argmax:0:0")
_MAX_BATCH = 1 << 31


@dataclass(frozen=True)
class StepOptions:
    """How to find steps and batch sizes. ``batch_op`` is ``"OP[:ARG[:DIM]]"`` (default ARG 0, DIM 0)."""

    step_regex: str | None = None
    batch_regex: str | None = None
    batch_op: str | None = None


@dataclass(frozen=True, eq=False)
class Steps:
    """Steps as columns (one entry per step, sorted by ``cpu_start_ns``).

    ``source`` says how they were found: ``"user-regex"``, ``"profiler-step"``,
    ``"annotation"``, ``"graph-launch"`` or ``"whole-trace"``.
    """

    source: str
    names: list[str]
    cpu_start_ns: np.ndarray
    cpu_end_ns: np.ndarray
    batch_size: np.ndarray  # int64, -1 when unknown

    def __len__(self) -> int:
        return int(self.cpu_start_ns.shape[0])


def _compile(pattern: str, what: str) -> re.Pattern[str]:
    try:
        return re.compile(pattern)
    except re.error as exc:
        raise InputError(f"bad {what} {pattern!r}: {exc}") from None


def _matching_name_ids(trace: Trace, pattern: re.Pattern[str], rows: np.ndarray) -> np.ndarray:
    """Name ids among ``rows`` whose text matches (the regex runs once per unique name)."""
    uniq = np.unique(trace.name_id[rows])
    return np.array([nid for nid in uniq if pattern.search(trace.names[nid])], dtype=np.int32)


def _outermost(rows: np.ndarray, trace: Trace) -> np.ndarray:
    """Drop ranges nested inside an earlier range of the same set (rows sorted by start)."""
    if rows.size <= 1:
        return rows
    ends = trace.end_ns[rows]
    prev_max_end = np.maximum.accumulate(ends)
    nested = np.zeros(rows.size, dtype=bool)
    nested[1:] = prev_max_end[:-1] >= ends[1:]
    return rows[~nested]


def find_steps(trace: Trace, options: StepOptions | None = None) -> Steps:
    """Find decode steps and their batch sizes (see the module docstring for the rules)."""
    opts = options or StepOptions()
    ann = np.flatnonzero(trace.kind == Kind.ANNOTATION)
    rows: np.ndarray | None = None
    source = ""
    if opts.step_regex:
        pat = _compile(opts.step_regex, "--step-regex")
        ids = _matching_name_ids(trace, pat, ann)
        rows = _outermost(ann[np.isin(trace.name_id[ann], ids)], trace)
        source = "user-regex"
        if rows.size == 0:
            raise InputError(f"--step-regex {opts.step_regex!r} matches no annotation or NVTX range", trace.path)
    else:
        prof_ids = np.array([i for i in np.unique(trace.name_id[ann]) if _PROFILER_STEP.match(trace.names[i])],
                            dtype=np.int32)
        prof_rows = _outermost(ann[np.isin(trace.name_id[ann], prof_ids)], trace)
        non_prof = ann[~np.isin(trace.name_id[ann], prof_ids)]
        dflt_ids = _matching_name_ids(trace, re.compile(DEFAULT_STEP_REGEX), non_prof)
        dflt_rows = _outermost(non_prof[np.isin(trace.name_id[non_prof], dflt_ids)], trace)
        if prof_rows.size and prof_rows.size >= dflt_rows.size:
            rows, source = prof_rows, "profiler-step"
        elif dflt_rows.size:
            rows, source = dflt_rows, "annotation"
    if rows is not None and rows.size:
        starts, ends = trace.start_ns[rows], trace.end_ns[rows]
        names = [str(s) for s in trace.names[trace.name_id[rows]]]
    else:
        graph_launch = np.flatnonzero(trace.api == Api.GRAPH_LAUNCH)
        eager_launch = np.count_nonzero(trace.api == Api.KERNEL_LAUNCH)
        if graph_launch.size and eager_launch == 0:
            source = "graph-launch"
            starts, ends = trace.start_ns[graph_launch], trace.end_ns[graph_launch]
            names = [f"cudaGraphLaunch#{i}" for i in range(graph_launch.size)]
        else:
            source = "whole-trace"
            starts = np.array([trace.start_ns.min() if len(trace) else 0], dtype=np.int64)
            ends = np.array([trace.end_ns.max() if len(trace) else 0], dtype=np.int64)
            names = ["whole trace"]
    batch = _batch_sizes(trace, starts, ends, names, opts)
    return Steps(source=source, names=names, cpu_start_ns=np.asarray(starts, dtype=np.int64),
                 cpu_end_ns=np.asarray(ends, dtype=np.int64), batch_size=batch)


def _batch_from_text(names: list[str] | np.ndarray, pattern: re.Pattern[str]) -> np.ndarray:
    out = np.full(len(names), -1, dtype=np.int64)
    for i, text in enumerate(names):
        m = pattern.search(text)
        if m:
            try:
                value = int(m.group(1) if m.groups() else m.group(0))
            except (ValueError, IndexError, TypeError):
                continue
            if 0 < value < _MAX_BATCH:  # anything else is not a batch size
                out[i] = value
    return out


def _contained(trace: Trace, rows: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """For rows sorted by start: the step each lies in (or -1), by searchsorted over step starts."""
    idx = np.searchsorted(starts, trace.start_ns[rows], side="right") - 1
    ok = idx >= 0
    ok[ok] = trace.end_ns[rows[ok]] <= ends[idx[ok]]
    return np.where(ok, idx, -1), rows


def _batch_sizes(trace: Trace, starts: np.ndarray, ends: np.ndarray, names: list[str], opts: StepOptions) -> np.ndarray:
    pat = _compile(opts.batch_regex or DEFAULT_BATCH_REGEX, "--batch-regex")
    batch = _batch_from_text(names, pat)
    ann = np.flatnonzero(trace.kind == Kind.ANNOTATION)
    if (batch < 0).any() and ann.size:
        uniq = np.unique(trace.name_id[ann])
        uniq_bs = _batch_from_text([trace.names[i] for i in uniq], pat)
        with_bs = uniq[uniq_bs >= 0]
        if with_bs.size:
            lookup = dict(zip(uniq.tolist(), uniq_bs.tolist()))
            cand = ann[np.isin(trace.name_id[ann], with_bs)]
            step_of, cand = _contained(trace, cand, starts, ends)
            inside = step_of >= 0
            steps_hit, first = np.unique(step_of[inside], return_index=True)
            values = np.array([lookup[int(n)] for n in trace.name_id[cand[inside][first]]], dtype=np.int64)
            fill = batch[steps_hit] < 0
            batch[steps_hit[fill]] = values[fill]
    for spec in ([opts.batch_op] if opts.batch_op else DEFAULT_BATCH_OPS):
        if not (batch < 0).any():
            break
        batch = _batch_from_op(trace, starts, ends, batch, spec)
    return batch


def _batch_from_op(trace: Trace, starts: np.ndarray, ends: np.ndarray, batch: np.ndarray, spec: str) -> np.ndarray:
    # Op names contain colons (aten::embedding): ARG and DIM are the trailing integer parts.
    m = re.fullmatch(r"(.+?)(?::(\d+))?(?::(\d+))?", spec)
    if not m or m.group(1).endswith(":") or (m.group(1).count(":") % 2 == 1):
        raise InputError(f"--batch-op {spec!r}: expected OP[:ARG[:DIM]] with integer ARG and DIM")
    op = m.group(1)
    arg = int(m.group(2)) if m.group(2) else 0
    dim = int(m.group(3)) if m.group(3) else 0
    op_ids = [i for i, n in enumerate(trace.names) if n == op]
    rows = np.flatnonzero((trace.kind == Kind.CPU_OP) & np.isin(trace.name_id, op_ids) & (trace.dims_id >= 0))
    if rows.size == 0:
        return batch
    step_of, rows = _contained(trace, rows, starts, ends)
    inside = step_of >= 0
    steps_hit, first = np.unique(step_of[inside], return_index=True)
    out = batch.copy()
    for s, r in zip(steps_hit.tolist(), rows[inside][first].tolist()):
        if out[s] >= 0:
            continue
        try:
            dims = json.loads(trace.names[trace.dims_id[r]])
            value = int(dims[arg][dim])
        except (ValueError, IndexError, TypeError, KeyError, RecursionError):
            continue
        if 0 < value < _MAX_BATCH:
            out[s] = value
    return out


def assign_rows_to_steps(trace: Trace, steps: Steps) -> np.ndarray:
    """Step index of every row (-1 if none).

    GPU ops go to the step in whose CPU range their launch call started (GPU ops without a
    matched launch call get -1); host rows go to the step in whose range they started.
    """
    t = trace.start_ns.copy()
    gpu = trace.gpu_mask
    li = trace.launch_idx
    t[gpu] = np.where(li[gpu] >= 0, trace.start_ns[np.maximum(li[gpu], 0)], -1)
    idx = np.searchsorted(steps.cpu_start_ns, t, side="right") - 1
    ok = idx >= 0
    ok[ok] = t[ok] <= steps.cpu_end_ns[idx[ok]]
    ok &= ~(gpu & (li < 0))
    return np.where(ok, idx, -1)
