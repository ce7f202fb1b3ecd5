"""Benchmark of ``launchgap fleet``: throughput of the per-trace map on Dask by worker count.

Not a test (pytest does not collect ``bench_*.py``). Run from the project root::

    .venv/bin/python tests/perf/bench_fleet.py --copies 10 --workers 1,2,3 --repeats 3

It copies every trace of ``traces/h200-1b`` ``--copies`` times into a temporary
folder (a "fleet" of identical servers), then measures:

* serial: :func:`analyzer.fleet.summarize_trace` in a loop in this process (no Dask);
* per worker count ``W``: a LocalCluster of ``W`` processes, one thread each (as the CLI
  starts it), warmed up (imports done), then the whole fleet mapped with ``client.map`` and
  collected with ``as_completed`` while the client does what the CLI does with each result
  (encode one JSON line, fold it into a :class:`~analyzer.fleet.FleetAccumulator`); median wall
  time of ``--repeats`` runs; traces/s, MB/s of files on disk and of decompressed JSON;
* the costs a bigger cluster would hit first: the client's time per result, Dask's round trip
  for a no-op task, the reduce (``finish``), the summary size, and peak RSS per worker.
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import struct
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from launchgap.commands.fleet import local_cluster  # noqa: E402
from launchgap.fleet import FleetAccumulator, summarize_trace  # noqa: E402

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


def _timed(path: str) -> dict:
    """summarize_trace plus the worker's CPU seconds for it (CPU time does not grow when the box is shared)."""
    t = time.process_time()
    rec = summarize_trace(path)
    rec["cpu_s"] = time.process_time() - t
    return rec


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


def _ingest(rec: dict, acc: FleetAccumulator) -> float:
    """What the CLI does with one result on the client; returns its seconds."""
    t = time.perf_counter()
    json.dumps(rec, separators=(",", ":"), allow_nan=False)
    acc.add(rec)
    return time.perf_counter() - t


def bench_serial(files: list[Path]) -> dict:
    t, c = time.perf_counter(), time.process_time()
    acc = FleetAccumulator()
    for f in files:
        acc.add(summarize_trace(f))
    return {"wall_s": time.perf_counter() - t, "cpu_s": time.process_time() - c}


