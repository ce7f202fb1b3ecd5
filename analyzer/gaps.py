"""GPU busy time, idle gaps, and the cause of every gap.

Per device, GPU ops (kernels, copies, sets, whole-graph replays) are sorted by start; a
running maximum of their end times merges overlapping streams, so **busy** time is the
union of their intervals (concurrent streams count once). A **gap** is an interval in
which the device runs nothing, between two GPU ops. Each gap is attributed by what the
op that ends it (the *next* op) was waiting for:

* ``peer``: the next op is a collective whose first ``wait_ns`` were spent spinning for
  other ranks (see :mod:`launchgap.collectives`); that wait is idle, not busy, and the
  part of the gap it covers (the end of the gap) has this cause.
* ``host``: the next op's launch call started after the device went idle: the CPU was
  late. ``host`` is the part from the gap's start until the launch call began, less any
  time the host spent blocked in a synchronizing call (``sync``) in that stretch.
* ``sync``: time inside the host part during which a host thread was blocked in a
  synchronizing call (cudaStreamSynchronize, cudaDeviceSynchronize, a blocking memcpy).
* ``launch``: from the start of the (late) launch call to the op's start.
* ``gpu``: the launch call started before the device went idle; the op waited on the
  GPU side (a dependency, an event wait, scheduling).
* ``unattributed``: no launch call could be matched to the next op.

The causes of a gap sum to its length exactly (integer ns), hence to the idle time.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .trace import Api, Trace, smallest_int

CAUSES = ("host", "launch", "sync", "gpu", "unattributed", "peer")


@dataclass(frozen=True, eq=False)
class Gaps:
    """All idle gaps of a trace, as columns (one entry per gap), sorted by device then time.

    ``prev_row`` is the op that ended last before the gap, ``next_row`` the op that ends it
    (rows of the trace). Cause columns are in ns and sum, per gap, to ``end_ns - start_ns``.
    Stored at their narrowest: rows int32 below 2^31 rows; a cause column that is zero
    throughout int8, the others one type that holds the longest gap. Cast before arithmetic that could leave it.
    """

    device: np.ndarray
    start_ns: np.ndarray
    end_ns: np.ndarray
    prev_row: np.ndarray
    next_row: np.ndarray
    host_ns: np.ndarray
    launch_ns: np.ndarray
    sync_ns: np.ndarray
    gpu_ns: np.ndarray
    unattributed_ns: np.ndarray
    peer_ns: np.ndarray

    def __len__(self) -> int:
        return int(self.start_ns.shape[0])

    @property
    def dur_ns(self) -> np.ndarray:
        return self.end_ns - self.start_ns

    def cause_ns(self, cause: str) -> np.ndarray:
        return getattr(self, f"{cause}_ns")


@dataclass(frozen=True, eq=False)
class DeviceBusy:
    """Busy intervals of one device after merging: sorted, disjoint ``[start_ns, end_ns)``."""

    device: int
    start_ns: np.ndarray
    end_ns: np.ndarray
    ops: np.ndarray  # trace rows of this device's GPU ops, sorted by effective start

    @property
    def busy_ns(self) -> int:
        return int((self.end_ns - self.start_ns).sum())

    def busy_between(self, t0: np.ndarray, t1: np.ndarray) -> np.ndarray:
        """Busy ns inside each ``[t0, t1]`` (vectorised over windows)."""
        cum = np.concatenate([[0], np.cumsum(self.end_ns - self.start_ns)])
        return _covered_before(self.start_ns, self.end_ns, cum, t1) - _covered_before(
            self.start_ns, self.end_ns, cum, t0
        )


def _covered_before(starts: np.ndarray, ends: np.ndarray, cum: np.ndarray, t: np.ndarray) -> np.ndarray:
    """Total length of disjoint sorted intervals that lies before time ``t``."""
    t = np.asarray(t, dtype=np.int64)
    if starts.size == 0:
        return np.zeros(t.shape, dtype=np.int64)
    k = np.searchsorted(starts, t, side="right")  # intervals starting at or before t
    full = cum[np.maximum(k - 1, 0)]
    part = np.where(k > 0, np.minimum(t, ends[np.maximum(k - 1, 0)]) - starts[np.maximum(k - 1, 0)], 0)
    return np.where(k > 0, full + np.maximum(part, 0), 0)


def merge_intervals(starts: np.ndarray, ends: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Union of intervals given sorted by start: disjoint sorted ``(starts, ends)``."""
    if starts.size == 0:
        return starts.copy(), ends.copy()
    run_end = np.maximum.accumulate(ends)
    new = np.ones(starts.size, dtype=bool)
    new[1:] = starts[1:] > run_end[:-1]
    first = np.flatnonzero(new)
    last = np.append(first[1:] - 1, starts.size - 1)
    return starts[first], run_end[last]


