"""torch.profiler traces for the harness: profiler settings, annotated steps, kernel counts.

Settings (``--profiler-settings``; :data:`launchgap.timings.PROFILER_SETTINGS`): every trace
records CPU and CUDA activity; ``plain`` nothing more, ``shapes`` adds ``record_shapes=True``
(the default of the normal traces), ``stack`` adds ``with_stack=True`` (Python stacks), ``full``
both. Each step runs inside ``record_function(label)`` and an NVTX range of the same name.
"""
from __future__ import annotations

import contextlib
import gzip
import json
import os
import shutil
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import InputError
from ..timings import PROFILER_SETTINGS

#: (record_shapes, with_stack) per profiler setting, in the order of PROFILER_SETTINGS.
PROFILER_OPTIONS: dict[str, tuple[bool, bool]] = {
    "plain": (False, False), "shapes": (True, False), "stack": (False, True), "full": (True, True),
}

NvtxRange = Callable[[str], contextlib.AbstractContextManager]


def parse_profiler_settings(text: str) -> tuple[str, ...]:
    """``plain,shapes,stack`` -> a tuple of distinct settings; :class:`InputError` for unknown ones."""
    settings = tuple(dict.fromkeys(s.strip() for s in text.split(",") if s.strip()))
    bad = [s for s in settings if s not in PROFILER_OPTIONS]
    if bad or not settings:
        raise InputError(f"unknown profiler setting(s) {', '.join(bad) or '(none)'}; "
                         f"choose from {', '.join(PROFILER_SETTINGS)}")
    return settings


def nvtx_range_factory(torch: Any, on_cuda: bool) -> NvtxRange:
    """NVTX ranges for Nsight users: the ``nvtx`` package, else torch.cuda.nvtx, else none."""
    try:
        import nvtx  # type: ignore[import-not-found]

        return lambda msg: nvtx.annotate(msg, domain="launchgap")
    except ImportError:
        pass
    if on_cuda:
        return torch.cuda.nvtx.range
    return lambda msg: contextlib.nullcontext()


def annotated(label: str, fn: Callable[[], Any], nvtx_range: NvtxRange) -> Any:
    """Run ``fn`` inside ``record_function(label)`` and an NVTX range of the same name."""
    from torch.profiler import record_function

    with record_function(label), nvtx_range(label):
        return fn()


def gzip_file(src: Path, dst: Path) -> None:
    tmp = dst.with_name(dst.name + ".tmp")
    with open(src, "rb") as fin, gzip.open(tmp, "wb", compresslevel=6) as fout:
        shutil.copyfileobj(fin, fout, 1 << 20)
    os.replace(tmp, dst)


def record_steps(torch: Any, body: Callable[[], Any], dst: Path, on_cuda: bool, *, wait: int, warmup: int,
                 active: int, setting: str = "shapes") -> None:
    """Profile ``wait + warmup + active`` calls of ``body`` (one profiler step each); keep the last
    ``active``; write the gzipped Chrome trace to ``dst``."""
    from torch.profiler import ProfilerActivity, profile, schedule

    shapes, stack = PROFILER_OPTIONS[setting]
    acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if on_cuda else [])
    with tempfile.TemporaryDirectory(prefix="launchgap-") as tmpdir:
        raw = Path(tmpdir) / "trace.json"
        with profile(activities=acts, record_shapes=shapes, with_stack=stack,
                     schedule=schedule(wait=wait, warmup=warmup, active=active),
                     on_trace_ready=lambda p: p.export_chrome_trace(str(raw))) as prof:
            for _ in range(wait + warmup + active):
                body()
                prof.step()
        if on_cuda:
            torch.cuda.synchronize()
        if not raw.exists():
            raise InputError("torch.profiler wrote no trace", str(dst))
        gzip_file(raw, dst)


@dataclass
class Interleaved:
    """Step times (us) of one interleaved recording: ``unprofiled_us`` the wait-phase steps (profiler
    idle), ``profiled_us`` the active-phase steps, both in cycle order; ``cycles`` schedule repeats."""

    unprofiled_us: list[float]
    profiled_us: list[float]
    cycles: int


#: Wait-phase steps per cycle of :func:`record_interleaved`; the first of them is not counted
#: (:data:`SETTLE_STEPS`), a precaution: on CPU (torch 2.13, tiny decoder, a shared 2-core host)
#: one run of 12 x 4 cycles showed the step right after an active phase 23-53% slower than steps
#: with no profiler, the second within the noise; a run of 30 x 4 cycles showed both within 5%.
INTERLEAVE_WAIT = 2
SETTLE_STEPS = 1


