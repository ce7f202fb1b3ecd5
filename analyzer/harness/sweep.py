"""Sweep a decoder over batch sizes, eager vs CUDA graph: ground-truth timings and traces.

For each model and batch size :func:`run_sweep`

1. times the eager step without a profiler: ``eager_us`` is the median over
   ``rounds x repeats`` steps of the device time between CUDA events recorded before and
   after each step (steps are issued back to back, as a decode loop does, with no host sync
   between them); ``eager_host_us`` is the median host (CPU wall) time to issue one step.
   Each round times every batch size once (``warmup`` untimed steps, then ``repeats`` timed
   ones) before the next round starts;
2. captures the step as a ``torch.cuda.CUDAGraph`` (``capture_s``: wall seconds of the
   capture, instantiation included; ``graph_pool_bytes``: growth of the CUDA caching
   allocator's reserved memory across the capture, i.e. the graph's private pool) and times
   its replays the same way (``graph_us``, ``graph_host_us``);
3. counts the kernels of one eager step (``kernels_per_step``, from a CUDA-only profile);
4. records torch.profiler traces (CPU+CUDA, ``record_shapes=True``, schedule wait=1
   warmup=2 active=``steps``), each step inside ``record_function("decode_step[bs=N]")``
   and an NVTX range of the same name, saved as ``<model>_bs<N>_<mode>.json.gz``.

Rows go to ``timings.json`` (schema ``launchgap.timings/1``) after every batch size, so an
interrupted sweep resumes where it stopped: rows already there and trace files already
written are skipped unless ``force``. Without CUDA the eager step runs on the CPU (timed
with the host clock) and graph mode is skipped with a warning.
"""
from __future__ import annotations

import contextlib
import datetime as _dt
import gzip
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from analyzer.errors import InputError
from analyzer.harness import import_torch
from analyzer.harness.model import Decoder, ModelConfig
from analyzer.timings import SCHEMA, load_timings, write_timings

MODES = ("eager", "graph")
GRAPH_NEEDS_CUDA = "graph mode needs a CUDA GPU (torch.cuda.is_available() is False)"


@dataclass(frozen=True)
class SweepOptions:
    """What to sweep and how. ``trace_batch_sizes`` ``None`` means every swept size."""

    models: tuple[ModelConfig, ...]
    batch_sizes: tuple[int, ...]
    out_dir: Path
    modes: tuple[str, ...] = MODES
    steps: int = 3
    repeats: int = 100
    rounds: int = 1
    warmup: int = 5
    context_len: int = 512
    start_pos: int = 128
    trace: bool = True
    trace_batch_sizes: tuple[int, ...] | None = None
    count_kernels: bool = True
    micro: bool = True
    force: bool = False
    device: str = "auto"
    seed: int = 0

    def validate(self) -> None:
        if not self.models:
            raise InputError("no model to record")
        if not self.batch_sizes or min(self.batch_sizes) <= 0:
            raise InputError("batch sizes must be positive integers")
        bad = [m for m in self.modes if m not in MODES]
        if bad or not self.modes:
            raise InputError(f"unknown mode(s) {', '.join(bad) or '(none)'}; choose from {', '.join(MODES)}")
        if self.steps < 1 or self.repeats < 1 or self.rounds < 1 or self.warmup < 0:
            raise InputError("--steps, --repeats and --rounds must be at least 1 and --warmup at least 0")
        if self.device not in ("auto", "cuda", "cpu"):
            raise InputError(f"unknown device {self.device!r}; choose auto, cuda or cpu")


