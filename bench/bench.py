"""End-to-end benchmark: ``launchgap analyze``, a decode-only reference, and (``--vs-hta``) HTA on scaled-up traces.

Not a test (pytest does not collect it): run it by hand, e.g.

    .venv/bin/python bench/bench.py --sizes 50 100 200 400 --repeat 3 --vs-hta --hta-sizes 400

Traces are built from a real trace (``traces/h200-1b/1b_bs8_eager.json.gz``) by
:mod:`synth` and cached under ``bench-out/``. Every run is a whole fresh process, with this
checkout first on ``PYTHONPATH``: ``python -m launchgap analyze FILE --format json --output ...``
for launchgap (load, columns, analysis, JSON out); ``decode_ref.py FILE`` for the reference
(one single-threaded typed msgspec decode of the whole file, gunzipped first for ``.json.gz``;
nothing else), run alternately with launchgap so both meet the same load; ``hta_job.py FILE``
(HTA's ``TraceAnalysis`` load + temporal breakdown + idle-time breakdown + kernel launch stats)
for HTA. Wall time is measured around the process; peak RSS is the process's own
``ru_maxrss`` from ``wait4`` (launchgap's decode workers are separate processes: one more run
samples the proportional set size, PSS, of the process and its children every 20 ms and
reports the peak of their sum). events/s counts the file's traceEvents entries, MB/s its JSON
text (1 MB = 1e6 bytes), also for gzipped files. Medians over ``--repeat`` runs. The ratios
printed at the end: launchgap's median wall time over the reference's, for the same file and
for the plain JSON of the same size.

Memory (issue 30): for ``--memory-sizes`` (default: the largest of ``--sizes``) two kinds of trace
are built the same way, a plain eager trace (``--source``) and a ``with_stack`` serving-engine
trace (``--stack-source``: TraceLens' vLLM piecewise-graph trace, 88% ``python_function``
events), and each is analysed ``--repeat`` times sampling the process tree's PSS; the table gives
the median peak and the peak per MB of JSON text (issue 30's target: 0.25 MiB per MB at ~1 GB).
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
REPO = HERE.parent
sys.path.insert(0, str(REPO))

from tests.synth import DEFAULT_SOURCE, scaled_trace, trace_meta  # noqa: E402

#: The with_stack serving-engine trace the memory rows scale up (vLLM V1, piecewise graphs, MI300X).
STACK_SOURCE = REPO / "traces" / "engines" / "tracelens-vllm-prefilldecode-piecewise-mi300x" / "graph_execution.json.gz"


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
    cpu_s: float = 0.0  # user + system CPU of the process (both cores count)
    load_avg: float = 0.0  # 1-minute load average when the run ended: other work on the box

    @property
    def events_per_s(self) -> float:
        return self.events / self.wall_s

    @property
    def mb_per_s(self) -> float:
        return self.json_bytes / 1e6 / self.wall_s


def _children(pid: int) -> list[int]:
    out = []
    try:
        for task in Path(f"/proc/{pid}/task").iterdir():
            out += [int(c) for c in (task / "children").read_text().split()]
    except OSError:
        pass
    return out


def tree_pss(pid: int) -> int:
    """Proportional set size of ``pid`` and its descendants, bytes (0 where /proc cannot tell)."""
    total = 0
    todo = [pid]
    while todo:
        p = todo.pop()
        try:
            for line in Path(f"/proc/{p}/smaps_rollup").read_text().splitlines():
                if line.startswith("Pss:"):
                    total += int(line.split()[1]) * 1024
                    break
        except (OSError, ValueError):
            continue
        todo += _children(p)
    return total


def child_env() -> dict[str, str]:
    """This checkout first on the path, so the runs measure its code (not an installed copy)."""
    path = os.environ.get("PYTHONPATH", "")
    return {**os.environ, "PYTHONPATH": str(REPO) + (os.pathsep + path if path else "")}


def timed(cmd: list[str], timeout_s: float, sample_pss: bool = False) -> tuple[float, int, float, int, str]:
    """(wall s, peak memory bytes, CPU s, exit code, last output line) of one child process.

    Peak memory is the child's ``ru_maxrss`` from ``wait4`` (not RUSAGE_CHILDREN, a max over
    all), or, with ``sample_pss``, the peak over 20 ms samples of the PSS of the child and its
    descendants. CPU includes the child's own waited-for children.
    """
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=REPO, env=child_env())
    peak_pss = 0
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
        if sample_pss:
            peak_pss = max(peak_pss, tree_pss(proc.pid))
        for key, _ in sel.select(timeout=min(left, 0.02 if sample_pss else 1.0)):
            data = os.read(key.fileobj.fileno(), 1 << 16)
            if data:
                key.data.append(data)
            else:
                sel.unregister(key.fileobj)
                open_streams -= 1
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    proc.returncode = os.waitstatus_to_exitcode(status)
    rss = peak_pss if sample_pss else int(usage.ru_maxrss) * 1024  # Linux reports KiB
    cpu = usage.ru_utime + usage.ru_stime
    out = b"".join(out_chunks).decode(errors="replace").strip().splitlines()
    err = b"".join(err_chunks).decode(errors="replace").strip().splitlines()
    if proc.returncode != 0:
        return wall, rss, cpu, proc.returncode, (err[-1] if err else "timed out" if wall >= timeout_s else "")
    return wall, rss, cpu, 0, out[-1] if out else ""


def launchgap_cmd(trace: Path, out_json: Path) -> list[str]:
    return [sys.executable, "-m", "launchgap", "analyze", str(trace), "--format", "json", "--output", str(out_json)]


def reference_cmd(trace: Path) -> list[str]:
    return [sys.executable, str(HERE / "decode_ref.py"), str(trace)]


def hta_cmd(trace: Path) -> list[str]:
    return [sys.executable, str(HERE / "hta_job.py"), str(trace)]


def _cmd(tool: str, trace: Path, out_dir: Path) -> list[str]:
    if tool == "launchgap":
        return launchgap_cmd(trace, out_dir / f"report_{trace.name}.json")
    return reference_cmd(trace) if tool == "reference" else hta_cmd(trace)


def measure(tools: list[str], trace: Path, size_mb: float, gz: bool, repeat: int, timeout_s: float,
            out_dir: Path) -> dict[str, list[Run]]:
    """``repeat`` runs of each tool, taken in turns (a, b, a, b, ...) so that all meet the same load."""
    meta = trace_meta(trace)
    runs: dict[str, list[Run]] = {t: [] for t in tools}
    for i in range(repeat):
        for tool in tools:
            if runs[tool] and not runs[tool][-1].ok:
                continue
            wall, rss, cpu, rc, note = timed(_cmd(tool, trace, out_dir), timeout_s)
            run = Run(tool=tool, size_mb=size_mb, gzip=gz, wall_s=wall, peak_rss_bytes=rss, events=meta["events"],
                      json_bytes=meta["json_bytes"], ok=rc == 0, note="" if rc == 0 else f"exit {rc}: {note}",
                      cpu_s=cpu, load_avg=os.getloadavg()[0])
            runs[tool].append(run)
            print(f"  {tool:9s} {trace.name:32s} run {i + 1}/{repeat}: {wall:7.2f} s wall {cpu:7.2f} s CPU "
                  f"{rss / 2**20:7.0f} MiB  load {run.load_avg:4.1f}  {'ok' if run.ok else run.note}", flush=True)
    return runs


def peak_pss(trace: Path, out_dir: Path) -> int:
    """Peak PSS of launchgap's process tree (main process and decode workers) over one more run."""
    _, pss, _, rc, _ = timed(launchgap_cmd(trace, out_dir / f"report_{trace.name}.json"), 600.0, sample_pss=True)
    return pss if rc == 0 else 0


