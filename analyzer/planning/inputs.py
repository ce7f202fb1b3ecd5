"""Readers of the planner's inputs: harness timings, batch-size distributions, analysed traces.

Where the costs come from, best first:

1. :func:`costs_from_timings`: the recording harness's ``timings.json`` (unprofiled CUDA-event
   timings; also ``truth.json``'s layout). Preferred: no profiler inflation.
2. :func:`costs_from_steps`: traces (their :class:`TraceSteps`). A profiled step is slower than the real one, so every
   step's ``dur_us`` is scaled by its trace's ``estimated_unprofiled_step_us_median /
   step_us_median``. Eager traces give eager costs and predicted graph costs, graph traces
   measured graph costs; where both exist at a size, both are measured.

The distribution comes from :func:`load_distribution` (CSV or JSON histogram) or from the
steps of analysed traces (:func:`distribution_from_steps`). Every reader returns the cost
model's :class:`~analyzer.planning.costs.CostTable` or a plain ``{batch_size: count}``; bad
files raise :class:`~analyzer.errors.InputError` naming the file and the reason.
"""
from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..errors import InputError
from .costs import CostSeries, CostTable, size_span, table_from_series
from .memory import GRAPH_MODES, GraphMemoryMeasurement, ModelDims

TIMINGS_SCHEMA = "launchgap.timings/1"
#: Refuse auxiliary JSON/CSV files (timings, distributions) larger than this.
MAX_AUX_FILE_BYTES = 64 * 1024 * 1024
#: Step phases the planner takes costs and batch sizes from (None: a trace that does not say).
_DECODE_OR_UNKNOWN = ("decode", None)


# --- from traces ---------------------------------------------------------------------------------

@dataclass(frozen=True)
class TraceSteps:
    """What planning reads of one analysed trace: its decode steps as columns (one entry per step).

    ``name``: the trace, as messages name it. ``mode``: ``eager``, ``graph``, ``mixed`` or
    ``capture`` (:mod:`analyzer.graph_mode`). ``unprofiled_scale``: the trace's estimated
    unprofiled over profiled median step (``summary.estimated_unprofiled_step_us_median /
    summary.step_us_median``; 1 when either is 0). Per step: ``batch_size`` (-1: unknown),
    ``dur_us`` (profiled), ``predicted_graph_us`` and ``phase`` (``decode``, ``prefill``,
    ``mixed``, or ``None`` when the trace does not say).

    Built from an analysed trace by :func:`analyzer.planning.request.trace_steps` and from a
    fleet summary by :func:`analyzer.fleet.summary_steps`: planning never reads a report itself.
    """

    name: str
    mode: str
    unprofiled_scale: float
    batch_size: np.ndarray
    dur_us: np.ndarray
    predicted_graph_us: np.ndarray
    phase: tuple[str | None, ...]

    @staticmethod
    def scale_of(step_us_median: float, unprofiled_step_us_median: float) -> float:
        """The profiled -> unprofiled factor of a trace (see the class docstring)."""
        return (unprofiled_step_us_median / step_us_median
                if step_us_median > 0 and unprofiled_step_us_median > 0 else 1.0)

    @property
    def planned(self) -> np.ndarray:
        """Steps that count for costs and the distribution: decode (or unknown phase) steps."""
        return np.array([ph in _DECODE_OR_UNKNOWN for ph in self.phase], dtype=bool)