@dataclass(frozen=True)
class TimingRow:
    """Ground truth for one (model, batch size). Times in microseconds; ``None`` = not measured.

    ``eager_us``/``graph_us``: median device time per step between CUDA events (CPU: host
    wall time). ``eager_host_us``/``graph_host_us``: median host time to issue one step.
    ``capture_s``: wall seconds to capture the graph. ``graph_pool_bytes``: reserved-memory
    growth across the capture. ``kernels_per_step``: kernels of one eager step.
    ``repeats``: timed steps behind each median (all rounds). ``eager_us_p10``/``p90`` etc.
    give the spread over steps, ``eager_us_rounds``/``graph_us_rounds`` the median of each round.
    """

    model: str
    batch_size: int
    eager_us: float
    graph_us: float | None
    eager_host_us: float | None
    capture_s: float | None
    graph_pool_bytes: int | None
    kernels_per_step: int | None
    repeats: int
    graph_host_us: float | None = None
    eager_us_p10: float | None = None
    eager_us_p90: float | None = None
    graph_us_p10: float | None = None
    graph_us_p90: float | None = None
    rounds: int = 1
    eager_us_rounds: list[float] | None = None
    graph_us_rounds: list[float] | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class SweepResult:
    """What a sweep wrote: the timings file, the traces it recorded now, and warnings."""

    timings_path: Path
    rows: list[TimingRow] = field(default_factory=list)
    traces: list[Path] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


# --------------------------------------------------------------------------------------------
# timings.json


def trace_name(model: str, batch_size: int, mode: str) -> str:
    return f"{model}_bs{batch_size}_{mode}.json.gz"


def _environment(torch: Any, on_cuda: bool) -> dict[str, Any]:
    env: dict[str, Any] = {"torch": torch.__version__, "cuda": torch.version.cuda if on_cuda else None}
    if on_cuda:
        env["device"] = torch.cuda.get_device_name(0)
        env["driver"] = _driver_version()
    else:
        import platform

        env["device"] = f"cpu ({platform.processor() or platform.machine()})"
        env["driver"] = None
    return env


