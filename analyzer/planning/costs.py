"""The cost model: step cost per batch size, eager and CUDA-graph, fitted monotone.

A :class:`CostPoint` is the cost of one decode step at one batch size, in microseconds:
``eager_us`` run op by op, ``graph_us`` replayed from a captured CUDA graph. Its ``source``
says where the numbers came from, weakest part first:

* ``"measured"``: both costs observed at this batch size (harness timings, or an eager and
  a graph trace of this size);
* ``"predicted"``: eager observed, graph cost predicted by :mod:`launchgap.predict` from the
  eager trace (no graph trace at this size);
* ``"interpolated"``: at least one cost derived from other batch sizes (between observed
  sizes, or clamped below the smallest one by :meth:`CostTable.extended_to`);
* ``"extrapolated"``: above the largest size with costs, on the fitted growth (below).

The readers that build tables from harness timings and from analysed traces live in
:mod:`launchgap.planning.inputs`.

**Monotone fit.** A bigger batch never takes less time to run, but measurements are noisy
(truth.json's 1b eager step is 15.9 ms at bs 8 and 11.2 ms at bs 16). Each series (eager,
graph) is replaced by its isotonic regression over the observed sizes (least squares,
non-decreasing: pool adjacent violators, equal weights), each change listed in
``CostTable.warnings``; between observed sizes costs are linear, so the whole table is
non-decreasing in batch size. The planner relies on that (see :mod:`launchgap.planning.planner`).

**No silent extrapolation.** :meth:`CostTable.at` raises :class:`~launchgap.errors.InputError`
below the smallest or above the largest size in the table. :meth:`CostTable.extended_to` is
the explicit alternative, and lists what it did in the new table's ``warnings``:

* below the smallest size, the smallest size's costs (an overestimate: costs grow with batch);
* above the largest size ``t``, a straight line per series, anchored at ``t``'s cost, whose
  growth per batch row is the least-squares slope over the **upper sizes** (observed sizes
  ``>= t / 4``, at least the two largest), floored at zero and capped at ``c(t) / t``:
  ``c(b) = c(t) + s * (b - t)``. The cap is a step whose every microsecond grows with its rows
  (time proportional to the batch): decode reads its weights once, so no real step grows faster;
  two noisy sizes one row apart (a server log's 20 and 21 running requests, 16.6 and 35.6 ms)
  would otherwise give +19 ms a row.
  Past the launch-bound regime a step's cost grows with its device busy time, which is
  linear in the rows of the batch (the weights are read once, every row adds the same
  work), so the upper sizes' growth is the best evidence of what lies above them. The
  eager line is floored at the graph line: eager runs the same kernels plus their launches.
  The **uncertainty band** (``band="low"``/``"high"``) takes half and twice the fitted
  growth; the planner reports the plan's expected step under both.

Clamping above the largest size (what the planner did before) underestimates every large
bucket and over-values it: on the H200 timings cut at bs 159, with a distribution reaching
232, plans at 8 graphs came out 1.4-8.8% slower than the oracle's; with the fitted growth,
under 0.14% (``tests/unit/test_costs.py::test_extrapolation_held_out_h200``).
"""
from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field, replace

import numpy as np

from ..errors import InputError

SOURCES = ("measured", "predicted", "interpolated", "extrapolated")
#: Observed sizes at or above this share of the largest one are the upper sizes whose growth
#: is extrapolated (the two largest at least).
EXTRAPOLATION_UPPER_FRACTION = 0.25
#: The extrapolation's uncertainty band: the fitted growth per batch row times these (low, high).
EXTRAPOLATION_BAND = (0.5, 2.0)
BANDS = ("central", "low", "high")
#: Relative change below which the monotone fit is not worth a warning.
_FIT_NOTE_REL = 5e-4


