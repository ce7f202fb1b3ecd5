"""Communication kernels of multi-GPU decode, and the part of each that only waits for peers.

A collective kernel (an NCCL or RCCL all-reduce, a custom all-reduce, ...) starts on a rank's
GPU as soon as that rank's stream reaches it and then spins until every other rank of the
group has started its own instance; only then does data move. So its duration is
``wait + work``:

* ``wait_ns``: from the kernel's start until the last rank of the group started its
  instance. The GPU reports a running kernel but does nothing useful; the analysis counts
  this part as idle with cause ``peer`` (:mod:`launchgap.gaps`), never as busy.
* ``work_ns``: the rest, the collective's intrinsic cost (transfer and reduction).

Which estimate produced a row's split is its :class:`WaitSource`:

* ``aligned`` (all ranks' traces at hand, :func:`align_waits`): the ranks' steps are matched
  (by step name, else by order), and inside a matched step the k-th instance of a kernel name
  on one rank is matched with the k-th instance of that name on every other rank. An instance
  cannot progress before the last rank started its own, so
  ``wait_r = max over ranks of start - start_r`` and ``work_r = dur_r - wait_r``. Clocks: the
  ranks of one host share a clock to well under a microsecond; across hosts they do not, so
  each rank's clock offset is estimated as the median, over matched instances, of its end time
  minus the first rank's (a collective finishes on all ranks together, within one link
  latency) and removed before comparing starts. If the ends still disagree by more than half
  the median work after that, the match is not trusted and the single-rank estimate is kept.
* ``aligned-name``: a collective of one rank left unmatched (outside the steps, or one rank
  recorded more instances) takes the median aligned work of its kernel name on that rank.
* ``fastest-instances`` (one rank alone, :func:`estimate_wait_single`): instances of the same
  kernel on the same device with the same message size do the same work; the ones that did
  not wait are the fastest, so work = a low percentile (:attr:`CollectiveModel.work_percentile`)
  of their durations, and each instance's wait is its duration beyond that.
* ``cost-model``: one rank alone, when every instance of a collective waited (this rank's host
  is always ahead of a peer's), the fastest instance still holds a wait. No single-rank trace
  can tell how much: moving all peers' arrivals earlier by some time and the work later by the
  same time gives the same trace. The fastest instance is therefore trusted only while it is
  within :attr:`CollectiveModel.trust_factor` of a latency-bandwidth prior; past that, the
  prior is the work. See :class:`CollectiveModel` for the prior and where its constants come
  from.

The message size comes from the innermost communication CPU op (``record_param_comms``,
``c10d::allreduce_``, ``nccl:all_reduce``, a custom all-reduce op, ...) around the kernel's
launch call, read from its recorded input shapes (Kineto ``record_shapes=True``); the element
width from the kernel name (``bf16``, ``half``, ``float``, ...), else 2 bytes (bf16/fp16, the
usual decode dtype). Without shapes the size is unknown and the prior is its latency alone.
"""
from __future__ import annotations

import json
import math
import re
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from enum import IntEnum

import numpy as np

from .engines import ENGINES
from .steps import Steps
from .trace import Kind, Trace, one_of

#: Kernel names of communication: NCCL/RCCL/MSCCL device kernels and collectives by name (torch
#: symmetric memory ``one_shot_all_reduce``/``two_shot_all_reduce``/``multimem_all_reduce``,
#: TensorRT-LLM ``*AllReduce*``, all-gather, reduce-scatter, all-to-all), plus each serving
#: engine's own kernels (``COLLECTIVE_KERNELS`` of :mod:`launchgap.engines`: vLLM/SGLang
#: ``cross_device_reduce_*`` and quick-reduce, NVIDIA userbuffers).
COLLECTIVE_KERNEL_REGEX = (
    r"(?i)(?:^|[^a-z])(?:nccl|rccl|msccl)"
    r"|all[_\- ]?reduce|all[_\- ]?gather|reduce[_\- ]?scatter|all[_\- ]?to[_\- ]?all"
    + "".join(f"|{alt}" for alt in dict.fromkeys(a for e in ENGINES for a in e.COLLECTIVE_KERNELS.split("|")))
)
_COLLECTIVE_KERNEL_RE = re.compile(COLLECTIVE_KERNEL_REGEX)
#: Host ops that wrap one collective call and record its input shapes.
_COMM_HOST_OP_RE = re.compile(
    r"(?i)nccl|rccl|c10d|record_param_comms|custom_ar|symm_mem|all[_\- ]?reduce|all[_\- ]?gather"
    r"|reduce[_\- ]?scatter|all[_\- ]?to[_\- ]?all|broadcast"
)
# Element width by dtype token in a kernel name; first match wins, so longer tokens come first.
_DTYPE_BYTES = (
    (re.compile(r"(?i)bfloat16|bf16|float16|half|fp16|f16|__half"), 2),
    (re.compile(r"(?i)float64|double|f64|fp64|[iu]64|int64"), 8),
    (re.compile(r"(?i)float32|fp32|f32|[iu]32|int32|(?<![a-z])float(?![0-9])"), 4),
    (re.compile(r"(?i)fp8|f8|e4m3|e5m2|[iu]8|int8|uint8"), 1),
)
DEFAULT_ELEMENT_BYTES = 2


