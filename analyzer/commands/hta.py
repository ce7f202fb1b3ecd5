"""``launchgap hta TRACE...``: Holistic Trace Analysis's breakdowns of Kineto traces.

Runs HTA's temporal breakdown, kernel-type breakdown, per-stream idle-time breakdown and
CUDA launch statistics (via :mod:`analyzer.hta_bridge`) and prints them as tables or JSON
(schema ``launchgap.hta/1``). ``--compare`` adds launchgap's number for each metric, HTA's
number with its deviations from launchgap's definitions switched off, and how much each
deviation moves it. Needs the ``hta`` extra: ``pip install 'launchgap[hta]'``.
"""
from __future__ import annotations

import argparse
import json
import sys
from importlib import metadata

from ..errors import AnalyzerError, InputError
from ..hta_bridge import (
    KERNEL_WAIT_THRESHOLD_US,
    SCHEMA,
    Comparison,
    HtaReport,
    HtaSettings,
    compare_with_hta,
    import_hta,
    run_hta,
)
from ..loaders import expand_paths, sniff_format

NAME = "hta"
HELP = ("run Holistic Trace Analysis (HTA) breakdowns on Kineto traces; --compare lines them up with "
        "launchgap's numbers (needs pip install 'launchgap[hta]')")


def prepare_parser(p: argparse.ArgumentParser) -> None:
    p.add_argument("paths", nargs="+", metavar="TRACE", help="Kineto trace files (.json, .json.gz) or directories")
    p.add_argument("--format", choices=("text", "json"), default="text")
    p.add_argument("--compare", action="store_true",
                   help="also compute launchgap's number for each metric and HTA's with its deviations switched "
                        "off (runs HTA's analyses several times: slower)")
    p.add_argument("--include-last-profiler-step", action="store_true",
                   help="keep the GPU work of the last ProfilerStep, which HTA drops by default")
    p.add_argument("--no-round", action="store_true",
                   help="keep HTA from rounding times to whole microseconds (HTA_DISABLE_NS_ROUNDING=1); its rounding "
                        "gives sub-microsecond kernels zero or negative durations")


def _hta_version() -> str:
    try:
        return metadata.version("HolisticTraceAnalysis")
    except metadata.PackageNotFoundError:
        return "unknown"


def run(args: argparse.Namespace) -> int:
    import_hta()  # one clear message when the extra is missing, before touching any file
    settings = HtaSettings(round_to_us=not args.no_round,
                           step_filter="keep-last-step" if args.include_last_profiler_step else "drop-last-step")
    results: list[tuple[HtaReport, Comparison | None]] = []
    errors: list[AnalyzerError] = []
    for f in expand_paths(args.paths):
        try:
            if sniff_format(f) != "kineto":
                raise InputError("HTA reads Kineto JSON traces only (.json, .json.gz)", str(f))
            cmp = compare_with_hta(f) if args.compare else None
            rep = cmp.hta if cmp is not None and settings == HtaSettings() else run_hta(f, settings)
            results.append((rep, cmp))
        except AnalyzerError as exc:
            if exc.path is None:
                exc.path = str(f)
            errors.append(exc)
    if len(errors) == 1 and not results:
        raise errors[0]
    if args.format == "json":
        doc = {
            "schema": SCHEMA,
            "hta_version": _hta_version(),
            "traces": [{**rep.to_dict(), "comparison": cmp.to_dict() if cmp else None} for rep, cmp in results],
            "errors": [{"path": e.path, "error": e.message} for e in errors],
        }
        text = json.dumps(doc, indent=1, allow_nan=False)
    else:
        text = "\n\n".join(render_text(rep, cmp) for rep, cmp in results)
    sys.stdout.write(text + "\n")
    for e in errors:
        print(f"launchgap: error: {e}", file=sys.stderr)
    return 2 if errors else 0


def _num(x: float | None, digits: int = 1) -> str:
    return "-" if x is None else f"{x:,.{digits}f}"


def _settings_text(s: HtaSettings) -> str:
    parts = ["times rounded to whole us" if s.round_to_us else "times not rounded"]
    parts.append({"drop-last-step": "last ProfilerStep dropped", "keep-last-step": "last ProfilerStep kept",
                  "off": "no step filter"}[s.step_filter])
    return ", ".join(parts)


def render_text(rep: HtaReport, cmp: Comparison | None = None) -> str:
    """The HTA report (and comparison) of one trace as plain-text tables."""
    lines = [f"== {rep.path}", f"HTA {_hta_version()} ({_settings_text(rep.settings)}): "
                               f"{rep.kernels:,} kernels, {rep.gpu_ops:,} GPU ops kept"]
    t = rep.temporal
    if t is not None:
        share = (lambda v: f" ({100 * v / t.window_us:.1f}%)") if t.window_us > 0 else (lambda v: "")
        lines += ["", "Temporal breakdown (us)",
                  f"  window {_num(t.window_us)}   busy {_num(t.busy_us)}{share(t.busy_us)}   "
                  f"idle {_num(t.idle_us)}{share(t.idle_us)}   compute {_num(t.compute_us)}   "
                  f"non-compute {_num(t.non_compute_us)}"]
    if rep.kernel_types:
        lines += ["", "Kernel types", f"  {'type':<58} {'time_us':>14} {'share':>7}"]
        lines += [f"  {k.kernel_type:<58} {_num(k.time_us):>14} {k.percent:>6.1f}%" for k in rep.kernel_types]
    if rep.streams:
        lines += ["", f"Idle time per stream (us; kernel wait: intervals under {KERNEL_WAIT_THRESHOLD_US:g} us)",
                  f"  {'stream':>8} {'host_wait':>14} {'kernel_wait':>14} {'other':>14}"]
        lines += [f"  {s.stream:>8} {_num(s.host_wait_us):>14} {_num(s.kernel_wait_us):>14} {_num(s.other_us):>14}"
                  for s in rep.streams]
    if rep.launch is not None:
        la = rep.launch
        lines += ["", f"Launches (cudaLaunchKernel/ExC): {la.launches:,}; launch call mean {_num(la.cpu_us_mean, 2)} us;"
                      f" launch delay (op start - call end, >= 0) mean {_num(la.launch_delay_us_mean, 2)} us, "
                      f"p50 {_num(la.launch_delay_us_p50, 2)}, p90 {_num(la.launch_delay_us_p90, 2)}, "
                      f"max {_num(la.launch_delay_us_max, 2)}"]
    for name, err in rep.failures.items():
        lines.append(f"HTA failed in its {name} analysis: {err}")
    if cmp is not None:
        lines += ["", "launchgap vs HTA (aligned: HTA with rounding, step filter, stream events and "
                      "event-#0 launch times switched off)",
                  f"  {'metric':<34} {'launchgap':>14} {'HTA':>14} {'HTA aligned':>14}  {'agree':<5}  why they differ"]
        for r in cmp.rows:
            why = [f"{k} {v:+,.3f}" if v is not None else f"{k} (HTA failed)" for k, v in r.deltas.items()]
            why += [f"{k} {v:+,.3f}" for k, v in r.adjustments.items()]
            verdict = "yes" if r.agree else ("no" if r.aligned_agree else "NO*")
            lines.append(f"  {r.metric:<34} {_num(r.ours, 3):>14} {_num(r.hta, 3):>14} {_num(r.hta_aligned, 3):>14}"
                         f"  {verdict:<5}  {'; '.join(why)}")
        if any(not r.aligned_agree for r in cmp.rows):
            lines.append("  NO*: differs even with HTA's deviations off; see the notes in --format json")
    return "\n".join(lines)