def _driver_version() -> str | None:
    exe = shutil.which("nvidia-smi")
    if not exe:
        return None
    try:
        out = subprocess.run([exe, "--query-gpu=driver_version", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=20, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip().splitlines()[0] if out.returncode == 0 and out.stdout.strip() else None


# --------------------------------------------------------------------------------------------
# timing


def _pct(values: list[float], q: float) -> float:
    """Percentile ``q`` (0..1) with linear interpolation between ranks (numpy's default).

    Pure Python: the harness needs only the standard library and torch.
    """
    xs = sorted(values)
    rank = q * (len(xs) - 1)
    lo = int(rank)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (rank - lo)


@dataclass(frozen=True)
class _Timed:
    device_us: list[float]
    host_us: list[float]

    @property
    def median_us(self) -> float:
        return statistics.median(self.device_us)

    @property
    def host_median_us(self) -> float:
        return statistics.median(self.host_us)


def _time_steps(torch: Any, fn: Callable[[], Any], n: int, warmup: int, on_cuda: bool) -> _Timed:
    """Per-step times of ``n`` calls of ``fn`` after ``warmup`` untimed ones.

    On CUDA each step sits between two events; the steps are issued back to back and the
    host syncs once at the end, so the events see what a decode loop sees: launch gaps
    when the host is the bottleneck, kernel time when the GPU is.
    """
    for _ in range(warmup):
        fn()
    host: list[float] = []
    if not on_cuda:
        for _ in range(n):
            t0 = time.perf_counter()
            fn()
            host.append((time.perf_counter() - t0) * 1e6)
        return _Timed(device_us=list(host), host_us=host)
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(n)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(n)]
    torch.cuda.synchronize()
    for i in range(n):
        t0 = time.perf_counter()
        starts[i].record()
        fn()
        ends[i].record()
        host.append((time.perf_counter() - t0) * 1e6)
    torch.cuda.synchronize()
    dev = [s.elapsed_time(e) * 1e3 for s, e in zip(starts, ends)]  # ms -> us
    return _Timed(device_us=dev, host_us=host)


@dataclass
class _Captured:
    graph: Any
    capture_s: float
    pool_bytes: int


def _capture(torch: Any, model: Decoder, bs: int) -> _Captured:
    """Capture one step of batch ``bs`` into a CUDA graph with a private memory pool."""
    # Warm up on a side stream first, as torch.cuda.graph's documentation asks (lazy library
    # handles and workspaces must not be created during capture).
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            model.step(bs)
    torch.cuda.current_stream().wait_stream(side)
    torch.cuda.synchronize()
    torch.cuda.empty_cache()
    reserved0 = torch.cuda.memory_reserved()
    graph = torch.cuda.CUDAGraph()
    t0 = time.perf_counter()
    with torch.cuda.graph(graph):
        model.step(bs)
    torch.cuda.synchronize()
    capture_s = time.perf_counter() - t0
    return _Captured(graph=graph, capture_s=capture_s, pool_bytes=int(torch.cuda.memory_reserved() - reserved0))


# --------------------------------------------------------------------------------------------
# traces


def _nvtx_range_factory(torch: Any, on_cuda: bool) -> Callable[[str], contextlib.AbstractContextManager]:
    """NVTX ranges for Nsight users: the ``nvtx`` package, else torch.cuda.nvtx, else none."""
    try:
        import nvtx  # type: ignore[import-not-found]

        return lambda msg: nvtx.annotate(msg, domain="launchgap")
    except ImportError:
        pass
    if on_cuda:
        return torch.cuda.nvtx.range
    return lambda msg: contextlib.nullcontext()


def _gzip_file(src: Path, dst: Path) -> None:
    tmp = dst.with_name(dst.name + ".tmp")
    with open(src, "rb") as fin, gzip.open(tmp, "wb", compresslevel=6) as fout:
        shutil.copyfileobj(fin, fout, 1 << 20)
    os.replace(tmp, dst)


def record_trace(torch: Any, fn: Callable[[], Any], label: str, dst: Path, active: int, on_cuda: bool,
                 nvtx_range: Callable[[str], contextlib.AbstractContextManager] | None = None) -> None:
    """Profile ``1 + 2 + active`` calls of ``fn`` (only the last ``active`` are kept) into ``dst``."""
    from torch.profiler import ProfilerActivity, profile, record_function, schedule

    nvtx_range = nvtx_range or _nvtx_range_factory(torch, on_cuda)
    acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if on_cuda else [])
    with tempfile.TemporaryDirectory(prefix="launchgap-") as tmpdir:
        raw = Path(tmpdir) / "trace.json"
        with profile(activities=acts, record_shapes=True, schedule=schedule(wait=1, warmup=2, active=active),
                     on_trace_ready=lambda p: p.export_chrome_trace(str(raw))) as prof:
            for _ in range(1 + 2 + active):
                with record_function(label), nvtx_range(label):
                    fn()
                prof.step()
        if on_cuda:
            torch.cuda.synchronize()
        if not raw.exists():
            raise InputError(f"torch.profiler wrote no trace for {label}", str(dst))
        _gzip_file(raw, dst)


def count_kernels_per_step(torch: Any, fn: Callable[[], Any], steps: int = 1) -> int:
    """Kernels one call of ``fn`` launches, from a CUDA-only profile of ``steps`` calls."""
    from torch.profiler import ProfilerActivity, profile

    torch.cuda.synchronize()
    with tempfile.TemporaryDirectory(prefix="launchgap-") as tmpdir:
        raw = Path(tmpdir) / "count.json"
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            for _ in range(steps):
                fn()
            torch.cuda.synchronize()
        prof.export_chrome_trace(str(raw))
        return round(count_kernel_events(raw) / steps)


def count_kernel_events(path: Path) -> int:
    """Number of ``cat == "kernel"`` events in a Chrome-trace JSON file (gzipped or not)."""
    opener = gzip.open if Path(path).read_bytes()[:2] == b"\x1f\x8b" else open
    with opener(path, "rt") as fh:
        doc = json.load(fh)
    events = doc.get("traceEvents", []) if isinstance(doc, dict) else doc
    return sum(1 for e in events if isinstance(e, dict) and e.get("cat") == "kernel")


# --------------------------------------------------------------------------------------------
# micro-benchmark


