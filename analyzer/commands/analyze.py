"""``launchgap analyze TRACE...``: diagnose traces (text, markdown or JSON)."""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from ._shared import Progress, add_analysis_arguments, analysis_options
from ..errors import AnalyzerError
from ..loaders import expand_paths, load_trace
from ..ranks import JobReport, analyze_job, analyze_with_collectives, group_by_job, group_traces
from ..report import SCHEMA, AnalysisOptions, TraceReport
from ..trace import Trace

NAME = "analyze"
HELP = "diagnose launch gaps in Kineto JSON or Nsight Systems SQLite traces"


def prepare_parser(p: argparse.ArgumentParser) -> None:
    p.add_argument("paths", nargs="+", metavar="TRACE", help="trace files or directories of them")
    p.add_argument("--format", choices=("text", "markdown", "json"), default="text")
    p.add_argument("--output", "-o", help="write the report to this file instead of stdout")
    add_analysis_arguments(p)


def analyze_paths(paths: list[str], opts: AnalysisOptions, max_bytes: int, progress: Progress | None = None,
                  ) -> tuple[list[TraceReport], list[JobReport], list[AnalyzerError]]:
    """Analyse every trace under ``paths``; a bad file is collected as an error, the rest go on.

    Files of one job (same name up to a rank token such as ``_rank0``, or, for names without
    one, the same folder and Kineto ``distributedInfo``) are analysed together
    (:func:`analyzer.ranks.analyze_job`): their reports come back in the job's rank order and
    the job itself in the second list. Every other trace gets its collectives' waits from
    itself alone (:func:`analyzer.ranks.analyze_with_collectives`).
    """
    files = expand_paths(paths)
    reports: list[TraceReport] = []
    jobs: list[JobReport] = []
    errors: list[AnalyzerError] = []
    by_meta: list[Trace] = []  # rank only in distributedInfo: grouped once every file is read
    done = 0

    def load(f: Path) -> Trace | None:
        nonlocal done
        done += 1
        if progress:
            progress.show(f"[{done}/{len(files)}] parsing {f.name} ({f.stat().st_size / 1e6:,.1f} MB)...")
        try:
            return load_trace(f, max_bytes)
        except AnalyzerError as exc:
            if exc.path is None:
                exc.path = str(f)
            errors.append(exc)
        except MemoryError:
            errors.append(AnalyzerError("out of memory while parsing; lower --max-trace-bytes or split the trace",
                                        str(f)))
        return None

    def analyse(group: list[Trace]) -> None:
        try:
            if len(group) > 1:
                job = analyze_job(group, opts)
                jobs.append(job)
                reports.extend(job.reports)
            else:
                reports.append(analyze_with_collectives(group[0], opts))
        except AnalyzerError as exc:
            if exc.path is None:
                exc.path = group[0].path
            errors.append(exc)

    for names in group_by_job(files):  # one job's files in memory at a time
        loaded = [t for t in (load(f) for f in names) if t is not None]
        if len(names) == 1 and loaded and loaded[0].rank is not None and (loaded[0].world_size or 0) > 1:
            by_meta.extend(loaded)
        elif loaded:
            analyse(loaded)
    for group in group_traces(by_meta):
        analyse(group)
    position = {str(f): i for i, f in enumerate(files)}
    reports.sort(key=lambda r: position.get(r.path, len(position)))  # file order, as without grouping
    if progress:
        progress.done()
    return reports, jobs, errors


def report_json(reports: list[TraceReport], errors: list[AnalyzerError],
                jobs: list[JobReport] | None = None) -> dict:
    return {"schema": SCHEMA, "traces": [r.to_dict() for r in reports],
            "jobs": [j.to_dict() for j in jobs or []],
            "errors": [{"path": e.path, "error": e.message} for e in errors]}


def run(args: argparse.Namespace) -> int:
    opts = analysis_options(args)
    reports, jobs, errors = analyze_paths(args.paths, opts, args.max_trace_bytes, Progress())
    if len(errors) == 1 and not reports:
        raise errors[0]
    if args.format == "json":
        text = json.dumps(report_json(reports, errors, jobs), indent=1, allow_nan=False)
    else:
        from ..render import render_job, render_trace

        md = args.format == "markdown"
        sep = "\n\n" + ("---\n\n" if md else "=" * 78 + "\n\n")
        text = sep.join([render_trace(r, markdown=md) for r in reports] + [render_job(j, markdown=md) for j in jobs])
    if args.output:
        Path(args.output).write_text(text + "\n", encoding="utf-8")
    else:
        sys.stdout.write(text + "\n")
    for e in errors:
        print(f"launchgap: error: {e}", file=sys.stderr)
    return 2 if errors else 0
