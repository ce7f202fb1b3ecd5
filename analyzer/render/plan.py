"""A capture plan (:class:`~launchgap.planning.planner.Plan`) as text or Markdown: verdict first."""
from __future__ import annotations

from collections.abc import Mapping, Sequence

from ..engines import LABELS as _SERVER_LABEL
from ..engines import engine
from ..planning.planner import BASELINE_LABELS, SERVERS, Plan, TraceNote
from .table import table


def _list(b: tuple[int, ...] | list[int], limit: int = 24) -> str:
    b = list(b)
    if len(b) <= limit:
        return "[" + ", ".join(str(x) for x in b) + "]"
    return "[" + ", ".join(str(x) for x in b[:limit - 4]) + ", ..., " + ", ".join(str(x) for x in b[-3:]) + "]"


#: Above the configs of a plan whose costs tie (:attr:`Plan.eager_equals_graph`): they turn graphs off.
TIE_CONFIG_NOTE = ("(eager and graph costs tie, the eager one estimated: these configs turn graphs off; keep the "
                   "server's until eager steps are measured)")


def _verdict(plan: Plan) -> str:
    n = plan.score.n_graphs
    if n == 0 and plan.eager_equals_graph:
        return (f"No CUDA graph is predicted to lower the expected step ({plan.expected_step_us:,.1f} us), but eager "
                f"and graph costs are equal at every size (the eager one an estimate at its floor where no eager step "
                f"was measured; see the notes): measure eager steps before turning graphs off.")
    if n == 0:
        return (f"Run eager: no CUDA graph lowers the expected step ({plan.expected_step_us:,.1f} us) "
                f"under these budgets.")
    best = min((b for b in plan.baselines.values() if b.name in SERVERS), key=lambda b: b.score.expected_step_us)
    rel = plan.expected_step_us / best.score.expected_step_us - 1
    cmp = (f"{abs(rel):.1%} {'faster' if rel < 0 else 'slower'} than" if abs(rel) >= 0.0005 else "as fast as")
    floor = "at least " if plan.eager_floor else ""
    return (f"Capture {n} graph{'s' if n != 1 else ''} {_list(plan.buckets, 12)}: expected step "
            f"{plan.expected_step_us:,.1f} us vs {floor}{plan.all_eager_expected_step_us:,.1f} us all-eager "
            f"({floor}{plan.speedup_vs_all_eager:.2f}x{EAGER_FLOOR_TEXT if plan.eager_floor else ''}); {cmp} the "
            f"best server default "
            f"({_SERVER_LABEL.get(best.name, best.name)}, {best.score.n_graphs} graphs"
            f"{'' if best.within_budget else ': over the budget'}).{tied_eager_text(plan)}")


#: After a figure read from eager costs that are a floor (:attr:`Plan.eager_floor`).
EAGER_FLOOR_TEXT = (": eager estimated at a floor for model code (a bare launch's host cost per kernel, at least the "
                    "graph step plus the GPU's gap per kernel)")
#: After a crossover read from such costs (not on a tie: :attr:`Plan.crossover_on_tie` says that one).
CROSSOVER_FLOOR_TEXT = ("by an eager estimate that is a floor (a bare launch's host cost per kernel, at least the "
                        "graph step plus the GPU's gap per kernel): graphs may win further up")


def tied_eager_text(plan: Plan) -> str:
    """A sentence (with a leading space) on the sizes a plan leaves eager only on an estimated tie
    (:attr:`Plan.eager_tied_batch_sizes`), else ""."""
    tied = plan.eager_tied_batch_sizes
    if not tied or not plan.buckets:
        return ""
    return (f" bs {_list(tied, 8)} stay eager on an estimated tie (eager cost at its floor): measure eager steps "
            f"before leaving them uncaptured.")


def cost_band_text(band: Mapping) -> str:
    """A plan's ``cost_band`` in one line: the expected step at the model band's ends and what that does to the
    list (see :attr:`launchgap.planning.planner.Plan.cost_band`)."""
    r = band["regret_fraction"]
    held = ("at either end this list is as good as the one planned there" if r < 5e-5 else
            f"at either end this list is within {r:.2%} of the one planned there")
    return (f"expected step {band['expected_step_us_low']:,.1f} to {band['expected_step_us_high']:,.1f} us with the "
            f"graph costs at the batch-scaling model's band ({band['sizes_with_band']} sizes); {held}")


def seconds_text(s: float | None) -> str:
    """Seconds for people: one decimal from 1 s up, two significant digits below (a few graphs capture
    in hundredths of a second); "-" when unknown."""
    if s is None:
        return "-"
    return f"{s:,.1f}" if s >= 1 or s == 0 else f"{s:.2g}"



