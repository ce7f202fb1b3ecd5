"""Fit the profiler's cost per recorded Python call (``with_stack``) on interleaved engine recordings, and score the
unprofiled step estimate on them.

    python bench/python_call_fit.py [FOLDER ...]     # default: traces/h200-vllm-2026-12-04/interleaved/*

Each FOLDER holds ``interleaved.json`` (``bench/vllm_record.py --interleaved``: per block the unprofiled engine steps
just before and after it and the profiled ones) and the block's trace. Per block of a ``with_stack`` trace, over
its steps' cycles (one step's start to the next's: every call the engine made for it, scheduling and sampling
included, as the engine's own step holds them), the implied cost per Python call in units of the trace's host
reference (:func:`launchgap.overhead.host_ref_us`):

    (cycle - truth - stack rate x host_ref x host_events) / (python_calls - 0.25 x host_events) / host_ref

truth being the median of the unprofiled steps around the block; the ``stack`` tier's rate prices the host events
and the calls up to the 0.25 per host event its fit set made (:class:`launchgap.overhead.OverheadTable`). The
printed point is the median over the blocks of the FIT recordings, the range their minimum to maximum (fewer than 9
values: :func:`launchgap.overhead._band`'s rule), to paste into ``DEFAULT_OVERHEAD.python_call``; the others are held
out (recorded after the fit). Every block's estimated unprofiled step (``launchgap analyze``'s, the shipped table)
against its truth, the estimate without Python calls priced (``before``), and the time per output token
(``launchgap analyze``'s ``decode_tpot_ms_before``: an eager engine step's estimate plus the host work between steps,
unprofiled).

Last, the predicted speedup of each eager block (``predicted_speedup``: on the engine's whole step, the time between
steps included) and the steps' own ratio (their GPU windows', the headline before the ``whole step`` rule) against
the truth: the eager block's engine step over the same block's in the FULL-graph run on the same runner (the 3B on
vLLM's V2 runner, batch 16, the same requests: ``full-stack-v2runner``); then the same with the eager engine step
measured (given as a server's inter-token latency is: ``with_observed_step``), over the predicted whole graph step
and over the graph step's window alone.
"""
from __future__ import annotations

import argparse
import json
from dataclasses import replace
import statistics
import sys
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
#: The recordings the shipped rate was fitted on (the others were recorded after it: held out).
FIT = ("eager-stack", "full-stack-v1runner")
#: The FULL-graph recording the eager ones' speedup is scored against: the same model, runner, batch and requests.
GRAPH_TRUTH = "full-stack-v2runner"
sys.path.insert(0, str(REPO))

from launchgap.loaders import load_trace  # noqa: E402
from launchgap.overhead import DEFAULT_OVERHEAD, detect_profiler_settings, python_calls_priced  # noqa: E402
from launchgap.report import AnalysisOptions, analyze_trace, with_observed_step  # noqa: E402
from launchgap.trace import Kind  # noqa: E402


