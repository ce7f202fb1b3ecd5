"""Which batch sizes to capture as CUDA graphs: the exact best bucket set for a distribution.

**Model.** A server capturing the buckets ``B`` runs a decode step of batch size ``b``:

* ``padding="pad"`` (vLLM, SGLang and TensorRT-LLM's default): the graph of the smallest
  bucket ``>= b``, at that bucket's graph cost (the batch is padded up to it); eager when
  ``b`` is above the largest bucket.
* ``padding="exact"``: the graph of ``b`` only if ``b`` is a bucket, else eager.

With ``p_b`` the share of steps at batch size ``b`` (the distribution, normalised), the
**expected step time** is ``sum_b p_b * cost_b`` in microseconds; :func:`plan_capture`
chooses at most ``K`` buckets, each at most ``max_batch_size``, that minimise it.

**Exactness.** Candidate buckets are the batch sizes that occur in the distribution. That
loses nothing for ``pad``: costs are non-decreasing in batch size (:mod:`analyzer.planning.costs`
fits them so), so a bucket can always be moved down to the largest distribution size it
serves; it still serves the same steps, and each at a cost no higher. For ``exact`` a bucket
outside the distribution serves no step. Over the sorted candidates ``s_1 < ... < s_M`` with
``P_j = p_1 + ... + p_j`` the dynamic programme is::

    f_1(j) = P_j * g(s_j)
    f_k(j) = min_{i<j} f_{k-1}(i) + (P_j - P_i) * g(s_j)      # s_j the k-th bucket
    best_k = min_j f_k(j) + sum_{t>j} p_t * e(s_t)               # above s_j: eager

``O(K * M^2)``, each ``f_k`` one vectorised ``M x M`` minimum. The plan takes the best over
``k <= K`` (fewest graphs on ties), so more budget never plans worse. The trade-off curve is
"at most ``k`` graphs", ``min_{k' <= k} best_k'``: exactly ``k`` graphs can be worse than fewer
when a graph is slower than the eager step it replaces, and the curve equals the plan made
with ``max_graphs=k``. When the budget does
not bind, the optimum is known in ``O(M)`` (every candidate up to the best largest bucket is
a bucket, see :func:`_unbounded_pad`) and the DP only draws the trade-off curve below it.
``exact`` has no interaction between buckets: the ``k`` best are the ``k`` largest positive
savings ``p_b * (e(b) - g(b))``.

**Memory.** Each graph is charged ``graph_memory_mib`` (the option; else the largest
positive graph-pool growth the harness measured; else :data:`DEFAULT_GRAPH_MEMORY_MIB`, an
assumption the plan states). A memory budget ``M`` then allows ``floor(M / graph_memory_mib)``
graphs, combined with ``max_graphs`` by taking the smaller. One constant per graph keeps
the optimisation exact and is conservative: servers capture largest first into one shared
pool, so real growth per extra graph is usually smaller.

**Crossover.** ``win(b) = e(b) / g(b) - 1``, evaluated at every integer batch size the cost
table covers; the crossover is the smallest ``b`` such that ``win < win_threshold`` at ``b``
and every size above it (``None`` when the win at the largest size still clears it).

**Padding waste** (``padding_waste_us``): expected time per step spent because padded
steps run a bigger graph than their batch needs, ``sum_b p_b * (g(bucket(b)) - g(b))``;
``padded_rows_fraction`` is the share of graph-computed rows that are padding.
"""
from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field

import numpy as np

from analyzer.engines import ENGINES
from analyzer.engines import NAMES as SERVERS
from analyzer.engines import default_sizes as server_default_sizes
from analyzer.engines.sglang import DEFAULT_MAX_SIZE as SGLANG_DEFAULT_MAX_BS  # noqa: F401 (re-exported)
from analyzer.engines.sglang import default_sizes as sglang_default_sizes  # noqa: F401
from analyzer.engines.tensorrt_llm import DEFAULT_MAX_SIZE as TRTLLM_DEFAULT_MAX_BS  # noqa: F401
from analyzer.engines.tensorrt_llm import default_sizes as tensorrt_llm_default_sizes  # noqa: F401
from analyzer.engines.vllm import DEFAULT_MAX_SIZE as VLLM_MAX_CAPTURE  # noqa: F401
from analyzer.engines.vllm import default_sizes as vllm_default_sizes  # noqa: F401
from analyzer.errors import InputError
from analyzer.planning.costs import CostTable

