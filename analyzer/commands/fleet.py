"""``launchgap fleet DIR_OR_GLOB...``: analyse many traces on Dask into one fleet diagnosis and capture plan.

Each trace is summarised by :func:`launchgap.fleet.summarize_trace` on a Dask worker (a local
cluster of ``--workers`` processes, one thread each, or an existing cluster at
``--scheduler``), small traces several to a task (:func:`launchgap.fleet.plan_batches`);
summaries stream back as their task finishes, are appended to ``--out`` (JSON lines, one
flushed line per trace) and folded into the report. A rerun with the same ``--out`` skips
every trace already there with the same size and mtime.

:func:`run_fleet` takes a :class:`FleetRequest` of plain values; only :func:`fleet_request`
and :func:`run` see the argparse namespace. The text report is :func:`launchgap.render.render_fleet`.
"""
from __future__ import annotations

import argparse
import glob
import json
import logging
import os
import sys
import uuid
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path

from .. import __version__
from ._shared import Progress, add_analysis_arguments, add_plan_flags, analysis_options, request_from_args
from ..errors import AnalyzerError, InputError
from ..fleet import (
    DEFAULT_TOP, TRACE_SCHEMA, FleetAccumulator, FleetReport, add_records, file_identity, is_done, latest_records,
    plan_batches, read_header, results_header, summarize_traces, worker_version,
)
from ..loaders import DEFAULT_MAX_TRACE_BYTES, expand_paths
from ..render import render_fleet
from ..planning.request import PlanRequest
from ..report import AnalysisOptions

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
    add_plan_flags(p)
    add_analysis_arguments(p)


@dataclass(frozen=True)
class FleetRequest:
    """One fleet run, as plain values (the command's flags, checked by :func:`fleet_request`).

    ``paths``: trace files, folders or glob patterns (empty: report on ``out`` as it is);
    ``out``: the JSON-lines results file (None: keep nothing); ``workers``: local worker
    processes (None: one per core) or ``scheduler``: an existing cluster's address;
    ``options``/``max_trace_bytes``: how each trace is analysed; ``top``: outliers listed;
    ``plan``: the capture plan's request (the plan flags as ``launchgap plan`` reads them:
    timings, distribution, model dimensions, memory model, budgets; each workload's traces are
    added to it); ``workload``: the workload whose plan is the fleet's.
    """

    paths: tuple[str, ...] = ()
    out: Path | None = None
    workers: int | None = None
    scheduler: str | None = None
    options: AnalysisOptions = field(default_factory=AnalysisOptions)
    max_trace_bytes: int = DEFAULT_MAX_TRACE_BYTES
    top: int = DEFAULT_TOP
    plan: PlanRequest = field(default_factory=PlanRequest)
    workload: str | None = None


def fleet_request(args: argparse.Namespace) -> FleetRequest:
    """The checked :class:`FleetRequest` of the command's flags (:class:`InputError` naming a bad one)."""
    opts = analysis_options(args)
    if args.top < 0:
        raise InputError("--top must be >= 0")
    if args.workers is not None and args.workers < 1:
        raise InputError("--workers must be >= 1")
    if args.workers is not None and args.scheduler:
        raise InputError("--workers sets up local workers; a --scheduler cluster has its own (drop one of the two)")
    plan = request_from_args(args)
    if not args.paths and not args.out:
        raise InputError("give trace files, directories or globs, or --out FILE.jsonl to report on earlier results")
    return FleetRequest(paths=tuple(args.paths), out=Path(args.out) if args.out else None, workers=args.workers,
                        scheduler=args.scheduler, options=opts, max_trace_bytes=args.max_trace_bytes, top=args.top,
                        plan=plan, workload=args.workload)


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


def _connect(scheduler: str | None, workers: int | None, n_tasks: int):
    """A Dask client, the local cluster it owns (or None) and the number of workers, checked to run launchgap."""
    Client, _, _ = _dask()
    cluster = None
    if scheduler:
        try:
            # Connect timeout: Dask's distributed.comm.timeouts.connect (30 s unless configured).
            client = Client(scheduler)
        except (OSError, TimeoutError) as exc:
            raise AnalyzerError(f"cannot reach the Dask scheduler at {scheduler}: {exc}") from None
    else:
        cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
        cluster = local_cluster(max(1, min(workers or cores, n_tasks)))
        client = Client(cluster)
    try:
        versions = client.run(worker_version)
    except Exception as exc:  # noqa: BLE001 - any failure here means the workers cannot run our code
        _shutdown(client, cluster)
        raise AnalyzerError(f"the Dask workers cannot run launchgap ({type(exc).__name__}: {exc}); install "
                            f"launchgap on every worker") from None
    if not versions:
        _shutdown(client, cluster)
        raise AnalyzerError(f"the Dask cluster at {scheduler} has no workers")
    odd = sorted(w for w, v in versions.items() if v != __version__)
    if odd:
        print(f"launchgap: warning: {len(odd)} Dask worker(s) run launchgap {versions[odd[0]]}, this client "
              f"{__version__}; their numbers may differ", file=sys.stderr)
    return client, cluster, len(versions)


