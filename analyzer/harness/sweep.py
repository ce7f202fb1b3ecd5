"""Sweep a decoder over batch sizes and capture lists: unprofiled ground truth and traces.

:func:`run_sweep` does, per model, what the options ask (each part is optional):

1. **Sweep** (``rows``): per batch size, the unprofiled step in each of ``modes``:
   ``eager`` (``eager_us``: median over ``rounds x repeats`` steps of the device time between
   CUDA events recorded before and after each step, steps issued back to back with no host
   sync between them; ``eager_host_us``: median host time to issue one step), ``graph``
   (the step captured as one FULL CUDA graph in its own pool: ``graph_us``, ``capture_s``,
   ``graph_pool_bytes`` = growth of the caching allocator's reserved memory across the
   capture, ``graph_nodes`` = kernel nodes) and ``piecewise`` (graph pieces between eager
   attentions, see :mod:`analyzer.harness.graphs`: ``piecewise_us``, ``piecewise_capture_s``,
   ``piecewise_pool_bytes``, ``piecewise_graphs``, ``piecewise_nodes``). Each round times
   every size and mode once before the next round starts. ``kernels_per_step``: kernels of
   one eager step (a CUDA-only profile). Traces (CPU+CUDA, ``record_shapes=True``, schedule
   wait=1 warmup=2 active=``steps``, each step in ``decode_step[bs=N]``) are saved as
   ``<model>_bs<N>_<mode>.json.gz``.
2. **Profiled vs unprofiled** (``profiled_vs_unprofiled``): per traced size, unprofiled
   blocks (eager steps and FULL-graph replays, alternating) interleaved with an eager trace
   under each profiler setting (``<model>_bs<N>_eager_<setting>.json.gz``); a trace across
   which the eager step drifted beyond ``max_drift`` is recorded again (see :func:`_profiled`).
3. **Graph memory** (``graph_memory``): per capture list and mode (full, piecewise), the
   list captured largest first into one shared pool (:func:`analyzer.harness.graphs.capture_list`).
4. **Serving** (``serving``): a sequence of batch sizes replayed on capture lists
   (:mod:`analyzer.harness.serving`).

``timings.json`` (schema ``launchgap.timings/1``, :mod:`analyzer.timings`) is rewritten after
every unit of work, so an interrupted run resumes where it stopped: rows, traces, profiler
rows and graph-memory entries already there are skipped unless ``force`` (serving entries
are always redone). Without CUDA the eager step runs on the CPU (timed with the host clock),
graph modes and graph memory are skipped with a warning, and serving runs each bucket's
step directly in place of a replay.
"""
from __future__ import annotations

import datetime as _dt
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from ..errors import InputError
from . import import_torch
from .clock import Timed, pct, time_steps
from .compiled import graphs_compiled, warm_compile
from .lists import parse_batch_sizes
from .hf import HFDecoder, HFModelSpec
from .model import Decoder, ModelConfig
from .profiling import (
    Interleaved,
    NvtxRange,
    annotated,
    count_kernel_events,
    count_kernels_per_step,
    nvtx_range_factory,
    record_interleaved,
    record_trace,
)
from .serving import ServingOptions
from ..timings import DRIFT_LIMIT, GRAPH_MODES, SCHEMA, load_timings, write_timings

MODES = ("eager", "graph", "piecewise")
GRAPH_NEEDS_CUDA = "graph mode needs a CUDA GPU (torch.cuda.is_available() is False)"
#: timings.json row field of each mode's median step time.
TIME_KEY = {"eager": "eager_us", "graph": "graph_us", "piecewise": "piecewise_us"}
_MIB = float(1 << 20)


@dataclass(frozen=True)
class SweepOptions:
    """What to record and how. ``trace_batch_sizes`` ``None`` means every swept size.

    ``batch_sizes`` empty: no sweep (graph memory or serving only). ``capture_lists``:
    ``(name, sizes)`` pairs measured in each of ``memory_modes``. ``serving_lists`` with
    ``serving_sequence``: the serving run (``serving`` its options).
    """

    models: tuple[ModelConfig | HFModelSpec, ...]
    batch_sizes: tuple[int, ...]
    out_dir: Path
    modes: tuple[str, ...] = ("eager", "graph")
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
    profiler_settings: tuple[str, ...] = ()
    max_drift: float = DRIFT_LIMIT
    drift_retries: int = 2
    interleave: int = 0
    capture_lists: tuple[tuple[str, tuple[int, ...]], ...] = ()
    memory_modes: tuple[str, ...] = GRAPH_MODES
    serving_lists: tuple[tuple[str, tuple[int, ...]], ...] = ()
    serving_sequence: tuple[int, ...] = ()
    serving_source: str = ""
    serving: ServingOptions = field(default_factory=ServingOptions)
    compile: bool = False

    def validate(self) -> None:
        if not self.models:
            raise InputError("no model to record")
        if self.batch_sizes and min(self.batch_sizes) <= 0:
            raise InputError("batch sizes must be positive integers")
        if not (self.batch_sizes or self.capture_lists or self.serving_lists):
            raise InputError("nothing to record: give batch sizes, --capture-lists or --capture-sizes")
        bad = [m for m in self.modes if m not in MODES]
        if bad or not self.modes:
            raise InputError(f"unknown mode(s) {', '.join(bad) or '(none)'}; choose from {', '.join(MODES)}")
        bad = [m for m in self.memory_modes if m not in GRAPH_MODES]
        if bad or not self.memory_modes:
            raise InputError(f"unknown memory mode(s) {', '.join(bad) or '(none)'}; choose from full, piecewise")
        if self.steps < 1 or self.repeats < 1 or self.rounds < 1 or self.warmup < 0:
            raise InputError("--steps, --repeats and --rounds must be at least 1 and --warmup at least 0")
        if self.device not in ("auto", "cuda", "cpu"):
            raise InputError(f"unknown device {self.device!r}; choose auto, cuda or cpu")
        if self.interleave < 0:
            raise InputError("--interleave must be at least 0")
        if not 0 < self.max_drift < 1 or self.drift_retries < 0:
            raise InputError("--max-drift must lie in (0, 1) and --drift-retries be at least 0")
        if self.profiler_settings and not self.batch_sizes:
            raise InputError("--profiler-settings needs batch sizes to trace (--batch-sizes)")
        if self.serving_lists and not self.serving_sequence:
            raise InputError("serving needs a sequence of batch sizes")

    @property
    def traced_sizes(self) -> tuple[int, ...]:
        if self.trace_batch_sizes is None:
            return self.batch_sizes
        return tuple(b for b in self.batch_sizes if b in self.trace_batch_sizes)

    def max_batch_size(self) -> int:
        sizes = list(self.batch_sizes) + list(self.serving_sequence)
        sizes += [s for _, lst in self.capture_lists + self.serving_lists for s in lst]
        return max(sizes)