def launch_microbenchmark(torch: Any, n_ops: int = 20000, n_nodes: int = 1000) -> dict[str, float]:
    """Host cost of one eager PyTorch op, and device cost of one kernel node in a graph replay.

    ``eager_host_us_per_op``: host wall time per ``torch.add(x, 1, out=y)`` on a 1-element
    CUDA tensor, issued back to back (the CPU cost of dispatch + cudaLaunchKernel).
    ``eager_device_us_per_op``: CUDA-event time per op over the same loop (the GPU finishes
    each tiny kernel long before the next launch, so this tracks the host rate).
    ``graph_device_us_per_node``: CUDA-event time per node of a graph of ``n_nodes`` such
    ops, replayed (what a launch costs the device once the host is out of the loop).
    """
    x = torch.zeros(1, device="cuda")
    y = torch.empty_like(x)
    for _ in range(2000):
        torch.add(x, 1, out=y)
    torch.cuda.synchronize()
    e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    t0 = time.perf_counter()
    e0.record()
    for _ in range(n_ops):
        torch.add(x, 1, out=y)
    e1.record()
    host_us = (time.perf_counter() - t0) * 1e6 / n_ops
    torch.cuda.synchronize()
    dev_us = e0.elapsed_time(e1) * 1e3 / n_ops

    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        torch.add(x, 1, out=y)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for _ in range(n_nodes):
            torch.add(y, 1, out=y)
    for _ in range(3):
        graph.replay()
    torch.cuda.synchronize()
    reps = 20
    g0, g1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    g0.record()
    for _ in range(reps):
        graph.replay()
    g1.record()
    torch.cuda.synchronize()
    node_us = g0.elapsed_time(g1) * 1e3 / (reps * n_nodes)
    del graph
    return {"eager_host_us_per_op": round(host_us, 3), "eager_device_us_per_op": round(dev_us, 3),
            "graph_device_us_per_node": round(node_us, 4), "ops": n_ops, "graph_nodes": n_nodes}


# --------------------------------------------------------------------------------------------
# the sweep


@dataclass(frozen=True)
class _Task:
    model: str
    bs: int
    what: str


def _plan(opts: SweepOptions, on_cuda: bool) -> list[_Task]:
    graph = "graph" in opts.modes and on_cuda
    tasks: list[_Task] = []
    for cfg in opts.models:
        for bs in opts.batch_sizes:
            tasks.append(_Task(cfg.name, bs, "timing"))
            if opts.trace and (opts.trace_batch_sizes is None or bs in opts.trace_batch_sizes):
                for mode in opts.modes:
                    if mode == "eager" or graph:
                        tasks.append(_Task(cfg.name, bs, f"trace {mode}"))
    return tasks


class Progress:
    """A progress bar for :func:`run_sweep`: redrawn in place on a terminal, one line per item elsewhere."""

    def __init__(self, stream: Any = None, width: int = 24) -> None:
        self.width = width
        self.stream = stream if stream is not None else sys.stderr
        self.tty = bool(getattr(self.stream, "isatty", lambda: False)())
        self.t0 = time.perf_counter()

    def __call__(self, done: int, total: int, label: str) -> None:
        total = max(total, 1)
        filled = self.width * done // total
        bar = "#" * filled + "-" * (self.width - filled)
        line = f"[{bar}] {done}/{total} {time.perf_counter() - self.t0:6.1f}s {label}"
        if self.tty:
            self.stream.write("\r" + line[:120].ljust(120) + ("\n" if done >= total else ""))
        else:
            self.stream.write(line + "\n")
        self.stream.flush()


def _row_complete(row: dict[str, Any] | None, want_graph: bool) -> bool:
    return row is not None and row.get("eager_us") is not None and (not want_graph or row.get("graph_us") is not None)


