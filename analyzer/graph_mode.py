"""How much of a trace, and of each step, runs from CUDA graphs; and whether it is a capture trace.

* **Trace mode** (:func:`classify_mode`): ``eager`` (no graph launches), ``graph`` (graph
  launches, and eager kernel launches are at most :data:`RESIDUAL_EAGER_FRACTION` of the kernels
  per step; those are reported as residual eager launches) or ``mixed`` (graph launches plus more
  eager launches in the same steps, as with piecewise graphs or torch.compile graph trees), from
  the per-step medians. A **capture** trace (:func:`detect_capture`) is named ``capture``.
* **Graph coverage of a step** (:func:`step_coverage`): ``full`` when the step launched at least
  one graph and its eager kernels are at most :data:`RESIDUAL_EAGER_FRACTION` of its kernels
  (graph-replayed plus eager); ``piecewise`` when it launched graphs with more eager kernels
  (vLLM's piecewise mode for mixed batches, torch.compile piecewise graphs); ``eager`` when it
  launched none. When a replay is recorded as one whole-graph op (Nsight Systems' default
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

from .engines import ENGINES
from .trace import Api, Kind, Trace

RESIDUAL_EAGER_FRACTION = 0.10
COVERAGES = ("full", "piecewise", "eager")
#: A trace showing capture is a capture trace when at least this share of its kernel launches ran nothing.
CAPTURE_UNRUN_FRACTION = 0.5

_SUFFIX = r"(?:_v\d+|_ptsz|_ptds|_spt)*$"
_BEGIN_CAPTURE_RE = re.compile(r"^(?:cuda|cu|hip)StreamBeginCapture(?:ToGraph)?" + _SUFFIX)
_END_CAPTURE_RE = re.compile(r"^(?:cuda|cu|hip)StreamEndCapture" + _SUFFIX)
_INSTANTIATE_RE = re.compile(r"^(?:cuda|cu|hip)GraphInstantiate(?:WithFlags|WithParams)?" + _SUFFIX)
_PY_CAPTURE_RE = re.compile(r"(?:^|/)torch/cuda/graphs\.py\(\d+\): capture_begin$")


def classify_mode(kernel_launches_per_step: float, graph_launches_per_step: float, kernels_per_step: float) -> str:
    """``eager`` / ``graph`` / ``mixed`` from per-step launch counts (see the module docstring)."""
    if graph_launches_per_step <= 0:
        return "eager"
    if kernel_launches_per_step <= RESIDUAL_EAGER_FRACTION * max(kernels_per_step, 1.0):
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
    li = trace.launch_idx
    by_api = np.where(li >= 0, trace.api[np.maximum(li, 0)], Api.NONE)
    kern = in_step & (trace.kind == Kind.KERNEL)
    eager = np.bincount(row_step[kern & (by_api == Api.KERNEL_LAUNCH)], minlength=n_steps)
    graph_k = np.bincount(row_step[kern & (by_api == Api.GRAPH_LAUNCH)], minlength=n_steps)
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
    full = np.where(graph_ops > 0, between == 0, known)
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


# --- Graph-mode serving: capture sizes, buckets, padding, fallbacks ---------------------------------

#: Where a step marker writes the padded size its graph replays (``decode_step[bs=37 bucket=48 graph]``,
#: ``padded_bs=48``, ``graph_bs=48``): group 1 is the size.
BUCKET_REGEX = re.compile(r"(?i)\b(?:bucket|padded_(?:bs|batch(?:_size)?)|graph_bs|cuda_graph_bs)\s*[=:]\s*(\d+)")
#: A step marker that names its step eager (``decode_step[bs=19 eager]``, ``mode=eager``, ``cudagraph=NONE``).
EAGER_MARKER_REGEX = re.compile(r"(?i)(?:\beager\b|cudagraph(?:_mode|_runtime_mode)?\s*[=:]\s*none\b)")
#: Host work that shows a step was slowed by (re)compilation: torch.compile's frame conversion or Inductor's compile.
_COMPILE_RE = re.compile(r"(?:^|/)torch/_(?:dynamo/convert_frame|inductor/compile_fx)\.py\(\d+\)|"
                         r"^(?:TorchDynamo Cache Lookup miss|Torch-Compiled Region: compile)")
#: Sources of a capture list (``summary.capture_sizes_source``).
CAPTURE_SOURCES = ("flag", "engine", "inferred")


def marker_buckets(names: list[str]) -> np.ndarray:
    """Per step name the padded size its marker writes (:data:`BUCKET_REGEX`), -1 where none."""
    out = np.full(len(names), -1, dtype=np.int64)
    cache: dict[str, int] = {}
    for i, n in enumerate(names):  # one regex per step name (a report row), not per event
        if n not in cache:
            m = BUCKET_REGEX.search(n)
            cache[n] = int(m.group(1)) if m else -1
        out[i] = cache[n]
    return out


def resolve_capture_sizes(flag: tuple[int, ...] | None, marker_sizes: np.ndarray, engine_sizes: list[int] | None,
                          graph_batches: np.ndarray) -> tuple[list[int] | None, str | None]:
    """The capture list and where it came from, in order of preference.

    ``flag``: the user's ``--capture-sizes`` (``"flag"``); else the sizes the steps' markers write
    (``marker_sizes``, -1 for none) or, when none does, ``engine_sizes`` (the serving engine's
    default list for its version): ``"engine"``; else the batch sizes of the trace's own graph steps
    (``graph_batches``): ``"inferred"`` (a lower bound of the real list: only sizes that ran are
    seen); else ``(None, None)``.
    """
    if flag:
        return sorted({int(x) for x in flag}), "flag"
    known = marker_sizes[marker_sizes > 0]
    if known.size:
        return sorted({int(x) for x in known.tolist()}), "engine"
    if engine_sizes:
        return sorted(engine_sizes), "engine"
    g = graph_batches[graph_batches > 0]
    if g.size:
        return sorted({int(x) for x in g.tolist()}), "inferred"
    return None, None


def smallest_size_at_least(batch: np.ndarray, sizes: list[int] | None) -> np.ndarray:
    """Per batch the smallest captured size ``>= batch`` (-1 above the largest, unknown batch or no list)."""
    batch = np.asarray(batch, dtype=np.int64)
    if not sizes:
        return np.full(batch.shape, -1, dtype=np.int64)
    s = np.asarray(sorted(sizes), dtype=np.int64)
    j = np.searchsorted(s, batch, side="left")
    ok = (batch > 0) & (j < s.size)
    return np.where(ok, s[np.minimum(j, s.size - 1)], -1)


@dataclass(frozen=True, eq=False)
class ServingSteps:
    """Per step (arrays of length n_steps) what graph-mode serving made of it.

    * ``bucket``: the captured size a graph step replays — the padded size its marker writes, else
      the smallest captured size ``>= batch``; -1 for eager steps and unknown batches;
    * ``padded_rows``: ``bucket - batch`` for graph steps (-1 where the bucket is unknown);
    * ``fallback``: an eager decode step although a captured size ``>= batch`` exists;
    * ``uncaptured``: an eager decode step whose batch is above every captured size;
    * ``fallback_bucket``: the bucket a fallback step should have replayed (-1 otherwise).
    """

    bucket: np.ndarray
    padded_rows: np.ndarray
    fallback: np.ndarray
    uncaptured: np.ndarray
    fallback_bucket: np.ndarray


def serving_steps(coverage: list[str], batch: np.ndarray, decode: np.ndarray, marker_bucket: np.ndarray,
                  sizes: list[int] | None) -> ServingSteps:
    """Buckets, padded rows and fallbacks of every step (see :class:`ServingSteps`).

    ``coverage``: each step's graph coverage; ``batch``: its batch size (-1 unknown); ``decode``:
    whether it is a decode step (or of unknown phase): prefill and mixed steps are neither padded nor
    fallbacks; ``marker_bucket``: the padded size its marker writes (-1 none); ``sizes``: the capture list.
    """
    cov = np.asarray(coverage, dtype=object)
    graph = (cov == "full") | (cov == "piecewise")
    batch = np.asarray(batch, dtype=np.int64)
    looked_up = smallest_size_at_least(batch, sizes)
    bucket = np.where(graph & decode & (marker_bucket > 0), marker_bucket, np.where(graph & decode, looked_up, -1))
    padded = np.where((bucket > 0) & (batch > 0), bucket - batch, -1)
    eager = (cov == "eager") & decode & (batch > 0) & bool(sizes)
    fallback = eager & (looked_up > 0)
    return ServingSteps(bucket=bucket, padded_rows=padded, fallback=fallback, uncaptured=eager & (looked_up < 0),
                        fallback_bucket=np.where(fallback, looked_up, -1))


@dataclass(frozen=True)
class CostCurve:
    """A FULL-graph step's cost (us) against batch size: ``sizes`` ascending, ``us`` at each, and
    where each point came from: ``"timings"`` (harness timings, unprofiled), ``"graph steps"`` (the
    trace's graph steps of that bucket: their kernels ran at the bucket's size) or ``"eager steps"``
    (the trace's eager steps of that batch: their kernels ran at the batch's size), the trace's steps
    each as its predicted FULL-graph step (``predicted_graph_us``: GPU busy plus replay cost, which
    the profiler does not inflate as it inflates a profiled replay's own gaps).

    :meth:`at` interpolates linearly between points and holds the end values outside them;
    :meth:`at_next` / :meth:`at_prev` give the step values (flat up to the next point / from the
    previous one) that bound a size between two points when the cost rises with batch size.
    """

    sizes: np.ndarray
    us: np.ndarray
    sources: tuple[str, ...]

    def at(self, batch: np.ndarray) -> np.ndarray:
        b = np.asarray(batch, dtype=float)
        if self.sizes.size == 0:
            return np.full(b.shape, np.nan)
        return np.interp(b, self.sizes.astype(float), self.us)

    def measured(self, batch: np.ndarray) -> np.ndarray:
        """Whether each batch size is one of the curve's points (its cost was measured, not bounded)."""
        return np.isin(np.asarray(batch, dtype=np.int64), self.sizes)

    def at_next(self, batch: np.ndarray) -> np.ndarray:
        """Per batch the cost at the smallest point ``>= batch`` (the largest point's above them all): the
        batch's cost when the kernels' cost is flat from the batch up to the next measured size (GPU tiles)."""
        return self._step(batch, "left")

    def at_prev(self, batch: np.ndarray) -> np.ndarray:
        """Per batch the cost at the largest point ``<= batch`` (the smallest point's below them all): the
        batch's cost when the cost rises only after it, just below the next measured size."""
        return self._step(batch, "right")

    def _step(self, batch: np.ndarray, side: str) -> np.ndarray:
        b = np.asarray(batch, dtype=float)
        if self.sizes.size == 0:
            return np.full(b.shape, np.nan)
        j = np.searchsorted(self.sizes.astype(float), b, side=side)
        j = j if side == "left" else j - 1
        return self.us[np.clip(j, 0, self.sizes.size - 1)]

    @property
    def source(self) -> str:
        """Where the points came from: ``timings``, ``trace`` or ``timings+trace`` (``none`` without points)."""
        kinds = {"timings" if s == "timings" else "trace" for s in self.sources}
        return "+".join(sorted(kinds)) if kinds else "none"


def fit_cost_curve(graph_size: np.ndarray, graph_us: np.ndarray, eager_size: np.ndarray, eager_us: np.ndarray,
                   timings: dict[int, float] | None = None) -> CostCurve:
    """The cost curve from the trace and, when given, harness timings ``{batch: graph_us}``.

    ``graph_*``: per graph step its bucket and its predicted FULL-graph step; ``eager_*``: per eager
    step its batch and its predicted FULL-graph step (sizes <= 0 are skipped). Per size the median;
    timings win over graph steps, graph steps over eager steps.
    """
    pts: dict[int, tuple[float, str]] = {}
    for sizes, us, src in ((eager_size, eager_us, "eager steps"), (graph_size, graph_us, "graph steps")):
        sizes = np.asarray(sizes, dtype=np.int64)
        us = np.asarray(us, dtype=float)
        ok = (sizes > 0) & np.isfinite(us) & (us > 0)
        if not ok.any():
            continue
        uniq, inv = np.unique(sizes[ok], return_inverse=True)
        order = np.lexsort((us[ok], inv))
        cnt = np.bincount(inv, minlength=uniq.size)
        first = np.concatenate([[0], np.cumsum(cnt)[:-1]])
        srt = us[ok][order]
        med = (srt[first + (cnt - 1) // 2] + srt[first + cnt // 2]) / 2
        pts.update({int(s): (float(m), src) for s, m in zip(uniq.tolist(), med.tolist())})
    for s, v in (timings or {}).items():
        pts[int(s)] = (float(v), "timings")
    keys = sorted(pts)
    return CostCurve(sizes=np.array(keys, dtype=np.int64), us=np.array([pts[k][0] for k in keys], dtype=float),
                     sources=tuple(pts[k][1] for k in keys))


@dataclass(frozen=True, eq=False)
class PaddingCost:
    """Per step (arrays of length n_steps, NaN where the step is not padded) the padding cost in us,
    cost(bucket) - cost(batch) on a :class:`CostCurve`:

    * ``us``: the estimate. Where the batch is a point of the curve it is measured; between two points
      ``a < batch < c`` the batch is costed as ``c`` (:meth:`CostCurve.at_next`): GPU kernels run whole
      tiles of rows, so a batch costs what the next measured size costs as long as no tile boundary lies
      between them, and capture sizes (the measured points of a trace: its graph steps' buckets) are
      multiples of the tile steps;
    * ``low`` / ``high``: the band when the cost only rises with batch size: the batch costs at least
      cost(a) and at most cost(c), so the padding lies between ``cost(bucket) - cost(c)`` and
      ``cost(bucket) - cost(a)`` (equal to ``us`` where measured; below the smallest point there is no
      ``a`` and the band is the estimate alone);
    * ``measured``: the batch's own cost is a point (a harness timing, or an eager step of that batch).
    """

    us: np.ndarray
    low: np.ndarray
    high: np.ndarray
    measured: np.ndarray


def padding_cost(curve: CostCurve, bucket: np.ndarray, batch: np.ndarray) -> PaddingCost:
    """Padding cost of every step with ``bucket > 0`` and ``batch > 0`` (see :class:`PaddingCost`)."""
    bucket = np.asarray(bucket, dtype=np.int64)
    batch = np.asarray(batch, dtype=np.int64)
    padded = (bucket > 0) & (batch > 0)
    b, k = np.where(padded, batch, 1), np.where(padded, bucket, 1)
    cost_bucket = curve.at(k)
    measured = curve.measured(b) & padded
    est = np.where(measured, cost_bucket - curve.at(b), cost_bucket - curve.at_next(b))
    other = np.where(measured, est, cost_bucket - curve.at_prev(b))
    nan = np.full(b.shape, np.nan)
    return PaddingCost(us=np.where(padded, est, nan), low=np.where(padded, np.minimum(est, other), nan),
                       high=np.where(padded, np.maximum(est, other), nan), measured=measured)


def fallback_causes(trace: Trace, row_step: np.ndarray, names: list[str], fallback: np.ndarray) -> list[str | None]:
    """Per step why it ran eager, where the trace shows it (``None`` elsewhere and for non-fallbacks).

    In order: a stream capture began inside the step (``cudaStreamBeginCapture``: the size was
    captured lazily, on first use); torch.compile (re)compiled inside it (Dynamo's frame conversion
    or Inductor's compile in a ``with_stack`` trace, or a cache-lookup miss range); the step's own
    marker names it eager (the engine chose eager; the marker does not say why).
    """
    n = len(names)
    begins = _runtime_rows(trace, _BEGIN_CAPTURE_RE)
    s = row_step[begins]
    captured = np.bincount(s[s >= 0], minlength=n)[:n] > 0
    compiled = np.zeros(n, dtype=bool)
    ann = np.flatnonzero(trace.kind == Kind.ANNOTATION)
    ids = [i for i in np.unique(trace.name_id[ann]).tolist() if _COMPILE_RE.search(trace.names[i])]
    rows = ann[np.isin(trace.name_id[ann], ids)]
    hit = row_step[rows]
    compiled[hit[hit >= 0]] = True
    pc = trace.python_calls
    py_ids = [i for i, nm in enumerate(pc.names) if _COMPILE_RE.search(nm)]
    if py_ids and len(pc):
        starts = pc.start_ns[np.isin(pc.name_id, py_ids)]
        compiled |= _steps_holding(trace, row_step, starts, n)
    out: list[str | None] = []
    for i in range(n):  # one per step (a report row)
        if not fallback[i]:
            out.append(None)
        elif captured[i]:
            out.append("a graph was captured in this step (size captured lazily, on first use)")
        elif compiled[i]:
            out.append("torch.compile (re)compiled in this step")
        elif EAGER_MARKER_REGEX.search(names[i]):
            out.append(f"the step marker names it eager ({names[i]})")
        else:
            out.append(None)
    return out


def _steps_holding(trace: Trace, row_step: np.ndarray, times_ns: np.ndarray, n: int) -> np.ndarray:
    """Steps whose CPU range (first to last host row of the step) holds any of ``times_ns``."""
    host = np.flatnonzero((row_step >= 0) & ~trace.gpu_mask)
    first = np.full(n, np.iinfo(np.int64).max)
    last = np.full(n, np.iinfo(np.int64).min)
    np.minimum.at(first, row_step[host], trace.start_ns[host])
    np.maximum.at(last, row_step[host], trace.end_ns[host])
    order = np.argsort(first, kind="stable")
    j = np.searchsorted(first[order], times_ns, side="right") - 1
    ok = j >= 0
    ok[ok] = times_ns[ok] <= last[order][j[ok]]
    out = np.zeros(n, dtype=bool)
    out[order[j[ok]]] = True
    return out

# --- a capture trace beside an execution trace: what runs inside each replay -----------------

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
