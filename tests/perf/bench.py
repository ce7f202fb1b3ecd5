"""End-to-end benchmark: ``launchgap analyze`` (and, with ``--vs-hta``, HTA) on scaled-up traces.

Not a test (pytest does not collect it): run it by hand, e.g.

    .venv/bin/python tests/perf/bench.py --sizes 50 100 200 400 --repeat 3 --vs-hta --hta-sizes 400

Traces are built from a real trace (``../shared/traces/h200-1b/1b_bs8_eager.json.gz``) by
:mod:`synth` and cached under ``bench-out/``. Every run is a whole fresh process:
``.venv/bin/launchgap analyze FILE --format json`` for launchgap, ``hta_job.py FILE`` (HTA's
``TraceAnalysis`` load + temporal breakdown + idle-time breakdown + kernel launch stats)
for HTA. Wall time is measured around the process; peak RSS is the process's own
``ru_maxrss`` from ``wait4``. events/s counts the file's traceEvents entries, MB/s its JSON
text (1 MB = 1e6 bytes), also for gzipped files. Medians over ``--repeat`` runs.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import selectors
import statistics
import subprocess
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
sys.path.insert(0, str(HERE))

from synth import DEFAULT_SOURCE, scaled_trace, trace_meta  # noqa: E402


@dataclass(frozen=True)
class Run:
    tool: str
    size_mb: float
    gzip: bool
    wall_s: float
    peak_rss_bytes: int
    events: int
    json_bytes: int
    ok: bool
    note: str = ""

    @property
    def events_per_s(self) -> float:
        return self.events / self.wall_s

    @property
    def mb_per_s(self) -> float:
        return self.json_bytes / 1e6 / self.wall_s


def timed(cmd: list[str], timeout_s: float) -> tuple[float, int, int, str]:
    """Wall time and peak RSS of one child, from ``wait4`` (exact per child, not a max over children)."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=REPO)
    deadline = t0 + timeout_s
    out_chunks: list[bytes] = []
    err_chunks: list[bytes] = []
    sel = selectors.DefaultSelector()
    sel.register(proc.stdout, selectors.EVENT_READ, out_chunks)
    sel.register(proc.stderr, selectors.EVENT_READ, err_chunks)
    open_streams = 2
    while open_streams:
        left = deadline - time.perf_counter()
        if left <= 0:
            proc.kill()
            break
        for key, _ in sel.select(timeout=min(left, 1.0)):
            data = os.read(key.fileobj.fileno(), 1 << 16)
            if data:
                key.data.append(data)
            else:
                sel.unregister(key.fileobj)
                open_streams -= 1
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    proc.returncode = os.waitstatus_to_exitcode(status)
    rss = int(usage.ru_maxrss) * 1024  # Linux reports KiB
    out = b"".join(out_chunks).decode(errors="replace").strip().splitlines()
    err = b"".join(err_chunks).decode(errors="replace").strip().splitlines()
    if proc.returncode != 0:
        return wall, rss, proc.returncode, (err[-1] if err else "timed out" if wall >= timeout_s else "")
    return wall, rss, 0, out[-1] if out else ""


def launchgap_cmd(trace: Path, out_json: Path) -> list[str]:
    exe = REPO / ".venv" / "bin" / "launchgap"
    return [str(exe), "analyze", str(trace), "--format", "json", "--output", str(out_json)]


def hta_cmd(trace: Path) -> list[str]:
    return [sys.executable, str(HERE / "hta_job.py"), str(trace)]


def measure(tool: str, trace: Path, size_mb: float, gz: bool, repeat: int, timeout_s: float,
            out_dir: Path) -> list[Run]:
    meta = trace_meta(trace)
    runs = []
    for i in range(repeat):
        if tool == "launchgap":
            cmd = launchgap_cmd(trace, out_dir / f"report_{trace.name}.json")
        else:
            cmd = hta_cmd(trace)
        wall, rss, rc, note = timed(cmd, timeout_s)
        run = Run(tool=tool, size_mb=size_mb, gzip=gz, wall_s=wall, peak_rss_bytes=rss, events=meta["events"],
                  json_bytes=meta["json_bytes"], ok=rc == 0, note="" if rc == 0 else f"exit {rc}: {note}")
        runs.append(run)
        print(f"  {tool:9s} {trace.name:32s} run {i + 1}/{repeat}: {wall:7.2f} s  "
              f"{rss / 2**20:7.0f} MiB  {'ok' if run.ok else run.note}", flush=True)
        if not run.ok:
            break
    return runs


