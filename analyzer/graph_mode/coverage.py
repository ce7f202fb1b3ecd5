"""How much of a trace, and of each step, runs from CUDA graphs; and whether it is a capture trace.

* **Trace mode** (:func:`classify_mode`): ``eager`` (no graph launches), ``graph`` (graph
  launches, and eager kernel launches are at most :data:`RESIDUAL_EAGER_FRACTION` of the kernels
  per step; those are reported as residual eager launches) or ``mixed`` (graph launches plus more
  eager launches in the same steps, as with piecewise graphs or torch.compile graph trees), from
  the per-step medians. A **capture** trace (:func:`detect_capture`) is named ``capture``.
* **Graph coverage of a step** (:func:`step_coverage`): ``full`` when the step launched at least
  one graph and its eager kernels are at most :data:`RESIDUAL_EAGER_FRACTION` of its kernels
  (graph-replayed plus eager); ``piecewise`` when it launched graphs with more eager kernels
  (vLLM's piecewise mode for mixed batches, torch.compile piecewise graphs), or two or more graphs
  chained by eager launches (at least as many eager launches between its first and last graph
  launch as gaps between its graph launches: a model cut at its attention calls whose eager
  attention is a few kernels a layer); ``eager`` when it launched none. When a replay is recorded as one whole-graph op (Nsight Systems' default
  graph-level tracing) its kernels are unknown; such a step is ``piecewise`` when an eager kernel
  was launched between its first and last graph launch, else ``full``.
* **Capture trace**: launches recorded into graphs during stream capture run nothing. A trace is
  a capture trace when it shows capture (``cudaStreamBeginCapture``/``cudaGraphInstantiate`` or
  their HIP/driver names, an engine's capture range such as vLLM's ``capture_32_FULL``, or
  ``torch.cuda.CUDAGraph.capture_begin`` in a ``with_stack`` trace) and at least
  :data:`CAPTURE_UNRUN_FRACTION` of its kernel launches have no GPU op with their correlation id.
  Per graph: the kernel launches between ``BeginCapture`` and ``EndCapture`` on the capturing
  thread (the nodes recorded) and the size the engine's capture range names.
"""
from __future__ import annotations

import re
from dataclasses import asdict, dataclass

import numpy as np

from ..engines import ENGINES
from ..trace import Api, Kind, Trace, one_of

RESIDUAL_EAGER_FRACTION = 0.10
COVERAGES = ("full", "piecewise", "eager")
#: A trace showing capture is a capture trace when at least this share of its kernel launches ran nothing.
CAPTURE_UNRUN_FRACTION = 0.5

_SUFFIX = r"(?:_v\d+|_ptsz|_ptds|_spt)*$"
_BEGIN_CAPTURE_RE = re.compile(r"^(?:cuda|cu|hip)StreamBeginCapture(?:ToGraph)?" + _SUFFIX)
_END_CAPTURE_RE = re.compile(r"^(?:cuda|cu|hip)StreamEndCapture" + _SUFFIX)
_INSTANTIATE_RE = re.compile(r"^(?:cuda|cu|hip)GraphInstantiate(?:WithFlags|WithParams)?" + _SUFFIX)
_PY_CAPTURE_RE = re.compile(r"(?:^|/)torch/cuda/graphs\.py\(\d+\): capture_begin$")


def classify_mode(kernel_launches_per_step: float, graph_launches_per_step: float, kernels_per_step: float,
                  piecewise: bool = False) -> str:
    """``eager`` / ``graph`` / ``mixed`` from per-step launch counts (see the module docstring); ``piecewise``: the
    steps are piecewise by their chain of graphs (:func:`step_coverage`), which makes graph launches ``mixed``."""
    if graph_launches_per_step <= 0:
        return "eager"
    if kernel_launches_per_step <= RESIDUAL_EAGER_FRACTION * max(kernels_per_step, 1.0) and not piecewise:
        return "graph"
    return "mixed"


@dataclass(frozen=True, eq=False)
class StepCoverage:
    """Per step (arrays of length n_steps): ``coverage`` (one of :data:`COVERAGES`) and the counts it
    comes from: ``eager_kernels`` (kernels launched by a kernel launch call) and ``graph_kernels``
    (kernels replayed from graphs) of the step."""

    coverage: list[str]
    eager_kernels: np.ndarray
    graph_kernels: np.ndarray


