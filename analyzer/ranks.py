"""Tensor-parallel jobs: the traces of one job's ranks, analysed together.

A job is the set of per-rank traces one launch (``torchrun``, a serving engine) wrote. Files
are grouped by name (:func:`group_by_job`: the same name up to a rank token such as
``_rank0``, ``rank-1``, ``rank1.``, in one folder) or, once loaded, also by Kineto's
``distributedInfo`` (:func:`group_traces`). :func:`analyze_job` then gives a
:class:`JobReport`:

* per rank, the usual :class:`~launchgap.report.TraceReport` with each collective's wait for
  peers counted as idle with cause ``peer`` (:mod:`launchgap.collectives`), split with the
  peers' start times when the ranks could be matched (``aligned``), else from that rank
  alone; and the rank's predicted CUDA-graph step both ways;
* per matched step: **rank skew**, at each collective, ``start_skew_us`` (latest minus
  earliest GPU start of the instance: what the earliest rank waits) and ``launch_lag_us``
  (latest minus earliest host launch-call start), median and max over the step's collectives;
* the **slowest rank**, the one whose instance starts last most often, and why: the share of
  its GPU window it idles waiting for its own host, and its host's time per step;
* the **group's predicted graph step**: a step of the group is done when its slowest rank is,
  so per matched step the maximum over ranks of their predicted graph steps; the median of that.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path

import numpy as np

from .collectives import (
    DEFAULT_COLLECTIVE_MODEL,
    CollectiveModel,
    CollectiveWait,
    RankAlignment,
    align_ranks,
    align_steps,
    align_waits,
    estimate_wait_single,
)
from .errors import InputError
from .loaders import DEFAULT_MAX_TRACE_BYTES, load_trace
from .rank_split import plan_rank, split_ranks
from .report import AnalysisOptions, TraceReport, analyze_trace
from .verdict import LAUNCH_BOUND_IDLE_FRACTION
from .steps import Steps, assign_rows_to_steps, find_steps
from .trace import Trace
from .workload import _RANK_RE, RANK_NAME_REGEX, rank_from_name, trace_rank  # noqa: F401 (re-exported)

SCHEMA = "launchgap.job/1"
_HOST_CAUSES = ("host", "launch", "sync")
#: Below this share of their step spent waiting for peers, the other ranks are not held back.
BALANCED_PEER_FRACTION = 0.05


def job_key(path: str | Path) -> str | None:
    """The file's folder and name with its last rank token replaced by ``rank*``; None without one."""
    p = Path(path)
    matches = list(_RANK_RE.finditer(p.name))
    if not matches:
        return None
    m = matches[-1]
    return str(p.parent / (p.name[: m.start()] + "rank*" + p.name[m.end():]))


def group_by_job(paths: Sequence[str | Path]) -> list[list[Path]]:
    """Group trace files by job from their names; each group sorted by rank, in order of first appearance.

    Files without a rank token in the name are groups of their own (:func:`group_traces` can
    still join them by ``distributedInfo`` once loaded).
    """
    groups: dict[object, list[Path]] = {}
    for i, raw in enumerate(paths):  # loop over files
        p = Path(raw)
        key = job_key(p)
        groups.setdefault(key if key is not None else ("single", i), []).append(p)
    return [sorted(g, key=lambda q: (rank_from_name(q) or 0, str(q))) for g in groups.values()]


def group_traces(traces: Sequence[Trace]) -> list[list[Trace]]:
    """Group loaded traces by job: by name (see :func:`group_by_job`), else, for traces whose
    names carry no rank, by folder and ``distributedInfo`` world size when their ranks differ.
    Each group is sorted by rank; groups keep the order of first appearance.
    """
    groups: dict[object, list[Trace]] = {}
    for i, tr in enumerate(traces):  # loop over traces
        key: object = job_key(tr.path)
        if key is None:
            ws = tr.world_size or 0
            key = ("dist", str(Path(tr.path).parent), ws) if tr.rank is not None and ws > 1 else ("single", i)
        groups.setdefault(key, []).append(tr)
    out: list[list[Trace]] = []
    for key, g in groups.items():
        ranks = [trace_rank(t) for t in g]
        if isinstance(key, tuple) and key[0] == "dist" and len(set(ranks)) != len(ranks):
            out.extend([t] for t in g)  # several jobs in one folder: cannot tell which ranks belong together
            continue
        out.append(sorted(g, key=lambda t: (trace_rank(t) or 0, t.path)))
    return out