@dataclass(frozen=True)
class TimingRow:
    """Ground truth for one (model, batch size). Times in microseconds; ``None`` = not measured.

    ``eager_us``/``graph_us``/``piecewise_us``: median device time per step between CUDA
    events (CPU: host wall time). ``*_host_us``: median host time to issue one step.
    ``capture_s``/``piecewise_capture_s``: wall seconds to capture (instantiation included).
    ``graph_pool_bytes``/``piecewise_pool_bytes``: reserved-memory growth across the capture.
    ``kernels_per_step``: kernels of one eager step; ``graph_nodes``/``piecewise_nodes``:
    kernel nodes of the FULL graph / of all pieces; ``piecewise_graphs``: pieces per step;
    ``graph_replay_ok``/``piecewise_replay_ok``: the replay's logits matched the eager step's.
    ``repeats``: timed steps behind each median (all rounds). ``*_p10``/``*_p90`` give the
    spread over steps, ``*_rounds`` the median of each round.
    """

    model: str
    batch_size: int
    eager_us: float | None
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
    graph_nodes: int | None = None
    graph_replay_ok: bool | None = None
    piecewise_us: float | None = None
    piecewise_host_us: float | None = None
    piecewise_us_p10: float | None = None
    piecewise_us_p90: float | None = None
    piecewise_us_rounds: list[float] | None = None
    piecewise_capture_s: float | None = None
    piecewise_pool_bytes: int | None = None
    piecewise_graphs: int | None = None
    piecewise_nodes: int | None = None
    piecewise_replay_ok: bool | None = None

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        if self.piecewise_us is None:  # keep rows of sweeps without piecewise mode as they were
            for k in [k for k in d if k.startswith("piecewise_")]:
                del d[k]
        return d


@dataclass
class SweepResult:
    """What a run wrote: the timings file, new rows and traces, skipped items, warnings."""

    timings_path: Path
    rows: list[TimingRow] = field(default_factory=list)
    traces: list[Path] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    profiled: list[dict[str, Any]] = field(default_factory=list)
    graph_memory: list[dict[str, Any]] = field(default_factory=list)
    serving: list[dict[str, Any]] = field(default_factory=list)


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
# progress and the work plan


class Progress:
    """A progress bar for :func:`run_sweep`: redrawn in place on a terminal, one line per item elsewhere."""

    def __init__(self, stream: Any = None, width: int = 24) -> None:
        self.width = width
        self.stream = stream if stream is not None else sys.stderr
        self.tty = bool(getattr(self.stream, "isatty", lambda: False)())
        self.t0 = time.perf_counter()

    def __call__(self, done: int, total: int, label: str) -> None:
        total = max(total, 1)
        filled = self.width * min(done, total) // total
        bar = "#" * filled + "-" * (self.width - filled)
        line = f"[{bar}] {done}/{total} {time.perf_counter() - self.t0:6.1f}s {label}"
        if self.tty:
            self.stream.write("\r" + line[:120].ljust(120) + ("\n" if done >= total else ""))
        else:
            self.stream.write(line + "\n")
        self.stream.flush()


@dataclass(frozen=True)
class _Task:
    """One unit of work: ``what`` is ``timing``, ``trace <mode>``, ``profiled <setting>``,
    ``memory <mode> <list>`` or ``serving``."""

    model: str
    bs: int
    what: str


def _plan(opts: SweepOptions, on_cuda: bool) -> list[_Task]:
    modes = [m for m in opts.modes if m == "eager" or on_cuda]
    traced = set(opts.traced_sizes)
    tasks: list[_Task] = []
    for cfg in opts.models:
        for bs in opts.batch_sizes:
            tasks.append(_Task(cfg.name, bs, "timing"))
            if opts.trace and bs in traced:
                tasks += [_Task(cfg.name, bs, f"trace {mode}") for mode in modes]
        for bs in opts.traced_sizes:
            tasks += [_Task(cfg.name, bs, f"profiled {s}") for s in opts.profiler_settings]
        if on_cuda:
            for name, _sizes in opts.capture_lists:
                tasks += [_Task(cfg.name, 0, f"memory {mode} {name}") for mode in opts.memory_modes]
        if opts.serving_lists:
            tasks.append(_Task(cfg.name, 0, "serving"))
    return tasks


