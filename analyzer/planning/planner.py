"""Which batch sizes to capture as CUDA graphs: the exact best bucket set for a distribution and budgets.

**Model.** A server capturing the buckets ``B`` runs a decode step of batch size ``b``:

* ``padding="pad"`` (vLLM, SGLang and TensorRT-LLM's default): the graph of the smallest
  bucket ``>= b``, at that bucket's graph cost (the batch is padded up to it); eager when
  ``b`` is above the largest bucket.
* ``padding="exact"``: the graph of ``b`` only if ``b`` is a bucket, else eager.

With ``p_b`` the share of steps at batch size ``b`` (the distribution, normalised), the
**expected step time** is ``sum_b p_b * cost_b`` in microseconds; :func:`plan_capture`
chooses the bucket set that minimises it under three budgets: at most ``K`` graphs, at most
``M`` MiB of graph memory, at most ``T`` seconds of capture (start-up), each bucket at most
``max_batch_size``.

**What a list costs** (:class:`~launchgap.planning.memory.ListCost`): with ``k`` buckets of
which the largest is ``s``, memory is ``fixed + pool_per_row * s + per_size * k`` MiB and
capture time ``fixed_s + per_size_s * k`` seconds (both 0 for ``k = 0``). With the model's
dimensions this is the fitted memory model (:mod:`launchgap.planning.memory`: servers capture
largest first into one shared pool, so memory follows the largest size plus a part per
graph); without them, a constant per graph (``graph_memory_mib``: given, else the largest
pool growth the harness measured, else :data:`DEFAULT_GRAPH_MEMORY_MIB`, an assumption the
plan states) and no capture-time model. Memory is **not additive** per graph (the pool part
belongs to the largest bucket alone), but it depends on the bucket set only through ``k`` and
``s``, and grows with both; that is what keeps the optimisation exact.

**Exactness.** Candidate buckets are the batch sizes that occur in the distribution. That
loses nothing for ``pad``: costs are non-decreasing in batch size (:mod:`launchgap.planning.costs`
fits them so), so a bucket can always be moved down to the largest distribution size it
serves; it still serves the same steps, each at a cost no higher, with the same number of
graphs and a largest bucket no larger (so no more memory or capture time). For ``exact`` a
bucket outside the distribution serves no step. Over the sorted candidates ``s_1 < ... < s_M``
with ``P_j = p_1 + ... + p_j`` the dynamic programme fills the grid

    f_1(j) = P_j * g(s_j)
    f_k(j) = min_{i<j} f_{k-1}(i) + (P_j - P_i) * g(s_j)        # s_j the k-th (largest) bucket
    G(k, j) = f_k(j) + sum_{t>j} p_t * e(s_t)                    # above s_j: eager

``G(k, j)`` is the best expected step of any set of exactly ``k`` buckets whose largest is
``s_j``, and every such set costs the same memory and capture time. So the plan under all three
budgets is the minimum of ``G`` over the feasible cells ``k <= K``, ``mem(k, s_j) <= M``,
``cap(k, s_j) <= T`` (and ``k = 0``, all eager), fewest graphs then least memory on ties:
exact, ``O(K * M^2)``, each row of the grid one vectorised ``M x M`` minimum. For ``exact``
there is no interaction between buckets: ``G(k, j) = e_all - d_j - (the k-1 largest d_i, i<j)``
with savings ``d_b = p_b * (e(b) - g(b))``.

When no budget binds, the optimum is known in ``O(M)`` (every candidate up to the best largest
bucket is a bucket, see :func:`_unbounded_pad`), and the grid only draws the trade-offs below
it, up to :data:`TRADEOFF_MAX_GRAPHS` graphs. When a budget binds, the grid runs to the most
graphs any feasible cell allows.

**Trade-offs.** The **curve** (``tradeoff``) is the best plan with *at most* ``k`` graphs under
the memory and capture budgets, ``min_{k' <= k}`` of the row minima: exactly ``k`` graphs can be
worse than fewer when a graph is slower than the eager step it replaces, and the curve equals
the plan made with ``max_graphs=k``. The **Pareto table** (``pareto``) lists every cell of the
grid (plus all-eager and the unbounded optimum) that no other cell beats on expected step,
memory and capture time at once, with its buckets, and whether it fits the budgets.

**Crossover.** ``win(b) = e(b) / g(b) - 1``, evaluated at every integer batch size the cost
table covers; the crossover is the smallest ``b`` such that ``win < win_threshold`` at ``b``
and every size above it (``None`` when the win at the largest size still clears it).

**Padding waste** (``padding_waste_us``): expected time per step spent because padded
steps run a bigger graph than their batch needs, ``sum_b p_b * (g(bucket(b)) - g(b))``;
``padded_rows_fraction`` is the share of graph-computed rows that are padding.

**Baselines**: the servers' default lists (:func:`default_baselines`, one
:class:`BaselineSpec` per engine: name, version, sizes) scored on the same costs, memory and
capture model.
"""
from __future__ import annotations

import bisect
import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field

import numpy as np

from ..engines import ENGINES
from ..engines import LABELS as SERVER_LABELS
from ..engines import NAMES as SERVERS
from ..engines import default_sizes as server_default_sizes
from ..engines import default_version as server_default_version
from ..engines.sglang import DEFAULT_MAX_SIZE as SGLANG_DEFAULT_MAX_BS  # noqa: F401 (re-exported)
from ..engines.sglang import default_sizes as sglang_default_sizes  # noqa: F401
from ..engines.tensorrt_llm import DEFAULT_MAX_SIZE as TRTLLM_DEFAULT_MAX_BS  # noqa: F401
from ..engines.tensorrt_llm import default_sizes as tensorrt_llm_default_sizes  # noqa: F401
from ..engines.vllm import DEFAULT_MAX_SIZE as VLLM_MAX_CAPTURE  # noqa: F401
from ..engines.vllm import default_sizes as vllm_default_sizes  # noqa: F401
from ..errors import InputError
from .costs import CostTable
from .memory import (
    ListCost,
    MemoryModel,
    ModelDims,
    default_memory_model,
)

SCHEMA = "launchgap.plan/1"
#: Costs this close (relative) count as equal (:attr:`Plan.eager_equals_graph`).
_EQUAL_REL = 1e-9
PADDING_POLICIES = ("pad", "exact")
#: What a plan's inputs gave it, one entry each in ``sources`` (see :mod:`launchgap.planning.request`).
SOURCE_ROLES = ("costs", "distribution", "capture_sizes", "model_dims", "graph_nodes", "memory_model",
                "capture_cost")
