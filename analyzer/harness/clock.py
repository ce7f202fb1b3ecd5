"""Unprofiled step timing: CUDA events around steps issued back to back (host clock on the CPU)."""
from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any


def pct(values: list[float], q: float) -> float:
    """Percentile ``q`` (0..1) with linear interpolation between ranks (numpy's default).

    Pure Python: the harness needs only the standard library and torch.
    """
    xs = sorted(values)
    rank = q * (len(xs) - 1)
    lo = int(rank)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (rank - lo)


@dataclass(frozen=True)
class Timed:
    """Per-step device times (CUDA events; host clock on the CPU) and host issue times, in us."""

    device_us: list[float]
    host_us: list[float]

    @property
    def median_us(self) -> float:
        return statistics.median(self.device_us)

    @property
    def host_median_us(self) -> float:
        return statistics.median(self.host_us)


def time_steps(torch: Any, fn: Callable[[], Any], n: int, warmup: int, on_cuda: bool) -> Timed:
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
        return Timed(device_us=list(host), host_us=host)
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
    return Timed(device_us=dev, host_us=host)


def time_sequence(torch: Any, fns: Sequence[Callable[[], Any]], on_cuda: bool) -> tuple[list[float], float]:
    """Per-call times of ``fns`` run once each, back to back, and the time of the whole run (us).

    On CUDA, events before and after every call and around the whole run; one sync at the end.
    """
    n = len(fns)
    if not on_cuda:
        per: list[float] = []
        t0 = time.perf_counter()
        for fn in fns:
            t = time.perf_counter()
            fn()
            per.append((time.perf_counter() - t) * 1e6)
        return per, (time.perf_counter() - t0) * 1e6
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(n)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(n)]
    first, last = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    torch.cuda.synchronize()
    first.record()
    for i, fn in enumerate(fns):
        starts[i].record()
        fn()
        ends[i].record()
    last.record()
    torch.cuda.synchronize()
    return [s.elapsed_time(e) * 1e3 for s, e in zip(starts, ends)], first.elapsed_time(last) * 1e3