def host_sync_intervals(trace: Trace) -> tuple[np.ndarray, np.ndarray]:
    """Merged intervals during which some host thread was inside a synchronizing call."""
    rows = np.flatnonzero(trace.api == Api.SYNC)
    return merge_intervals(trace.start_ns[rows], trace.end_ns[rows])


def compute_gaps(trace: Trace, wait_ns: np.ndarray | None = None) -> tuple[Gaps, list[DeviceBusy]]:
    """Gaps with causes, and merged busy intervals, for every device of the trace.

    ``wait_ns`` (per trace row, optional) marks the leading part of a GPU op that is a wait
    for peers: the op counts as busy only from ``start_ns + wait_ns``.
    """
    gpu_rows = np.flatnonzero(trace.gpu_mask)
    sync_s, sync_e = host_sync_intervals(trace)
    sync_cum = np.concatenate([[0], np.cumsum(sync_e - sync_s)])
    parts: list[dict[str, np.ndarray]] = []
    busy: list[DeviceBusy] = []
    for dev in np.unique(trace.device[gpu_rows]):  # a loop over devices, not events
        rows = gpu_rows[trace.device[gpu_rows] == dev]
        eff_start = trace.start_ns[rows]  # a copy (fancy index); no table-long array of zero waits
        if wait_ns is not None:
            eff_start += np.minimum(wait_ns[rows], trace.dur_ns[rows])
        # Ties in start time: the op whose launch call came first ends the gap (then a canonical
        # order), so the attribution does not depend on the order events were written in.
        li = trace.launch_idx[rows]
        l_start = np.where(li >= 0, trace.start_ns[np.maximum(li, 0)], np.iinfo(np.int64).max)
        order = np.lexsort((trace.name_id[rows], trace.stream[rows], trace.end_ns[rows], l_start, eff_start))
        rows, eff_start = rows[order], eff_start[order]
        end = trace.end_ns[rows]
        run_end = np.maximum.accumulate(end)
        b_s, b_e = merge_intervals(eff_start, end)
        busy.append(DeviceBusy(device=int(dev), start_ns=b_s, end_ns=b_e,
                               ops=rows.astype(np.int32) if len(trace) < 2**31 else rows))
        if rows.size < 2:
            continue
        # Which op set the running max end (for "the op before the gap").
        idx = np.arange(rows.size, dtype=np.int32 if rows.size < 2**31 else np.int64)
        last_max = np.maximum.accumulate(np.where(end == run_end, idx, 0))
        del idx
        nxt = np.flatnonzero(eff_start[1:] > run_end[:-1]) + 1
        # written at their final types (see Gaps): the longest gap first, in blocks
        longest = max((int((eff_start[b] - run_end[b - 1]).max()) for b in
                       (nxt[lo:lo + _GAP_BLOCK] for lo in range(0, nxt.size, _GAP_BLOCK))), default=0)
        cause_t = smallest_int(np.array([0, longest], dtype=np.int64)).dtype
        pos_t = np.int32 if len(trace) < 2**31 else np.int64
        cols = {k: np.empty(nxt.size, dtype=np.int64 if k in ("start_ns", "end_ns") else pos_t if k.endswith("_row")
                            else cause_t) for k in _GAP_COLUMNS}
        for lo in range(0, nxt.size, _GAP_BLOCK):  # in blocks: a few dozen per-gap temporaries, each a block long
            _attribute(trace, cols, lo, nxt[lo:lo + _GAP_BLOCK], rows, eff_start, run_end, last_max, sync_s, sync_e,
                       sync_cum)
        del last_max, nxt
        parts.append(_zero_causes_int8(dict(device=np.full(cols["start_ns"].size, dev, dtype=np.int32), **cols)))
    if parts:
        # one device (the usual case): its arrays as they are, not a concatenated copy of them all
        cols = parts[0] if len(parts) == 1 else _zero_causes_int8(
            {k: np.concatenate([p[k] for p in parts]) for k in parts[0]})
    else:
        empty = np.zeros(0, dtype=np.int64)
        cols = {k: empty for k in _GAP_COLUMNS}
        cols["device"] = np.zeros(0, dtype=np.int32)
    return Gaps(**cols), busy