class WaitSource(IntEnum):
    """How a collective's work/wait split was estimated (see the module docstring)."""

    NONE = 0
    ALIGNED = 1
    ALIGNED_NAME = 2
    FASTEST = 3
    MODEL = 4


SOURCE_LABEL = {
    WaitSource.NONE: "none",
    WaitSource.ALIGNED: "aligned",
    WaitSource.ALIGNED_NAME: "aligned-name",
    WaitSource.FASTEST: "fastest-instances",
    WaitSource.MODEL: "cost-model",
}


@dataclass(frozen=True)
class CollectiveModel:
    """Constants of the single-rank estimate.

    ``work_percentile``: the low percentile of an instance group's durations taken as its work.
    ``trust_factor``: that percentile is believed only while at most this many times the prior.
    The prior for a collective moving ``bus_bytes`` (message bytes times ``2(n-1)/n`` for an
    all-reduce over ``n`` ranks, ``(n-1)/n`` for all-gather / reduce-scatter / all-to-all, 1
    otherwise) is ``latency_us + bus_bytes / bus_gbps``. Defaults describe NVLink-class GPUs of
    one host at decode message sizes (KiB to a few MiB), from public nccl-tests figures rather
    than from any trace here: a small all-reduce over 2 GPUs takes about 6 us on H100 with
    NVLink SHARP (NVIDIA/nccl issue 1259) and 10 us on DGX-A100 with one ring channel
    (NVIDIA/nccl-tests issue 123), so 8 us; NCCL moves such sizes with its LL/LL128 protocols,
    which give up half or more of the link's peak for latency, so 100 GB/s of bus bandwidth,
    a fraction of NVLink's 450 GB/s per direction. Slower links (PCIe) need larger values.
    """

    latency_us: float = 8.0
    bus_gbps: float = 100.0
    work_percentile: float = 5.0
    trust_factor: float = 4.0

    def prior_work_ns(self, bus_bytes: np.ndarray) -> np.ndarray:
        """Prior work per collective (ns); ``bus_bytes < 0`` (unknown size) gives the latency alone."""
        b = np.maximum(np.asarray(bus_bytes, dtype=float), 0.0)
        return np.rint(self.latency_us * 1e3 + b / self.bus_gbps).astype(np.int64)  # bytes / (GB/s) = ns


DEFAULT_COLLECTIVE_MODEL = CollectiveModel()


def is_collective_name(name: str) -> bool:
    """Whether a kernel name is a communication kernel (see :data:`COLLECTIVE_KERNEL_REGEX`)."""
    return bool(_COLLECTIVE_KERNEL_RE.search(name))


def collective_rows(trace: Trace) -> np.ndarray:
    """Rows of the trace's communication kernels, in row (start) order. Every analysis asks (a replay's collective
    nodes are priced apart): the kernels' names are found by one count over their ids and matched once each, no sort
    of the kernel rows."""
    kern = np.flatnonzero(trace.kind == Kind.KERNEL)
    if kern.size == 0:
        return kern
    ids = trace.name_id[kern]
    present = np.flatnonzero(np.bincount(ids))
    hit = np.zeros(int(present[-1]) + 1, dtype=bool)
    hit[present] = [is_collective_name(str(trace.names[i])) for i in present.tolist()]
    return kern[hit[ids]]