#: The baseline name of the server's current capture list (when an input gives it).
CURRENT_LIST = "current"
#: What the baselines are called for people: the servers' default lists and the current list.
BASELINE_LABELS = {**SERVER_LABELS, CURRENT_LIST: "current list"}
#: Per-graph memory assumed when neither the user, the model's dimensions nor the harness give one
#: (MiB). An assumption, not a measurement: vLLM reports a few hundred MiB for ~50 graphs of a
#: 7-8B model, i.e. single-digit MiB per graph; 32 leaves room for larger models.
DEFAULT_GRAPH_MEMORY_MIB = 32.0
#: ``graphs_within_1pct``: fewest graphs whose plan is within this share of the best plan.
NEAR_OPTIMAL_FRACTION = 0.01
#: The trade-offs (curve, Pareto table) are drawn up to this many graphs, and up to
#: ``TRADEOFF_WORK / M**2`` for ``M`` candidate sizes (each graph count is one ``M x M`` step of
#: the grid); the grid always reaches the most graphs the budgets allow, so the plan stays exact.
TRADEOFF_MAX_GRAPHS = 128
TRADEOFF_WORK = 1 << 25
#: The Pareto table lists a bucket set only if it is this much faster (a fraction of the expected
#: step) than every listed set that needs no more memory and capture time. The exact front can
#: hold thousands of sets (each largest bucket trades a little pool memory for a little time).
PARETO_MIN_GAIN = 0.005
#: ... and at most this many sets: the gain doubles until the table fits.
PARETO_MAX_POINTS = 40
_REL_TIE = 1e-12
_MIB = float(1 << 20)


def _tied(eager, graph) -> np.ndarray:
    """Per size, eager and graph costs equal (within :data:`_EQUAL_REL`): an eager estimate at its floor."""
    eager, graph = np.asarray(eager, dtype=float), np.asarray(graph, dtype=float)
    return np.abs(eager - graph) <= _EQUAL_REL * eager


def _costs_tie(eager: np.ndarray, graph: np.ndarray) -> bool:
    """Eager and graph costs equal at every size given (none given: no tie)."""
    tied = _tied(eager, graph)
    return bool(tied.size) and bool(tied.all())

@dataclass(frozen=True)
class PlanOptions:
    """Budgets and policy of a capture plan.

    ``max_graphs``: at most this many buckets. ``memory_budget_mib``: graph memory allowed
    (MiB, device memory as the driver counts it). ``capture_budget_s``: capture (start-up)
    seconds allowed. ``graph_memory_mib``: a constant per graph instead of the memory model.
    ``kv_bytes_per_token``: KV-cache bytes per token, to state memory as KV-cache tokens lost
    (default from the model's dimensions). ``max_batch_size``: no bucket above it (and the
    servers' default lists are cut there). ``padding``: ``"pad"`` or ``"exact"``.
    ``win_threshold``: the crossover's win threshold.
    """

    max_graphs: int | None = None
    memory_budget_mib: float | None = None
    graph_memory_mib: float | None = None
    max_batch_size: int | None = None
    padding: str = "pad"
    win_threshold: float = 0.05
    capture_budget_s: float | None = None
    kv_bytes_per_token: float | None = None

    def __post_init__(self) -> None:
        if self.max_graphs is not None and self.max_graphs < 0:
            raise InputError(f"--max-graphs must be >= 0, got {self.max_graphs}")
        for name, v in (("--memory-mib", self.memory_budget_mib), ("--graph-memory-mib", self.graph_memory_mib),
                        ("--capture-seconds", self.capture_budget_s)):
            if v is not None and not (math.isfinite(v) and v >= 0):
                raise InputError(f"{name} must be a non-negative number, got {v}")
        if self.graph_memory_mib is not None and self.graph_memory_mib == 0 and self.memory_budget_mib is not None:
            raise InputError("--graph-memory-mib 0 makes the memory budget meaningless; give a positive estimate")
        if self.kv_bytes_per_token is not None and not (math.isfinite(self.kv_bytes_per_token)
                                                        and self.kv_bytes_per_token > 0):
            raise InputError(f"--kv-bytes-per-token must be a positive number, got {self.kv_bytes_per_token}")
        if self.max_batch_size is not None and self.max_batch_size < 1:
            raise InputError(f"--max-batch-size must be >= 1, got {self.max_batch_size}")
        if self.padding not in PADDING_POLICIES:
            raise InputError(f"--padding must be one of {', '.join(PADDING_POLICIES)}, got {self.padding!r}")
        if not (math.isfinite(self.win_threshold) and self.win_threshold >= 0):
            raise InputError(f"--win-threshold must be a non-negative number, got {self.win_threshold}")

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class BucketScore:
    """A bucket list scored under a distribution, costs and padding policy.

    ``expected_step_us``: expected decode-step time. ``graph_step_fraction``: share of steps
    that replay a graph. ``padding_waste_us`` / ``padded_rows_fraction``: see module docstring.
    """

    buckets: tuple[int, ...]
    expected_step_us: float
    graph_step_fraction: float
    padding_waste_us: float
    padded_rows_fraction: float

    @property
    def n_graphs(self) -> int:
        return len(self.buckets)


@dataclass(frozen=True)
class PlanRow:
    """One batch size of the distribution: its share of steps, its costs and what the plan runs."""

    batch_size: int
    weight: float
    eager_us: float
    graph_us: float
    source: str
    bucket: int | None
    planned_us: float


@dataclass(frozen=True)
class BaselineSpec:
    """A server's default capture list: ``engine`` (registry name), the ``version`` the list was
    read from (``None`` when not pinned), its ``sizes`` and a note on how it was cut."""

    engine: str
    version: str | None
    sizes: tuple[int, ...]
    note: str


@dataclass(frozen=True)
class Baseline:
    """A server's default capture list under the same distribution, costs, padding policy and memory model."""

    name: str
    score: BucketScore
    memory_mib: float
    within_budget: bool
    note: str
    capture_s: float | None = None
    version: str | None = None

    def to_dict(self, plan_us: float) -> dict:
        s = self.score
        return {"buckets": list(s.buckets), "expected_step_us": _r(s.expected_step_us), "n_graphs": s.n_graphs,
                "memory_mib": _r(self.memory_mib), "capture_s": _r(self.capture_s) if self.capture_s is not None
                else None, "version": self.version, "within_budget": self.within_budget,
                "padding_waste_us": _r(s.padding_waste_us), "graph_step_fraction": _r(s.graph_step_fraction, 6),
                "plan_saving_fraction": _r(1 - plan_us / s.expected_step_us, 6) if s.expected_step_us > 0 else 0.0,
                "note": self.note}


@dataclass(frozen=True)
class ParetoPoint:
    """A bucket set no other beats on expected step, graph memory and capture time at once."""

    graphs: int
    buckets: tuple[int, ...]
    expected_step_us: float
    memory_mib: float
    capture_s: float | None
    within_budget: bool

    def to_dict(self) -> dict:
        return {"graphs": self.graphs, "buckets": list(self.buckets), "expected_step_us": _r(self.expected_step_us),
                "memory_mib": _r(self.memory_mib),
                "capture_s": _r(self.capture_s) if self.capture_s is not None else None,
                "within_budget": self.within_budget}


@dataclass(frozen=True)
class TraceNote:
    """What the analysis of one or more of a plan's traces warned about (``kind`` ``"warning"``) or noted
    (``"note"``): ``text`` as the analysis said it, ``traces`` the names of the traces that said it, in the order
    the plan read them (one entry per trace however often it said it)."""

    kind: str
    text: str
    traces: tuple[str, ...]

    def to_dict(self) -> dict:
        return {"kind": self.kind, "text": self.text, "traces": list(self.traces)}


