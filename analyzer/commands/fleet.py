"""``launchgap fleet DIR_OR_GLOB...``: analyse many traces on Dask into one fleet diagnosis and capture plan.

Each trace is summarised by :func:`analyzer.fleet.summarize_trace` on a Dask worker (a local
cluster of ``--workers`` processes, one thread each, or an existing cluster at
``--scheduler``); summaries stream back as they finish, are appended to ``--out`` (JSON
lines, one flushed line per trace) and folded into the report. A rerun with the same
``--out`` skips every trace already there with the same size and mtime.
"""
from __future__ import annotations

import argparse
import glob
import json
import logging
import os
import sys
import time
from dataclasses import asdict
from pathlib import Path

from .. import __version__
from ._shared import add_analysis_arguments, analysis_options
from ..errors import AnalyzerError, InputError
from ..fleet import (
    DEFAULT_TOP, TRACE_SCHEMA, FleetAccumulator, FleetReport, add_records, file_identity, is_done, latest_records,
    read_header, results_header, summarize_trace, worker_version,
)
from ..gaps import CAUSES
from ..loaders import expand_paths

NAME = "fleet"
HELP = "analyse many traces on Dask (local worker processes or a cluster): one fleet diagnosis and capture plan"

_GLOB_CHARS = set("*?[")


def prepare_parser(p: argparse.ArgumentParser) -> None:
    p.add_argument("paths", nargs="*", metavar="DIR_OR_GLOB",
                   help="trace files, directories of them, or quoted glob patterns ('runs/**/*.json.gz'); "
                        "none: report on the results already in --out")
    p.add_argument("--workers", type=int, help="local Dask worker processes (default: one per CPU core)")
    p.add_argument("--scheduler", metavar="ADDRESS",
                   help="use the existing Dask cluster at this scheduler address (tcp://host:8786) instead of "
                        "local workers; its workers must have launchgap installed and see the same paths")
    p.add_argument("--out", metavar="FILE.jsonl",
                   help="append one JSON line per trace here as it finishes; a rerun skips traces already in it")
    p.add_argument("--format", choices=("text", "json"), default="text")
    p.add_argument("--top", type=int, default=DEFAULT_TOP, help="outliers to list (default %(default)s)")
    add_analysis_arguments(p)
    g = p.add_argument_group("capture plan for the fleet")
    g.add_argument("--timings", metavar="FILE", help="harness timings.json (or truth.json): unprofiled costs per batch "
                                                     "size, used instead of the traces' costs")
    g.add_argument("--model", help="which model's rows to use when the timings file holds several")
    g.add_argument("--max-graphs", type=int, help="at most this many CUDA graphs (buckets)")
    g.add_argument("--memory-budget-mib", type=float, help="total graph memory allowed, MiB")
    g.add_argument("--graph-memory-mib", type=float, help="memory per captured graph, MiB")
    g.add_argument("--max-batch-size", type=int, help="no bucket above this batch size")
    g.add_argument("--padding", choices=("pad", "exact"), default="pad",
                   help="pad a batch up to the next captured size (default) or use exact-match graphs only")
    g.add_argument("--win-threshold", type=float, default=0.05,
                   help="the crossover is where the predicted graph win falls under this (default %(default)s)")
    g.add_argument("--workload", metavar="ID", help="the workload (model, device, rank) whose plan is the fleet's "
                                                    "plan; default: one plan per workload")


def _plan_options(args: argparse.Namespace):
    from ..planning.planner import PlanOptions

    return PlanOptions(max_graphs=args.max_graphs, memory_budget_mib=args.memory_budget_mib,
                       graph_memory_mib=args.graph_memory_mib, max_batch_size=args.max_batch_size,
                       padding=args.padding, win_threshold=args.win_threshold)


def expand_inputs(patterns: list[str]) -> list[Path]:
    """Trace files named by files, directories or glob patterns; absolute, each once, in order given."""
    raw: list[str] = []
    for pat in patterns:
        if not Path(pat).exists() and _GLOB_CHARS & set(pat):
            hits = sorted(glob.glob(pat, recursive=True))
            if not hits:
                raise InputError("no files match this pattern", pat)
            raw.extend(hits)
        else:
            raw.append(pat)
    out: list[Path] = []
    seen: set[Path] = set()
    for f in expand_paths(raw):
        a = f.resolve()
        if a not in seen:
            seen.add(a)
            out.append(a)
    return out


