"""What the measurement parts share during a run: :class:`Ctx` and the allocator release."""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..profiling import NvtxRange
from .document import SweepResult, TimingsDoc
from .options import SweepOptions


@dataclass
class Ctx:
    torch: Any
    opts: SweepOptions
    on_cuda: bool
    modes: tuple[str, ...]
    out: Path
    doc: TimingsDoc
    result: SweepResult
    step: Callable[..., None]
    nvtx_range: NvtxRange
    say: Callable[[str], None]


def release(torch: Any) -> None:
    import gc

    gc.collect()
    torch.cuda.synchronize()
    torch.cuda.empty_cache()