def median_run(runs: list[Run]) -> Run:
    """Median wall, CPU and peak RSS over the runs (each taken on its own; lower median)."""
    ok = [r for r in runs if r.ok] or runs

    def lower_median(values: list[float]) -> float:
        return sorted(values)[(len(values) - 1) // 2]

    return Run(**{**asdict(ok[0]), "wall_s": lower_median([r.wall_s for r in ok]),
                  "cpu_s": lower_median([r.cpu_s for r in ok]),
                  "peak_rss_bytes": int(lower_median([r.peak_rss_bytes for r in ok])),
                  "load_avg": statistics.mean(r.load_avg for r in ok)})


def machine() -> str:
    """The box a bench ran on: cores, CPU model, RAM, Python, OS (also ``dashboard_upload.py``'s)."""
    cpu = "?"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    return (f"{os.cpu_count()} cores ({cpu}), {mem:.0f} GiB RAM, Python {platform.python_version()}, "
            f"{platform.system()} {platform.release()}")


def table(rows: list[Run], hta: dict[tuple[float, bool], Run]) -> str:
    head = ("| JSON | file | events | launchgap wall s | CPU s | events/s | MB/s | peak RSS MiB "
            "| HTA wall s | HTA CPU s | HTA peak RSS MiB | speed-up (wall) | RSS vs HTA | load avg |")
    lines = [head, "|" + "|".join(["---"] * (head.count("|") - 1)) + "|"]
    for r in rows:
        h = hta.get((r.size_mb, r.gzip))
        hcols = ["", "", "", "", ""]
        if h is not None and h.ok:
            hcols = [f"{h.wall_s:.1f}", f"{h.cpu_s:.1f}", f"{h.peak_rss_bytes / 2**20:,.0f}",
                     f"{h.wall_s / r.wall_s:.1f}x", f"{r.peak_rss_bytes / h.peak_rss_bytes:.2f}"]
        elif h is not None:
            hcols = [h.note, "", "", "", ""]
        load = f"{r.load_avg:.1f}" + (f" / {h.load_avg:.1f}" if h is not None else "")
        lines.append(
            f"| {r.json_bytes / 1e6:,.0f} MB | {'.json.gz' if r.gzip else '.json'} | {r.events:,} | {r.wall_s:.2f} "
            f"| {r.cpu_s:.2f} | {r.events_per_s:,.0f} | {r.mb_per_s:,.0f} | {r.peak_rss_bytes / 2**20:,.0f} | "
            + " | ".join(hcols) + f" | {load} |"
        )
    return "\n".join(lines)


def ratio_table(rows: list[Run], refs: dict[tuple[float, bool], Run], pss: dict[tuple[float, bool], int]) -> str:
    """launchgap against the decode-only reference, medians of the same runs (taken in turns)."""
    head = ("| JSON | file | launchgap wall s | reference wall s | ratio | ratio to the plain-JSON reference "
            "| launchgap CPU s | reference CPU s | launchgap peak RSS MiB (main process) "
            "| launchgap peak PSS MiB (process tree) | PSS MiB per MB | reference peak RSS MiB | load avg |")
    lines = [head, "|" + "|".join(["---"] * (head.count("|") - 1)) + "|"]
    for r in rows:
        ref = refs[(r.size_mb, r.gzip)]
        plain = refs.get((r.size_mb, False))
        to_plain = f"{r.wall_s / plain.wall_s:.2f}x" if plain is not None else ""
        tree = pss.get((r.size_mb, r.gzip), 0)
        lines.append(
            f"| {r.json_bytes / 1e6:,.0f} MB | {'.json.gz' if r.gzip else '.json'} | {r.wall_s:.2f} | {ref.wall_s:.2f} "
            f"| {r.wall_s / ref.wall_s:.2f}x | {to_plain} | {r.cpu_s:.2f} | {ref.cpu_s:.2f} "
            f"| {r.peak_rss_bytes / 2**20:,.0f} | {tree / 2**20:,.0f} | {tree / 2**20 / (r.json_bytes / 1e6):.3f} "
            f"| {ref.peak_rss_bytes / 2**20:,.0f} "
            f"| {(r.load_avg + ref.load_avg) / 2:.1f} |")
    return "\n".join(lines)


@dataclass(frozen=True)
class MemoryRow:
    kind: str
    json_bytes: int
    events: int
    wall_s: float
    peak_pss_bytes: int
    runs: int

    @property
    def mib_per_mb(self) -> float:
        return self.peak_pss_bytes / 2**20 / (self.json_bytes / 1e6)


def measure_memory(kind: str, trace: Path, repeat: int, out_dir: Path) -> MemoryRow:
    """Median wall time and peak PSS of launchgap's process tree over ``repeat`` runs on ``trace``."""
    walls, peaks = [], []
    for i in range(repeat):
        wall, pss, _, rc, note = timed(launchgap_cmd(trace, out_dir / f"report_{trace.name}.json"), 600.0,
                                       sample_pss=True)
        print(f"  memory    {trace.name:32s} run {i + 1}/{repeat}: {wall:7.2f} s wall {pss / 2**20:7.0f} MiB PSS  "
              f"{'ok' if rc == 0 else f'exit {rc}: {note}'}", flush=True)
        if rc == 0:
            walls.append(wall)
            peaks.append(pss)
    meta = trace_meta(trace)
    if not peaks:
        return MemoryRow(kind, meta["json_bytes"], meta["events"], 0.0, 0, 0)
    return MemoryRow(kind, meta["json_bytes"], meta["events"], statistics.median(walls), int(statistics.median(peaks)),
                     len(peaks))


def memory_table(rows: list[MemoryRow]) -> str:
    head = ("| trace | JSON | events | launchgap wall s | peak PSS MiB (process tree) | peak PSS MiB per MB "
            "| runs |")
    lines = [head, "|" + "|".join(["---"] * (head.count("|") - 1)) + "|"]
    for r in rows:
        lines.append(f"| {r.kind} | {r.json_bytes / 1e6:,.0f} MB | {r.events:,} | {r.wall_s:.2f} "
                     f"| {r.peak_pss_bytes / 2**20:,.0f} | **{r.mib_per_mb:.3f}** | {r.runs} |")
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
    ap.add_argument("--no-pss", action="store_true", help="skip the extra run that samples the process tree's PSS")
    ap.add_argument("--stack-source", type=Path, default=STACK_SOURCE,
                    help="the with_stack serving-engine trace to scale up for the memory rows")
    ap.add_argument("--memory-sizes", type=float, nargs="*",
                    help="JSON MB of the plain and with_stack traces whose peak memory is measured (default: the "
                         "largest of --sizes; none: skip)")
    args = ap.parse_args(argv)
    if not args.source.exists():
        print(f"bench: source trace {args.source} not found", file=sys.stderr)
        return 2
    hta_sizes = set(args.sizes if args.hta_sizes is None else args.hta_sizes)
    print(f"machine: {machine()}", flush=True)
    print(f"load average at start: {' '.join(f'{x:.2f}' for x in os.getloadavg())}", flush=True)
    all_runs: list[Run] = []
    medians: list[Run] = []
    refs: dict[tuple[float, bool], Run] = {}
    pss: dict[tuple[float, bool], int] = {}
    hta_medians: dict[tuple[float, bool], Run] = {}
    for fmt in args.formats:
        gz = fmt == "gz"
        for size in args.sizes:
            trace = scaled_trace(size, args.out, source=args.source, gz=gz)
            runs = measure(["reference", "launchgap"], trace, size, gz, args.repeat, 600.0, args.out)
            all_runs += runs["launchgap"] + runs["reference"]
            medians.append(median_run(runs["launchgap"]))
            refs[(size, gz)] = median_run(runs["reference"])
            if not args.no_pss:
                pss[(size, gz)] = peak_pss(trace, args.out)
            if args.vs_hta and size in hta_sizes:
                hruns = measure(["hta"], trace, size, gz, args.hta_repeat or args.repeat, args.hta_timeout,
                                args.out)["hta"]
                all_runs += hruns
                hta_medians[(size, gz)] = median_run(hruns)
    memory: list[MemoryRow] = []
    for size in (args.memory_sizes if args.memory_sizes is not None else [max(args.sizes)]):
        for kind, source in (("plain eager", args.source), ("with_stack engine", args.stack_source)):
            memory.append(measure_memory(kind, scaled_trace(size, args.out, source=source), args.repeat, args.out))
    print()
    print(table(medians, hta_medians))
    print()
    print(ratio_table(medians, refs, pss))
    print()
    if memory:
        print(memory_table(memory))
        print()
    for r in medians:
        ref = refs[(r.size_mb, r.gzip)]
        plain = refs.get((r.size_mb, False))
        line = (f"{r.size_mb:g} MB {'gz' if r.gzip else 'json'}: launchgap {r.wall_s:.2f} s = "
                f"{r.wall_s / ref.wall_s:.2f}x the decode-only reference of the same file ({ref.wall_s:.2f} s)")
        if r.gzip and plain is not None:
            line += f", {r.wall_s / plain.wall_s:.2f}x the reference on the plain JSON ({plain.wall_s:.2f} s)"
        print(line)
    for (size, gz), h in hta_medians.items():
        lg = next(r for r in medians if (r.size_mb, r.gzip) == (size, gz))
        if h.ok:
            print(f"{size:g} MB {'gz' if gz else 'json'}: launchgap {h.wall_s / lg.wall_s:.1f}x faster than HTA, "
                  f"peak RSS {lg.peak_rss_bytes / h.peak_rss_bytes:.2f} of HTA's")
    if args.json:
        args.json.write_text(json.dumps({"machine": machine(), "runs": [asdict(r) for r in all_runs],
                                         "memory": [asdict(m) for m in memory]}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
