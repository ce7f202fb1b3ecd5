"""Device memory and capture time of a CUDA-graph capture list: a model fitted on measurements.

Servers capture their sizes largest first into **one shared memory pool**, so a list's
memory is not its length times a constant (measured on the H200, 8b preset: 8 FULL graphs
up to 128 used 208 MiB, 128 graphs 726 MiB, where 32 MiB x 128 would say 4 GiB). The model
has a part that follows the largest size (the pool) and a part per graph (executables):

    used_mib(S)  = base_mib + pool_per_act * pool_row_mib(mode) * max(S)
                   + graph_mib * graphs(S) + node_kib * nodes(S) / 1024
                   + weight_mib_per_gib * gemm_weights_gib * |S|
    capture_s(S) = capture_base_s + capture_graph_s * graphs(S) + capture_node_ms * nodes(S) / 1000

for a non-empty list ``S`` of batch sizes (both are 0 for the empty list), where

* ``pool_row_mib(mode)``: activations one batch row keeps live in the pool during one decode
  step (MiB), from the model's dimensions (:class:`ModelDims`), so the model serves a model
  that was never recorded:

  - the widest part, ``act_row_mib = dtype_bytes * (2 * hidden + max(vocab, 3 * mlp,
    (2 * heads + 2 * kv_heads) * head_dim)) / 2**20``: the residual stream and its normed copy
    plus the largest intermediate (logits, gate/up with their product, or q/k/v with the
    attention output);
  - in ``full`` mode also the kept part, ``kept_row_mib = dtype_bytes * layers * (2 * heads +
    3 * kv_heads) * head_dim / 2**20``: each layer's attention inputs (the fused q/k/v
    output and the rotated q and k), which a step that keeps its per-layer state until the
    step ends (the harness's decoder, eager-style model code) holds in the graph's pool. In
    ``piecewise`` mode every piece's outputs are handed back to the pool (weak references,
    as vLLM does), so only the widest part counts.

  ``pool_per_act`` (dimensionless) says how many MiB of pool one MiB of them costs (the
  caching allocator's rounding and the temporaries around the widest op).
* ``graphs(S)``: ``|S|`` in ``full`` mode; ``|S| * pieces`` in ``piecewise`` mode (one graph
  per piece between attention ops; ``pieces`` defaults to ``layers + 1`` as vLLM splits).
* ``nodes(S)``: kernel nodes over all of the list's graphs, ``|S| * nodes_per_size``;
  ``nodes_per_size`` (the nodes of one size's graphs, pieces together) is one number per model
  and mode: measured (the median over the sizes the harness counted), else predicted as
  ``nodes_per_layer * layers + nodes_base``. Measured counts vary little with the size (the
  1b preset: 737 kernels at bs 1-136, 721 at some sizes above), and one number per model keeps
  every size's share of memory and time the same, which is what makes the planner's budgets
  exact (see :mod:`launchgap.planning.planner`).
* ``base_mib``, ``graph_mib``, ``node_kib``: once per list (workspaces, pool bookkeeping), per
  graph, and per node (the executable that lives outside PyTorch's allocator, in device
  memory the driver counts).
* ``weight_mib_per_gib``: per size, per GiB of the step's matrix-multiply weights
  (:attr:`ModelDims.gemm_weights_gib`). Measured per size, executables cost 3.3 KiB a node
  (1b), 2.8 (3b) and 4.0 (8b) in full mode with the same kernels per layer: the cost per node
  grows with the model, for a reason not established; this empirical term carries it (see
  docs/planner.md for the held-out check that justifies it, and where it misses).

**Reused executables.** The driver keeps the memory of freed graph executables and hands it
to later graphs of the same kind: in the harness's recordings the first sizes of a list that
follows another list of the same mode cost nothing beyond the allocator
(:attr:`GraphMemoryMeasurement.reused_sizes`). The fit compares a list with the model's
prediction for the sizes that took new memory; :meth:`MemoryModel.predict` (what the planner
uses) is for a process that captures the list once, every size paying.

**Fit.** :func:`fit_memory_model`: non-negative least squares (exact, over every subset of
active parameters: at most five), relative (each list's residual divided by its
measurement, so a 50 MiB list counts as much as a 700 MiB one), on the harness's
``graph_memory`` entries (``device_used_mib``: ``cudaMemGetInfo``'s view, executables
included; ``capture_s``). Its error is stated on lists it did not see: **leave one list
out** (refit without the list, predict it) and **leave one model out** (refit without the
model's lists, predict them: the held-out check for a model not recorded), overall and per
model left out.

Refit in one command (writes :data:`DEFAULT_MODEL_PATH`, the defaults the planner uses):
``python -m launchgap.planning.memory fit timings.json [more.json ...]``.
"""
from __future__ import annotations