def run_sweep(opts: SweepOptions, progress: Callable[[int, int, str], None] | None = None,
              log: Callable[[str], None] | None = None) -> SweepResult:
    """Run the sweep described by ``opts``; see the module docstring for what is measured.

    ``progress(done, total, label)`` is called after each unit of work (a timing row or a
    trace); ``log(line)`` for notes (warnings, environment). Both default to silence: the
    CLI passes :class:`Progress` and a stderr writer.
    """
    opts.validate()
    torch = import_torch()
    on_cuda = torch.cuda.is_available() if opts.device == "auto" else opts.device == "cuda"
    if on_cuda and not torch.cuda.is_available():
        raise InputError("--device cuda asked, but torch.cuda.is_available() is False")
    say = log or (lambda _line: None)
    result = SweepResult(timings_path=Path(opts.out_dir) / "timings.json")
    if not on_cuda and "graph" in opts.modes:
        if tuple(opts.modes) == ("graph",):
            raise InputError(f"{GRAPH_NEEDS_CUDA}; run with --modes eager on this machine")
        result.warnings.append(f"{GRAPH_NEEDS_CUDA}: graph mode skipped, eager runs on the CPU")
        say(f"warning: {result.warnings[-1]}")
    want_graph = on_cuda and "graph" in opts.modes

    out = Path(opts.out_dir)
    out.mkdir(parents=True, exist_ok=True)
    tpath = result.timings_path
    doc: dict[str, Any] = load_timings(tpath) if tpath.exists() else {}
    env = _environment(torch, on_cuda)
    if doc and (doc.get("device"), doc.get("torch")) != (env["device"], env["torch"]):
        raise InputError(f"holds timings from {doc.get('device')} / torch {doc.get('torch')}, this run is "
                         f"{env['device']} / torch {env['torch']}; use another --out", str(tpath))
    if doc:
        _check_resumable(doc, opts, tpath)
    doc = {"schema": SCHEMA, **env, "created": doc.get("created") or _now(),
           "context_len": opts.context_len, "start_pos": opts.start_pos,
           "models": {**doc.get("models", {}), **{c.name: c.to_dict() for c in opts.models}},
           "micro": doc.get("micro"), "rows": list(doc.get("rows", []))}
    rows_by_key = {(r["model"], r["batch_size"]): i for i, r in enumerate(doc["rows"])}
    say(f"device {env['device']}, torch {env['torch']}, cuda {env['cuda']}, driver {env['driver']}")

    if on_cuda and opts.micro and (opts.force or not doc.get("micro")):
        doc["micro"] = launch_microbenchmark(torch)
        write_timings(tpath, doc)
        say(f"micro-benchmark: {doc['micro']}")

    all_tasks = _plan(opts, on_cuda)
    counter = {"done": 0}

    def step(label: str, advance: bool = True) -> None:
        counter["done"] += int(advance)
        if progress is not None:
            progress(counter["done"], len(all_tasks), label)

    if opts.trace and opts.trace_batch_sizes is not None:
        missing = sorted(set(opts.trace_batch_sizes) - set(opts.batch_sizes))
        if missing:
            result.warnings.append(f"trace batch sizes {missing} are not swept (--batch-sizes); no trace for them")
            say(f"warning: {result.warnings[-1]}")
    nvtx_range = _nvtx_range_factory(torch, on_cuda)
    device = "cuda" if on_cuda else "cpu"
    max_bs = max(opts.batch_sizes)
    for cfg in opts.models:
        tasks = [t for t in all_tasks if t.model == cfg.name]
        todo = [t for t in tasks if opts.force or not _task_done(t, doc, rows_by_key, out, want_graph)]
        for t in tasks:
            if t not in todo:
                result.skipped.append(f"{t.model} bs={t.bs} {t.what}")
                step(f"{t.model} bs={t.bs} {t.what}: done before, skipped")
        if not todo:
            continue
        model = Decoder(cfg, max_batch_size=max_bs, context_len=opts.context_len, start_pos=opts.start_pos,
                        device=device, seed=opts.seed)
        say(f"{cfg.name}: {cfg.param_count() / 1e9:.2f} B params, weights {model.weight_bytes() / 2**30:.2f} GiB, "
            f"KV cache {model.kv_cache_bytes() / 2**30:.2f} GiB")
        _sweep_model(torch, model, cfg, todo, opts, on_cuda, want_graph, out, doc, rows_by_key, result,
                     step, nvtx_range)
        del model
        if on_cuda:
            torch.cuda.synchronize()
            torch.cuda.empty_cache()
    return result


