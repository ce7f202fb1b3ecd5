"""Predicting the CUDA-graph step time from an eager trace.

A replayed graph runs the same kernels with the per-launch host cost gone. Model::

    predicted_graph_us = gpu_busy_us + node_us * n_short_kernels + graph_launch_us

``gpu_busy_us`` is the eager step's busy time (union of its GPU ops). Inside a replay the
device still pays a fraction of a microsecond between kernel nodes; a kernel that runs
longer than ``long_kernel_us`` hides that cost behind its own execution, so only kernels
shorter than it are charged ``node_us``. ``graph_launch_us`` is the one launch of the graph.

Defaults were fitted on two H200 data sets (see README "Prediction"): the reference traces
traces/h200-1b (1B-class decoder, batch 1/8/64/256) and the harness's own traces
under traces/h200 (tiny, 1b, 8b, 70b-slice presets). Weighted least squares of (unprofiled
graph_us - eager busy - graph_launch_us) over the short-kernel count gives 0.33-0.35 us per
node for cut-offs of 10-50 us (0.34 with 20 us); per model the residual is 0.25 (tiny) to
0.46 us (8b, 70b-slice at batch 1) per node, so expect a few percent of model-to-model spread.
The graph traces themselves show 0.42-0.47 us median gaps after short kernels and 0.29 us
after long ones.

Profiled eager steps are slower than unprofiled ones because the profiler records every
host event: the estimate ``profiler_us_per_host_event`` (1.8 us per recorded CPU op and
runtime call; the same data gives 1.25-3.5 us, median about 1.8, with profiled steps
1.3-1.8x the unprofiled ones) turns a profiled step into an estimated unprofiled one. A real
measurement (``observed_step_us``) always wins over that estimate.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class PredictionModel:
    """Constants of the graph-step model (all in microseconds)."""

    node_us: float = 0.34
    long_kernel_us: float = 20.0
    graph_launch_us: float = 3.0
    profiler_us_per_host_event: float = 1.8

    def predict_graph_us(self, gpu_busy_us: np.ndarray, n_short_kernels: np.ndarray) -> np.ndarray:
        """Predicted graph-replay step time for each step (same shapes in, us out)."""
        return np.asarray(gpu_busy_us, dtype=float) + self.node_us * np.asarray(n_short_kernels, dtype=float) \
            + self.graph_launch_us

    def unprofiled_step_us(self, step_us: np.ndarray, host_events: np.ndarray, gpu_busy_us: np.ndarray) -> np.ndarray:
        """Estimated step time without the profiler: profiled step less the per-event overhead.

        Never below the GPU busy time (the profiler does not slow the GPU's own work).
        """
        est = np.asarray(step_us, dtype=float) - self.profiler_us_per_host_event * np.asarray(host_events, dtype=float)
        return np.maximum(est, np.asarray(gpu_busy_us, dtype=float))


DEFAULT_MODEL = PredictionModel()