import argparse
import itertools
import json
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields
from pathlib import Path

import numpy as np

from ..dims import ModelDims
from ..errors import AnalyzerError, InputError
from ..timings import GRAPH_MODES, load_timings
#: The fitted defaults: written by ``python -m launchgap.planning.memory fit``, read by :func:`default_memory_model`.
DEFAULT_MODEL_PATH = Path(__file__).with_name("memory_model.json")
#: Kernel nodes per layer and per step of the harness's decoder (kernels per eager step on the
#: H200: tiny 193 with 4 layers, 1b 737 with 16, 8b 1,489 with 32, 70b-slice 385 with 8: least
#: squares 45.3 per layer + 12). Used when neither measurements nor a fit give node counts.
NODES_PER_LAYER = 45.3
NODES_BASE = 12.0
#: Relative error bar of the held-out check (lists of 8..128 graphs of a model left out).
HELD_OUT_BAR = 0.15
HELD_OUT_GRAPHS = (8, 128)


@dataclass(frozen=True)
class GraphMemoryMeasurement:
    """One ``graph_memory`` entry: a capture list measured whole (totals over its sizes).

    ``nodes``: kernel nodes over all its graphs (``None`` when the harness could not count
    them); ``capture_s`` / ``reserved_mib`` ``None`` when not measured. ``reused_sizes``: the
    sizes captured first whose executables cost no new device memory (their increment beyond the
    allocator's is 0: the driver handed them memory it kept from graphs freed earlier in the same
    process), counted from the harness's ``per_size`` readings; 0 when not known.
    """

    model: str
    mode: str
    list_name: str
    sizes: tuple[int, ...]
    graphs: int
    nodes: float | None
    device_used_mib: float
    capture_s: float | None
    reserved_mib: float | None = None
    reused_sizes: int = 0

    @property
    def nodes_per_size(self) -> float | None:
        return self.nodes / len(self.sizes) if self.nodes is not None else None


@dataclass(frozen=True)
class ListCost:
    """What a capture list costs, as a function of its size count ``k`` and largest size ``b``.

    ``memory_mib(k, b) = fixed_mib + pool_mib_per_row * b + per_size_mib * k`` and the same
    shape for ``capture_s`` (0 for ``k = 0``). ``capture_s`` parts are ``None`` when unknown.
    Both grow with ``k`` and with ``b``; the planner's exact budgets rely on that shape.
    """

    fixed_mib: float
    pool_mib_per_row: float
    per_size_mib: float
    fixed_s: float | None = None
    per_size_s: float | None = None
    graphs_per_size: int = 1
    source: str = ""

    def memory_mib(self, k: np.ndarray | int, largest: np.ndarray | int) -> np.ndarray:
        k = np.asarray(k, dtype=float)
        return np.where(k > 0, self.fixed_mib + self.pool_mib_per_row * np.asarray(largest, float)
                        + self.per_size_mib * k, 0.0)

    def capture_s(self, k: np.ndarray | int, largest: np.ndarray | int) -> np.ndarray | None:
        if self.fixed_s is None or self.per_size_s is None:
            return None
        k, _ = np.broadcast_arrays(np.asarray(k, dtype=float), np.asarray(largest, dtype=float))
        return np.where(k > 0, self.fixed_s + self.per_size_s * k, 0.0)

    def of(self, sizes: Sequence[int]) -> tuple[float, float | None]:
        """Memory (MiB) and capture seconds of one list."""
        k = len(set(sizes))
        top = max(sizes) if k else 0
        cap = self.capture_s(k, top)
        return float(self.memory_mib(k, top)), (float(cap) if cap is not None else None)


