"""A capture plan as a Markdown report (for the Capture plan page's download button).

The planner's ``Plan.to_dict()`` is the machine-readable form; this is the one to paste
into a ticket. Text that came from users (file names in the costs' origin, warnings) is
put in table cells with ``|`` escaped, or in code blocks.
"""
from __future__ import annotations

import json

from launchgap.engines import LABELS as SERVER_LABELS
from launchgap.planning.planner import SERVERS, Plan


def _cell(v: object) -> str:
    return str(v).replace("|", "\\|").replace("\n", " ")


def _table(headers: list[str], rows: list[list[object]]) -> list[str]:
    out = ["| " + " | ".join(headers) + " |", "|" + "|".join("---" for _ in headers) + "|"]
    return out + ["| " + " | ".join(_cell(c) for c in r) + " |" for r in rows]


def _secs(s: float | None) -> str:
    return f"{s:,.1f}" if s is not None else "—"


def _extrapolation_lines(plan: Plan) -> list[str]:
    x = plan.extrapolation
    if x is None:
        return []
    return [f"- **Above the costs:** batch sizes {x['batch_sizes'][0]}..{x['batch_sizes'][-1]} extrapolated from "
            f"bs {x['top_batch_size']}; expected step {x['expected_step_us_low']:,.1f} to "
            f"{x['expected_step_us_high']:,.1f} us if costs grow {x['band_factors'][0]:g}x to "
            f"{x['band_factors'][1]:g}x as fast as fitted"]


def plan_markdown(plan: Plan, costs_from: str, distribution_from: str) -> str:
    """The plan, its comparison with the servers' defaults, per-batch detail and configs, as Markdown."""
    o = plan.options
    lines = ["# CUDA-graph capture plan (launchgap)", ""]
    b = ", ".join(str(x) for x in plan.buckets) or "none (run eager)"
    cross = plan.crossover_batch_size
    lines += [
        f"- **Capture batch sizes:** {b}",
        f"- **Expected step:** {plan.expected_step_us:,.1f} us (all eager {plan.all_eager_expected_step_us:,.1f} us; "
        f"{plan.speedup_vs_all_eager:.2f}x)",
        f"- **Crossover batch size:** {cross if cross is not None else 'none within the costs'} "
        f"(win under {o.win_threshold:.0%} above it)",
        f"- **Graph memory:** {plan.memory_used_mib:,.0f} MiB predicted ({_cell(plan.graph_memory_source)})"
        + (f"; capture {plan.capture_s:,.1f} s" if plan.capture_s is not None else "")
        + (f"; {plan.kv_tokens_lost:,} KV-cache tokens" if plan.kv_tokens_lost is not None else ""),
        f"- **Padding policy:** {o.padding}; max graphs {o.max_graphs if o.max_graphs is not None else 'unlimited'}; "
        f"memory budget {f'{o.memory_budget_mib:g} MiB' if o.memory_budget_mib is not None else 'none'}; "
        f"capture budget {f'{o.capture_budget_s:g} s' if o.capture_budget_s is not None else 'none'}",
        f"- **Costs from:** {_cell(costs_from)}; **distribution from:** {_cell(distribution_from)}",
        *_extrapolation_lines(plan),
        "",
        "## Against the servers' default capture lists",
        "",
    ]
    rows = [["this plan", plan.score.n_graphs, f"{plan.expected_step_us:,.1f}", f"{plan.memory_used_mib:,.0f}",
             _secs(plan.capture_s), "yes", "—"]]
    for name, bl in plan.baselines.items():
        rows.append([SERVER_LABELS.get(name, name) + (f" {bl.version}" if bl.version else ""), bl.score.n_graphs,
                     f"{bl.score.expected_step_us:,.1f}", f"{bl.memory_mib:,.0f}", _secs(bl.capture_s),
                     "yes" if bl.within_budget else "no",
                     f"{1 - plan.expected_step_us / bl.score.expected_step_us:.1%}"
                     if bl.score.expected_step_us > 0 else "—"])
    rows.append(["all eager", 0, f"{plan.all_eager_expected_step_us:,.1f}", "0", "0.0", "yes",
                 f"{1 - plan.expected_step_us / plan.all_eager_expected_step_us:.1%}"
                 if plan.all_eager_expected_step_us > 0 else "—"])
    lines += _table(["setup", "graphs", "expected step (us)", "graph memory (MiB)", "capture (s)", "within budget",
                     "plan saves"], rows)
    if len(plan.pareto) > 1:
        lines += ["", "## Trade-off: expected step, graph memory, capture time", "",
                  "Bucket sets no other beats on all three at once (thinned to sets at least 0.5% apart).", ""]
        lines += _table(["graphs", "expected step (us)", "graph memory (MiB)", "capture (s)", "within budget",
                         "buckets"],
                        [[p.graphs, f"{p.expected_step_us:,.1f}", f"{p.memory_mib:,.0f}", _secs(p.capture_s),
                          "yes" if p.within_budget else "no", ", ".join(str(b) for b in p.buckets) or "none"]
                         for p in plan.pareto])
    lines += ["", "## Per batch size", ""]
    lines += _table(["batch size", "share of steps", "eager (us)", "graph (us)", "cost source", "runs as",
                     "planned (us)"],
                    [[r.batch_size, f"{r.weight:.1%}", f"{r.eager_us:,.1f}", f"{r.graph_us:,.1f}", r.source,
                      f"graph bs {r.bucket}" if r.bucket is not None else "eager", f"{r.planned_us:,.1f}"]
                     for r in plan.per_batch])
    lines += ["", "## Configs", ""]
    snippets = plan.config_snippets()
    for name in SERVERS:
        lines += [f"### {SERVER_LABELS[name]}", "", "```json", json.dumps(plan.configs()[name]), "```", "",
                  "```", snippets[name], "```", ""]
    if plan.warnings:
        lines += ["## Notes", ""] + [f"- {_cell(w)}" for w in plan.warnings] + [""]
    return "\n".join(lines)