def step_coverage(trace: Trace, row_step: np.ndarray, n_steps: int) -> StepCoverage:
    """Graph coverage of every step (``row_step``: step of each row, -1 for none)."""
    in_step = row_step >= 0
    kern = np.flatnonzero(in_step & (trace.kind == Kind.KERNEL))  # (the API of kernels' launches only: memory)
    li = trace.launch_idx[kern]
    by_api = np.where(li >= 0, trace.api[np.maximum(li, 0)], Api.NONE)
    k_step = row_step[kern]
    eager = np.bincount(k_step[by_api == Api.KERNEL_LAUNCH], minlength=n_steps)
    graph_k = np.bincount(k_step[by_api == Api.GRAPH_LAUNCH], minlength=n_steps)
    del kern, li, by_api, k_step
    graph_ops = np.bincount(row_step[in_step & (trace.kind == Kind.GRAPH)], minlength=n_steps)
    host = in_step & (trace.kind == Kind.RUNTIME)
    gl_rows = np.flatnonzero(host & (trace.api == Api.GRAPH_LAUNCH))
    graph_launches = np.bincount(row_step[gl_rows], minlength=n_steps)
    # Eager launches between a step's first and last graph launch (only needed for whole-graph ops).
    first = np.full(n_steps, np.iinfo(np.int64).max)
    last = np.full(n_steps, np.iinfo(np.int64).min)
    np.minimum.at(first, row_step[gl_rows], trace.start_ns[gl_rows])
    np.maximum.at(last, row_step[gl_rows], trace.start_ns[gl_rows])
    kl_rows = np.flatnonzero(host & (trace.api == Api.KERNEL_LAUNCH))
    s = row_step[kl_rows]
    between = np.bincount(s[(trace.start_ns[kl_rows] > first[s]) & (trace.start_ns[kl_rows] < last[s])],
                          minlength=n_steps)
    known = eager <= RESIDUAL_EAGER_FRACTION * np.maximum(eager + graph_k, 1)
    # graphs chained by eager work, at least one eager launch per gap between graph launches, however few kernels
    # that is: a transformers model cut at its attention calls runs ~6 eager kernels a layer, 9% of its step
    chain = (graph_launches >= 2) & (between >= graph_launches - 1)
    full = np.where(graph_ops > 0, between == 0, known & ~chain)
    cov = np.where(graph_launches == 0, "eager", np.where(full, "full", "piecewise"))
    return StepCoverage(coverage=[str(c) for c in cov], eager_kernels=eager, graph_kernels=graph_k)


@dataclass(frozen=True)
class CaptureReport:
    """A CUDA-graph capture trace: what was captured.

    ``graphs``: graphs captured (instantiate calls; else capture windows; else capture ranges);
    ``sizes`` / ``modes``: the capture sizes and modes the engine's capture ranges name, per graph
    (``None`` where no range names one); ``nodes_per_graph``: kernel launches recorded between
    each ``BeginCapture`` and ``EndCapture``; ``launches_recorded``: kernel launches that ran
    nothing; ``kernels_run``: kernels that did run (warm-up, eager parts of piecewise capture).
    """

    graphs: int
    sizes: list[int | None]
    modes: list[str | None]
    nodes_per_graph: list[int]
    launches_recorded: int
    kernels_run: int

    def to_dict(self) -> dict:
        return asdict(self)


def _runtime_rows(trace: Trace, pattern: re.Pattern[str]) -> np.ndarray:
    rt = np.flatnonzero(trace.kind == Kind.RUNTIME)
    ids = [i for i in np.unique(trace.name_id[rt]).tolist() if pattern.match(trace.names[i])]
    return rt[np.isin(trace.name_id[rt], ids)]


def _capture_ranges(trace: Trace) -> tuple[np.ndarray, list[int], list[str]]:
    """Annotation rows naming a captured size (any engine's ``CAPTURE_ANNOTATION``), their sizes and modes."""
    ann = np.flatnonzero(trace.kind == Kind.ANNOTATION)
    found: dict[int, tuple[int, str]] = {}
    for nid in np.unique(trace.name_id[ann]).tolist():  # unique names, not events
        for e in ENGINES:
            m = e.CAPTURE_ANNOTATION.match(trace.names[nid]) if e.CAPTURE_ANNOTATION is not None else None
            if m:
                found[nid] = (int(m["size"]), m["mode"])
                break
    rows = ann[np.isin(trace.name_id[ann], list(found))]
    return rows, [found[int(n)][0] for n in trace.name_id[rows]], [found[int(n)][1] for n in trace.name_id[rows]]