def _row_complete(row: dict[str, Any] | None, modes: Sequence[str]) -> bool:
    return row is not None and all(row.get(TIME_KEY[m]) is not None for m in modes)


class _Doc:
    """The timings document being written, with lookups for resuming."""

    def __init__(self, doc: dict[str, Any], path: Path) -> None:
        self.doc, self.path = doc, path

    def save(self) -> None:
        write_timings(self.path, self.doc)

    def row_index(self, model: str, bs: int) -> int | None:
        for i, r in enumerate(self.doc["rows"]):
            if r["model"] == model and r["batch_size"] == bs:
                return i
        return None

    def put_row(self, row: dict[str, Any]) -> None:
        i = self.row_index(row["model"], row["batch_size"])
        if i is None:
            self.doc["rows"].append(row)
        else:
            self.doc["rows"][i] = row

    def _put(self, section: str, item: dict[str, Any], key: Callable[[dict[str, Any]], tuple]) -> None:
        items = self.doc.setdefault(section, [])
        for i, old in enumerate(items):
            if key(old) == key(item):
                items[i] = item
                return
        items.append(item)

    def find(self, section: str, **match: Any) -> dict[str, Any] | None:
        for item in self.doc.get(section) or []:
            if all(item.get(k) == v for k, v in match.items()):
                return item
        return None

    def put_profiled(self, item: dict[str, Any]) -> None:
        self._put("profiled_vs_unprofiled", item, lambda r: (r["model"], r["batch_size"], r["profiler"]))

    def put_memory(self, item: dict[str, Any]) -> None:
        self._put("graph_memory", item, lambda r: (r["model"], r["mode"], r["list_name"]))

    def put_serving(self, item: dict[str, Any]) -> None:
        self._put("serving", item, lambda r: (r["model"], r["graph_mode"], r["list_name"]))


def _task_done(t: _Task, doc: _Doc, out: Path, modes: Sequence[str]) -> bool:
    kind, _, rest = t.what.partition(" ")
    if kind == "timing":
        i = doc.row_index(t.model, t.bs)
        return _row_complete(doc.doc["rows"][i] if i is not None else None, modes)
    if kind == "trace":
        return (out / trace_name(t.model, t.bs, rest)).exists()
    if kind == "profiled":
        row = doc.find("profiled_vs_unprofiled", model=t.model, batch_size=t.bs, profiler=rest)
        return row is not None and (out / trace_name(t.model, t.bs, f"eager_{rest}")).exists()
    if kind == "memory":
        mode, _, name = rest.partition(" ")
        return doc.find("graph_memory", model=t.model, mode=mode, list_name=name) is not None
    return False  # serving entries are always redone


# --------------------------------------------------------------------------------------------
# the run


