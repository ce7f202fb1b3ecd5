"""Fleet scale: a pure per-trace summary, mapped over many files, reduced into one fleet report.

Map: :func:`summarize_trace` loads and analyses one trace (exactly as ``launchgap analyze``
does: :func:`launchgap.loaders.load_trace` + :func:`launchgap.ranks.analyze_with_collectives`; of a file holding
several ranks, the one rank ``launchgap plan`` reads: :func:`launchgap.ranks.analyze_for_plan`) and returns
a small JSON-safe dict (schema ``launchgap.fleet-trace/1``), never the event table:

* identity: ``path``, ``size_bytes``, ``mtime_ns`` (what a rerun matches to skip done files);
* ``format``, ``mode``, ``rank``, ``world_size``, ``warnings``, ``elapsed_s`` (load + analysis);
* ``summary``: the trace's :class:`~launchgap.report.Summary`, as ``analyze`` reports it;
* ``devices``: per-device totals (:class:`~launchgap.report.DeviceReport`);
* ``steps``: per-step columns, one list entry per step, same values as ``analyze``'s steps:
  ``batch_size`` (``null`` when unknown), ``dur_us``, ``gpu_busy_us``, ``gpu_idle_us``,
  ``idle_us_by_cause`` (one column per cause), ``predicted_graph_us``, ``kernels``,
  ``kernel_launches``, ``graph_launches``, ``host_events``, ``launch_api_us``;
* ``batch_histogram``: steps per batch size (keys are decimal strings, JSON objects need them);
* ``notes``: what the analysis noted that a capture plan rests on (:func:`launchgap.verdict.plan_caveats`);
  with ``warnings`` the fleet's plans carry them (absent in results written before: none);
* ``benchmark``: whether the trace is a ``launchgap record`` sweep
  (:func:`launchgap.planning.request.is_benchmark`): it gives costs, never the distribution (absent in
  results written before it was recorded: read as not a sweep);
* ``per_batch``: per batch size, the median profiled step ``step_us_median``, the median step
  cost ``cost_us_median`` (profiled step scaled to an unprofiled one, the rule of
  :func:`launchgap.planning.inputs.costs_from_steps`), ``predicted_graph_us_median`` and
  ``gpu_busy_us_median``;
* ``workload``: the trace's :class:`~launchgap.workload.Workload` (model signature, device,
  rank) as a dict;
* ``error`` (``null`` when fine) and ``error_kind``: ``"input"`` for an
  :class:`~launchgap.errors.AnalyzerError` (the file is bad: a rerun skips it while the file is
  unchanged), ``"memory"``, ``"internal"`` or ``"worker"`` (a rerun tries again).

Reduce: :class:`FleetAccumulator` takes summaries one at a time (keeping a few numbers and
per-step arrays per trace, not the dicts) and :meth:`FleetAccumulator.finish` builds the
:class:`FleetReport` (schema ``launchgap.fleet/1``):

* distributions over traces (one value per trace, i.e. per server/rank): p10/p50/p90/max of
  the median profiled step ``step_us``, the estimated unprofiled step, the GPU idle fraction,
  the host-side idle fraction (causes host + launch + sync over the step windows) and the
  predicted CUDA-graph speedup (as each trace's summary defines it);
* outliers: the slowest traces *relative to their peers* (median step over the median of the
  traces with the same mode and the same main batch size, so a large batch is not called
  slow) and the most launch-bound (highest host-side idle fraction);
* fleet-wide idle fraction by cause: idle per cause summed over every step of every trace over
  the summed step windows;
* the batch-size histogram (steps per size over the fleet; ``launchgap record`` sweeps give costs only and are
  left out of it and of every plan's distribution, as ``launchgap plan`` leaves them out) and a capture plan per workload
  (:mod:`launchgap.workload`: traces of different models, devices or ranks are never pooled):
  :func:`launchgap.planning.request.build_plan` given the fleet's plan request (the plan flags,
  read as ``launchgap plan`` reads them: timings, distribution, model dimensions, memory model,
  budgets) with that workload's steps as its traces (:func:`summary_steps`), exactly as
  ``launchgap plan`` plans that workload. With one workload ``plan`` is its plan; with several
  ``plan`` is the one chosen (``workload``) or None, and ``workloads`` lists each one's plan.
  Peers (``step_vs_peers``) are traces of the same workload, mode and main batch size.

Results files (JSON lines) start with a header line (schema ``launchgap.fleet-run/1``: the
analysis options) followed by one summary per line, appended as traces finish;
:func:`load_fleet_results` reads one back (tolerating a line cut short by an interruption).
"""
from __future__ import annotations

