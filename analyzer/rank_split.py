"""Several ranks of one job in one file, split into one trace per rank.

An Nsight Systems export of a tensor-parallel server holds every worker process (nsys follows child
processes by default: 2-8 processes, each driving its own GPU), and Kineto traces of several ranks are
sometimes merged into one file. A step is one rank's iteration, so such a file is analysed per rank.

A **rank** is a host process together with the GPU device(s) its launches go to:

* a device's **owner** is the process whose launch calls launched most of its GPU ops (correlation ids;
  counted per process, so an id that two processes both use counts for each); a device on which two
  processes launched as many ops each has no owner, and then the file is not split;
* the **ranks** are the processes that own a device and launched at least :data:`MIN_RANK_SHARE` of the
  ops the busiest of them launched (a helper process that ran a few kernels is no rank); a file with fewer
  than two ranks is not split (one process, or several processes but one driving the GPUs: as before);
* ranks are numbered by their lowest device (the device order), unless the processes' names say a rank
  each (``TP1``, ``rank1``: nsys' ``PROCESSES`` table, :attr:`~launchgap.trace.Trace.process_names`), all
  different;
* a rank's trace holds its process's host rows (runtime calls, CPU ops, annotations), the GPU rows on its
  devices, and the Python calls of its threads; launches are joined to GPU work again within the rank
  (:func:`~launchgap.trace.build_trace`). Its ``path`` is the file's with ``#rankN`` appended, its ``rank``
  N, its ``world_size`` the ranks found (or the file's ``distributedInfo`` world size when larger). Rows of
  processes that are no rank are left out, and :attr:`RankSplit.note` says how many.

``launchgap analyze`` analyses the ranks as a job (:func:`launchgap.ranks.analyze_job`); a capture plan reads one
rank (:func:`plan_rank`: every rank of a tensor-parallel job runs the same batches, so pooling them would count each
step once per rank), through :func:`launchgap.ranks.analyze_for_plan` in ``launchgap plan`` and the dashboard.

Everything is column masks; the loops run over processes and ranks, never over events.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from .steps import StepOptions, find_steps
from .trace import LAUNCH_CONFIG_COLUMNS, Kind, PythonCalls, Trace, build_trace

#: A GPU-owning process is a rank only when it launched at least this share of the GPU ops that the busiest
#: GPU-owning process launched: the ranks of one job run the same model (about equal counts), a process that
#: probed a GPU with a few kernels does not.
MIN_RANK_SHARE = 0.05
#: A rank number in a process name: ``VLLM::Worker_TP1``, ``sglang::scheduler_TP1``, ``rank1``, ``rank-1``.
PROCESS_RANK_REGEX = r"(?i)(?<![a-z0-9])(?:tp|rank)[_\-.]?(\d+)(?![0-9])"
_PROCESS_RANK = re.compile(PROCESS_RANK_REGEX)
_HOST_KINDS = (Kind.RUNTIME, Kind.CPU_OP, Kind.ANNOTATION)
_ROW_COLUMNS = ("kind", "name_id", "device", "stream", "pid", "tid", "start_ns", "dur_ns", "corr", "graph_id",
                "dims_id", "kernel_name_id", *LAUNCH_CONFIG_COLUMNS)


@dataclass(frozen=True)
class Rank:
    """One rank found in a file: its number, host process and devices (ascending), and the GPU ops it launched."""

    rank: int
    pid: int
    devices: tuple[int, ...]
    launched: int

    def describe(self) -> str:
        gpus = ", ".join(str(d) for d in self.devices)
        return f"rank {self.rank} = pid {self.pid} on GPU {gpus}"


@dataclass(frozen=True, eq=False)
class RankSplit:
    """A file of several ranks: the ranks found, one trace per rank (rank order), and one line saying so."""

    path: str
    ranks: tuple[Rank, ...]
    traces: tuple[Trace, ...]
    note: str


def find_ranks(trace: Trace) -> list[Rank]:
    """The ranks in ``trace`` (see the module docstring), rank order; empty when it holds fewer than two."""
    host = trace.kind == Kind.RUNTIME
    host &= trace.corr >= 0
    calls = np.flatnonzero(host)
    del host
    pids = np.unique(trace.pid[calls])
    pids = pids[pids >= 0]  # -1: calls whose process the file does not say (a damaged export) are no process
    if pids.size < 2:
        return []
    ops = np.flatnonzero(trace.gpu_mask & (trace.corr >= 0))
    if ops.size == 0:
        return []
    devices, dev_of_op = np.unique(trace.device[ops], return_inverse=True)
    op_corr = trace.corr[ops]
    call_pid, call_corr = trace.pid[calls], trace.corr[calls]
    launched = np.zeros((pids.size, devices.size), dtype=np.int64)
    for i, p in enumerate(pids.tolist()):  # per process (a handful), not per event
        own = np.unique(call_corr[call_pid == p])
        pos = np.minimum(np.searchsorted(own, op_corr), max(own.size - 1, 0))
        hit = own[pos] == op_corr if own.size else np.zeros(op_corr.size, dtype=bool)
        launched[i] = np.bincount(dev_of_op[hit], minlength=devices.size)
    top = np.sort(launched, axis=0)
    if ((top[-1] == top[-2]) & (top[-1] > 0)).any():
        return []  # two processes launched as much on one device: which one drives it is unknown
    owner = np.where(top[-1] > 0, np.argmax(launched, axis=0), -1)
    per_pid = np.array([launched[i, owner == i].sum() for i in range(pids.size)], dtype=np.int64)
    is_rank = (per_pid > 0) & (per_pid >= MIN_RANK_SHARE * per_pid.max())
    if np.count_nonzero(is_rank) < 2:
        return []
    found = [(int(devices[owner == i].min()), int(pids[i]), tuple(int(d) for d in devices[owner == i]),
              int(per_pid[i])) for i in np.flatnonzero(is_rank).tolist()]
    found.sort()
    numbers = _named_ranks(trace, [pid for _, pid, _, _ in found])
    if numbers is None:
        numbers = list(range(len(found)))
    ranks = [Rank(n, pid, devs, count) for n, (_, pid, devs, count) in zip(numbers, found)]
    return sorted(ranks, key=lambda r: r.rank)


def _named_ranks(trace: Trace, pids: list[int]) -> list[int] | None:
    """Each process's rank as its name says it, when every one says a different rank; else ``None``."""
    names = trace.process_names
    got = []
    for pid in pids:  # per rank
        m = list(_PROCESS_RANK.finditer(names.get(pid, "")))
        if not m:
            return None
        got.append(int(m[-1].group(1)))
    return got if len(set(got)) == len(got) else None


