"""``--compile``: the decode step's forward through torch.compile as vLLM compiles it.

vLLM compiles the model's forward once with Inductor (fused Triton kernels) for a symbolic
batch dimension, then captures CUDA graphs of the compiled forward per batch size. The harness
does the same: :func:`compile_forward` wraps the forward in ``torch.compile`` (default mode:
no CUDA graphs of its own, no max-autotune) and :func:`mark_batch_dynamic` marks dimension 0 of
the step's per-size inputs (the token column and, for transformers models, the KV-cache views)
dynamic, so every batch size above 1 runs the same compiled graph (torch specialises size 1,
which compiles once more). The sweep then times the compiled step eagerly (Inductor's kernels,
each launched by the host: ``eager_us`` of a compiled model) and captured as one FULL graph per
size (``graph_us``). The sampler (argmax, token write-back) stays outside the compiled region,
as vLLM's does, and inside the captured graph.

:func:`warm_compile` triggers the compiles before anything is timed and measures them: the
wall seconds of the first step at the largest and the smallest size, and the graphs dynamo
compiled (``torch._dynamo.utils.counters``); the sweep stores them as the model's ``compile``
entry in timings.json.
"""
from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

#: Recompiles allowed per compiled function (torch's default, 8, could silently drop a model
#: back to eager after a few batch sizes if a guard kept failing).
RECOMPILE_LIMIT = 64


def configure_dynamo(torch: Any) -> None:
    cfg = torch._dynamo.config
    for name in ("recompile_limit", "cache_size_limit"):
        if hasattr(cfg, name):
            setattr(cfg, name, max(getattr(cfg, name), RECOMPILE_LIMIT))
    if hasattr(cfg, "accumulated_recompile_limit"):
        cfg.accumulated_recompile_limit = max(cfg.accumulated_recompile_limit, 4 * RECOMPILE_LIMIT)


def compile_forward(torch: Any, fn: Callable[..., Any]) -> Callable[..., Any]:
    """``torch.compile(fn)`` in its default mode; dims marked by :func:`mark_batch_dynamic` are symbolic."""
    configure_dynamo(torch)
    return torch.compile(fn)


def mark_batch_dynamic(*tensors: Any) -> None:
    """Mark dimension 0 (the batch) of each tensor dynamic where torch allows (not for size 1)."""
    import torch

    for t in tensors:
        torch._dynamo.maybe_mark_dynamic(t, 0)


def graphs_compiled(torch: Any) -> int:
    """Graphs dynamo has compiled in this process so far."""
    return int(torch._dynamo.utils.counters["stats"]["unique_graphs"])


def warm_compile(torch: Any, step: Callable[[int], Any], sizes: Sequence[int], on_cuda: bool) -> dict[str, Any]:
    """Run the first step of the largest and of the smallest size (where the compiles happen) and
    measure them: ``{"mode": "default", "dynamic": "batch", "compile_s", "first_step_s": {size: s},
    "graphs": graphs compiled during them}``."""
    before = graphs_compiled(torch)
    first: dict[str, float] = {}
    for bs in dict.fromkeys((max(sizes), min(sizes))):
        t0 = time.perf_counter()
        step(bs)
        if on_cuda:
            torch.cuda.synchronize()
        first[str(bs)] = round(time.perf_counter() - t0, 3)
    return {"mode": "default", "dynamic": "batch", "compile_s": round(sum(first.values()), 3),
            "first_step_s": first, "graphs": graphs_compiled(torch) - before}
