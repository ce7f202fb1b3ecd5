"""``launchgap plan TRACES...``: which batch sizes to capture as CUDA graphs, and what that buys.

Costs come from ``--timings`` (harness timings, preferred), else from a timings file found
among the given paths (``truth.json`` beside the traces), else from the traces themselves.
The batch-size distribution comes from ``--distribution`` when given, else from the steps
in the traces. See :mod:`analyzer.planning.planner` for the model and the optimisation.

Traces of different workloads (models, devices, ranks: :mod:`analyzer.workload`) are never
pooled: each workload gets its own plan, or ``--workload ID`` picks one.

Graph memory and capture time come from the memory model
(:mod:`analyzer.planning.memory`) when the model's dimensions are known (``--model-config``, or
the timings file's ``models`` section), else from a constant per graph. See
:mod:`analyzer.planning.planner` for the model and the optimisation.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from ._shared import add_analysis_arguments, analysis_options
from ..errors import AnalyzerError, InputError
from ..loaders import DEFAULT_MAX_TRACE_BYTES, expand_paths, load_trace
from ..planning.costs import CostTable
from ..planning.inputs import (
    costs_from_reports,
    costs_from_timings,
    distribution_from_reports,
    kernels_per_step_from_timings,
    load_distribution,
    load_model_dims,
    looks_like_timings,
    model_dims_from_timings,
)
from ..planning.memory import MemoryModel, ModelDims
from ..planning.planner import Plan, PlanOptions, plan_capture
from ..render import render_plan
from ..report import analyze_trace
from ..workload import Workload, group_by_workload, pick_workload

NAME = "plan"
HELP = "plan which batch sizes to capture as CUDA graphs for a batch-size distribution and budget"


def prepare_parser(p: argparse.ArgumentParser) -> None:
    p.add_argument("paths", nargs="*", metavar="TRACE",
                   help="eager and/or graph traces (files or directories); a timings JSON among them is used "
                        "as --timings")
    p.add_argument("--timings", metavar="FILE", help="harness timings.json (or truth.json): unprofiled costs, "
                                                     "preferred over trace-derived costs")
    p.add_argument("--model", help="which model's rows to use when the timings file holds several")
    p.add_argument("--distribution", metavar="FILE", help="batch-size histogram: CSV 'batch_size,count' or JSON "
                                                          "{\"8\": 120, ...}; wins over the traces' steps")
    p.add_argument("--max-graphs", type=int, metavar="K", help="capture at most K graphs")
    p.add_argument("--memory-mib", "--memory-budget-mib", dest="memory_budget_mib", type=float, metavar="M",
                   help="graph memory allowed (MiB of device memory, as the driver counts it)")
    p.add_argument("--capture-seconds", dest="capture_budget_s", type=float, metavar="T",
                   help="capture (start-up) time allowed, seconds; needs the model's dimensions")
    p.add_argument("--kv-bytes-per-token", type=float, metavar="B",
                   help="KV-cache bytes per token, to state graph memory as KV-cache tokens lost (default from "
                        "the model's dimensions: 2 x layers x kv_heads x head_dim x dtype bytes)")
    p.add_argument("--model-config", metavar="FILE",
                   help="the model's dimensions: a Hugging Face config.json or the harness's layout (default: the "
                        "timings file's models section); switches graph memory to the fitted memory model")
    p.add_argument("--memory-model", metavar="FILE",
                   help="a fitted memory model (python -m launchgap.planning.memory fit); default: the committed one")
    p.add_argument("--graph-memory-mib", type=float, metavar="X",
                   help="a constant memory per graph (MiB) instead of the memory model; default without model "
                        "dimensions: measured by the harness, else an assumed figure")
    p.add_argument("--max-batch-size", type=int, metavar="N", help="capture no size above N (server lists are cut "
                                                                   "there too)")
    p.add_argument("--padding", choices=("pad", "exact"), default="pad",
                   help="pad a batch up to the next captured size (default) or graph exact matches only")
    p.add_argument("--win-threshold", type=float, default=0.05,
                   help="crossover: the graph win (eager/graph - 1) under which graphs stop paying (default 0.05)")
    p.add_argument("--workload", metavar="ID", help="plan for this workload only (an id such as wl-1a2b3c4d, as "
                                                    "analyze reports it); default: one plan per workload")
    p.add_argument("--format", choices=("text", "markdown", "json"), default="text")
    p.add_argument("--output", "-o", help="write the plan to this file instead of stdout")
    add_analysis_arguments(p)


def _load_reports(files: list[Path], args: argparse.Namespace) -> list:
    opts = analysis_options(args)
    max_bytes = getattr(args, "max_trace_bytes", DEFAULT_MAX_TRACE_BYTES)
    reports = []
    for f in files:  # one trace at a time
        try:
            reports.append(analyze_trace(load_trace(f, max_bytes), opts))
        except AnalyzerError as exc:
            if exc.path is None:
                exc.path = str(f)
            raise
    return reports


def build_plans(args: argparse.Namespace) -> list[tuple[Workload | None, Plan, list[str]]]:
    """One plan per workload among the traces (or the ``--workload`` one): (workload, plan, notes)."""
    files = expand_paths(args.paths) if args.paths else []
    reports = _load_reports([f for f in files if not looks_like_timings(f)], args)
    groups = group_by_workload(reports, lambda r: r.workload)
    wanted = getattr(args, "workload", None)
    if wanted:
        if not groups:
            raise InputError("--workload picks among the traces' workloads; no trace was given")
        chosen = pick_workload(groups, wanted)
        plan, notes = build_plan(args, chosen.items)
        notes.append(f"workload {chosen.id} ({chosen.label}): {len(chosen.items)} of {len(reports)} trace(s)")
        return [(chosen.workload, plan, notes)]
    if len(groups) <= 1:
        plan, notes = build_plan(args, reports)
        return [(groups[0].workload if groups else None, plan, notes)]
    out: list[tuple[Workload | None, Plan, list[str]]] = []
    failed: list[str] = []
    for g in groups:  # one plan per workload: costs and batch sizes of different models never mix
        try:
            plan, notes = build_plan(args, g.items)
        except InputError as exc:
            failed.append(f"{g.id}: {exc.message}")
            continue
        notes.append(f"workload {g.id} ({g.label}): {len(g.items)} of {len(reports)} trace(s); the traces hold "
                     f"{len(groups)} workloads, one plan each (--workload ID for one)")
        out.append((g.workload, plan, notes))
    if not out:
        raise InputError("no workload could be planned: " + "; ".join(failed))
    for _, _, notes in out:
        notes += [f"no plan for workload {f}" for f in failed]
    return out


def build_plan(args: argparse.Namespace, reports: list | None = None) -> tuple[Plan, list[str]]:
    """Costs, distribution and options from the command line -> the plan, plus notes on the inputs.

    ``reports``: the analysed traces to plan from (one workload's, see :func:`build_plans`);
    None loads every trace among the inputs.
    """
    notes: list[str] = []
    files = expand_paths(args.paths) if args.paths else []
    timings_path: str | None = args.timings
    found = [f for f in files if looks_like_timings(f)]
    traces = [f for f in files if f not in found]
    # expand_paths skips non-trace JSON inside directories; a timings file there is still an input.
    for d in (Path(x) for x in args.paths or []):
        if d.is_dir():
            found += sorted(f for f in d.rglob("*.json") if f.is_file() and looks_like_timings(f))
    if found:
        if timings_path is None:
            if len(found) > 1:
                raise InputError(f"several timings files among the inputs ({', '.join(str(f) for f in found)}); "
                                 f"pass one with --timings")
            timings_path = str(found[0])
            notes.append(f"costs from the timings file found among the inputs: {timings_path}")
        else:
            notes.append(f"ignored timings file(s) among the inputs in favour of --timings: "
                         f"{', '.join(str(f) for f in found)}")
    if not traces and timings_path is None:
        raise InputError("nothing to plan from: give traces, --timings FILE, or both")
    reports = _load_reports(traces, args) if reports is None else reports
    costs: CostTable
    if timings_path is not None:
        costs = costs_from_timings(timings_path, args.model)
        if reports:
            notes.append("the traces give the batch-size distribution only; costs come from the timings")
    else:
        if args.model:
            raise InputError("--model selects rows of a timings file; none was given")
        costs = costs_from_reports(reports)
    if args.distribution:
        dist = load_distribution(args.distribution)
        source = f"distribution from {args.distribution}"
        if reports:
            source += " (wins over the traces' steps)"
    else:
        dist = distribution_from_reports(reports)
        if not dist:
            raise InputError("no batch-size distribution: the traces hold no steps with a known batch size; "
                             "pass --distribution FILE")
        source = f"distribution from {int(sum(dist.values()))} steps in {len(reports)} trace(s)"
    notes.insert(0, source)
    notes.insert(0, f"costs from {costs.origin}")
    opts = PlanOptions(max_graphs=args.max_graphs, memory_budget_mib=args.memory_budget_mib,
                       graph_memory_mib=args.graph_memory_mib, max_batch_size=args.max_batch_size,
                       padding=args.padding, win_threshold=args.win_threshold,
                       capture_budget_s=args.capture_budget_s, kv_bytes_per_token=args.kv_bytes_per_token)
    dims, nodes = _model_dims(args, timings_path)
    if dims is not None:
        notes.append(f"model dimensions of {dims.name} from "
                     f"{args.model_config or timings_path}: graph memory and capture time from the memory model")
    model = None
    if args.memory_model:
        model = MemoryModel.from_dict(_json_object(args.memory_model, "memory model"))
    return plan_capture(costs, dist, opts, dims=dims, memory_model=model, nodes_per_size=nodes), notes


def _json_object(path: str, what: str) -> dict:
    try:
        doc = json.loads(Path(path).read_text(encoding="utf-8"))
    except OSError as exc:
        raise InputError(f"cannot read the {what}: {exc.strerror}", path) from None
    except ValueError as exc:
        raise InputError(f"{what} file is not valid JSON ({exc})", path) from None
    if not isinstance(doc, dict):
        raise InputError(f"{what} file must hold a JSON object", path)
    return doc


def _model_dims(args: argparse.Namespace, timings_path: str | None) -> tuple[ModelDims | None, float | None]:
    """The model's dimensions (``--model-config``, else the timings' ``models``) and its nodes per graph."""
    if args.model_config:
        return load_model_dims(args.model_config, args.model), None
    if timings_path is None:
        return None, None
    dims = model_dims_from_timings(timings_path, args.model)
    return dims, (kernels_per_step_from_timings(timings_path, args.model) if dims is not None else None)


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
        for w, plan, notes in plans:
            title = f"Workload {w.id}: {w.label}" if w is not None else "Workload: unknown"
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
