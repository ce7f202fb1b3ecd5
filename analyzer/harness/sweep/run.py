"""The run: :func:`run_sweep` builds each model and runs the four measurement parts it needs."""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from ...errors import InputError
from ...timings import SCHEMA, load_timings
from .. import import_torch
from ..compiled import graphs_compiled, warm_compile
from ..hf import HFDecoder, HFModelSpec
from ..model import Decoder, ModelConfig
from ..profiling import nvtx_range_factory
from .context import Ctx, release
from .document import SweepResult, TimingsDoc, check_resumable, environment, model_entry, now
from .memory import record_memory
from .micro import launch_microbenchmark
from .options import GRAPH_NEEDS_CUDA, SweepOptions
from .profiled import record_profiled
from .serving import record_serving
from .sizes import sweep_model
from .tasks import Task, plan_tasks, task_done


def run_sweep(opts: SweepOptions, progress: Callable[[int, int, str], None] | None = None,
              log: Callable[[str], None] | None = None) -> SweepResult:
    """Run what ``opts`` asks; see :mod:`launchgap.harness.sweep` for what is measured.

    ``progress(done, total, label)`` is called after each unit of work; ``log(line)`` for
    notes (warnings, environment). Both default to silence: the CLI passes
    :class:`~launchgap.harness.sweep.tasks.Progress` and a stderr writer.
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

    if not on_cuda:
        _no_cuda_notes(opts, warn)
    modes = tuple(m for m in opts.modes if m == "eager" or on_cuda)
    out = Path(opts.out_dir)
    out.mkdir(parents=True, exist_ok=True)
    doc = _open_doc(torch, opts, on_cuda, result.timings_path, say)
    if on_cuda and opts.micro and opts.batch_sizes and (opts.force or not doc.doc.get("micro")):
        doc.doc["micro"] = launch_microbenchmark(torch)
        doc.save()
        say(f"micro-benchmark: {doc.doc['micro']}")

    all_tasks = plan_tasks(opts, on_cuda)
    counter = {"done": 0}

    def step(label: str, advance: bool = True) -> None:
        counter["done"] += int(advance)
        if progress is not None:
            progress(counter["done"], len(all_tasks), label)

    if opts.trace and opts.trace_batch_sizes is not None:
        missing = sorted(set(opts.trace_batch_sizes) - set(opts.batch_sizes))
        if missing:
            warn(f"trace batch sizes {missing} are not swept (--batch-sizes); no trace for them")
    ctx = Ctx(torch, opts, on_cuda, modes, out, doc, result, step, nvtx_range_factory(torch, on_cuda), say)
    for cfg in opts.models:
        tasks = [t for t in all_tasks if t.model == cfg.name]
        todo = [t for t in tasks if opts.force or not task_done(t, doc, out, modes)]
        for t in tasks:
            if t not in todo:
                result.skipped.append(f"{t.model} {t.what}" + (f" bs={t.bs}" if t.bs else ""))
                step(f"{t.model} {t.what}" + (f" bs={t.bs}" if t.bs else "") + ": done before, skipped")
        if todo:
            _run_model(ctx, cfg, todo, warn)
    return result


def _no_cuda_notes(opts: SweepOptions, warn: Callable[[str], None]) -> None:
    """What a run without CUDA skips (warnings), or the error when nothing it asks can run."""
    graph_modes = [m for m in opts.modes if m != "eager"]
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


def _open_doc(torch: Any, opts: SweepOptions, on_cuda: bool, tpath: Path, say: Callable[[str], None]) -> TimingsDoc:
    """The timings document to write: the file's rows and entries when resuming (checked to match this
    run's device, torch, context and models), this run's environment and model entries."""
    old: dict[str, Any] = load_timings(tpath) if tpath.exists() else {}
    env = environment(torch, on_cuda)
    if old and (old.get("device"), old.get("torch")) != (env["device"], env["torch"]):
        raise InputError(f"holds timings from {old.get('device')} / torch {old.get('torch')}, this run is "
                         f"{env['device']} / torch {env['torch']}; use another --out", str(tpath))
    if old:
        check_resumable(old, opts, tpath)
    doc = TimingsDoc({**old, "schema": SCHEMA, **env, "created": old.get("created") or now(),
                      "context_len": opts.context_len, "start_pos": opts.start_pos,
                      "models": {**old.get("models", {}),
                                 **{c.name: model_entry(c, opts.compile, opts.attention_backend)
                                    for c in opts.models}},
                      "micro": old.get("micro"), "rows": list(old.get("rows", []))}, tpath)
    say(f"device {env['device']}, torch {env['torch']}, cuda {env['cuda']}, driver {env['driver']}")
    return doc


def _run_model(ctx: Ctx, cfg: ModelConfig | HFModelSpec, todo: list[Task], warn: Callable[[str], None]) -> None:
    """Build one model (compile it if asked) and run the parts its tasks need: sweep, profiled,
    memory, serving; a model whose step cannot be captured skips the last three."""
    backend = ctx.opts.attention_backend
    try:
        with attention_backend(ctx.torch, backend):  # capture and eager runs alike
            _run_model_parts(ctx, cfg, todo, warn)
    except RuntimeError as e:  # PyTorch's SDPA dispatch: the kernel asked for cannot run this attention here
        if backend == "auto" or not any(s in str(e) for s in ("No viable backend", "No available kernel")):
            raise
        raise InputError(f"--attention-backend {backend}: PyTorch has no {backend} SDPA kernel for {cfg.name}'s "
                         f"attention on this device ({str(e).splitlines()[0]})") from None


def attention_backend(torch: Any, name: str):
    """A context in which ``F.scaled_dot_product_attention`` runs only the SDPA kernel ``name``
    (:data:`~launchgap.harness.sweep.options.ATTENTION_BACKENDS`; ``auto``: PyTorch's own choice; ``eager``: no
    SDPA call to steer, the decoder was built without one). A backend that cannot run the step's attention raises
    PyTorch's RuntimeError at the first step (:func:`_run_model` says it in one line)."""
    import contextlib

    if name in ("auto", "eager"):
        return contextlib.nullcontext()
    from torch.nn.attention import SDPBackend, sdpa_kernel

    return sdpa_kernel({"cudnn": SDPBackend.CUDNN_ATTENTION, "efficient": SDPBackend.EFFICIENT_ATTENTION,
                        "flash": SDPBackend.FLASH_ATTENTION, "math": SDPBackend.MATH}[name])


