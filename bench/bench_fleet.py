"""Benchmark of ``launchgap fleet``: throughput of the per-trace map on Dask by worker count.

Not a test (pytest does not collect ``bench_*.py``). Run from the project root::

    .venv/bin/python bench/bench_fleet.py --source traces/h200 --copies 14 --workers 1,2,4,8 --repeats 3

It copies every ``*.json.gz`` of ``--source`` ``--copies`` times into a temporary folder (a
"fleet" of identical servers), then measures:

* serial: :func:`launchgap.fleet.summarize_trace` in a loop in this process (no Dask);
* per worker count ``W`` and per batching (``--batch``: ``auto`` is what the CLI does,
  :func:`launchgap.fleet.plan_batches`; a number forces that many traces per task, ``1`` being
  the CLI before batching): a LocalCluster of ``W`` processes, one thread each (as the CLI
  starts it), warmed up (imports done), then the whole fleet streamed through the CLI's own
  :func:`launchgap.commands.fleet.stream_records` while the client does what the CLI does with
  each record (one flushed JSON line to a file, fold into a
  :class:`~launchgap.fleet.FleetAccumulator`); median wall time of ``--repeats`` runs;
  traces/s, and parallel efficiency ``traces/s(W) / (W * traces/s(1 worker))`` against the
  1-worker run of the same batching;
* the costs a bigger cluster would hit first: CPU seconds per trace of the workers and of this
  process (client + the LocalCluster's scheduler, which share one interpreter), the client's
  time per record, Dask's round trip for a no-op task, the reduce (``finish``), the record
  size, and peak RSS per worker.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import shutil
import statistics
import struct
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from launchgap.commands.fleet import local_cluster, stream_records  # noqa: E402
from launchgap.fleet import FleetAccumulator, file_identity, summarize_trace  # noqa: E402
from launchgap.report import AnalysisOptions  # noqa: E402
from launchgap.loaders import DEFAULT_MAX_TRACE_BYTES  # noqa: E402

DEFAULT_SOURCE = ROOT / "traces" / "h200-1b"


def _json_bytes(path: Path) -> int:
    """Decompressed size of a .gz (its ISIZE trailer; files here are far below 4 GiB), else the file size."""
    with open(path, "rb") as fh:
        if fh.read(2) != b"\x1f\x8b":
            return path.stat().st_size
        fh.seek(-4, os.SEEK_END)
        return struct.unpack("<I", fh.read(4))[0]


def _noop(x: int) -> int:
    return x


def _maxrss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def _fleet(source: Path, copies: int, dst: Path) -> list[Path]:
    files = sorted(source.glob("*.json.gz"))
    if not files:
        sys.exit(f"no *.json.gz traces in {source}")
    out = []
    for c in range(copies):
        d = dst / f"server{c:03d}"
        d.mkdir(parents=True)
        for f in files:
            shutil.copy(f, d / f.name)
            out.append(d / f.name)
    return out


def bench_serial(files: list[Path]) -> dict:
    t, c = time.perf_counter(), time.process_time()
    acc = FleetAccumulator()
    for f in files:
        acc.add(summarize_trace(f))
    return {"wall_s": time.perf_counter() - t, "cpu_s": time.process_time() - c}


def _stream_once(client, files: list[Path], workers: int, batch: int | None, sink: Path) -> dict:
    """One fleet pass as the CLI streams it; wall, CPU of workers and of this process, client time, sizes."""
    pending = sorted((str(f) for f in files), key=lambda p: -os.stat(p).st_size)  # largest first, as the CLI
    idents = {p: file_identity(p) for p in pending}
    acc = FleetAccumulator()
    ingest, sizes, elapsed = 0.0, [], []
    w0 = client.run(time.process_time)
    c0 = time.process_time()
    t0 = time.perf_counter()
    with open(sink, "w", encoding="utf-8") as fh:
        for rec in stream_records(client, pending, idents, AnalysisOptions(), DEFAULT_MAX_TRACE_BYTES, workers,
                                  batch=batch):
            t = time.perf_counter()
            line = json.dumps(rec, separators=(",", ":"), allow_nan=False)
            fh.write(line + "\n")
            fh.flush()
            acc.add(rec)
            ingest += time.perf_counter() - t
            sizes.append(len(line))
            elapsed.append(rec["elapsed_s"])
            if rec["error"]:
                raise SystemExit(f"{rec['path']}: {rec['error']}")
    wall = time.perf_counter() - t0
    c_cpu = time.process_time() - c0
    w1 = client.run(time.process_time)
    t = time.perf_counter()
    acc.finish()
    return {"wall_s": wall, "client_cpu_s": c_cpu, "worker_cpu_s": sum(w1[k] - w0[k] for k in w1),
            "ingest_s": ingest, "finish_s": time.perf_counter() - t, "record_bytes_mean": statistics.mean(sizes),
            "elapsed_s_mean": statistics.mean(elapsed)}


def bench_workers(files: list[Path], workers: int, repeats: int, batches: list[int | None], tmp: Path) -> list[dict]:
    from dask.distributed import Client

    load = os.getloadavg()[0]
    t0 = time.perf_counter()
    cluster = local_cluster(workers)
    client = Client(cluster)
    start_s = time.perf_counter() - t0
    n = len(files)
    out = []
    try:
        # Warm-up: the first task on a worker pays its imports; a long fleet run amortises that.
        t0 = time.perf_counter()
        client.gather(client.map(summarize_trace, [str(files[0])] * workers, pure=False))
        warm_s = time.perf_counter() - t0
        # Background CPU of an idle cluster (heartbeats, event loops), per second of wall time.
        w0, c0, t0 = client.run(time.process_time), time.process_time(), time.perf_counter()
        time.sleep(1.5)
        w1, c1, idle_wall = client.run(time.process_time), time.process_time(), time.perf_counter() - t0
        idle_client = (c1 - c0) / idle_wall
        idle_workers = sum(w1[k] - w0[k] for k in w1) / idle_wall
        rss = client.run(_maxrss_mib)
        env = client.run(_worker_env)
        # Dask's own round trip per task, on no-op tasks.
        n_noop = 1000
        t0 = time.perf_counter()
        client.gather(client.map(_noop, range(n_noop), pure=False))
        noop_ms = (time.perf_counter() - t0) / n_noop * 1e3
        for batch in batches:
            runs = [_stream_once(client, files, workers, batch, tmp / "sink.jsonl") for _ in range(repeats)]
            walls = [r["wall_s"] for r in runs]
            med = lambda k: statistics.median(r[k] for r in runs)  # noqa: E731
            out.append({
                "workers": workers, "batch": "auto" if batch is None else batch, "load_avg_1min": load,
                "start_s": start_s, "warmup_s": warm_s, "walls_s": walls, "wall_s": statistics.median(walls),
                "traces_per_s": n / statistics.median(walls),
                "worker_cpu_s_per_trace": med("worker_cpu_s") / n, "client_cpu_s_per_trace": med("client_cpu_s") / n,
                "client_cpu_s_per_trace_net": statistics.median(
                    (r["client_cpu_s"] - idle_client * r["wall_s"]) / n for r in runs),
                "idle_client_cpu_per_s": idle_client, "idle_workers_cpu_per_s": idle_workers,
                "ingest_s_per_trace": med("ingest_s") / n, "finish_s": med("finish_s"),
                "elapsed_s_per_trace": med("elapsed_s_mean"), "record_bytes_mean": med("record_bytes_mean"),
                "worker_peak_rss_mib": max(rss.values()), "noop_task_ms": noop_ms,
                "worker_env": next(iter(env.values()))})
    finally:
        client.close()
        cluster.close()
    return out


def _worker_env() -> dict:
    """What a worker process runs with: its thread count and the environment that caps native threads."""
    import threading

    return {"threads": threading.active_count(),
            **{k: os.environ.get(k) for k in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS",
                                              "MALLOC_TRIM_THRESHOLD_")}}


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--source", type=Path, default=DEFAULT_SOURCE, help="folder of *.json.gz traces to copy")
    ap.add_argument("--copies", type=int, default=10)
    ap.add_argument("--workers", default="1,2,3", help="comma-separated worker counts")
    ap.add_argument("--batch", default="auto", help="comma-separated traces per task: auto (the CLI's), or N")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--serial-repeats", type=int, help="serial runs (default: --repeats)")
    ap.add_argument("--json", type=Path, help="also write the raw figures here")
    args = ap.parse_args()
    counts = [int(x) for x in args.workers.split(",")]
    batches = [None if x == "auto" else int(x) for x in args.batch.split(",")]
    import dask
    import numpy

    with tempfile.TemporaryDirectory(prefix="launchgap-fleet-bench-") as tmp:
        files = _fleet(args.source, args.copies, Path(tmp) / "fleet")
        disk_mb = sum(f.stat().st_size for f in files) / 1e6
        json_mb = sum(_json_bytes(f) for f in files) / 1e6
        n = len(files)
        cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
        machine = (f"{cores} cores ({_cpu_model()}), Python {platform.python_version()}, numpy {numpy.__version__}, "
                   f"dask {dask.__version__}")
        print(f"fleet: {n} traces ({args.copies} copies of {n // args.copies} from {args.source}), "
              f"{disk_mb:.1f} MB on disk, {json_mb:.1f} MB of JSON; {machine}; "
              f"load average before: {os.getloadavg()[0]:.2f}", flush=True)
        load = os.getloadavg()[0]
        ser = [bench_serial(files) for _ in range(args.serial_repeats or args.repeats)]
        serial = [x["wall_s"] for x in ser]
        s_wall = statistics.median(serial)
        print(f"  serial: walls {', '.join(f'{x:.2f}' for x in serial)} s; CPU "
              f"{statistics.median(x['cpu_s'] for x in ser) / n:.4f} s per trace; load {load:.2f}", flush=True)
        results = {"machine": machine, "traces": n, "disk_mb": disk_mb, "json_mb": json_mb, "serial": ser,
                   "argv": sys.argv[1:], "workers": []}
        for w in counts:
            for r in bench_workers(files, w, args.repeats, batches, Path(tmp)):
                results["workers"].append(r)
                print(f"  {w} workers, batch {r['batch']}: walls {', '.join(f'{x:.3f}' for x in r['walls_s'])} s; "
                      f"load {r['load_avg_1min']:.2f}", flush=True)
        print(f"load average after: {os.getloadavg()[0]:.2f}; a worker after its runs: "
              f"{results['workers'][-1]['worker_env']}\n")
        base = {r["batch"]: r["traces_per_s"] for r in results["workers"] if r["workers"] == 1}
        print(f"| run | wall s (median of {args.repeats}) | traces/s | MB/s JSON | vs serial | efficiency vs 1 worker |")
        print("|---|---:|---:|---:|---:|---:|")
        print(f"| serial (no Dask) | {s_wall:.3f} | {n / s_wall:.1f} | {json_mb / s_wall:.0f} | 1.00x | |")
        for r in results["workers"]:
            b = base.get(r["batch"])
            r["efficiency"] = r["traces_per_s"] / (r["workers"] * b) if b else None
            eff = f"{r['efficiency']:.0%}" if b else ""
            print(f"| Dask, {r['workers']} worker{'s' if r['workers'] > 1 else ''}, batch {r['batch']} | "
                  f"{r['wall_s']:.3f} | {r['traces_per_s']:.1f} | {json_mb / r['wall_s']:.0f} | "
                  f"{s_wall / r['wall_s']:.2f}x | {eff} |")
        print("\n| workers | batch | worker CPU ms per trace | worker wall ms per trace | client+scheduler CPU ms per "
              "trace (net of idle) | client ms per record | idle CPU s/s (client, workers) | start s | no-op task ms "
              "| record KB | worker peak RSS MiB |")
        print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
        for r in results["workers"]:
            print(f"| {r['workers']} | {r['batch']} | {r['worker_cpu_s_per_trace'] * 1e3:.1f} | "
                  f"{r['elapsed_s_per_trace'] * 1e3:.1f} | {r['client_cpu_s_per_trace'] * 1e3:.2f} "
                  f"({r['client_cpu_s_per_trace_net'] * 1e3:.2f}) | {r['ingest_s_per_trace'] * 1e3:.2f} | "
                  f"{r['idle_client_cpu_per_s']:.3f}, {r['idle_workers_cpu_per_s']:.3f} | {r['start_s']:.2f} | "
                  f"{r['noop_task_ms']:.2f} | {r['record_bytes_mean'] / 1e3:.1f} | {r['worker_peak_rss_mib']:.0f} |")
        if args.json:
            args.json.write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