import json
import os
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from . import __version__
from .errors import AnalyzerError, InputError
from .gaps import CAUSES
from .loaders import DEFAULT_MAX_TRACE_BYTES, load_trace
from .costmodel import curve_from_dict, curve_to_dict
from .planning.inputs import TraceSteps, distribution_from_steps
from .planning.request import is_benchmark, trace_notes
from .report import AnalysisOptions, TraceReport
from .verdict import plan_caveats
from .workload import Workload, display_names, pick_workload

if TYPE_CHECKING:
    from .planning.planner import Plan, TraceNote
    from .planning.request import PlanRequest

SCHEMA = "launchgap.fleet/1"
TRACE_SCHEMA = "launchgap.fleet-trace/1"
RUN_SCHEMA = "launchgap.fleet-run/1"
#: Idle causes that mean "the GPU waited for the CPU" (see :mod:`launchgap.gaps`).
HOST_CAUSES = ("host", "launch", "sync")
#: Error kinds a rerun does not retry while the file is unchanged (the input itself is bad).
FINAL_ERROR_KINDS = ("input",)
#: Per-step columns of a summary (besides ``idle_us_by_cause``), all copied from StepReport.
STEP_COLUMNS = ("batch_size", "dur_us", "gpu_busy_us", "gpu_idle_us", "predicted_graph_us", "kernels",
                "kernel_launches", "graph_launches", "host_events", "launch_api_us", "phase", "graph_coverage",
                "tokens")
#: Keys of ``steps_by_phase`` (a trace's step counts per serving-engine phase; "unknown": the trace
#: does not say). Only decode and unknown steps feed the batch histogram and the capture plan.
PHASE_KEYS = ("decode", "prefill", "mixed", "unknown")
_PLANNED_PHASES = ("decode", None)
#: Outlier lists keep this many traces by default.
DEFAULT_TOP = 5
#: Batching of the map (see :func:`plan_batches`): at most this many traces per task, ...
BATCH_MAX_TRACES = 8
#: ... at least this many tasks per worker while there are traces enough (balance at the end of a run), ...
TASKS_PER_WORKER = 4
#: ... and a batch closes before it passes this many bytes on disk (a trace this large is a task alone).
BATCH_MAX_BYTES = 16 * 2**20


# --- map: one trace -> one small summary ---------------------------------------------------------

def file_identity(path: str | Path) -> dict:
    """``path`` (as given), ``size_bytes`` and ``mtime_ns`` of a file: what a rerun matches on."""
    st = os.stat(path)
    return {"path": str(path), "size_bytes": int(st.st_size), "mtime_ns": int(st.st_mtime_ns)}


def _cost_scale(summary: Mapping) -> float:
    """Profiled -> unprofiled factor of a trace, as :func:`launchgap.planning.inputs.costs_from_steps` applies it."""
    return TraceSteps.scale_of(summary["step_us_median"], summary["estimated_unprofiled_step_us_median"])


def steps_by_phase(phases: list) -> dict[str, int]:
    """Step counts per phase (:data:`PHASE_KEYS`; ``None`` counts as ``unknown``)."""
    out = dict.fromkeys(PHASE_KEYS, 0)
    for k in PHASE_KEYS[:-1]:  # four keys
        out[k] = sum(1 for p in phases if p == k)
    out["unknown"] = len(phases) - sum(out[k] for k in PHASE_KEYS[:-1])
    return out


def summary_from_report(report: TraceReport) -> dict:
    """The fleet summary fields of one analysed trace (everything but identity, timing and error)."""
    d = report.to_dict()
    steps = d["steps"]
    cols: dict = {c: [s[c] for s in steps] for c in STEP_COLUMNS}
    cols["idle_us_by_cause"] = {c: [s["idle_us_by_cause"][c] for s in steps] for c in CAUSES}
    # The batch histogram and per-batch costs are of decode steps (and steps of unknown phase) only.
    bs = np.array([-1 if b is None or p not in _PLANNED_PHASES else b
                   for b, p in zip(cols["batch_size"], cols["phase"])], dtype=np.int64)
    dur = np.array(cols["dur_us"], dtype=float)
    pred = np.array(cols["predicted_graph_us"], dtype=float)
    busy = np.array(cols["gpu_busy_us"], dtype=float)
    scale = _cost_scale(d["summary"])
    bench = is_benchmark(report)
    per_batch = []
    hist: dict[str, int] = {}
    for b in np.unique(bs[bs >= 0]).tolist():  # one row per batch size
        sel = bs == b
        hist[str(b)] = int(sel.sum())
        per_batch.append({"batch_size": b, "steps": int(sel.sum()),
                          "step_us_median": round(float(np.median(dur[sel])), 3),
                          "cost_us_median": round(float(np.median(dur[sel] * scale)), 3),
                          "predicted_graph_us_median": round(float(np.median(pred[sel])), 3),
                          "gpu_busy_us_median": round(float(np.median(busy[sel])), 3)})
    return {"format": d["format"], "mode": d["mode"], "rank": d["rank"], "world_size": d["world_size"],
            "warnings": d["warnings"], "summary": d["summary"], "devices": d["devices"], "steps": cols,
            "batch_histogram": hist, "per_batch": per_batch, "workload": d.get("workload"),
            "steps_by_phase": steps_by_phase(cols["phase"]),
            # the plan's cost curve (launchgap.costmodel)
            "cost_curve": curve_to_dict(report.cost_curve, report.eager_curve),
            # a launchgap record sweep gives costs, never the distribution: the rule launchgap plan applies
            "benchmark": bench,
            # what the analysis noted that a plan rests on, carried into the fleet's plans with the warnings
            "notes": plan_caveats(report.summary, report.steps, bench)}


