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

Vectorised over events; the loops are over windows of time (:data:`_WINDOW_RANGES` host ranges each, for
memory), nesting depths (a handful) and frame names.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from .host_gaps import _BLOCK, MAX_DEPTH, launch_thread_ranges, range_name_table, sorted_unique
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


def _holders(ss: np.ndarray, ee: np.ndarray, rr: np.ndarray, depth: np.ndarray, ids: np.ndarray, t: np.ndarray,
             ) -> tuple[np.ndarray, np.ndarray]:
    """Per time ``t`` the innermost range holding it (-1: none; else its id from ``ids``) and whether any range
    holding it is in the region, from the ranges' starts, ends, region flags and ids in nesting order
    (:func:`~launchgap.host_gaps._depth`'s ``order``), and their depths."""
    owner = np.full(t.size, -1, dtype=np.int64)
    inside = np.zeros(t.size, dtype=bool)
    if ss.size == 0 or t.size == 0:
        return owner, inside
    for d in range(int(min(depth.max(), MAX_DEPTH)) + 1):  # one pass per nesting depth, not per event
        at = np.flatnonzero(depth == d)
        j = np.searchsorted(ss[at], t, side="right") - 1
        cov = j >= 0
        cov[cov] = t[cov] < ee[at][j[cov]]
        owner[cov] = ids[at[j[cov]]]
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