SCHEMA = "launchgap.plan/1"
PADDING_POLICIES = ("pad", "exact")
#: Per-graph memory assumed when neither the user nor the harness gives one (MiB). An
#: assumption, not a measurement: vLLM reports a few hundred MiB for ~50 graphs of a
#: 7-8B model, i.e. single-digit MiB per graph; 32 leaves room for larger models.
DEFAULT_GRAPH_MEMORY_MIB = 32.0
#: ``graphs_within_1pct``: fewest graphs whose plan is within this share of the best plan.
NEAR_OPTIMAL_FRACTION = 0.01
#: When the budget does not bind, the trade-off curve (best plan per graph count) is drawn up to this many graphs.
TRADEOFF_MAX_GRAPHS = 128
_REL_TIE = 1e-12


@dataclass(frozen=True)
class PlanOptions:
    """Budgets and policy of a capture plan.

    ``max_graphs``: at most this many buckets. ``memory_budget_mib``: total graph memory
    allowed; with ``graph_memory_mib`` (per graph; default from the costs' measured graph
    pool, else :data:`DEFAULT_GRAPH_MEMORY_MIB`) it caps the number of graphs too.
    ``max_batch_size``: no bucket above it (and the servers' default lists are cut there).
    ``padding``: ``"pad"`` or ``"exact"``. ``win_threshold``: the crossover's win threshold.
    """

    max_graphs: int | None = None
    memory_budget_mib: float | None = None
    graph_memory_mib: float | None = None
    max_batch_size: int | None = None
    padding: str = "pad"
    win_threshold: float = 0.05

    def __post_init__(self) -> None:
        if self.max_graphs is not None and self.max_graphs < 0:
            raise InputError(f"--max-graphs must be >= 0, got {self.max_graphs}")
        for name, v in (("--memory-budget-mib", self.memory_budget_mib), ("--graph-memory-mib", self.graph_memory_mib)):
            if v is not None and not (math.isfinite(v) and v >= 0):
                raise InputError(f"{name} must be a non-negative number, got {v}")
        if self.graph_memory_mib is not None and self.graph_memory_mib == 0 and self.memory_budget_mib is not None:
            raise InputError("--graph-memory-mib 0 makes the memory budget meaningless; give a positive estimate")
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
class Baseline:
    """A server's default capture list under the same distribution, costs and padding policy."""

    name: str
    score: BucketScore
    memory_mib: float
    within_budget: bool
    note: str

    def to_dict(self, plan_us: float) -> dict:
        s = self.score
        return {"buckets": list(s.buckets), "expected_step_us": _r(s.expected_step_us), "n_graphs": s.n_graphs,
                "memory_mib": _r(self.memory_mib), "within_budget": self.within_budget,
                "padding_waste_us": _r(s.padding_waste_us), "graph_step_fraction": _r(s.graph_step_fraction, 6),
                "plan_saving_fraction": _r(1 - plan_us / s.expected_step_us, 6) if s.expected_step_us > 0 else 0.0,
                "note": self.note}


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
    graph_memory_mib: float
    graph_memory_source: str
    tradeoff: tuple[tuple[int, float], ...]
    buckets_within_1pct: tuple[int, ...]
    costs: CostTable
    warnings: tuple[str, ...] = field(default=())
    #: Set when some cost above the table's largest size was needed: the fitted growth, the sizes
    #: it served, and this plan's expected step on the band's low and high lines (us).
    extrapolation: Mapping | None = None

    @property
    def buckets(self) -> tuple[int, ...]:
        return self.score.buckets

    @property
    def expected_step_us(self) -> float:
        return self.score.expected_step_us

    @property
    def memory_used_mib(self) -> float:
        return self.graph_memory_mib * self.score.n_graphs

    @property
    def speedup_vs_all_eager(self) -> float:
        return self.all_eager_expected_step_us / self.expected_step_us if self.expected_step_us > 0 else 0.0

    def configs(self) -> dict:
        """Ready-to-paste capture settings per server (see :mod:`analyzer.engines`)."""
        return {e.NAME: e.capture_config(list(self.buckets), self.options.padding) for e in ENGINES}

    def config_snippets(self) -> dict[str, str]:
        """The same settings as command-line / YAML text."""
        return {e.NAME: e.config_snippet(list(self.buckets), self.options.padding) for e in ENGINES}

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
            "padding_waste_us": _r(s.padding_waste_us),
            "padded_rows_fraction": _r(s.padded_rows_fraction, 6),
            "graph_step_fraction": _r(s.graph_step_fraction, 6),
            "memory": {"graph_memory_mib": _r(self.graph_memory_mib), "graph_memory_source": self.graph_memory_source,
                       "used_mib": _r(self.memory_used_mib), "budget_mib": self.options.memory_budget_mib,
                       "max_graphs_effective": self.max_graphs_effective},
            "tradeoff": [{"graphs": k, "expected_step_us": _r(v)} for k, v in self.tradeoff],
            "graphs_within_1pct": len(self.buckets_within_1pct),
            "buckets_within_1pct": list(self.buckets_within_1pct),
            "win_threshold": self.options.win_threshold,
            "options": self.options.to_dict(),
            "costs": self.costs.to_dict(),
            "warnings": list(self.warnings),
            "extrapolation": dict(self.extrapolation) if self.extrapolation is not None else None,
        }


