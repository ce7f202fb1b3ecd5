"""``launchgap plan TRACES...``: which batch sizes to capture as CUDA graphs, and what that buys.

Costs come from ``--timings`` (harness timings, preferred), else from a timings file found
among the given paths (``truth.json`` beside the traces), else from the traces themselves.
The batch-size distribution comes from ``--distribution`` when given, else from the steps
in the traces. See :mod:`analyzer.planner` for the model and the optimisation.

Traces of different workloads (models, devices, ranks: :mod:`analyzer.workload`) are never
pooled: each workload gets its own plan, or ``--workload ID`` picks one.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from analyzer.costs import (
    CostTable,
    costs_from_reports,
    costs_from_timings,
    distribution_from_reports,
    load_distribution,
    looks_like_timings,
)
from analyzer.errors import AnalyzerError, InputError
from analyzer.loaders import DEFAULT_MAX_TRACE_BYTES, expand_paths, load_trace
from analyzer.planner import SERVERS, Plan, PlanOptions, plan_capture
from analyzer.report import AnalysisOptions, analyze_trace
from analyzer.workload import Workload, group_by_workload, pick_workload

NAME = "plan"
HELP = "plan which batch sizes to capture as CUDA graphs for a batch-size distribution and budget"

_SERVER_LABEL = {"vllm": "vLLM", "sglang": "SGLang", "tensorrt_llm": "TensorRT-LLM"}


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
    p.add_argument("--memory-budget-mib", type=float, metavar="M", help="total graph memory allowed (MiB)")
    p.add_argument("--graph-memory-mib", type=float, metavar="X",
                   help="memory per graph (MiB); default: measured by the harness, else an assumed figure")
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
    try:
        from analyzer.commands.analyze import add_analysis_arguments
    except ImportError:  # the analyze command is optional in a build; plan works without its options
        return
    add_analysis_arguments(p)


def _analysis_options(args: argparse.Namespace) -> AnalysisOptions:
    try:
        from analyzer.commands.analyze import analysis_options
    except ImportError:
        return AnalysisOptions()
    return analysis_options(args)


def _load_reports(files: list[Path], args: argparse.Namespace) -> list:
    opts = _analysis_options(args)
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
                       padding=args.padding, win_threshold=args.win_threshold)
    return plan_capture(costs, dist, opts), notes


# --- rendering (strings only) -----------------------------------------------------------------

def _table(headers: list[str], rows: list[list[str]], markdown: bool) -> list[str]:
    if markdown:
        out = ["| " + " | ".join(headers) + " |", "|" + "|".join("---" for _ in headers) + "|"]
        return out + ["| " + " | ".join(r) + " |" for r in rows]
    widths = [max([len(h)] + [len(r[i]) for r in rows]) for i, h in enumerate(headers)]
    fmt = "  ".join(("{:<%d}" if i == 0 else "{:>%d}") % w for i, w in enumerate(widths))
    return ["  " + fmt.format(*headers), "  " + fmt.format(*["-" * w for w in widths])] + \
        ["  " + fmt.format(*r) for r in rows]


def _list(b: tuple[int, ...] | list[int], limit: int = 24) -> str:
    b = list(b)
    if len(b) <= limit:
        return "[" + ", ".join(str(x) for x in b) + "]"
    return "[" + ", ".join(str(x) for x in b[:limit - 4]) + ", ..., " + ", ".join(str(x) for x in b[-3:]) + "]"


def _verdict(plan: Plan) -> str:
    n = plan.score.n_graphs
    if n == 0:
        return (f"Run eager: no CUDA graph lowers the expected step ({plan.expected_step_us:,.1f} us) "
                f"under these budgets.")
    best = min(plan.baselines.values(), key=lambda b: b.score.expected_step_us)
    rel = plan.expected_step_us / best.score.expected_step_us - 1
    cmp = (f"{abs(rel):.1%} {'faster' if rel < 0 else 'slower'} than" if abs(rel) >= 0.0005 else "as fast as")
    return (f"Capture {n} graph{'s' if n != 1 else ''} {_list(plan.buckets, 12)}: expected step "
            f"{plan.expected_step_us:,.1f} us vs {plan.all_eager_expected_step_us:,.1f} us all-eager "
            f"({plan.speedup_vs_all_eager:.2f}x); {cmp} the best server default "
            f"({_SERVER_LABEL[best.name]}, {best.score.n_graphs} graphs).")


def render_plan(plan: Plan, markdown: bool = False, notes: list[str] | None = None) -> str:
    """The plan for people: verdict first, then buckets, baselines, crossover, waste, configs."""
    h = "## " if markdown else ""
    o = plan.options
    lines = [("**" + _verdict(plan) + "**") if markdown else _verdict(plan), ""]
    budget = []
    if plan.max_graphs_effective is not None:
        budget.append(f"at most {plan.max_graphs_effective} graphs")
    if o.memory_budget_mib is not None:
        budget.append(f"memory budget {o.memory_budget_mib:g} MiB")
    if o.max_batch_size is not None:
        budget.append(f"sizes up to {o.max_batch_size}")
    facts = [
        ("buckets", f"{_list(plan.buckets, 40)} ({plan.score.n_graphs} graphs, padding={o.padding})"),
        ("budget", ", ".join(budget) or "none"),
        ("graph memory", f"{plan.memory_used_mib:,.1f} MiB at {plan.graph_memory_mib:.3g} MiB per graph "
                         f"({plan.graph_memory_source})"),
        ("steps on a graph", f"{plan.score.graph_step_fraction:.1%}"),
        ("padding waste", f"{plan.score.padding_waste_us:,.1f} us per step; "
                          f"{plan.score.padded_rows_fraction:.1%} of graph rows are padding"),
        ("crossover", (f"graphs win less than {o.win_threshold:.0%} from batch size {plan.crossover_batch_size} up"
                       if plan.crossover_batch_size is not None else
                       f"none: graphs win at least {o.win_threshold:.0%} up to the largest size with costs "
                       f"({plan.costs.max_batch_size})")),
        ("within 1% of this", f"{len(plan.buckets_within_1pct)} graphs {_list(plan.buckets_within_1pct, 16)}"),
    ]
    if markdown:
        lines += _table(["", ""], [[k, v] for k, v in facts], True)
    else:
        w = max(len(k) for k, _ in facts)
        lines += [f"  {k:<{w}}  {v}" for k, v in facts]
    lines += ["", f"{h}Against the servers' default lists" if markdown else "Against the servers' default lists"]
    rows = [["this plan", str(plan.score.n_graphs), f"{plan.expected_step_us:,.1f}", "-",
             f"{plan.score.padding_waste_us:,.1f}", f"{plan.memory_used_mib:,.1f}"]]
    rows.append(["all eager", "0", f"{plan.all_eager_expected_step_us:,.1f}",
                 f"{1 - plan.expected_step_us / plan.all_eager_expected_step_us:+.1%}", "0.0", "0.0"])
    for name in SERVERS:
        b = plan.baselines[name]
        saving = 1 - plan.expected_step_us / b.score.expected_step_us
        rows.append([f"{_SERVER_LABEL[name]} default" + ("" if b.within_budget else " (over budget)"),
                     str(b.score.n_graphs), f"{b.score.expected_step_us:,.1f}", f"{saving:+.1%}",
                     f"{b.score.padding_waste_us:,.1f}", f"{b.memory_mib:,.1f}"])
    lines += _table(["buckets", "graphs", "expected_us", "plan saves", "pad_waste_us", "memory_mib"], rows, markdown)
    lines += ["", f"{h}Per batch size" if markdown else "Per batch size"]
    shown = sorted(plan.per_batch, key=lambda r: -r.weight)[:30]
    shown.sort(key=lambda r: r.batch_size)
    lines += _table(["bs", "share", "eager_us", "graph_us", "runs as", "planned_us", "source"],
                    [[str(r.batch_size), f"{r.weight:.1%}", f"{r.eager_us:,.1f}", f"{r.graph_us:,.1f}",
                      f"graph {r.bucket}" if r.bucket is not None else "eager", f"{r.planned_us:,.1f}", r.source]
                     for r in shown], markdown)
    if len(plan.per_batch) > len(shown):
        lines.append(f"  ... {len(plan.per_batch) - len(shown)} rarer sizes (use --format json for all)")
    curve = plan.tradeoff
    if len(curve) > 2:
        lines += ["", f"{h}Best expected step by number of graphs" if markdown else
                  "Best expected step by number of graphs"]
        pick = [c for c in curve if c[0] <= 12 or c == curve[-1]]
        lines.append("  " + ", ".join(f"{k}: {v:,.0f} us" for k, v in pick))
    lines += ["", f"{h}Configs" if markdown else "Configs"]
    snip = plan.config_snippets()
    fence = "```"
    for name in SERVERS:
        lines.append(f"{_SERVER_LABEL[name]}:")
        if markdown:
            lines += [fence + ("yaml" if name == "tensorrt_llm" else "bash"), snip[name], fence]
        else:
            lines += ["    " + s for s in snip[name].splitlines()]
    notes_all = list(notes or []) + list(plan.warnings)
    if notes_all:
        lines.append("")
        lines += [f"{'- ' if markdown else 'note: '}{n}" for n in notes_all]
    return "\n".join(lines)


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
