"""Sweep a decoder over batch sizes and capture lists: unprofiled ground truth and traces.

:func:`run_sweep` does, per model, what the options ask (each part is optional):

1. **Sweep** (``rows``): per batch size, the unprofiled step in each of ``modes``:
   ``eager`` (``eager_us``: median over ``rounds x repeats`` steps of the device time between
   CUDA events recorded before and after each step, steps issued back to back with no host
   sync between them; ``eager_host_us``: median host time to issue one step), ``graph``
   (the step captured as one FULL CUDA graph in its own pool: ``graph_us``, ``capture_s``,
   ``graph_pool_bytes`` = growth of the caching allocator's reserved memory across the
   capture, ``graph_nodes`` = kernel nodes) and ``piecewise`` (graph pieces between eager
   attentions, see :mod:`launchgap.harness.graphs`: ``piecewise_us``, ``piecewise_capture_s``,
   ``piecewise_pool_bytes``, ``piecewise_graphs``, ``piecewise_nodes``). Each round times
   every size and mode once before the next round starts. ``kernels_per_step``: kernels of
   one eager step (a CUDA-only profile). Traces (CPU+CUDA, ``record_shapes=True``, schedule
   wait=1 warmup=2 active=``steps``, each step in ``decode_step[bs=N]``) are saved as
   ``<model>_bs<N>_<mode>.json.gz``.
2. **Profiled vs unprofiled** (``profiled_vs_unprofiled``): per traced size, unprofiled
   blocks (eager steps and FULL-graph replays, alternating) interleaved with an eager trace
   under each profiler setting (``<model>_bs<N>_eager_<setting>.json.gz``); a trace across
   which the eager step drifted beyond ``max_drift`` is recorded again (see :func:`.profiled.record_profiled`).
3. **Graph memory** (``graph_memory``): per capture list and mode (full, piecewise), the
   list captured largest first into one shared pool (:func:`launchgap.harness.graphs.capture_list`).
4. **Serving** (``serving``): a sequence of batch sizes replayed on capture lists
   (:mod:`launchgap.harness.serving`).

One module per concern: :mod:`.options` (what to record), :mod:`.tasks` (the work plan,
resuming, progress), :mod:`.document` (the timings document, environment, model entries),
:mod:`.rows` (a sweep row from timed rounds), :mod:`.micro` (the launch micro-benchmark),
:mod:`.context` (what the parts share), the four parts :mod:`.sizes`, :mod:`.profiled`,
:mod:`.memory`, :mod:`.serving`, and :mod:`.run` (:func:`run_sweep`, building each model,
compiled or not, transformers or built-in).

``timings.json`` (schema ``launchgap.timings/1``, :mod:`launchgap.timings`) is rewritten after
every unit of work, so an interrupted run resumes where it stopped: rows, traces, profiler
rows and graph-memory entries already there are skipped unless ``force`` (serving entries
are always redone). Without CUDA the eager step runs on the CPU (timed with the host clock),
graph modes and graph memory are skipped with a warning, and serving runs each bucket's
step directly in place of a replay.
"""
from __future__ import annotations

from collections.abc import Sequence

from ...timings import SCHEMA, load_timings
from ..lists import parse_batch_sizes
from ..profiling import count_kernel_events, record_trace
from .document import SweepResult, model_entry, trace_name
from .micro import launch_microbenchmark
from .options import GRAPH_NEEDS_CUDA, MODES, TIME_KEY, SweepOptions, parse_modes
from .rows import TimingRow, make_row
from .run import build_model, model_modes, run_sweep
from .tasks import Progress

__all__: Sequence[str] = (
    "GRAPH_NEEDS_CUDA", "MODES", "SCHEMA", "TIME_KEY", "Progress", "SweepOptions", "SweepResult", "TimingRow",
    "build_model", "count_kernel_events", "launch_microbenchmark", "load_timings", "make_row", "model_entry",
    "model_modes", "parse_batch_sizes", "parse_modes", "record_trace", "run_sweep", "trace_name",
)