def _r(x: float, nd: int = 3) -> float:
    return round(float(x), nd)


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


def _dp_pad(p: np.ndarray, eager: np.ndarray, graph: np.ndarray, m: int, k_max: int
            ) -> tuple[np.ndarray, list[np.ndarray], list[np.ndarray]]:
    """Best expected step with exactly ``k`` buckets for ``k = 0..k_max`` (padding), and the DP tables.

    ``p``, ``eager``: every distribution size; ``graph``: their graph costs, of which the
    first ``m`` are candidates. Returns ``best[k]`` (inf where impossible) and per ``k`` the
    arrays ``f_k`` and their parents for backtracking.
    """
    tail = _tail_eager(p, eager)
    best = np.full(k_max + 1, np.inf)
    best[0] = float(np.dot(p, eager))
    fs: list[np.ndarray] = []
    parents: list[np.ndarray] = []
    if m == 0 or k_max == 0:
        return best, fs, parents
    g = graph[:m]
    Pm = np.cumsum(p)[:m]
    f = Pm * g
    fs.append(f)
    parents.append(np.full(m, -1, dtype=np.int64))
    best[1] = float(np.min(f + tail[:m]))
    # a[i, j] = f_{k-1}(i) - P_i g_j for i < j; +inf where i >= j (not a predecessor).
    pg = np.outer(Pm, g)
    blocked = np.where(np.tril(np.ones((m, m), dtype=bool)), np.inf, 0.0)
    a = np.empty((m, m))
    cols = np.arange(m)
    for k in range(2, min(k_max, m) + 1):  # one vectorised M x M step per bucket count
        np.subtract(f[:, None], pg, out=a)
        a += blocked
        par = np.argmin(a, axis=0)
        f = Pm * g + a[par, cols]
        fs.append(f)
        parents.append(par)
        best[k] = float(np.min(f + tail[:m]))
    return best, fs, parents


def _backtrack(fs: list[np.ndarray], parents: list[np.ndarray], tail: np.ndarray, k: int) -> list[int]:
    """Candidate indices of the best ``k``-bucket set."""
    if k == 0:
        return []
    f = fs[k - 1]
    j = int(np.argmin(f + tail[: f.size]))
    out = [j]
    for kk in range(k - 1, 0, -1):
        j = int(parents[kk][j])
        out.append(j)
    return out[::-1]


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


def _pick(best: np.ndarray) -> int:
    """Fewest buckets whose expected step equals the best (within float noise)."""
    finite = np.isfinite(best)
    lo = float(np.min(best[finite]))
    return int(np.flatnonzero(finite & (best <= lo * (1 + _REL_TIE) + 1e-12))[0])