@dataclass(frozen=True)
class CostPoint:
    """Cost of one decode step at ``batch_size`` (microseconds) and where it came from.

    ``graph_pool_bytes`` is the CUDA-graph memory pool growth measured when this size was
    captured (harness timings only; ``None`` when unknown). ``graph_us_low`` / ``graph_us_high``: the graph
    cost's band from the cost curve of a trace (``None`` without one).
    """

    batch_size: int
    eager_us: float
    graph_us: float
    source: str
    graph_pool_bytes: int | None = None
    #: The graph cost's band where the batch-scaling model gave it (the trace's cost curve's ``low_us`` /
    #: ``high_us``: :mod:`launchgap.costmodel`), ``None`` where the cost has no model band (timings, eager traces).
    graph_us_low: float | None = None
    graph_us_high: float | None = None

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class CostSeries:
    """One cost series (eager or graph) as observed: sizes ascending, one value and source each."""

    name: str
    sizes: np.ndarray
    values: np.ndarray
    sources: tuple[str, ...]


def _isotonic(values: np.ndarray) -> tuple[np.ndarray, list[tuple[int, int]]]:
    """Least-squares non-decreasing fit (pool adjacent violators, equal weights).

    Returns the fitted values and the ``(start, stop)`` index ranges that were pooled
    (only blocks of two or more points). The loop runs over observed batch sizes.
    """
    blocks: list[list[float]] = []  # [sum, count, start]
    for i, v in enumerate(values.tolist()):
        blocks.append([v, 1.0, float(i)])
        while len(blocks) > 1 and blocks[-2][0] / blocks[-2][1] > blocks[-1][0] / blocks[-1][1]:
            s, c, _ = blocks.pop()
            blocks[-1][0] += s
            blocks[-1][1] += c
    out = np.empty(len(values))
    pooled: list[tuple[int, int]] = []
    for s, c, start in blocks:
        a, b = int(start), int(start + c)
        out[a:b] = s / c
        if b - a > 1:
            pooled.append((a, b))
    return out, pooled


@dataclass(frozen=True)
class _Pooled:
    """One run of a series' points that the monotone fit pooled to their mean."""

    series: str
    sizes: str
    raw: str
    fitted: float


def _fit_series(series: CostSeries) -> tuple[CostSeries, list[_Pooled]]:
    fitted, pooled = _isotonic(series.values)
    runs = []
    for a, b in pooled:
        raw = series.values[a:b]
        if np.max(np.abs(raw - fitted[a])) <= _FIT_NOTE_REL * fitted[a]:
            continue
        runs.append(_Pooled(series.name, ", ".join(str(int(x)) for x in series.sizes[a:b]),
                            ", ".join(f"{x:,.1f}" for x in raw), float(fitted[a])))
    return CostSeries(series.name, series.sizes, fitted, series.sources), runs


#: The monotone-fit note lists at most this many pooled runs (the rest are counted).
_NOTE_RUNS = 4


def _monotone_note(runs: list[_Pooled]) -> list[str]:
    """One line for every run the monotone fit pooled, over both series: a table's costs get one
    "not monotone" note, however many places they dip."""
    if not runs:
        return []
    if len(runs) == 1:
        r = runs[0]
        return [f"{r.series} cost not monotone in batch size at bs {r.sizes} ({r.raw} us): "
                f"the monotone fit uses {r.fitted:,.1f} us for all of them"]
    shown = "; ".join(f"{r.series} at bs {r.sizes} ({r.raw} us -> {r.fitted:,.1f})" for r in runs[:_NOTE_RUNS])
    more = f"; {len(runs) - _NOTE_RUNS} more" if len(runs) > _NOTE_RUNS else ""
    return [f"costs not monotone in batch size at {len(runs)} places, each pooled to its mean by the monotone "
            f"fit: {shown}{more}"]