def split_ranks(trace: Trace) -> RankSplit | None:
    """``trace`` split into one trace per rank (see the module docstring); ``None`` when it holds one rank."""
    ranks = find_ranks(trace)
    if not ranks:
        return None
    host = np.zeros(len(trace), dtype=bool)
    for k in _HOST_KINDS:
        host |= trace.kind == k
    world = max(len(ranks), trace.world_size or 0)
    names = [str(n) for n in trace.names]
    kept = np.zeros(len(trace), dtype=bool)
    parts = []
    for r in ranks:  # one trace per rank
        rows = np.isin(trace.device, np.asarray(r.devices)) & ~host
        rows |= host & (trace.pid == r.pid)
        kept |= rows
        parts.append(_rank_trace(trace, r, np.flatnonzero(rows), names, world))
    left_host = int(np.count_nonzero(host & ~kept))
    left_pids = np.unique(trace.pid[host & ~kept])
    left_gpu = int(np.count_nonzero(~host & ~kept))
    note = (f"{trace.path} held {len(ranks)} ranks (processes each driving their own GPU), split into one trace "
            f"per rank: " + "; ".join(r.describe() for r in ranks))
    if left_host or left_gpu:
        note += (f"; left out {left_host:,} host events of {left_pids.size} other process(es) and {left_gpu:,} GPU "
                 f"events on devices no rank drives")
    return RankSplit(trace.path, tuple(ranks), tuple(parts), note)


def _rank_trace(trace: Trace, rank: Rank, rows: np.ndarray, names: list[str], world: int) -> Trace:
    """The trace of one rank: ``rows`` of ``trace`` (sorted by start already), launches joined again."""
    cols = {c: getattr(trace, c)[rows] for c in _ROW_COLUMNS}
    pc = trace.python_calls
    if len(pc):
        tids = np.unique(trace.tid[rows][np.isin(cols["kind"], _HOST_KINDS)])
        keep = np.isin(pc.tid, tids)
        pc = PythonCalls(pc.names, pc.name_id[keep], pc.start_ns[keep], pc.end_ns[keep], pc.tid[keep])
    devs = set(rank.devices)
    return build_trace(
        path=f"{trace.path}#rank{rank.rank}", format=trace.format, names=names, columns=cols,
        device_names={d: n for d, n in trace.device_names.items() if d in devs}, rank=rank.rank, world_size=world,
        warnings=list(trace.warnings), python_calls=pc, profiler_settings=trace.profiler_settings,
        device_properties={d: p for d, p in trace.device_properties.items() if d in devs},
        kernel_resources=trace.kernel_resources,
        process_names={p: n for p, n in trace.process_names.items() if p == rank.pid})


def plan_rank(split: RankSplit, options: StepOptions | None = None) -> tuple[Trace, str]:
    """The one rank a capture plan reads, and a line saying which and why (the plan's notes give it after the rank's
    name, as they give every analysis warning of its traces). Every rank of a tensor-parallel job
    runs the same batches, so pooling the ranks' steps would count each step once per rank: the plan takes the
    rank with the most steps of a known batch size, then the most steps, then the lowest rank number."""
    found = [find_steps(t, options) for t in split.traces]
    counts = [(int(np.count_nonzero(s.batch_size > 0)), len(s)) for s in found]
    best = min(range(len(found)), key=lambda i: (-counts[i][0], -counts[i][1], split.ranks[i].rank))
    known, total = counts[best]
    others = [i for i in range(len(found)) if i != best]
    note = (f"the file holds {len(split.ranks)} ranks of one job; the plan reads {split.ranks[best].describe()} "
            f"only, the rank with the most steps of a known batch size ({known} of {total} steps; ranks "
            f"{', '.join(str(split.ranks[i].rank) for i in others)}: {', '.join(str(counts[i][0]) for i in others)}"
            f"): every rank runs the same batches, so pooling them would count each step {len(split.ranks)} times")
    return split.traces[best], note


__all__ = ["MIN_RANK_SHARE", "PROCESS_RANK_REGEX", "Rank", "RankSplit", "find_ranks", "plan_rank",
           "split_ranks"]