def _run_model_parts(ctx: Ctx, cfg: ModelConfig | HFModelSpec, todo: list[Task], warn: Callable[[str], None]) -> None:
    torch, opts, doc, say = ctx.torch, ctx.opts, ctx.doc, ctx.say
    model = build_model(cfg, opts, ctx.on_cuda)
    say(f"{cfg.name}: {model.param_count() / 1e9:.2f} B params, weights {model.weight_bytes() / 2**30:.2f} GiB, "
        f"KV cache {model.kv_cache_bytes() / 2**30:.2f} GiB")
    entry = doc.doc["models"][cfg.name]
    if isinstance(model, HFDecoder):
        entry.update(model.describe())
    compiled_before = graphs_compiled(torch) if model.compiled else 0
    if model.compiled:
        entry["compile"] = warm_compile(torch, model.step, sizes_of(opts), ctx.on_cuda)
        say(f"{cfg.name}: compiled in {entry['compile']['compile_s']:.1f} s ({entry['compile']['graphs']} graphs)")
    doc.save()
    mctx = replace(ctx, modes=model_modes(model, ctx.modes, warn))
    sweep_model(mctx, model, [t for t in todo if t.what == "timing" or t.what.startswith("trace")])
    if entry.get("capture", {}).get("ok") is False:
        skipped = [t for t in todo if t.what.split()[0] in ("profiled", "memory", "serving")]
        if skipped:
            warn(f"{cfg.name}: no CUDA graph ({entry['capture']['reason']}): "
                 f"{len(skipped)} profiled/memory/serving items skipped")
            for t in skipped:
                ctx.step(f"{t.model} {t.what}: skipped (no graph)")
        todo = [t for t in todo if t not in skipped]
    record_profiled(mctx, model, [t for t in todo if t.what.startswith("profiled")])
    record_memory(mctx, model, [t for t in todo if t.what.startswith("memory")])
    if any(t.what == "serving" for t in todo):
        record_serving(mctx, model)
    if model.compiled:  # recompiles after the warm-up would show here
        entry["compile"]["graphs_after_run"] = graphs_compiled(torch) - compiled_before
        doc.save()
    del model
    if ctx.on_cuda:
        release(torch)


def build_model(cfg: ModelConfig | HFModelSpec, opts: SweepOptions, on_cuda: bool) -> Decoder | HFDecoder:
    """The decoder of ``cfg`` (built-in preset or transformers config), compiled if ``opts.compile``."""
    device = "cuda" if on_cuda else "cpu"
    eager_attention = opts.attention_backend == "eager"
    if isinstance(cfg, HFModelSpec):
        return HFDecoder(cfg, max_batch_size=opts.max_batch_size(), context_len=opts.context_len,
                         start_pos=opts.start_pos, device=device, seed=opts.seed, compile=opts.compile,
                         eager_attention=eager_attention)
    model = Decoder(cfg, max_batch_size=opts.max_batch_size(), context_len=opts.context_len,
                    start_pos=opts.start_pos, device=device, seed=opts.seed, eager_attention=eager_attention)
    if opts.compile:
        model.compile()
    return model


def sizes_of(opts: SweepOptions) -> list[int]:
    sizes = list(opts.batch_sizes) or [s for _, lst in opts.capture_lists + opts.serving_lists for s in lst]
    return sizes or [1]


def model_modes(model: Decoder | HFDecoder, modes: tuple[str, ...], warn: Callable[[str], None]) -> tuple[str, ...]:
    """The run's modes less piecewise where the model cannot split its step (compiled)."""
    if "piecewise" not in modes or model.supports_piecewise:
        return modes
    warn(f"{model.cfg.name}: piecewise mode splits the uncompiled step at attention, so it is not recorded "
         "with --compile")
    return tuple(m for m in modes if m != "piecewise") or ("eager",)
