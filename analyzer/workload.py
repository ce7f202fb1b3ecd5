"""Workload identity: which model (on which device, which rank) a trace ran.

Capture plans, fleet plans and eager-vs-graph pairs only make sense within one workload: a
12-layer and a 32-layer model at batch size 8 are not one "batch size 8". A trace's
**workload** is computed from its kernels alone, so an eager trace and a graph trace of the
same model (a replay shows the same kernel names) get the same one:

* **kernel families** that run in at least half of the steps (a serving engine's occasional kernels, such as
  vLLM's prefill input preparation when requests arrive, leave a decode trace and one with arrivals of the same
  server one workload): each kernel name is folded to a family that does not change with the batch size. GEMM library kernels (cuBLAS ``nvjet_*``/``sm90_xmma_*``,
  CUTLASS, split-K reduces) become ``gemm`` and attention kernels (flash, cuDNN SDPA,
  FMHA, softmax) ``attention`` because the library picks another tile or split per shape; ATen's
  elementwise, index and gather kernels become ``elementwise`` because ATen picks a
  vectorised or unrolled variant (or gather instead of index_select) by alignment and
  size; NCCL and custom all-reduce kernels become ``collective`` (the algorithm, ring or
  tree, LL or simple, follows the message size); Triton kernels become ``triton``. Any other
  name keeps its identifier without namespaces or template arguments (``reduce_kernel``,
  ``CatArrayBatchedCopy``). Runtime-internal kernels (``memcpy32_post`` of graph replays, the
  driver's own ``memcpy128``-style copy kernels, which run at some transfer sizes only: OLMoE's graph at batch 64
  runs one, at 8 none) are left out, and so are the engines' request-state kernels
  (:data:`launchgap.engines.STATE_KERNELS`: vLLM's V2 runner writes staged request state when requests arrive,
  finish or take a KV block, in most steps of a server with traffic and in none of a constant batch).
  ``families_hash`` is a hash of the sorted distinct families.
* **structural kernels per step**: the median over steps of the kernels that are neither
  ``gemm`` nor ``attention`` nor internal. On the H200 harness traces the total kernel
  count changes with the batch size (1b: 737 at batch 1 and 64, 721 at 256; 8b: 1,489 vs
  1,457: one split-K reduce per layer more or less) while this count does not (640 and
  1,264 at every size, eager and graph). It is binned in eighths of an octave
  (``count_bin = round(8 log2 n)``, bins about 9% wide), so a kernel or two more or less
  does not split a model; models with a different layer count (tiny 4, 70b-slice 8, 1b 16,
  8b 32 layers) land bins apart.
* the **device** name (the GPU that ran most kernels), and the **rank** and world size of
  a tensor-parallel trace (``distributedInfo``, else a ``rank`` token in the file name).

``id`` is ``wl-`` and 8 hex digits of a hash of those fields (the binned count, not the count);
``label`` says them in words (with this trace's own counts).
Limits: two models of the same code and layer count but other widths share a workload (the
GEMM tiles that would tell them apart also change with the batch size); a torch.compile'd
model is another workload than its eager self (other kernels); an eager vLLM server's traces at
other contexts can be two (its FlashAttention 3 zeroes a buffer per layer, ATen's ``FillFunctor``, where it does not
split the KV cache and runs a combine kernel per layer where it does: a 3B model at batch 16, 149 structural kernels
a step against 121; leaving the zero-fills out instead merged models that they tell apart, docs/metrics.md).
"""
from __future__ import annotations

import hashlib
import math
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Generic, TypeVar

import numpy as np

from .costmodel import KERNEL_CLASSES, classify_kernels
from .engines import STATE_KERNELS
from .errors import InputError
from .gpus import device_name
from .trace import Kind, Trace, kernel_base_name

#: Kernel families whose count per step follows the batch size (library tile and split choices).
VARIABLE_FAMILIES = ("gemm", "attention")
#: Bins per octave of the structural kernel count.
BINS_PER_OCTAVE = 8

_INTERNAL = re.compile(r"^(?:mem(?:cpy|set)\d*(?:_post)?\b|cudaGraph|__cudart)", re.I)
_COLLECTIVE = re.compile(r"nccl|rccl|all_?reduce|reduce_?scatter|all_?gather|all_?to_?all|cross_device_reduce"
                         r"|custom_?ar|one_?shot|two_?shot|multimem", re.I)