@dataclass(frozen=True)
class RankSummary:
    """One rank of the job (times in us; medians over the rank's steps)."""

    rank: int
    path: str
    wait_estimate: str  # the split used in this rank's report: "aligned", "fastest-instances", "cost-model", ...
    collectives: int  # collective kernels in the trace
    collective_wait_us_per_step_median: float  # the peer cause of the step
    predicted_graph_step_us_alone: float  # from this trace alone
    predicted_graph_step_us: float  # with the split in wait_estimate
    step_us_median: float
    cpu_step_us_median: float
    gpu_busy_us_median: float
    host_idle_fraction: float  # GPU idle waiting for this rank's own host (host + launch + sync causes)
    peer_idle_fraction: float
    launch_api_us_per_step_median: float
    kernel_launches_per_step_median: float
    last_at_collectives: int  # matched collectives at which this rank started last
    clock_offset_us: float  # removed from this rank's times to compare them with the first rank's

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class GroupStep:
    """One step matched across ranks (times in us)."""

    index: int  # position among matched steps
    name: str  # the first rank's step name
    batch_size: int | None
    predicted_graph_us_by_rank: list[float]  # in JobSummary.ranks order
    predicted_graph_us: float  # the slowest rank's: the group's step
    collectives: int  # matched collective instances in the step
    start_skew_us_median: float
    start_skew_us_max: float
    launch_lag_us_median: float
    launch_lag_us_max: float
    last_rank: int | None  # the rank that started last at most of the step's collectives

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class JobSummary:
    ranks: list[int]
    world_size: int | None
    wait_estimate: str  # "aligned" (peers' start times) | "single-rank" (each rank alone) | "none"
    step_match: str  # how steps were matched across ranks: "name" | "position" | "none"
    steps: int  # matched steps with a prediction on every rank
    aligned_collectives: int
    predicted_graph_step_us_median: float  # the group's
    predicted_graph_step_us_alone_by_rank: list[float]
    predicted_graph_step_us_by_rank: list[float]
    slowest_rank: int | None
    slowest_rank_reason: str
    start_skew_us_median: float
    launch_lag_us_median: float
    clock_offset_us_by_rank: list[float]
    end_residual_us_median: float

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class JobReport:
    """The diagnosis of one job. ``to_dict`` gives the JSON section (schema launchgap.job/1);
    the per-rank :class:`TraceReport` objects are in ``reports`` (rank order), for the caller
    to list with the other traces (``to_dict(include_traces=True)`` embeds them)."""

    key: str
    paths: list[str]
    summary: JobSummary
    ranks: list[RankSummary]
    steps: list[GroupStep]
    warnings: list[str]
    reports: tuple[TraceReport, ...]
    #: One line when the ranks came from one file split per rank (:mod:`launchgap.rank_split`), else ``None``.
    split: str | None = None

    def to_dict(self, include_traces: bool = False) -> dict:
        d = {"schema": SCHEMA, "key": self.key, "paths": list(self.paths), "summary": self.summary.to_dict(),
             "ranks": [r.to_dict() for r in self.ranks], "steps": [s.to_dict() for s in self.steps],
             "warnings": list(self.warnings), "split": self.split}
        if include_traces:
            d["traces"] = [r.to_dict() for r in self.reports]
        return d


def _r(x: float) -> float:
    return round(float(x), 3) if np.isfinite(x) else 0.0


def _with_wait(trace: Trace, opts: AnalysisOptions, cw: CollectiveWait) -> TraceReport:
    rep = analyze_trace(trace, opts, wait_ns=cw.wait_per_row() if len(cw) else None, collective=cw.rows)
    note = cw.warning()
    return replace(rep, warnings=[*rep.warnings, note]) if note else rep


def analyze_with_collectives(trace: Trace, options: AnalysisOptions | None = None,
                             model: CollectiveModel = DEFAULT_COLLECTIVE_MODEL) -> TraceReport:
    """Analyse one trace alone with its collectives' waits split out (single-rank estimate).

    For any trace not analysed with its peers; a trace without collectives gets the plain report.
    """
    return _with_wait(trace, options or AnalysisOptions(), estimate_wait_single(trace, model))