def _optimise_pad(p: np.ndarray, eager: np.ndarray, graph: np.ndarray, m: int, k_max: int
                  ) -> tuple[list[int], list[tuple[int, float]], list[int], tuple[float, int]]:
    """Chosen candidate indices, the trade-off curve ``[(graphs, us)]``, the 1%-knee set and
    the unbounded optimum ``(us, graphs)``.

    When the budget does not bind (``k_max`` at least the unbounded optimum's size) the
    optimum comes from :func:`_unbounded_pad` and the DP only draws the curve below it, up to
    :data:`TRADEOFF_MAX_GRAPHS` graphs; otherwise the DP runs to ``k_max``.
    """
    u_cost, u_idx = _unbounded_pad(p, eager, graph, m)
    free = k_max >= len(u_idx)
    k_dp = min(len(u_idx) - 1, TRADEOFF_MAX_GRAPHS) if free else k_max
    best, fs, parents = _dp_pad(p, eager, graph, m, max(k_dp, 0))
    tail = _tail_eager(p, eager)
    k = _pick(best)
    if free and u_cost < best[k] * (1 - _REL_TIE) - 1e-12:
        chosen, final = u_idx, u_cost
    else:
        chosen, final = _backtrack(fs, parents, tail, k), float(best[k])
    # "At most k graphs": exactly k can be worse than fewer when a graph is slower than the
    # eager step it replaces, and a budget of k never forces k graphs.
    at_most = np.minimum.accumulate(best)
    curve = [(i, float(v)) for i, v in enumerate(at_most) if np.isfinite(v)]
    if free and len(u_idx) > k_dp:
        curve.append((len(u_idx), min(u_cost, curve[-1][1])))
    near_k = [i for i, v in enumerate(best) if np.isfinite(v) and v <= final * (1 + NEAR_OPTIMAL_FRACTION)]
    near = _backtrack(fs, parents, tail, near_k[0]) if near_k else chosen
    return chosen, curve, near, (u_cost, len(u_idx))


def _crossover(costs: CostTable, threshold: float) -> int | None:
    xs = np.arange(costs.min_batch_size, costs.max_batch_size + 1)
    e, g = costs.costs_at(xs)
    above = np.flatnonzero(e / g - 1.0 >= threshold)
    if above.size == 0:
        return int(xs[0])
    if above[-1] == xs.size - 1:
        return None
    return int(xs[above[-1] + 1])