_GEMM = re.compile(r"gemm|gemv|nvjet|cublas|cutlass|xmma|splitkreduce|matmul|dot_kernel"
                   r"|^(?:void )?(?:sm\d\d|ampere|volta|turing|hopper|blackwell)_", re.I)
_ATTENTION = re.compile(r"flash|fmha|sdpa|attention|attn|paged|mha_|softmax", re.I)
_ELEMENTWISE = re.compile(r"elementwise|index|gather|scatter|vectorized_|unrolled_", re.I)
_TRITON = re.compile(r"^triton_|triton", re.I)
#: A rank token in a file name: ``_rank0``, ``rank-1``, ``rank1.``, ``rank_3``, ``RANK2``.
RANK_NAME_REGEX = r"(?i)(?<![a-z0-9])rank[_\-.]?(\d+)(?![0-9])"
_RANK_RE = re.compile(RANK_NAME_REGEX)


def rank_from_name(path: str | Path) -> int | None:
    """Rank written in a file name (the last rank token), else None."""
    found = _RANK_RE.findall(Path(path).name)
    return int(found[-1]) if found else None


def trace_rank(trace: Trace) -> int | None:
    """A trace's rank: Kineto ``distributedInfo`` first (the process wrote it), else the file name."""
    return trace.rank if trace.rank is not None else rank_from_name(trace.path)


def kernel_family(name: str) -> str | None:
    """The batch-size-independent family of one kernel name (see the module docstring); None = not the model's work
    (runtime-internal, or a serving engine's request-state kernel)."""
    if _INTERNAL.search(name):
        return None
    # the kernel's own name: a return type may hold parentheses (std::enable_if<(((8)>(0)))..., void>::type
    # vllm::fused_add_rms_norm_kernel<...>(...) is fused_add_rms_norm_kernel, not enable_if)
    own = kernel_base_name(name).rsplit("::", 1)[-1]
    if STATE_KERNELS is not None and STATE_KERNELS.search(own):
        return None
    if _COLLECTIVE.search(name):
        return "collective"
    if _ATTENTION.search(name):  # before GEMM: CUTLASS FMHA kernels name cutlass too
        return "attention"
    if _GEMM.search(name):
        return "gemm"
    if _TRITON.search(name):
        return "triton"
    if _ELEMENTWISE.search(name):
        return "elementwise"
    # Size variants of one kernel: CatArrayBatchedCopy_vectorized / _contig / _aligned16 ...
    s = re.sub(r"(?:_(?:vectorized|contig|aligned[0-9A-Za-z]*|unrolled|small|large|\d+))+$", "", own)
    return s or "unnamed"


@dataclass(frozen=True)
class Workload:
    """One workload: model signature, device and rank (see the module docstring).

    ``kernels_per_step``: median kernels per step (all of them); ``structural_kernels_per_step``:
    median per step of the kernels outside :data:`VARIABLE_FAMILIES`; ``count_bin``: its bin.
    """

    id: str
    label: str
    device: str
    kernels_per_step: float
    structural_kernels_per_step: float
    count_bin: int
    families: tuple[str, ...]
    families_hash: str
    rank: int | None = None
    world_size: int | None = None

    def to_dict(self) -> dict:
        d = asdict(self)
        d["families"] = list(self.families)
        return d

    @classmethod
    def from_dict(cls, d: Mapping) -> Workload:
        """Back from :meth:`to_dict` (e.g. a fleet results line)."""
        return cls(id=str(d["id"]), label=str(d["label"]), device=str(d["device"]),
                   kernels_per_step=float(d["kernels_per_step"]),
                   structural_kernels_per_step=float(d["structural_kernels_per_step"]),
                   count_bin=int(d["count_bin"]), families=tuple(str(f) for f in d["families"]),
                   families_hash=str(d["families_hash"]),
                   rank=None if d.get("rank") is None else int(d["rank"]),
                   world_size=None if d.get("world_size") is None else int(d["world_size"]))


def count_bin(n: float) -> int:
    """Bin of a kernel count: ``round(8 log2 n)`` (0 for no kernels)."""
    return int(round(BINS_PER_OCTAVE * math.log2(n))) if n >= 1 else 0


def _hash(text: str, n: int) -> str:
    return hashlib.sha1(text.encode("utf-8")).hexdigest()[:n]


#: The GPU model in a device name (``NVIDIA H100 80GB HBM3`` -> ``H100``, ``AMD Instinct MI300X`` -> ``MI300X``).
_GPU_MODEL = re.compile(r"\b(GB\d{3}|[HBL]\d{2,3}[A-Z]?|A\d{2,3}[A-Z]?|V100|T4|MI\d{3}[A-Z]*|RTX ?\w+)\b")