def _memory_fact(plan: Plan) -> str:
    """Predicted graph memory, start-up and KV-cache tokens lost, and where the figures come from."""
    lc = plan.list_cost
    out = f"{plan.memory_used_mib:,.1f} MiB"
    if plan.capture_s is not None:
        out += f", capture {seconds_text(plan.capture_s)} s"
    if plan.kv_tokens_lost is not None:
        out += f", {plan.kv_tokens_lost:,} KV-cache tokens at {plan.kv_bytes_per_token:,.0f} bytes per token"
    if lc.pool_mib_per_row > 0 or lc.fixed_mib > 0:
        out += (f" ({lc.fixed_mib:,.1f} MiB + {lc.pool_mib_per_row:.3g} MiB per row of the largest size + "
                f"{lc.per_size_mib:.3g} MiB per size; {lc.source})")
    else:
        out += f" ({lc.source})"
    return out


def memory_basis(plan: Plan) -> str:
    """One sentence: the plan's graph memory and capture time and how each is reckoned (its basis), or
    why the capture time is unknown."""
    lc = plan.list_cost
    k = len(plan.buckets)
    if k == 0:
        return "No graph captured: no graph memory, no capture time."
    if lc.pool_mib_per_row > 0 or lc.fixed_mib > 0:
        mem = (f"Graph memory {plan.memory_used_mib:,.0f} MiB = {lc.fixed_mib:,.1f} MiB per list + "
               f"{lc.pool_mib_per_row:.3g} MiB per row x {max(plan.buckets)} rows of the largest size + "
               f"{lc.per_size_mib:.3g} MiB per size x {k} sizes ({lc.source})")
    else:
        mem = (f"Graph memory {plan.memory_used_mib:,.0f} MiB = {lc.per_size_mib:.3g} MiB per graph x {k} graphs "
               f"({lc.source})")
    if plan.capture_s is not None and lc.fixed_s is not None and lc.per_size_s is not None:
        nodes = plan.sources.get("graph_nodes")
        cap = (f"capture time {seconds_text(plan.capture_s)} s = {lc.fixed_s:.3g} s per list + {lc.per_size_s:.3g} s per "
               f"size x {k} sizes (the memory model's capture-time part"
               + (f"; kernel nodes per graph from {nodes})" if nodes else ")"))
    else:
        cap = ("capture time unknown: the capture-time model needs the model's dimensions (a config.json, or "
               "harness timings with a 'models' section) or the kernels per step of traces or timings")
    return f"{mem}; {cap}."


def _pareto_lines(plan: Plan, markdown: bool) -> list[str]:
    """The trade-off table: bucket sets no other beats on step, memory and capture time at once."""
    if len(plan.pareto) < 2:
        return []
    title = "Trade-off: expected step, graph memory, capture time (Pareto)"
    rows = [[str(p.graphs), f"{p.expected_step_us:,.1f}", f"{p.memory_mib:,.1f}", seconds_text(p.capture_s),
             "yes" if p.within_budget else "no", _list(p.buckets, 10)] for p in plan.pareto]
    return ["", f"## {title}" if markdown else title] + table(
        ["graphs", "expected_us", "memory_mib", "capture_s", "in budget", "buckets"], rows, markdown, indent="  ")


#: A plan's text lists at most this many of its traces' notes (the JSON's ``trace_notes`` holds them all) ...
TRACE_NOTES_SHOWN = 20
#: ... and names at most this many of the traces that said each.
TRACE_NAMES_SHOWN = 3


