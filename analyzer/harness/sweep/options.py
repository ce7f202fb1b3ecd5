"""What a sweep records and how: :class:`SweepOptions`, the modes and their row fields."""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from ...errors import InputError
from ...timings import DRIFT_LIMIT, GRAPH_MODES
from ..hf import HFModelSpec
from ..model import ModelConfig
from ..serving import ServingOptions

MODES = ("eager", "graph", "piecewise")

#: ``--attention-backend``: which of PyTorch's SDPA kernels the decoders' attention runs (``auto``: PyTorch picks;
#: cuDNN's on the H200 with torch 2.11), or ``eager``: no SDPA, attention written out as matmul, softmax, matmul in the
#: model's dtype (Hugging Face's ``eager`` attention; the built-in decoder the same ops). Other attention kernels launch
#: other grids (for ``math`` and ``eager``, batched matmuls and a softmax in place of one attention kernel), which the
#: cost model must read alike.
ATTENTION_BACKENDS = ("auto", "cudnn", "efficient", "flash", "math", "eager")

GRAPH_NEEDS_CUDA = "graph mode needs a CUDA GPU (torch.cuda.is_available() is False)"

#: timings.json row field of each mode's median step time.
TIME_KEY = {"eager": "eager_us", "graph": "graph_us", "piecewise": "piecewise_us"}


@dataclass(frozen=True)
class SweepOptions:
    """What to record and how. ``trace_batch_sizes`` ``None`` means every swept size.

    ``batch_sizes`` empty: no sweep (graph memory or serving only). ``capture_lists``:
    ``(name, sizes)`` pairs measured in each of ``memory_modes``. ``serving_lists`` with
    ``serving_sequence``: the serving run (``serving`` its options).
    """

    models: tuple[ModelConfig | HFModelSpec, ...]
    batch_sizes: tuple[int, ...]
    out_dir: Path
    modes: tuple[str, ...] = ("eager", "graph")
    steps: int = 3
    repeats: int = 100
    rounds: int = 1
    warmup: int = 5
    context_len: int = 512
    start_pos: int = 128
    trace: bool = True
    trace_batch_sizes: tuple[int, ...] | None = None
    count_kernels: bool = True
    micro: bool = True
    force: bool = False
    device: str = "auto"
    seed: int = 0
    profiler_settings: tuple[str, ...] = ()
    max_drift: float = DRIFT_LIMIT
    drift_retries: int = 2
    interleave: int = 0
    capture_lists: tuple[tuple[str, tuple[int, ...]], ...] = ()
    memory_modes: tuple[str, ...] = GRAPH_MODES
    serving_lists: tuple[tuple[str, tuple[int, ...]], ...] = ()
    serving_sequence: tuple[int, ...] = ()
    serving_source: str = ""
    serving: ServingOptions = field(default_factory=ServingOptions)
    compile: bool = False
    attention_backend: str = "auto"

    def validate(self) -> None:
        if not self.models:
            raise InputError("no model to record")
        if self.batch_sizes and min(self.batch_sizes) <= 0:
            raise InputError("batch sizes must be positive integers")
        if not (self.batch_sizes or self.capture_lists or self.serving_lists):
            raise InputError("nothing to record: give batch sizes, --capture-lists or --capture-sizes")
        bad = [m for m in self.modes if m not in MODES]
        if bad or not self.modes:
            raise InputError(f"unknown mode(s) {', '.join(bad) or '(none)'}; choose from {', '.join(MODES)}")
        bad = [m for m in self.memory_modes if m not in GRAPH_MODES]
        if bad or not self.memory_modes:
            raise InputError(f"unknown memory mode(s) {', '.join(bad) or '(none)'}; choose from full, piecewise")
        if self.steps < 1 or self.repeats < 1 or self.rounds < 1 or self.warmup < 0:
            raise InputError("--steps, --repeats and --rounds must be at least 1 and --warmup at least 0")
        if self.device not in ("auto", "cuda", "cpu"):
            raise InputError(f"unknown device {self.device!r}; choose auto, cuda or cpu")
        if self.attention_backend not in ATTENTION_BACKENDS:
            raise InputError(f"unknown attention backend {self.attention_backend!r}; choose from "
                             f"{', '.join(ATTENTION_BACKENDS)}")
        if self.interleave < 0:
            raise InputError("--interleave must be at least 0")
        if not 0 < self.max_drift < 1 or self.drift_retries < 0:
            raise InputError("--max-drift must lie in (0, 1) and --drift-retries be at least 0")
        if self.profiler_settings and not self.batch_sizes:
            raise InputError("--profiler-settings needs batch sizes to trace (--batch-sizes)")
        if self.serving_lists and not self.serving_sequence:
            raise InputError("serving needs a sequence of batch sizes")

    @property
    def traced_sizes(self) -> tuple[int, ...]:
        if self.trace_batch_sizes is None:
            return self.batch_sizes
        return tuple(b for b in self.batch_sizes if b in self.trace_batch_sizes)

    def max_batch_size(self) -> int:
        sizes = list(self.batch_sizes) + list(self.serving_sequence)
        sizes += [s for _, lst in self.capture_lists + self.serving_lists for s in lst]
        return max(sizes)


def parse_modes(text: str) -> tuple[str, ...]:
    modes = tuple(dict.fromkeys(m.strip() for m in text.split(",") if m.strip()))
    bad = [m for m in modes if m not in MODES]
    if bad or not modes:
        raise InputError(f"unknown mode(s) {', '.join(bad) or '(none)'} in --modes; choose from {', '.join(MODES)}")
    return modes