def _check_resumable(doc: dict[str, Any], opts: SweepOptions, path: Path) -> None:
    """Refuse to mix rows measured under other settings into one timings file."""
    for key, want in (("context_len", opts.context_len), ("start_pos", opts.start_pos)):
        if doc.get(key) is not None and doc[key] != want:
            raise InputError(f"holds rows with {key} {doc[key]}, this run asks {want}; use another --out", str(path))
    known = doc.get("models") or {}
    for cfg in opts.models:
        old = known.get(cfg.name)
        if old and any(old.get(k) != v for k, v in cfg.to_dict().items()):
            raise InputError(f"holds a model named {cfg.name!r} with other dimensions; use --name or another --out",
                             str(path))


def _task_done(t: _Task, doc: dict[str, Any], rows_by_key: dict[tuple[str, int], int], out: Path,
               want_graph: bool) -> bool:
    if t.what == "timing":
        i = rows_by_key.get((t.model, t.bs))
        return _row_complete(doc["rows"][i] if i is not None else None, want_graph)
    return (out / trace_name(t.model, t.bs, t.what.split()[1])).exists()


def _sweep_model(torch: Any, model: Decoder, cfg: ModelConfig, tasks: list[_Task], opts: SweepOptions,
                 on_cuda: bool, want_graph: bool, out: Path, doc: dict[str, Any],
                 rows_by_key: dict[tuple[str, int], int], result: SweepResult, step: Callable[..., None],
                 nvtx_range: Callable[[str], contextlib.AbstractContextManager]) -> None:
    """Capture, time (in interleaved rounds), count and trace every batch size of one model."""
    sizes = sorted({t.bs for t in tasks})
    timed = [bs for bs in sizes if _Task(cfg.name, bs, "timing") in tasks]
    traced = {(t.bs, t.what.split()[1]) for t in tasks if t.what.startswith("trace")}
    graphs: dict[int, _Captured] = {}
    if want_graph:
        for bs in sizes:
            if bs in timed or (bs, "graph") in traced:
                graphs[bs] = _capture(torch, model, bs)

    # Rounds go over all sizes before the next round starts, so a slow phase of the host
    # (seconds long on a shared machine) lands in one round of every size, not in all
    # steps of one size; each row's median pools the steps of all rounds.
    eager_s: dict[int, list[_Timed]] = {bs: [] for bs in timed}
    graph_s: dict[int, list[_Timed]] = {bs: [] for bs in timed}
    for r in range(opts.rounds):
        if timed:
            step(f"{cfg.name}: timing round {r + 1}/{opts.rounds} over {len(timed)} batch sizes", advance=False)
        for bs in timed:
            eager_s[bs].append(_time_steps(torch, lambda: model.step(bs), opts.repeats, opts.warmup, on_cuda))
            if bs in graphs:
                graph_s[bs].append(_time_steps(torch, graphs[bs].graph.replay, opts.repeats, opts.warmup, on_cuda))
    for bs in timed:
        kernels = count_kernels_per_step(torch, lambda: model.step(bs)) if on_cuda and opts.count_kernels else None
        row = _make_row(cfg.name, bs, eager_s[bs], graph_s[bs], graphs.get(bs), kernels)
        key = (cfg.name, bs)
        if key in rows_by_key:
            doc["rows"][rows_by_key[key]] = row.to_dict()
        else:
            rows_by_key[key] = len(doc["rows"])
            doc["rows"].append(row.to_dict())
        write_timings(result.timings_path, doc)
        result.rows.append(row)
        speed = f" graph {row.graph_us:,.1f} us ({row.eager_us / row.graph_us:.2f}x)" if row.graph_us else ""
        step(f"{cfg.name} bs={bs}: eager {row.eager_us:,.1f} us{speed}")

    for bs in sizes:
        for mode in ("eager", "graph"):
            if (bs, mode) not in traced:
                continue
            dst = out / trace_name(cfg.name, bs, mode)
            fn = (lambda: model.step(bs)) if mode == "eager" else graphs[bs].graph.replay
            record_trace(torch, fn, f"decode_step[bs={bs}]", dst, opts.steps, on_cuda, nvtx_range)
            result.traces.append(dst)
            step(f"{cfg.name} bs={bs}: {mode} trace -> {dst.name} ({dst.stat().st_size / 1e3:,.0f} kB)")
    if graphs:
        graphs.clear()
        torch.cuda.synchronize()
        torch.cuda.empty_cache()