def run_sweep(opts: SweepOptions, progress: Callable[[int, int, str], None] | None = None,
              log: Callable[[str], None] | None = None) -> SweepResult:
    """Run what ``opts`` asks; see the module docstring for what is measured.

    ``progress(done, total, label)`` is called after each unit of work; ``log(line)`` for
    notes (warnings, environment). Both default to silence: the CLI passes
    :class:`Progress` and a stderr writer.
    """
    opts.validate()
    torch = import_torch()
    on_cuda = torch.cuda.is_available() if opts.device == "auto" else opts.device == "cuda"
    if on_cuda and not torch.cuda.is_available():
        raise InputError("--device cuda asked, but torch.cuda.is_available() is False")
    say = log or (lambda _line: None)
    result = SweepResult(timings_path=Path(opts.out_dir) / "timings.json")

    def warn(text: str) -> None:
        result.warnings.append(text)
        say(f"warning: {text}")

    graph_modes = [m for m in opts.modes if m != "eager"]
    if not on_cuda:
        if opts.batch_sizes and graph_modes:
            if "eager" not in opts.modes:
                raise InputError(f"{GRAPH_NEEDS_CUDA}; run with --modes eager on this machine")
            warn(f"{GRAPH_NEEDS_CUDA}: {', '.join(graph_modes)} skipped, eager runs on the CPU")
        if opts.capture_lists:
            if not (opts.batch_sizes or opts.serving_lists):
                raise InputError("graph memory needs a CUDA GPU (torch.cuda.is_available() is False)")
            warn("graph memory needs a CUDA GPU: --capture-lists skipped")
        if opts.serving_lists:
            warn("no CUDA: serving runs each bucket's step directly in place of a graph replay")
    modes = tuple(m for m in opts.modes if m == "eager" or on_cuda)

    out = Path(opts.out_dir)
    out.mkdir(parents=True, exist_ok=True)
    tpath = result.timings_path
    old: dict[str, Any] = load_timings(tpath) if tpath.exists() else {}
    env = _environment(torch, on_cuda)
    if old and (old.get("device"), old.get("torch")) != (env["device"], env["torch"]):
        raise InputError(f"holds timings from {old.get('device')} / torch {old.get('torch')}, this run is "
                         f"{env['device']} / torch {env['torch']}; use another --out", str(tpath))
    if old:
        _check_resumable(old, opts, tpath)
    doc = _Doc({**old, "schema": SCHEMA, **env, "created": old.get("created") or _now(),
                "context_len": opts.context_len, "start_pos": opts.start_pos,
                "models": {**old.get("models", {}), **{c.name: model_entry(c, opts.compile) for c in opts.models}},
                "micro": old.get("micro"), "rows": list(old.get("rows", []))}, tpath)
    say(f"device {env['device']}, torch {env['torch']}, cuda {env['cuda']}, driver {env['driver']}")

    if on_cuda and opts.micro and opts.batch_sizes and (opts.force or not doc.doc.get("micro")):
        doc.doc["micro"] = launch_microbenchmark(torch)
        doc.save()
        say(f"micro-benchmark: {doc.doc['micro']}")

    all_tasks = _plan(opts, on_cuda)
    counter = {"done": 0}

    def step(label: str, advance: bool = True) -> None:
        counter["done"] += int(advance)
        if progress is not None:
            progress(counter["done"], len(all_tasks), label)

    if opts.trace and opts.trace_batch_sizes is not None:
        missing = sorted(set(opts.trace_batch_sizes) - set(opts.batch_sizes))
        if missing:
            warn(f"trace batch sizes {missing} are not swept (--batch-sizes); no trace for them")
    nvtx_range = nvtx_range_factory(torch, on_cuda)
    for cfg in opts.models:
        tasks = [t for t in all_tasks if t.model == cfg.name]
        todo = [t for t in tasks if opts.force or not _task_done(t, doc, out, modes)]
        for t in tasks:
            if t not in todo:
                result.skipped.append(f"{t.model} {t.what}" + (f" bs={t.bs}" if t.bs else ""))
                step(f"{t.model} {t.what}" + (f" bs={t.bs}" if t.bs else "") + ": done before, skipped")
        if not todo:
            continue
        model = build_model(cfg, opts, on_cuda)
        say(f"{cfg.name}: {model.param_count() / 1e9:.2f} B params, weights {model.weight_bytes() / 2**30:.2f} GiB, "
            f"KV cache {model.kv_cache_bytes() / 2**30:.2f} GiB")
        entry = doc.doc["models"][cfg.name]
        if isinstance(model, HFDecoder):
            entry.update(model.describe())
        compiled_before = graphs_compiled(torch) if model.compiled else 0
        if model.compiled:
            entry["compile"] = warm_compile(torch, model.step, _sizes_of(opts), on_cuda)
            say(f"{cfg.name}: compiled in {entry['compile']['compile_s']:.1f} s "
                f"({entry['compile']['graphs']} graphs)")
        doc.save()
        mctx = _Ctx(torch, opts, on_cuda, _model_modes(model, modes, warn), out, doc, result, step, nvtx_range, say)
        _sweep_model(mctx, model, [t for t in todo if t.what == "timing" or t.what.startswith("trace")])
        if entry.get("capture", {}).get("ok") is False:
            skipped = [t for t in todo if t.what.split()[0] in ("profiled", "memory", "serving")]
            if skipped:
                warn(f"{cfg.name}: no CUDA graph ({entry['capture']['reason']}): "
                     f"{len(skipped)} profiled/memory/serving items skipped")
                for t in skipped:
                    step(f"{t.model} {t.what}: skipped (no graph)")
            todo = [t for t in todo if t not in skipped]
        _profiled(mctx, model, [t for t in todo if t.what.startswith("profiled")])
        _memory(mctx, model, [t for t in todo if t.what.startswith("memory")])
        if any(t.what == "serving" for t in todo):
            _serving(mctx, model)
        if model.compiled:  # recompiles after the warm-up would show here
            entry["compile"]["graphs_after_run"] = graphs_compiled(torch) - compiled_before
            doc.save()
        del model
        if on_cuda:
            _release(torch)
    return result


def build_model(cfg: ModelConfig | HFModelSpec, opts: SweepOptions, on_cuda: bool) -> Decoder | HFDecoder:
    """The decoder of ``cfg`` (built-in preset or transformers config), compiled if ``opts.compile``."""
    device = "cuda" if on_cuda else "cpu"
    if isinstance(cfg, HFModelSpec):
        return HFDecoder(cfg, max_batch_size=opts.max_batch_size(), context_len=opts.context_len,
                         start_pos=opts.start_pos, device=device, seed=opts.seed, compile=opts.compile)
    model = Decoder(cfg, max_batch_size=opts.max_batch_size(), context_len=opts.context_len,
                    start_pos=opts.start_pos, device=device, seed=opts.seed)
    if opts.compile:
        model.compile()
    return model


def model_entry(cfg: ModelConfig | HFModelSpec, compiled: bool) -> dict[str, Any]:
    """The timings' ``models`` entry: dimensions, ``model_source`` and ``compiled``."""
    entry = cfg.to_dict()
    if isinstance(cfg, ModelConfig):
        entry["model_source"] = {"kind": "preset", "preset": cfg.preset}
    entry["compiled"] = compiled
    return entry


def _sizes_of(opts: SweepOptions) -> list[int]:
    sizes = list(opts.batch_sizes) or [s for _, lst in opts.capture_lists + opts.serving_lists for s in lst]
    return sizes or [1]


def _model_modes(model: Decoder | HFDecoder, modes: tuple[str, ...], warn: Callable[[str], None]) -> tuple[str, ...]:
    """The run's modes less piecewise where the model cannot split its step (transformers, compiled)."""
    if "piecewise" not in modes or model.supports_piecewise:
        return modes
    from .hf import PIECEWISE_UNSUPPORTED

    why = PIECEWISE_UNSUPPORTED if isinstance(model, HFDecoder) else \
        "piecewise mode runs the decoder's stages uncompiled, so it is not recorded with --compile"
    warn(f"{model.cfg.name}: {why}")
    return tuple(m for m in modes if m != "piecewise") or ("eager",)


