"""A server log or ``/metrics`` scrape as a plan input: costs, distribution, capture list, capture cost.

Registered in :mod:`launchgap.planning.request` as the ``server_log`` input kind (ranked after
harness timings, before traces for costs; before traces for the distribution; after a pasted
config or ``--capture-sizes`` for the capture list). Each reader takes the file's
:class:`~launchgap.serverlogs.diagnosis.LogDiagnosis` (read once, kept as the input's value).

**Costs from a log.** Decode step times per batch size, from the best line the log has:

1. vLLM ``Batchsize forward time stats`` (``VLLM_LOG_BATCHSIZE_INTERVAL``): the median forward
   time per batch size, unprofiled, on that server;
2. per-iteration lines (TensorRT-LLM ``print_iter_log``, vLLM ``VLLM_LOG_ITERATION_DETAILS``):
   each decode iteration's time (device step time where the line has it);
3. otherwise the decode lines' throughput: ``step = batch / gen throughput`` (SGLang's spans the
   ``decode_log_interval`` steps of its line, vLLM's the stats interval: an average).

A point is a graph step when the line says so (SGLang's flag), else when its batch is at or under
the largest captured size (every engine pads up to a captured size there), else eager. The
series a log lacks is completed with the **constant launch overhead** model: an eager step costs
its graph step plus the launches the graph removes, about the same at every batch size
(``eager(b) = graph(b) + overhead``, the overhead the median of ``eager - graph`` over the sizes
where both are seen, else of eager points against the graph line's least-squares fit). Where the
log shows no eager step at all the overhead is a prior: :data:`LAUNCH_US_PER_KERNEL` (measured on
our H200 host) times the kernels of a decode step (:data:`~launchgap.planning.memory.NODES_PER_LAYER`
per layer of a :data:`PRIOR_LAYERS`-layer model), and the plan's notes say so.

**Capture cost.** The server's own capture seconds and memory for its own list calibrate the
memory and capture-time model for that server (:func:`launchgap.planning.memory.calibrate`).
"""
from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

from ..engines import CaptureSettings, engine, sizes_text, version_default
from ..errors import InputError
from ..serverlogs import read_server_file
from ..serverlogs.diagnosis import LogDiagnosis, diagnose
from .costs import CostSeries, CostTable, table_from_series
from .memory import NODES_BASE, NODES_PER_LAYER, CaptureCalibration

#: CPU cost of one kernel launch, microseconds (driver, queue, dispatch; measured on our H200 host).
LAUNCH_US_PER_KERNEL = 7.5
#: Layers of the model the launch-overhead prior assumes (a 7-8B decoder) when the log shows no eager step.
PRIOR_LAYERS = 32


def log_of(value: object, path: str | None) -> LogDiagnosis:
    """The input's diagnosis: its value when read already, else the file read now."""
    if isinstance(value, LogDiagnosis):
        return value
    if path is None:
        raise InputError("a server-log plan input needs a file")
    log = read_server_file(Path(path))
    assert log is not None
    return diagnose(log)


def _points(d: LogDiagnosis, notes: list[str]) -> tuple[np.ndarray, np.ndarray, np.ndarray, str]:
    """(batch, step_us, graph flag 1/0/-1) per observation, and what they came from."""
    lg = d.log
    top = d.max_captured
    if top is None:  # the log names no list: its version's default, cut at its request cap
        sizes, which = version_default(lg.engine, lg.version, lg.max_running_requests)
        top = max(sizes)
        notes.append(f"the log names no capture list: the {engine(lg.engine).LABEL} default's largest size {top} "
                     f"({which}; the log's version {lg.version or 'unknown'}) is taken as the ceiling (batches above "
                     f"it ran eager)")
    if lg.forward_times:
        b = np.array([f.batch_size for f in lg.forward_times], dtype=np.int64)
        us = np.array([f.median_ms for f in lg.forward_times]) * 1000.0
        w = np.array([f.count for f in lg.forward_times])
        b, us = np.repeat(b, np.minimum(w, 1000)), np.repeat(us, np.minimum(w, 1000))  # weight by forwards seen
        g = np.full(len(b), -1, dtype=np.int8)
        what = f"{int(w.sum())} forwards in vLLM's Batchsize forward time stats"
    elif len(lg.iter_batch):
        keep = (lg.iter_context == 0) & (lg.iter_batch > 0) & np.isfinite(lg.iter_ms) & (lg.iter_ms > 0)
        b, us = lg.iter_batch[keep].astype(np.int64), lg.iter_ms[keep] * 1000.0
        g = np.full(len(b), -1, dtype=np.int8)
        what = f"{int(keep.sum())} decode iterations' logged step times"
    else:
        keep = (lg.decode_batch > 0) & np.isfinite(lg.decode_tok_s) & (lg.decode_tok_s > 0)
        b = lg.decode_batch[keep].astype(np.int64)
        us = b / lg.decode_tok_s[keep].astype(float) * 1e6
        g = lg.decode_graph[keep]
        what = f"{int(keep.sum())} decode lines' throughput (step = batch / gen throughput)"
    if top is not None:
        g = np.where(g >= 0, g, (b <= top).astype(np.int8))
    return b, us, g, what