def detect_capture(trace: Trace) -> CaptureReport | None:
    """The capture report when ``trace`` is a capture trace (see the module docstring), else ``None``."""
    kl = np.flatnonzero(trace.api == Api.KERNEL_LAUNCH)
    if kl.size == 0:
        return None
    gpu = trace.gpu_mask & (trace.launch_idx >= 0)
    unrun = kl[~np.isin(kl, trace.launch_idx[gpu])]
    if unrun.size < CAPTURE_UNRUN_FRACTION * kl.size:
        return None
    begins, ends = _runtime_rows(trace, _BEGIN_CAPTURE_RE), _runtime_rows(trace, _END_CAPTURE_RE)
    inst = _runtime_rows(trace, _INSTANTIATE_RE)
    cap_rows, cap_sizes, cap_modes = _capture_ranges(trace)
    pc = trace.python_calls
    py_ids = [i for i, n in enumerate(pc.names) if _PY_CAPTURE_RE.search(n)]
    py_capture = int(np.isin(pc.name_id, py_ids).sum()) if py_ids else 0
    if not (begins.size or inst.size or cap_rows.size or py_capture):
        return None
    nodes, sizes, modes = [], [], []
    for b in begins.tolist():  # one iteration per captured graph
        tid, t0 = trace.tid[b], trace.start_ns[b]
        later = ends[(trace.tid[ends] == tid) & (trace.start_ns[ends] >= t0)]
        t1 = trace.end_ns[later].min() if later.size else np.iinfo(np.int64).max
        on = kl[(trace.tid[kl] == tid) & (trace.start_ns[kl] >= t0) & (trace.start_ns[kl] <= t1)]
        nodes.append(int(on.size))
        inside = [i for i, r in enumerate(cap_rows.tolist()) if trace.start_ns[r] <= t0 <= trace.end_ns[r]]
        sizes.append(cap_sizes[inside[-1]] if inside else None)
        modes.append(cap_modes[inside[-1]] if inside else None)
    graphs = int(inst.size or begins.size or cap_rows.size or py_capture)
    if not begins.size:  # no capture windows: what the capture ranges say, one graph each
        sizes, modes = list(cap_sizes), list(cap_modes)
    kernels_run = int(np.count_nonzero(trace.kind == Kind.KERNEL))
    return CaptureReport(graphs=graphs, sizes=sizes, modes=modes, nodes_per_graph=nodes,
                         launches_recorded=int(unrun.size), kernels_run=kernels_run)


#: Inductor's generated kernel names (pointwise, reduction, persistent reduction, template, mm).
_INDUCTOR_KERNEL_RE = re.compile(r"^triton_(?:poi|red|per|tem|mm|bmm)_")
#: A torch.compile region (Dynamo's annotation of a compiled frame).
_COMPILED_REGION_RE = re.compile(r"^Torch-Compiled Region")
#: CUDA graph trees (torch.compile ``mode="reduce-overhead"``), as torch 2.x records them
#: (torch/_inductor/cudagraph_trees.py): ``cudagraphify.get_container (dynamo_timed)`` (and
#: ``CUDAGraphNode.record``) as cpu_ops through dynamo_timed's _RecordFunctionFast on a shape's first
#: calls; in a ``with_stack`` trace the tree manager's Python frames (``torch/_inductor/cudagraph_trees.py(N):
#: run_eager``, ``deferred_cudagraphify``) on every call, replayed or not.
_GRAPH_TREES_RE = re.compile(r"torch/_inductor/cudagraph_trees\.py|^CUDAGraphTreeManager|^CUDAGraphNode\.|cudagraphify")
#: Share of a trace's kernels Inductor must have generated for its kernels alone to name it compiled.
INDUCTOR_KERNEL_SHARE = 0.10


def graph_trees_marker(trace: Trace) -> str | None:
    """The first host range or Python frame (by name) that shows CUDA graph trees ran, None when none does."""
    names = trace.names
    ids = np.flatnonzero(trace.name_counts(one_of(trace.kind, (Kind.ANNOTATION, Kind.CPU_OP)))).tolist()
    found = sorted(names[i] for i in ids if _GRAPH_TREES_RE.search(names[i]))
    found += sorted(n for n in trace.python_calls.names if _GRAPH_TREES_RE.search(n))
    return found[0] if found else None


def compile_evidence(trace: Trace) -> list[str]:
    """What shows that torch.compile ran in a trace, in words (empty: nothing does).

    Evidence: ``Torch-Compiled Region`` ranges; Inductor-generated Triton kernels (``triton_poi_...``,
    ``triton_red_...``) being at least :data:`INDUCTOR_KERNEL_SHARE` of the kernels; CUDA graph trees
    (``mode="reduce-overhead"``, :func:`graph_trees_marker`) in the host ranges or Python frames. The caller
    names a trace without graph launches ``compiled`` when there is any; graph trees without a replay mean
    reduce-overhead replayed nothing in the trace.
    """
    out: list[str] = []
    names = trace.names
    counts = trace.name_counts(one_of(trace.kind, (Kind.ANNOTATION, Kind.CPU_OP)))
    ids = np.flatnonzero(counts)
    region = sum(int(c) for i, c in zip(ids.tolist(), counts[ids].tolist()) if _COMPILED_REGION_RE.match(names[i]))
    if region:
        out.append(f"{region} Torch-Compiled Region range{'s' if region != 1 else ''}")
    k_counts = trace.name_counts(trace.kind == Kind.KERNEL)
    k_ids = np.flatnonzero(k_counts)
    n_kern = int(k_counts.sum())
    inductor = sum(int(c) for i, c in zip(k_ids.tolist(), k_counts[k_ids].tolist()) if _INDUCTOR_KERNEL_RE.match(names[i]))
    if n_kern and inductor >= INDUCTOR_KERNEL_SHARE * n_kern:
        out.append(f"{inductor} of {n_kern} kernels generated by Inductor (triton_*)")
    marker = graph_trees_marker(trace)
    if marker and out:
        out.append(f'CUDA graph trees (mode="reduce-overhead") ran ({marker}) but no graph was replayed')
    return out