@dataclass(frozen=True)
class MemoryModel:
    """Fitted parameters of the memory and start-up model (module docstring), and its errors.

    Memory: ``base_mib`` (MiB per list), ``pool_per_act`` (MiB of pool per MiB of the largest
    size's pool activations, ``ModelDims.pool_row_mib``), ``graph_mib`` (MiB per graph),
    ``node_kib`` (KiB per kernel node), ``weight_mib_per_gib`` (MiB per size per GiB of the
    step's matrix-multiply weights, ``ModelDims.gemm_weights_gib``).
    Capture: ``capture_base_s``, ``capture_graph_s`` (per graph), ``capture_node_ms`` (per
    node). Nodes when not measured: ``nodes_per_layer * layers + nodes_base`` per size.
    ``fitted_on`` names the data; ``errors`` holds the per-list table and the summary that
    :func:`fit_memory_model` computed (empty for hand-made parameters).
    """

    base_mib: float
    pool_per_act: float
    graph_mib: float
    node_kib: float
    capture_base_s: float
    capture_graph_s: float
    capture_node_ms: float
    weight_mib_per_gib: float = 0.0
    nodes_per_layer: float = NODES_PER_LAYER
    nodes_base: float = NODES_BASE
    fitted_on: str = ""
    errors: Mapping = field(default_factory=dict)

    def nodes_per_size(self, dims: ModelDims) -> float:
        """Predicted kernel nodes of one size's graphs (all pieces together)."""
        return self.nodes_per_layer * dims.layers + self.nodes_base

    def list_cost(self, dims: ModelDims, mode: str = "full", pieces: int | None = None,
                  nodes_per_size: float | None = None) -> ListCost:
        """The model for one model and mode as a :class:`ListCost` (what the planner optimises with)."""
        if mode not in GRAPH_MODES:
            raise InputError(f"graph mode must be one of {', '.join(GRAPH_MODES)}, got {mode!r}")
        g = 1 if mode == "full" else (pieces if pieces is not None else dims.default_pieces)
        if g < 1:
            raise InputError(f"pieces must be >= 1, got {g}")
        nodes = nodes_per_size if nodes_per_size is not None else self.nodes_per_size(dims)
        return ListCost(fixed_mib=self.base_mib, pool_mib_per_row=self.pool_per_act * dims.pool_row_mib(mode),
                        per_size_mib=self.graph_mib * g + self.node_kib * nodes / 1024.0
                        + self.weight_mib_per_gib * dims.gemm_weights_gib,
                        fixed_s=self.capture_base_s, per_size_s=self.capture_graph_s * g
                        + self.capture_node_ms * nodes / 1000.0, graphs_per_size=g,
                        source=f"memory model ({self.fitted_on or 'hand-set'}) for {dims.name}, {mode}")

    def predict(self, dims: ModelDims, sizes: Sequence[int], mode: str = "full", pieces: int | None = None,
                nodes_per_size: float | None = None) -> tuple[float, float]:
        """Device memory used (MiB) and capture seconds of capturing ``sizes`` in one shared pool."""
        mib, s = self.list_cost(dims, mode, pieces, nodes_per_size).of(sizes)
        return mib, float(s) if s is not None else 0.0

    def to_dict(self) -> dict:
        out = {f.name: getattr(self, f.name) for f in fields(self)}
        out["errors"] = dict(self.errors)
        return out

    @classmethod
    def from_dict(cls, d: Mapping) -> MemoryModel:
        names = {f.name for f in fields(cls)}
        missing = [n for n in ("base_mib", "pool_per_act", "graph_mib", "node_kib", "capture_base_s",
                               "capture_graph_s", "capture_node_ms") if n not in d]
        if missing:
            raise InputError(f"memory model lacks {', '.join(missing)}")
        for k in names - {"fitted_on", "errors"}:
            v = d.get(k, 0.0)
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not (v >= 0 and v < float("inf")):
                raise InputError(f"memory model parameter {k} is {v!r}, expected a non-negative number")
        if not isinstance(d.get("errors", {}), Mapping):
            raise InputError("memory model 'errors' must be an object")
        return cls(**{k: v for k, v in d.items() if k in names})