@dataclass
class _Ctx:
    torch: Any
    opts: SweepOptions
    on_cuda: bool
    modes: tuple[str, ...]
    out: Path
    doc: _Doc
    result: SweepResult
    step: Callable[..., None]
    nvtx_range: NvtxRange
    say: Callable[[str], None]


def _release(torch: Any) -> None:
    import gc

    gc.collect()
    torch.cuda.synchronize()
    torch.cuda.empty_cache()


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


# --------------------------------------------------------------------------------------------
# 1. the sweep


@dataclass
class _SizeCapture:
    run: Callable[[], Any]
    capture_s: float
    pool_bytes: int
    nodes: int | None
    graphs: int
    replay_ok: bool | None = None


def _capture_own_pool(ctx: _Ctx, model: Decoder, bs: int, mode: str, stream: Any) -> _SizeCapture:
    """Capture one size in its own pool; reserved-memory growth across the capture is its pool.

    The replay is then checked against the eager step from the same state (``replay_ok``).
    """
    from .graphs import REPLAY_TOLERANCE, capture_full, capture_piecewise, prepare, replay_error, settle

    torch = ctx.torch
    step = prepare(torch, model, bs, mode, stream, 3)
    settle(torch)
    reserved0 = torch.cuda.memory_reserved()
    pool = torch.cuda.graph_pool_handle()
    cap = (capture_full(torch, model, bs, pool, stream) if step is None
           else capture_piecewise(torch, step, pool, stream))
    torch.cuda.synchronize()
    pool_bytes = int(torch.cuda.memory_reserved() - reserved0)
    err = replay_error(torch, model, cap)
    if err > REPLAY_TOLERANCE:
        ctx.say(f"warning: {model.cfg.name} bs={bs} {mode}: replay differs from the eager step "
                f"(max logit error {err:.3g} of the largest logit)")
    return _SizeCapture(cap.run, cap.capture_s, pool_bytes, cap.nodes, len(cap.graphs), err <= REPLAY_TOLERANCE)


def _capture_sizes(ctx: _Ctx, model: Decoder | HFDecoder, caps: dict[tuple[int, str], _SizeCapture],
                   sizes: list[int], timed: list[int], traced: set[tuple[int, str]]) -> str | None:
    """Capture every size the sweep times or traces in each graph mode, each in its own pool; the
    one-line reason when the step cannot be captured (``caps`` then emptied), else ``None``."""
    from .hf import capture_failure_reason

    torch = ctx.torch
    stream = torch.cuda.Stream()
    try:
        for bs in sizes:
            for mode in (m for m in ctx.modes if m != "eager"):
                if bs in timed or (bs, mode) in traced:
                    caps[(bs, mode)] = _capture_own_pool(ctx, model, bs, "full" if mode == "graph" else mode, stream)
    except Exception as exc:  # noqa: BLE001 - any capture error is the model's: report it, keep eager
        caps.clear()
        torch.cuda.synchronize()
        _release(torch)
        return capture_failure_reason(exc)
    return None


def _sweep_model(ctx: _Ctx, model: Decoder | HFDecoder, tasks: list[_Task]) -> None:
    """Capture, time (in interleaved rounds), count and trace every batch size of one model."""
    torch, opts, cfg = ctx.torch, ctx.opts, model.cfg
    timed = sorted({t.bs for t in tasks if t.what == "timing"})
    traced = {(t.bs, t.what.split()[1]) for t in tasks if t.what.startswith("trace")}
    if not tasks:
        return
    caps: dict[tuple[int, str], _SizeCapture] = {}
    if any(m != "eager" for m in ctx.modes):
        reason = _capture_sizes(ctx, model, caps, sorted({t.bs for t in tasks}), timed, traced)
        ctx.doc.doc["models"][cfg.name]["capture"] = {"ok": reason is None, "reason": reason}
        if reason is not None:
            ctx.result.warnings.append(f"{cfg.name}: no CUDA graph: {reason}")
            ctx.say(f"warning: {cfg.name}: cannot capture the step as a CUDA graph ({reason}); eager timings only")
            ctx = replace(ctx, modes=("eager",))
            for bs, mode in sorted(t for t in traced if t[1] != "eager"):
                ctx.step(f"{cfg.name} bs={bs}: {mode} trace skipped (no graph)")
            traced = {t for t in traced if t[1] == "eager"}

    def fn_of(bs: int, mode: str) -> Callable[[], Any]:
        return (lambda: model.step(bs)) if mode == "eager" else caps[(bs, mode)].run

    # Rounds go over all sizes before the next round starts, so a slow phase of the host
    # (seconds long on a shared machine) lands in one round of every size, not in all
    # steps of one size; each row's median pools the steps of all rounds.
    series: dict[tuple[int, str], list[Timed]] = {(bs, m): [] for bs in timed for m in ctx.modes}
    for r in range(opts.rounds):
        if timed:
            ctx.step(f"{cfg.name}: timing round {r + 1}/{opts.rounds} over {len(timed)} batch sizes", advance=False)
        for bs in timed:
            for mode in ctx.modes:
                series[(bs, mode)].append(time_steps(torch, fn_of(bs, mode), opts.repeats, opts.warmup, ctx.on_cuda))
    for bs in timed:
        count = ctx.on_cuda and opts.count_kernels and "eager" in ctx.modes
        kernels = count_kernels_per_step(torch, fn_of(bs, "eager")) if count else None
        row = _make_row(cfg.name, bs, series[(bs, "eager")] if "eager" in ctx.modes else [],
                        series[(bs, "graph")] if "graph" in ctx.modes else [], caps.get((bs, "graph")), kernels,
                        series[(bs, "piecewise")] if "piecewise" in ctx.modes else [], caps.get((bs, "piecewise")))
        ctx.doc.put_row(row.to_dict())
        ctx.doc.save()
        ctx.result.rows.append(row)
        ctx.step(f"{cfg.name} bs={bs}: " + ", ".join(
            f"{m} {getattr(row, TIME_KEY[m]):,.1f} us" for m in ctx.modes if getattr(row, TIME_KEY[m]) is not None))

    for bs in sorted({b for b, _ in traced}):
        for mode in MODES:
            if (bs, mode) not in traced:
                continue
            dst = ctx.out / trace_name(cfg.name, bs, mode)
            record_trace(torch, fn_of(bs, mode), f"decode_step[bs={bs}]", dst, opts.steps, ctx.on_cuda,
                         ctx.nvtx_range)
            ctx.result.traces.append(dst)
            ctx.step(f"{cfg.name} bs={bs}: {mode} trace -> {dst.name} ({dst.stat().st_size / 1e3:,.0f} kB)")
    if caps:
        caps.clear()
        _release(torch)


