"""Part 1, the sweep: every batch size captured in its own pool, timed in interleaved rounds per mode,
its kernels counted, traced (``rows`` of timings.json, traces ``<model>_bs<N>_<mode>.json.gz``)."""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

from ..clock import Timed, time_steps
from ..hf import HFDecoder
from ..model import Decoder
from ..profiling import count_kernels_per_step, record_trace
from .context import Ctx, release
from .document import trace_name
from .options import MODES, TIME_KEY
from .rows import SizeCapture, make_row
from .tasks import Task


def capture_own_pool(ctx: Ctx, model: Decoder, bs: int, mode: str, stream: Any) -> SizeCapture:
    """Capture one size in its own pool; reserved-memory growth across the capture is its pool.

    The replay is then checked against the eager step from the same state (``replay_ok``).
    """
    from ..graphs import REPLAY_TOLERANCE, capture_full, capture_piecewise, prepare, replay_error, settle

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
    return SizeCapture(cap.run, cap.capture_s, pool_bytes, cap.nodes, len(cap.graphs), err <= REPLAY_TOLERANCE)


def capture_sizes(ctx: Ctx, model: Decoder | HFDecoder, caps: dict[tuple[int, str], SizeCapture],
                   sizes: list[int], timed: list[int], traced: set[tuple[int, str]]) -> str | None:
    """Capture every size the sweep times or traces in each graph mode, each in its own pool; the
    one-line reason when the step cannot be captured (``caps`` then emptied), else ``None``."""
    from ..hf import capture_failure_reason

    torch = ctx.torch
    stream = torch.cuda.Stream()
    try:
        for bs in sizes:
            for mode in (m for m in ctx.modes if m != "eager"):
                if bs in timed or (bs, mode) in traced:
                    caps[(bs, mode)] = capture_own_pool(ctx, model, bs, "full" if mode == "graph" else mode, stream)
    except Exception as exc:  # noqa: BLE001 - any capture error is the model's: report it, keep eager
        caps.clear()
        torch.cuda.synchronize()
        release(torch)
        return capture_failure_reason(exc)
    return None


def sweep_model(ctx: Ctx, model: Decoder | HFDecoder, tasks: list[Task]) -> None:
    """Capture, time (in interleaved rounds), count and trace every batch size of one model."""
    torch, opts, cfg = ctx.torch, ctx.opts, model.cfg
    timed = sorted({t.bs for t in tasks if t.what == "timing"})
    traced = {(t.bs, t.what.split()[1]) for t in tasks if t.what.startswith("trace")}
    if not tasks:
        return
    caps: dict[tuple[int, str], SizeCapture] = {}
    if any(m != "eager" for m in ctx.modes):
        reason = capture_sizes(ctx, model, caps, sorted({t.bs for t in tasks}), timed, traced)
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
        row = make_row(cfg.name, bs, series[(bs, "eager")] if "eager" in ctx.modes else [],
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
        release(torch)