@dataclass(frozen=True)
class CaptureCalibration:
    """A server's own capture figures for its own list: ``sizes`` captured, ``memory_mib`` and
    ``seconds`` it reported (either may be unknown), and where they came from (``source``)."""

    sizes: tuple[int, ...]
    memory_mib: float | None
    seconds: float | None
    source: str


def calibrate(prior: ListCost | None, cal: CaptureCalibration) -> ListCost:
    """The list cost of that server: ``prior``'s shape scaled to the server's own figures.

    **With a prior** (the memory model for the model's dimensions): every memory term is
    multiplied by ``memory_mib / prior memory of cal.sizes`` and every capture-time term by
    ``seconds / prior seconds``, so the server's own list costs exactly what it reported. It
    assumes the model's shape holds for that server (how memory grows with the sizes and the
    largest size, how time grows with the graphs) and only its scale is off: one implementation
    of the same dimensions can use 3-4x the memory and over 10x the capture time of another
    (issue #27), a constant factor for that server.

    **Without a prior**: each captured size costs the server's average (``memory_mib / k`` and
    ``seconds / k`` for its ``k`` sizes), so a list of fewer sizes costs proportionally less.
    This ignores that larger sizes take more pool (a list's largest size drives its pool), so a
    plan with larger sizes than the server's is an underestimate there; give ``--model-config``
    for the model's shape.

    A figure the server did not report keeps the prior's term (or stays unknown).
    """
    k = len(set(cal.sizes))
    if k == 0:
        raise InputError(f"{cal.source}: a calibration needs the captured sizes")
    if prior is None:
        mem = cal.memory_mib / k if cal.memory_mib is not None else None
        sec = cal.seconds / k if cal.seconds is not None else None
        return ListCost(0.0, 0.0, mem if mem is not None else 0.0, 0.0 if sec is not None else None, sec,
                        source=f"the server's own capture: {_fig(cal)} for its {k} sizes ({cal.source}), "
                               f"the same per size")
    p_mib, p_s = prior.of(cal.sizes)
    fm = cal.memory_mib / p_mib if cal.memory_mib is not None and p_mib > 0 else 1.0
    fs = cal.seconds / p_s if cal.seconds is not None and p_s else 1.0
    return ListCost(prior.fixed_mib * fm, prior.pool_mib_per_row * fm, prior.per_size_mib * fm,
                    None if prior.fixed_s is None else prior.fixed_s * fs,
                    None if prior.per_size_s is None else prior.per_size_s * fs, prior.graphs_per_size,
                    source=f"{prior.source}, calibrated to the server's own capture ({_fig(cal)} for its {k} sizes, "
                           f"{cal.source}): memory x{fm:.2f}, capture time x{fs:.2f}")


def _fig(cal: CaptureCalibration) -> str:
    parts = ([f"{cal.memory_mib:,.0f} MiB"] if cal.memory_mib is not None else []) + \
        ([f"{cal.seconds:g} s"] if cal.seconds is not None else [])
    return " and ".join(parts)


def default_memory_model() -> MemoryModel:
    """The committed fit (:data:`DEFAULT_MODEL_PATH`)."""
    try:
        return MemoryModel.from_dict(json.loads(DEFAULT_MODEL_PATH.read_text(encoding="utf-8")))
    except (OSError, ValueError) as exc:
        raise InputError(f"cannot read the memory model: {exc}", str(DEFAULT_MODEL_PATH)) from None


# --- reading the harness's recordings ---------------------------------------------------------------