def plan_capture(costs: CostTable, distribution: Mapping[int, float], options: PlanOptions | None = None) -> Plan:
    """The bucket set minimising the expected step time under ``options``' budgets (exact).

    ``distribution`` maps batch size to step count (or any non-negative weight); sizes
    outside the cost table are clamped below it and extrapolated above it, with a warning in
    the plan and, above it, the plan's expected step on the extrapolation's low and high lines.
    """
    opts = options or PlanOptions()
    sizes, p = _normalise(distribution)
    notes: list[str] = []

    # Per-graph memory and the effective bucket budget.
    if opts.graph_memory_mib is not None:
        gmem, gsrc = float(opts.graph_memory_mib), "given (--graph-memory-mib)"
    elif costs.graph_memory_bytes() is not None:
        gmem = costs.graph_memory_bytes() / (1024.0 * 1024.0)
        gsrc = "largest graph-pool growth measured by the harness"
    else:
        gmem, gsrc = DEFAULT_GRAPH_MEMORY_MIB, f"assumed {DEFAULT_GRAPH_MEMORY_MIB:g} MiB (no measurement)"
    k_cap = opts.max_graphs
    if opts.memory_budget_mib is not None:
        k_mem = int(math.floor(opts.memory_budget_mib / gmem + 1e-9)) if gmem > 0 else None
        if k_mem is not None:
            if k_cap is None or k_mem < k_cap:
                notes.append(f"memory budget {opts.memory_budget_mib:g} MiB at {gmem:.3g} MiB per graph "
                             f"allows {k_mem} graphs")
            k_cap = k_mem if k_cap is None else min(k_cap, k_mem)

    max_bs = opts.max_batch_size
    m = int(np.searchsorted(sizes, max_bs, side="right")) if max_bs is not None else sizes.size
    if m < sizes.size:
        share = float(p[m:].sum())
        notes.append(f"{share:.1%} of steps have a batch size above --max-batch-size {max_bs} and run eager")

    base_lists = {s: server_default_sizes(s, max_bs, opts.padding) for s in SERVERS}
    needed = _needed_sizes(sizes, list(base_lists.values()), opts.padding).tolist()
    table = costs.extended_to(needed)
    notes += [w for w in table.warnings if w not in costs.warnings]
    eager, graph = table.costs_at(sizes)
    k_max = m if k_cap is None else min(k_cap, m)

    if opts.padding == "pad":
        idx, curve, near_idx, (free_us, free_k) = _optimise_pad(p, eager, graph, m, k_max)
        chosen = sizes[idx].tolist()
        near = sizes[near_idx].tolist()
    else:
        saving = p[:m] * (eager[:m] - graph[:m])
        order = np.lexsort((sizes[:m], -saving))  # biggest saving first, smaller size on ties
        order = order[saving[order] > 0][:k_max]
        gained = np.concatenate([[0.0], np.cumsum(saving[order])])
        curve = [(i, float(np.dot(p, eager)) - float(gained[i])) for i in range(order.size + 1)]
        chosen = sorted(sizes[order].tolist())
        positive = int(np.count_nonzero(saving > 0))
        free_us, free_k = float(np.dot(p, eager)) - float(np.sum(saving[saving > 0])), positive
        k1 = next(i for i, v in curve if v <= curve[-1][1] * (1 + NEAR_OPTIMAL_FRACTION))
        near = sorted(sizes[order[:k1]].tolist())
    score = _score(table, sizes, p, chosen, opts.padding)
    extrapolated = None
    if needed and needed[-1] > costs.max_batch_size:
        low, high = (_score(costs.extended_to(needed, band), sizes, p, chosen, opts.padding).expected_step_us
                     for band in ("low", "high"))
        above = [b for b in needed if b > costs.max_batch_size]
        extrapolated = {**costs.extrapolation().to_dict(), "batch_sizes": above,
                        "expected_step_us_low": _r(low), "expected_step_us_high": _r(high)}
    if not chosen:
        notes.append("no bucket lowers the expected step time under these budgets: run eager")
    if free_k > k_max and free_us < score.expected_step_us:
        notes.append(f"the budget binds: without it {free_k} graphs would give {free_us:,.1f} us per step "
                     f"({1 - free_us / score.expected_step_us:.2%} less)")

    serve = _bucket_of(sizes, np.array(chosen, dtype=np.int64), opts.padding)
    _, g_serve = table.costs_at(np.where(serve > 0, serve, sizes))
    rows = tuple(PlanRow(int(b), float(w), float(e), float(g), table.at(int(b)).source,
                         int(s) if s > 0 else None, float(gs if s > 0 else e))
                 for b, w, e, g, s, gs in zip(sizes.tolist(), p.tolist(), eager.tolist(), graph.tolist(),
                                             serve.tolist(), g_serve.tolist()))

    baselines: dict[str, Baseline] = {}
    for name, lst in base_lists.items():
        sc = _score(table, sizes, p, lst, opts.padding)
        mem = gmem * len(lst)
        ok = (opts.max_graphs is None or len(lst) <= opts.max_graphs) and \
             (opts.memory_budget_mib is None or mem <= opts.memory_budget_mib + 1e-9)
        note = f"{name} default list" + (f" cut at --max-batch-size {max_bs}" if max_bs is not None else "")
        if name == "vllm" and opts.padding == "exact":
            note += "; vLLM always pads, scored exact-match here for a like-for-like comparison"
        if not ok:
            note += "; over the plan's budget"
        baselines[name] = Baseline(name, sc, mem, ok, note)

    return Plan(score=score, all_eager_expected_step_us=float(np.dot(p, eager)),
                crossover_batch_size=_crossover(costs, opts.win_threshold), per_batch=rows, baselines=baselines,
                options=opts, max_graphs_effective=k_cap, graph_memory_mib=gmem, graph_memory_source=gsrc,
                tradeoff=tuple(curve), buckets_within_1pct=tuple(int(x) for x in near), costs=costs,
                warnings=tuple(list(costs.warnings) + notes), extrapolation=extrapolated)
