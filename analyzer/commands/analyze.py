"""``launchgap analyze TRACE...``: diagnose traces (text, markdown or JSON)."""
from __future__ import annotations

import argparse
import json
import sys
from dataclasses import replace
from pathlib import Path

from ._shared import Progress, add_analysis_arguments, analysis_options
from ..errors import AnalyzerError, InputError
from ..graph_mode import detect_capture
from ..loaders import expand_paths, load_trace
from ..planning.serverlog import stated_capture
from ..rank_split import split_ranks
from ..ranks import JobReport, analyze_job, analyze_with_collectives, group_by_job, group_traces
from ..report import SCHEMA, AnalysisOptions, TraceReport, with_capture
from ..serverlogs import merge_scrapes, read_server_file, split_inputs
from ..serverlogs.diagnosis import LogDiagnosis, beside_tpot_text, diagnose
from ..trace import Trace

NAME = "analyze"
HELP = ("diagnose launch gaps in Kineto JSON or Nsight Systems SQLite traces, and CUDA-graph use in vLLM / SGLang / "
        "TensorRT-LLM server logs and /metrics scrapes")


def prepare_parser(p: argparse.ArgumentParser) -> None:
    p.add_argument("paths", nargs="+", metavar="FILE", help="trace files, server logs, /metrics scrapes, or directories "
                                                            "of them (recognised by content)")
    p.add_argument("--format", choices=("text", "markdown", "json"), default="text")
    p.add_argument("--output", "-o", help="write the report to this file instead of stdout")
    p.add_argument("--capture", metavar="CAPTURE_TRACE",
                   help="the CUDA-graph capture trace of the same engine run (vLLM capture_torch_profiler_dir, "
                        "SGLang --enable-profile-cuda-graph): names the kernels inside each graph replay")
    add_analysis_arguments(p)


def load_capture(path: str, max_bytes: int) -> Trace:
    """The capture trace given with ``--capture``; anything else is an error naming the file."""
    trace = load_trace(Path(path), max_bytes)
    if detect_capture(trace) is None:
        raise InputError("not a CUDA-graph capture trace (no capture windows, or its launches ran kernels)", path)
    return trace