def dims_section(doc: Mapping, path: str) -> dict[str, ModelDims]:
    """The ``models`` section of a timings document (or a file of them): name -> :class:`ModelDims`."""
    models = doc.get("models") or {}
    if not isinstance(models, Mapping):
        raise InputError("timings 'models' is not an object", path)
    out = {}
    for name, d in models.items():
        try:
            out[str(name)] = ModelDims.from_mapping(d, str(name))
        except InputError as exc:
            raise InputError(f"models[{name!r}]: {exc.message}", path) from None
    return out


def _reused_sizes(per_size: object) -> int:
    """Leading sizes (capture order) whose ``device_used_mib`` exceeds their ``reserved_mib`` by nothing: their
    executables went into device memory the driver kept from graphs freed earlier in the process."""
    if not isinstance(per_size, list) or not per_size:
        return 0
    used = np.array([p.get("device_used_mib") if isinstance(p, dict) else None for p in per_size], dtype=object)
    resv = np.array([p.get("reserved_mib") if isinstance(p, dict) else None for p in per_size], dtype=object)
    ok = np.array([isinstance(u, (int, float)) and isinstance(r, (int, float)) and not isinstance(u, bool)
                   and not isinstance(r, bool) for u, r in zip(used, resv)])
    if not ok.all():
        return 0
    extra = used.astype(float) - resv.astype(float)
    nonzero = np.flatnonzero(extra > 0)
    return int(nonzero[0]) if nonzero.size else len(per_size)


def graph_memory_from_timings(path: str | Path) -> tuple[dict[str, ModelDims], list[GraphMemoryMeasurement]]:
    """The ``models`` dimensions and ``graph_memory`` capture lists of a ``launchgap.timings/1`` file.

    Entries: ``model``, ``mode`` (``full``/``piecewise``), ``list_name``, ``capture_sizes``,
    ``graphs``, ``nodes_per_graph`` (size -> kernel nodes of that size's graphs, null when not
    counted), ``device_used_mib``, ``capture_s``, ``reserved_mib``. Nodes of sizes not counted
    are the median of those counted; with none counted the list's nodes are ``None``. With
    ``per_size`` (capture order, each with ``device_used_mib`` and ``reserved_mib``), the list's
    ``reused_sizes`` are its leading sizes whose device increment beyond the allocator's is 0.
    """
    p = str(path)
    doc = load_timings(path)  # the one reader and validator of launchgap.timings/1
    entries = doc.get("graph_memory")
    if not entries:
        raise InputError("timings file has no graph_memory measurements (record capture lists with the harness)", p)
    dims = dims_section(doc, p)
    out = []
    for i, e in enumerate(entries):  # one capture list each: a few dozen
        where = f"graph_memory[{i}]"
        sizes = e["capture_sizes"]
        n_sizes = len(set(sizes))
        if e["graphs"] < n_sizes:
            raise InputError(f"{where}.graphs is {e['graphs']!r}, expected an integer >= the number of sizes", p)
        if e["device_used_mib"] is None:
            raise InputError(f"{where}.device_used_mib is null: the list's memory was not measured", p)
        counted = [float(v) for v in e["nodes_per_graph"].values() if v]
        nodes = float(np.median(counted)) * n_sizes if counted else None
        if counted and len(counted) == n_sizes:
            nodes = float(sum(counted))
        out.append(GraphMemoryMeasurement(str(e["model"]), e["mode"], str(e["list_name"]), tuple(sorted(set(sizes))),
                                          e["graphs"], nodes, float(e["device_used_mib"]), e["capture_s"],
                                          e["reserved_mib"], min(_reused_sizes(e["per_size"]), n_sizes)))
    return dims, out


# --- fitting ------------------------------------------------------------------------------------