def _median_or_none(values: list[float]) -> float | None:
    return round(statistics.median(values), 2) if values else None


def _make_row(model: str, bs: int, eager: list[Timed], graph: list[Timed], captured: _SizeCapture | None,
              kernels: int | None, piecewise: Sequence[Timed] = (), pw_captured: _SizeCapture | None = None
              ) -> TimingRow:
    e_all = [x for t in eager for x in t.device_us]
    g_all = [x for t in graph for x in t.device_us]
    p_all = [x for t in piecewise for x in t.device_us]

    def host(ts: Sequence[Timed]) -> float | None:
        return _median_or_none([x for t in ts for x in t.host_us])

    def spread(values: list[float], q: float) -> float | None:
        return round(pct(values, q), 2) if values else None

    def per_round(ts: Sequence[Timed]) -> list[float] | None:
        return [round(t.median_us, 2) for t in ts] if ts else None

    return TimingRow(
        model=model, batch_size=bs, eager_us=_median_or_none(e_all), graph_us=_median_or_none(g_all),
        eager_host_us=host(eager),
        capture_s=round(captured.capture_s, 4) if captured else None,
        graph_pool_bytes=captured.pool_bytes if captured else None,
        kernels_per_step=kernels, repeats=len(e_all or g_all or p_all),
        graph_host_us=host(graph),
        eager_us_p10=spread(e_all, 0.1), eager_us_p90=spread(e_all, 0.9),
        graph_us_p10=spread(g_all, 0.1), graph_us_p90=spread(g_all, 0.9),
        rounds=max(len(eager), len(graph), len(piecewise)),
        eager_us_rounds=per_round(eager), graph_us_rounds=per_round(graph),
        graph_nodes=captured.nodes if captured else None,
        graph_replay_ok=captured.replay_ok if captured else None,
        piecewise_us=_median_or_none(p_all), piecewise_host_us=host(piecewise),
        piecewise_us_p10=spread(p_all, 0.1), piecewise_us_p90=spread(p_all, 0.9),
        piecewise_us_rounds=per_round(piecewise),
        piecewise_capture_s=round(pw_captured.capture_s, 4) if pw_captured else None,
        piecewise_pool_bytes=pw_captured.pool_bytes if pw_captured else None,
        piecewise_graphs=pw_captured.graphs if pw_captured else None,
        piecewise_nodes=pw_captured.nodes if pw_captured else None,
        piecewise_replay_ok=pw_captured.replay_ok if pw_captured else None,
    )


# --------------------------------------------------------------------------------------------
# 2. profiled vs unprofiled


#: Seconds of untimed eager steps before the first unprofiled block of a size (at least
#: ``--warmup`` steps): the host and GPU reach their steady clocks before anything is timed.
WARM_S = 0.5


@dataclass
class _Block:
    """One unprofiled block: eager steps and, on CUDA, FULL-graph replays, timed in alternating halves."""

    eager: list[float]
    graph: list[float]

    @property
    def eager_us(self) -> float:
        return statistics.median(self.eager)

    @property
    def graph_us(self) -> float | None:
        return statistics.median(self.graph) if self.graph else None


def _warm(fn: Callable[[], Any], steps: int, seconds: float, sync: Callable[[], None]) -> None:
    """Run ``fn`` for at least ``steps`` calls and ``seconds`` of wall time."""
    t0, n = time.perf_counter(), 0
    while n < steps or time.perf_counter() - t0 < seconds:
        fn()
        n += 1
        if n % 8 == 0:
            sync()
    sync()


