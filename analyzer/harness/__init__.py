"""The GPU recording harness: a Llama-style decoder swept over batch sizes, eager vs CUDA graph.

:mod:`analyzer.harness.model` holds the decoder (graph-capturable by construction) and its
presets; :mod:`analyzer.harness.sweep` times it without a profiler, records torch.profiler
traces and writes ``timings.json`` (schema ``launchgap.timings/1``), which the planner reads;
:mod:`analyzer.harness.curve` turns that file into the measured speedup curve.

torch is an optional dependency (``pip install 'launchgap[record]'``): it is imported inside
the functions that need it, never at import time of this package.
"""
from __future__ import annotations

from analyzer.errors import AnalyzerError

TORCH_MISSING = "the recording harness needs PyTorch: pip install 'launchgap[record]'"


def import_torch():  # -> module torch
    """Import torch, or raise an :class:`AnalyzerError` saying how to install it."""
    try:
        import torch
    except ImportError:
        raise AnalyzerError(TORCH_MISSING) from None
    return torch
