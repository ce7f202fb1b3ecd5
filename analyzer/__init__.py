"""launchgap: diagnose GPU launch gaps in LLM decode and plan CUDA-graph capture.

Pipeline: ``loaders`` (file -> :class:`~launchgap.trace.Trace`) -> ``steps`` ->
``gaps`` / ``launches`` -> ``predict`` -> ``report`` (small dataclasses, JSON);
``planner`` turns per-batch-size costs into a capture plan. Nothing here prints
or plots; the CLI (``launchgap.cli``) and the dashboard (``app/``) render.
"""
from __future__ import annotations

__version__ = "0.1.0"

from .errors import AnalyzerError, TraceFormatError, TraceTooLargeError

__all__ = ["AnalyzerError", "TraceFormatError", "TraceTooLargeError", "__version__"]