def analyze_file(path: str | Path, options: AnalysisOptions, max_bytes: int) -> TraceReport:
    """One trace analysed exactly as ``launchgap analyze`` analyses a lone trace: the two must stay
    in step (the fleet's acceptance is the same numbers as ``analyze``, trace by trace).

    Collectives' waits for peers are estimated from the trace alone (each rank is one task here),
    so a tensor-parallel rank that spins in NCCL does not look GPU-bound. A file holding several ranks gives the
    one rank a plan reads (its steps counted once, not once per rank), a warning saying which.
    """
    from .ranks import analyze_for_plan

    return analyze_for_plan(load_trace(path, max_bytes), options)[0]


def summarize_trace(path: str | Path, options: AnalysisOptions | None = None,
                    max_bytes: int = DEFAULT_MAX_TRACE_BYTES) -> dict:
    """Load and analyse one trace into its fleet summary (see the module docstring). Pure.

    Never raises for a bad trace: the summary carries ``error`` and ``error_kind`` instead,
    so one bad file cannot stop a fleet run.
    """
    opts = options or AnalysisOptions()
    rec: dict = {"schema": TRACE_SCHEMA, "path": str(path), "size_bytes": None, "mtime_ns": None,
                 "error": None, "error_kind": None}
    t0 = time.perf_counter()
    try:
        rec.update(file_identity(path))
        rec.update(summary_from_report(analyze_file(path, opts, max_bytes)))
    except AnalyzerError as exc:
        rec.update(error=exc.message, error_kind="input")
    except FileNotFoundError:
        rec.update(error="no such file (on this worker: fleet workers read the traces from a shared "
                         "filesystem)", error_kind="input")
    except OSError as exc:
        rec.update(error=f"cannot read the file: {exc.strerror or exc}", error_kind="input")
    except MemoryError:
        rec.update(error="out of memory while analysing; give workers more memory or lower --max-trace-bytes",
                   error_kind="memory")
    except Exception as exc:  # noqa: BLE001 - a bug on one trace must not end a run over thousands
        rec.update(error=f"internal error: {type(exc).__name__}: {exc}", error_kind="internal")
    rec["elapsed_s"] = round(time.perf_counter() - t0, 4)
    return rec


def summarize_traces(paths: Sequence[str | Path], options: AnalysisOptions | None = None,
                     max_bytes: int = DEFAULT_MAX_TRACE_BYTES) -> list[dict]:
    """:func:`summarize_trace` of each path, in order: one Dask task for a batch of small traces."""
    return [summarize_trace(p, options, max_bytes) for p in paths]  # one per file