def _interp(series: CostSeries, sizes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Values of a series at ``sizes`` (inside its range) and whether each size was observed."""
    vals = np.interp(sizes, series.sizes, series.values)
    pos = np.clip(np.searchsorted(series.sizes, sizes), 0, len(series.sizes) - 1)
    return vals, series.sizes[pos] == sizes


def _weakest(*sources: str) -> str:
    return max(sources, key=SOURCES.index)


@dataclass(frozen=True)
class Extrapolation:
    """Costs above the largest size with costs: per series a line anchored at that size.

    ``top_batch_size``: the largest size with costs (non-extrapolated); ``eager_top_us``,
    ``graph_top_us``: the costs there; ``eager_us_per_bs``, ``graph_us_per_bs``: the fitted
    growth per batch row (least squares over ``fit_batch_sizes``, floored at 0).
    """

    top_batch_size: int
    eager_top_us: float
    graph_top_us: float
    eager_us_per_bs: float
    graph_us_per_bs: float
    fit_batch_sizes: tuple[int, ...]

    def costs_at(self, sizes: np.ndarray, band: str = "central") -> tuple[np.ndarray, np.ndarray]:
        """Eager and graph costs (us) at ``sizes`` (above the top) on the line of ``band``."""
        if band not in BANDS:
            raise InputError(f"band must be one of {', '.join(BANDS)}, got {band!r}")
        f = {"central": 1.0, "low": EXTRAPOLATION_BAND[0], "high": EXTRAPOLATION_BAND[1]}[band]
        d = np.asarray(sizes, dtype=float) - self.top_batch_size
        graph = self.graph_top_us + f * self.graph_us_per_bs * d
        eager = np.maximum(self.eager_top_us + f * self.eager_us_per_bs * d, graph)
        return eager, graph

    def describe(self) -> str:
        fit = size_span(list(self.fit_batch_sizes))
        return (f"extrapolated along the growth over bs {fit} (eager +{self.eager_us_per_bs:,.3g} us, graph "
                f"+{self.graph_us_per_bs:,.3g} us per batch row; eager at least the graph cost); uncertainty band "
                f"{EXTRAPOLATION_BAND[0]:g}x to {EXTRAPOLATION_BAND[1]:g}x that growth")

    def to_dict(self) -> dict:
        return {"top_batch_size": self.top_batch_size, "eager_us_per_bs": round(self.eager_us_per_bs, 6),
                "graph_us_per_bs": round(self.graph_us_per_bs, 6), "fit_batch_sizes": list(self.fit_batch_sizes),
                "band_factors": list(EXTRAPOLATION_BAND)}


def _upper_slope(x: np.ndarray, y: np.ndarray) -> float:
    """Least-squares slope of ``y`` over ``x``, floored at 0 (costs do not fall with batch size)."""
    if x.size < 2:
        return 0.0
    xc = x - x.mean()
    return max(0.0, float(np.dot(xc, y - y.mean()) / np.dot(xc, xc)))


@dataclass(frozen=True)
class CostTable:
    """Costs at a set of batch sizes, sorted, non-decreasing in batch size; linear in between.

    Build one with :meth:`fitted` (or the loaders below), which applies the monotone fit;
    the plain constructor checks the invariants and refuses a table that breaks them.
    ``origin`` says where the costs came from, ``warnings`` what was adjusted on the way.
    """

    points: tuple[CostPoint, ...]
    origin: str = ""
    warnings: tuple[str, ...] = field(default=())
    #: The eager costs are a floor: a graph-only trace's kernels per step times the prior host cost per launch (a
    #: bare op's launch, :data:`launchgap.costmodel.DEFAULT_HOST_US_PER_LAUNCH`; model code's launches cost more),
    #: so every graph win read from them is a lower bound (:attr:`launchgap.costmodel.EagerCurve.floor`).
    eager_floor: bool = False

    def __post_init__(self) -> None:
        if not self.points:
            raise InputError(f"no batch sizes with costs{self._from()}")
        sizes = np.array([p.batch_size for p in self.points], dtype=np.int64)
        eager, graph = self._arrays()
        if np.any(np.diff(sizes) <= 0):
            raise InputError(f"cost points must have distinct batch sizes in ascending order{self._from()}")
        if sizes[0] < 1:
            raise InputError(f"batch sizes must be positive{self._from()}")
        if not (np.all(np.isfinite(eager)) and np.all(np.isfinite(graph)) and np.all(eager > 0) and np.all(graph > 0)):
            bad = [f"{kind} cost at bs {size_span(sizes[m].tolist())} ({_us_range(v[m])})"
                   for kind, v in (("eager", eager), ("graph", graph)) if (m := ~(np.isfinite(v) & (v > 0))).any()]
            raise InputError(f"step costs must be positive finite microseconds: {'; '.join(bad)}{self._from()}")
        tol = 1e-9 * max(float(eager.max()), float(graph.max()))
        if np.any(np.diff(eager) < -tol) or np.any(np.diff(graph) < -tol):
            raise InputError(f"costs must not decrease with batch size; build the table with CostTable.fitted"
                             f"{self._from()}")
        bad = [p.source for p in self.points if p.source not in SOURCES]
        if bad:
            raise InputError(f"unknown cost source {bad[0]!r} (expected one of {', '.join(SOURCES)}){self._from()}")

    def _from(self) -> str:
        return f" ({self.origin})" if self.origin else ""

    def _arrays(self) -> tuple[np.ndarray, np.ndarray]:
        return (np.array([p.eager_us for p in self.points], dtype=float),
                np.array([p.graph_us for p in self.points], dtype=float))

    # --- construction ---------------------------------------------------------------------
    @classmethod
    def fitted(cls, points: Iterable[CostPoint], origin: str = "", warnings: Iterable[str] = ()) -> CostTable:
        """A table from raw points in any order: the monotone fit applied per series, changes warned."""
        pts = sorted(points, key=lambda p: p.batch_size)
        sizes = np.array([p.batch_size for p in pts], dtype=np.int64)
        if len(pts) != len(set(sizes.tolist())):
            raise InputError(f"duplicate batch sizes in cost points{' (' + origin + ')' if origin else ''}")
        eager = CostSeries("eager", sizes, np.array([p.eager_us for p in pts], float),
                           tuple("measured" for _ in pts))
        graph = CostSeries("graph", sizes, np.array([p.graph_us for p in pts], float),
                           tuple("predicted" if p.source == "predicted" else "measured" for p in pts))
        pools = {p.batch_size: p.graph_pool_bytes for p in pts}
        table = table_from_series(eager, graph, origin, list(warnings), pools)
        # Interpolated inputs stay interpolated.
        src = {p.batch_size: p.source for p in pts}
        return CostTable(tuple(CostPoint(q.batch_size, q.eager_us, q.graph_us, _weakest(q.source, src[q.batch_size]),
                                         q.graph_pool_bytes) for q in table.points), table.origin, table.warnings)

    def with_graph_band(self, low_fraction: Mapping[int, float], high_fraction: Mapping[int, float]) -> CostTable:
        """This table with each point's graph cost band: its graph cost times ``low_fraction`` / ``high_fraction``
        of its batch size (points of a size not in them keep none)."""
        pts = tuple(replace(p, graph_us_low=p.graph_us * float(low_fraction[p.batch_size]),
                            graph_us_high=p.graph_us * float(high_fraction[p.batch_size]))
                    if p.batch_size in low_fraction and p.batch_size in high_fraction else p for p in self.points)
        return replace(self, points=pts)

    @property
    def graph_band_sizes(self) -> int:
        """How many points carry a graph cost band."""
        return sum(p.graph_us_low is not None and p.graph_us_high is not None for p in self.points)

    def at_graph_band(self, end: str) -> CostTable:
        """This table with every graph cost at its band's ``end`` (``"low"`` or ``"high"``) where it has a band (the
        others as they are), kept non-decreasing by a running maximum; the points carry no band.

        An eager cost that is no more than its graph cost moves with it: an eager step bound by its GPU runs the same
        kernels (an eager estimate at its floor is the graph step itself), so the band moves both, and the two keep
        the tie they had. An eager cost above its graph cost stays, at least the graph cost's end (an eager step
        runs every kernel a replay does)."""
        if end not in ("low", "high"):
            raise ValueError(f"end must be 'low' or 'high', not {end!r}")
        vals = np.array([(p.graph_us_low if end == "low" else p.graph_us_high)
                         if p.graph_us_low is not None and p.graph_us_high is not None else p.graph_us
                         for p in self.points], dtype=float)
        vals = np.maximum.accumulate(vals)
        graph = np.array([p.graph_us for p in self.points], dtype=float)
        eager = np.array([p.eager_us for p in self.points], dtype=float)
        eager = np.maximum.accumulate(np.where(eager <= graph, eager + (vals - graph), np.maximum(eager, vals)))
        return replace(self, points=tuple(CostPoint(p.batch_size, float(e), float(v), p.source, p.graph_pool_bytes)
                                          for p, e, v in zip(self.points, eager.tolist(), vals.tolist())))

    # --- lookups --------------------------------------------------------------------------
    @property
    def batch_sizes(self) -> list[int]:
        return [p.batch_size for p in self.points]

    @property
    def min_batch_size(self) -> int:
        return self.points[0].batch_size

    @property
    def max_batch_size(self) -> int:
        return self.points[-1].batch_size

    def _check_range(self, sizes: np.ndarray) -> None:
        lo, hi = self.min_batch_size, self.max_batch_size
        out = sizes[(sizes < lo) | (sizes > hi)]
        if out.size:
            raise InputError(f"batch size {int(out[0])} is outside the sizes with costs ({lo}..{hi}); costs are "
                             f"not extrapolated silently: record that size or extend explicitly (CostTable.extended_to)"
                             f"{self._from()}")

    def costs_at(self, sizes: Iterable[int] | np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Eager and graph step costs (us) at many sizes at once; same range rule as :meth:`at`."""
        s = np.asarray(list(sizes) if not isinstance(sizes, np.ndarray) else sizes, dtype=np.int64)
        self._check_range(s)
        xs = np.array(self.batch_sizes, dtype=float)
        eager, graph = self._arrays()
        return np.interp(s, xs, eager), np.interp(s, xs, graph)

    def at(self, bs: int) -> CostPoint:
        """The cost at ``bs``: the point itself if observed, else linear between its neighbours.

        Raises :class:`InputError` outside ``min_batch_size..max_batch_size`` (never extrapolates).
        """
        bs = int(bs)
        self._check_range(np.array([bs]))
        i = int(np.searchsorted(self.batch_sizes, bs))
        p = self.points[i]
        if p.batch_size == bs:
            return p
        e, g = self.costs_at(np.array([bs]))
        return CostPoint(bs, float(e[0]), float(g[0]), "interpolated", None)

    def extrapolation(self) -> Extrapolation:
        """The line that extends this table above its largest (non-extrapolated) size; see the module docstring."""
        pts = [p for p in self.points if p.source != "extrapolated"]
        x = np.array([p.batch_size for p in pts], dtype=float)
        e = np.array([p.eager_us for p in pts])
        g = np.array([p.graph_us for p in pts])
        top = pts[-1]
        up = x >= EXTRAPOLATION_UPPER_FRACTION * top.batch_size
        up[-2:] = True
        return Extrapolation(top.batch_size, top.eager_us, top.graph_us,
                             min(_upper_slope(x[up], e[up]), top.eager_us / top.batch_size),
                             min(_upper_slope(x[up], g[up]), top.graph_us / top.batch_size), tuple(int(v) for v in x[up]))

    def extended_to(self, sizes: Iterable[int], band: str = "central") -> CostTable:
        """This table plus every size in ``sizes`` outside its range: clamped below, extrapolated above.

        ``band`` picks the extrapolation's line (``"central"``, ``"low"``, ``"high"``). Each added
        range is listed in ``warnings`` (explicit, never silent).
        """
        lo, hi = self.points[0], self.points[-1]
        want = sorted({int(s) for s in sizes})
        below = [s for s in want if s < lo.batch_size]
        above = [s for s in want if s > hi.batch_size]
        if not below and not above:
            return self
        extra = [CostPoint(s, lo.eager_us, lo.graph_us, "interpolated", None) for s in below]
        notes = list(self.warnings)
        if below:
            notes.append(f"batch sizes {size_span(below)} are below the smallest size with costs ({lo.batch_size}): "
                         f"clamped to bs {lo.batch_size}'s costs (an overestimate, costs grow with batch size)")
        if above:
            ext = self.extrapolation()
            e, g = ext.costs_at(np.array(above), band)
            extra += [CostPoint(s, float(a), float(b), "extrapolated", None) for s, a, b in zip(above, e, g)]
            notes.append(f"batch sizes {size_span(above)} are above the largest size with costs "
                         f"({ext.top_batch_size}): {ext.describe()}; record larger sizes to remove the doubt")
        pts = sorted(self.points + tuple(extra), key=lambda p: p.batch_size)
        return replace(self, points=tuple(pts), warnings=tuple(notes))

    def graph_memory_bytes(self) -> int | None:
        """Largest positive measured graph-pool growth of any point, or ``None`` when none was measured.

        Graphs captured into a shared pool often grow it by nothing (truth.json records zero or
        negative deltas); only positive growths are evidence of per-graph memory.
        """
        vals = [p.graph_pool_bytes for p in self.points if p.graph_pool_bytes is not None and p.graph_pool_bytes > 0]
        return max(vals) if vals else None

    def to_dict(self) -> dict:
        return {"origin": self.origin, "points": [p.to_dict() for p in self.points], "warnings": list(self.warnings),
                "eager_floor": self.eager_floor}


