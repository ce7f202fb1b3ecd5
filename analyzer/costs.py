"""Step cost per batch size, eager and CUDA-graph, and the batch-size distribution: the planner's inputs.

A :class:`CostPoint` is the cost of one decode step at one batch size, in microseconds:
``eager_us`` run op by op, ``graph_us`` replayed from a captured CUDA graph. Its ``source``
says where the numbers came from, weakest part first:

* ``"measured"``: both costs observed at this batch size (harness timings, or an eager and
  a graph trace of this size);
* ``"predicted"``: eager observed, graph cost predicted by :mod:`analyzer.predict` from the
  eager trace (no graph trace at this size);
* ``"interpolated"``: at least one cost derived from other batch sizes (between observed
  sizes, or clamped at the edge by :meth:`CostTable.clamped_to`).

Where the costs come from, best first:

1. :func:`costs_from_timings`: the recording harness's ``timings.json`` (unprofiled CUDA-event
   timings; also ``truth.json``'s layout). Preferred: no profiler inflation.
2. :func:`costs_from_reports`: traces. A profiled step is slower than the real one, so every
   step's ``dur_us`` is scaled by its trace's ``estimated_unprofiled_step_us_median /
   step_us_median``. Eager traces give eager costs and predicted graph costs, graph traces
   measured graph costs; where both exist at a size, both are measured.

**Monotone fit.** A bigger batch never takes less time to run, but measurements are noisy
(truth.json's 1b eager step is 15.9 ms at bs 8 and 11.2 ms at bs 16). Each series (eager,
graph) is replaced by its isotonic regression over the observed sizes (least squares,
non-decreasing: pool adjacent violators, equal weights), each change listed in
``CostTable.warnings``; between observed sizes costs are linear, so the whole table is
non-decreasing in batch size. The planner relies on that (see :mod:`analyzer.planner`).

**No silent extrapolation.** :meth:`CostTable.at` raises :class:`~analyzer.errors.InputError`
below the smallest or above the largest size in the table. :meth:`CostTable.clamped_to` is the
explicit alternative: it adds the missing sizes with the nearest edge's costs (source
``"interpolated"``) and lists one warning per clamped size in the new table's ``warnings``.
Clamping above the largest size underestimates the cost there; the warning says so.
"""
from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from analyzer.errors import InputError

SOURCES = ("measured", "predicted", "interpolated")
TIMINGS_SCHEMA = "launchgap.timings/1"
#: Refuse auxiliary JSON/CSV files (timings, distributions) larger than this.
MAX_AUX_FILE_BYTES = 64 * 1024 * 1024
#: Relative change below which the monotone fit is not worth a warning.
_FIT_NOTE_REL = 5e-4
_MIB = 1024.0 * 1024.0
#: Step phases the planner takes costs and batch sizes from (None: a trace that does not say).
_DECODE_OR_UNKNOWN = ("decode", None)


@dataclass(frozen=True)
class CostPoint:
    """Cost of one decode step at ``batch_size`` (microseconds) and where it came from.

    ``graph_pool_bytes`` is the CUDA-graph memory pool growth measured when this size was
    captured (harness timings only; ``None`` when unknown).
    """

    batch_size: int
    eager_us: float
    graph_us: float
    source: str
    graph_pool_bytes: int | None = None

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class _Series:
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


def _fit_series(series: _Series) -> tuple[_Series, list[str]]:
    fitted, pooled = _isotonic(series.values)
    notes = []
    for a, b in pooled:
        raw = series.values[a:b]
        if np.max(np.abs(raw - fitted[a])) <= _FIT_NOTE_REL * fitted[a]:
            continue
        sizes = ", ".join(str(int(x)) for x in series.sizes[a:b])
        raws = ", ".join(f"{x:,.1f}" for x in raw)
        notes.append(f"{series.name} cost not monotone in batch size at bs {sizes} ({raws} us): "
                     f"the monotone fit uses {fitted[a]:,.1f} us for all of them")
    return _Series(series.name, series.sizes, fitted, series.sources), notes