def cycles(trace, report) -> tuple[float, float, float]:
    """Median over the steps but the last: cycle (us), Python calls and host events in it."""
    host = np.sort(trace.start_ns[(trace.kind == Kind.CPU_OP) | (trace.kind == Kind.RUNTIME)])
    calls = trace.python_calls.start_ns
    starts = np.array([round(s.start_us * 1000) for s in report.steps], dtype=np.int64)
    a, b = starts[:-1], starts[1:]

    def count(x: np.ndarray) -> np.ndarray:
        return np.searchsorted(x, b) - np.searchsorted(x, a)

    return float(np.median((b - a) / 1e3)), float(np.median(count(calls))), float(np.median(count(host)))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("folders", nargs="*", type=Path)
    folders = ap.parse_args().folders or sorted((REPO / "traces/h200-vllm-2026-12-04/interleaved").iterdir())
    table = DEFAULT_OVERHEAD
    unpriced = AnalysisOptions()
    unpriced = replace(unpriced, model=replace(unpriced.model, overhead=replace(table, python_call=None)))
    implied: dict[bool, list[float]] = {True: [], False: []}
    scored: dict[str, list[tuple[object, float]]] = {}  # per recording, each block's report and truth
    print(f"{'recording':28s} {'set':8s} {'block':>5s} {'truth us':>9s} {'estimate':>9s} {'error':>7s} "
          f"{'before':>7s} {'TPOT':>7s} {'calls/cycle':>11s} {'implied (x ref)':>15s}")
    for folder in folders:
        rec = json.loads((folder / "interleaved.json").read_text())
        fit = folder.name in FIT
        for i, blk in enumerate(rec["blocks"]):
            trace = load_trace(folder / blk["trace"])
            rep = analyze_trace(trace)
            truth = statistics.median(blk["unprofiled_before_us"] + blk["unprofiled_after_us"])
            scored.setdefault(folder.name, []).append((rep, truth))
            settings = detect_profiler_settings(trace)  # before the row: its set depends on it
            est = rep.summary.estimated_unprofiled_step_us_median
            before = analyze_trace(trace, unpriced).summary.estimated_unprofiled_step_us_median
            kind = "fit" if fit else "held out" if settings.tier.endswith("stack") else "no stack"
            tpot = rep.summary.decode_tpot_ms_before * 1e3
            line = (f"{folder.name:28s} {kind:8s} {i:5d} {truth:9,.0f} {est:9,.0f} "
                    f"{est / truth - 1:+7.1%} {before / truth - 1:+7.1%} {tpot / truth - 1:+7.1%}")
            if settings.tier.endswith("stack"):
                ref = settings.host_ref_us or table.typical_ref_us
                cyc, calls, events = cycles(trace, rep)
                base = table.rate(settings.tier).in_us(ref, table.typical_ref_us)[0] * events
                priced = float(python_calls_priced(calls, events, table.python_calls_per_event))
                implied[fit].append((cyc - truth - base) / priced / ref)
                line += f" {calls:11,.0f} {implied[fit][-1]:15.2f}"
            print(line)
    for fit, values in implied.items():
        if values:
            v = np.array(values)
            print(f"\n{'fit' if fit else 'held out'}: per Python call past {table.python_calls_per_event:g} per host "
                  f"event {np.median(v):.2f}x the host reference (range {v.min():.2f}-{v.max():.2f}) over {v.size} "
                  f"blocks" + (f"; shipped {table.python_call.value:g} ({table.python_call.low:g}-"
                               f"{table.python_call.high:g})" if fit else ""))
    print("(the estimate is the step's GPU window, the truth the engine's whole step: an eager step's host work "
          "between steps is in the truth and in the TPOT, not in the estimate)")
    speedups(scored)
    return 0


def speedups(scored: dict[str, list[tuple[object, float]]]) -> None:
    """Each eager block's predicted speedup (the engine's whole step) and its steps' own (GPU windows) against the
    truth: its engine step over the same block's in :data:`GRAPH_TRUTH`."""
    graph = scored.get(GRAPH_TRUTH)
    eager = {k: v for k, v in scored.items() if v and v[0][0].mode == "eager"}
    if not graph or not eager:
        return
    print(f"\nspeedup of each eager block against its engine step over {GRAPH_TRUTH}'s same block")
    print(f"{'recording':28s} {'block':>5s} {'truth':>7s} {'whole':>7s} {'error':>7s} {'range holds':>11s} "
          f"{'windows':>7s} {'error':>7s} {'measured':>8s} {'error':>7s} {'windows':>7s} {'error':>7s}")
    errs: dict[str, list[float]] = {"whole": [], "windows": [], "measured, whole": [], "measured, windows": []}
    for name, blocks in eager.items():
        for i, ((rep, truth), (_, g_truth)) in enumerate(zip(blocks, graph)):
            s, want = rep.summary, truth / g_truth
            # the engine's step measured (a server's inter-token latency): the whole step, given in place of the estimate
            measured = with_observed_step(rep, truth).summary.predicted_speedup
            got = {"whole": s.predicted_speedup,
                   "windows": s.estimated_unprofiled_step_us_median / s.predicted_graph_step_us_median,
                   "measured, whole": measured, "measured, windows": truth / s.predicted_graph_step_us_median}
            for k, v in got.items():
                errs[k].append(v / want - 1)
            holds = s.predicted_speedup_low <= want <= s.predicted_speedup_high
            print(f"{name:28s} {i:5d} {want:6.2f}x {got['whole']:6.2f}x {errs['whole'][-1]:+7.1%} "
                  f"{'yes' if holds else 'no':>11s} {got['windows']:6.2f}x {errs['windows'][-1]:+7.1%} "
                  f"{got['measured, whole']:7.2f}x {errs['measured, whole'][-1]:+7.1%} "
                  f"{got['measured, windows']:6.2f}x {errs['measured, windows'][-1]:+7.1%}")
    print("median |error|: " + ", ".join(f"{k} {np.median(np.abs(v)):.1%}" for k, v in errs.items()))


if __name__ == "__main__":
    sys.exit(main())