def analyze_paths(paths: list[str], opts: AnalysisOptions, max_bytes: int, progress: Progress | None = None,
                  capture: Trace | None = None,
                  ) -> tuple[list[TraceReport], list[JobReport], list[AnalyzerError]]:
    """Analyse every trace under ``paths``; a bad file is collected as an error, the rest go on.

    Files of one job (same name up to a rank token such as ``_rank0``, or, for names without
    one, the same folder and Kineto ``distributedInfo``) are analysed together
    (:func:`launchgap.ranks.analyze_job`): their reports come back in the job's rank order and
    the job itself in the second list. A file that holds several ranks (:func:`launchgap.rank_split.split_ranks`)
    is split and analysed as a job of its own (its ranks' paths are the file's with ``#rankN``). Every other trace gets its collectives' waits from
    itself alone (:func:`launchgap.ranks.analyze_with_collectives`). With ``capture`` (a capture
    trace), every execution trace's report gets its ``capture_pairing`` (:func:`launchgap.report.with_capture`).
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

    def paired(got: list[TraceReport], group: list[Trace]) -> list[TraceReport]:
        if capture is None:
            return got
        by_path = {t.path: t for t in group}
        return [with_capture(r, by_path[r.path], capture, opts) if r.path in by_path else r for r in got]

    def analyse(group: list[Trace], split: str | None = None) -> None:
        try:
            if len(group) > 1:
                job = analyze_job(group, opts, split=split)
                jobs.append(job)
                reports.extend(paired(job.reports, group))
            else:
                reports.extend(paired([analyze_with_collectives(group[0], opts)], group))
        except AnalyzerError as exc:
            if exc.path is None:
                exc.path = group[0].path
            errors.append(exc)

    position = {str(f): i for i, f in enumerate(files)}
    for names in group_by_job(files):  # one job's files in memory at a time
        loaded = [t for t in (load(f) for f in names) if t is not None]
        splits = [split_ranks(t) for t in loaded]  # a file holding several ranks (an nsys export of a TP server)
        loaded = [t for t, split in zip(loaded, splits) if split is None]  # the whole file freed before analysing
        for split in filter(None, splits):  # ... is a job of its own
            position.update({p.path: position.get(split.path, len(position)) for p in split.traces})
            analyse(list(split.traces), split.note)
        splits = split = None  # its ranks freed before the next file is read
        if len(names) == 1 and loaded and loaded[0].rank is not None and (loaded[0].world_size or 0) > 1:
            by_meta.extend(loaded)
        elif loaded:
            analyse(loaded)
    for group in group_traces(by_meta):
        analyse(group)
    reports.sort(key=lambda r: position.get(r.path, len(position)))  # file order, as without grouping
    if progress:
        progress.done()
    return reports, jobs, errors


def analyze_server_files(files: list[Path], errors: list[AnalyzerError],
                         found: list[Path] = ()) -> list[LogDiagnosis]:
    """Each server log read and diagnosed, one engine's scrape files as one series; a bad file is
    collected in ``errors``. ``found``: files found in directories, passed over when they hold no
    server record."""
    logs = []
    for f, optional in [(f, False) for f in files] + [(f, True) for f in found]:
        try:
            log = read_server_file(f, optional=optional)
            if log is not None:
                logs.append(log)
        except AnalyzerError as exc:
            if exc.path is None:
                exc.path = str(f)
            errors.append(exc)
    return [diagnose(log) for log in merge_scrapes(logs)]  # one engine's scrape files: one series


def report_json(reports: list[TraceReport], errors: list[AnalyzerError],
                jobs: list[JobReport] | None = None, logs: list[LogDiagnosis] | None = None) -> dict:
    return {"schema": SCHEMA, "traces": [r.to_dict() for r in reports],
            "jobs": [j.to_dict() for j in jobs or []],
            "logs": [d.to_dict() for d in logs or []],
            "errors": [{"path": e.path, "error": e.message} for e in errors]}


def _beside_server(r: TraceReport, logs: list[LogDiagnosis]) -> str:
    """Under a serving engine's trace with a decode TPOT, what a scrape of the same engine given with it says of the
    server's own time per output token (the Diagnosis page says the same)."""
    s = r.summary
    if not (s.engine and s.decode_tpot_ms_before):
        return ""
    said = [beside_tpot_text(d, Path(d.log.path).name, s.decode_tpot_ms_before, s.decode_batch_size)
            for d in logs if d.log.engine == s.engine and d.inter_token is not None]
    return "".join(f"\n\nserver: {x}" for x in said)


def run(args: argparse.Namespace) -> int:
    opts = analysis_options(args)
    capture = load_capture(args.capture, args.max_trace_bytes) if args.capture else None
    server_files, found, trace_paths = split_inputs(args.paths)
    log_errors: list[AnalyzerError] = []
    logs = analyze_server_files(server_files, log_errors, found)
    # a server log states the list its server captured: a trace of its engine is analysed under it (as plan does)
    opts = replace(opts, log_capture=stated_capture(logs))
    if trace_paths:
        reports, jobs, errors = analyze_paths(trace_paths, opts, args.max_trace_bytes, Progress(), capture)
    else:
        reports, jobs, errors = [], [], []
    errors += log_errors
    if len(errors) == 1 and not reports and not logs:
        raise errors[0]
    if args.format == "json":
        text = json.dumps(report_json(reports, errors, jobs, logs), indent=1, allow_nan=False)
    else:
        from ..render import render_job, render_server_log, render_trace

        md = args.format == "markdown"
        sep = "\n\n" + ("---\n\n" if md else "=" * 78 + "\n\n")
        text = sep.join([render_trace(r, markdown=md) + _beside_server(r, logs) for r in reports]
                        + [render_job(j, markdown=md) for j in jobs]
                        + [render_server_log(d, markdown=md) for d in logs])
    if args.output:
        Path(args.output).write_text(text + "\n", encoding="utf-8")
    else:
        sys.stdout.write(text + "\n")
    for e in errors:
        print(f"launchgap: error: {e}", file=sys.stderr)
    return 2 if errors else 0