class _Progress:
    """Progress on stderr: a live line on a terminal, else a line per tenth done; failures always."""

    def __init__(self, total: int, total_bytes: int) -> None:
        self.total, self.total_bytes = total, total_bytes
        self.done = self.failed = self.bytes = 0
        self.t0 = time.perf_counter()
        self.live = sys.stderr.isatty()
        self._next_tenth = 1

    def line(self) -> str:
        dt = max(time.perf_counter() - self.t0, 1e-9)
        rate = self.done / dt
        eta = (self.total - self.done) / rate if rate > 0 else 0.0
        return (f"fleet: [{self.done}/{self.total}] {self.done / self.total:.0%}  {rate:.2f} traces/s  "
                f"{self.bytes / 1e6 / dt:.1f} MB/s  {self.failed} failed  ETA {eta:.0f}s")

    def update(self, rec: dict, size: int) -> None:
        self.done += 1
        self.bytes += size
        if rec.get("error"):
            self.failed += 1
            self._write(f"fleet: FAILED {rec['path']}: {rec['error']}", final=True)
        if self.live:
            self._write(self.line(), final=False)
        elif self.done * 10 >= self._next_tenth * self.total or self.done == self.total:
            self._next_tenth = self.done * 10 // self.total + 1
            self._write(self.line(), final=True)

    def _write(self, text: str, final: bool) -> None:
        if self.live:
            sys.stderr.write("\r\x1b[K" + text + ("\n" if final else ""))
        else:
            sys.stderr.write(text + "\n")
        sys.stderr.flush()

    def close(self) -> None:
        if self.live:
            sys.stderr.write("\r\x1b[K" + self.line() + "\n")
            sys.stderr.flush()


def _open_results(out: Path, header: dict) -> tuple[dict[str, dict], list[str]]:
    """Existing records of ``out`` (checked against this run's options), creating it with a header if new."""
    if out.is_dir():
        raise InputError("is a directory; --out takes a file name (results.jsonl)", str(out))
    if out.exists() and out.stat().st_size > 0:
        old = read_header(out)
        want = json.loads(json.dumps(header))
        diff = [k for k in ("analysis_options", "max_trace_bytes") if old.get(k) != want[k]]
        if diff:
            raise InputError(f"was written with other {' and '.join(diff)}; rerun with the same options or "
                             f"write to a new --out file", str(out))
        latest, warnings = latest_records(out)
        with open(out, "rb+") as fh:  # an interrupted write can leave the last line without its newline
            fh.seek(-1, os.SEEK_END)
            if fh.read(1) != b"\n":
                fh.write(b"\n")
        return latest, warnings
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(header, separators=(",", ":")) + "\n", encoding="utf-8")
    except OSError as exc:
        raise InputError(f"cannot write the results file: {exc.strerror or exc}", str(out)) from None
    return {}, []


def _dask():
    try:
        from dask.distributed import Client, LocalCluster, as_completed
    except ImportError:
        raise AnalyzerError("the fleet command needs Dask: pip install 'launchgap[fleet]'") from None
    return Client, LocalCluster, as_completed


def local_cluster(n_workers: int):
    """A Dask LocalCluster as the fleet command runs it: ``n_workers`` processes of one thread each.

    One thread per process: the analysis is JSON decoding and numpy under the GIL, so processes,
    not threads, run in parallel. No dashboard, and the scheduler's HTTP endpoint on a free port
    rather than 8787 (which another cluster may hold). Worker logs below CRITICAL are silenced:
    failures reach the user through the results, and shutdown races would print tracebacks.

    Dask's nanny starts workers with ``MALLOC_TRIM_THRESHOLD_=65536``. A fixed threshold also
    turns off glibc's adaptive mmap threshold, so every large array of a parse is mapped and
    unmapped again: measured here, 40-60% more CPU per trace (mostly page-fault system time).
    The local workers start without it (one trace at a time keeps their memory small anyway).
    """
    import dask

    _, LocalCluster, _ = _dask()
    with dask.config.set({"distributed.nanny.pre-spawn-environ.MALLOC_TRIM_THRESHOLD_": None}):
        return LocalCluster(n_workers=n_workers, threads_per_worker=1, processes=True, dashboard_address=None,
                            scheduler_kwargs={"dashboard_address": ":0"}, silence_logs=logging.CRITICAL)


def _connect(args: argparse.Namespace, n_tasks: int):
    """A Dask client (and the local cluster it owns, or None), checked to run launchgap."""
    Client, _, _ = _dask()
    cluster = None
    if args.scheduler:
        try:
            # Connect timeout: Dask's distributed.comm.timeouts.connect (30 s unless configured).
            client = Client(args.scheduler)
        except (OSError, TimeoutError) as exc:
            raise AnalyzerError(f"cannot reach the Dask scheduler at {args.scheduler}: {exc}") from None
    else:
        cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
        cluster = local_cluster(max(1, min(args.workers or cores, n_tasks)))
        client = Client(cluster)
    try:
        versions = client.run(worker_version)
    except Exception as exc:  # noqa: BLE001 - any failure here means the workers cannot run our code
        _shutdown(client, cluster)
        raise AnalyzerError(f"the Dask workers cannot run launchgap ({type(exc).__name__}: {exc}); install "
                            f"launchgap on every worker") from None
    if not versions:
        _shutdown(client, cluster)
        raise AnalyzerError(f"the Dask cluster at {args.scheduler} has no workers")
    odd = sorted(w for w, v in versions.items() if v != __version__)
    if odd:
        print(f"launchgap: warning: {len(odd)} Dask worker(s) run launchgap {versions[odd[0]]}, this client "
              f"{__version__}; their numbers may differ", file=sys.stderr)
    return client, cluster