def _make_row(model: str, bs: int, eager: list[_Timed], graph: list[_Timed], captured: _Captured | None,
              kernels: int | None) -> TimingRow:
    e_all = [x for t in eager for x in t.device_us]
    e_host = [x for t in eager for x in t.host_us]
    g_all = [x for t in graph for x in t.device_us]
    g_host = [x for t in graph for x in t.host_us]
    return TimingRow(
        model=model, batch_size=bs, eager_us=round(statistics.median(e_all), 2),
        graph_us=round(statistics.median(g_all), 2) if g_all else None,
        eager_host_us=round(statistics.median(e_host), 2),
        capture_s=round(captured.capture_s, 4) if captured else None,
        graph_pool_bytes=captured.pool_bytes if captured else None,
        kernels_per_step=kernels, repeats=len(e_all),
        graph_host_us=round(statistics.median(g_host), 2) if g_host else None,
        eager_us_p10=round(_pct(e_all, 0.1), 2), eager_us_p90=round(_pct(e_all, 0.9), 2),
        graph_us_p10=round(_pct(g_all, 0.1), 2) if g_all else None,
        graph_us_p90=round(_pct(g_all, 0.9), 2) if g_all else None,
        rounds=len(eager),
        eager_us_rounds=[round(t.median_us, 2) for t in eager],
        graph_us_rounds=[round(t.median_us, 2) for t in graph] if graph else None,
    )


def _now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")


def iter_batch_sizes(text: str) -> Iterator[int]:
    """Parse ``"1,2,4"`` or ``"1-8"`` ranges of powers of two (``"1-256"``) into batch sizes."""
    for part in text.split(","):
        part = part.strip()
        if not part:
            continue
        try:
            if "-" in part:
                lo_s, hi_s = part.split("-", 1)
                lo, hi = int(lo_s), int(hi_s)
                if lo <= 0 or hi < lo:
                    raise ValueError
                b = lo
                while b <= hi:
                    yield b
                    b *= 2
            else:
                yield int(part)
        except ValueError:
            raise InputError(f"bad batch size {part!r}: use integers like 1,2,4 or a power-of-two range 1-256") \
                from None


def parse_batch_sizes(text: str) -> tuple[int, ...]:
    sizes = sorted(set(iter_batch_sizes(text)))
    if not sizes or sizes[0] <= 0:
        raise InputError(f"no positive batch sizes in {text!r}")
    return tuple(sizes)


def parse_modes(text: str) -> tuple[str, ...]:
    modes = tuple(dict.fromkeys(m.strip() for m in text.split(",") if m.strip()))
    bad = [m for m in modes if m not in MODES]
    if bad or not modes:
        raise InputError(f"unknown mode(s) {', '.join(bad) or '(none)'} in --modes; choose from eager, graph")
    return modes


__all__: Sequence[str] = ("SCHEMA", "SweepOptions", "SweepResult", "TimingRow", "load_timings", "run_sweep",
                          "parse_batch_sizes", "parse_modes", "trace_name", "launch_microbenchmark",
                          "record_trace", "count_kernel_events", "Progress")