def analyze_for_plan(trace: Trace, options: AnalysisOptions | None = None,
                     model: CollectiveModel = DEFAULT_COLLECTIVE_MODEL) -> tuple[TraceReport, str | None]:
    """A lone trace as a capture plan reads it (``launchgap plan``, the dashboard): :func:`analyze_with_collectives`,
    except that of a file holding several ranks (:func:`launchgap.rank_split.split_ranks`) only the rank a plan
    reads is analysed (:func:`launchgap.rank_split.plan_rank`), the line saying which and why first among its
    report's warnings (which the plan's notes repeat) and returned beside it (``None`` for a trace of one rank)."""
    opts = options or AnalysisOptions()
    split = split_ranks(trace)
    if split is None:
        return analyze_with_collectives(trace, opts, model), None
    rank_trace, note = plan_rank(split, opts.steps)
    rep = analyze_with_collectives(rank_trace, opts, model)
    return replace(rep, warnings=[note, *rep.warnings]), note


def _load(items: Sequence[str | Path | Trace], max_bytes: int) -> list[Trace]:
    return [it if isinstance(it, Trace) else load_trace(it, max_bytes) for it in items]


def _ranks_of(traces: list[Trace], warnings: list[str]) -> list[int]:
    ranks: list[int] = []
    for tr in traces:  # loop over ranks
        named = rank_from_name(tr.path)
        r = trace_rank(tr)
        if r is None and len(traces) == 1:
            r = 0  # a job of one trace needs no rank to be told apart
        if r is None:
            raise InputError("cannot tell this trace's rank: no Kineto distributedInfo and no rank in the file "
                             "name (e.g. _rank0)", tr.path)
        if tr.rank is not None and named is not None and named != tr.rank:
            warnings.append(f"{tr.path}: distributedInfo says rank {tr.rank}, the file name rank {named}; "
                            f"using {tr.rank}")
        if r in ranks:
            raise InputError(f"rank {r} appears twice in one job (also {traces[ranks.index(r)].path})", tr.path)
        ranks.append(r)
    return ranks