@dataclass(frozen=True)
class Plan:
    """The chosen buckets, what they buy, and how they compare. ``to_dict`` is schema launchgap.plan/1."""

    score: BucketScore
    all_eager_expected_step_us: float
    crossover_batch_size: int | None
    per_batch: tuple[PlanRow, ...]
    baselines: Mapping[str, Baseline]
    options: PlanOptions
    max_graphs_effective: int | None
    list_cost: ListCost
    tradeoff: tuple[tuple[int, float], ...]
    buckets_within_1pct: tuple[int, ...]
    costs: CostTable
    warnings: tuple[str, ...] = field(default=())
    #: Set when some cost above the table's largest size was needed: the fitted growth, the sizes
    #: it served, and this plan's expected step on the band's low and high lines (us).
    extrapolation: Mapping | None = None
    pareto: tuple[ParetoPoint, ...] = ()
    #: Set when graph costs carry the batch-scaling model's band (a trace's cost curve): this plan's expected step
    #: with every banded graph cost at the band's low and high end, and the buckets planned on each end.
    cost_band: Mapping | None = None
    #: The model whose dimensions the memory model used (``None``: a constant per graph).
    model_dims: ModelDims | None = None
    #: Per role of :data:`SOURCE_ROLES`, the input that gave it (``None``: none did); set by
    #: :func:`launchgap.planning.request.build_plan`.
    sources: Mapping[str, str | None] = field(default_factory=dict)
    #: What the analyses of the traces the plan read warned about and noted, each said once with the traces that
    #: said it (warnings first); set by :func:`launchgap.planning.request.build_plan`.
    trace_notes: tuple[TraceNote, ...] = ()

    @property
    def buckets(self) -> tuple[int, ...]:
        return self.score.buckets

    @property
    def expected_step_us(self) -> float:
        return self.score.expected_step_us

    @property
    def eager_equals_graph(self) -> bool:
        """Eager and graph costs are equal at every batch size of the distribution: a graph cannot win on these
        costs, which happens where the eager cost is an estimate at its floor (the graph step itself, no eager step
        measured), not a measured tie."""
        return _costs_tie([r.eager_us for r in self.per_batch], [r.graph_us for r in self.per_batch])

    @property
    def eager_tied_batch_sizes(self) -> tuple[int, ...]:
        """Distribution sizes this plan runs eager only on a tie: their eager cost equals their graph cost, an
        estimate at its floor (the graph step itself, no eager step measured), so the plan rests on the estimate
        there (a plan of no graphs on costs that tie everywhere: :attr:`eager_equals_graph`)."""
        tied = _tied([r.eager_us for r in self.per_batch], [r.graph_us for r in self.per_batch])
        return tuple(r.batch_size for r, t in zip(self.per_batch, tied.tolist()) if t and r.bucket is None)

    @property
    def crossover_on_tie(self) -> bool:
        """The crossover (:attr:`crossover_batch_size`) is where an eager estimate meets its floor, the graph step
        itself (eager and graph costs equal there: no eager step measured), not a measured end of the win."""
        if self.crossover_batch_size is None:
            return False
        return bool(_tied(*self.costs.costs_at(np.array([self.crossover_batch_size])))[0])

    @property
    def eager_floor(self) -> bool:
        """The eager costs are a floor (:attr:`CostTable.eager_floor`: a graph-only trace's kernels times the prior
        host cost per launch): the speedup over all-eager and every graph win are lower bounds, and the crossover,
        where a win falls under the threshold, may lie higher."""
        return self.costs.eager_floor

    @property
    def graph_memory_mib(self) -> float:
        """Memory each captured size adds (MiB); the list's total has a part for its largest size too."""
        return self.list_cost.per_size_mib

    @property
    def graph_memory_source(self) -> str:
        return self.list_cost.source

    @property
    def memory_used_mib(self) -> float:
        """Predicted device memory of the plan's graphs (MiB)."""
        return self.list_cost.of(self.buckets)[0]

    @property
    def capture_s(self) -> float | None:
        """Predicted capture (start-up) seconds of the plan's graphs; ``None`` without a capture model."""
        return self.list_cost.of(self.buckets)[1]

    @property
    def kv_bytes_per_token(self) -> float | None:
        if self.options.kv_bytes_per_token is not None:
            return float(self.options.kv_bytes_per_token)
        return float(self.model_dims.kv_bytes_per_token) if self.model_dims is not None else None

    @property
    def kv_tokens_lost(self) -> int | None:
        """KV-cache tokens the plan's graph memory would otherwise hold (``None`` without bytes per token)."""
        kv = self.kv_bytes_per_token
        return int(self.memory_used_mib * _MIB // kv) if kv else None

    @property
    def speedup_vs_all_eager(self) -> float:
        return self.all_eager_expected_step_us / self.expected_step_us if self.expected_step_us > 0 else 0.0

    def configs(self) -> dict:
        """Ready-to-paste capture settings per server (see :mod:`launchgap.engines`)."""
        return {e.NAME: e.capture_config(list(self.buckets), self.options.padding) for e in ENGINES}

    def config_snippets(self) -> dict[str, str]:
        """The same settings as command-line / YAML text."""
        return {e.NAME: e.config_snippet(list(self.buckets), self.options.padding) for e in ENGINES}

    def memory_dict(self) -> dict:
        """JSON ``memory``: what the plan's graphs cost in device memory, start-up and KV cache."""
        lc = self.list_cost
        cap = self.capture_s
        return {"model": self.model_dims.name if self.model_dims is not None else None,
                "predicted_mib": _r(self.memory_used_mib), "predicted_capture_s": _r(cap) if cap is not None else None,
                "kv_tokens_lost": self.kv_tokens_lost, "kv_bytes_per_token": self.kv_bytes_per_token,
                "graph_memory_mib": _r(lc.per_size_mib), "graph_memory_source": lc.source,
                "list_cost": {"fixed_mib": _r(lc.fixed_mib), "pool_mib_per_row": round(lc.pool_mib_per_row, 6),
                              "per_size_mib": _r(lc.per_size_mib),
                              "fixed_s": _r(lc.fixed_s, 4) if lc.fixed_s is not None else None,
                              "per_size_s": _r(lc.per_size_s, 4) if lc.per_size_s is not None else None},
                "used_mib": _r(self.memory_used_mib), "budget_mib": self.options.memory_budget_mib,
                "capture_budget_s": self.options.capture_budget_s, "max_graphs_effective": self.max_graphs_effective}

    def to_dict(self) -> dict:
        s = self.score
        return {
            "schema": SCHEMA,
            "buckets": list(s.buckets),
            "expected_step_us": _r(s.expected_step_us),
            "all_eager_expected_step_us": _r(self.all_eager_expected_step_us),
            "crossover_batch_size": self.crossover_batch_size,
            "per_batch": [{"batch_size": r.batch_size, "weight": _r(r.weight, 9), "eager_us": _r(r.eager_us),
                           "graph_us": _r(r.graph_us), "source": r.source, "bucket": r.bucket,
                           "planned_us": _r(r.planned_us)} for r in self.per_batch],
            "baselines": {k: v.to_dict(s.expected_step_us) for k, v in self.baselines.items()},
            "configs": self.configs(),
            "config_snippets": self.config_snippets(),
            "n_graphs": s.n_graphs,
            "speedup_vs_all_eager": _r(self.speedup_vs_all_eager, 4),
            "saving_vs_all_eager_fraction": _r(1 - s.expected_step_us / self.all_eager_expected_step_us, 6)
            if self.all_eager_expected_step_us > 0 else 0.0,
            "eager_equals_graph": self.eager_equals_graph,
            "eager_floor": self.eager_floor,
            "eager_tied_batch_sizes": list(self.eager_tied_batch_sizes),
            "padding_waste_us": _r(s.padding_waste_us),
            "padded_rows_fraction": _r(s.padded_rows_fraction, 6),
            "graph_step_fraction": _r(s.graph_step_fraction, 6),
            "memory": self.memory_dict(),
            "tradeoff": [{"graphs": k, "expected_step_us": _r(v)} for k, v in self.tradeoff],
            "pareto": [pt.to_dict() for pt in self.pareto],
            "graphs_within_1pct": len(self.buckets_within_1pct),
            "buckets_within_1pct": list(self.buckets_within_1pct),
            "win_threshold": self.options.win_threshold,
            "options": self.options.to_dict(),
            "costs": self.costs.to_dict(),
            "warnings": list(self.warnings),
            "extrapolation": dict(self.extrapolation) if self.extrapolation is not None else None,
            "cost_band": dict(self.cost_band) if self.cost_band is not None else None,
            "sources": {r: self.sources.get(r) for r in SOURCE_ROLES},
            "trace_notes": [n.to_dict() for n in self.trace_notes],
        }


def _r(x: float, nd: int = 3) -> float:
    return round(float(x), nd)


# --- server default lists (from the engine registry) ----------------------------------------

def default_baselines(max_size: int | None = None, padding: str = "pad") -> list[BaselineSpec]:
    """The servers' default capture lists every plan is compared with, cut at ``max_size``.

    The one place the planner learns which engines, versions and lists to score: point it
    at an engine registry and every plan, table and chart follows.
    """
    out = []
    for name in SERVERS:
        note = f"{name} default list" + (f" cut at --max-batch-size {max_size}" if max_size is not None else "")
        if name == "vllm" and padding == "exact":
            note += "; vLLM always pads, scored exact-match here for a like-for-like comparison"
        out.append(BaselineSpec(name, server_default_version(name), tuple(server_default_sizes(name, max_size, padding)),
                                note))
    return out


# --- scoring --------------------------------------------------------------------------------

def _normalise(distribution: Mapping[int, float]) -> tuple[np.ndarray, np.ndarray]:
    if not distribution:
        raise InputError("the batch-size distribution is empty")
    items = sorted((int(b), float(w)) for b, w in distribution.items())
    sizes = np.array([b for b, _ in items], dtype=np.int64)
    w = np.array([x for _, x in items], dtype=float)
    if np.any(sizes < 1):
        raise InputError(f"batch sizes must be positive, got {int(sizes[sizes < 1][0])}")
    if len(set(sizes.tolist())) != len(sizes):
        raise InputError("the batch-size distribution repeats a batch size")
    if not np.all(np.isfinite(w)) or np.any(w < 0):
        raise InputError("batch-size counts must be finite and non-negative")
    keep = w > 0
    if not keep.any():
        raise InputError("the batch-size distribution has no steps (all counts are zero)")
    return sizes[keep], w[keep] / w[keep].sum()


def _bucket_of(sizes: np.ndarray, buckets: np.ndarray, padding: str) -> np.ndarray:
    """Bucket serving each size (-1: eager)."""
    if buckets.size == 0:
        return np.full(sizes.shape, -1, dtype=np.int64)
    idx = np.searchsorted(buckets, sizes, side="left")
    inside = idx < buckets.size
    out = np.where(inside, buckets[np.minimum(idx, buckets.size - 1)], -1)
    if padding == "exact":
        out = np.where(out == sizes, out, -1)
    return out


def _score(costs: CostTable, sizes: np.ndarray, p: np.ndarray, buckets: Sequence[int], padding: str) -> BucketScore:
    b = np.array(sorted({int(x) for x in buckets}), dtype=np.int64)
    serve = _bucket_of(sizes, b, padding)
    on = serve > 0
    e, g_own = costs.costs_at(sizes)
    g_bucket = np.zeros(sizes.shape)
    if on.any():
        _, g_bucket[on] = costs.costs_at(serve[on])
    cost = np.where(on, g_bucket, e)
    pad_rows = float(np.sum(p[on] * (serve[on] - sizes[on])))
    rows = float(np.sum(p[on] * serve[on]))
    return BucketScore(tuple(b.tolist()), float(np.dot(p, cost)), float(p[on].sum()),
                       float(np.dot(p[on], g_bucket[on] - g_own[on])), pad_rows / rows if rows > 0 else 0.0)


def _needed_sizes(sizes: np.ndarray, lists: Sequence[Sequence[int]], padding: str) -> np.ndarray:
    """Every batch size whose cost a score will look up: the distribution and serving buckets."""
    need = [sizes]
    for lst in lists:
        serve = _bucket_of(sizes, np.array(sorted(set(lst)), dtype=np.int64), padding)
        need.append(serve[serve > 0])
    return np.unique(np.concatenate(need))


def score_buckets(costs: CostTable, distribution: Mapping[int, float], buckets: Sequence[int],
                  padding: str = "pad") -> BucketScore:
    """Expected step time (and padding waste) of running ``buckets`` under ``distribution``.

    Sizes outside the cost table are clamped below it and extrapolated above it, explicitly
    (see :meth:`CostTable.extended_to`); use :func:`plan_capture` to see those warnings.
    """
    if padding not in PADDING_POLICIES:
        raise InputError(f"padding must be one of {', '.join(PADDING_POLICIES)}, got {padding!r}")
    sizes, p = _normalise(distribution)
    table = costs.extended_to(_needed_sizes(sizes, [buckets], padding).tolist())
    return _score(table, sizes, p, buckets, padding)


# --- optimisation ---------------------------------------------------------------------------

def _tail_eager(p: np.ndarray, eager: np.ndarray) -> np.ndarray:
    """``tail[j] = sum_{t>j} p_t * e_t``: expected eager time of the sizes above index ``j``."""
    return np.concatenate([np.cumsum((p * eager)[::-1])[::-1][1:], [0.0]])


def _unbounded_pad(p: np.ndarray, eager: np.ndarray, graph: np.ndarray, m: int) -> tuple[float, list[int]]:
    """The optimum with no limit on the number of buckets (padding), in O(M).

    With largest bucket ``s_L``, every size up to it pays at least its own graph cost
    (costs are monotone) and every size above it runs eager, so the optimum is
    ``min_L sum_{j<=L} p_j g_j + tail(L)``, reached by making every candidate up to ``s_L`` a
    bucket. A candidate whose graph costs the same as the next one adds nothing and is
    dropped (fewest graphs at equal cost).
    """
    tail = _tail_eager(p, eager)
    if m == 0:
        return float(np.dot(p, eager)), []
    g = graph[:m]
    totals = np.concatenate([[float(np.dot(p, eager))], np.cumsum(p[:m] * g) + tail[:m]])  # L = -1, 0, ..
    distinct = np.concatenate([g[:-1] < g[1:] - 1e-12 * np.abs(g[1:]), [True]])
    counts = np.concatenate([[0], np.cumsum(np.concatenate([[0], distinct[:-1]])) + 1])  # graphs per L
    lo = float(totals.min())
    ties = np.flatnonzero(totals <= lo * (1 + _REL_TIE) + 1e-12)
    L = int(ties[np.argmin(counts[ties])]) - 1
    if L < 0:
        return lo, []
    keep = np.flatnonzero(distinct[: L + 1])
    keep = keep if keep.size and keep[-1] == L else np.append(keep, L)
    return float(totals[L + 1]), keep.tolist()


@dataclass(frozen=True)
class _Grid:
    """``total[k, j]``: best expected step with exactly ``k`` buckets, the largest candidate ``j``
    (``inf`` where impossible; row 0 unused), and how to recover the buckets of a cell."""

    total: np.ndarray
    parents: list[np.ndarray]
    savings: np.ndarray | None  # exact padding: p * (e - g) per candidate

    def buckets(self, k: int, j: int) -> list[int]:
        """Candidate indices of the cell's bucket set."""
        if k == 0:
            return []
        if self.savings is not None:
            order = np.argsort(-self.savings[:j], kind="stable")[: k - 1]
            return sorted(order.tolist() + [j])
        out = [j]
        for kk in range(k - 1, 0, -1):
            j = int(self.parents[kk][j])
            out.append(j)
        return out[::-1]


def _grid_pad(p: np.ndarray, eager: np.ndarray, graph: np.ndarray, m: int, rows: int) -> _Grid:
    """The pad DP (module docstring) for ``k = 1..rows``: one vectorised ``M x M`` step per row."""
    tail = _tail_eager(p, eager)
    total = np.full((rows + 1, m), np.inf)
    parents: list[np.ndarray] = [np.full(m, -1, dtype=np.int64)]
    if m == 0 or rows == 0:
        return _Grid(total, parents, None)
    g = graph[:m]
    Pm = np.cumsum(p)[:m]
    f = Pm * g
    total[1] = f + tail[:m]
    # a[i, j] = f_{k-1}(i) - P_i g_j for i < j; +inf where i >= j (not a predecessor).
    pg = np.outer(Pm, g)
    blocked = np.where(np.tril(np.ones((m, m), dtype=bool)), np.inf, 0.0)
    a = np.empty((m, m))
    cols = np.arange(m)
    for k in range(2, min(rows, m) + 1):  # one vectorised M x M step per bucket count
        np.subtract(f[:, None], pg, out=a)
        a += blocked
        par = np.argmin(a, axis=0)
        f = Pm * g + a[par, cols]
        parents.append(par)
        total[k] = f + tail[:m]
    return _Grid(total, parents, None)


def _grid_exact(p: np.ndarray, eager: np.ndarray, graph: np.ndarray, m: int, rows: int) -> _Grid:
    """Exact padding: ``G(k, j) = e_all - d_j - (sum of the k-1 largest d_i, i < j)``."""
    total = np.full((rows + 1, m), np.inf)
    d = p[:m] * (eager[:m] - graph[:m])
    if m == 0 or rows == 0:
        return _Grid(total, [], d)
    below = np.where(np.tril(np.ones((m, m), dtype=bool), -1), d[None, :], -np.inf)  # row j: d_i, i < j
    top = -np.sort(-below, axis=1)  # descending; -inf where fewer than k-1 exist
    with np.errstate(invalid="ignore"):
        sums = np.concatenate([np.zeros((m, 1)), np.cumsum(top, axis=1)], axis=1)
    r = min(rows, m)
    total[1:r + 1] = float(np.dot(p, eager)) - d[None, :] - sums[:, :r].T
    total[~np.isfinite(total)] = np.inf
    return _Grid(total, [], d)


def _unbounded_exact(p: np.ndarray, eager: np.ndarray, graph: np.ndarray, m: int) -> tuple[float, list[int]]:
    """Exact padding without a budget: every candidate whose graph saves time."""
    d = p[:m] * (eager[:m] - graph[:m])
    keep = np.flatnonzero(d > 0)
    return float(np.dot(p, eager)) - float(d[keep].sum()), keep.tolist()


def _max_graphs_allowed(cost: ListCost, largest: np.ndarray, m: int, opts: PlanOptions) -> np.ndarray:
    """Per candidate largest bucket, the most buckets the budgets allow (up to ``m``): the same
    inequalities as :func:`_feasible`, solved for ``k``."""
    k = np.full(largest.shape, m, dtype=np.int64)
    if opts.max_graphs is not None:
        k = np.minimum(k, opts.max_graphs)
    budgets = []
    if opts.memory_budget_mib is not None:
        budgets.append((opts.memory_budget_mib, cost.fixed_mib + cost.pool_mib_per_row * largest, cost.per_size_mib))
    if opts.capture_budget_s is not None:
        budgets.append((opts.capture_budget_s, np.full(largest.shape, cost.fixed_s), cost.per_size_s))
    for budget, fixed, per in budgets:
        room = budget + 1e-9 - fixed
        allowed = np.floor(room / per) if per > 0 else np.where(room >= 0, m, 0)
        k = np.minimum(k, np.maximum(allowed, 0).astype(np.int64))
    return k


def _feasible(cost: ListCost, sizes: np.ndarray, rows: int, opts: PlanOptions, count: bool) -> np.ndarray:
    """``[k, j]``: whether ``k`` buckets with the largest ``sizes[j]`` fit the memory and capture
    budgets (and ``max_graphs`` when ``count``)."""
    k = np.arange(rows + 1)[:, None]
    ok = np.broadcast_to(k >= 1, (rows + 1, sizes.size)).copy()
    if count and opts.max_graphs is not None:
        ok &= k <= opts.max_graphs
    if opts.memory_budget_mib is not None:
        ok &= cost.memory_mib(k, sizes[None, :]) <= opts.memory_budget_mib + 1e-9
    if opts.capture_budget_s is not None:
        ok &= cost.capture_s(k, sizes[None, :]) <= opts.capture_budget_s + 1e-9
    return ok


def _ties(values: np.ndarray) -> np.ndarray:
    lo = float(np.min(values))
    return values <= lo * (1 + _REL_TIE) + 1e-12


def _pick_cell(total: np.ndarray, ok: np.ndarray, mem: np.ndarray, eager_us: float) -> tuple[int, int, float]:
    """The best feasible cell ``(k, j, us)``; ``(0, -1, eager)`` when none beats all-eager.
    Ties: fewest graphs, then least memory, then the smaller largest bucket."""
    kk, jj = np.nonzero(ok & np.isfinite(total))
    vals = np.concatenate([[eager_us], total[kk, jj]])
    kk = np.concatenate([[0], kk])
    jj = np.concatenate([[-1], jj])
    mm = np.concatenate([[0.0], mem[kk[1:], jj[1:]]])
    tie = np.flatnonzero(_ties(vals))
    best = tie[np.lexsort((jj[tie], mm[tie], kk[tie]))[0]]
    return int(kk[best]), int(jj[best]), float(vals[best])


def _front_2d(mib: np.ndarray, us: np.ndarray) -> np.ndarray:
    """Indices of the points no other point beats on both MiB and us (of equal points, one)."""
    order = np.lexsort((us, mib))
    if order.size == 0:
        return order
    run = np.minimum.accumulate(us[order])
    return order[np.concatenate([[True], run[1:] < run[:-1] * (1 - _REL_TIE) - 1e-12])]


def _pareto_cells(us: np.ndarray, mib: np.ndarray, cap_s: np.ndarray) -> np.ndarray:
    """Indices of the cells no other cell beats on expected step, memory and capture time at once
    (of cells equal on all three, one), by capture time ascending, then memory.

    Sweep the distinct capture times upwards (a capture time is a graph count): the cells of
    one capture time are reduced to their (memory, step) front, then tested against the
    staircase of every cell of a smaller capture time with one ``searchsorted``.
    """
    kept: list[np.ndarray] = []
    st_mib = np.zeros(0)
    st_us = np.zeros(0)
    for c in np.unique(cap_s):  # one step per distinct capture time
        idx = np.flatnonzero(cap_s == c)
        idx = idx[_front_2d(mib[idx], us[idx])]
        if st_mib.size:
            pos = np.searchsorted(st_mib, mib[idx] + 1e-9, side="right") - 1
            idx = idx[~((pos >= 0) & (st_us[np.maximum(pos, 0)] <= us[idx] * (1 + _REL_TIE) + 1e-12))]
        kept.append(idx)
        m_all = np.concatenate([st_mib, mib[idx]])
        u_all = np.concatenate([st_us, us[idx]])
        f = _front_2d(m_all, u_all)
        st_mib, st_us = m_all[f], u_all[f]
    return np.concatenate(kept) if kept else np.zeros(0, dtype=np.int64)


def _thin(front: np.ndarray, us: np.ndarray, mib: np.ndarray, gain: float) -> np.ndarray:
    """The front's cells, in its order (capture time, then memory, ascending), each kept only if
    faster by more than ``gain`` (a fraction) than every kept cell needing no more memory and
    capture time; in that order every kept cell needs no more capture time, so a (memory, step)
    staircase of the kept cells answers the question."""
    kept: list[int] = []
    st_mib: list[float] = []  # ascending
    st_us: list[float] = []  # descending: the least step of the kept cells up to that memory
    for i in front.tolist():  # the exact front: a few thousand cells at most
        pos = bisect.bisect_right(st_mib, float(mib[i]) + 1e-9) - 1
        if pos >= 0 and us[i] * (1 + gain) >= st_us[pos]:
            continue
        kept.append(i)
        end = pos + 1
        while end < len(st_mib) and st_us[end] >= us[i]:
            end += 1
        st_mib[pos + 1:end] = [float(mib[i])]
        st_us[pos + 1:end] = [float(us[i])]
    return np.array(kept, dtype=np.int64)


@dataclass(frozen=True)
class _Optimum:
    chosen: list[int]          # candidate indices of the plan
    curve: list[tuple[int, float]]
    near: list[int]            # candidate indices of the fewest-graph plan within 1%
    free: tuple[float, int]    # (us, graphs) without any budget
    pareto: list[tuple[int, list[int], float, float, float | None, bool]]  # (k, idx, us, MiB, s, within)
    max_allowed: int | None


def _optimise(p: np.ndarray, eager: np.ndarray, graph: np.ndarray, sizes: np.ndarray, m: int, padding: str,
              cost: ListCost, opts: PlanOptions) -> _Optimum:
    """The plan, the curve, the 1% knee and the Pareto table from one grid (module docstring)."""
    all_eager = float(np.dot(p, eager))
    cand = sizes[:m]
    u_cost, u_idx = (_unbounded_pad if padding == "pad" else _unbounded_exact)(p, eager, graph, m)
    k_u = len(u_idx)
    allowed = _max_graphs_allowed(cost, cand, m, opts) if m else np.zeros(0, dtype=np.int64)
    bounded = opts.max_graphs is not None or opts.memory_budget_mib is not None or opts.capture_budget_s is not None
    max_allowed = int(allowed.max(initial=0)) if bounded else None
    free = k_u == 0 or bool(allowed[u_idx[-1]] >= k_u)
    # Rows of the grid: every count a feasible plan can have, and the trade-offs (all sets, for
    # the Pareto table, whatever the budgets) up to TRADEOFF_MAX_GRAPHS graphs, less for many sizes.
    rows = min(m, TRADEOFF_MAX_GRAPHS, max(8, TRADEOFF_WORK // max(m * m, 1)))
    if not free:
        rows = max(rows, int(allowed.max(initial=0)))
    grid = (_grid_pad if padding == "pad" else _grid_exact)(p, eager, graph, m, rows)
    total = grid.total
    mem = cost.memory_mib(np.arange(rows + 1)[:, None], cand[None, :]) if m else np.zeros((rows + 1, 0))
    ok = _feasible(cost, cand, rows, opts, count=True)
    k, j, us = _pick_cell(total, ok, mem, all_eager)
    chosen = grid.buckets(k, j)
    if free and k_u > 0 and u_cost < us * (1 - _REL_TIE) - 1e-12:
        chosen, us = list(u_idx), u_cost

    # Curve: at most k graphs under the memory and capture budgets.
    ok_mt = _feasible(cost, cand, rows, opts, count=False)
    row_best = np.where(ok_mt & np.isfinite(total), total, np.inf)
    row_min = np.concatenate([[all_eager], row_best[1:].min(axis=1, initial=np.inf)])
    at_most = np.minimum.accumulate(row_min)
    k_cap = opts.max_graphs if opts.max_graphs is not None else rows
    last = min(k_cap, rows, k_u) if free else min(k_cap, rows)  # flat past the unbounded optimum
    curve = [(i, float(v)) for i, v in enumerate(at_most[: last + 1]) if np.isfinite(v)]
    if free and k_u > rows:
        curve.append((k_u, min(u_cost, curve[-1][1])))
    # Fewest graphs within the budgets whose plan is within 1% of this one.
    near = chosen
    for kk in range(min(k_cap, rows) + 1):
        if at_most[kk] <= us * (1 + NEAR_OPTIMAL_FRACTION):
            src = int(np.flatnonzero(row_min[: kk + 1] <= at_most[kk])[0])
            near = grid.buckets(src, int(np.argmin(row_best[src]))) if src > 0 else []
            break

    # Pareto table over the grid's cells (each count's own memory-vs-step front first: within a
    # count capture time is one number), all-eager, and the unbounded optimum past the grid.
    ck, cj, cu, cm = [np.array([0])], [np.array([-1])], [np.array([all_eager])], [np.array([0.0])]
    for r in range(1, rows + 1):  # one row of the grid per graph count
        js = np.flatnonzero(np.isfinite(total[r]))
        js = js[_front_2d(mem[r, js], total[r, js])]
        ck.append(np.full(js.size, r))
        cj.append(js)
        cu.append(total[r, js])
        cm.append(mem[r, js])
    if k_u > rows:
        ck.append(np.array([k_u]))
        cj.append(np.array([-2]))
        cu.append(np.array([u_cost]))
        cm.append(np.array([cost.of(cand[u_idx].tolist())[0]]))
    ck, cj, cu, cm = (np.concatenate(x) for x in (ck, cj, cu, cm))
    pareto = []
    cc = cost.capture_s(ck, np.zeros(ck.size))
    cc = cc if cc is not None else np.zeros(ck.size)
    exact = _pareto_cells(cu, cm, cc)
    gain = PARETO_MIN_GAIN
    front = _thin(exact, cu, cm, gain)
    while front.size > PARETO_MAX_POINTS:  # a few doublings at most
        gain *= 2
        front = _thin(front, cu, cm, gain)
    for i in front:
        kk, jj = int(ck[i]), int(cj[i])
        idx = [] if kk == 0 else (list(u_idx) if jj == -2 else grid.buckets(kk, jj))
        within = True if jj == -1 else (free if jj == -2 else bool(ok[kk, jj]))
        s = cost.of(cand[idx].tolist())[1] if idx else (0.0 if cost.per_size_s is not None else None)
        pareto.append((kk, idx, float(cu[i]), float(cm[i]), s, within))
    pareto.sort(key=lambda t: (t[0], t[3]))
    return _Optimum(chosen, curve, near, (u_cost, k_u), pareto, max_allowed)


def _crossover(costs: CostTable, threshold: float, max_size: int | None = None) -> int | None:
    """The smallest size from which graphs win less than ``threshold`` up to the largest size with costs (or
    ``max_size``, no batch running above it), ``None`` when they win throughout."""
    top = costs.max_batch_size if max_size is None else max(min(costs.max_batch_size, max_size), costs.min_batch_size)
    xs = np.arange(costs.min_batch_size, top + 1)
    e, g = costs.costs_at(xs)
    above = np.flatnonzero(e / g - 1.0 >= threshold)
    if above.size == 0:
        return int(xs[0])
    if above[-1] == xs.size - 1:
        return None
    return int(xs[above[-1] + 1])


def _list_cost(costs: CostTable, opts: PlanOptions, dims: ModelDims | None, model: MemoryModel | None,
               nodes_per_size: float | None) -> ListCost:
    """What a list costs: the memory model with the model's dimensions, else a constant per graph.

    Capture time comes from the memory model's capture-time part: with the dimensions, all of it;
    without them, when the kernel nodes per graph are known (a trace's or the harness's kernels
    per step), its FULL-graph form ``capture_base_s + (capture_graph_s + capture_node_ms * nodes /
    1000) * |S|``, which needs no dimensions; else none (capture time unknown).
    """
    m = model or default_memory_model()
    fitted = m.list_cost(dims, "full", nodes_per_size=nodes_per_size) if dims is not None else None
    if fitted is not None:
        cap = (fitted.fixed_s, fitted.per_size_s)
    elif nodes_per_size is not None:
        cap = (m.capture_base_s, m.capture_graph_s + m.capture_node_ms * nodes_per_size / 1000.0)
    else:
        cap = (None, None)
    if opts.graph_memory_mib is not None:
        x = float(opts.graph_memory_mib)
        return ListCost(0.0, 0.0, x, *cap, source=f"{x:g} MiB per graph, given (--graph-memory-mib)")
    if fitted is not None:
        return fitted
    if costs.graph_memory_bytes() is not None:
        x = costs.graph_memory_bytes() / _MIB
        return ListCost(0.0, 0.0, x, *cap, source=f"{x:.3g} MiB per graph, the largest graph-pool growth measured "
                                                  f"by the harness (no model dimensions)")
    return ListCost(0.0, 0.0, DEFAULT_GRAPH_MEMORY_MIB, *cap,
                    source=f"assumed {DEFAULT_GRAPH_MEMORY_MIB:g} MiB per graph (no measurement, no model dimensions)")


def _score_baselines(specs: Sequence[BaselineSpec], table: CostTable, sizes: np.ndarray, p: np.ndarray,
                     cost: ListCost, opts: PlanOptions) -> dict[str, Baseline]:
    """Each baseline list scored on the plan's costs, distribution and list cost, and whether it fits the budgets."""
    scored: dict[str, Baseline] = {}
    for spec in specs:  # a handful of lists
        sc = _score(table, sizes, p, spec.sizes, opts.padding)
        mib, cap_s = cost.of(spec.sizes)
        ok = ((opts.max_graphs is None or len(spec.sizes) <= opts.max_graphs)
              and (opts.memory_budget_mib is None or mib <= opts.memory_budget_mib + 1e-9)
              and (opts.capture_budget_s is None or (cap_s is not None and cap_s <= opts.capture_budget_s + 1e-9)))
        scored[spec.engine] = Baseline(spec.engine, sc, mib, ok, spec.note + ("" if ok else "; over the plan's budget"),
                                       cap_s, spec.version)
    return scored


def compare_capture_list(costs: CostTable, distribution: Mapping[int, float], current: Sequence[int]) -> dict | None:
    """The best list with as many graphs as ``current`` (:func:`plan_capture` with ``max_graphs =
    len(current)``, padding) beside ``current`` itself, on the same costs and distribution: the
    planner's ``graphs``, ``capture_sizes``, ``expected_step_us``, ``padded_rows_fraction`` and
    ``padding_waste_us``, the same of the current list (``current_...``) and the plan's
    ``warnings``. ``None`` when the costs do not support a plan (no eager cost up to a bucket)."""
    try:
        plan = plan_capture(costs, distribution, PlanOptions(max_graphs=len(current)), baselines=[])
        cur = score_buckets(costs, distribution, current)
    except InputError:
        return None
    return {"graphs": len(plan.buckets), "capture_sizes": list(plan.buckets),
            "expected_step_us": _r(plan.expected_step_us), "padded_rows_fraction": _r(plan.score.padded_rows_fraction),
            "padding_waste_us": _r(plan.score.padding_waste_us),
            "current_graphs": len(current), "current_expected_step_us": _r(cur.expected_step_us),
            "current_padded_rows_fraction": _r(cur.padded_rows_fraction),
            "current_padding_waste_us": _r(cur.padding_waste_us), "warnings": list(plan.warnings)}


def plan_capture(costs: CostTable, distribution: Mapping[int, float], options: PlanOptions | None = None,
                 dims: ModelDims | None = None, memory_model: MemoryModel | None = None,
                 nodes_per_size: float | None = None, baselines: Sequence[BaselineSpec] | None = None,
                 list_cost: ListCost | None = None) -> Plan:
    """The bucket set minimising the expected step time under ``options``' budgets (exact).

    ``distribution`` maps batch size to step count (or any non-negative weight); sizes
    outside the cost table are clamped below it and extrapolated above it, with a warning in
    the plan and, above it, the plan's expected step on the extrapolation's low and high lines.
    ``dims`` (the model's dimensions) switches graph memory and capture time to
    ``memory_model`` (default: the committed fit), with ``nodes_per_size`` kernel nodes per
    graph when known. ``list_cost`` replaces all of that with a given cost of lists.
    ``baselines`` default to :func:`default_baselines`.
    """
    opts = options or PlanOptions()
    sizes, p = _normalise(distribution)
    notes: list[str] = []
    cost = list_cost if list_cost is not None else _list_cost(costs, opts, dims, memory_model, nodes_per_size)
    if opts.capture_budget_s is not None and cost.per_size_s is None:
        raise InputError("--capture-seconds needs a capture-time model: give the model's dimensions "
                         "(--model-config, or a timings file with a 'models' section), or traces (their kernels "
                         "per step size the graphs)")

    max_bs = opts.max_batch_size
    m = int(np.searchsorted(sizes, max_bs, side="right")) if max_bs is not None else sizes.size
    if m < sizes.size:
        share = float(p[m:].sum())
        notes.append(f"{share:.1%} of steps have a batch size above --max-batch-size {max_bs} and run eager")

    specs = list(baselines) if baselines is not None else default_baselines(max_bs, opts.padding)
    needed = _needed_sizes(sizes, [s.sizes for s in specs], opts.padding).tolist()
    table = costs.extended_to(needed)
    notes += [w for w in table.warnings if w not in costs.warnings]
    eager, graph = table.costs_at(sizes)

    opt = _optimise(p, eager, graph, sizes, m, opts.padding, cost, opts)
    chosen = sizes[opt.chosen].tolist()
    score = _score(table, sizes, p, chosen, opts.padding)
    if opt.max_allowed is not None and (opts.memory_budget_mib is not None or opts.capture_budget_s is not None):
        if opts.max_graphs is None or opt.max_allowed < opts.max_graphs:
            what = " and ".join(b for b, v in (("memory", opts.memory_budget_mib), ("capture", opts.capture_budget_s))
                                if v is not None)
            basis = [f"memory: {cost.source}"] if opts.memory_budget_mib is not None else []
            if opts.capture_budget_s is not None and cost.per_size_s is not None:
                basis.append(f"capture: {cost.fixed_s or 0.0:.3g} s + {cost.per_size_s:.3g} s per size")
            notes.append(f"the {what} budget allows {opt.max_allowed} graphs at most ({'; '.join(basis)})")
    if not chosen and _costs_tie(eager, graph):
        notes.append("no bucket lowers the expected step time: eager and graph costs are equal at every batch size "
                     "of the distribution (an eager cost estimated at its floor, the graph step itself, where no "
                     "eager step was measured), so graphs cost memory for nothing on these costs; a real eager step "
                     "also pays the framework's host time per op: measure a few eager steps (or harness timings) "
                     "before turning graphs off")
    elif not chosen:
        notes.append("no bucket lowers the expected step time under these budgets: run eager")
    free_us, free_k = opt.free
    if free_k > len(chosen) and free_us < score.expected_step_us * (1 - _REL_TIE):
        notes.append(f"the budget binds: without it {free_k} graphs would give {free_us:,.1f} us per step "
                     f"({1 - free_us / score.expected_step_us:.2%} less)")
    extrapolated = None
    if needed and needed[-1] > costs.max_batch_size:
        low, high = (_score(costs.extended_to(needed, band), sizes, p, chosen, opts.padding).expected_step_us
                     for band in ("low", "high"))
        above = [b for b in needed if b > costs.max_batch_size]
        extrapolated = {**costs.extrapolation().to_dict(), "batch_sizes": above,
                        "expected_step_us_low": _r(low), "expected_step_us_high": _r(high)}

    cost_band = None
    if costs.graph_band_sizes:
        # The model's band on the graph costs: this list's expected step at either end, and the list each end plans
        # (the same budgets and memory; no baselines) — how far the plan rests on the model
        ends = [costs.at_graph_band(e) for e in ("low", "high")]
        at_ends = [_score(t.extended_to(needed), sizes, p, chosen, opts.padding).expected_step_us for t in ends]
        planned = [plan_capture(t, distribution, opts, dims, memory_model, nodes_per_size, (), cost) for t in ends]
        # what keeping this list costs at either end against the list planned there (0: the same or as good)
        regret = max(max(a / q.expected_step_us - 1.0, 0.0) if q.expected_step_us > 0 else 0.0
                     for a, q in zip(at_ends, planned))
        cost_band = {"sizes_with_band": costs.graph_band_sizes, "expected_step_us_low": _r(min(at_ends)),
                     "expected_step_us_high": _r(max(at_ends)), "buckets_low": list(planned[0].buckets),
                     "buckets_high": list(planned[1].buckets), "regret_fraction": _r(regret, 6)}

    serve = _bucket_of(sizes, np.array(chosen, dtype=np.int64), opts.padding)
    _, g_serve = table.costs_at(np.where(serve > 0, serve, sizes))
    # Sizes left eager on a tie: an eager cost equal to its graph cost is an estimate at its floor (the graph step
    # itself; a measured eager step also pays the host per op), so the plan rests on the estimate there.
    tied = (serve <= 0) & _tied(eager, graph)
    if tied.any() and not (not chosen and _costs_tie(eager, graph)):  # an all-tie plan of no graphs says so above
        left = sizes[tied].tolist()
        shown = ", ".join(str(b) for b in left[:8]) + (f" and {len(left) - 8} more" if len(left) > 8 else "")
        notes.append(f"bs {shown} ({float(p[tied].sum()):.1%} of steps) run eager in this plan only because their eager "
                     f"cost is estimated at its floor, the graph step itself (no eager step measured there): a real "
                     f"eager step also pays the framework's host time per op, so capturing them may well pay; measure "
                     f"a few eager steps (or pass harness timings) before leaving them uncaptured")
    rows = tuple(PlanRow(int(b), float(w), float(e), float(g), table.at(int(b)).source,
                         int(s) if s > 0 else None, float(gs if s > 0 else e))
                 for b, w, e, g, s, gs in zip(sizes.tolist(), p.tolist(), eager.tolist(), graph.tolist(),
                                             serve.tolist(), g_serve.tolist()))

    scored = _score_baselines(specs, table, sizes, p, cost, opts)
    pareto = tuple(ParetoPoint(k, tuple(sizes[idx].tolist()), us, mib, s, within)
                   for k, idx, us, mib, s, within in opt.pareto)
    return Plan(score=score, all_eager_expected_step_us=float(np.dot(p, eager)),
                crossover_batch_size=_crossover(costs, opts.win_threshold, opts.max_batch_size), per_batch=rows, baselines=scored,
                options=opts, max_graphs_effective=opt.max_allowed, list_cost=cost, tradeoff=tuple(opt.curve),
                buckets_within_1pct=tuple(int(x) for x in sizes[opt.near].tolist()), costs=costs,
                warnings=tuple(list(costs.warnings) + notes), extrapolation=extrapolated, pareto=pareto,
                model_dims=dims, cost_band=cost_band)
