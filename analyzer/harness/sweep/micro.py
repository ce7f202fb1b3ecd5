"""The launch-cost micro-benchmark (``micro`` in timings.json)."""
from __future__ import annotations

import time
from typing import Any


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
