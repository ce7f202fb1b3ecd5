"""Part 4, serving: a sequence of batch sizes replayed on capture lists (``serving`` of timings.json;
:mod:`launchgap.harness.serving`)."""
from __future__ import annotations

from ..model import Decoder
from .context import Ctx


def record_serving(ctx: Ctx, model: Decoder) -> None:
    from ..serving import run_serving

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
