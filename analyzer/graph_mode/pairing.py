"""A capture trace beside an execution trace: what runs inside each replay (:func:`pair_capture`)."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..trace import Api, Kind, Trace
from .coverage import _BEGIN_CAPTURE_RE, _END_CAPTURE_RE, _capture_ranges, _runtime_rows


#: How replays were matched to captured graphs (:attr:`CapturePairing.matched_by`).
MATCHED_BY = ("kernel names", "node count and order")
_HASH_MULTS = (np.uint64(0x9E3779B97F4A7C15), np.uint64(0xC2B2AE3D27D4EB4F))


@dataclass(frozen=True, eq=False)
class CapturedNodes:
    """The launches a capture trace recorded into graphs, one row per node (arrays), in capture order.

    ``graph``: the captured graph of each node (0-based, capture order); ``position``: its place in
    that graph; ``kernel``: the kernel the launch call names (ROCm traces do; ``None`` otherwise);
    ``op``: the innermost framework op around the launch call (``aten::mm``, ``vllm::...``; ``None``
    when none). Per graph: ``nodes`` (count), ``sizes`` / ``modes`` (what the engine's capture range
    says, else ``None``) and ``group`` (graphs captured under the same capture range share a group;
    ``ordinal`` is a graph's place in its group, the piece index of piecewise capture).
    """

    graph: np.ndarray
    position: np.ndarray
    kernel: np.ndarray
    op: np.ndarray
    nodes: np.ndarray
    sizes: list[int | None]
    modes: list[str | None]
    group: np.ndarray
    ordinal: np.ndarray


def _rank_in_group(group: np.ndarray, order_key: np.ndarray) -> np.ndarray:
    """0-based rank of each element inside its group, by ``order_key`` (stable)."""
    if group.size == 0:
        return np.zeros(0, dtype=np.int64)
    o = np.lexsort((order_key, group))
    g = group[o]
    first = np.r_[0, np.flatnonzero(g[1:] != g[:-1]) + 1]
    run = np.repeat(first, np.diff(np.r_[first, g.size]))
    rank = np.empty(group.size, dtype=np.int64)
    rank[o] = np.arange(g.size) - run
    return rank


def _containing(start: np.ndarray, end: np.ndarray, tid: np.ndarray, q_t: np.ndarray, q_tid: np.ndarray
                ) -> np.ndarray:
    """For each query (time, thread): the innermost interval of that thread containing it, or -1.

    Intervals of one thread are taken as properly nested (host ranges are). An interval's level is
    the number of intervals open at its start (itself included, ties in start: the longer one
    outside); the innermost interval around time t is the latest-starting one at level
    depth(t) = (intervals started by t) - (intervals ended before t). One searchsorted per thread.
    """
    out = np.full(q_t.size, -1, dtype=np.int64)
    for th in np.unique(q_tid).tolist():  # one pass per host thread, not per event
        rows = np.flatnonzero(tid == th)
        qs = np.flatnonzero(q_tid == th)
        if rows.size == 0 or qs.size == 0:
            continue
        rows = rows[np.lexsort((-end[rows], start[rows]))]
        s, e = start[rows], end[rows]
        e_sorted = np.sort(e)
        level = np.arange(1, rows.size + 1) - np.searchsorted(e_sorted, s, side="left")
        t = q_t[qs]
        depth = np.searchsorted(s, t, side="right") - np.searchsorted(e_sorted, t, side="left")
        lo = min(int(s.min()), int(t.min()))
        width = max(int(s.max()), int(t.max())) - lo + 1
        key = level.astype(np.int64) * width + (s - lo)  # sorted by (level, start)
        order = np.argsort(key, kind="stable")
        pos = np.searchsorted(key[order], depth * width + (t - lo), side="right") - 1
        ok = (pos >= 0) & (depth > 0)
        cand = np.where(ok, order[np.maximum(pos, 0)], 0)
        ok &= (level[cand] == depth) & (e[cand] >= t)
        out[qs[ok]] = rows[cand[ok]]
    return out


def captured_nodes(trace: Trace) -> CapturedNodes:
    """The nodes a capture trace recorded (see :class:`CapturedNodes`).

    A node is a kernel launch call that ran nothing, inside a capture window: ``BeginCapture`` to
    the next ``EndCapture`` on the same thread, else (no such calls) an engine's capture range.
    """
    kl = np.flatnonzero(trace.api == Api.KERNEL_LAUNCH)
    ran = trace.launch_idx[trace.gpu_mask & (trace.launch_idx >= 0)]
    kl = kl[~np.isin(kl, ran)]
    begins, ends = _runtime_rows(trace, _BEGIN_CAPTURE_RE), _runtime_rows(trace, _END_CAPTURE_RE)
    cap_rows, cap_sizes, cap_modes = _capture_ranges(trace)
    if begins.size:
        w_start, w_tid = trace.start_ns[begins], trace.tid[begins]
        w_end = np.full(begins.size, np.iinfo(np.int64).max)
        for th in np.unique(w_tid).tolist():  # per thread, not per event
            b = np.flatnonzero(w_tid == th)
            e = np.sort(trace.end_ns[ends[trace.tid[ends] == th]])
            pos = np.searchsorted(e, w_start[b], side="left")
            hit = pos < e.size
            w_end[b[hit]] = e[pos[hit]]
        # The capture range around each window names its size and mode.
        rng = _containing(trace.start_ns[cap_rows], trace.end_ns[cap_rows], trace.tid[cap_rows], w_start, w_tid)
    else:
        w_start, w_end, w_tid = trace.start_ns[cap_rows], trace.end_ns[cap_rows], trace.tid[cap_rows]
        rng = np.arange(cap_rows.size)
    win = _containing(w_start, w_end, w_tid, trace.start_ns[kl], trace.tid[kl])
    kl, win = kl[win >= 0], win[win >= 0]
    n_graphs = int(w_start.size)
    sizes = [cap_sizes[r] if r >= 0 else None for r in rng.tolist()]
    modes = [cap_modes[r] if r >= 0 else None for r in rng.tolist()]
    group = np.where(rng >= 0, rng, -1 - np.arange(n_graphs))  # no range: a group of its own
    ordinal = _rank_in_group(group, w_start)
    names = trace.names
    kid = trace.kernel_name_id[kl]
    kernel = np.where(kid >= 0, names[np.maximum(kid, 0)] if names.size else kid, None).astype(object)
    ops = np.flatnonzero(trace.kind == Kind.CPU_OP)
    op_row = _containing(trace.start_ns[ops], trace.end_ns[ops], trace.tid[ops], trace.start_ns[kl], trace.tid[kl])
    op = np.where(op_row >= 0, trace.name_of(ops[np.maximum(op_row, 0)]) if ops.size else op_row, None).astype(object)
    return CapturedNodes(graph=win, position=_rank_in_group(win, trace.start_ns[kl]), kernel=kernel, op=op,
                         nodes=np.bincount(win, minlength=n_graphs), sizes=sizes, modes=modes, group=group,
                         ordinal=ordinal)


def _seq_hashes(token: np.ndarray, group: np.ndarray, position: np.ndarray, n_groups: int) -> np.ndarray:
    """Two 64-bit polynomial hashes of each group's token sequence (``n_groups`` x 2, uint64)."""
    out = np.zeros((n_groups, len(_HASH_MULTS)), dtype=np.uint64)
    if token.size == 0:
        return out
    with np.errstate(over="ignore"):
        for j, m in enumerate(_HASH_MULTS):  # two multipliers, not events
            powers = np.cumprod(np.full(int(position.max()) + 1, m, dtype=np.uint64))
            np.add.at(out[:, j], group, (token.astype(np.uint64) + np.uint64(1)) * powers[position])
    return out


def _first_match(keys_a: np.ndarray, keys_b: np.ndarray, unique_only: bool = False) -> np.ndarray:
    """For each row of ``keys_b``, the first row of ``keys_a`` with the same key (-1 if none; with
    ``unique_only``, -1 too where several rows of ``keys_a`` share it)."""
    if keys_a.shape[0] == 0 or keys_b.shape[0] == 0:
        return np.full(keys_b.shape[0], -1, dtype=np.int64)
    _, inv = np.unique(np.concatenate([keys_a, keys_b]), axis=0, return_inverse=True)
    inv = inv.reshape(-1)
    ia, ib = inv[: keys_a.shape[0]], inv[keys_a.shape[0]:]
    first = np.full(int(inv.max()) + 1, -1, dtype=np.int64)
    first[ia[::-1]] = np.arange(keys_a.shape[0])[::-1]  # the earliest row wins
    if unique_only:
        first[np.bincount(ia, minlength=first.size) > 1] = -1
    return first[ib]


@dataclass(frozen=True, eq=False)
class CapturePairing:
    """An execution trace's graph replays named by the capture trace of the same engine run.

    Replays (graph launch calls whose kernels the execution trace shows) are matched to captured
    graphs by the sequence of kernel names when the capture trace names the kernels of its launch
    calls (ROCm traces do), else by node count and order (a replay's place among its step's graph
    launches is the graph's place in its capture range, the piece index of piecewise capture; else
    the one captured graph with that many nodes). A matched replay's k-th kernel is its graph's k-th
    node, so it gets that node's ``op`` (and kernel name) from the capture.

    Per replay kernel row (arrays over ``rows``, the execution trace's rows): ``graph`` (matched
    captured graph, -1 when its replay matched none) and ``op`` (framework op at capture, ``None``
    when unknown). :meth:`to_dict` gives the JSON block (see docs/engines.md).
    """

    capture_path: str
    matched_by: str
    replays: int
    replays_matched: int
    captured: CapturedNodes
    rows: np.ndarray
    graph: np.ndarray
    op: np.ndarray
    kernel_us: np.ndarray
    kernel_names: np.ndarray
    replay_graph: np.ndarray

    @property
    def replay_kernel_us(self) -> float:
        """GPU time of all kernels replayed from graphs (sum of their durations), us."""
        return float(self.kernel_us.sum())

    def graphs_table(self) -> list[dict]:
        """Per captured graph with a matched replay: size, mode, nodes, replays, kernel time (us) and
        its share of all replay kernel time (fraction 0-1), in capture order."""
        c = self.captured
        n = c.nodes.size
        m = self.graph >= 0
        us = np.bincount(self.graph[m], weights=self.kernel_us[m], minlength=n)
        reps = np.bincount(self.replay_graph[self.replay_graph >= 0], minlength=n)
        total = self.replay_kernel_us
        return [{"graph": int(g), "size": c.sizes[g], "mode": c.modes[g], "nodes": int(c.nodes[g]),
                 "replays": int(reps[g]), "kernel_us": round(float(us[g]), 3),
                 "share_of_replay_time": round(float(us[g] / total), 4) if total > 0 else 0.0}
                for g in np.flatnonzero(reps).tolist()]

    def kernels_table(self, top: int = 15) -> list[dict]:
        """Replay kernels by (op at capture, kernel name): count, GPU time (us), share of all replay
        kernel time (fraction 0-1); the ``top`` by GPU time, ties by op then name."""
        if self.rows.size == 0:
            return []
        op = np.where(self.op == None, "", self.op).astype(str)  # noqa: E711 (object array)
        op_u, op_i = np.unique(op, return_inverse=True)
        k_u, k_i = np.unique(self.kernel_names.astype(str), return_inverse=True)
        pairs, inv = np.unique(np.column_stack([op_i.reshape(-1), k_i.reshape(-1)]), axis=0, return_inverse=True)
        inv = inv.reshape(-1)
        count = np.bincount(inv, minlength=pairs.shape[0])
        us = np.bincount(inv, weights=self.kernel_us, minlength=pairs.shape[0])
        total = self.replay_kernel_us
        best = np.lexsort((k_u[pairs[:, 1]], op_u[pairs[:, 0]], -us))[:top]
        out = []
        for i in best.tolist():  # the top rows only
            o, k = str(op_u[pairs[i, 0]]), str(k_u[pairs[i, 1]])
            out.append({"op": o or None, "name": k, "count": int(count[i]), "kernel_us": round(float(us[i]), 3),
                        "share_of_replay_time": round(float(us[i] / total), 4) if total > 0 else 0.0})
        return out

    def to_dict(self, top: int = 15) -> dict:
        named = int(np.count_nonzero(self.graph >= 0))
        return {"capture_path": self.capture_path, "matched_by": self.matched_by,
                "graphs_captured": int(self.captured.nodes.size), "replays": self.replays,
                "replays_matched": self.replays_matched, "replay_kernels": int(self.rows.size),
                "replay_kernels_named": named, "replay_kernel_us": round(self.replay_kernel_us, 3),
                "named_share_of_replay_time": round(float(self.kernel_us[self.graph >= 0].sum()
                                                          / self.replay_kernel_us), 4)
                if self.replay_kernel_us > 0 else 0.0,
                "graphs": self.graphs_table(), "kernels": self.kernels_table(top)}


def pair_capture(trace: Trace, capture: Trace, row_step: np.ndarray | None = None) -> CapturePairing:
    """Name the kernels inside ``trace``'s graph replays from ``capture`` (see :class:`CapturePairing`).

    ``row_step`` (step of each row of ``trace``, -1 for none) gives each replay its place among its
    step's graph launches for matching by order; without it, a replay's place counts from the
    trace's first graph launch.
    """
    cap = captured_nodes(capture)
    li = trace.launch_idx
    kern = np.flatnonzero((trace.kind == Kind.KERNEL) & (li >= 0))
    rows = kern[trace.api[li[kern]] == Api.GRAPH_LAUNCH]
    rep_row, rep_of = np.unique(li[rows], return_inverse=True)  # replays: their graph launch rows
    rep_of = rep_of.reshape(-1)
    position = _rank_in_group(rep_of, trace.start_ns[rows])
    count = np.bincount(rep_of, minlength=rep_row.size)
    n_graphs = int(cap.nodes.size)
    steps = row_step[rep_row] if row_step is not None else np.zeros(rep_row.size, dtype=np.int64)
    ordinal = _rank_in_group(steps, trace.start_ns[rep_row]).astype(np.uint64)
    c_ord = cap.ordinal.astype(np.uint64)
    named = cap.kernel.size > 0 and bool(np.all(cap.kernel != None))  # noqa: E711 (object array)
    if named:
        vocab, tok = np.unique(np.concatenate([trace.names[trace.name_id[rows]].astype(str),
                                               cap.kernel.astype(str)]), return_inverse=True)
        tok = tok.reshape(-1)
        h_rep = _seq_hashes(tok[: rows.size], rep_of, position, rep_row.size)
        h_cap = _seq_hashes(tok[rows.size:], cap.graph, cap.position, n_graphs)
        keys_cap = np.column_stack([cap.nodes.astype(np.uint64), h_cap])
        keys_rep = np.column_stack([count.astype(np.uint64), h_rep])
        # Equal sequences (the repeated layers of piecewise capture): the graph at the replay's place.
        replay_graph = _first_match(np.column_stack([keys_cap, c_ord]), np.column_stack([keys_rep, ordinal]))
        replay_graph = np.where(replay_graph >= 0, replay_graph, _first_match(keys_cap, keys_rep))
        matched_by = MATCHED_BY[0]
    else:
        c_nodes, r_count = cap.nodes.astype(np.uint64), count.astype(np.uint64)
        replay_graph = _first_match(np.column_stack([c_nodes, c_ord]), np.column_stack([r_count, ordinal]))
        by_count = _first_match(c_nodes[:, None], r_count[:, None], unique_only=True)
        replay_graph = np.where(replay_graph >= 0, replay_graph, by_count)
        matched_by = MATCHED_BY[1]
    graph = replay_graph[rep_of] if rows.size else np.zeros(0, dtype=np.int64)
    # The node of each replay kernel: its graph's node at the same position.
    node_first = np.r_[0, np.cumsum(cap.nodes)[:-1]] if n_graphs else np.zeros(0, dtype=np.int64)
    node_order = np.lexsort((cap.position, cap.graph))
    ok = graph >= 0
    node = np.full(rows.size, -1, dtype=np.int64)
    node[ok] = node_order[node_first[graph[ok]] + position[ok]]
    op = np.full(rows.size, None, dtype=object)
    op[ok] = cap.op[node[ok]]
    return CapturePairing(capture_path=capture.path, matched_by=matched_by, replays=int(rep_row.size),
                          replays_matched=int(np.count_nonzero(replay_graph >= 0)), captured=cap, rows=rows,
                          graph=graph, op=op, kernel_us=trace.dur_ns[rows] / 1e3,
                          kernel_names=trace.names[trace.name_id[rows]], replay_graph=replay_graph)