def element_bytes(name: str) -> int | None:
    """Element width named in a kernel name (``bf16`` -> 2, ``float`` -> 4, ...), else None."""
    for pat, size in _DTYPE_BYTES:
        if pat.search(name):
            return size
    return None


def bus_factor(name: str, n_ranks: int) -> float:
    """Bytes each rank moves per message byte: ``2(n-1)/n`` all-reduce, ``(n-1)/n`` gather/scatter, else 1."""
    n = max(int(n_ranks), 2)
    low = name.lower().replace("_", "").replace("-", "").replace(" ", "")
    if "allreduce" in low or "crossdevicereduce" in low or "quickreduce" in low:
        return 2.0 * (n - 1) / n
    if "allgather" in low or "reducescatter" in low or "alltoall" in low:
        return (n - 1) / n
    return 1.0


def _first_tensor_elems(text: str) -> int:
    """Elements of the first tensor in a recorded ``Input Dims`` text (``[[[1, 2048]], [], ...]`` -> 2048)."""
    try:
        dims = json.loads(text)
    except (ValueError, RecursionError):
        return -1
    stack = [dims]
    while stack:  # depth-first, first tensor wins; bounded by the (small) dims text
        node = stack.pop()
        if isinstance(node, list):
            if node and all(isinstance(x, int) and not isinstance(x, bool) for x in node):
                elems = math.prod(node) if all(x >= 0 for x in node) else -1
                return elems if elems < 2**62 else -1  # a size past int64 is a corrupt record
            stack.extend(reversed(node))
    return -1


def message_elems(trace: Trace, rows: np.ndarray) -> np.ndarray:
    """Message size in elements of each collective row (-1 when unknown).

    Read from the innermost communication host op (see :data:`_COMM_HOST_OP_RE`) with recorded
    input shapes that contains the kernel's launch call on the same host thread.
    """
    out = np.full(rows.size, -1, dtype=np.int64)
    li = trace.launch_idx[rows]
    has_launch = li >= 0
    host = np.flatnonzero(one_of(trace.kind, (Kind.CPU_OP, Kind.ANNOTATION)) & (trace.dims_id >= 0))
    if host.size == 0 or not has_launch.any():
        return out
    uniq = np.unique(trace.name_id[host])
    comm = uniq[np.array([bool(_COMM_HOST_OP_RE.search(str(trace.names[i]))) for i in uniq], dtype=bool)]
    host = host[np.isin(trace.name_id[host], comm)]
    if host.size == 0:
        return out
    q = np.flatnonzero(has_launch)
    q_row = li[q]
    for pid, tid in {(int(p), int(t)) for p, t in zip(trace.pid[q_row], trace.tid[q_row])}:  # loop over threads
        h = host[(trace.pid[host] == pid) & (trace.tid[host] == tid)]  # row order = start order
        sel = q[(trace.pid[q_row] == pid) & (trace.tid[q_row] == tid)]
        if h.size == 0:
            continue
        t = trace.start_ns[li[sel]]
        j = np.searchsorted(trace.start_ns[h], t, side="right") - 1
        ok = j >= 0
        ok[ok] = trace.end_ns[h[j[ok]]] >= t[ok]
        dims = trace.dims_id[h[j[ok]]]
        ud, inv = np.unique(dims, return_inverse=True)
        elems = np.array([_first_tensor_elems(str(trace.names[d])) for d in ud], dtype=np.int64)
        out[sel[ok]] = elems[inv]
    return out