def plan_batches(sizes_bytes: Sequence[int], workers: int) -> list[list[int]]:
    """Indexes of the traces (in the given order) grouped into one batch per Dask task.

    A task costs the scheduler and the client about a millisecond or more of one shared
    process whatever it does, against tens of milliseconds of analysis for a small trace:
    one task per small trace makes that process the bottleneck of a many-worker run. Batches
    of ``k = len // (workers * TASKS_PER_WORKER)`` consecutive traces (1 to
    ``BATCH_MAX_TRACES``) divide that cost by ``k`` while every worker still gets at least
    ``TASKS_PER_WORKER`` tasks; a batch also closes before it passes ``BATCH_MAX_BYTES`` on
    disk, so large traces stay one per task and stream back one by one.
    """
    k = max(1, min(BATCH_MAX_TRACES, len(sizes_bytes) // (max(workers, 1) * TASKS_PER_WORKER)))
    batches: list[list[int]] = []
    cur: list[int] = []
    cur_bytes = 0
    for i, size in enumerate(sizes_bytes):  # one per file
        if cur and (len(cur) >= k or cur_bytes + size > BATCH_MAX_BYTES):
            batches.append(cur)
            cur, cur_bytes = [], 0
        cur.append(i)
        cur_bytes += size
    if cur:
        batches.append(cur)
    return batches


def worker_version() -> str:
    """launchgap's version where this runs (the CLI asks every Dask worker before submitting)."""
    return __version__


# --- reduce: many summaries -> one fleet report ------------------------------------------------

@dataclass(frozen=True)
class Distribution:
    """p10/p50/p90/max of one metric over the traces (linear-interpolated percentiles)."""

    count: int
    p10: float
    p50: float
    p90: float
    max: float

    @classmethod
    def of(cls, values: np.ndarray) -> Distribution:
        v = np.asarray(values, dtype=float)
        if v.size == 0:
            return cls(0, 0.0, 0.0, 0.0, 0.0)
        p10, p50, p90 = np.percentile(v, [10, 50, 90])
        return cls(int(v.size), round(float(p10), 4), round(float(p50), 4), round(float(p90), 4),
                   round(float(v.max()), 4))


@dataclass(frozen=True)
class TraceRow:
    """One trace (one server or rank) in the fleet report.

    ``host_idle_fraction``: idle time with cause host, launch or sync over the summed step
    windows. ``main_batch_size``: the most common known batch size of its steps (smallest on
    ties). ``step_vs_peers``: its median step over the median of the traces with the same
    mode and main batch size (1.0 = typical; 1.5 = half again slower than its peers).
    """

    path: str
    rank: int | None
    world_size: int | None
    mode: str
    steps: int
    batch_sizes: list[int]
    main_batch_size: int | None
    step_us_median: float
    estimated_unprofiled_step_us_median: float
    gpu_idle_fraction: float
    host_idle_fraction: float
    predicted_speedup: float
    verdict: str
    step_vs_peers: float
    workload_id: str | None = None
    #: steps per phase (:data:`PHASE_KEYS`) and the serving engine that wrote the trace (``None``: none).
    steps_by_phase: dict[str, int] = field(default_factory=dict)
    engine: str | None = None


@dataclass(frozen=True)
class TraceError:
    path: str
    error: str
    kind: str


@dataclass(frozen=True)
class WorkloadPlan:
    """One workload of the fleet: its traces' count, batch sizes and capture plan (None with the reason), and what
    its traces' analyses warned about and noted (:func:`launchgap.planning.request.trace_notes`; the plan's own
    ``trace_notes`` when there is a plan: said here too, so that a workload with no plan still says them)."""

    workload: Workload | None
    traces: int
    batch_histogram: dict[int, int]
    plan: Plan | None
    plan_note: str
    trace_notes: tuple[TraceNote, ...] = ()
    #: Which input gave what to its plan (:func:`launchgap.planning.request.build_plan`'s notes, as ``launchgap plan``
    #: prints them); empty without a plan.
    inputs: tuple[str, ...] = ()

    @property
    def id(self) -> str:
        return self.workload.id if self.workload is not None else "unknown"

    def to_dict(self) -> dict:
        return {"workload": self.workload.to_dict() if self.workload is not None else None, "traces": self.traces,
                "batch_histogram": {str(k): v for k, v in self.batch_histogram.items()},
                "plan": self.plan.to_dict() if self.plan is not None else None, "plan_note": self.plan_note,
                "trace_notes": [n.to_dict() for n in self.trace_notes], "inputs": list(self.inputs)}


@dataclass(frozen=True)
class FleetReport:
    """The fleet diagnosis. ``to_dict`` gives the JSON contract (schema launchgap.fleet/1).

    ``plan`` is a :class:`launchgap.planning.planner.Plan` (``None`` with the reason in ``plan_note``
    when no plan could be made, e.g. no step with a known batch size).
    """

    traces: int
    failed: int
    steps: int
    modes: dict[str, int]
    verdicts: dict[str, int]
    distributions: dict[str, Distribution]
    gpu_idle_fraction: float
    idle_fraction_by_cause: dict[str, float]
    slowest: list[TraceRow]
    most_launch_bound: list[TraceRow]
    batch_histogram: dict[int, int]
    unknown_batch_steps: int
    plan: Plan | None
    plan_note: str
    rows: list[TraceRow]
    errors: list[TraceError]
    analysis_options: dict | None = None
    warnings: list[str] = field(default_factory=list)
    workloads: list[WorkloadPlan] = field(default_factory=list)
    #: steps per phase over the fleet (:data:`PHASE_KEYS`); traces per serving engine ("none": no engine)
    phases: dict[str, int] = field(default_factory=dict)
    engines: dict[str, int] = field(default_factory=dict)
    #: traces recorded by ``launchgap record`` (one batch size, the sweep's markers): costs only, never counted in
    #: ``batch_histogram`` or a plan's distribution (``launchgap plan``'s rule)
    benchmark_traces: int = 0
    #: which input gave what to ``plan`` (its workload's :attr:`WorkloadPlan.inputs`); empty without a plan
    plan_inputs: tuple[str, ...] = ()

    def to_dict(self) -> dict:
        return {
            "schema": SCHEMA, "traces": self.traces, "failed": self.failed, "steps": self.steps,
            "modes": dict(self.modes), "verdicts": dict(self.verdicts),
            "distributions": {k: asdict(v) for k, v in self.distributions.items()},
            "gpu_idle_fraction": self.gpu_idle_fraction, "idle_fraction_by_cause": dict(self.idle_fraction_by_cause),
            "slowest": [asdict(r) for r in self.slowest],
            "most_launch_bound": [asdict(r) for r in self.most_launch_bound],
            "batch_histogram": {str(k): v for k, v in self.batch_histogram.items()},
            "unknown_batch_steps": self.unknown_batch_steps, "benchmark_traces": self.benchmark_traces,
            "plan": self.plan.to_dict() if self.plan is not None else None, "plan_note": self.plan_note,
            "plan_inputs": list(self.plan_inputs), "rows": [asdict(r) for r in self.rows],
            "errors": [asdict(e) for e in self.errors],
            "analysis_options": self.analysis_options, "warnings": list(self.warnings),
            "workloads": [w.to_dict() for w in self.workloads],
            "phases": dict(self.phases), "engines": dict(self.engines),
        }


def summary_steps(path: str, mode: str, summary: Mapping, bs: np.ndarray, dur_us: np.ndarray,
                  pred_us: np.ndarray, phase: Sequence[str | None], workload: Workload | None,
                  curves: dict | None = None, benchmark: bool = False, warnings: Sequence[str] = (),
                  notes: Sequence[str] = (), tokens: np.ndarray | None = None) -> TraceSteps:
    """The planning view (:class:`~launchgap.planning.inputs.TraceSteps`) of one trace's summary: the
    same columns :func:`launchgap.planning.request.trace_steps` takes from its report, so the fleet's
    plan follows ``launchgap plan``'s rules exactly (``benchmark``: a ``launchgap record`` sweep, costs only;
    ``warnings`` and ``notes``: what its analysis warned about and noted, which the plans carry; ``tokens``: each
    step's tokens, -1 where unknown, ``None`` for a summary written before they were recorded)."""
    return TraceSteps(name=path, mode=mode,
                      unprofiled_scale=TraceSteps.scale_of(float(summary["step_us_median"]),
                                                           float(summary["estimated_unprofiled_step_us_median"])),
                      batch_size=bs, dur_us=dur_us, predicted_graph_us=pred_us, phase=tuple(phase),
                      kernels_per_step=workload.kernels_per_step if workload is not None else 0.0,
                      graph_curve=curve_from_dict(curves)[0], eager=curve_from_dict(curves)[1], benchmark=benchmark,
                      capture_sizes=tuple(summary["capture_sizes"]) if summary.get("capture_sizes")
                      and summary.get("capture_sizes_source") != "inferred" else None,
                      capture_sizes_detail=f"{summary.get('capture_sizes_source')}: {summary.get('capture_sizes_detail')}"
                      if summary.get("capture_sizes") else None, warnings=tuple(warnings), notes=tuple(notes),
                      engine=summary.get("engine"), tokens=tokens)


def _r(x: float, nd: int = 4) -> float:
    return round(float(x), nd)


class FleetAccumulator:
    """Folds fleet summaries in one at a time; keeps a few numbers and per-step arrays per trace."""

    def __init__(self) -> None:
        self._rows: list[dict] = []
        self._costs: list[TraceSteps] = []
        self._workloads: dict[str, Workload | None] = {}  # by id, in order of first appearance
        self._errors: list[TraceError] = []
        self._hist: dict[int, int] = {}
        self._unknown_bs = 0
        self._benchmarks = 0
        self._win_us = 0.0
        self._busy_us = 0.0
        self._idle_by = {c: 0.0 for c in CAUSES}
        self.analysis_options: dict | None = None
        self.warnings: list[str] = []

    def __len__(self) -> int:
        return len(self._rows) + len(self._errors)

    def add(self, s: Mapping) -> None:
        """Fold in one summary from :func:`summarize_trace` (an errored one is listed as a failure)."""
        if s.get("error"):
            self._errors.append(TraceError(str(s.get("path")), str(s["error"]), str(s.get("error_kind") or "input")))
            return
        # Read everything first, then update: a damaged record raises before changing any state.
        st, sm = s["steps"], s["summary"]
        bs = np.array([-1 if b is None else b for b in st["batch_size"]], dtype=np.int64)
        # Results written before phases were recorded have none: every step of unknown phase.
        phase = list(st.get("phase") or [None] * bs.size)
        planned = np.array([p in _PLANNED_PHASES for p in phase], dtype=bool)
        dur = np.array(st["dur_us"], dtype=float)
        busy = np.array(st["gpu_busy_us"], dtype=float)
        pred = np.array(st["predicted_graph_us"], dtype=float)
        idle = {c: np.array(st["idle_us_by_cause"][c], dtype=float) for c in CAUSES}
        # summaries written before tokens were recorded have none: the plan then says nothing of prefill steps
        tokens = np.array([-1 if t is None else t for t in st["tokens"]], dtype=np.int64) if "tokens" in st else None
        if not all(a.shape == dur.shape for a in (bs, busy, pred, planned, *idle.values(),
                                                  *(() if tokens is None else (tokens,)))):
            raise ValueError("step columns differ in length")
        wl = Workload.from_dict(s["workload"]) if s.get("workload") else None
        win = float(dur.sum())
        host = float(sum(idle[c].sum() for c in HOST_CAUSES))
        known = bs[(bs >= 0) & planned]
        sizes, counts = np.unique(known, return_counts=True)
        row = {
            "path": str(s["path"]), "rank": s.get("rank"), "world_size": s.get("world_size"), "mode": str(s["mode"]),
            "steps": int(dur.size), "batch_sizes": sizes.tolist(),
            "main_batch_size": int(sizes[np.argmax(counts)]) if sizes.size else None,
            "step_us_median": float(sm["step_us_median"]),
            "estimated_unprofiled_step_us_median": float(sm["estimated_unprofiled_step_us_median"]),
            "gpu_idle_fraction": float(sm["gpu_idle_fraction"]),
            "host_idle_fraction": _r(host / win) if win > 0 else 0.0,
            "predicted_speedup": float(sm["predicted_speedup"]), "verdict": str(sm["verdict"]),
            "workload_id": wl.id if wl is not None else None,
            "steps_by_phase": steps_by_phase(phase), "engine": sm.get("engine"),
        }
        bench = bool(s.get("benchmark"))
        # results written before notes were recorded have none (their warnings were always recorded)
        cost = summary_steps(row["path"], row["mode"], sm, bs, dur, pred, phase, wl, s.get("cost_curve"), bench,
                             [str(w) for w in s.get("warnings") or ()], [str(n) for n in s.get("notes") or ()], tokens)
        self._rows.append(row)
        self._costs.append(cost)
        self._workloads.setdefault(row["workload_id"] or "unknown", wl)
        self._win_us += win
        self._busy_us += float(busy.sum())
        for c in CAUSES:
            self._idle_by[c] += float(idle[c].sum())
        if bench:  # a sweep's steps are not the fleet's traffic (distribution_from_steps skips them too)
            self._benchmarks += 1
            return
        self._unknown_bs += int(planned.sum() - known.size)
        for b, n in zip(sizes.tolist(), counts.tolist()):  # one per batch size
            self._hist[b] = self._hist.get(b, 0) + n

    def finish(self, plan: PlanRequest | None = None, top: int = DEFAULT_TOP, workload: str | None = None,
               ) -> FleetReport:
        """The fleet report.

        ``plan`` is the capture plan's request (inputs besides the traces, budgets, policy: the
        same :class:`~launchgap.planning.request.PlanRequest` as ``launchgap plan`` builds from the
        same flags; default budgets if None); each workload's traces are added to it.
        ``workload`` (an id) picks the workload whose plan is ``plan`` when there are several.
        """
        rows = _with_peer_ratio(self._rows)
        with_steps = [r for r in rows if r.steps > 0]
        dists = {
            "step_us": Distribution.of(np.array([r.step_us_median for r in with_steps])),
            "estimated_unprofiled_step_us": Distribution.of(
                np.array([r.estimated_unprofiled_step_us_median for r in with_steps])),
            "gpu_idle_fraction": Distribution.of(np.array([r.gpu_idle_fraction for r in with_steps])),
            "host_idle_fraction": Distribution.of(np.array([r.host_idle_fraction for r in with_steps])),
            "predicted_speedup": Distribution.of(np.array([r.predicted_speedup for r in with_steps])),
        }
        slowest = sorted(with_steps, key=lambda r: (-r.step_vs_peers, -r.step_us_median, r.path))[:top]
        launch_bound = sorted(with_steps, key=lambda r: (-r.host_idle_fraction, r.path))[:top]
        # Most traces first, then by id: the order does not depend on which trace finished first.
        names = display_names(self._workloads.values())
        plans = sorted((self._workload_plan(wid, names[wid], plan) for wid in self._workloads),
                       key=lambda p: (-p.traces, p.id))
        chosen, note, inputs = self._pick_plan(plans, workload, plan)
        modes: dict[str, int] = {}
        verdicts: dict[str, int] = {}
        phases = dict.fromkeys(PHASE_KEYS, 0)
        engines: dict[str, int] = {}
        for r in rows:  # one per trace
            modes[r.mode] = modes.get(r.mode, 0) + 1
            verdicts[r.verdict] = verdicts.get(r.verdict, 0) + 1
            for k, n in r.steps_by_phase.items():
                phases[k] = phases.get(k, 0) + n
            engines[r.engine or "none"] = engines.get(r.engine or "none", 0) + 1
        w = self._win_us
        return FleetReport(
            traces=len(rows), failed=len(self._errors), steps=sum(r.steps for r in rows), modes=modes,
            verdicts=verdicts, distributions=dists,
            gpu_idle_fraction=_r((w - self._busy_us) / w) if w > 0 else 0.0,
            idle_fraction_by_cause={c: _r(v / w) if w > 0 else 0.0 for c, v in self._idle_by.items()},
            slowest=slowest, most_launch_bound=launch_bound, batch_histogram=dict(sorted(self._hist.items())),
            unknown_batch_steps=self._unknown_bs, plan=chosen, plan_note=note, plan_inputs=inputs, rows=rows,
            errors=list(self._errors),
            analysis_options=self.analysis_options, warnings=list(self.warnings), workloads=plans,
            phases=phases, engines=engines, benchmark_traces=self._benchmarks,
        )

    def _pick_plan(self, plans: list[WorkloadPlan], workload: str | None,
                   request: PlanRequest | None) -> tuple[Plan | None, str, tuple[str, ...]]:
        """The plan to show as the fleet's: the only workload's, or the chosen one's, with which input gave what;
        else None and why."""
        if not plans:
            return _plan({}, [], "", request)
        if workload:
            from .workload import WorkloadGroup

            groups = [WorkloadGroup(p.workload, [p]) for p in plans]
            chosen = pick_workload(groups, workload).items[0]
            return chosen.plan, chosen.plan_note, chosen.inputs
        if len(plans) == 1:
            return plans[0].plan, plans[0].plan_note, plans[0].inputs
        return None, (f"the fleet runs {len(plans)} workloads (models, devices or ranks); their costs and batch "
                      f"sizes are not pooled: one plan per workload below, or --workload ID for one"), ()

    def _workload_plan(self, wid: str, name: str, request: PlanRequest | None) -> WorkloadPlan:
        mine = [self._costs[i] for i, r in enumerate(self._rows) if (r["workload_id"] or "unknown") == wid]
        hist = {b: int(n) for b, n in distribution_from_steps(mine).items()}
        plan, note, inputs = _plan(hist, mine, name, request)
        return WorkloadPlan(self._workloads[wid], len(mine), hist, plan, note, trace_notes(mine), inputs)


def _plan(hist: dict[int, int], steps: list[TraceSteps], workload: str,
          request: PlanRequest | None) -> tuple[Plan | None, str, tuple[str, ...]]:
    """A workload's capture plan by :func:`launchgap.planning.request.build_plan` with its notes on which input gave
    what, or ``None`` and why not (a fleet report never fails for want of a plan)."""
    if not hist and not any((t.batch_size >= 0).any() for t in steps):  # sweeps' sizes give costs: build_plan says
        return None, "no step with a known batch size: nothing to plan (annotate steps with bs=N or use " \
                     "--batch-regex/--batch-op)", ()
    from .planning.request import PlanRequest, build_plan

    try:
        req = (request or PlanRequest()).with_traces(steps, workload)
        plan, notes = build_plan(req)
        return plan, "", tuple(notes)
    except InputError as exc:
        return None, exc.message, ()


def _with_peer_ratio(rows: list[dict]) -> list[TraceRow]:
    """TraceRows with ``step_vs_peers``: median step over the median of its (workload, mode, main batch size) group."""
    groups: dict[tuple, list[float]] = {}
    for r in rows:  # one per trace
        if r["steps"]:
            groups.setdefault((r["workload_id"], r["mode"], r["main_batch_size"]), []).append(r["step_us_median"])
    med = {k: float(np.median(v)) for k, v in groups.items()}
    out = []
    for r in rows:
        m = med.get((r["workload_id"], r["mode"], r["main_batch_size"]), 0.0)
        out.append(TraceRow(**r, step_vs_peers=_r(r["step_us_median"] / m) if m > 0 else 0.0))
    return out


# --- results files (JSON lines) ------------------------------------------------------------------

def results_header(options: AnalysisOptions, max_bytes: int) -> dict:
    """The first line of a results file: what the summaries below it were computed with."""
    return {"schema": RUN_SCHEMA, "launchgap": __version__, "analysis_options": asdict(options),
            "max_trace_bytes": int(max_bytes)}


def _decode(line: bytes) -> dict | None:
    try:
        obj = json.loads(line)
    except (ValueError, UnicodeDecodeError):
        return None
    return obj if isinstance(obj, dict) else None


def iter_results(path: str | Path) -> Iterator[tuple[int, dict | None]]:
    """``(line number, record)`` for every line after the header; ``None`` for a line that does not parse
    (an interrupted write leaves its last line cut short)."""
    with open(path, "rb") as fh:
        fh.readline()
        for n, line in enumerate(fh, 2):
            if line.strip():
                yield n, _decode(line)


def read_header(path: str | Path) -> dict:
    """The header of a results file; :class:`InputError` when the file is not one."""
    p = Path(path)
    if not p.is_file():
        raise InputError("no such results file", str(p))
    with open(p, "rb") as fh:
        first = fh.readline()
    head = _decode(first) if first.strip() else None
    if head is None or head.get("schema") != RUN_SCHEMA:
        raise InputError(f"not a launchgap fleet results file (the first line is not a {RUN_SCHEMA} header)", str(p))
    return head


def latest_records(path: str | Path) -> tuple[dict[str, dict], list[str]]:
    """Per trace path, the identity, error kind and line number of its last record; and warnings.

    A trace analysed again (its file changed, or a retried failure) has several records; the
    last one counts. Lines that do not parse are skipped with a warning.
    """
    latest: dict[str, dict] = {}
    bad: list[int] = []
    for n, rec in iter_results(path):
        if rec is None or rec.get("schema") != TRACE_SCHEMA or "path" not in rec:
            bad.append(n)
            continue
        latest[rec["path"]] = {"size_bytes": rec.get("size_bytes"), "mtime_ns": rec.get("mtime_ns"),
                               "error_kind": rec.get("error_kind") if rec.get("error") else None, "line": n}
    warnings = []
    if bad:
        shown = ", ".join(str(n) for n in bad[:5]) + (" ..." if len(bad) > 5 else "")
        warnings.append(f"{path}: skipped {len(bad)} unreadable line(s) ({shown}), e.g. cut short by an "
                        f"interrupted run; their traces are analysed again")
    return latest, warnings


def is_done(entry: Mapping | None, identity: Mapping) -> bool:
    """Whether a results-file entry covers this file as it is now (same size and mtime, not a retryable failure)."""
    return (entry is not None and entry["size_bytes"] == identity["size_bytes"]
            and entry["mtime_ns"] == identity["mtime_ns"]
            and (entry["error_kind"] is None or entry["error_kind"] in FINAL_ERROR_KINDS))


def add_records(acc: FleetAccumulator, path: str | Path, lines: Iterable[int]) -> None:
    """Fold the records on the given line numbers of a results file into ``acc``."""
    want = set(lines)
    if not want:
        return
    for n, rec in iter_results(path):
        if n in want and rec is not None:
            try:
                acc.add(rec)
            except (KeyError, TypeError, ValueError, AttributeError) as exc:
                # A results file is input like a trace: a damaged record is skipped and named.
                acc.warnings.append(f"{path}: line {n} is not a valid {TRACE_SCHEMA} record "
                                    f"({type(exc).__name__}: {exc}); skipped")


def load_fleet_results(path: str | Path, plan: PlanRequest | None = None, top: int = DEFAULT_TOP,
                       workload: str | None = None) -> FleetReport:
    """The fleet report of a results file written by ``launchgap fleet --out FILE.jsonl``.

    Every trace's last record counts. ``plan`` (a :class:`~launchgap.planning.request.PlanRequest`)
    sets the plan's inputs and budgets (see :meth:`FleetAccumulator.finish`): the report can be
    re-planned from the same file at no analysis cost.
    """
    head = read_header(path)
    latest, warnings = latest_records(path)
    acc = FleetAccumulator()
    acc.analysis_options = head.get("analysis_options")
    acc.warnings.extend(warnings)
    add_records(acc, path, (e["line"] for e in latest.values()))
    return acc.finish(plan, top, workload)