def gpu_short_name(name: str) -> str:
    """The GPU model a device name names (``H100``, ``MI300X``), else the name itself."""
    m = _GPU_MODEL.search(name)
    return m.group(1) if m else name


#: Ops whose second input is a weight matrix, by preference: the first present is counted (aten::linear
#: calls matmul/mm inside it; counting one kind counts each weight once).
_WEIGHT_OPS = (("aten::linear", 1), ("aten::addmm", 2), ("aten::mm", 1))
_FAMILY_RES = (re.compile(r"(?:^|/)models/(?P<f>[a-z][a-z0-9_]*)\.py"), re.compile(r"modeling_(?P<f>[a-z][a-z0-9_]*)\.py"),
               re.compile(r"^nn\.Module: (?P<f>[A-Z][A-Za-z0-9]*?)ForCausalLM"))


def _weight_elems(dims_text: str, arg: int) -> int:
    """Elements of the 2-D weight an op's Input Dims text names at ``arg`` (0 when it is not a 2-D shape)."""
    shapes = re.findall(r"\[([0-9, ]*)\]", dims_text)
    if len(shapes) <= arg:
        return 0
    d = [int(x) for x in shapes[arg].split(",") if x.strip()]
    return d[0] * d[1] if len(d) == 2 else 0


#: Fewer weight elements per step than this name no model class (not a language model's decoder).
MIN_MODEL_PARAMS = 1e8


def model_class(trace: Trace, row_step: np.ndarray) -> str | None:
    """``"Llama ~70B-class"``: the parameters one step's matrix multiplies read (the weights of every layer and
    the LM head, from the ops' recorded Input Dims; times the tensor-parallel world size: each rank holds a
    shard), rounded to a model class, with the family a Python frame or module names. ``None`` without
    recorded shapes (``record_shapes`` off); a mixture of experts (MoE kernels or grouped expert GEMMs,
    :func:`launchgap.costmodel.classify_kernels`: its experts are not linear ops) is named ``MoE`` without a size; under :data:`MIN_MODEL_PARAMS` only the family is named.
    The label only: the workload id does not depend on it."""
    cpu = (trace.kind == Kind.CPU_OP) & (row_step >= 0) & (trace.dims_id >= 0)  # a mask: millions of CPU ops
    ids = np.flatnonzero(trace.name_counts(cpu))
    if ids.size == 0:
        return None
    names = trace.names
    for op, arg in _WEIGHT_OPS:  # a handful of op names
        hit = [i for i in ids.tolist() if names[i] == op]
        if hit:
            break
    else:
        return None
    rows = np.flatnonzero(cpu & trace.named(hit))
    del cpu
    ud, inv = np.unique(trace.dims_id[rows], return_inverse=True)
    elems = np.array([_weight_elems(str(names[d]), arg) for d in ud.tolist()], dtype=float)[inv]
    per_step = np.bincount(row_step[rows], weights=elems)
    per_step = per_step[per_step > 0]
    if per_step.size == 0:
        return None
    params = float(np.median(per_step)) * max(trace.world_size or 1, 1)
    b = params / 1e9
    size = f"{b:.0f}B" if b >= 10 else f"{b:.1f}B" if b >= 1 else f"{params / 1e6:.0f}M"
    kern = np.flatnonzero(trace.name_counts(trace.kind == Kind.KERNEL))
    # experts run outside aten::linear (fused MoE kernels, or grouped GEMMs the cost model classes as experts):
    # the linear ops' parameters are then the dense part only, no model class
    moe = any("moe" in str(names[i]).lower() for i in kern.tolist()) or \
        bool((classify_kernels(names[kern]) == KERNEL_CLASSES.index("expert")).any())
    family = None
    texts = [str(x) for x in trace.python_calls.names] + [str(names[i]) for i in np.flatnonzero(
        trace.name_counts(trace.kind == Kind.CPU_OP)).tolist() if str(names[i]).startswith("nn.Module")]
    for rx in _FAMILY_RES:
        for t in texts:  # distinct names
            m = rx.search(t)
            if m and m["f"] not in ("utils", "interfaces", "registry"):
                family = m["f"].replace("_", " ").title().replace(" ", "")
                break
        if family:
            break
    if moe:
        return f"{family + ' ' if family else ''}MoE"
    if params < MIN_MODEL_PARAMS:  # a vision model's classifier head, not a language model's weights
        return family
    return f"{family + ' ' if family else ''}~{size}-class"