def _worker_failure(ident: dict, exc: BaseException) -> dict:
    name = type(exc).__name__
    why = ("the worker analysing it died (out of memory?)" if name == "KilledWorker" else f"{name}: {exc}")
    return {"schema": TRACE_SCHEMA, **ident, "error": why, "error_kind": "worker", "elapsed_s": None}


def run_fleet(req: FleetRequest) -> FleetReport:
    """Analyse what is not done yet, stream it to ``req.out``, and reduce everything asked for."""
    out = req.out
    acc = FleetAccumulator()
    if out is not None and not req.paths:  # report on the results file as it is
        acc.analysis_options = read_header(out).get("analysis_options")
        latest, warnings = latest_records(out)
        acc.warnings.extend(warnings)
        add_records(acc, out, (e["line"] for e in latest.values()))
        return acc.finish(req.plan, req.top, req.workload)

    acc.analysis_options = json.loads(json.dumps(asdict(req.options)))
    latest: dict[str, dict] = {}
    if out is not None:
        latest, warnings = _open_results(out, results_header(req.options, req.max_trace_bytes))
        acc.warnings.extend(warnings)
    files = expand_inputs(list(req.paths))
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
        _run_pending(req, pending, idents, acc)
    return acc.finish(req.plan, req.top, req.workload)


def stream_records(client, pending: list[str], idents: dict[str, dict], options: AnalysisOptions,
                   max_bytes: int, workers: int, batch: int | None = None) -> Iterator[dict]:
    """Each pending trace's summary record, as the Dask task that holds it finishes.

    Traces go to tasks in batches (:func:`launchgap.fleet.plan_batches` for ``workers``
    workers; ``batch`` forces that many per task). Records carry the identity the client saw
    (what a rerun compares against). A task that fails as a whole (its worker died) gives
    each of its traces a ``worker`` failure record, which a rerun retries.
    """
    _, _, as_completed = _dask()
    if batch is None:
        batches = plan_batches([idents[p]["size_bytes"] for p in pending], workers)
    else:
        batches = [list(range(i, min(i + batch, len(pending)))) for i in range(0, len(pending), batch)]
    run_id = uuid.uuid4().hex[:8]  # task keys unique on a shared scheduler
    futures = client.map(summarize_traces, [[pending[i] for i in b] for b in batches], options=options,
                         max_bytes=max_bytes, pure=False,
                         key=[f"launchgap-summarize-{run_id}-{i}" for i in range(len(batches))])
    members = {f.key: [pending[i] for i in b] for f, b in zip(futures, batches)}
    for fut in as_completed(futures):
        paths = members.pop(fut.key)
        if fut.status == "finished":
            recs = fut.result()
            for p, rec in zip(paths, recs):  # one per trace of the batch
                rec.update(size_bytes=idents[p]["size_bytes"], mtime_ns=idents[p]["mtime_ns"])
        else:
            try:
                exc = fut.exception()
            except Exception as cancelled:  # noqa: BLE001 - a cancelled future raises instead
                exc = cancelled
            recs = [_worker_failure(idents[p], exc) for p in paths]
        fut.release()
        yield from recs


def _run_pending(req: FleetRequest, pending: list[str], idents: dict[str, dict], acc: FleetAccumulator) -> None:
    out = req.out
    try:
        fh = open(out, "a", encoding="utf-8") if out is not None else None
    except OSError as exc:
        raise InputError(f"cannot append to the results file: {exc.strerror or exc}", str(out)) from None
    try:
        client, cluster, workers = _connect(req.scheduler, req.workers, len(pending))
    except BaseException:
        if fh is not None:
            fh.close()
        raise
    progress = Progress(len(pending), sum(idents[p]["size_bytes"] for p in pending), label="fleet")
    try:
        for rec in stream_records(client, pending, idents, req.options, req.max_trace_bytes, workers):
            if fh is not None:
                fh.write(json.dumps(rec, separators=(",", ":"), allow_nan=False) + "\n")
                fh.flush()
            acc.add(rec)
            progress.advance(idents[rec["path"]]["size_bytes"], f"{rec['path']}: {rec['error']}" if rec.get("error")
                             else None)
        progress.done()
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


def run(args: argparse.Namespace) -> int:
    rep = run_fleet(fleet_request(args))
    if args.format == "json":
        text = json.dumps(rep.to_dict(), indent=1, allow_nan=False)
    else:
        text = render_fleet(rep)
    sys.stdout.write(text + "\n")
    return 2 if rep.errors else 0