@dataclass(frozen=True)
class CollectiveKind:
    """One group of instances that do the same work: kernel name, device and message size."""

    name: str
    device: int
    message_elems: int  # -1 when unknown
    bus_bytes: int  # -1 when unknown
    count: int
    fastest_us: float  # the work_percentile of the group's durations
    prior_us: float  # CollectiveModel prior for this size
    work_us: float  # the work used for single-rank splits
    source: str  # "fastest-instances" | "cost-model"

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True, eq=False)
class CollectiveWait:
    """Work/wait split of every collective row of one trace (columns over :attr:`rows`)."""

    n_rows: int  # rows of the trace
    rows: np.ndarray  # collective kernel rows, ascending
    work_ns: np.ndarray
    wait_ns: np.ndarray
    source: np.ndarray  # int8 WaitSource per row
    kinds: tuple[CollectiveKind, ...]  # single-rank groups (empty when none)

    def __len__(self) -> int:
        return int(self.rows.size)

    def wait_per_row(self) -> np.ndarray:
        """int64 ``wait_ns`` for every trace row (0 outside collectives): what analyze_trace takes."""
        out = np.zeros(self.n_rows, dtype=np.int64)
        out[self.rows] = self.wait_ns
        return out

    def source_counts(self) -> dict[str, int]:
        """Collective instances per estimate label."""
        counts = np.bincount(self.source.astype(np.int64), minlength=len(WaitSource))
        return {SOURCE_LABEL[WaitSource(i)]: int(c) for i, c in enumerate(counts) if c and i != WaitSource.NONE}

    @property
    def estimate(self) -> str:
        """Which estimates the split used: ``aligned``, ``fastest-instances``, ``cost-model``,
        several joined by ``+`` (most instances first), or ``none`` without collectives."""
        counts = self.source_counts()
        if not counts:
            return "none"
        if set(counts) == {"aligned", "aligned-name"}:
            return "aligned"
        return "+".join(k for k, _ in sorted(counts.items(), key=lambda kv: -kv[1]))

    def warning(self) -> str | None:
        """One line for the per-rank report saying which estimate split the collectives."""
        if len(self) == 0:
            return None
        total = self.wait_ns.sum() / 1e3
        parts = ", ".join(f"{v} {k}" for k, v in self.source_counts().items())
        text = (f"collective wait for peers ({total:,.1f} us over {len(self)} collective kernels) "
                f"estimated by {self.estimate} ({parts})")
        model = [k for k in self.kinds if k.source == "cost-model"]
        if model and WaitSource.MODEL in set(self.source.tolist()):
            k = model[0]
            text += (f"; every instance of {len(model)} collective kind(s) waited (fastest {k.fastest_us:,.1f} us), "
                     f"so their work is the cost-model prior ({k.prior_us:,.1f} us): from this rank alone the "
                     f"split cannot be measured, analyse all ranks together for an exact one")
        return text


def estimate_wait_single(trace: Trace, model: CollectiveModel = DEFAULT_COLLECTIVE_MODEL,
                         n_ranks: int | None = None) -> CollectiveWait:
    """Split every collective of one rank's trace into work and wait from that trace alone.

    Groups are (kernel name, device, message size); see the module docstring for the rule.
    ``n_ranks`` (default: the trace's world size, else 2) scales the prior's bus bytes.
    """
    rows = collective_rows(trace)
    n = n_ranks or trace.world_size or 2
    if rows.size == 0:
        z = np.zeros(0, dtype=np.int64)
        return CollectiveWait(len(trace), rows, z, z, np.zeros(0, dtype=np.int8), ())
    elems = message_elems(trace, rows)
    dur = trace.dur_ns[rows]
    keys = np.stack([trace.name_id[rows].astype(np.int64), trace.device[rows].astype(np.int64), elems])
    uk, inv = np.unique(keys, axis=1, return_inverse=True)
    inv = inv.reshape(-1)
    n_groups = uk.shape[1]
    order = np.lexsort((dur, inv))
    count = np.bincount(inv, minlength=n_groups)
    first = np.concatenate([[0], np.cumsum(count)[:-1]])
    pick = first + np.floor(model.work_percentile / 100.0 * (count - 1)).astype(np.int64)
    fastest = dur[order][pick]  # lower percentile: an observed duration
    names = [str(trace.names[i]) for i in uk[0]]
    width = np.array([element_bytes(s) or DEFAULT_ELEMENT_BYTES for s in names], dtype=float)
    factor = np.array([bus_factor(s, n) for s in names], dtype=float)
    bus_bytes = np.where(uk[2] >= 0, np.rint(uk[2] * width * factor), -1).astype(np.int64)
    prior = model.prior_work_ns(bus_bytes)
    trusted = fastest <= model.trust_factor * prior
    work_g = np.where(trusted, fastest, prior)
    work = np.minimum(work_g[inv], dur)
    src = np.where(trusted, WaitSource.FASTEST, WaitSource.MODEL).astype(np.int8)[inv]
    kinds = tuple(
        CollectiveKind(name=names[g], device=int(uk[1, g]), message_elems=int(uk[2, g]), bus_bytes=int(bus_bytes[g]),
                       count=int(count[g]), fastest_us=round(fastest[g] / 1e3, 3), prior_us=round(prior[g] / 1e3, 3),
                       work_us=round(work_g[g] / 1e3, 3),
                       source=SOURCE_LABEL[WaitSource.FASTEST if trusted[g] else WaitSource.MODEL])
        for g in range(n_groups)  # one per group of identical collectives
    )
    return CollectiveWait(len(trace), rows, work, dur - work, src, kinds)