def _worker_failure(ident: dict, exc: BaseException) -> dict:
    name = type(exc).__name__
    why = ("the worker analysing it died (out of memory?)" if name == "KilledWorker" else f"{name}: {exc}")
    return {"schema": TRACE_SCHEMA, **ident, "error": why, "error_kind": "worker", "elapsed_s": None}


def run_fleet(args: argparse.Namespace) -> FleetReport:
    """Analyse what is not done yet, stream it to ``--out``, and reduce everything asked for."""
    opts = analysis_options(args)
    if args.top < 0:
        raise InputError("--top must be >= 0")
    if args.workers is not None and args.workers < 1:
        raise InputError("--workers must be >= 1")
    if args.workers is not None and args.scheduler:
        raise InputError("--workers sets up local workers; a --scheduler cluster has its own (drop one of the two)")
    plan_opts = _plan_options(args)
    costs = None
    if args.timings:
        from ..planning.inputs import costs_from_timings

        costs = costs_from_timings(args.timings, args.model)
    elif args.model:
        raise InputError("--model selects rows of a timings file; none was given (--timings)")
    if not args.paths and not args.out:
        raise InputError("give trace files, directories or globs, or --out FILE.jsonl to report on earlier results")
    out = Path(args.out) if args.out else None
    acc = FleetAccumulator()
    if out is not None and not args.paths:  # report on the results file as it is
        acc.analysis_options = read_header(out).get("analysis_options")
        latest, warnings = latest_records(out)
        acc.warnings.extend(warnings)
        add_records(acc, out, (e["line"] for e in latest.values()))
        return acc.finish(plan_opts, args.top, costs, args.workload)

    acc.analysis_options = json.loads(json.dumps(asdict(opts)))
    latest: dict[str, dict] = {}
    if out is not None:
        latest, warnings = _open_results(out, results_header(opts, args.max_trace_bytes))
        acc.warnings.extend(warnings)
    files = expand_inputs(args.paths)
    idents = {str(f): file_identity(f) for f in files}
    done = [p for p in idents if is_done(latest.get(p), idents[p])]
    if out is not None:
        add_records(acc, out, (latest[p]["line"] for p in done))
    done_set = set(done)
    # Largest first: the long traces start early instead of trailing at the end of the run.
    pending = sorted((p for p in idents if p not in done_set), key=lambda p: -idents[p]["size_bytes"])
    if done:
        print(f"fleet: {len(done)} of {len(files)} traces already in {out}; analysing {len(pending)}",
              file=sys.stderr)
    if pending:
        _run_pending(args, pending, idents, opts, out, acc)
    return acc.finish(plan_opts, args.top, costs, args.workload)


def _run_pending(args: argparse.Namespace, pending: list[str], idents: dict[str, dict], opts, out: Path | None,
                 acc: FleetAccumulator) -> None:
    _, _, as_completed = _dask()
    try:
        fh = open(out, "a", encoding="utf-8") if out is not None else None
    except OSError as exc:
        raise InputError(f"cannot append to the results file: {exc.strerror or exc}", str(out)) from None
    try:
        client, cluster = _connect(args, len(pending))
    except BaseException:
        if fh is not None:
            fh.close()
        raise
    progress = _Progress(len(pending), sum(idents[p]["size_bytes"] for p in pending))
    try:
        futures = client.map(summarize_trace, pending, options=opts, max_bytes=args.max_trace_bytes, pure=False,
                             key=[f"launchgap-summarize-{i}" for i in range(len(pending))])
        path_of = {f.key: p for f, p in zip(futures, pending)}
        for fut in as_completed(futures):
            p = path_of[fut.key]
            if fut.status == "finished":
                rec = fut.result()
                # Identity as the client saw it: that is what a rerun compares against.
                rec.update(size_bytes=idents[p]["size_bytes"], mtime_ns=idents[p]["mtime_ns"])
            else:
                try:
                    exc = fut.exception()
                except Exception as cancelled:  # noqa: BLE001 - a cancelled future raises instead
                    exc = cancelled
                rec = _worker_failure(idents[p], exc)
            fut.release()
            if fh is not None:
                fh.write(json.dumps(rec, separators=(",", ":"), allow_nan=False) + "\n")
                fh.flush()
            acc.add(rec)
            progress.update(rec, idents[p]["size_bytes"])
        progress.close()
    finally:
        if fh is not None:
            fh.close()
        _shutdown(client, cluster)