def record_interleaved(torch: Any, body: Callable[[], Any], dst: Path, on_cuda: bool, *, active: int, cycles: int,
                       setting: str = "shapes", wait: int = INTERLEAVE_WAIT) -> Interleaved:
    """Profile ``cycles`` repeats of the schedule ``wait, warmup=1, active`` and time every step.

    Wait-phase steps run with the profiler idle, so each cycle pairs unprofiled steps with
    ``active`` profiled ones within a fraction of a second: a change of host speed lands in both
    alike. The first :data:`SETTLE_STEPS` wait steps of a cycle (the profiler still winding down)
    are dropped. Each step is timed between two CUDA events (on CPU: ``perf_counter``), outside
    ``prof.step()``; only the last cycle's trace is exported (gzipped to ``dst``)."""
    if wait <= SETTLE_STEPS or active < 1 or cycles < 1:
        raise InputError(f"interleaved profiling needs wait > {SETTLE_STEPS}, active >= 1 and cycles >= 1")
    from torch.profiler import ProfilerActivity, profile, schedule

    shapes, stack = PROFILER_OPTIONS[setting]
    acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if on_cuda else [])
    cycle = wait + 1 + active
    marks: list[tuple[Any, Any]] = []
    with tempfile.TemporaryDirectory(prefix="launchgap-") as tmpdir:
        raw = Path(tmpdir) / "trace.json"
        done = [0]

        def ready(p: Any) -> None:
            done[0] += 1
            if done[0] == cycles:
                p.export_chrome_trace(str(raw))

        with profile(activities=acts, record_shapes=shapes, with_stack=stack,
                     schedule=schedule(wait=wait, warmup=1, active=active, repeat=cycles),
                     on_trace_ready=ready) as prof:
            for _ in range(cycles * cycle):
                if on_cuda:
                    a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                    a.record()
                    body()
                    b.record()
                    marks.append((a, b))
                else:
                    t0 = time.perf_counter()
                    body()
                    marks.append((t0, time.perf_counter()))
                prof.step()
        if on_cuda:
            torch.cuda.synchronize()
            us = [a.elapsed_time(b) * 1e3 for a, b in marks]
        else:
            us = [(b - a) * 1e6 for a, b in marks]
        if not raw.exists():
            raise InputError("torch.profiler wrote no trace", str(dst))
        gzip_file(raw, dst)
    phase = [i % cycle for i in range(len(us))]
    return Interleaved([u for u, k in zip(us, phase) if SETTLE_STEPS <= k < wait],
                       [u for u, k in zip(us, phase) if k > wait], cycles)


def record_trace(torch: Any, fn: Callable[[], Any], label: str, dst: Path, active: int, on_cuda: bool,
                 nvtx_range: NvtxRange | None = None, setting: str = "shapes") -> None:
    """Profile ``1 + 2 + active`` annotated calls of ``fn`` (schedule wait=1 warmup=2) into ``dst``."""
    rng = nvtx_range or nvtx_range_factory(torch, on_cuda)
    record_steps(torch, lambda: annotated(label, fn, rng), dst, on_cuda, wait=1, warmup=2, active=active,
                 setting=setting)


def count_kernels_per_step(torch: Any, fn: Callable[[], Any], steps: int = 1) -> int:
    """Kernels one call of ``fn`` launches, from a CUDA-only profile of ``steps`` calls."""
    from torch.profiler import ProfilerActivity, profile

    torch.cuda.synchronize()
    with tempfile.TemporaryDirectory(prefix="launchgap-") as tmpdir:
        raw = Path(tmpdir) / "count.json"
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            for _ in range(steps):
                fn()
            torch.cuda.synchronize()
        prof.export_chrome_trace(str(raw))
        return round(count_kernel_events(raw) / steps)


def count_kernel_events(path: Path) -> int:
    """Number of ``cat == "kernel"`` events in a Chrome-trace JSON file (gzipped or not)."""
    opener = gzip.open if Path(path).read_bytes()[:2] == b"\x1f\x8b" else open
    with opener(path, "rt") as fh:
        doc = json.load(fh)
    events = doc.get("traceEvents", []) if isinstance(doc, dict) else doc
    return sum(1 for e in events if isinstance(e, dict) and e.get("cat") == "kernel")
