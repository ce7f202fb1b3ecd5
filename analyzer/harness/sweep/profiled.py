"""Part 2, profiled vs unprofiled: per traced size, unprofiled blocks (or interleaved windows) around one eager
trace per profiler setting (``profiled_vs_unprofiled`` of timings.json)."""
from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from ..model import Decoder
from ..profiling import Interleaved, annotated, record_interleaved, record_trace
from ..clock import time_steps
from .context import Ctx, release
from .document import trace_name
from .sizes import capture_own_pool
from .tasks import Task

#: Seconds of untimed eager steps before the first unprofiled block of a size (at least
#: ``--warmup`` steps): the host and GPU reach their steady clocks before anything is timed.
WARM_S = 0.5


@dataclass
class Block:
    """One unprofiled block: eager steps and, on CUDA, FULL-graph replays, timed in alternating halves."""

    eager: list[float]
    graph: list[float]

    @property
    def eager_us(self) -> float:
        return statistics.median(self.eager)

    @property
    def graph_us(self) -> float | None:
        return statistics.median(self.graph) if self.graph else None


def warm(fn: Callable[[], Any], steps: int, seconds: float, sync: Callable[[], None]) -> None:
    """Run ``fn`` for at least ``steps`` calls and ``seconds`` of wall time."""
    t0, n = time.perf_counter(), 0
    while n < steps or time.perf_counter() - t0 < seconds:
        fn()
        n += 1
        if n % 8 == 0:
            sync()
    sync()


def timed_block(ctx: Ctx, eager: Callable[[], Any], graph: Callable[[], Any] | None) -> Block:
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
    return Block(e, g)


def halves_ratio(values: Sequence[float]) -> float:
    """Median of the second half of ``values`` over the median of the first (a window's drift + 1)."""
    half = len(values) // 2
    if half == 0:
        return 1.0
    return statistics.median(values[half:]) / statistics.median(values[:half])


def record_profiled(ctx: Ctx, model: Decoder, tasks: list[Task]) -> None:
    """Per traced size: unprofiled blocks interleaved with the traces of each profiler setting.

    After a warm-up (:data:`WARM_S`), block U0, trace of the first setting, U1, trace of the
    second, U2, ...: block U(i) is the "after" of trace i and the "before" of trace i + 1, so
    each trace sits between two blocks timed seconds apart. A block times ``--repeats`` eager
    steps and, on CUDA, as many replays of the size's FULL graph (captured here, in its own
    pool), in alternating halves, so the measured speedup pairs steps of one moment. When the
    eager step drifts by more than ``--max-drift`` across a trace (``after / before - 1``: the
    host changed speed), the trace is recorded again between the last block and a new one, up
    to ``--drift-retries`` times; the record keeps the last attempt, its drift and the number of
    attempts. Record fields: see ``profiled_vs_unprofiled`` in :mod:`launchgap.timings`.

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
        cap = capture_own_pool(ctx, model, bs, "full", stream) if ctx.on_cuda else None
        graph = cap.run if cap is not None else None

        def eager(bs: int = bs) -> Any:
            return model.step(bs)

        warm(eager, opts.warmup, WARM_S, sync)
        prev = timed_block(ctx, eager, graph)
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
                after = timed_block(ctx, eager, graph)
                before, prev = prev, after
                drift = (after.eager_us / before.eager_us if inter is None else halves_ratio(inter.unprofiled_us)) - 1
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
            release(torch)