def _shutdown(client, cluster) -> None:
    """Close the client and the local cluster, best effort.

    Runs in ``finally`` blocks, often during an interruption: an error while closing (a timeout
    on a loaded machine, a worker already gone) must not replace the error being raised, and
    the results already written are complete either way.
    """
    for close in [client.close] + ([cluster.close] if cluster is not None else []):
        try:
            close(timeout=10)
        except Exception:  # noqa: BLE001, S110 - see the docstring
            pass


# --- rendering ---------------------------------------------------------------------------------

def _table(headers: list[str], rows: list[list[object]]) -> list[str]:
    cells = [[str(c) for c in r] for r in rows]
    widths = [max([len(h)] + [len(r[i]) for r in cells]) for i, h in enumerate(headers)]
    fmt = "  ".join(("{:<%d}" if i == 0 else "{:>%d}") % w for i, w in enumerate(widths))
    return ["  " + fmt.format(*headers), "  " + fmt.format(*["-" * w for w in widths])] + \
           ["  " + fmt.format(*r) for r in cells]


def _short_paths(paths: list[str]) -> dict[str, str]:
    """Paths shown relative to their common folder (the fleet's root)."""
    if len(paths) < 2:
        return {p: Path(p).name for p in paths}
    root = os.path.commonpath(paths)
    root = root if Path(root).is_dir() or root != paths[0] else str(Path(root).parent)
    return {p: os.path.relpath(p, root) for p in paths}


def render_fleet(rep: FleetReport) -> str:
    """The fleet report as plain text."""
    lines = [f"Fleet: {rep.traces} traces analysed, {rep.failed} failed, {rep.steps} steps"]
    if rep.modes:
        lines.append("  modes: " + ", ".join(f"{k} {v}" for k, v in sorted(rep.modes.items())) +
                     "; verdicts: " + ", ".join(f"{k} {v}" for k, v in sorted(rep.verdicts.items())))
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
    names = _short_paths([r.path for r in rep.rows] + [e.path for e in rep.errors])
    rank = lambda r: "" if r.rank is None else str(r.rank)  # noqa: E731
    if rep.slowest:
        lines += ["", "Slowest traces against their peers (same workload, mode and main batch size)"]
        lines += _table(["trace", "rank", "mode", "bs", "step us", "vs peers", "verdict"],
                        [[names[r.path], rank(r), r.mode, r.main_batch_size or "?", f"{r.step_us_median:,.1f}",
                          f"{r.step_vs_peers:.2f}x", r.verdict] for r in rep.slowest])
    if rep.most_launch_bound:
        lines += ["", "Most launch-bound traces (GPU idle waiting for the CPU)"]
        lines += _table(["trace", "rank", "mode", "bs", "host idle", "predicted speedup"],
                        [[names[r.path], rank(r), r.mode, r.main_batch_size or "?", f"{r.host_idle_fraction:.1%}",
                          f"{r.predicted_speedup:.2f}x"] for r in rep.most_launch_bound])
    total = sum(rep.batch_histogram.values())
    lines += ["", f"Batch sizes over the fleet ({total} steps with a known size, {rep.unknown_batch_steps} unknown)"]
    if total:
        lines.append("  " + ", ".join(f"{b}: {n} ({n / total:.0%})" for b, n in rep.batch_histogram.items()))
    from ..render import render_plan

    lines += ["", "Capture plan for the fleet"]
    if rep.plan is None:
        lines.append(f"  none: {rep.plan_note}")
    else:
        from ..render import render_plan

        lines += ["  " + ln if ln else ln for ln in render_plan(rep.plan).splitlines()]
    if rep.plan is None and len(rep.workloads) > 1:
        for w in rep.workloads:  # one plan per workload
            label = w.workload.label if w.workload is not None else "unknown workload (no kernel signature)"
            lines += ["", f"Capture plan for workload {w.id}: {label} ({w.traces} traces)"]
            lines += (["  " + ln if ln else ln for ln in render_plan(w.plan).splitlines()] if w.plan is not None
                      else [f"  none: {w.plan_note}"])
    if rep.errors:
        lines += ["", f"Failed traces ({len(rep.errors)})"]
        lines += [f"  {names[e.path]}: {e.error}" for e in rep.errors]
    if rep.warnings:
        lines += [""] + [f"warning: {w}" for w in rep.warnings]
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    rep = run_fleet(args)
    if args.format == "json":
        text = json.dumps(rep.to_dict(), indent=1, allow_nan=False)
    else:
        text = render_fleet(rep)
    sys.stdout.write(text + "\n")
    return 2 if rep.errors else 0
