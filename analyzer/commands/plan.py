"""``launchgap plan TRACES...``: which batch sizes to capture as CUDA graphs, and what that buys.

Costs come from ``--timings`` (harness timings, preferred), else from a timings file found
among the given paths (``truth.json`` beside the traces), else from the traces themselves.
The batch-size distribution comes from ``--distribution`` when given, else from the steps
in the traces. Graph memory and capture time come from the memory model
(:mod:`analyzer.planning.memory`) when the model's dimensions are known (``--model-config``, or
the timings file's ``models`` section), else from a constant per graph. See
:mod:`analyzer.planning.planner` for the model and the optimisation.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from analyzer.errors import AnalyzerError, InputError
from analyzer.loaders import DEFAULT_MAX_TRACE_BYTES, expand_paths, load_trace
from analyzer.planning.costs import CostTable
from analyzer.planning.inputs import (
    costs_from_reports,
    costs_from_timings,
    distribution_from_reports,
    kernels_per_step_from_timings,
    load_distribution,
    load_model_dims,
    looks_like_timings,
    model_dims_from_timings,
)
from analyzer.planning.memory import MemoryModel, ModelDims
from analyzer.planning.planner import Plan, PlanOptions, plan_capture
from analyzer.report import AnalysisOptions, analyze_trace

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
                   help="a fitted memory model (python -m analyzer.planning.memory fit); default: the committed one")
    p.add_argument("--graph-memory-mib", type=float, metavar="X",
                   help="a constant memory per graph (MiB) instead of the memory model; default without model "
                        "dimensions: measured by the harness, else an assumed figure")
    p.add_argument("--max-batch-size", type=int, metavar="N", help="capture no size above N (server lists are cut "
                                                                   "there too)")
    p.add_argument("--padding", choices=("pad", "exact"), default="pad",
                   help="pad a batch up to the next captured size (default) or graph exact matches only")
    p.add_argument("--win-threshold", type=float, default=0.05,
                   help="crossover: the graph win (eager/graph - 1) under which graphs stop paying (default 0.05)")
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


def build_plan(args: argparse.Namespace) -> tuple[Plan, list[str]]:
    """Costs, distribution and options from the command line -> the plan, plus notes on the inputs."""
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
    reports = _load_reports(traces, args)
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


# --- rendering (strings only) -----------------------------------------------------------------

def _cell(v: object) -> str:
    """A Markdown table cell: ``|`` escaped, one line (the rule app/plan_report.py uses too)."""
    return str(v).replace("|", "\\|").replace("\n", " ")


def _table(headers: list[str], rows: list[list[str]], markdown: bool) -> list[str]:
    if markdown:
        out = ["| " + " | ".join(headers) + " |", "|" + "|".join("---" for _ in headers) + "|"]
        return out + ["| " + " | ".join(_cell(c) for c in r) + " |" for r in rows]
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
            f"({_SERVER_LABEL.get(best.name, best.name)}, {best.score.n_graphs} graphs).")


def _secs(s: float | None) -> str:
    return f"{s:,.1f}" if s is not None else "-"


def _memory_fact(plan: Plan) -> str:
    """Predicted graph memory, start-up and KV-cache tokens lost, and where the figures come from."""
    lc = plan.list_cost
    out = f"{plan.memory_used_mib:,.1f} MiB"
    if plan.capture_s is not None:
        out += f", capture {plan.capture_s:,.1f} s"
    if plan.kv_tokens_lost is not None:
        out += f", {plan.kv_tokens_lost:,} KV-cache tokens at {plan.kv_bytes_per_token:,.0f} bytes per token"
    if lc.pool_mib_per_row > 0 or lc.fixed_mib > 0:
        out += (f" ({lc.fixed_mib:,.1f} MiB + {lc.pool_mib_per_row:.3g} MiB per row of the largest size + "
                f"{lc.per_size_mib:.3g} MiB per size; {lc.source})")
    else:
        out += f" ({lc.source})"
    return out


def _pareto_lines(plan: Plan, markdown: bool) -> list[str]:
    """The trade-off table: bucket sets no other beats on step, memory and capture time at once."""
    if len(plan.pareto) < 2:
        return []
    title = "Trade-off: expected step, graph memory, capture time (Pareto)"
    rows = [[str(p.graphs), f"{p.expected_step_us:,.1f}", f"{p.memory_mib:,.1f}", _secs(p.capture_s),
             "yes" if p.within_budget else "no", _list(p.buckets, 10)] for p in plan.pareto]
    return ["", f"## {title}" if markdown else title] + _table(
        ["graphs", "expected_us", "memory_mib", "capture_s", "in budget", "buckets"], rows, markdown)


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
    if o.capture_budget_s is not None:
        budget.append(f"capture budget {o.capture_budget_s:g} s")
    if o.max_batch_size is not None:
        budget.append(f"sizes up to {o.max_batch_size}")
    facts = [
        ("buckets", f"{_list(plan.buckets, 40)} ({plan.score.n_graphs} graphs, padding={o.padding})"),
        ("budget", ", ".join(budget) or "none"),
        ("graph memory", _memory_fact(plan)),
        ("steps on a graph", f"{plan.score.graph_step_fraction:.1%}"),
        ("padding waste", f"{plan.score.padding_waste_us:,.1f} us per step; "
                          f"{plan.score.padded_rows_fraction:.1%} of graph rows are padding"),
        ("crossover", (f"graphs win less than {o.win_threshold:.0%} from batch size {plan.crossover_batch_size} up"
                       if plan.crossover_batch_size is not None else
                       f"none: graphs win at least {o.win_threshold:.0%} up to the largest size with costs "
                       f"({plan.costs.max_batch_size})")),
        ("within 1% of this", f"{len(plan.buckets_within_1pct)} graphs {_list(plan.buckets_within_1pct, 16)}"),
    ]
    x = plan.extrapolation
    if x is not None:
        facts.append(("above the costs", f"bs {_list(x['batch_sizes'], 8)} extrapolated from bs {x['top_batch_size']}: "
                                         f"expected step {x['expected_step_us_low']:,.1f} to "
                                         f"{x['expected_step_us_high']:,.1f} us if costs grow "
                                         f"{x['band_factors'][0]:g}x to {x['band_factors'][1]:g}x as fast as fitted"))
    if markdown:
        lines += _table(["", ""], [[k, v] for k, v in facts], True)
    else:
        w = max(len(k) for k, _ in facts)
        lines += [f"  {k:<{w}}  {v}" for k, v in facts]
    lines += ["", f"{h}Against the servers' default lists" if markdown else "Against the servers' default lists"]
    rows = [["this plan", str(plan.score.n_graphs), f"{plan.expected_step_us:,.1f}", "-",
             f"{plan.score.padding_waste_us:,.1f}", f"{plan.memory_used_mib:,.1f}", _secs(plan.capture_s)]]
    rows.append(["all eager", "0", f"{plan.all_eager_expected_step_us:,.1f}",
                 f"{1 - plan.expected_step_us / plan.all_eager_expected_step_us:+.1%}", "0.0", "0.0", "0.0"])
    for name, b in plan.baselines.items():
        saving = 1 - plan.expected_step_us / b.score.expected_step_us
        label = f"{_SERVER_LABEL.get(name, name)} default" + (f" {b.version}" if b.version else "")
        rows.append([label + ("" if b.within_budget else " (over budget)"),
                     str(b.score.n_graphs), f"{b.score.expected_step_us:,.1f}", f"{saving:+.1%}",
                     f"{b.score.padding_waste_us:,.1f}", f"{b.memory_mib:,.1f}", _secs(b.capture_s)])
    lines += _table(["buckets", "graphs", "expected_us", "plan saves", "pad_waste_us", "memory_mib", "capture_s"],
                    rows, markdown)
    lines += _pareto_lines(plan, markdown)
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
    for name in ("vllm", "sglang", "tensorrt_llm"):
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


def run(args: argparse.Namespace) -> int:
    plan, notes = build_plan(args)
    if args.format == "json":
        doc = plan.to_dict()
        doc["inputs"] = notes
        text = json.dumps(doc, indent=1, allow_nan=False)
    else:
        text = render_plan(plan, markdown=args.format == "markdown", notes=notes)
    if args.output:
        try:
            Path(args.output).write_text(text + "\n", encoding="utf-8")
        except OSError as exc:
            raise InputError(f"cannot write the plan: {exc.strerror}", args.output) from None
    else:
        sys.stdout.write(text + "\n")
    return 0