def median_run(runs: list[Run]) -> Run:
    ok = [r for r in runs if r.ok] or runs
    walls = sorted(ok, key=lambda r: r.wall_s)
    mid = walls[(len(walls) - 1) // 2]
    rss = int(statistics.median(r.peak_rss_bytes for r in ok))
    return Run(**{**asdict(mid), "peak_rss_bytes": rss})


def machine() -> str:
    cpu = ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    return f"{os.cpu_count()} cores ({cpu}), {mem:.0f} GiB RAM, Python {platform.python_version()}, {platform.system()}"


def table(rows: list[Run], hta: dict[tuple[float, bool], Run]) -> str:
    head = ("| JSON size | file | events | launchgap wall s | events/s | MB/s | peak RSS MiB "
            "| HTA wall s | HTA peak RSS MiB | speed-up | RSS ratio |")
    lines = [head, "|" + "|".join(["---"] * 11) + "|"]
    for r in rows:
        h = hta.get((r.size_mb, r.gzip))
        hcols = ["", "", "", ""]
        if h is not None and h.ok:
            hcols = [f"{h.wall_s:.1f}", f"{h.peak_rss_bytes / 2**20:,.0f}", f"{h.wall_s / r.wall_s:.1f}x",
                     f"{r.peak_rss_bytes / h.peak_rss_bytes:.2f}"]
        elif h is not None:
            hcols = [h.note, "", "", ""]
        lines.append(
            f"| {r.json_bytes / 1e6:,.0f} MB | {'.json.gz' if r.gzip else '.json'} | {r.events:,} | {r.wall_s:.2f} "
            f"| {r.events_per_s:,.0f} | {r.mb_per_s:,.0f} | {r.peak_rss_bytes / 2**20:,.0f} | " + " | ".join(hcols) + " |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", type=float, nargs="+", default=[50, 100, 200, 400], help="JSON MB of each trace")
    ap.add_argument("--formats", nargs="+", choices=("json", "gz"), default=["json", "gz"],
                    help="plain JSON, gzipped JSON, or both")
    ap.add_argument("--repeat", type=int, default=3, help="runs per size (median reported)")
    ap.add_argument("--vs-hta", action="store_true", help="also run HTA on the same files and print ratios")
    ap.add_argument("--hta-sizes", type=float, nargs="*", help="sizes to run HTA on (default: all --sizes)")
    ap.add_argument("--hta-repeat", type=int, help="runs per size for HTA (default: --repeat)")
    ap.add_argument("--hta-timeout", type=float, default=1800.0, help="give up on one HTA run after this many s")
    ap.add_argument("--source", type=Path, default=DEFAULT_SOURCE, help="the real trace to scale up")
    ap.add_argument("--out", type=Path, default=REPO / "bench-out", help="cache folder (gitignored)")
    ap.add_argument("--json", type=Path, help="also write every run as JSON here")
    args = ap.parse_args(argv)
    if not args.source.exists():
        print(f"bench: source trace {args.source} not found", file=sys.stderr)
        return 2
    hta_sizes = set(args.sizes if args.hta_sizes is None else args.hta_sizes)
    print(f"machine: {machine()}", flush=True)
    all_runs: list[Run] = []
    medians: list[Run] = []
    hta_medians: dict[tuple[float, bool], Run] = {}
    for fmt in args.formats:
        gz = fmt == "gz"
        for size in args.sizes:
            trace = scaled_trace(size, args.out, source=args.source, gz=gz)
            runs = measure("launchgap", trace, size, gz, args.repeat, 600.0, args.out)
            all_runs += runs
            medians.append(median_run(runs))
            if args.vs_hta and size in hta_sizes:
                hruns = measure("hta", trace, size, gz, args.hta_repeat or args.repeat, args.hta_timeout, args.out)
                all_runs += hruns
                hta_medians[(size, gz)] = median_run(hruns)
    print()
    print(table(medians, hta_medians))
    for (size, gz), h in hta_medians.items():
        lg = next(r for r in medians if (r.size_mb, r.gzip) == (size, gz))
        if h.ok:
            print(f"{size:g} MB {'gz' if gz else 'json'}: launchgap {h.wall_s / lg.wall_s:.1f}x faster than HTA, "
                  f"peak RSS {lg.peak_rss_bytes / h.peak_rss_bytes:.2f} of HTA's")
    if args.json:
        args.json.write_text(json.dumps({"machine": machine(), "runs": [asdict(r) for r in all_runs]}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
