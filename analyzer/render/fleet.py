"""The fleet report (:class:`~launchgap.fleet.FleetReport`) as plain text."""
from __future__ import annotations

import os
from pathlib import Path

from ..fleet import FleetReport, TraceRow
from ..gaps import CAUSES
from .plan import render_plan, trace_notes_lines
from .table import table
from ..workload import display_names


def _table(headers: list[str], rows: list[list[object]]) -> list[str]:
    return table(headers, rows, False, indent="  ")


def short_paths(paths: list[str]) -> dict[str, str]:
    """Paths shown relative to their common folder (the fleet's root); a lone path by its file name."""
    if len(paths) < 2:
        return {p: Path(p).name for p in paths}
    root = os.path.commonpath(paths)
    root = root if Path(root).is_dir() or root != paths[0] else str(Path(root).parent)
    return {p: os.path.relpath(p, root) for p in paths}


def phases(r: TraceRow) -> str:
    """A trace's steps per phase, e.g. ``9 decode, 1 prefill`` (``-`` when no step says its phase)."""
    known = [(k, n) for k, n in r.steps_by_phase.items() if n and k != "unknown"]
    return ", ".join(f"{n} {k}" for k, n in known) or "-"


def _indented(lines: list[str]) -> list[str]:
    return ["  " + ln if ln else ln for ln in lines]


def _indented_plan(plan, inputs=()) -> list[str]:
    """A plan as ``launchgap plan`` prints it, its notes on which input gave what included, indented."""
    return _indented(render_plan(plan, notes=list(inputs)).splitlines())


def render_fleet(rep: FleetReport) -> str:
    """The fleet report as plain text."""
    lines = [f"Fleet: {rep.traces} traces analysed, {rep.failed} failed, {rep.steps} steps"]
    if rep.modes:
        lines.append("  modes: " + ", ".join(f"{k} {v}" for k, v in sorted(rep.modes.items())) +
                     "; verdicts: " + ", ".join(f"{k} {v}" for k, v in sorted(rep.verdicts.items())))
    if any(rep.phases.get(k) for k in ("decode", "prefill", "mixed")):
        lines.append("  steps by phase: " + ", ".join(f"{k} {n}" for k, n in rep.phases.items() if n)
                     + "; engines: " + ", ".join(f"{k} {n}" for k, n in sorted(rep.engines.items()))
                     + " (batch sizes and the capture plan: decode steps and steps of unknown phase only)")
    lines.append("")
    d = rep.distributions
    rows = [["step, profiled (us)", "step_us", ",.1f"],
            ["step, est. unprofiled (us)", "estimated_unprofiled_step_us", ",.1f"],
            ["GPU idle fraction", "gpu_idle_fraction", ".1%"], ["host-side idle fraction", "host_idle_fraction", ".1%"],
            ["predicted graph speedup (x)", "predicted_speedup", ".2f"]]
    lines.append(f"Across traces (one value per trace: its median step; n = {d['step_us'].count})")
    lines += _table(["metric", "p10", "p50", "p90", "max"],
                    [[label] + [format(getattr(d[k], q), f) for q in ("p10", "p50", "p90", "max")]
                     for label, k, f in rows])
    lines.append("")
    by = ", ".join(f"{c} {rep.idle_fraction_by_cause[c]:.1%}" for c in CAUSES if rep.idle_fraction_by_cause[c] > 0)
    lines.append(f"Fleet GPU idle: {rep.gpu_idle_fraction:.1%} of all step windows" + (f" ({by})" if by else ""))
    names = short_paths([r.path for r in rep.rows] + [e.path for e in rep.errors])
    rank = lambda r: "" if r.rank is None else str(r.rank)  # noqa: E731
    if rep.slowest:
        lines += ["", "Slowest traces against their peers (same workload, mode and main batch size)"]
        lines += _table(["trace", "rank", "mode", "phases", "bs", "step us", "vs peers", "verdict"],
                        [[names[r.path], rank(r), r.mode, phases(r), r.main_batch_size or "?",
                          f"{r.step_us_median:,.1f}", f"{r.step_vs_peers:.2f}x", r.verdict] for r in rep.slowest])
    if rep.most_launch_bound:
        lines += ["", "Most launch-bound traces (GPU idle waiting for the CPU)"]
        lines += _table(["trace", "rank", "mode", "phases", "bs", "host idle", "predicted speedup"],
                        [[names[r.path], rank(r), r.mode, phases(r), r.main_batch_size or "?",
                          f"{r.host_idle_fraction:.1%}", f"{r.predicted_speedup:.2f}x"] for r in rep.most_launch_bound])
    total = sum(rep.batch_histogram.values())
    bench = f"; {rep.benchmark_traces} launchgap record sweep(s) give costs only" if rep.benchmark_traces else ""
    lines += ["", f"Batch sizes over the fleet ({total} steps with a known size, {rep.unknown_batch_steps} unknown{bench})"]
    if total:
        lines.append("  " + ", ".join(f"{b}: {n} ({n / total:.0%})" for b, n in rep.batch_histogram.items()))
    lines += ["", "Capture plan for the fleet"]
    if rep.plan is not None:
        lines += _indented_plan(rep.plan, rep.plan_inputs)
    else:  # no plan: what the traces' analyses said may say why
        lines += [f"  none: {rep.plan_note}"] + (_indented(trace_notes_lines(rep.workloads[0].trace_notes))
                                                 if len(rep.workloads) == 1 else [])
    if rep.plan is None and len(rep.workloads) > 1:
        names = display_names(w.workload for w in rep.workloads)
        for w in rep.workloads:  # one plan per workload
            lines += ["", f"Capture plan for {names[w.id]} ({w.traces} traces; --workload {w.id})"]
            lines += _indented_plan(w.plan, w.inputs) if w.plan is not None else (
                [f"  none: {w.plan_note}"] + _indented(trace_notes_lines(w.trace_notes)))
    if rep.errors:
        lines += ["", f"Failed traces ({len(rep.errors)})"]
        lines += [f"  {names[e.path]}: {e.error}" for e in rep.errors]
    if rep.warnings:
        lines += [""] + [f"warning: {w}" for w in rep.warnings]
    return "\n".join(lines)
