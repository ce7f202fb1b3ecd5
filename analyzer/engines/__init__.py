"""Serving engines: one module per engine, registered in :data:`ENGINE_MODULES`.

Everything launchgap knows about an engine lives in its module; the analysis and the planner
only read these attributes (a unit test checks every registered module has them):

* ``NAME`` (JSON key, e.g. ``"vllm"``), ``LABEL`` (display name), ``VERSIONS_READ`` (the source
  files, commits and PRs the facts come from; see docs/engines.md);
* ``STEP_MARKERS``: :class:`~launchgap.engines._base.StepMarker` values, the texts the engine
  writes once per iteration (annotations / NVTX ranges, Python function names) and their parsers;
* ``CAPTURE_ANNOTATION``: regex of the range a capture trace writes per captured size (groups
  ``size`` and ``mode``), or ``None``;
* detection cues ``PYTHON_CUE`` (its Python files in ``with_stack`` traces) and ``OP_CUE`` (its
  custom op namespaces);
* ``COLLECTIVE_KERNELS``: regex alternatives naming its own communication kernels;
* ``CAPTURE_LISTS`` (default CUDA-graph capture lists by version, newest first, each a function
  ``(max_size, padding) -> sizes``), ``DEFAULT_MAX_SIZE``, ``default_sizes(max_size, padding)``
  (the newest list);
* ``TOKEN_KERNELS``: a regex (or ``None``) of kernels launched with one block per token, whose grid gives a step's
  tokens; ``REQUEST_KERNELS``: :class:`~launchgap.engines._base.SequenceKernel` values (or ``None``), kernels
  launched with one block per sequence plus a known extra, whose grid gives its requests (:mod:`launchgap.steps`);
* ``STATE_KERNELS``: a regex (or ``None``) of the engine's bookkeeping kernels that run only when its set of requests
  changes (not the model's work: :mod:`launchgap.workload` leaves them out of a workload's identity);
* ``PHASE_KERNELS``: :class:`~launchgap.engines._base.PhaseKernel` values, the engine's own attention kernels
  that run in one phase only (the shared libraries' are in :mod:`launchgap.engines.attention`; all of them
  together: :data:`PHASE_KERNELS`);
* ``HOST_PHASES``: ``(regex, phase name)`` pairs over host range names (annotations, Python
  functions in ``with_stack`` traces) that name the engine's host work between steps (scheduler,
  input preparation, sampler, output processing; :mod:`launchgap.host_gaps`);
* ``capture_config(buckets, padding)`` / ``config_snippet(buckets, padding)`` and
  ``SNIPPET_LANGUAGE``: the settings that capture a bucket list;
* ``MIXED_STEPS_ON_LIST``: how the engine's default runs a prefill or mixed step on that list (words after "runs
  them"), or ``None`` where its list captures decode batches only.

Adding an engine is one module here and one entry in :data:`ENGINE_MODULES`.
"""
from __future__ import annotations

import importlib
import re
from types import ModuleType

from . import attention
from ._base import (MARKER_SOURCES, MAX_CONFIG_CHARS, PHASES, CaptureSettings, PhaseKernel, SequenceKernel, StepInfo,
                    StepMarker, sizes_text)
from ..errors import InputError

#: Engine modules, in the order reports and the planner list them.
ENGINE_MODULES = ("vllm", "sglang", "tensorrt_llm")
#: Attributes every engine module defines (checked by tests/unit/test_engines.py).
REQUIRED = ("NAME", "LABEL", "VERSIONS_READ", "STEP_MARKERS", "CAPTURE_ANNOTATION", "PYTHON_CUE", "OP_CUE",
            "COLLECTIVE_KERNELS", "CAPTURE_LISTS", "DEFAULT_MAX_SIZE", "default_sizes", "capture_config",
            "config_snippet", "SNIPPET_LANGUAGE", "HOST_PHASES", "parse_config", "trace_default", "TOKEN_KERNELS",
            "REQUEST_KERNELS", "STATE_KERNELS", "PHASE_KERNELS", "MIXED_STEPS_ON_LIST")

ENGINES: tuple[ModuleType, ...] = tuple(importlib.import_module(f"{__name__}.{m}") for m in ENGINE_MODULES)
#: Engine names (JSON keys), in registry order.
NAMES: tuple[str, ...] = tuple(e.NAME for e in ENGINES)
#: Display label per engine name: the one place labels are defined.
LABELS: dict[str, str] = {e.NAME: e.LABEL for e in ENGINES}
#: Every step marker of every engine, in registry order.
STEP_MARKERS: tuple[StepMarker, ...] = tuple(m for e in ENGINES for m in e.STEP_MARKERS)
#: Attention kernels that run in one phase only: the shared libraries', then every engine's own.
PHASE_KERNELS: tuple[PhaseKernel, ...] = attention.PHASE_KERNELS + tuple(k for e in ENGINES for k in e.PHASE_KERNELS)
#: Every engine's request-state kernels in one regex (searched in a kernel's own name), or ``None`` where none has any.
_STATE = [e.STATE_KERNELS.pattern for e in ENGINES if e.STATE_KERNELS is not None]
STATE_KERNELS: re.Pattern[str] | None = re.compile("|".join(f"(?:{p})" for p in _STATE)) if _STATE else None