def analyze_job(items: Sequence[str | Path | Trace], options: AnalysisOptions | None = None,
                model: CollectiveModel = DEFAULT_COLLECTIVE_MODEL,
                max_bytes: int = DEFAULT_MAX_TRACE_BYTES, split: str | None = None) -> JobReport:
    """Analyse the traces (files or loaded) of one job's ranks together (see the module docstring); ``split``:
    the line saying the ranks came from one file (:attr:`launchgap.rank_split.RankSplit.note`)."""
    if not items:
        raise InputError("analyze_job needs at least one trace")
    opts = options or AnalysisOptions()
    traces = _load(items, max_bytes)
    warnings: list[str] = []
    ranks = _ranks_of(traces, warnings)
    order = np.argsort(ranks, kind="stable")
    traces = [traces[i] for i in order]
    ranks = [ranks[i] for i in order]
    n_r = len(traces)
    worlds = {t.world_size for t in traces if t.world_size}
    world = max(worlds) if worlds else None
    if world and n_r < world:
        warnings.append(f"{n_r} of {world} ranks present; the group figures cover these ranks only")

    singles = [estimate_wait_single(t, model) for t in traces]
    alone = [_with_wait(t, opts, cw) for t, cw in zip(traces, singles)]
    steps = [find_steps(t, opts.steps) for t in traces]
    row_steps = [assign_rows_to_steps(t, s) for t, s in zip(traces, steps)]
    alignment: RankAlignment | None = None
    if n_r > 1 and any(len(cw) for cw in singles):
        alignment = align_ranks(traces, steps, row_steps)
        if alignment.step_match == "position" and len({len(s) for s in steps}) > 1:
            warnings.append("step names differ across ranks; steps matched by position over the first "
                            f"{alignment.step_table.shape[0]} of each rank")
        if len(alignment) == 0:
            warnings.append("no collective matched across ranks (different steps or kernel names); "
                            "each rank's waits are estimated from that rank alone")
        elif not alignment.trusted:
            warnings.append(f"matched collectives do not end together (median end mismatch "
                            f"{alignment.end_residual_ns_median / 1e3:,.1f} us after clock alignment), so they are "
                            f"not one collective; each rank's waits are estimated from that rank alone")
    aligned = alignment is not None and alignment.trusted and len(alignment) > 0
    together = align_waits(traces, alignment, singles) if aligned else singles
    reports = [_with_wait(t, opts, cw) for t, cw in zip(traces, together)] if aligned else alone

    group_steps = _group_steps(reports, steps, alignment if aligned else None, ranks)
    last_counts = np.zeros(n_r, dtype=np.int64)
    if aligned:
        last_counts = np.bincount(np.argmax(alignment.start_ns, axis=1), minlength=n_r)
    offsets = alignment.clock_offset_ns / 1e3 if aligned else np.zeros(n_r)
    rank_rows = [_rank_summary(rk, tr, cw, a, rep, int(last_counts[i]), float(offsets[i]))
                 for i, (rk, tr, cw, a, rep) in enumerate(zip(ranks, traces, together, alone, reports))]
    slowest, reason = _slowest(rank_rows, alignment if aligned else None, n_r)
    pred_alone = [r.predicted_graph_step_us_alone for r in rank_rows]
    pred_tog = [r.predicted_graph_step_us for r in rank_rows]
    if group_steps:
        group_pred = float(np.median([s.predicted_graph_us for s in group_steps]))
    else:
        group_pred = max(pred_tog) if pred_tog else 0.0
        if n_r > 1:
            warnings.append("no step matched on every rank; the group's step is the largest of the ranks' medians")
    if aligned:
        skew = alignment.start_ns.max(axis=1) - alignment.start_ns.min(axis=1)
        lag = _launch_lag(alignment)
        skew_med = float(np.median(skew)) / 1e3
        lag_med = float(np.median(lag[lag >= 0])) / 1e3 if (lag >= 0).any() else 0.0
    else:
        skew_med = lag_med = 0.0
    summary = JobSummary(
        ranks=ranks, world_size=world,
        wait_estimate="aligned" if aligned else ("single-rank" if any(len(cw) for cw in singles) else "none"),
        step_match=alignment.step_match if alignment is not None else "none", steps=len(group_steps),
        aligned_collectives=len(alignment) if aligned else 0, predicted_graph_step_us_median=_r(group_pred),
        predicted_graph_step_us_alone_by_rank=pred_alone, predicted_graph_step_us_by_rank=pred_tog,
        slowest_rank=slowest, slowest_rank_reason=reason, start_skew_us_median=_r(skew_med),
        launch_lag_us_median=_r(lag_med), clock_offset_us_by_rank=[_r(o) for o in offsets],
        end_residual_us_median=_r(alignment.end_residual_ns_median / 1e3) if alignment is not None else 0.0,
    )
    key = job_key(traces[0].path) or traces[0].path
    return JobReport(key=key, paths=[t.path for t in traces], summary=summary, ranks=rank_rows, steps=group_steps,
                     warnings=warnings, reports=tuple(reports), split=split)


def _launch_lag(al: RankAlignment) -> np.ndarray:
    """Latest minus earliest launch-call start per matched instance (ns); -1 where a launch is unknown."""
    known = (al.launch_ns >= 0).all(axis=1)
    return np.where(known, al.launch_ns.max(axis=1) - al.launch_ns.min(axis=1), -1)


def _group_steps(reports: list[TraceReport], steps: list[Steps], al: RankAlignment | None,
                 ranks: list[int]) -> list[GroupStep]:
    table = al.step_table if al is not None else align_steps(steps)[0]
    by_idx = [{s.index: s for s in rep.steps} for rep in reports]
    if al is not None:
        skew = al.start_ns.max(axis=1) - al.start_ns.min(axis=1)
        lag = _launch_lag(al)
        last = np.argmax(al.start_ns, axis=1)
    out: list[GroupStep] = []
    for i in range(table.shape[0]):  # loop over matched steps
        per = [by_idx[r].get(int(table[i, r])) for r in range(len(reports))]
        if any(p is None for p in per):
            continue
        preds = [p.predicted_graph_us for p in per]
        n_c, sk_med, sk_max, lg_med, lg_max, last_rank = 0, 0.0, 0.0, 0.0, 0.0, None
        if al is not None:
            sel = al.step == i
            n_c = int(sel.sum())
            if n_c:
                sk = skew[sel] / 1e3
                sk_med, sk_max = float(np.median(sk)), float(sk.max())
                lg = lag[sel]
                lg = lg[lg >= 0] / 1e3
                if lg.size:
                    lg_med, lg_max = float(np.median(lg)), float(lg.max())
                last_rank = ranks[int(np.argmax(np.bincount(last[sel], minlength=len(ranks))))]
        out.append(GroupStep(index=i, name=per[0].name, batch_size=per[0].batch_size, predicted_graph_us_by_rank=preds,
                             predicted_graph_us=_r(max(preds)), collectives=n_c, start_skew_us_median=_r(sk_med),
                             start_skew_us_max=_r(sk_max), launch_lag_us_median=_r(lg_med),
                             launch_lag_us_max=_r(lg_max), last_rank=last_rank))
    return out