def _interp(series: _Series, sizes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Values of a series at ``sizes`` (inside its range) and whether each size was observed."""
    vals = np.interp(sizes, series.sizes, series.values)
    pos = np.clip(np.searchsorted(series.sizes, sizes), 0, len(series.sizes) - 1)
    return vals, series.sizes[pos] == sizes


def _weakest(*sources: str) -> str:
    return max(sources, key=SOURCES.index)


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
            raise InputError(f"step costs must be positive finite microseconds{self._from()}")
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
        eager = _Series("eager", sizes, np.array([p.eager_us for p in pts], float),
                        tuple("measured" for _ in pts))
        graph = _Series("graph", sizes, np.array([p.graph_us for p in pts], float),
                        tuple("predicted" if p.source == "predicted" else "measured" for p in pts))
        pools = {p.batch_size: p.graph_pool_bytes for p in pts}
        table = _table_from_series(eager, graph, origin, list(warnings), pools)
        # Interpolated inputs stay interpolated.
        src = {p.batch_size: p.source for p in pts}
        return CostTable(tuple(CostPoint(q.batch_size, q.eager_us, q.graph_us, _weakest(q.source, src[q.batch_size]),
                                         q.graph_pool_bytes) for q in table.points), table.origin, table.warnings)

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
                             f"not extrapolated: record that size or clamp explicitly (CostTable.clamped_to)"
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

    def clamped_to(self, sizes: Iterable[int]) -> CostTable:
        """This table plus every size in ``sizes`` outside its range, given the nearest edge's costs.

        Each added size is listed in ``warnings`` (an explicit clamp, never a silent one).
        """
        lo, hi = self.points[0], self.points[-1]
        want = sorted({int(s) for s in sizes})
        below = [s for s in want if s < lo.batch_size]
        above = [s for s in want if s > hi.batch_size]
        if not below and not above:
            return self
        extra = [CostPoint(s, lo.eager_us, lo.graph_us, "interpolated", None) for s in below]
        extra += [CostPoint(s, hi.eager_us, hi.graph_us, "interpolated", None) for s in above]
        notes = list(self.warnings)
        if below:
            notes.append(f"batch sizes {_span(below)} are below the smallest size with costs ({lo.batch_size}): "
                         f"clamped to bs {lo.batch_size}'s costs (an overestimate, costs grow with batch size)")
        if above:
            notes.append(f"batch sizes {_span(above)} are above the largest size with costs ({hi.batch_size}): "
                         f"clamped to bs {hi.batch_size}'s costs (an underestimate; record larger sizes)")
        pts = sorted(self.points + tuple(extra), key=lambda p: p.batch_size)
        return CostTable(tuple(pts), self.origin, tuple(notes))

    def graph_memory_bytes(self) -> int | None:
        """Largest positive measured graph-pool growth of any point, or ``None`` when none was measured.

        Graphs captured into a shared pool often grow it by nothing (truth.json records zero or
        negative deltas); only positive growths are evidence of per-graph memory.
        """
        vals = [p.graph_pool_bytes for p in self.points if p.graph_pool_bytes is not None and p.graph_pool_bytes > 0]
        return max(vals) if vals else None

    def to_dict(self) -> dict:
        return {"origin": self.origin, "points": [p.to_dict() for p in self.points], "warnings": list(self.warnings)}


def _span(sizes: list[int]) -> str:
    return ", ".join(str(s) for s in sizes) if len(sizes) <= 6 else f"{sizes[0]}..{sizes[-1]} ({len(sizes)} sizes)"


def _table_from_series(eager: _Series, graph: _Series, origin: str, warnings: list[str],
                       pools: Mapping[int, int | None] | None = None) -> CostTable:
    """Fit each series, then evaluate both on the union of their sizes inside the common range."""
    notes = list(warnings)
    eager, n1 = _fit_series(eager)
    graph, n2 = _fit_series(graph)
    notes += n1 + n2
    lo = max(int(eager.sizes[0]), int(graph.sizes[0]))
    hi = min(int(eager.sizes[-1]), int(graph.sizes[-1]))
    if lo > hi:
        raise InputError(f"eager costs (bs {int(eager.sizes[0])}..{int(eager.sizes[-1])}) and graph costs "
                         f"(bs {int(graph.sizes[0])}..{int(graph.sizes[-1])}) share no batch-size range"
                         f"{' (' + origin + ')' if origin else ''}")
    union = np.union1d(eager.sizes, graph.sizes)
    dropped = union[(union < lo) | (union > hi)]
    if dropped.size:
        notes.append(f"costs at bs {_span(dropped.tolist())} were left out: only one of eager/graph is known there "
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


# --- from traces --------------------------------------------------------------------------------

def costs_from_reports(reports: list) -> CostTable:
    """Costs per batch size from analysed traces (:class:`analyzer.report.TraceReport`).

    Per step, the cost is ``dur_us`` times the trace's unprofiled/profiled ratio
    (``summary.estimated_unprofiled_step_us_median / summary.step_us_median``); per batch
    size, the median over all steps of that size. Eager traces give the eager cost (measured)
    and the graph cost (predicted, ``StepReport.predicted_graph_us``); graph traces give the
    graph cost (measured), and win over predictions at the same size. Mixed traces (graph
    launches plus eager launches) count as graph measurements with a warning. Only decode steps
    count: a serving engine's prefill or mixed step (``phase``) is not a decode bucket; steps of
    unknown phase count.
    """
    eager: dict[int, list[float]] = {}
    g_meas: dict[int, list[float]] = {}
    g_pred: dict[int, list[float]] = {}
    notes: list[str] = []
    no_bs = not_decode = 0
    n_eager = n_graph = 0
    for rep in reports:  # one trace at a time; steps are report rows
        s = rep.summary
        scale = (s.estimated_unprofiled_step_us_median / s.step_us_median
                 if s.step_us_median > 0 and s.estimated_unprofiled_step_us_median > 0 else 1.0)
        is_eager = rep.mode == "eager"
        if rep.mode == "mixed":
            notes.append(f"{rep.path}: mixed eager/graph steps are taken as graph measurements "
                         f"(what capture achieved in that setup)")
        used = False
        for st in rep.steps:
            if getattr(st, "phase", None) not in _DECODE_OR_UNKNOWN:
                not_decode += 1
                continue
            if st.batch_size is None:
                no_bs += 1
                continue
            used = True
            if is_eager:
                eager.setdefault(st.batch_size, []).append(st.dur_us * scale)
                g_pred.setdefault(st.batch_size, []).append(st.predicted_graph_us)
            else:
                g_meas.setdefault(st.batch_size, []).append(st.dur_us * scale)
        if used:
            n_eager += is_eager
            n_graph += not is_eager
    if not_decode:
        notes.append(f"{not_decode} prefill or mixed steps were left out of the costs (decode steps only)")
    if no_bs:
        notes.append(f"{no_bs} steps without a known batch size were left out of the costs "
                     f"(name it in the step annotation, e.g. bs=8, or use --batch-regex/--batch-op)")
    if not eager and not g_meas:
        raise InputError("no steps with a known batch size in the traces: cannot tell what a step costs at which "
                         "batch size (annotate steps with bs=N, use --batch-regex/--batch-op, or pass --timings)")
    if not eager:
        raise InputError("only graph-mode traces: they give no eager cost to compare with; add eager traces "
                         "of the same model or pass --timings")
    e_sizes = np.array(sorted(eager), dtype=np.int64)
    e_series = _Series("eager", e_sizes, np.array([np.median(eager[b]) for b in e_sizes.tolist()]),
                       tuple("measured" for _ in e_sizes))
    g_sizes = np.array(sorted(set(g_meas) | set(g_pred)), dtype=np.int64)
    g_vals, g_srcs = [], []
    for b in g_sizes.tolist():
        if b in g_meas:
            g_vals.append(float(np.median(g_meas[b])))
            g_srcs.append("measured")
        else:
            g_vals.append(float(np.median(g_pred[b])))
            g_srcs.append("predicted")
    predicted = [b for b, src in zip(g_sizes.tolist(), g_srcs) if src == "predicted"]
    if predicted:
        notes.append(f"graph costs at bs {_span(predicted)} are predicted from eager traces (no graph trace there)")
    notes.append("trace costs are profiled step times scaled to estimated unprofiled ones; harness timings "
                 "(--timings) are more accurate")
    origin = f"{n_eager} eager and {n_graph} graph trace(s)"
    return _table_from_series(e_series, _Series("graph", g_sizes, np.array(g_vals), tuple(g_srcs)), origin, notes)


def distribution_from_reports(reports: list) -> dict[int, float]:
    """Decode steps per batch size over all traces (steps without a known batch size, and a serving
    engine's prefill or mixed steps, are not counted)."""
    out: dict[int, float] = {}
    for rep in reports:
        for st in rep.steps:
            if st.batch_size is not None and getattr(st, "phase", None) in _DECODE_OR_UNKNOWN:
                out[st.batch_size] = out.get(st.batch_size, 0.0) + 1.0
    return dict(sorted(out.items()))


# --- from files ---------------------------------------------------------------------------------

def _read_aux(path: str | Path, what: str) -> bytes:
    p = Path(path)
    if not p.exists():
        raise InputError("no such file", str(p))
    if p.is_dir():
        raise InputError(f"is a directory, expected a {what} file", str(p))
    size = p.stat().st_size
    if size > MAX_AUX_FILE_BYTES:
        raise InputError(f"{what} file is {size / 1e6:.0f} MB, over the {MAX_AUX_FILE_BYTES / 1e6:.0f} MB cap", str(p))
    data = p.read_bytes()
    if not data.strip():
        raise InputError(f"empty {what} file", str(p))
    return data


def _json_doc(data: bytes, path: str, what: str) -> object:
    try:
        return json.loads(data.decode("utf-8"))
    except UnicodeDecodeError:
        raise InputError(f"{what} file is not UTF-8 text", path) from None
    except json.JSONDecodeError as exc:
        raise InputError(f"{what} file is not valid JSON ({exc.msg} at line {exc.lineno})", path) from None


def looks_like_timings(path: str | Path) -> bool:
    """True for a small JSON object with a ``rows`` list and no ``traceEvents`` (timings, truth.json).

    Lets ``launchgap plan DIR`` pick up a timings file lying beside the traces.
    """
    p = Path(path)
    try:
        if not p.is_file() or p.stat().st_size > MAX_AUX_FILE_BYTES:
            return False
        with open(p, "rb") as fh:
            head = fh.read(1 << 16)
        if not head.lstrip().startswith(b"{") or b'"traceEvents"' in head:
            return False
        doc = json.loads(p.read_bytes().decode("utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return False
    return isinstance(doc, dict) and isinstance(doc.get("rows"), list) and "traceEvents" not in doc


def _num(row: dict, key: str, path: str, i: int, required: bool, positive: bool = True) -> float | None:
    v = row.get(key)
    if v is None:
        if required:
            raise InputError(f"rows[{i}] has no {key!r}", path)
        return None
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
        raise InputError(f"rows[{i}].{key} is {v!r}, expected a finite number", path)
    if positive and v <= 0:
        raise InputError(f"rows[{i}].{key} is {v!r}, expected a positive number", path)
    return float(v)


def costs_from_timings(path: str | Path, model: str | None = None) -> CostTable:
    """Costs from the harness's ``timings.json`` (schema ``launchgap.timings/1``) or truth.json's layout.

    Rows: ``model``, ``batch_size`` (or ``bs``), ``eager_us``, ``graph_us`` (null when not
    measured), optional ``graph_pool_bytes``. With several models in the file ``model``
    picks one. Repeated sizes take the median. All costs are measured (unprofiled).
    """
    p = str(path)
    doc = _json_doc(_read_aux(path, "timings"), p, "timings")
    if not isinstance(doc, dict) or not isinstance(doc.get("rows"), list):
        raise InputError("not a timings file: expected a JSON object with a 'rows' list "
                         f"(schema {TIMINGS_SCHEMA})", p)
    schema = doc.get("schema")
    if schema is not None and schema != TIMINGS_SCHEMA:
        raise InputError(f"unsupported timings schema {schema!r} (expected {TIMINGS_SCHEMA})", p)
    rows = doc["rows"]
    if not rows:
        raise InputError("timings file has no rows", p)
    for i, r in enumerate(rows):
        if not isinstance(r, dict):
            raise InputError(f"rows[{i}] is not an object", p)
    models = sorted({str(r.get("model", "")) for r in rows})
    if model is None:
        if len(models) > 1:
            raise InputError(f"timings file holds several models ({', '.join(models)}): choose one with --model", p)
        model = models[0]
    elif model not in models:
        raise InputError(f"model {model!r} not in timings file (it has {', '.join(models)})", p)
    eager: dict[int, list[float]] = {}
    graph: dict[int, list[float]] = {}
    pools: dict[int, int] = {}
    for i, r in enumerate(rows):  # rows of a small JSON file
        if str(r.get("model", "")) != model:
            continue
        key = "batch_size" if "batch_size" in r else "bs"
        bs = r.get(key)
        if isinstance(bs, bool) or not isinstance(bs, int) or bs < 1:
            raise InputError(f"rows[{i}].{key} is {bs!r}, expected a positive integer", p)
        eager.setdefault(bs, []).append(_num(r, "eager_us", p, i, required=True))
        g = _num(r, "graph_us", p, i, required=False)
        if g is not None:
            graph.setdefault(bs, []).append(g)
        pool = r.get("graph_pool_bytes")
        if pool is not None:
            if isinstance(pool, bool) or not isinstance(pool, (int, float)) or not math.isfinite(pool):
                raise InputError(f"rows[{i}].graph_pool_bytes is {pool!r}, expected a number or null", p)
            pools[bs] = max(pools.get(bs, int(pool)), int(pool))
    if not graph:
        raise InputError(f"no graph_us for model {model!r}: these timings were recorded without CUDA graphs "
                         f"(graph mode needs a GPU)", p)
    info = doc.get("info")
    device = doc.get("device") or (info.get("gpu") if isinstance(info, dict) else None)
    origin = f"{Path(p).name}" + (f", model {model}" if model else "") + (f", {device}" if device else "")
    e_sizes = np.array(sorted(eager), dtype=np.int64)
    g_sizes = np.array(sorted(graph), dtype=np.int64)
    return _table_from_series(
        _Series("eager", e_sizes, np.array([np.median(eager[b]) for b in e_sizes.tolist()]),
                tuple("measured" for _ in e_sizes)),
        _Series("graph", g_sizes, np.array([np.median(graph[b]) for b in g_sizes.tolist()]),
                tuple("measured" for _ in g_sizes)),
        origin, [], pools)


def _parse_bs(text: str, path: str, where: str) -> int:
    try:
        v = float(text)
    except ValueError:
        raise InputError(f"{where}: batch size {text!r} is not a number", path) from None
    if not math.isfinite(v) or v != int(v) or v < 1:
        raise InputError(f"{where}: batch size {text!r} is not a positive integer", path)
    return int(v)


def _parse_count(text: object, path: str, where: str) -> float:
    try:
        v = float(text) if not isinstance(text, bool) else float("nan")
    except (TypeError, ValueError):
        raise InputError(f"{where}: count {text!r} is not a number", path) from None
    if not math.isfinite(v) or v < 0:
        raise InputError(f"{where}: count {text!r} is not a non-negative number", path)
    return v


def load_distribution(path: str | Path) -> dict[int, float]:
    """A batch-size histogram: CSV ``batch_size,count`` (header optional) or JSON ``{"8": 120, ...}``.

    CSV lines that are blank or start with ``#`` are skipped; a header names the columns
    (``batch_size``/``bs`` and ``count``/``steps``/``weight``), else the first two columns are
    used. Repeated batch sizes add up. Bad content raises :class:`InputError` naming the file,
    the line and the reason.
    """
    p = str(path)
    data = _read_aux(path, "distribution")
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise InputError("distribution file is not UTF-8 text", p) from None
    out: dict[int, float] = {}
    if text.lstrip().startswith(("{", "[")):
        doc = _json_doc(data, p, "distribution")
        if not isinstance(doc, dict):
            raise InputError('JSON distribution must be an object {"batch_size": count, ...}', p)
        for k, v in doc.items():
            bs = _parse_bs(str(k), p, f"key {k!r}")
            out[bs] = out.get(bs, 0.0) + _parse_count(v, p, f"key {k!r}")
    else:
        bs_col, n_col = 0, 1
        header_seen = False
        for lineno, line in enumerate(text.splitlines(), 1):
            s = line.strip()
            if not s or s.startswith("#"):
                continue
            cells = [c.strip().strip('"') for c in s.split(",")]
            if not header_seen and not out and any(ch.isalpha() for ch in cells[0]):
                names = [c.lower() for c in cells]
                bs_col = _column(names, ("batch_size", "bs", "batch", "batchsize"), p, lineno)
                n_col = _column(names, ("count", "steps", "weight", "n", "frequency", "freq"), p, lineno)
                header_seen = True
                continue
            if len(cells) <= max(bs_col, n_col):
                raise InputError(f"line {lineno}: expected 'batch_size,count', got {s!r}", p)
            where = f"line {lineno}"
            bs = _parse_bs(cells[bs_col], p, where)
            out[bs] = out.get(bs, 0.0) + _parse_count(cells[n_col], p, where)
    if not out:
        raise InputError("distribution file holds no batch sizes", p)
    if sum(out.values()) <= 0:
        raise InputError("distribution counts are all zero", p)
    return dict(sorted(out.items()))


def _column(names: list[str], wanted: tuple[str, ...], path: str, lineno: int) -> int:
    for w in wanted:
        if w in names:
            return names.index(w)
    raise InputError(f"line {lineno}: header {','.join(names)!r} has no column named {' or '.join(wanted[:2])}",
                     path)