def _rank_suffix(rank: int | None, world_size: int | None) -> str:
    """The label's rank part: none without a rank, nor for the one rank of a world of 1 (a lone GPU)."""
    if rank is None or world_size == 1:
        return ""
    return f" · rank {rank}" + (f" of {world_size}" if world_size else "")


def shared_label(w: Workload) -> str:
    """The label of a rank's workload without its rank: what the job's ranks have in common."""
    suffix = _rank_suffix(w.rank, w.world_size)
    return w.label[:-len(suffix)] if suffix and w.label.endswith(suffix) else w.label


def tp_job(w: Workload | None) -> Workload | None:
    """The workload of the tensor-parallel job a rank's workload belongs to: the same model signature, device and
    world size on every rank (``rank`` ``None``, an id of its own, the label without the rank and with ``all
    ranks``). A tensor-parallel server captures one list on every rank, so a plan is the job's, not a rank's. A
    workload of no rank, or of a world of one, is its own job."""
    if w is None or w.rank is None or not w.world_size or w.world_size < 2:
        return w
    wid = "wl-" + _hash(f"{w.families_hash}|{w.count_bin}|{w.device}|*/{w.world_size}", 8)
    return replace(w, id=wid, label=f"{shared_label(w)} · all ranks", rank=None)


def make_workload(*, device: str, kernels_per_step: float, structural_kernels_per_step: float,
                  families: Iterable[str], rank: int | None = None, world_size: int | None = None,
                  model: str | None = None) -> Workload:
    """A :class:`Workload` from its fields (id and label derived here, the one place they are made)."""
    fams = tuple(sorted(set(families)))
    fhash = _hash("\n".join(fams), 12)
    cbin = count_bin(structural_kernels_per_step)
    dev = device or "unknown GPU"
    tp = f"{rank}/{world_size or '?'}" if rank is not None else "-"
    wid = "wl-" + _hash(f"{fhash}|{cbin}|{dev}|{tp}", 8)
    label = (f"{model + ' · ' if model else ''}{gpu_short_name(dev)}"
             f"{f' · TP{world_size}' if world_size and world_size > 1 else ''} · "
             f"{kernels_per_step:,.0f} kernels/step ({structural_kernels_per_step:,.0f} besides GEMM/attention)")
    label += _rank_suffix(rank, world_size)
    return Workload(id=wid, label=label, device=dev, kernels_per_step=float(kernels_per_step),
                    structural_kernels_per_step=float(structural_kernels_per_step), count_bin=cbin,
                    families=fams, families_hash=fhash, rank=rank, world_size=world_size)


def workload_of(trace: Trace, row_step: np.ndarray) -> Workload:
    """The workload of a trace whose rows are assigned to steps (``row_step``, -1 = outside any step).

    Without steps (no row assigned) the whole trace counts as one step.
    """
    kern = trace.kind == Kind.KERNEL
    in_step = kern & (row_step >= 0)
    if in_step.any():
        rows = np.flatnonzero(in_step)
        step = row_step[rows]
    else:
        rows = np.flatnonzero(kern)
        step = np.zeros(rows.size, dtype=np.int64)
    # bincounts, not sorts: name ids, step indices and devices are small non-negative integers.
    nid = trace.name_id[rows]
    uniq = np.flatnonzero(np.bincount(nid, minlength=len(trace.names)))
    fam = [kernel_family(str(trace.names[u])) for u in uniq.tolist()]  # one per distinct kernel name
    counted_by_name = np.zeros(len(trace.names), dtype=bool)
    counted_by_name[uniq] = [f is not None and f not in VARIABLE_FAMILIES for f in fam]
    total = np.bincount(step, minlength=1)
    structural = np.bincount(step[counted_by_name[nid]], minlength=total.size)
    has = total > 0  # steps that ran kernels
    n_steps = int(has.sum())
    total, structural = total[has], structural[has]
    families = _common_families(nid, step, uniq, fam, len(trace.names))
    # The device that ran most of the kernels names the workload's GPU.
    dev_n = np.bincount(trace.device[rows].astype(np.int64) + 1) if rows.size else np.zeros(1, dtype=np.int64)
    dev = int(np.argmax(dev_n)) - 1 if rows.size else -1
    rank = trace_rank(trace)
    return make_workload(device=device_name(trace, dev),
                         kernels_per_step=float(np.median(total)) if n_steps else 0.0,
                         structural_kernels_per_step=float(np.median(structural)) if n_steps else 0.0,
                         families=families, rank=rank, world_size=trace.world_size, model=model_class(trace, row_step))


