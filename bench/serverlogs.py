"""Benchmark of the server-log readers: a multi-GB log read in bounded memory (not a test).

    .venv/bin/python bench/serverlogs.py --gb 2 --repeat 3 [--engine sglang|vllm|tensorrt_llm] [--gzip]

Builds (once, cached under ``bench-out/``) a log of about ``--gb`` GB by repeating the lines of the
committed fixture ``traces/serverlogs/<engine>...log.gz`` with their numbers varied, so the mix of
record and other lines is the fixture's. Each run is a fresh process: ``launchgap analyze FILE
--output /dev/null`` (the text report; ``--json``: ``--format json``, whose ``decode.batch`` lists
every line), timed around the process; peak memory is its ``ru_maxrss`` from ``wait4``. MB/s counts
the log's text (1 MB = 1e6 bytes). Medians over ``--repeat`` runs. On a shared small VM other work
moves the wall rate, so the process's CPU seconds (user + system) are reported too: MB per CPU
second is the rate with a core to itself.
"""
from __future__ import annotations

import argparse
import gzip
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
FIXTURES = {"sglang": "sglang-0.5.9-tp2-ceiling.log.gz", "vllm": "vllm-0.22-ceiling.log.gz",
            "tensorrt_llm": "tensorrt_llm-1.0-healthy.log.gz"}


def build(engine: str, gb: float, gz: bool) -> Path:
    out = REPO / "bench-out" / f"serverlog_{engine}_{gb:g}gb.log{'.gz' if gz else ''}"
    if out.exists():
        return out
    out.parent.mkdir(exist_ok=True)
    src = gzip.decompress((REPO / "traces" / "serverlogs" / FIXTURES[engine]).read_bytes())
    target = int(gb * 1e9)
    tmp = out.with_suffix(".part")
    opener = gzip.open if gz else open
    with opener(tmp, "wb") as fh:  # type: ignore[operator]
        written = 0
        k = 0
        while written < target:
            # vary the digits a little each copy so the parser sees new numbers and stamps
            chunk = src.replace(b"#running-req: 3", b"#running-req: " + str(30 + k % 9).encode()) \
                .replace(b"Running: 1", b"Running: " + str(1 + k % 7).encode())
            fh.write(chunk)
            written += len(chunk)
            k += 1
    tmp.rename(out)
    return out


def run_once(path: Path, fmt: str) -> tuple[float, float, float]:
    env = dict(os.environ, PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    t0 = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-m", "launchgap", "analyze", str(path), "--format", fmt,
                             "--output", os.devnull], env=env, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    err = proc.stderr.read().decode() if proc.stderr else ""
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"launchgap failed: {err[-500:]}")
    return wall, usage.ru_maxrss / 1024.0, usage.ru_utime + usage.ru_stime  # MiB (Linux reports KiB), CPU s


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--gb", type=float, default=2.0)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--engine", choices=sorted(FIXTURES), default="sglang")
    ap.add_argument("--gzip", action="store_true", help="the log gzipped (text MB/s counts the uncompressed log)")
    ap.add_argument("--json", action="store_true", help="JSON output (every decode line's batch) instead of text")
    args = ap.parse_args()
    path = build(args.engine, args.gb, args.gzip)
    text_bytes = args.gb * 1e9 if args.gzip else path.stat().st_size
    if args.gzip:
        with gzip.open(path, "rb") as fh:
            text_bytes = sum(len(b) for b in iter(lambda: fh.read(1 << 24), b""))
    walls, peaks, cpus = [], [], []
    for i in range(args.repeat):
        w, m, c = run_once(path, "json" if args.json else "text")
        walls.append(w)
        peaks.append(m)
        cpus.append(c)
        print(f"run {i + 1}: {w:.2f} s wall ({text_bytes / 1e6 / w:,.0f} MB/s), {c:.2f} CPU s "
              f"({text_bytes / 1e6 / c:,.0f} MB per CPU s), peak RSS {m:,.0f} MiB", flush=True)
    w = statistics.median(walls)
    c = statistics.median(cpus)
    print(f"{args.engine} log, {text_bytes / 1e9:.2f} GB of text{' (gzipped)' if args.gzip else ''}, "
          f"{'JSON' if args.json else 'text'} output; "
          f"{platform.node()}, {os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f}: median {w:.2f} s = "
          f"{text_bytes / 1e6 / w:,.0f} MB/s wall, {c:.2f} CPU s = {text_bytes / 1e6 / c:,.0f} MB per CPU second, "
          f"peak RSS median {statistics.median(peaks):,.0f} MiB (of {args.repeat} runs)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