__all__ = ["ENGINES", "ENGINE_MODULES", "LABELS", "MARKER_SOURCES", "NAMES", "PHASES", "PHASE_KERNELS", "REQUIRED",
           "STATE_KERNELS", "STEP_MARKERS", "CaptureSettings", "PhaseKernel", "SequenceKernel", "MAX_CONFIG_CHARS", "StepInfo", "StepMarker", "capture_sizes_of", "default_sizes", "default_version", "engine",
           "parse_server_config", "sizes_text", "version_default"]


def engine(name: str) -> ModuleType:
    """The module of engine ``name`` (one of :data:`NAMES`)."""
    for e in ENGINES:
        if e.NAME == name:
            return e
    raise InputError(f"unknown server {name!r} (expected one of {', '.join(NAMES)})")


def default_sizes(name: str, max_size: int | None = None, padding: str = "pad") -> list[int]:
    """The newest default capture list of engine ``name`` cut at ``max_size`` under ``padding``."""
    return engine(name).default_sizes(max_size, padding)


def version_default(name: str, version: str | None, max_running: int | None) -> tuple[list[int], str]:
    """The default capture list a server of engine ``name`` at ``version`` captured, cut at its request cap
    ``max_running``, and which default it is: the engine module's ``version_default`` where it has one (vLLM: V0
    before 0.8), else its newest default."""
    mod = engine(name)
    pick = getattr(mod, "version_default", None)
    if pick is not None:
        return pick(version, max_running)
    return mod.default_sizes(max_running), default_version(name)


def default_version(name: str) -> str:
    """Which release the newest default capture list of engine ``name`` belongs to: the first key of its
    ``CAPTURE_LISTS`` (e.g. ``"V1 engine (0.11+, max_cudagraph_capture_size)"`` for vLLM)."""
    return next(iter(engine(name).CAPTURE_LISTS))


def parse_server_config(text: str, engine_hint: str | None = None) -> CaptureSettings:
    """The capture settings in a pasted server config, whichever engine wrote it: the one parser behind
    ``--capture-sizes`` and the dashboard's "server config" field.

    Plain sizes (``1,2,4,8``) are an explicit list of no engine (``engine`` ``""``). Otherwise every
    engine's ``parse_config`` reads the text (vLLM ``compilation_config`` JSON or its flags, SGLang
    ``--cuda-graph-bs`` / ``--cuda-graph-max-bs`` / a ``server_args`` dump, a TensorRT-LLM
    ``cuda_graph_config`` YAML); of those that find settings, ``engine_hint`` (the trace's engine) wins,
    else the one that read most. Raises :class:`InputError` (one line) when nothing is recognised or a
    value is malformed. The text is only matched against patterns, never evaluated.
    """
    if len(text) > MAX_CONFIG_CHARS:
        raise InputError(f"server config is {len(text):,} characters, over the {MAX_CONFIG_CHARS:,} cap")
    plain = text.strip().strip("[]")
    if plain and all(x.isdigit() for x in plain.replace(",", " ").split()):
        sizes = tuple(sorted({int(x) for x in plain.replace(",", " ").split()}))
        if sizes[0] < 1:
            raise InputError(f"capture sizes {text.strip()[:40]!r}: expected positive integers like 1,2,4,8,16")
        return CaptureSettings("", sizes, None, "pad", False, (f"sizes={list(sizes)}",))
    found: list[CaptureSettings] = []
    for e in ENGINES:
        try:
            got = e.parse_config(text)
        except ValueError as exc:
            raise InputError(f"server config ({e.LABEL}): {exc}") from None
        if got is not None:
            found.append(got)
    if not found:
        raise InputError("server config: no CUDA-graph capture setting recognised (expected capture sizes like "
                         "1,2,4,8, a vLLM compilation_config / --cudagraph-capture-sizes / "
                         "--max-cudagraph-capture-size, SGLang --cuda-graph-bs / --cuda-graph-max-bs or a "
                         "server_args dump, or a TensorRT-LLM cuda_graph_config YAML)")
    hinted = [f for f in found if f.engine == engine_hint]
    return hinted[0] if hinted else max(found, key=lambda f: len(f.read))


def capture_sizes_of(settings: CaptureSettings) -> list[int]:
    """The capture list the settings give: the explicit list (cut at ``max_size`` when both are set), else the
    engine's newest default list cut at ``max_size`` under its padding; ``[]`` when graphs are off."""
    if settings.disabled:
        return []
    if settings.sizes:
        top = settings.max_size
        return [s for s in settings.sizes if top is None or s <= top] or list(settings.sizes)
    return engine(settings.engine).default_sizes(settings.max_size, settings.padding or "pad")
