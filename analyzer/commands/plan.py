"""``launchgap plan TRACES...``: which batch sizes to capture as CUDA graphs, and what that buys.

The flags become a :class:`~launchgap.planning.request.PlanRequest` (declared once, in
:mod:`._shared`, for ``plan`` and ``fleet``) and the plan is built by
:func:`launchgap.planning.request.plan_workloads`, as the dashboard and ``fleet`` build theirs.
Costs come from ``--timings`` (harness timings, preferred), else from a timings file found
among the given paths (``truth.json`` beside the traces), else from the traces themselves.
The batch-size distribution comes from ``--distribution`` when given, else from the steps
in the traces.

Traces of different workloads (models, devices, ranks: :mod:`launchgap.workload`) are never
pooled: each workload gets its own plan, or ``--workload ID`` picks one. Of a file that holds several ranks
(an nsys export of a tensor-parallel server) one rank is planned from, and the plan's notes say which.
"""
from __future__ import annotations

import argparse
import json
import sys
from dataclasses import replace
from pathlib import Path

from ._shared import add_analysis_arguments, add_plan_flags, analysis_options, request_from_args
from ..engines import CaptureSettings
from ..errors import AnalyzerError, InputError
from ..loaders import DEFAULT_MAX_TRACE_BYTES, expand_paths, load_trace
from ..planning.planner import Plan
from ..planning.inputs import looks_like_timings
from ..planning.serverlog import capture_settings_from_log
from ..planning.request import PlanInput, plan_workloads, rank_note, server_log_input, timings_among, trace_steps
from ..serverlogs import merge_scrapes, read_server_file, split_inputs
from ..serverlogs.diagnosis import LogDiagnosis, diagnose
from ..render import render_plan
from ..ranks import analyze_for_plan
from ..report import TraceReport
from ..workload import Workload, display_names, group_by_workload, tp_job

NAME = "plan"
HELP = "plan which batch sizes to capture as CUDA graphs for a batch-size distribution and budget"


def prepare_parser(p: argparse.ArgumentParser) -> None:
    p.add_argument("paths", nargs="*", metavar="TRACE",
                   help="eager and/or graph traces (files or directories); a timings JSON among them is used "
                        "as --timings; a server log or /metrics scrape among them is used as --server-log / "
                        "--metrics (recognised by content)")
    p.add_argument("--server-log", action="append", default=[], metavar="FILE",
                   help="the server's log (vLLM, SGLang, TensorRT-LLM; plain or gzipped): its batch distribution, "
                        "capture list, own capture memory and seconds, and costs from its forward/step times "
                        "(docs/serverlogs.md); repeatable")
    p.add_argument("--metrics", action="append", default=[], metavar="FILE",
                   help="a /metrics scrape (or several concatenated): the running batch per scrape; repeatable")
    p.add_argument("--costs", action="append", default=[], metavar="TRACE",
                   help="a benchmark trace (file or directory): it gives step costs only, never the batch-size "
                        "distribution (launchgap record's sweeps are recognised as such); repeatable")
    p.add_argument("--format", choices=("text", "markdown", "json"), default="text")
    p.add_argument("--output", "-o", help="write the plan to this file instead of stdout")
    add_plan_flags(p)
    add_analysis_arguments(p)


def _load_reports(files: list[Path], args: argparse.Namespace,
                  log_capture: CaptureSettings | None = None) -> list[TraceReport]:
    """Each trace analysed as ``analyze``, the dashboard and ``fleet`` analyse a lone trace; of a file holding
    several ranks, the one rank the plan reads (:func:`launchgap.ranks.analyze_for_plan`; its report's warnings,
    which the plan's notes repeat, say which). ``log_capture``: the capture list the server's log states, the list a
    trace of its engine is analysed under when no flag or config gives one."""
    opts = replace(analysis_options(args), log_capture=log_capture)
    max_bytes = getattr(args, "max_trace_bytes", DEFAULT_MAX_TRACE_BYTES)
    reports = []
    for f in files:  # one trace at a time
        try:
            reports.append(analyze_for_plan(load_trace(f, max_bytes), opts)[0])
        except AnalyzerError as exc:
            if exc.path is None:
                exc.path = str(f)
            raise
    return reports