def _rank_summary(rank: int, trace: Trace, cw: CollectiveWait, alone: TraceReport, rep: TraceReport,
                  last_count: int, offset_us: float) -> RankSummary:
    s = rep.summary
    peer = np.array([st.idle_us_by_cause["peer"] for st in rep.steps])
    host_frac = sum(s.idle_fraction_by_cause[c] for c in _HOST_CAUSES)
    return RankSummary(
        rank=rank, path=trace.path, wait_estimate=cw.estimate, collectives=len(cw),
        collective_wait_us_per_step_median=_r(np.median(peer)) if peer.size else 0.0,
        predicted_graph_step_us_alone=alone.summary.predicted_graph_step_us_median,
        predicted_graph_step_us=s.predicted_graph_step_us_median, step_us_median=s.step_us_median,
        cpu_step_us_median=s.cpu_step_us_median, gpu_busy_us_median=s.gpu_busy_us_median,
        host_idle_fraction=_r(host_frac), peer_idle_fraction=s.idle_fraction_by_cause["peer"],
        launch_api_us_per_step_median=s.launch_api_us_per_step_median,
        kernel_launches_per_step_median=s.kernel_launches_per_step_median,
        last_at_collectives=last_count, clock_offset_us=_r(offset_us),
    )


def _slowest(rows: list[RankSummary], al: RankAlignment | None, n_r: int) -> tuple[int | None, str]:
    """The rank that holds the group back, and why, in one sentence."""
    if n_r < 2:
        return None, "one rank only"
    if al is not None:
        counts = np.array([r.last_at_collectives for r in rows])
        i = int(np.argmax(counts))
        last = np.argmax(al.start_ns, axis=1) == i
        held = (al.start_ns.max(axis=1) - al.start_ns.min(axis=1))[last]
        lead = (f"rank {rows[i].rank} starts last at {int(counts[i])} of {len(al)} matched collectives "
                f"(the others wait {float(np.median(held)) / 1e3:,.1f} us median for it there)")
    else:
        # Alone, the rank that waits least for its peers is the one they wait for.
        i = int(np.argmin([r.peer_idle_fraction for r in rows]))
        lead = (f"rank {rows[i].rank} waits least for its peers ({rows[i].peer_idle_fraction:.0%} of its step, "
                f"estimated from each rank alone)")
    r = rows[i]
    others = [o.host_idle_fraction for j, o in enumerate(rows) if j != i]
    others_peer = max(o.peer_idle_fraction for j, o in enumerate(rows) if j != i)
    if others_peer < BALANCED_PEER_FRACTION:
        why = (f"but the ranks run in step: the others wait for peers only {others_peer:.0%} of their step, "
               f"so no rank holds the group back")
    elif r.host_idle_fraction >= LAUNCH_BOUND_IDLE_FRACTION:
        why = (f"its GPU idles {r.host_idle_fraction:.0%} of the step waiting for its own host "
               f"(other ranks {max(others):.0%} at most), the host spending {r.cpu_step_us_median:,.0f} us per step "
               f"with {r.launch_api_us_per_step_median:,.0f} us inside {r.kernel_launches_per_step_median:g} launch "
               f"calls: the group runs at this rank's host speed, which CUDA graphs on every rank remove")
    else:
        busy = 1.0 - r.host_idle_fraction - r.peer_idle_fraction
        why = (f"its GPU is busy about {busy:.0%} of the step and idles only {r.host_idle_fraction:.0%} for its host: "
               f"more GPU work lands on this rank (load imbalance), which CUDA graphs do not remove")
    return r.rank, f"{lead}; {why}"


__all__ = ["SCHEMA", "GroupStep", "JobReport", "JobSummary", "RankSummary", "analyze_for_plan", "analyze_job",
           "analyze_with_collectives", "group_by_job", "group_traces", "job_key", "rank_from_name",
           "trace_rank"]
