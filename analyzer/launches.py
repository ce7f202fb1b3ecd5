"""Launch metrics: how much host time launching costs against the GPU work it launches.

* **launch API time** (``launch_api_us``): host time inside launch calls
  (cudaLaunchKernel, cudaLaunchKernelExC, cuLaunchKernel(Ex), hipLaunchKernel, ...,
  cudaGraphLaunch, hipGraphLaunch).
* **launch-to-kernel ratio**: launch API time over the GPU time of the work those calls
  launched (sum of durations). Above 1 the host spends longer launching a kernel than the
  GPU spends running it: the step cannot keep the GPU fed.
* **launch delay** (``launch_delay_us``): GPU op start minus its launch call's start
  (includes the time the op queued behind earlier work). For a graph replay, the first
  replayed op's start.

The graph mode of a trace and of its steps lives in :mod:`launchgap.graph_mode`.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .trace import Api, Kind, Trace

_LAUNCH_APIS = np.array([Api.KERNEL_LAUNCH, Api.GRAPH_LAUNCH], dtype=np.int8)


@dataclass(frozen=True)
class KernelLaunchRow:
    """Launch cost of one kernel name over the whole trace (eager launches only)."""

    name: str
    count: int
    kernel_us: float
    launch_api_us: float
    launch_to_kernel_ratio: float | None
    launch_delay_us_median: float

    def to_dict(self) -> dict:
        return dict(self.__dict__)


def launch_rows_of_gpu_ops(trace: Trace) -> tuple[np.ndarray, np.ndarray]:
    """(GPU op rows, their launch rows) for ops launched by a kernel or graph launch call."""
    gpu = np.flatnonzero(trace.gpu_mask & (trace.launch_idx >= 0))
    li = trace.launch_idx[gpu]
    by_launch = np.isin(trace.api[li], _LAUNCH_APIS)
    return gpu[by_launch], li[by_launch]


def launch_delays_ns(trace: Trace) -> tuple[np.ndarray, np.ndarray]:
    """(GPU op rows, delay ns): eager ops one each; a graph replay by its first op only."""
    ops, li = launch_rows_of_gpu_ops(trace)
    eager = trace.api[li] == Api.KERNEL_LAUNCH
    first_of_launch = np.ones(ops.size, dtype=bool)
    graph = ~eager
    if graph.any():
        g_ops, g_li = ops[graph], li[graph]
        order = np.lexsort((trace.start_ns[g_ops], g_li))
        keep = np.ones(order.size, dtype=bool)
        keep[1:] = g_li[order][1:] != g_li[order][:-1]
        mask = np.zeros(g_ops.size, dtype=bool)
        mask[order[keep]] = True
        first_of_launch[np.flatnonzero(graph)] = mask
    ops, li = ops[first_of_launch], li[first_of_launch]
    return ops, trace.start_ns[ops] - trace.start_ns[li]


def kernel_launch_table(trace: Trace, top: int = 20) -> list[KernelLaunchRow]:
    """Per kernel name (eager launches): count, GPU time, launch API time, ratio, median delay.

    Sorted by launch API time, the host cost each kernel name puts on a step.
    """
    ops, li = launch_rows_of_gpu_ops(trace)
    eager = (trace.api[li] == Api.KERNEL_LAUNCH) & (trace.kind[ops] == Kind.KERNEL)
    ops, li = ops[eager], li[eager]
    if ops.size == 0:
        return []
    nid = trace.name_id[ops]
    uniq, inv = np.unique(nid, return_inverse=True)
    count = np.bincount(inv)
    k_ns = np.bincount(inv, weights=trace.dur_ns[ops])
    l_ns = np.bincount(inv, weights=trace.dur_ns[li])
    delay = trace.start_ns[ops] - trace.start_ns[li]
    order = np.lexsort((delay, inv))
    starts = np.concatenate([[0], np.cumsum(count)[:-1]])
    med = delay[order][starts + (count - 1) // 2]  # lower median per name
    # Ties on launch time break by name, so the order does not depend on the loader.
    best = np.lexsort((trace.names[uniq].astype(str), -l_ns))[:top]
    return [
        KernelLaunchRow(
            name=str(trace.names[uniq[i]]),
            count=int(count[i]),
            kernel_us=float(k_ns[i] / 1e3),
            launch_api_us=float(l_ns[i] / 1e3),
            # Zero-length kernels (a profiler artefact) have no finite ratio: None, not inf.
            launch_to_kernel_ratio=float(l_ns[i] / k_ns[i]) if k_ns[i] > 0 else None,
            launch_delay_us_median=float(med[i] / 1e3),
        )
        for i in best
    ]
