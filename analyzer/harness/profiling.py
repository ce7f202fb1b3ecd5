"""torch.profiler traces for the harness: profiler settings, annotated steps, kernel counts.

Settings (``--profiler-settings``; :data:`analyzer.timings.PROFILER_SETTINGS`): every trace
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
from collections.abc import Callable
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