def _medians(b: np.ndarray, us: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    sizes = np.unique(b)
    order = np.argsort(b, kind="stable")
    bs, vs = b[order], us[order]
    cuts = np.searchsorted(bs, sizes)
    return sizes, np.array([np.median(x) for x in np.split(vs, cuts[1:])])  # one per batch size


def _line(sizes: np.ndarray, vals: np.ndarray) -> tuple[float, float]:
    """Least-squares ``a + s * b`` with the slope floored at 0."""
    if len(sizes) < 2:
        return float(vals[0]), 0.0
    s, a = np.polyfit(sizes.astype(float), vals, 1)
    if s < 0:
        return float(np.mean(vals)), 0.0
    return float(a), float(s)


def costs_from_log(d: LogDiagnosis, kernels_per_step: float | None = None) -> CostTable | None:
    """The cost table of one log (module text), or None when it holds no decode timing."""
    notes: list[str] = []
    b, us, g, what = _points(d, notes)
    if not len(b):
        return None
    gs, gv = _medians(b[g == 1], us[g == 1]) if (g == 1).any() else (np.zeros(0, np.int64), np.zeros(0))
    es, ev = _medians(b[g == 0], us[g == 0]) if (g == 0).any() else (np.zeros(0, np.int64), np.zeros(0))
    if not len(gs):
        raise InputError(f"{d.log.path}: the log shows no graph step (every logged batch ran eager): it gives no "
                         f"graph cost; add a graph trace or --timings")
    a, s = _line(gs, gv)
    if len(es):
        both = np.intersect1d(gs, es)
        if len(both):
            overhead = float(np.median(ev[np.isin(es, both)] - gv[np.isin(gs, both)]))
        else:
            overhead = float(np.median(ev - (a + s * es)))
        overhead = max(overhead, 0.0)
        notes.append(f"eager costs where the log shows only graphs, and graph costs above the largest captured "
                     f"size: graph line {a:,.0f} + {s:,.2f} x batch us, eager = graph + {overhead:,.0f} us "
                     f"(constant launch overhead, from {len(es)} eager batch sizes)")
    else:
        kernels = kernels_per_step if kernels_per_step else NODES_PER_LAYER * PRIOR_LAYERS + NODES_BASE
        overhead = LAUNCH_US_PER_KERNEL * kernels
        notes.append(f"the log shows no eager step: eager = graph + {overhead:,.0f} us, an assumed launch overhead "
                     f"({kernels:,.0f} kernels x {LAUNCH_US_PER_KERNEL} us; give an eager trace or --timings for "
                     f"a measured one)")
    sizes = np.union1d(gs, es)
    g_at = np.where(np.isin(sizes, gs), np.interp(sizes, gs, gv), a + s * sizes)
    g_at[np.isin(sizes, gs)] = gv[np.searchsorted(gs, sizes[np.isin(sizes, gs)])]
    e_at = g_at + overhead
    if len(es):
        seen = np.isin(sizes, es)
        e_at[seen] = ev[np.searchsorted(es, sizes[seen])]
    e_src = tuple("measured" if x in set(es.tolist()) else "predicted" for x in sizes.tolist())
    g_src = tuple("measured" if x in set(gs.tolist()) else "predicted" for x in sizes.tolist())
    origin = f"server log {Path(d.log.path).name}: {what}"
    return table_from_series(CostSeries("eager", sizes, e_at, e_src), CostSeries("graph", sizes, g_at, g_src),
                             origin, notes)


def distribution_from_log(d: LogDiagnosis) -> dict[int, float] | None:
    """Decode batch sizes as the log samples them (``LogDiagnosis.distribution_basis``)."""
    return {int(k): float(v) for k, v in d.distribution.items()} or None


def capture_sizes_from_log(d: LogDiagnosis) -> tuple[int, ...] | None:
    return tuple(d.log.capture_sizes) if d.log.capture_sizes else None


def capture_settings_from_log(d: LogDiagnosis) -> CaptureSettings | None:
    """The capture list the log states, as the settings a trace of its engine is analysed under
    (:attr:`launchgap.report.AnalysisOptions.log_capture`): the server's own list, where its log prints it;
    ``None`` when it prints none."""
    sizes = capture_sizes_from_log(d)
    if sizes is None:
        return None
    return CaptureSettings(d.log.engine, sizes, max(sizes), None, False,
                           (f"{engine(d.log.engine).LABEL} log {Path(d.log.path).name}: capture sizes "
                            f"{sizes_text(sizes)}",))


def stated_capture(logs: Sequence[LogDiagnosis]) -> CaptureSettings | None:
    """The capture list of the first of ``logs`` (server logs; scrapes state none) that prints one
    (:func:`capture_settings_from_log`), ``None`` when none does."""
    return next((c for d in logs if d.log.kind == "log" and (c := capture_settings_from_log(d)) is not None), None)


def calibration_from_log(d: LogDiagnosis) -> CaptureCalibration | None:
    """The server's own capture figures for its own list, when the log has the list and a figure."""
    lg = d.log
    if not lg.capture_sizes or (lg.capture_memory_mib is None and lg.capture_seconds is None):
        return None
    return CaptureCalibration(tuple(lg.capture_sizes), lg.capture_memory_mib, lg.capture_seconds,
                              f"{lg.engine} log {Path(lg.path).name}")


def ceiling_notes(d: LogDiagnosis, buckets: tuple[int, ...]) -> list[str]:
    """The plan in the log's engine's own syntax, and what it does to the ceiling the log shows:
    the largest size before and after, and the share of logged decode batches above each."""
    top = d.max_captured
    b = d.log.decode_batch
    eng = engine(d.log.engine)
    out = [f"{eng.LABEL} ({d.log.path}): {eng.config_snippet(list(buckets), 'pad')}"]
    if top is None or not len(b) or not buckets:
        return out
    new = max(buckets)
    before, after = float((b > top).mean()), float((b > new).mean())
    state = " (the log is in the absorbing ceiling state)" if d.absorbing else ""
    return [f"ceiling: the server captures up to {top}; the plan up to {new}. Logged decode batches above the "
            f"largest captured size: {before:.1%} now{state}, {after:.1%} with the plan"] + out