# ----------------------------------------------------------------------------------------
# All ranks together
# ----------------------------------------------------------------------------------------

def align_steps(steps: Sequence[Steps]) -> tuple[np.ndarray, str]:
    """Match steps across ranks: ``(table, how)``; ``table[i, r]`` is rank r's step index of matched step i.

    By name when every rank's step names are unique (``ProfilerStep#12`` on every rank is the
    same iteration), in the first rank's order; otherwise by position, the shortest rank's count.
    """
    n_r = len(steps)
    if n_r == 0:
        return np.zeros((0, 0), dtype=np.int64), "none"
    unique = all(len(set(s.names)) == len(s.names) for s in steps)
    if unique:
        maps = [{name: i for i, name in enumerate(s.names)} for s in steps]
        common = [name for name in steps[0].names if all(name in m for m in maps[1:])]
        if common:
            table = np.array([[m[name] for m in maps] for name in common], dtype=np.int64)
            return table.reshape(len(common), n_r), "name"
    k = min(len(s) for s in steps)
    return np.repeat(np.arange(k, dtype=np.int64)[:, None], n_r, axis=1), "position"


@dataclass(frozen=True, eq=False)
class RankAlignment:
    """Collective instances matched across ranks; row i of each matrix is one instance, column r one rank.

    ``start_ns``/``end_ns``/``launch_ns`` are on the first rank's clock (each rank's
    ``clock_offset_ns`` removed); ``launch_ns`` is -1 where the launch call is unknown.
    ``end_residual_ns_median``: median distance of a rank's corrected end from the instance's
    median end, the check that matched instances really are one collective.
    """

    step: np.ndarray  # (m,) matched-step position (row of the step table)
    rows: np.ndarray  # (m, R) trace rows
    start_ns: np.ndarray
    end_ns: np.ndarray
    launch_ns: np.ndarray
    wait_ns: np.ndarray  # (m, R)
    work_ns: np.ndarray  # (m, R)
    clock_offset_ns: np.ndarray  # (R,)
    end_residual_ns_median: float
    trusted: bool
    step_table: np.ndarray  # (S, R) from align_steps
    step_match: str

    def __len__(self) -> int:
        return int(self.step.shape[0])


def _instance_keys(trace: Trace, rows: np.ndarray, row_step: np.ndarray, rank_step_to_pos: np.ndarray,
                   name_code: dict[str, int]) -> tuple[np.ndarray, np.ndarray]:
    """(rows in matched steps, key = (step position, name code, occurrence) packed in int64)."""
    pos = np.where(row_step[rows] >= 0, rank_step_to_pos[np.maximum(row_step[rows], 0)], -1)
    rows = rows[pos >= 0]
    pos = pos[pos >= 0]
    code_of_id = np.full(len(trace.names), -1, dtype=np.int64)
    for nid in np.unique(trace.name_id[rows]):  # loop over unique names
        code_of_id[nid] = name_code.setdefault(str(trace.names[nid]), len(name_code))
    code = code_of_id[trace.name_id[rows]]
    order = np.lexsort((trace.start_ns[rows], code, pos))
    rows, pos, code = rows[order], pos[order], code[order]
    grp = np.ones(rows.size, dtype=bool)
    grp[1:] = (pos[1:] != pos[:-1]) | (code[1:] != code[:-1])
    first = np.maximum.accumulate(np.where(grp, np.arange(rows.size), 0))
    occ = np.arange(rows.size) - first
    return rows, (pos << 40) | (code << 20) | occ