def server_inputs(args: argparse.Namespace, paths: list[str], in_dirs: list[str],
                  have_costs: bool) -> list[PlanInput]:
    """The server logs and scrapes (``--server-log``, ``--metrics``, those among ``paths``, and
    those found in directories, passed over when they hold no server record) as plan inputs, each
    read once. A log's own forward or step times give the costs; costs from its throughput lines
    (an average over each logged interval) only when nothing else gives them. One server plans: the
    first log fills the roles (a scrape gives the distribution when no log is given); the others
    are read for their ceiling notes only."""
    logs = []
    given = [*args.server_log, *args.metrics, *paths]
    for f, optional in [(f, False) for f in given] + [(f, True) for f in in_dirs]:
        log = read_server_file(f, optional=optional)
        if log is not None:
            logs.append(log)
    # one engine's scrape files are one series over time (at the place of its first file)
    read: list[tuple[str, LogDiagnosis]] = [(log.path, diagnose(log)) for log in merge_scrapes(logs)]
    lead = next((i for i, (_, d) in enumerate(read) if d.log.kind == "log"), 0)
    out: list[PlanInput] = []
    for i, (f, d) in enumerate(read):
        log = d.log
        roles: list[str] = []
        if i == lead:
            roles = ["distribution", "capture_sizes", "capture_cost"] if log.kind == "log" else ["distribution"]
            if log.kind == "log" and (log.forward_times or len(log.iter_batch) or not have_costs):
                roles.insert(0, "costs")
        out.append(server_log_input(d, Path(f).name, roles, path=f))
    return out


def build_plans(args: argparse.Namespace) -> list[tuple[Workload | None, Plan, list[str]]]:
    """One plan per workload among the traces (or the ``--workload`` one): (workload, plan, notes)."""
    server, found_in_dirs, paths = split_inputs(list(args.paths or []))
    found = timings_among(paths)
    request = request_from_args(args, found)
    files = expand_paths(paths) if paths else []
    trace_files = [f for f in files if not looks_like_timings(f)]
    cost_files = expand_paths(args.costs) if args.costs else []
    have_costs = bool(trace_files or cost_files) or any(i.kind == "timings" for i in request.inputs)
    if not trace_files and not cost_files and not server and not found_in_dirs and not args.server_log \
            and not args.metrics \
            and not any(i.kind == "timings" for i in request.inputs):
        raise InputError("nothing to plan from: give traces, a server log (--server-log), --timings FILE, or both")
    logs = server_inputs(args, [str(f) for f in server], [str(f) for f in found_in_dirs], have_costs)
    if logs:
        request = replace(request, inputs=request.inputs + tuple(logs))
    # the server's log states the list it captured: the traces' fallbacks, padding and uncaptured sizes follow it
    stated = next((capture_settings_from_log(i.value) for i in logs
                   if "capture_sizes" in i.roles and isinstance(i.value, LogDiagnosis)), None)
    reports = _load_reports(trace_files, args, stated)
    bench = _load_reports(cost_files, args, stated)  # --costs: costs only
    flagged = {id(r) for r in bench}
    # a tensor-parallel server captures one list on every rank: its ranks' traces make one plan
    groups = group_by_workload(reports + bench, lambda r: r.workload, ranks_together=True)
    # a rank's own workload id (what analyze prints) picks its job
    job_of = {r.workload.id: tp_job(r.workload).id for r in reports + bench if r.workload is not None}
    plans = plan_workloads(request, [(g.workload, [trace_steps(r, benchmark=id(r) in flagged) for r in g.items])
                                     for g in groups], wanted=job_of.get(args.workload, args.workload))
    ranks = {g.id: [r.workload for r in g.items] for g in groups}
    for w, _, notes in plans:
        if w is not None and (note := rank_note(ranks.get(w.id, []))):
            notes.append(note)
    return plans


def _plan_doc(workload: Workload | None, plan: Plan, notes: list[str]) -> dict:
    doc = plan.to_dict()
    doc["inputs"] = notes
    doc["workload"] = workload.to_dict() if workload is not None else None
    return doc


def run(args: argparse.Namespace) -> int:
    plans = build_plans(args)
    md = args.format == "markdown"
    if args.format == "json":
        # One workload: the plan itself (as before); several: {"workloads": [plan, ...]}.
        docs = [_plan_doc(*p) for p in plans]
        text = json.dumps(docs[0] if len(docs) == 1 else {"workloads": docs}, indent=1, allow_nan=False)
    elif len(plans) == 1:
        text = render_plan(plans[0][1], markdown=md, notes=plans[0][2])
    else:
        parts = []
        names = display_names(w for w, _, _ in plans)
        for w, plan, notes in plans:
            title = (f"Workload {names[w.id]} (--workload {w.id})" if w is not None
                     else f"Workload: {names['unknown']}")
            parts.append(("## " if md else "") + title + ("\n" if md else "\n" + "=" * len(title) + "\n") + "\n"
                         + render_plan(plan, markdown=md, notes=notes))
        text = "\n\n".join(parts)
    if args.output:
        try:
            Path(args.output).write_text(text + "\n", encoding="utf-8")
        except OSError as exc:
            raise InputError(f"cannot write the plan: {exc.strerror}", args.output) from None
    else:
        sys.stdout.write(text + "\n")
    return 0