def _medians(keys: np.ndarray, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Distinct keys (ascending) and the median of the values of each."""
    sizes, inv = np.unique(keys, return_inverse=True)
    return sizes, np.array([np.median(values[inv == j]) for j in range(sizes.size)])  # per distinct size


def costs_from_steps(traces: Sequence[TraceSteps]) -> CostTable:
    """Costs per batch size from analysed traces' steps.

    Per step, the cost is ``dur_us`` times the trace's ``unprofiled_scale``; per batch size,
    the median over all steps of that size. Eager traces give the eager cost (measured) and
    the graph cost (predicted, the steps' ``predicted_graph_us``); graph traces give the graph
    cost (measured), and win over predictions at the same size. Mixed traces (graph launches
    plus eager launches) count as graph measurements with a warning. Only decode steps count:
    a serving engine's prefill or mixed step (``phase``) is not a decode bucket; steps of
    unknown phase count.
    """
    cols: dict[str, list[np.ndarray]] = {"eb": [], "eu": [], "pu": [], "gb": [], "gu": []}
    notes: list[str] = []
    no_bs = not_decode = n_eager = n_graph = 0
    for t in traces:  # one trace at a time; the steps are columns
        planned = t.planned
        known = planned & (t.batch_size >= 0)
        not_decode += int((~planned).sum())
        no_bs += int((planned & (t.batch_size < 0)).sum())
        if t.mode == "mixed":
            notes.append(f"{t.name}: mixed eager/graph steps are taken as graph measurements "
                         f"(what capture achieved in that setup)")
        if not known.any():
            continue
        cost = t.dur_us[known] * t.unprofiled_scale
        if t.mode == "eager":
            n_eager += 1
            cols["eb"].append(t.batch_size[known])
            cols["eu"].append(cost)
            cols["pu"].append(t.predicted_graph_us[known])
        else:
            n_graph += 1
            cols["gb"].append(t.batch_size[known])
            cols["gu"].append(cost)
    if not_decode:
        notes.append(f"{not_decode} prefill or mixed steps were left out of the costs (decode steps only)")
    if no_bs:
        notes.append(f"{no_bs} steps without a known batch size were left out of the costs "
                     f"(name it in the step annotation, e.g. bs=8, or use --batch-regex/--batch-op)")
    if not cols["eb"] and not cols["gb"]:
        raise InputError("no steps with a known batch size in the traces: cannot tell what a step costs at which "
                         "batch size (annotate steps with bs=N, use --batch-regex/--batch-op, or pass --timings)")
    if not cols["eb"]:
        raise InputError("only graph-mode traces: they give no eager cost to compare with; add eager traces "
                         "of the same model or pass --timings")
    cat = {k: np.concatenate(v) if v else np.zeros(0) for k, v in cols.items()}
    e_sizes, e_us = _medians(cat["eb"].astype(np.int64), cat["eu"])
    p_sizes, p_us = _medians(cat["eb"].astype(np.int64), cat["pu"])
    m_sizes, m_us = _medians(cat["gb"].astype(np.int64), cat["gu"])
    g_sizes = np.union1d(m_sizes, p_sizes)
    measured = np.isin(g_sizes, m_sizes)
    g_us = np.where(measured, m_us[np.searchsorted(m_sizes, g_sizes).clip(0, max(m_sizes.size - 1, 0))]
                    if m_sizes.size else 0.0,
                    p_us[np.searchsorted(p_sizes, g_sizes).clip(0, max(p_sizes.size - 1, 0))])
    g_srcs = tuple("measured" if m else "predicted" for m in measured.tolist())
    if not measured.all():
        notes.append(f"graph costs at bs {size_span(g_sizes[~measured].tolist())} are predicted from eager traces "
                     f"(no graph trace there)")
    notes.append("trace costs are profiled step times scaled to estimated unprofiled ones; harness timings "
                 "(--timings) are more accurate")
    origin = f"{n_eager} eager and {n_graph} graph trace(s)"
    return table_from_series(CostSeries("eager", e_sizes, e_us, tuple("measured" for _ in e_sizes)),
                             CostSeries("graph", g_sizes, g_us.astype(float), g_srcs), origin, notes)


def distribution_from_steps(traces: Sequence[TraceSteps]) -> dict[int, float]:
    """Decode steps per batch size over all traces (steps without a known batch size, and a serving
    engine's prefill or mixed steps, are not counted)."""
    known = [t.batch_size[t.planned & (t.batch_size >= 0)] for t in traces]
    if not known or not sum(k.size for k in known):
        return {}
    sizes, counts = np.unique(np.concatenate(known), return_counts=True)
    return {int(b): float(n) for b, n in zip(sizes.tolist(), counts.tolist())}


# --- from files ---------------------------------------------------------------------------------

def read_small_file(path: str | Path, what: str) -> bytes:
    """The bytes of a small input file (timings, distribution, model config, memory model): at most
    :data:`MAX_AUX_FILE_BYTES`; :class:`InputError` naming the file when missing, a folder, too
    large or empty."""
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
    doc = _json_doc(read_small_file(path, "timings"), p, "timings")
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
    return table_from_series(
        CostSeries("eager", e_sizes, np.array([np.median(eager[b]) for b in e_sizes.tolist()]),
                tuple("measured" for _ in e_sizes)),
        CostSeries("graph", g_sizes, np.array([np.median(graph[b]) for b in g_sizes.tolist()]),
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
    data = read_small_file(path, "distribution")
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


# --- graph memory and model dimensions ------------------------------------------------------------

def _timings_doc(path: str | Path) -> dict:
    p = str(path)
    doc = _json_doc(read_small_file(path, "timings"), p, "timings")
    if not isinstance(doc, dict):
        raise InputError(f"not a timings file: expected a JSON object (schema {TIMINGS_SCHEMA})", p)
    schema = doc.get("schema")
    if schema is not None and schema != TIMINGS_SCHEMA:
        raise InputError(f"unsupported timings schema {schema!r} (expected {TIMINGS_SCHEMA})", p)
    return doc


def _dims_section(doc: dict, path: str) -> dict[str, ModelDims]:
    models = doc.get("models") or {}
    if not isinstance(models, dict):
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
    doc = _timings_doc(path)
    entries = doc.get("graph_memory")
    if not isinstance(entries, list) or not entries:
        raise InputError("timings file has no graph_memory measurements (record capture lists with the harness)", p)
    dims = _dims_section(doc, p)
    out = []
    for i, e in enumerate(entries):  # one capture list each: a few dozen
        where = f"graph_memory[{i}]"
        if not isinstance(e, dict):
            raise InputError(f"{where} is not an object", p)
        mode = e.get("mode")
        if mode not in GRAPH_MODES:
            raise InputError(f"{where}.mode is {mode!r}, expected one of {', '.join(GRAPH_MODES)}", p)
        sizes = e.get("capture_sizes")
        if not isinstance(sizes, list) or not sizes or any(isinstance(s, bool) or not isinstance(s, int) or s < 1
                                                           for s in sizes):
            raise InputError(f"{where}.capture_sizes must be a non-empty list of positive integers", p)
        graphs = e.get("graphs")
        if isinstance(graphs, bool) or not isinstance(graphs, int) or graphs < len(set(sizes)):
            raise InputError(f"{where}.graphs is {graphs!r}, expected an integer >= the number of sizes", p)
        used = _num(e, "device_used_mib", p, i, required=True)
        cap = _num(e, "capture_s", p, i, required=False)
        reserved = _num(e, "reserved_mib", p, i, required=False, positive=False)
        raw_nodes = e.get("nodes_per_graph") or {}
        counted = [float(v) for v in raw_nodes.values() if isinstance(v, (int, float)) and not isinstance(v, bool)
                   and v > 0] if isinstance(raw_nodes, dict) else []
        n_sizes = len(set(sizes))
        nodes = float(np.median(counted)) * n_sizes if counted else None
        if counted and len(counted) == n_sizes:
            nodes = float(sum(counted))
        out.append(GraphMemoryMeasurement(str(e.get("model", "")), mode, str(e.get("list_name", "")),
                                          tuple(sorted(set(sizes))), graphs, nodes, used, cap, reserved,
                                          min(_reused_sizes(e.get("per_size")), n_sizes)))
    return dims, out


def model_dims_from_timings(path: str | Path, model: str | None) -> ModelDims | None:
    """The dimensions of ``model`` in a timings file's ``models`` section (``None`` when absent)."""
    p = str(path)
    dims = _dims_section(_timings_doc(path), p)
    if model is None:
        return next(iter(dims.values())) if len(dims) == 1 else None
    return dims.get(model)


def kernels_per_step_from_timings(path: str | Path, model: str | None) -> float | None:
    """Median ``kernels_per_step`` of a model's rows: the nodes of its full graph (the same kernels)."""
    doc = _timings_doc(path)
    vals = [r.get("kernels_per_step") for r in doc.get("rows") or [] if isinstance(r, dict)
            and (model is None or str(r.get("model", "")) == model)]
    vals = [float(v) for v in vals if isinstance(v, (int, float)) and not isinstance(v, bool) and v > 0]
    return float(np.median(vals)) if vals else None


def load_model_dims(path: str | Path, model: str | None = None) -> ModelDims:
    """Model dimensions from a JSON file: a Hugging Face ``config.json``, the harness's layout
    (``layers``, ``hidden``, ...), or a timings file's ``models`` section (``model`` picks one)."""
    p = str(path)
    doc = _json_doc(read_small_file(path, "model config"), p, "model config")
    if not isinstance(doc, dict):
        raise InputError("model config must be a JSON object", p)
    if isinstance(doc.get("models"), dict):
        dims = _dims_section(doc, p)
        if model is None and len(dims) == 1:
            return next(iter(dims.values()))
        if model not in dims:
            raise InputError(f"model {model!r} not in the file's models ({', '.join(sorted(dims))})", p)
        return dims[model]
    try:
        name = model or doc.get("name") or doc.get("_name_or_path") or doc.get("model_type") or Path(p).parent.name
        return ModelDims.from_mapping(doc, str(name))
    except InputError as exc:
        raise InputError(exc.message, p) from None
