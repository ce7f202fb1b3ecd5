"""Part 3, graph memory: each capture list captured largest first into one shared pool, per mode
(``graph_memory`` of timings.json; :func:`launchgap.harness.graphs.capture_list`)."""
from __future__ import annotations

from ..model import Decoder
from ..profiling import count_kernels_per_step
from .context import Ctx, release
from .tasks import Task


def record_memory(ctx: Ctx, model: Decoder, tasks: list[Task]) -> None:
    """Capture each list in each mode into one shared pool, largest first; write its entry."""
    if not tasks:
        return
    from ..graphs import REPLAY_TOLERANCE, capture_list, fill_missing_nodes, replay_error

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
            release(torch)
        ctx.doc.put_memory(entry)
        ctx.doc.save()
        ctx.result.graph_memory.append(entry)
        ctx.step(f"{cfg.name} {mode} {name}: {entry['graphs']} graphs, device {entry['device_used_mib']:,.0f} MiB, "
                 f"reserved {entry['reserved_mib']:,.0f} MiB, capture {entry['capture_s']:.2f} s")