def _nnls(a: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Non-negative least squares, exactly: the best unconstrained fit over every subset of
    columns whose coefficients all come out non-negative (a handful of columns here)."""
    n = a.shape[1]
    best, best_r = np.zeros(n), float(np.dot(y, y))
    for r in range(1, n + 1):
        for cols in itertools.combinations(range(n), r):
            sub = a[:, cols]
            coef, *_ = np.linalg.lstsq(sub, y, rcond=None)
            if np.any(coef < 0):
                continue
            res = y - sub @ coef
            rr = float(np.dot(res, res))
            if rr < best_r - 1e-12 * max(best_r, 1.0):
                best, best_r = np.zeros(n), rr
                best[list(cols)] = coef
    return best


def _nodes_fit(meas: Sequence[GraphMemoryMeasurement], dims: Mapping[str, ModelDims]) -> tuple[float, float]:
    """Nodes per size against layers (full lists with counts), least squares, non-negative."""
    per_model: dict[str, list[float]] = {}
    for m in meas:
        if m.mode == "full" and m.nodes_per_size is not None:
            per_model.setdefault(m.model, []).append(m.nodes_per_size)
    pts = [(dims[k].layers, float(np.median(v))) for k, v in per_model.items()]
    if not pts:
        return NODES_PER_LAYER, NODES_BASE
    layers = np.array([p[0] for p in pts], float)
    nodes = np.array([p[1] for p in pts], float)
    if np.unique(layers).size < 2:  # one depth: nodes in proportion to layers
        return float(np.mean(nodes / layers)), 0.0
    c = _nnls(np.column_stack([layers, np.ones_like(layers)]), nodes)
    return float(c[0]), float(c[1])


def _nodes_of(m: GraphMemoryMeasurement, dims: ModelDims, per_layer: float, base: float) -> float:
    return m.nodes if m.nodes is not None else len(m.sizes) * (per_layer * dims.layers + base)


def _mem_features(m: GraphMemoryMeasurement, d: ModelDims, nodes: float) -> list[float]:
    """Per list: once, the pool, and the executables of the sizes that took new memory (``reused_sizes``
    left out: what the harness measured; a server capturing once pays for every size)."""
    new = (len(m.sizes) - m.reused_sizes) / len(m.sizes)
    return [1.0, d.pool_row_mib(m.mode) * max(m.sizes), new * m.graphs, new * nodes / 1024.0,
            new * len(m.sizes) * d.gemm_weights_gib]


def _cap_features(m: GraphMemoryMeasurement, nodes: float) -> list[float]:
    return [1.0, float(m.graphs), nodes / 1000.0]


def _fit_params(meas: Sequence[GraphMemoryMeasurement], dims: Mapping[str, ModelDims]) -> dict:
    per_layer, base = _nodes_fit(meas, dims)
    nodes = [_nodes_of(m, dims[m.model], per_layer, base) for m in meas]
    a = np.array([_mem_features(m, dims[m.model], n) for m, n in zip(meas, nodes)])
    y = np.array([m.device_used_mib for m in meas])
    mem = _nnls(a / y[:, None], np.ones_like(y))  # relative residuals
    cap_rows = [(m, n) for m, n in zip(meas, nodes) if m.capture_s is not None and m.capture_s > 0]
    cap = np.zeros(3)
    if cap_rows:
        ac = np.array([_cap_features(m, n) for m, n in cap_rows])
        yc = np.array([m.capture_s for m, _ in cap_rows])
        cap = _nnls(ac / yc[:, None], np.ones_like(yc))
    return {"base_mib": float(mem[0]), "pool_per_act": float(mem[1]), "graph_mib": float(mem[2]),
            "node_kib": float(mem[3]), "weight_mib_per_gib": float(mem[4]), "capture_base_s": float(cap[0]), "capture_graph_s": float(cap[1]),
            "capture_node_ms": float(cap[2]), "nodes_per_layer": per_layer, "nodes_base": base}


def _predict_measured(params: Mapping, m: GraphMemoryMeasurement, d: ModelDims,
                      fresh: bool = False) -> tuple[float, float]:
    """Memory and capture time of ``m``'s list as the harness measured it (its ``reused_sizes`` took no
    new executable memory), or, with ``fresh``, as a process capturing only this list would see it."""
    model = MemoryModel(**params)
    pieces = m.graphs // len(m.sizes) if m.mode == "piecewise" else None
    cost = model.list_cost(d, m.mode, pieces, m.nodes_per_size)
    mib, s = cost.of(m.sizes)
    if not fresh:
        mib -= m.reused_sizes * cost.per_size_mib
    return mib, float(s) if s is not None else 0.0


def _rel(pred: float | None, meas: float | None) -> float | None:
    if pred is None or meas is None or meas <= 0:
        return None
    return pred / meas - 1.0


def _worst(rows: list[dict], key: str, graphs: tuple[int, int] | None = None, model: str | None = None) -> float | None:
    vals = [abs(r[key]) for r in rows if r[key] is not None and (model is None or r["model"] == model)
            and (graphs is None or graphs[0] <= r["graphs"] <= graphs[1])]
    return round(max(vals), 4) if vals else None


def fit_memory_model(meas: Sequence[GraphMemoryMeasurement], dims: Mapping[str, ModelDims],
                     fitted_on: str = "") -> MemoryModel:
    """Fit on ``meas`` (dimensions per model in ``dims``) and state the errors on held-out lists.

    ``errors["lists"]``: per list the measured and predicted memory and capture time: in
    sample, leaving the list out, leaving its model out (``None`` where no other data is
    left). ``errors["summary"]``: the largest absolute relative error of each, and of leaving
    the model out for lists of 8..128 graphs (the held-out check, bar 15%), overall and per model
    left out (``..._by_model``; ``None`` where a model has no such list).
    """
    meas = [m for m in meas if m.device_used_mib > 0]
    if not meas:
        raise InputError("no graph_memory measurement with a positive device_used_mib to fit on")
    missing = sorted({m.model for m in meas} - set(dims))
    if missing:
        raise InputError(f"no model dimensions for {', '.join(missing)} (timings 'models' section)")
    params = _fit_params(meas, dims)
    rows = []
    for i, m in enumerate(meas):  # one refit per held-out list or model: a few dozen small fits
        d = dims[m.model]
        fit_mib, fit_s = _predict_measured(params, m, d)
        others = [x for j, x in enumerate(meas) if j != i]
        lolo = _predict_measured(_fit_params(others, dims), m, d) if len(others) >= 2 else (None, None)
        rest = [x for x in meas if x.model != m.model]
        lomo = _predict_measured(_fit_params(rest, dims), m, d) if len(rest) >= 2 else (None, None)
        cap_known = m.capture_s is not None
        rows.append({
            "model": m.model, "mode": m.mode, "list_name": m.list_name, "graphs": m.graphs,
            "max_size": max(m.sizes), "reused_sizes": m.reused_sizes, "measured_mib": m.device_used_mib,
            "fitted_mib": round(fit_mib, 1), "fresh_mib": round(_predict_measured(params, m, d, fresh=True)[0], 1),
            "fitted_err": _rel(fit_mib, m.device_used_mib),
            "leave_list_out_mib": _round(lolo[0]), "leave_list_out_err": _rel(lolo[0], m.device_used_mib),
            "leave_model_out_mib": _round(lomo[0]), "leave_model_out_err": _rel(lomo[0], m.device_used_mib),
            "measured_s": m.capture_s, "fitted_s": round(fit_s, 3) if cap_known else None,
            "fitted_s_err": _rel(fit_s, m.capture_s) if cap_known else None,
            "leave_list_out_s_err": _rel(lolo[1], m.capture_s) if cap_known else None,
            "leave_model_out_s_err": _rel(lomo[1], m.capture_s) if cap_known else None,
        })
    for r in rows:
        for k, v in list(r.items()):
            if k.endswith("_err") and v is not None:
                r[k] = round(v, 4)
    summary = {
        "lists": len(meas), "models": len({m.model for m in meas}),
        "memory_fitted": _worst(rows, "fitted_err"),
        "memory_leave_list_out": _worst(rows, "leave_list_out_err"),
        "memory_leave_model_out": _worst(rows, "leave_model_out_err"),
        "memory_leave_model_out_8_to_128_graphs": _worst(rows, "leave_model_out_err", HELD_OUT_GRAPHS),
        "memory_leave_model_out_8_to_128_graphs_by_model": {
            name: _worst(rows, "leave_model_out_err", HELD_OUT_GRAPHS, name)
            for name in sorted({m.model for m in meas})},
        "capture_fitted": _worst(rows, "fitted_s_err"),
        "capture_leave_list_out": _worst(rows, "leave_list_out_s_err"),
        "capture_leave_model_out": _worst(rows, "leave_model_out_s_err"),
        "held_out_bar": HELD_OUT_BAR,
    }
    return MemoryModel(**params, fitted_on=fitted_on, errors={"summary": summary, "lists": rows})


def _round(x: float | None, nd: int = 1) -> float | None:
    return round(x, nd) if x is not None else None


# --- the fit command ------------------------------------------------------------------------------

def render_fit(model: MemoryModel) -> str:
    """The fitted parameters and the error table, as text."""
    p = model.to_dict()
    lines = [f"memory model fitted on {model.fitted_on}", ""]
    lines += [f"  {k:<18} {p[k]:.6g}" for k in ("base_mib", "pool_per_act", "graph_mib", "node_kib",
                                                 "weight_mib_per_gib",
                                                 "capture_base_s", "capture_graph_s", "capture_node_ms",
                                                 "nodes_per_layer", "nodes_base")]
    rows = model.errors.get("lists", [])
    w = max([len("model / mode / list")] + [len(f"{r['model']} / {r['mode']} / {r['list_name']}") for r in rows])
    lines += ["", f"  {'model / mode / list':<{w}} graphs  reused  measured MiB  fitted  leave-list-out  "
                  "leave-model-out  fresh MiB  capture s  fitted"]

    def pct(v: float | None) -> str:
        return f"{v:+.1%}" if v is not None else "-"

    for r in rows:
        name = f"{r['model']} / {r['mode']} / {r['list_name']}"
        lines.append(f"  {name:<{w}} {r['graphs']:>6}  {r['reused_sizes']:>6}  {r['measured_mib']:>12,.0f}  "
                     f"{pct(r['fitted_err']):>6}  {pct(r['leave_list_out_err']):>14}  {pct(r['leave_model_out_err']):>15}  "
                     f"{r['fresh_mib']:>9,.0f}  "
                     f"{r['measured_s'] if r['measured_s'] is not None else '-':>9}  {pct(r['fitted_s_err']):>6}")
    s = model.errors.get("summary", {})
    lines += ["", "  largest |error|: " + ", ".join(f"{k} {pct(v)}" for k, v in s.items()
                                                    if k not in ("lists", "models", "held_out_bar")
                                                    and not isinstance(v, Mapping))]
    for k, v in s.items():
        if isinstance(v, Mapping):
            lines.append(f"  {k}: " + ", ".join(f"{name} {pct(x)}" for name, x in v.items()))
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """``python -m launchgap.planning.memory fit FILE... [--out PATH]``: refit the defaults."""
    ap = argparse.ArgumentParser(prog="python -m launchgap.planning.memory",
                                 description="fit the graph memory and capture-time model on harness timings")
    sub = ap.add_subparsers(dest="cmd", required=True)
    f = sub.add_parser("fit", help="fit on the graph_memory sections of timings files and write the model")
    f.add_argument("files", nargs="+", metavar="TIMINGS")
    f.add_argument("--out", default=str(DEFAULT_MODEL_PATH), help="where to write the model (default: the "
                                                                  "package's defaults, %(default)s)")
    args = ap.parse_args(argv)
    try:
        meas: list[GraphMemoryMeasurement] = []
        dims: dict[str, ModelDims] = {}
        for path in args.files:
            d, m = graph_memory_from_timings(path)
            dims.update(d)
            meas += m
        model = fit_memory_model(meas, dims, fitted_on=", ".join(Path(p).as_posix() for p in args.files))
        Path(args.out).write_text(json.dumps(model.to_dict(), indent=1, allow_nan=False) + "\n", encoding="utf-8")
    except AnalyzerError as exc:
        sys.stderr.write(f"memory fit: error: {exc}\n")
        return 2
    except OSError as exc:
        sys.stderr.write(f"memory fit: error: cannot write {args.out}: {exc.strerror}\n")
        return 2
    sys.stdout.write(render_fit(model) + f"\n\nwritten to {args.out}\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