def _us_range(v: np.ndarray) -> str:
    """Costs ``v`` (us) for a message: the finite ones as one value or lowest to highest, and whether some are not
    finite."""
    fin = v[np.isfinite(v)]
    out = [] if not fin.size else [f"{fin.min():,.1f} us" if fin.min() == fin.max()
                                   else f"{fin.min():,.1f} to {fin.max():,.1f} us"]
    return ", ".join(out + (["not finite"] if fin.size < v.size else []))


def size_span(sizes: list[int]) -> str:
    return ", ".join(str(s) for s in sizes) if len(sizes) <= 6 else f"{sizes[0]}..{sizes[-1]} ({len(sizes)} sizes)"


def table_from_series(eager: CostSeries, graph: CostSeries, origin: str, warnings: list[str],
                      pools: Mapping[int, int | None] | None = None) -> CostTable:
    """Fit each series, then evaluate both on the union of their sizes inside the common range."""
    notes = list(warnings)
    eager, n1 = _fit_series(eager)
    graph, n2 = _fit_series(graph)
    notes += _monotone_note(n1 + n2)
    lo = max(int(eager.sizes[0]), int(graph.sizes[0]))
    hi = min(int(eager.sizes[-1]), int(graph.sizes[-1]))
    if lo > hi:
        raise InputError(f"eager costs (bs {int(eager.sizes[0])}..{int(eager.sizes[-1])}) and graph costs "
                         f"(bs {int(graph.sizes[0])}..{int(graph.sizes[-1])}) share no batch-size range"
                         f"{' (' + origin + ')' if origin else ''}")
    union = np.union1d(eager.sizes, graph.sizes)
    dropped = union[(union < lo) | (union > hi)]
    if dropped.size:
        notes.append(f"costs at bs {size_span(dropped.tolist())} were left out: only one of eager/graph is known there "
                     f"and costs are not extrapolated (common range {lo}..{hi})")
    sizes = union[(union >= lo) & (union <= hi)]
    e, e_obs = _interp(eager, sizes)
    g, g_obs = _interp(graph, sizes)
    e_src = dict(zip(eager.sizes.tolist(), eager.sources))
    g_src = dict(zip(graph.sizes.tolist(), graph.sources))
    pools = pools or {}
    pts = []
    for k, s in enumerate(sizes.tolist()):  # one row per batch size
        src = _weakest(e_src[s] if e_obs[k] else "interpolated", g_src[s] if g_obs[k] else "interpolated")
        pts.append(CostPoint(int(s), float(e[k]), float(g[k]), src, pools.get(s)))
    return CostTable(tuple(pts), origin, tuple(notes))


def table_of_steps(eager_bs: np.ndarray, eager_us: np.ndarray, graph_sizes: np.ndarray, graph_us: np.ndarray,
                   origin: str) -> CostTable | None:
    """A cost table from per-step eager costs (the median per batch size; steps of unknown size, -1,
    or a non-finite cost are left out) and a graph cost per size (a fitted curve's points, taken as
    measured). ``None`` when either side is empty."""
    ok = (eager_bs > 0) & np.isfinite(eager_us)
    if not ok.any() or np.asarray(graph_sizes).size == 0:
        return None
    e_sizes, inv = np.unique(eager_bs[ok], return_inverse=True)
    e_us = np.array([np.median(eager_us[ok][inv == j]) for j in range(e_sizes.size)])  # per distinct size
    return table_from_series(CostSeries("eager", e_sizes, e_us, tuple("measured" for _ in e_sizes)),
                             CostSeries("graph", np.asarray(graph_sizes), np.asarray(graph_us, dtype=float),
                                        tuple("measured" for _ in range(np.asarray(graph_sizes).size))), origin, [])