def _quiet_stretches(trace: Trace, row_step: np.ndarray, min_us: float,
                     ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Every stretch of at least ``min_us`` on the launching thread in which no host range (event row or Python
    call) starts or ends, in time order: its start and end (ns), the name id (into the returned table: the
    trace's names, then the Python calls' names) and kind (-1: a Python call) of the innermost range holding its
    middle (-1 name id: none), and whether a range holding it is in the captured region; and the table.

    Computed over windows of time of about :data:`_WINDOW_RANGES` ranges each, not over the whole thread's
    ranges at once (memory: 1.5 M host ranges on a 1 GB eager trace, millions of Python calls with stacks), with
    the same result: what a window needs of the ranges before it is carried over (the ends of those still open,
    how many there were, and the last range at each nesting depth), so every range's depth and every stretch's
    holder are those of the whole thread."""
    pc = trace.python_calls
    n_rows, n_calls = int(trace.start_ns.shape[0]), len(pc)
    host, pmask = launch_thread_ranges(trace, row_step)
    table = range_name_table(trace)
    n_names = len(trace.names)
    # per name id, not per range (regexes once per distinct name)
    present = np.zeros(table.size, dtype=bool)
    present[:n_names] = trace.name_counts(host) > 0
    for lo in range(0, n_calls, _BLOCK):
        present[n_names:][pc.name_id[lo:lo + _BLOCK][pmask[lo:lo + _BLOCK]]] = True
    region_of = np.zeros(table.size, dtype=bool)
    uniq = np.flatnonzero(present)
    region_of[uniq] = [bool(CAPTURED_REGION_RE.search(str(x))) for x in table[uniq]]
    del present, uniq
    # windows [cut_i, cut_i+1) of start time, cut every _WINDOW_RANGES rows and Python calls
    cuts = sorted_unique(np.concatenate([trace.start_ns[_WINDOW_RANGES::_WINDOW_RANGES],
                                         pc.start_ns[_WINDOW_RANGES::_WINDOW_RANGES]]))
    rb = np.concatenate([[0], np.searchsorted(trace.start_ns, cuts, side="left"), [n_rows]]).tolist()
    cb = np.concatenate([[0], np.searchsorted(pc.start_ns, cuts, side="left"), [n_calls]]).tolist()
    ends_at = cuts.tolist() + [None]
    min_ns = min_us * 1e3
    n_prior = 0  # ranges before the window
    open_e = np.zeros(0, dtype=np.int64)  # ends of the ranges before the window still open at its start
    # the last range before the window at each depth (what it needs to find the innermost holder)
    last = {k: np.zeros(MAX_DEPTH + 1, dtype=t) for k, t in
            (("s", np.int64), ("e", np.int64), ("r", bool), ("nid", np.int64), ("kind", np.int8))}
    has_last = np.zeros(MAX_DEPTH + 1, dtype=bool)
    prev_b = None  # the last boundary before the window
    out: list[tuple[np.ndarray, ...]] = []
    for w in range(len(rb) - 1):  # a loop over windows of time (a handful per GB), not over events
        r = rb[w] + np.flatnonzero(host[rb[w]:rb[w + 1]])
        c = cb[w] + np.flatnonzero(pmask[cb[w]:cb[w + 1]])
        s = np.concatenate([trace.start_ns[r], pc.start_ns[c]])
        e = np.concatenate([trace.end_ns[r], pc.end_ns[c]])
        nid = np.concatenate([trace.name_id[r].astype(np.int64), pc.name_id[c].astype(np.int64) + n_names])
        kind = np.concatenate([trace.kind[r], np.full(c.size, -1, dtype=np.int8)])
        del r, c
        order = np.lexsort((-e, s))  # nesting order: start ascending, longer first
        s, e, nid, kind = s[order], e[order], nid[order], kind[order]
        del order
        e_sorted = np.sort(e)
        # depth as among all ranges: those before it less those that had ended by its start (see _depth)
        pos = n_prior + np.arange(s.size, dtype=np.int64)
        ended = (n_prior - open_e.size) + np.searchsorted(open_e, s, side="right") + \
            np.searchsorted(e_sorted, s, side="right")
        depth = pos - np.minimum(ended, pos)
        del pos, ended
        # boundaries in the window: its starts, and the ends in it of its ranges and of those still open
        t1 = ends_at[w]
        bnd = np.concatenate([s, open_e if t1 is None else open_e[open_e < t1],
                              e_sorted if t1 is None else e_sorted[e_sorted < t1]])
        bnd.sort()
        if prev_b is not None:
            bnd = np.concatenate([[prev_b], bnd])
        if bnd.size:
            prev_b = int(bnd[-1])
        quiet = np.flatnonzero(np.diff(bnd) >= min_ns)
        q0, q1 = bnd[quiet], bnd[quiet + 1]
        del bnd, quiet
        if q0.size:
            held = has_last.copy()  # the last range at each depth before the window, then the window's ranges
            owner, inside = _holders(np.concatenate([last["s"][held], s]), np.concatenate([last["e"][held], e]),
                                     np.concatenate([last["r"][held], region_of[nid]]),
                                     np.concatenate([np.flatnonzero(held), depth]), np.arange(int(held.sum()) + s.size),
                                     (q0 + q1) // 2)
            all_nid = np.concatenate([last["nid"][held], nid])
            all_kind = np.concatenate([last["kind"][held], kind])
            ok = owner >= 0
            o_nid = np.where(ok, all_nid[np.maximum(owner, 0)], -1)
            o_kind = np.where(ok, all_kind[np.maximum(owner, 0)], -1).astype(np.int8)
            out.append((q0, q1, o_nid, o_kind, inside))
        # carried to the next window
        if s.size:
            d = depth
            top = np.flatnonzero(d <= MAX_DEPTH)
            lvl = d[top]
            # the last range at each depth in the window (the one latest in nesting order)
            idx = np.full(MAX_DEPTH + 1, -1, dtype=np.int64)
            np.maximum.at(idx, lvl, top)
            got = idx >= 0
            for k, col in (("s", s), ("e", e), ("nid", nid), ("kind", kind)):
                last[k][got] = col[idx[got]]
            last["r"][got] = region_of[nid[idx[got]]]
            has_last |= got
        n_prior += s.size
        if t1 is not None:
            open_e = np.sort(np.concatenate([open_e[open_e >= t1], e[e >= t1]]))
        del s, e, nid, kind, depth, e_sorted
    if not out:
        empty = np.zeros(0, dtype=np.int64)
        return empty, empty, empty, np.zeros(0, np.int8), np.zeros(0, bool), table
    cols = [np.concatenate([o[i] for o in out]) for i in range(5)]
    return cols[0], cols[1], cols[2], cols[3], cols[4], table


#: Host ranges per window of time in :func:`_quiet_stretches` (memory: its per-range temporaries).
_WINDOW_RANGES = 1 << 16


def host_stalls(trace: Trace, row_step: np.ndarray, n_steps: int, gap_start_ns: np.ndarray, gap_end_ns: np.ndarray,
                gap_step: np.ndarray, min_us: float = HOST_STALL_MIN_US) -> HostStalls:
    """Host stalls of every step (see the module docstring). ``gap_*``: the part of each idle gap inside a
    step's GPU window on its device during which the GPU waited for the host (disjoint), with its step."""
    stall = np.zeros(n_steps)
    in_graph = np.zeros(n_steps)
    frame: list[str | None] = [None] * n_steps
    if gap_start_ns.size == 0:  # the GPU never waited for the host: nothing to copy
        return HostStalls(stall, in_graph, frame, [])
    q0, q1, owner_nid, owner_kind, inside, table = _quiet_stretches(trace, row_step, min_us)
    # held by a Python frame or an annotation: a long CPU op or runtime call is work or a wait the trace names
    held = (owner_nid >= 0) & ((owner_kind < 0) | (owner_kind == Kind.ANNOTATION))
    q0, q1, owner_nid, inside = q0[held], q1[held], owner_nid[held], inside[held]
    if q0.size == 0:
        return HostStalls(stall, in_graph, frame, [])
    order = np.argsort(gap_start_ns, kind="stable")
    g0, g1, gs = gap_start_ns[order], gap_end_ns[order], gap_step[order].astype(np.int64)
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
    names_u, stall_name = np.unique(owner_nid, return_inverse=True)
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
