"""Host stalls: the GPU idles while the launching thread records nothing, and what a graph does to them.

A step can be slow because the CPU is busy launching (a graph removes that) or because the host
thread sits in Python that launches nothing for milliseconds (a lock, a blocking call the profiler
does not see, garbage collection). The second is not "launch-bound", and whether a CUDA graph
removes it depends on *where* it sits.

* **Host stall**: a stretch of at least :data:`HOST_STALL_MIN_US` on the launching thread in which
  no host event starts or ends (no CPU op, runtime call, annotation or Python call) while the
  innermost range holding it is a Python frame or an annotation (a long CPU op or runtime call is
  work or a wait the trace already names: a sync, a blocking collective). Its **frame** is that
  range (a Python frame loses its line
  number: ``vllm/model_executor/models/llama.py: forward``).
* **GPU stall time of a step** (``host_stall_us``): the part of the step's stalls during which the
  step's device, inside the step's GPU window, waits for a late CPU (the part of each gap whose cause
  is ``host`` or ``sync``, which come first in a gap: :mod:`launchgap.gaps`); a stall the GPU does not
  wait on costs nothing.
* **Inside the captured region** (``host_stall_in_graph_us``): some range holding the stall is the
  model's forward (:data:`CAPTURED_REGION_RE`: a Python ``forward`` of a file under a ``models``
  folder, an ``nn.Module`` named ``*ForCausalLM`` / ``*Model``, a ``Torch-Compiled Region``). A FULL
  graph replays the forward without running its Python, so such a stall goes; a stall outside it
  (scheduling, input preparation, sampling, before the forward) stays in the graphed step too.

Vectorised over events; the loops are over nesting depths (a handful) and over frame names.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from .host_gaps import _BLOCK, MAX_DEPTH, _depth, host_ranges_with_kind
from .trace import Kind, Trace

#: A host stretch with no recorded event shorter than this is ordinary Python between ops, not a stall (us).
HOST_STALL_MIN_US = 500.0
#: Ranges that are the model's forward: what a FULL CUDA graph captures and replays without its Python.
CAPTURED_REGION_RE = re.compile(
    r"(?:^|/)models?/\S*\.py(?:\(\d+\))?: forward$|^nn\.Module: \w*(?:ForCausalLM|LMHeadModel|Model)(?:_\d+)?$"
    r"|^Torch-Compiled Region")
_PY_LINE = re.compile(r"\(\d+\): ")


@dataclass(frozen=True, eq=False)
class HostStalls:
    """Per step (arrays of length n_steps): ``stall_us`` (GPU idle during host stalls inside the step's
    window), ``in_graph_us`` (the part inside the captured region), ``frame`` (the frame holding most of
    the step's stall time, ``None`` without one); ``frames``: per frame name over the trace,
    ``(name, us, in_graph_us)`` sorted by ``us`` descending."""

    stall_us: np.ndarray
    in_graph_us: np.ndarray
    frame: list[str | None]
    frames: list[tuple[str, float, float]]


def _holders(ss: np.ndarray, ee: np.ndarray, rr: np.ndarray, depth: np.ndarray, order: np.ndarray, t: np.ndarray,
             ) -> tuple[np.ndarray, np.ndarray]:
    """Per time ``t`` the innermost range holding it (-1: none; an index before ``order``) and whether any
    range holding it is in the region, from the ranges' starts, ends and region flags already in
    :func:`~launchgap.host_gaps._depth`'s ``order``, and their depths."""
    owner = np.full(t.size, -1, dtype=np.int64)
    inside = np.zeros(t.size, dtype=bool)
    if ss.size == 0 or t.size == 0:
        return owner, inside
    for d in range(int(min(depth.max(), MAX_DEPTH)) + 1):  # one pass per nesting depth, not per event
        at = np.flatnonzero(depth == d)
        j = np.searchsorted(ss[at], t, side="right") - 1
        cov = j >= 0
        cov[cov] = t[cov] < ee[at][j[cov]]
        owner[cov] = order[at[j[cov]]]
        inside[cov] |= rr[at[j[cov]]]
    return owner, inside


def _covered_before(a0: np.ndarray, a1: np.ndarray, t: np.ndarray) -> np.ndarray:
    """Total length of the disjoint sorted intervals ``[a0, a1)`` that lies before each ``t``."""
    if a0.size == 0:
        return np.zeros(t.shape)
    cum = np.concatenate([[0], np.cumsum(a1 - a0)])
    j = np.searchsorted(a0, t, side="right")  # intervals starting at or before t
    part = np.where(j > 0, np.minimum(t, a1[np.maximum(j - 1, 0)]) - a0[np.maximum(j - 1, 0)], 0)
    return cum[np.maximum(j - 1, 0)] + np.maximum(part, 0) * (j > 0)


def host_stalls(trace: Trace, row_step: np.ndarray, n_steps: int, gap_start_ns: np.ndarray, gap_end_ns: np.ndarray,
                gap_step: np.ndarray, min_us: float = HOST_STALL_MIN_US) -> HostStalls:
    """Host stalls of every step (see the module docstring). ``gap_*``: the part of each idle gap inside a
    step's GPU window on its device during which the GPU waited for the host (disjoint), with its step."""
    stall = np.zeros(n_steps)
    in_graph = np.zeros(n_steps)
    frame: list[str | None] = [None] * n_steps
    if gap_start_ns.size == 0:  # the GPU never waited for the host: nothing to copy
        return HostStalls(stall, in_graph, frame, [])
    name_ids, table, starts, ends, kinds = host_ranges_with_kind(trace, row_step)
    if starts.size == 0:
        return HostStalls(stall, in_graph, frame, [])
    bnd = np.concatenate([starts, ends])
    bnd.sort()  # in place; equal boundaries give gaps of 0 (np.unique costs 15x more)
    quiet = np.concatenate([lo + np.flatnonzero(np.diff(bnd[lo:lo + _BLOCK + 1]) >= min_us * 1e3)  # no diff as long
                            for lo in range(0, max(bnd.size - 1, 1), _BLOCK)])  # as the boundaries
    q0, q1 = bnd[quiet], bnd[quiet + 1]
    del bnd, quiet
    # per name id, not a unique/inverse over the ranges (memory: a with_stack trace has millions of them)
    present = np.zeros(table.size, dtype=bool)
    present[name_ids] = True
    region_of = np.zeros(table.size, dtype=bool)
    uniq = np.flatnonzero(present)
    region_of[uniq] = [bool(CAPTURED_REGION_RE.search(str(x))) for x in table[uniq]]
    # the ranges in nesting order, each column replacing its unordered self (memory: one column at a time)
    order, depth = _depth(starts, ends)
    starts = starts[order]
    ends = ends[order]
    owner, inside = _holders(starts, ends, region_of[name_ids][order], depth, order, (q0 + q1) // 2)
    del starts, ends, order, depth
    # held by a Python frame or an annotation: a long CPU op or runtime call is work or a wait the trace names
    held = owner >= 0
    held[held] = (kinds[owner[held]] < 0) | (kinds[owner[held]] == Kind.ANNOTATION)
    q0, q1, owner, inside = q0[held], q1[held], owner[held], inside[held]
    if q0.size == 0:
        return HostStalls(stall, in_graph, frame, [])
    order = np.argsort(gap_start_ns, kind="stable")
    g0, g1, gs = gap_start_ns[order], gap_end_ns[order], gap_step[order]
    # per gap the stall time inside it (stalls are disjoint: prefix sums over them)
    s_all = _covered_before(q0, q1, g1) - _covered_before(q0, q1, g0)
    q0i, q1i = q0[inside], q1[inside]
    s_in = _covered_before(q0i, q1i, g1) - _covered_before(q0i, q1i, g0)
    stall = np.bincount(gs, weights=s_all, minlength=n_steps)[:n_steps] / 1e3
    in_graph = np.bincount(gs, weights=s_in, minlength=n_steps)[:n_steps] / 1e3
    # per stall its GPU idle time and step (the gap it overlaps first)
    over = (_covered_before(g0, g1, q1) - _covered_before(g0, g1, q0)) / 1e3
    j = np.searchsorted(g1, q0, side="right")
    hit = (j < g0.size) & (over > 0)
    # frame names of the stalls only (a trace has many more range names than stalls)
    names_u, stall_name = np.unique(name_ids[owner], return_inverse=True)
    label_u = np.array([_PY_LINE.sub(": ", str(x)) for x in table[names_u]], dtype=object)
    labels, lab_of_u = np.unique(label_u, return_inverse=True)
    lab = lab_of_u[stall_name]
    tot = np.bincount(lab[hit], weights=over[hit], minlength=labels.size)
    tot_in = np.bincount(lab[hit & inside], weights=over[hit & inside], minlength=labels.size)
    frames = [(str(labels[i]), round(float(tot[i]), 3), round(float(tot_in[i]), 3))
              for i in np.argsort(-tot, kind="stable").tolist() if tot[i] > 0]
    step_of = gs[np.minimum(j, g0.size - 1)]
    key = step_of[hit] * labels.size + lab[hit]
    per = np.bincount(key, weights=over[hit], minlength=n_steps * labels.size).reshape(n_steps, labels.size)
    best = np.argmax(per, axis=1)
    has = per[np.arange(n_steps), best] > 0
    frame = [str(labels[b]) if h else None for b, h in zip(best.tolist(), has.tolist())]
    return HostStalls(stall, in_graph, frame, frames)