def bench_workers(files: list[Path], workers: int, repeats: int) -> dict:
    from dask.distributed import Client, as_completed

    load = os.getloadavg()[0]
    t0 = time.perf_counter()
    cluster = local_cluster(workers)
    client = Client(cluster)
    start_s = time.perf_counter() - t0
    try:
        # Warm-up: the first task on a worker pays its imports; a long fleet run amortises that.
        t0 = time.perf_counter()
        client.gather(client.map(summarize_trace, [str(files[0])] * workers, pure=False))
        warm_s = time.perf_counter() - t0
        # Background CPU of an idle cluster (heartbeats, event loops), per second of wall time:
        # subtracted below so that what remains is the cost per task.
        w0, c0, t0 = client.run(time.process_time), time.process_time(), time.perf_counter()
        time.sleep(3.0)
        w1, c1, idle_wall = client.run(time.process_time), time.process_time(), time.perf_counter() - t0
        idle_client = (c1 - c0) / idle_wall
        idle_workers = sum(w1[k] - w0[k] for k in w1) / idle_wall
        walls, ingest, sizes, cpu, elapsed, w_cpu, c_cpu = [], [], [], [], [], [], []
        for _ in range(repeats):
            acc = FleetAccumulator()
            w0 = client.run(time.process_time)
            c0 = time.process_time()
            t0 = time.perf_counter()
            futs = client.map(_timed, [str(f) for f in files], pure=False)
            ing = 0.0
            for fut in as_completed(futs):
                rec = fut.result()
                fut.release()
                ing += _ingest(rec, acc)
                cpu.append(rec.pop("cpu_s"))
                elapsed.append(rec["elapsed_s"])
                sizes.append(len(json.dumps(rec, separators=(",", ":"))))
                if rec["error"]:
                    raise SystemExit(f"{rec['path']}: {rec['error']}")
            walls.append(time.perf_counter() - t0)
            # CPU seconds do not stretch when other processes share the cores, unlike wall time:
            # all worker processes' CPU, and this process's (client + the LocalCluster's scheduler).
            c_cpu.append(time.process_time() - c0)
            w1 = client.run(time.process_time)
            w_cpu.append(sum(w1[k] - w0[k] for k in w1))
            ingest.append(ing)
            t0 = time.perf_counter()
            acc.finish()
            finish_s = time.perf_counter() - t0
        rss = client.run(_maxrss_mib)
        # Dask's own round trip per task, on no-op tasks.
        n_noop = 2000
        t0 = time.perf_counter()
        client.gather(client.map(_noop, range(n_noop), pure=False))
        noop_ms = (time.perf_counter() - t0) / n_noop * 1e3
    finally:
        client.close()
        cluster.close()
    return {"workers": workers, "load_avg_1min": load, "start_s": start_s, "warmup_s": warm_s, "walls_s": walls,
            "wall_s": statistics.median(walls), "ingest_s_per_trace": statistics.median(ingest) / len(files),
            "finish_s": finish_s, "cpu_s_per_trace": statistics.mean(cpu),
            "worker_cpu_s_per_trace": statistics.median(w_cpu) / len(files),
            "client_cpu_s_per_trace": statistics.median(c_cpu) / len(files),
            "idle_client_cpu_per_s": idle_client, "idle_workers_cpu_per_s": idle_workers,
            "client_cpu_s_per_trace_net": statistics.median(
                (c - idle_client * w) / len(files) for c, w in zip(c_cpu, walls)),
            "elapsed_s_per_trace": statistics.mean(elapsed), "summary_bytes_mean": statistics.mean(sizes),
            "worker_peak_rss_mib": max(rss.values()), "noop_task_ms": noop_ms}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--source", type=Path, default=DEFAULT_SOURCE, help="folder of *.json.gz traces to copy")
    ap.add_argument("--copies", type=int, default=10)
    ap.add_argument("--workers", default="1,2,3", help="comma-separated worker counts")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--json", type=Path, help="also write the raw figures here")
    args = ap.parse_args()
    counts = [int(x) for x in args.workers.split(",")]
    with tempfile.TemporaryDirectory(prefix="launchgap-fleet-bench-") as tmp:
        files = _fleet(args.source, args.copies, Path(tmp))
        disk_mb = sum(f.stat().st_size for f in files) / 1e6
        json_mb = sum(_json_bytes(f) for f in files) / 1e6
        n = len(files)
        print(f"fleet: {n} traces ({args.copies} copies of {n // args.copies} from {args.source}), "
              f"{disk_mb:.1f} MB on disk, {json_mb:.1f} MB of JSON; {os.cpu_count()} CPUs; "
              f"load average before: {os.getloadavg()[0]:.2f}", flush=True)
        load = os.getloadavg()[0]
        ser = [bench_serial(files) for _ in range(args.repeats)]
        serial = [x["wall_s"] for x in ser]
        s_wall = statistics.median(serial)
        print(f"  serial: walls {', '.join(f'{x:.2f}' for x in serial)} s; CPU "
              f"{statistics.median(x['cpu_s'] for x in ser) / n:.3f} s per trace; load {load:.2f}", flush=True)
        rows = [("serial (no Dask)", s_wall, None)]
        results = {"traces": n, "disk_mb": disk_mb, "json_mb": json_mb, "serial": ser, "workers": []}
        for w in counts:
            r = bench_workers(files, w, args.repeats)
            results["workers"].append(r)
            rows.append((f"Dask, {w} worker{'s' if w > 1 else ''}", r["wall_s"], r))
            print(f"  {w} workers: walls {', '.join(f'{x:.2f}' for x in r['walls_s'])} s; "
                  f"load {r['load_avg_1min']:.2f}", flush=True)
        print(f"load average after: {os.getloadavg()[0]:.2f}\n")
        print("| run | wall s (median of %d) | traces/s | MB/s on disk | MB/s JSON | vs serial |" % args.repeats)
        print("|---|---:|---:|---:|---:|---:|")
        for name, wall, _ in rows:
            print(f"| {name} | {wall:.2f} | {n / wall:.1f} | {disk_mb / wall:.1f} | {json_mb / wall:.1f} | "
                  f"{s_wall / wall:.2f}x |")
        print("\n| workers | analysis CPU s per trace | worker process CPU s per trace | client+scheduler CPU ms "
              "per trace (net of idle) | idle cluster CPU s per s (client, workers) | worker wall s per trace |")
        print("|---:|---:|---:|---:|---:|---:|")
        for r in results["workers"]:
            print(f"| {r['workers']} | {r['cpu_s_per_trace']:.3f} | {r['worker_cpu_s_per_trace']:.3f} | "
                  f"{r['client_cpu_s_per_trace'] * 1e3:.2f} ({r['client_cpu_s_per_trace_net'] * 1e3:.2f}) | "
                  f"{r['idle_client_cpu_per_s']:.3f}, {r['idle_workers_cpu_per_s']:.3f} | "
                  f"{r['elapsed_s_per_trace']:.3f} |")
        print("\n| workers | worker CPU s per trace | worker wall s per trace | cluster start s | warm-up s | "
              "client ms per result | no-op task ms | reduce (finish) s | summary KB | worker peak RSS MiB |")
        print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
        for r in results["workers"]:
            print(f"| {r['workers']} | {r['cpu_s_per_trace']:.3f} | {r['elapsed_s_per_trace']:.3f} "
                  f"| {r['start_s']:.2f} | {r['warmup_s']:.2f} | {r['ingest_s_per_trace'] * 1e3:.2f} "
                  f"| {r['noop_task_ms']:.2f} | {r['finish_s']:.3f} | {r['summary_bytes_mean'] / 1e3:.1f} | "
                  f"{r['worker_peak_rss_mib']:.0f} |")
        if args.json:
            args.json.write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
