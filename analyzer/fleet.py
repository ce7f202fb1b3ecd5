"""Fleet scale: a pure per-trace summary, mapped over many files, reduced into one fleet report.

Map: :func:`summarize_trace` loads and analyses one trace (exactly as ``launchgap analyze``
does: :func:`analyzer.loaders.load_trace` + :func:`analyzer.ranks.analyze_with_collectives`) and returns
a small JSON-safe dict (schema ``launchgap.fleet-trace/1``), never the event table:

* identity: ``path``, ``size_bytes``, ``mtime_ns`` (what a rerun matches to skip done files);
* ``format``, ``mode``, ``rank``, ``world_size``, ``warnings``, ``elapsed_s`` (load + analysis);
* ``summary``: the trace's :class:`~analyzer.report.Summary`, as ``analyze`` reports it;
* ``devices``: per-device totals (:class:`~analyzer.report.DeviceReport`);
* ``steps``: per-step columns, one list entry per step, same values as ``analyze``'s steps:
  ``batch_size`` (``null`` when unknown), ``dur_us``, ``gpu_busy_us``, ``gpu_idle_us``,
  ``idle_us_by_cause`` (one column per cause), ``predicted_graph_us``, ``kernels``,
  ``kernel_launches``, ``graph_launches``, ``host_events``, ``launch_api_us``;
* ``batch_histogram``: steps per batch size (keys are decimal strings, JSON objects need them);
* ``per_batch``: per batch size, the median profiled step ``step_us_median``, the median step
  cost ``cost_us_median`` (profiled step scaled to an unprofiled one, the rule of
  :func:`analyzer.planning.inputs.costs_from_reports`), ``predicted_graph_us_median`` and
  ``gpu_busy_us_median``;
* ``workload``: the trace's :class:`~analyzer.workload.Workload` (model signature, device,
  rank) as a dict;
* ``error`` (``null`` when fine) and ``error_kind``: ``"input"`` for an
  :class:`~analyzer.errors.AnalyzerError` (the file is bad: a rerun skips it while the file is
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
* the batch-size histogram (steps per size over the fleet) and a capture plan per workload
  (:mod:`analyzer.workload`: traces of different models, devices or ranks are never pooled):
  :func:`analyzer.planning.planner.plan_capture` fed with costs built by
  :func:`analyzer.planning.inputs.costs_from_reports` from that workload's steps (the same rules as
  ``launchgap plan``) and its histogram. With one workload ``plan`` is its plan; with several
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
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from . import __version__
from .errors import AnalyzerError, InputError
from .gaps import CAUSES
from .loaders import DEFAULT_MAX_TRACE_BYTES, load_trace
from .report import AnalysisOptions, TraceReport
from .workload import Workload, pick_workload

if TYPE_CHECKING:
    from .planning.costs import CostTable
    from .planning.planner import Plan, PlanOptions

SCHEMA = "launchgap.fleet/1"
TRACE_SCHEMA = "launchgap.fleet-trace/1"
RUN_SCHEMA = "launchgap.fleet-run/1"
#: Idle causes that mean "the GPU waited for the CPU" (see :mod:`analyzer.gaps`).
HOST_CAUSES = ("host", "launch", "sync")
#: Error kinds a rerun does not retry while the file is unchanged (the input itself is bad).
FINAL_ERROR_KINDS = ("input",)
#: Per-step columns of a summary (besides ``idle_us_by_cause``), all copied from StepReport.
STEP_COLUMNS = ("batch_size", "dur_us", "gpu_busy_us", "gpu_idle_us", "predicted_graph_us", "kernels",
                "kernel_launches", "graph_launches", "host_events", "launch_api_us")
#: Outlier lists keep this many traces by default.
DEFAULT_TOP = 5


# --- map: one trace -> one small summary ---------------------------------------------------------

def file_identity(path: str | Path) -> dict:
    """``path`` (as given), ``size_bytes`` and ``mtime_ns`` of a file: what a rerun matches on."""
    st = os.stat(path)
    return {"path": str(path), "size_bytes": int(st.st_size), "mtime_ns": int(st.st_mtime_ns)}


def _cost_scale(summary: Mapping) -> float:
    """Profiled -> unprofiled factor of a trace, as :func:`analyzer.planning.inputs.costs_from_reports` applies it."""
    step, unprof = summary["step_us_median"], summary["estimated_unprofiled_step_us_median"]
    return unprof / step if step > 0 and unprof > 0 else 1.0


def summary_from_report(report: TraceReport) -> dict:
    """The fleet summary fields of one analysed trace (everything but identity, timing and error)."""
    d = report.to_dict()
    steps = d["steps"]
    cols: dict = {c: [s[c] for s in steps] for c in STEP_COLUMNS}
    cols["idle_us_by_cause"] = {c: [s["idle_us_by_cause"][c] for s in steps] for c in CAUSES}
    bs = np.array([-1 if b is None else b for b in cols["batch_size"]], dtype=np.int64)
    dur = np.array(cols["dur_us"], dtype=float)
    pred = np.array(cols["predicted_graph_us"], dtype=float)
    busy = np.array(cols["gpu_busy_us"], dtype=float)
    scale = _cost_scale(d["summary"])
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
            "batch_histogram": hist, "per_batch": per_batch, "workload": d.get("workload")}


def analyze_file(path: str | Path, options: AnalysisOptions, max_bytes: int) -> TraceReport:
    """One trace analysed exactly as ``launchgap analyze`` analyses a lone trace: the two must stay
    in step (the fleet's acceptance is the same numbers as ``analyze``, trace by trace).

    Collectives' waits for peers are estimated from the trace alone (each rank is one task here),
    so a tensor-parallel rank that spins in NCCL does not look GPU-bound.
    """
    from .ranks import analyze_with_collectives

    return analyze_with_collectives(load_trace(path, max_bytes), options)


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


@dataclass(frozen=True)
class TraceError:
    path: str
    error: str
    kind: str


@dataclass(frozen=True)
class WorkloadPlan:
    """One workload of the fleet: its traces' count, batch sizes and capture plan (None with the reason)."""

    workload: Workload | None
    traces: int
    batch_histogram: dict[int, int]
    plan: Plan | None
    plan_note: str

    @property
    def id(self) -> str:
        return self.workload.id if self.workload is not None else "unknown"

    def to_dict(self) -> dict:
        return {"workload": self.workload.to_dict() if self.workload is not None else None, "traces": self.traces,
                "batch_histogram": {str(k): v for k, v in self.batch_histogram.items()},
                "plan": self.plan.to_dict() if self.plan is not None else None, "plan_note": self.plan_note}


@dataclass(frozen=True)
class FleetReport:
    """The fleet diagnosis. ``to_dict`` gives the JSON contract (schema launchgap.fleet/1).

    ``plan`` is a :class:`analyzer.planning.planner.Plan` (``None`` with the reason in ``plan_note``
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

    def to_dict(self) -> dict:
        return {
            "schema": SCHEMA, "traces": self.traces, "failed": self.failed, "steps": self.steps,
            "modes": dict(self.modes), "verdicts": dict(self.verdicts),
            "distributions": {k: asdict(v) for k, v in self.distributions.items()},
            "gpu_idle_fraction": self.gpu_idle_fraction, "idle_fraction_by_cause": dict(self.idle_fraction_by_cause),
            "slowest": [asdict(r) for r in self.slowest],
            "most_launch_bound": [asdict(r) for r in self.most_launch_bound],
            "batch_histogram": {str(k): v for k, v in self.batch_histogram.items()},
            "unknown_batch_steps": self.unknown_batch_steps,
            "plan": self.plan.to_dict() if self.plan is not None else None, "plan_note": self.plan_note,
            "rows": [asdict(r) for r in self.rows], "errors": [asdict(e) for e in self.errors],
            "analysis_options": self.analysis_options, "warnings": list(self.warnings),
            "workloads": [w.to_dict() for w in self.workloads],
        }


@dataclass(frozen=True)
class _CostStep:
    batch_size: int | None
    dur_us: float
    predicted_graph_us: float


@dataclass(frozen=True)
class _CostSummary:
    step_us_median: float
    estimated_unprofiled_step_us_median: float


@dataclass(frozen=True)
class _CostView:
    """The part of a :class:`~analyzer.report.TraceReport` that :func:`analyzer.planning.inputs.costs_from_reports`
    reads, rebuilt from a summary dict, so the fleet plan follows ``launchgap plan``'s cost rules exactly."""

    path: str
    mode: str
    summary: _CostSummary
    bs: np.ndarray
    dur_us: np.ndarray
    pred_us: np.ndarray

    @property
    def steps(self) -> Iterator[_CostStep]:
        for b, d, p in zip(self.bs.tolist(), self.dur_us.tolist(), self.pred_us.tolist()):  # report rows
            yield _CostStep(b if b >= 0 else None, d, p)


def _r(x: float, nd: int = 4) -> float:
    return round(float(x), nd)


class FleetAccumulator:
    """Folds fleet summaries in one at a time; keeps a few numbers and per-step arrays per trace."""

    def __init__(self) -> None:
        self._rows: list[dict] = []
        self._costs: list[_CostView] = []
        self._workloads: dict[str, Workload | None] = {}  # by id, in order of first appearance
        self._errors: list[TraceError] = []
        self._hist: dict[int, int] = {}
        self._unknown_bs = 0
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
        dur = np.array(st["dur_us"], dtype=float)
        busy = np.array(st["gpu_busy_us"], dtype=float)
        pred = np.array(st["predicted_graph_us"], dtype=float)
        idle = {c: np.array(st["idle_us_by_cause"][c], dtype=float) for c in CAUSES}
        if not all(a.shape == dur.shape for a in (bs, busy, pred, *idle.values())):
            raise ValueError("step columns differ in length")
        wl = Workload.from_dict(s["workload"]) if s.get("workload") else None
        win = float(dur.sum())
        host = float(sum(idle[c].sum() for c in HOST_CAUSES))
        known = bs[bs >= 0]
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
        }
        cost = _CostView(row["path"], row["mode"],
                         _CostSummary(row["step_us_median"], row["estimated_unprofiled_step_us_median"]),
                         bs, dur, pred)
        self._rows.append(row)
        self._costs.append(cost)
        self._workloads.setdefault(row["workload_id"] or "unknown", wl)
        self._win_us += win
        self._busy_us += float(busy.sum())
        for c in CAUSES:
            self._idle_by[c] += float(idle[c].sum())
        self._unknown_bs += int(bs.size - known.size)
        for b, n in zip(sizes.tolist(), counts.tolist()):  # one per batch size
            self._hist[b] = self._hist.get(b, 0) + n

    def finish(self, plan_options: PlanOptions | None = None, top: int = DEFAULT_TOP,
               costs: CostTable | None = None, workload: str | None = None) -> FleetReport:
        """The fleet report.

        ``plan_options`` sets the plan's budgets (default budgets if None); ``costs`` (e.g. from
        :func:`analyzer.planning.inputs.costs_from_timings`) replaces the costs taken from the traces;
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
        plans = sorted((self._workload_plan(wid, plan_options, costs) for wid in self._workloads),
                       key=lambda p: (-p.traces, p.id))
        plan, note = self._pick_plan(plans, workload)
        modes: dict[str, int] = {}
        verdicts: dict[str, int] = {}
        for r in rows:  # one per trace
            modes[r.mode] = modes.get(r.mode, 0) + 1
            verdicts[r.verdict] = verdicts.get(r.verdict, 0) + 1
        w = self._win_us
        return FleetReport(
            traces=len(rows), failed=len(self._errors), steps=sum(r.steps for r in rows), modes=modes,
            verdicts=verdicts, distributions=dists,
            gpu_idle_fraction=_r((w - self._busy_us) / w) if w > 0 else 0.0,
            idle_fraction_by_cause={c: _r(v / w) if w > 0 else 0.0 for c, v in self._idle_by.items()},
            slowest=slowest, most_launch_bound=launch_bound, batch_histogram=dict(sorted(self._hist.items())),
            unknown_batch_steps=self._unknown_bs, plan=plan, plan_note=note, rows=rows, errors=list(self._errors),
            analysis_options=self.analysis_options, warnings=list(self.warnings), workloads=plans,
        )

    def _pick_plan(self, plans: list[WorkloadPlan], workload: str | None) -> tuple[Plan | None, str]:
        """The plan to show as the fleet's: the only workload's, or the chosen one's; else None and why."""
        if not plans:
            return self._plan({}, [], None, None)
        if workload:
            from .workload import WorkloadGroup

            groups = [WorkloadGroup(p.workload, [p]) for p in plans]
            chosen = pick_workload(groups, workload).items[0]
            return chosen.plan, chosen.plan_note
        if len(plans) == 1:
            return plans[0].plan, plans[0].plan_note
        return None, (f"the fleet runs {len(plans)} workloads (models, devices or ranks); their costs and batch "
                      f"sizes are not pooled: one plan per workload below, or --workload ID for one")

    def _workload_plan(self, wid: str, plan_options: PlanOptions | None, costs: CostTable | None) -> WorkloadPlan:
        mine = [i for i, r in enumerate(self._rows) if (r["workload_id"] or "unknown") == wid]
        hist: dict[int, int] = {}
        for i in mine:  # one per trace of this workload
            bs = self._costs[i].bs
            for b, n in zip(*np.unique(bs[bs >= 0], return_counts=True)):
                hist[int(b)] = hist.get(int(b), 0) + int(n)
        hist = dict(sorted(hist.items()))
        plan, note = self._plan(hist, [self._costs[i] for i in mine], plan_options, costs)
        return WorkloadPlan(self._workloads[wid], len(mine), hist, plan, note)

    @staticmethod
    def _plan(hist: dict[int, int], views: list[_CostView], plan_options: PlanOptions | None,
              costs: CostTable | None) -> tuple[Plan | None, str]:
        """A capture plan, or ``None`` and why not (a fleet report never fails for want of a plan)."""
        if not hist:
            return None, "no step with a known batch size: nothing to plan (annotate steps with bs=N or use " \
                         "--batch-regex/--batch-op)"
        from .planning.inputs import costs_from_reports
        from .planning.planner import plan_capture

        try:
            costs = costs if costs is not None else costs_from_reports(views)
            return plan_capture(costs, {b: float(n) for b, n in hist.items()}, plan_options), ""
        except InputError as exc:
            return None, exc.message


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


def load_fleet_results(path: str | Path, plan_options: PlanOptions | None = None, top: int = DEFAULT_TOP,
                       costs: CostTable | None = None, workload: str | None = None) -> FleetReport:
    """The fleet report of a results file written by ``launchgap fleet --out FILE.jsonl``.

    Every trace's last record counts. ``plan_options`` (an :class:`analyzer.planning.planner.PlanOptions`)
    sets the plan's budgets and ``costs`` replaces the traces' costs (see :meth:`FleetAccumulator.finish`):
    the report can be re-planned from the same file at no analysis cost.
    """
    head = read_header(path)
    latest, warnings = latest_records(path)
    acc = FleetAccumulator()
    acc.analysis_options = head.get("analysis_options")
    acc.warnings.extend(warnings)
    add_records(acc, path, (e["line"] for e in latest.values()))
    return acc.finish(plan_options, top, costs, workload)