def _common_families(nid: np.ndarray, step: np.ndarray, uniq: np.ndarray, fam: list[str | None], n_names: int
                     ) -> set[str]:
    """The families that run in at least half of the steps that ran kernels: a serving engine runs some kernels in a
    few steps only (vLLM's V2 runner prepares prefill inputs and writes staged request state when requests arrive), so
    a trace of decode alone and one with arrivals of the same server are one workload."""
    names = sorted({f for f in fam if f is not None})
    if not names:
        return set()
    index = {f: i for i, f in enumerate(names)}
    fam_of_name = np.full(n_names, -1, dtype=np.int64)
    fam_of_name[uniq] = [index[f] if f is not None else -1 for f in fam]
    f = fam_of_name[nid]
    ok = f >= 0
    n_slots = int(step.max()) + 1  # step indices, steps without kernels among them
    pairs = np.unique(f[ok] * n_slots + step[ok])  # each (family, step) once
    steps_with = np.bincount(pairs // n_slots, minlength=len(names))
    n_steps = np.unique(step).size
    return {name for name, k in zip(names, steps_with.tolist()) if 2 * k >= n_steps}


T = TypeVar("T")


@dataclass(frozen=True)
class WorkloadGroup(Generic[T]):
    """Items (reports, dashboard entries, fleet rows) of one workload, in input order.

    ``workload`` is None for items that carry no workload (e.g. fleet results written before
    workloads existed): they form one group of their own.
    """

    workload: Workload | None
    items: list[T]

    @property
    def id(self) -> str:
        return self.workload.id if self.workload is not None else "unknown"

    @property
    def label(self) -> str:
        return self.workload.label if self.workload is not None else UNKNOWN_LABEL


def group_by_workload(items: Sequence[T], workload: Callable[[T], Workload | None],
                      ranks_together: bool = False) -> list[WorkloadGroup[T]]:
    """Items grouped by workload id, groups in order of first appearance; ``ranks_together``: the ranks of one
    tensor-parallel job in one group (:func:`tp_job`: what a capture plan is for)."""
    groups: dict[str, WorkloadGroup[T]] = {}
    for it in items:  # one per trace
        w = tp_job(workload(it)) if ranks_together else workload(it)
        key = w.id if w is not None else "unknown"
        if key not in groups:
            groups[key] = WorkloadGroup(w, [])
        groups[key].items.append(it)
    return list(groups.values())


#: What a workload without a kernel signature is called where a user reads it.
UNKNOWN_LABEL = "unknown workload (no kernel signature)"


def display_names(workloads: Iterable[Workload | None]) -> dict[str, str]:
    """What a user reads for each workload, by id: its label, with the id after it only where two workloads
    share a label (the id is the key, for JSON and ``--workload``; people read labels). None is ``unknown``."""
    labels = {(w.id if w is not None else "unknown"): (w.label if w is not None else UNKNOWN_LABEL)
              for w in workloads}
    count: dict[str, int] = {}
    for lab in labels.values():
        count[lab] = count.get(lab, 0) + 1
    return {i: lab if count[lab] == 1 else f"{lab} ({i})" for i, lab in labels.items()}


def pick_workload(groups: Sequence[WorkloadGroup[T]], wanted: str) -> WorkloadGroup[T]:
    """The group whose id is ``wanted`` (or starts with it, when that is unambiguous); else :class:`InputError`
    naming the workloads there are."""
    exact = [g for g in groups if g.id == wanted]
    hits = exact or [g for g in groups if wanted and g.id.startswith(wanted)]
    if len(hits) == 1:
        return hits[0]
    have = "; ".join(f"{g.id} ({g.label}, {len(g.items)} trace(s))" for g in groups) or "none"
    why = "matches several workloads" if hits else "is not among the traces' workloads"
    raise InputError(f"--workload {wanted!r} {why}: {have}")


def mix_warning(groups: Sequence[WorkloadGroup]) -> str | None:
    """A sentence for the user when items of several workloads would be pooled; None for one workload."""
    if len(groups) < 2:
        return None
    names = display_names(g.workload for g in groups)
    parts = ", ".join(f"{names[g.id]} ({len(g.items)} trace(s))" for g in groups)
    return (f"the traces hold {len(groups)} different workloads (models, devices or ranks): {parts}; "
            f"their costs and batch sizes are not pooled")
