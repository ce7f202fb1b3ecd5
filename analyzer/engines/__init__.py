"""Serving engines: one module per engine, registered in :data:`ENGINE_MODULES`.

Everything launchgap knows about an engine lives in its module; the analysis and the planner
only read these attributes (a unit test checks every registered module has them):

* ``NAME`` (JSON key, e.g. ``"vllm"``), ``LABEL`` (display name), ``VERSIONS_READ`` (the source
  files, commits and PRs the facts come from; see docs/engines.md);
* ``STEP_MARKERS``: :class:`~analyzer.engines._base.StepMarker` values, the texts the engine
  writes once per iteration (annotations / NVTX ranges, Python function names) and their parsers;
* ``CAPTURE_ANNOTATION``: regex of the range a capture trace writes per captured size (groups
  ``size`` and ``mode``), or ``None``;
* detection cues ``PYTHON_CUE`` (its Python files in ``with_stack`` traces) and ``OP_CUE`` (its
  custom op namespaces);
* ``COLLECTIVE_KERNELS``: regex alternatives naming its own communication kernels;
* ``CAPTURE_LISTS`` (default CUDA-graph capture lists by version, newest first, each a function
  ``(max_size, padding) -> sizes``), ``DEFAULT_MAX_SIZE``, ``default_sizes(max_size, padding)``
  (the newest list);
* ``capture_config(buckets, padding)`` / ``config_snippet(buckets, padding)`` and
  ``SNIPPET_LANGUAGE``: the settings that capture a bucket list.

Adding an engine is one module here and one entry in :data:`ENGINE_MODULES`.
"""
from __future__ import annotations

import importlib
from types import ModuleType

from ._base import MARKER_SOURCES, PHASES, StepInfo, StepMarker
from ..errors import InputError

#: Engine modules, in the order reports and the planner list them.
ENGINE_MODULES = ("vllm", "sglang", "tensorrt_llm")
#: Attributes every engine module defines (checked by tests/unit/test_engines.py).
REQUIRED = ("NAME", "LABEL", "VERSIONS_READ", "STEP_MARKERS", "CAPTURE_ANNOTATION", "PYTHON_CUE", "OP_CUE",
            "COLLECTIVE_KERNELS", "CAPTURE_LISTS", "DEFAULT_MAX_SIZE", "default_sizes", "capture_config",
            "config_snippet", "SNIPPET_LANGUAGE")

ENGINES: tuple[ModuleType, ...] = tuple(importlib.import_module(f"analyzer.engines.{m}") for m in ENGINE_MODULES)
#: Engine names (JSON keys), in registry order.
NAMES: tuple[str, ...] = tuple(e.NAME for e in ENGINES)
#: Display label per engine name: the one place labels are defined.
LABELS: dict[str, str] = {e.NAME: e.LABEL for e in ENGINES}
#: Every step marker of every engine, in registry order.
STEP_MARKERS: tuple[StepMarker, ...] = tuple(m for e in ENGINES for m in e.STEP_MARKERS)

__all__ = ["ENGINES", "ENGINE_MODULES", "LABELS", "MARKER_SOURCES", "NAMES", "PHASES", "REQUIRED", "STEP_MARKERS",
           "StepInfo", "StepMarker", "default_sizes", "engine"]


def engine(name: str) -> ModuleType:
    """The module of engine ``name`` (one of :data:`NAMES`)."""
    for e in ENGINES:
        if e.NAME == name:
            return e
    raise InputError(f"unknown server {name!r} (expected one of {', '.join(NAMES)})")


def default_sizes(name: str, max_size: int | None = None, padding: str = "pad") -> list[int]:
    """The newest default capture list of engine ``name`` cut at ``max_size`` under ``padding``."""
    return engine(name).default_sizes(max_size, padding)