_GAP_COLUMNS = ("start_ns", "end_ns", "prev_row", "next_row", "host_ns", "launch_ns", "sync_ns", "gpu_ns",
                "unattributed_ns", "peer_ns")
#: Gaps per block in :func:`compute_gaps` (memory: its per-gap temporaries).
_GAP_BLOCK = 1 << 16


def _attribute(trace: Trace, cols: dict[str, np.ndarray], lo: int, nxt: np.ndarray, rows: np.ndarray,
               eff_start: np.ndarray, run_end: np.ndarray, last_max: np.ndarray, sync_s: np.ndarray,
               sync_e: np.ndarray, sync_cum: np.ndarray) -> None:
    """The gaps before the ops at positions ``nxt`` of one device's sorted ops, with their causes, written to
    ``cols`` from position ``lo`` (see the module docstring for the causes)."""
    hi = lo + nxt.size
    g_start = run_end[nxt - 1]
    g_end = eff_start[nxt]
    next_row = rows[nxt]
    cols["start_ns"][lo:hi] = g_start
    cols["end_ns"][lo:hi] = g_end
    cols["next_row"][lo:hi] = next_row
    cols["prev_row"][lo:hi] = rows[last_max[nxt - 1]]
    # The wait for peers is the tail of the gap, up to the op's real start.
    peer = g_end - np.maximum(trace.start_ns[next_row], g_start)
    cols["peer_ns"][lo:hi] = peer
    real_end = g_end - peer  # where the op (not its wait) would have started
    del g_end, peer
    launch_row = trace.launch_idx[next_row]
    has_launch = launch_row >= 0
    l_start = np.where(has_launch, trace.start_ns[np.maximum(launch_row, 0)], 0)
    late = has_launch & (l_start > g_start)
    cut = np.clip(l_start, g_start, real_end)  # launch call start, clamped into the gap
    before = np.where(late, cut - g_start, 0)
    sync = np.where(late, _covered_before(sync_s, sync_e, sync_cum, cut)
                    - _covered_before(sync_s, sync_e, sync_cum, g_start), 0)
    sync = np.minimum(sync, before)
    cols["sync_ns"][lo:hi] = sync
    cols["host_ns"][lo:hi] = before - sync
    cols["launch_ns"][lo:hi] = np.where(late, real_end - cut, 0)
    cols["gpu_ns"][lo:hi] = np.where(has_launch & ~late, real_end - g_start, 0)
    cols["unattributed_ns"][lo:hi] = np.where(has_launch, 0, real_end - g_start)


def _zero_causes_int8(cols: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """``cols`` with each cause column that is zero throughout at int8 (see :class:`Gaps`)."""
    for c in CAUSES:
        if not cols[f"{c}_ns"].any():
            cols[f"{c}_ns"] = cols[f"{c}_ns"].astype(np.int8)
    return cols
