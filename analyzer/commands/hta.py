"""``launchgap hta TRACE...``: Holistic Trace Analysis's breakdowns of Kineto traces.

Runs HTA's temporal breakdown, kernel-type breakdown, per-stream idle-time breakdown and
CUDA launch statistics (via :mod:`launchgap.hta_bridge`) and prints them as tables
(:func:`launchgap.render.render_hta`) or JSON (schema ``launchgap.hta/1``). ``--compare`` adds
launchgap's number for each metric, HTA's number with its deviations from launchgap's
definitions switched off, and how much each deviation moves it. Needs the ``hta`` extra:
``pip install 'launchgap[hta]'``.
"""
from __future__ import annotations

import argparse
import json
import sys
from importlib import metadata

from ..errors import AnalyzerError, InputError
from ..hta_bridge import (
    SCHEMA,
    Comparison,
    HtaReport,
    HtaSettings,
    compare_with_hta,
    import_hta,
    run_hta,
)
from ..loaders import expand_paths, sniff_format
from ..render import render_hta

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
        version = _hta_version()
        text = "\n\n".join(render_hta(rep, cmp, version) for rep, cmp in results)
    sys.stdout.write(text + "\n")
    for e in errors:
        print(f"launchgap: error: {e}", file=sys.stderr)
    return 2 if errors else 0