def _counted(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def trace_note_line(note: TraceNote) -> str:
    """One of a plan's trace notes for people, the traces that said it counted and named:
    ``warning (2 traces: a.json, b.json): <text>``."""
    names = ", ".join(note.traces[:TRACE_NAMES_SHOWN])
    more = len(note.traces) - TRACE_NAMES_SHOWN
    return (f"{note.kind} ({_counted(len(note.traces), 'trace')}: {names}{f' and {more} more' if more > 0 else ''}):"
            f" {note.text}")


def trace_notes_title(notes: Sequence[TraceNote]) -> str:
    """The heading over a plan's trace notes, with how many warnings and notes there are."""
    w = sum(n.kind == "warning" for n in notes)
    counts = [_counted(n, word) for n, word in ((w, "warning"), (len(notes) - w, "note")) if n]
    return f"What the traces' analyses warned about and noted ({', '.join(counts)})"


def trace_notes_lines(notes: Sequence[TraceNote], markdown: bool = False) -> list[str]:
    """A plan's trace notes (:attr:`Plan.trace_notes`, or a fleet workload's that has no plan) under their
    heading, warnings first, at most :data:`TRACE_NOTES_SHOWN`; empty when the analyses said nothing."""
    if not notes:
        return []
    shown = notes[:TRACE_NOTES_SHOWN]
    lines = ["", f"## {trace_notes_title(notes)}" if markdown else trace_notes_title(notes)]
    lines += [("- " if markdown else "  ") + trace_note_line(n) for n in shown]
    if len(notes) > len(shown):
        lines.append(f"{'- ' if markdown else '  '}... {len(notes) - len(shown)} more (use --format json for all)")
    return lines


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
                       + (" (where the eager estimate meets its floor, the graph step: no eager step measured)"
                          if plan.crossover_on_tie else
                          f" {CROSSOVER_FLOOR_TEXT}; measure an eager step to place it" if plan.eager_floor else "")
                       if plan.crossover_batch_size is not None else
                       (f"none: graphs win at least {o.win_threshold:.0%} up to the largest size with costs "
                        f"({plan.costs.max_batch_size})" if o.max_batch_size is None or
                        o.max_batch_size >= plan.costs.max_batch_size else
                        f"none: graphs win at least {o.win_threshold:.0%} up to the largest batch "
                        f"({o.max_batch_size})"))),
        ("within 1% of this", f"{len(plan.buckets_within_1pct)} graphs {_list(plan.buckets_within_1pct, 16)}"),
    ]
    x = plan.extrapolation
    if x is not None:
        if x["expected_step_us_low"] == x["expected_step_us_high"]:  # only the default lists' buckets reach there
            said = ("the plan's expected step does not depend on them (only the server lists' buckets above the "
                    "largest batch reach there)")
        else:
            said = (f"expected step {x['expected_step_us_low']:,.1f} to {x['expected_step_us_high']:,.1f} us if costs "
                    f"grow {x['band_factors'][0]:g}x to {x['band_factors'][1]:g}x as fast as fitted")
        facts.append(("above the costs", f"bs {_list(x['batch_sizes'], 8)} extrapolated from bs {x['top_batch_size']}: "
                                         f"{said}"))
    if plan.cost_band is not None:
        facts.append(("cost band", cost_band_text(plan.cost_band)))
    if markdown:
        lines += table(["", ""], [[k, v] for k, v in facts], True, indent="  ")
    else:
        w = max(len(k) for k, _ in facts)
        lines += [f"  {k:<{w}}  {v}" for k, v in facts]
    lines += trace_notes_lines(plan.trace_notes, markdown)
    lines += ["", f"{h}Against the servers' default lists" if markdown else "Against the servers' default lists"]
    rows = [["this plan", str(plan.score.n_graphs), f"{plan.expected_step_us:,.1f}", "-",
             f"{plan.score.padding_waste_us:,.1f}", f"{plan.memory_used_mib:,.1f}", seconds_text(plan.capture_s)]]
    rows.append(["all eager", "0", f"{plan.all_eager_expected_step_us:,.1f}",
                 f"{1 - plan.expected_step_us / plan.all_eager_expected_step_us:+.1%}", "0.0", "0.0", "0.0"])
    for name, b in plan.baselines.items():
        saving = 1 - plan.expected_step_us / b.score.expected_step_us
        label = f"{_SERVER_LABEL[name]} default" if name in SERVERS else BASELINE_LABELS.get(name, name)
        rows.append([label + ("" if b.within_budget else " (over budget)"),
                     str(b.score.n_graphs), f"{b.score.expected_step_us:,.1f}", f"{saving:+.1%}",
                     f"{b.score.padding_waste_us:,.1f}", f"{b.memory_mib:,.1f}", seconds_text(b.capture_s)])
    lines += table(["buckets", "graphs", "expected_us", "plan saves", "pad_waste_us", "memory_mib", "capture_s"],
                    rows, markdown, indent="  ")
    versions = [f"{_SERVER_LABEL.get(n, n)} {b.version}" for n, b in plan.baselines.items() if b.version]
    if versions:
        lines.append("  default lists as of: " + "; ".join(versions))
    lines += _pareto_lines(plan, markdown)
    lines += ["", f"{h}Per batch size" if markdown else "Per batch size"]
    shown = sorted(plan.per_batch, key=lambda r: -r.weight)[:30]
    shown.sort(key=lambda r: r.batch_size)
    lines += table(["bs", "share", "eager_us", "graph_us", "runs as", "planned_us", "source"],
                    [[str(r.batch_size), f"{r.weight:.1%}", f"{r.eager_us:,.1f}", f"{r.graph_us:,.1f}",
                      f"graph {r.bucket}" if r.bucket is not None else "eager", f"{r.planned_us:,.1f}", r.source]
                     for r in shown], markdown, indent="  ")
    if len(plan.per_batch) > len(shown):
        lines.append(f"  ... {len(plan.per_batch) - len(shown)} rarer sizes (use --format json for all)")
    curve = plan.tradeoff
    if len(curve) > 2:
        lines += ["", f"{h}Best expected step by number of graphs" if markdown else
                  "Best expected step by number of graphs"]
        pick = [c for c in curve if c[0] <= 12 or c == curve[-1]]
        lines.append("  " + ", ".join(f"{k}: {v:,.0f} us" for k, v in pick))
    lines += ["", f"{h}Configs" if markdown else "Configs"]
    if not plan.buckets and plan.eager_equals_graph:
        lines.append(TIE_CONFIG_NOTE)
    snip = plan.config_snippets()
    fence = "```"
    for name in SERVERS:
        lines.append(f"{_SERVER_LABEL[name]}:")
        if markdown:
            lines += [fence + engine(name).SNIPPET_LANGUAGE, snip[name], fence]
        else:
            lines += ["    " + s for s in snip[name].splitlines()]
    notes_all = list(notes or []) + list(plan.warnings)
    if notes_all:
        lines.append("")
        lines += [f"{'- ' if markdown else 'note: '}{n}" for n in notes_all]
    return "\n".join(lines)