def align_ranks(traces: Sequence[Trace], steps: Sequence[Steps], row_steps: Sequence[np.ndarray]) -> RankAlignment:
    """Match every rank's collectives (same matched step, kernel name and occurrence) and split them.

    See the module docstring (``aligned``) for the rule and the clock assumption.
    """
    n_r = len(traces)
    table, how = align_steps(steps)
    name_code: dict[str, int] = {}
    per_rank: list[tuple[np.ndarray, np.ndarray]] = []
    for tr, st, rs, col in zip(traces, steps, row_steps, range(n_r)):  # loop over ranks
        to_pos = np.full(len(st), -1, dtype=np.int64)
        to_pos[table[:, col]] = np.arange(table.shape[0])
        per_rank.append(_instance_keys(tr, collective_rows(tr), rs, to_pos, name_code))
    common = per_rank[0][1] if per_rank else np.zeros(0, dtype=np.int64)
    for _, k in per_rank[1:]:
        common = np.intersect1d(common, k)
    m = common.size
    rows = np.zeros((m, n_r), dtype=np.int64)
    for r, (rr, k) in enumerate(per_rank):
        rows[:, r] = rr[np.searchsorted(k, common)]  # keys are ascending by construction
    start = np.stack([traces[r].start_ns[rows[:, r]] for r in range(n_r)], axis=1) if m else rows.copy()
    end = np.stack([traces[r].end_ns[rows[:, r]] for r in range(n_r)], axis=1) if m else rows.copy()
    li = np.stack([traces[r].launch_idx[rows[:, r]] for r in range(n_r)], axis=1) if m else rows.copy()
    launch = np.stack([np.where(li[:, r] >= 0, traces[r].start_ns[np.maximum(li[:, r], 0)], -1)
                       for r in range(n_r)], axis=1) if m else rows.copy()
    offset = np.rint(np.median(end - end[:, :1], axis=0)).astype(np.int64) if m else np.zeros(n_r, dtype=np.int64)
    start = start - offset
    end = end - offset
    launch = np.where(launch >= 0, launch - offset, -1)
    dur = end - start
    last = start.max(axis=1, keepdims=True) if m else start
    wait = np.clip(last - start, 0, dur)
    work = dur - wait
    if m:
        resid = float(np.median(np.abs(end - np.median(end, axis=1, keepdims=True))))
        trusted = resid <= 0.5 * float(np.median(work))
    else:
        resid, trusted = 0.0, False
    return RankAlignment(step=common >> 40, rows=rows, start_ns=start, end_ns=end, launch_ns=launch, wait_ns=wait,
                         work_ns=work, clock_offset_ns=offset, end_residual_ns_median=resid, trusted=trusted,
                         step_table=table, step_match=how)


def align_waits(traces: Sequence[Trace], alignment: RankAlignment,
                single: Sequence[CollectiveWait]) -> list[CollectiveWait]:
    """Per rank, the split to analyse with: aligned where matched, the rest as the module docstring says.

    ``single`` are the ranks' single-rank estimates; they are returned unchanged when the
    alignment is not trusted or matched nothing.
    """
    if not alignment.trusted or len(alignment) == 0:
        return list(single)
    out = []
    for r, (tr, cw) in enumerate(zip(traces, single)):  # loop over ranks
        work = cw.work_ns.copy()
        src = cw.source.copy()
        pos = np.searchsorted(cw.rows, alignment.rows[:, r])
        work[pos] = alignment.work_ns[:, r]
        src[pos] = WaitSource.ALIGNED
        rest = np.flatnonzero(src != WaitSource.ALIGNED)
        if rest.size:
            a_nid = tr.name_id[alignment.rows[:, r]]
            for nid in np.unique(tr.name_id[cw.rows[rest]]):  # loop over unique names
                got = alignment.work_ns[a_nid == nid, r]
                if got.size:
                    sel = rest[tr.name_id[cw.rows[rest]] == nid]
                    work[sel] = int(np.median(got))
                    src[sel] = WaitSource.ALIGNED_NAME
        dur = tr.dur_ns[cw.rows]
        work = np.minimum(work, dur)
        out.append(CollectiveWait(cw.n_rows, cw.rows, work, dur - work, src, cw.kinds))
    return out