def _block(ctx: _Ctx, eager: Callable[[], Any], graph: Callable[[], Any] | None) -> _Block:
    """``--repeats`` eager steps in two halves, each followed by as many graph replays (CUDA), so a
    slow phase of the host or GPU lands in both modes alike."""
    torch, opts = ctx.torch, ctx.opts
    halves = (opts.repeats - opts.repeats // 2, opts.repeats // 2)
    e: list[float] = []
    g: list[float] = []
    for n in halves:
        if n == 0:
            continue
        e += time_steps(torch, eager, n, opts.warmup, ctx.on_cuda).device_us
        if graph is not None:
            g += time_steps(torch, graph, n, opts.warmup, True).device_us
    return _Block(e, g)


def _halves_ratio(values: Sequence[float]) -> float:
    """Median of the second half of ``values`` over the median of the first (a window's drift + 1)."""
    half = len(values) // 2
    if half == 0:
        return 1.0
    return statistics.median(values[half:]) / statistics.median(values[:half])


def _profiled(ctx: _Ctx, model: Decoder, tasks: list[_Task]) -> None:
    """Per traced size: unprofiled blocks interleaved with the traces of each profiler setting.

    After a warm-up (:data:`WARM_S`), block U0, trace of the first setting, U1, trace of the
    second, U2, ...: block U(i) is the "after" of trace i and the "before" of trace i + 1, so
    each trace sits between two blocks timed seconds apart. A block times ``--repeats`` eager
    steps and, on CUDA, as many replays of the size's FULL graph (captured here, in its own
    pool), in alternating halves, so the measured speedup pairs steps of one moment. When the
    eager step drifts by more than ``--max-drift`` across a trace (``after / before - 1``: the
    host changed speed), the trace is recorded again between the last block and a new one, up
    to ``--drift-retries`` times; the record keeps the last attempt, its drift and the number of
    attempts. Record fields: see ``profiled_vs_unprofiled`` in :mod:`analyzer.timings`.

    With ``--interleave N`` the truth comes from inside the trace's own window instead
    (:func:`record_interleaved`): N cycles of unprofiled (wait-phase) and profiled (active)
    steps; ``unprofiled_eager_us`` is the median of the counted wait steps, ``_before``/``_after``
    the medians of their first and second halves (the drift is the window's own),
    ``unprofiled_steps_us``/``profiled_steps_us`` every counted step in cycle order, the blocks
    around (still timed, for the graph step) are kept as ``block_eager_us_before``/``_after``.
    """
    if not tasks:
        return
    torch, opts, cfg = ctx.torch, ctx.opts, model.cfg
    sync = torch.cuda.synchronize if ctx.on_cuda else (lambda: None)
    stream = torch.cuda.Stream() if ctx.on_cuda else None
    for bs in sorted({t.bs for t in tasks}):
        settings = [t.what.split()[1] for t in tasks if t.bs == bs]
        cap = _capture_own_pool(ctx, model, bs, "full", stream) if ctx.on_cuda else None
        graph = cap.run if cap is not None else None

        def eager(bs: int = bs) -> Any:
            return model.step(bs)

        _warm(eager, opts.warmup, WARM_S, sync)
        prev = _block(ctx, eager, graph)
        for setting in settings:
            dst = ctx.out / trace_name(cfg.name, bs, f"eager_{setting}")
            label = f"decode_step[bs={bs}]"
            inter: Interleaved | None = None
            for attempt in range(1, opts.drift_retries + 2):
                if opts.interleave:
                    inter = record_interleaved(torch, lambda: annotated(label, eager, ctx.nvtx_range), dst,
                                               ctx.on_cuda, active=opts.steps, cycles=opts.interleave, setting=setting)
                else:
                    record_trace(torch, eager, label, dst, opts.steps, ctx.on_cuda, ctx.nvtx_range, setting=setting)
                after = _block(ctx, eager, graph)
                before, prev = prev, after
                drift = (after.eager_us / before.eager_us if inter is None else _halves_ratio(inter.unprofiled_us)) - 1
                if abs(drift) <= opts.max_drift or attempt > opts.drift_retries:
                    break
                ctx.say(f"{cfg.name} bs={bs} {setting}: unprofiled eager step drifted {drift:+.1%} across the "
                        f"trace (limit {opts.max_drift:.0%}); recording it again")
            pooled_g = before.graph + after.graph
            item = {"model": cfg.name, "batch_size": bs, "profiler": setting,
                    "unprofiled_eager_us_before": round(before.eager_us, 2),
                    "unprofiled_eager_us_after": round(after.eager_us, 2),
                    "unprofiled_eager_us": round(statistics.median(before.eager + after.eager), 2),
                    "unprofiled_graph_us": round(statistics.median(pooled_g), 2) if pooled_g else None,
                    "unprofiled_graph_us_before": None if before.graph_us is None else round(before.graph_us, 2),
                    "unprofiled_graph_us_after": None if after.graph_us is None else round(after.graph_us, 2),
                    "drift": round(drift, 4), "drift_limit": opts.max_drift, "attempts": attempt,
                    "trace": dst.name, "repeats": opts.repeats, "profiled_steps": opts.steps}
            if inter is not None:
                u = inter.unprofiled_us
                half = len(u) // 2
                item.update({"truth": "interleaved", "interleaved_cycles": inter.cycles,
                             "unprofiled_eager_us_before": round(statistics.median(u[:half]), 2),
                             "unprofiled_eager_us_after": round(statistics.median(u[half:]), 2),
                             "unprofiled_eager_us": round(statistics.median(u), 2),
                             "profiled_eager_us": round(statistics.median(inter.profiled_us), 2),
                             "unprofiled_steps_us": [round(x, 1) for x in u],
                             "profiled_steps_us": [round(x, 1) for x in inter.profiled_us],
                             "block_eager_us_before": round(before.eager_us, 2),
                             "block_eager_us_after": round(after.eager_us, 2)})
            if abs(drift) > opts.max_drift:
                ctx.result.warnings.append(f"{cfg.name} bs={bs} {setting}: drift {drift:+.1%} after {attempt} "
                                           f"attempts (limit {opts.max_drift:.0%})")
                ctx.say(f"warning: {ctx.result.warnings[-1]}")
            ctx.doc.put_profiled(item)
            ctx.doc.save()
            ctx.result.profiled.append(item)
            ctx.result.traces.append(dst)
            g = item["unprofiled_graph_us"]
            where = "around" if inter is None else f"in {inter.cycles} cycles of"
            ctx.step(f"{cfg.name} bs={bs} {setting}: eager {item['unprofiled_eager_us_before']:,.1f} / "
                     f"{item['unprofiled_eager_us_after']:,.1f} us {where} {dst.name} "
                     f"({dst.stat().st_size / 1e3:,.0f} kB), drift {drift:+.1%}"
                     + ("" if g is None else f", graph {g:,.1f} us"))
        if cap is not None:
            del cap, graph
            _release(torch)


# --------------------------------------------------------------------------------------------
# 3. graph memory


def _memory(ctx: _Ctx, model: Decoder, tasks: list[_Task]) -> None:
    """Capture each list in each mode into one shared pool, largest first; write its entry."""
    if not tasks:
        return
    from .graphs import REPLAY_TOLERANCE, capture_list, fill_missing_nodes, replay_error

    torch, cfg = ctx.torch, model.cfg
    lists = dict(ctx.opts.capture_lists)
    stream = torch.cuda.Stream()
    fallback_counts: dict[tuple[str, int], int] = {}
    notes = ctx.doc.doc.setdefault("graph_memory_method", {
        "policy": "sizes captured largest first into one shared pool on one capture stream; before the list and "
                  "around each capture: synchronize + empty_cache, then memory_reserved (allocator) and "
                  "mem_get_info total-free (driver); capture_s sums capture + instantiate, warm-ups excluded; "
                  "afterwards each replay is checked against the eager step (relative logit error <= 0.02)",
        "nodes": "kernel nodes of the captured cudaGraph_t (cuGraphGetNodes); piecewise: all pieces of the size",
    })
    for t in tasks:
        _, mode, name = t.what.split(" ", 2)
        cl = capture_list(torch, model, lists[name], mode, name, stream)
        entry = cl.entry
        errors = {size: replay_error(torch, model, cap) for size, cap in cl.captures.items()}
        bad = sorted(size for size, err in errors.items() if err > REPLAY_TOLERANCE)
        if bad:
            notes.setdefault("replay_mismatch", []).append(f"{cfg.name} {mode} {name}: sizes {bad}")
            ctx.say(f"warning: {cfg.name} {mode} {name}: replays of sizes {bad} differ from the eager step")
        if mode == "piecewise":
            notes["piecewise_outputs"] = ("weak aliases (memory reusable by later captures, as vLLM)" if cl.aliased
                                          else "held (this torch lacks weak aliases: piecewise pools overstated)")
        cl.release(torch)
        if fill_missing_nodes(torch, model, entry, mode, lambda fn: count_kernels_per_step(torch, fn),
                              fallback_counts):
            notes["nodes_fallback"] = "some node counts are kernels of one direct run (a CUDA-only profile)"
            _release(torch)
        ctx.doc.put_memory(entry)
        ctx.doc.save()
        ctx.result.graph_memory.append(entry)
        ctx.step(f"{cfg.name} {mode} {name}: {entry['graphs']} graphs, device {entry['device_used_mib']:,.0f} MiB, "
                 f"reserved {entry['reserved_mib']:,.0f} MiB, capture {entry['capture_s']:.2f} s")


# --------------------------------------------------------------------------------------------
# 4. serving


def _serving(ctx: _Ctx, model: Decoder) -> None:
    from .serving import run_serving

    opts = ctx.opts
    lists = [(name, list(sizes)) for name, sizes in opts.serving_lists]
    entries = run_serving(ctx.torch, model, lists, opts.serving_sequence, opts.serving_source, opts.serving,
                          ctx.on_cuda, ctx.out, ctx.nvtx_range, progress=ctx.say)
    for e in entries:
        ctx.doc.put_serving(e)
        ctx.result.serving.append(e)
        if e["trace"]:
            ctx.result.traces.append(ctx.out / e["trace"])
    ctx.doc.save()
    summary = "; ".join(f"{e['list_name']}: {e['throughput_tokens_per_s']:,.0f} tok/s" for e in entries)
    ctx.step(f"{model.cfg.name} serving {len(opts.serving_sequence)} steps: {summary}")


def _now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")


def parse_modes(text: str) -> tuple[str, ...]:
    modes = tuple(dict.fromkeys(m.strip() for m in text.split(",") if m.strip()))
    bad = [m for m in modes if m not in MODES]
    if bad or not modes:
        raise InputError(f"unknown mode(s) {', '.join(bad) or '(none)'} in --modes; choose from {', '.join(MODES)}")
    return modes


__all__: Sequence[str] = (
    "MODES", "SCHEMA", "Progress", "SweepOptions", "SweepResult", "TimingRow", "count_kernel_events",
    "launch_microbenchmark", "load_timings", "parse_batch_sizes", "parse_modes", "record_trace", "run_sweep",
    "trace_name",
)
