"""The GPU recording harness: a Llama-style decoder timed without and with a profiler.

:mod:`~launchgap.harness.model` holds the decoder (graph-capturable by construction, in
stages that :mod:`~launchgap.harness.graphs` captures as one FULL graph or as PIECEWISE graphs
between eager attentions, alone or as whole capture lists in one shared pool, with their
memory, capture time and kernel nodes); :mod:`~launchgap.harness.sweep` runs what
:mod:`~launchgap.harness.cli` asks (sweeps over batch sizes, profiled-vs-unprofiled rows per
profiler setting via :mod:`~launchgap.harness.profiling`, graph memory, and
:mod:`~launchgap.harness.serving` replays) and writes ``timings.json`` through
:mod:`launchgap.timings` (schema ``launchgap.timings/1``), which the planner reads;
:mod:`~launchgap.harness.curve` turns that file into the measured speedup curve.
Only the standard library and torch: ``python3 -m analyzer.harness`` runs on a bare GPU box.

torch is an optional dependency (``pip install 'launchgap[record]'``): it is imported inside
the functions that need it, never at import time of this package.
"""
from __future__ import annotations

from ..errors import AnalyzerError

TORCH_MISSING = "the recording harness needs PyTorch: pip install 'launchgap[record]'"


def import_torch():  # -> module torch
    """Import torch, or raise an :class:`AnalyzerError` saying how to install it."""
    try:
        import torch
    except ImportError:
        raise AnalyzerError(TORCH_MISSING) from None
    return torch
