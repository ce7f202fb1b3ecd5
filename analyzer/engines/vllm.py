"""vLLM: its step annotations, detection cues, collectives and CUDA-graph capture lists.

Facts read from vllm-project/vllm (commits and PRs in docs/engines.md):

* **Step annotation.** With the torch profiler on, the V1 GPU worker (``gpu_worker.py``,
  ``Worker.annotate_profile``) wraps each ``execute_model`` in a ``record_function`` range (an
  NVTX range with ``--profiler-config.profiler cuda``). Its text changed three times:

  - ``execute_new_{N}_cached_{M}`` (PR #22496, Aug 2025): N new requests, M already running.
    New requests are all in prefill; a running one may still be in a chunked prefill, so only
    ``M == 0`` says the phase (prefill).
  - ``execute_context_{C}({c_tokens})_generation_{G}({g_tokens})`` (PR #31193, Dec 2025): C
    requests still in prefill ("context": no output token yet, chunked prefills included) with
    c_tokens tokens, G generating ones with g_tokens tokens. Forks append figures after the
    token count inside the parentheses (``(888_788544)``); the first number is the tokens.
  - ``execute_{T}_context_{C}(sq..sk..sqsq..sqsk..)_generation_{G}(sq..sk..sqsq..sqsk..)``
    (``--profiler-config.detailed_trace_annotation``, PR #37524): T tokens in the step; per
    side the sums of query and KV lengths and of their squares and products.
* **Python function** (traces taken ``with_stack``, vLLM's default): one
  ``vllm/v1/worker/gpu_model_runner.py(N): execute_model`` per iteration (V1 runner), or
  ``vllm/v1/worker/gpu/model_runner.py(N): execute_model`` (V2 runner). A ``record_function``
  range named ``execute_model`` counts the same way.
* **Capture traces** (``--profiler-config.capture_torch_profiler_dir``, PR #37524): one
  ``capture_{size}_{mode}`` range per captured size, mode ``FULL`` or ``PIECEWISE``.
* **Default capture sizes.** V1: ``[1, 2, 4] + range(8, 256, 8) + range(256, max + 1, 16)``
  with ``max = min(max_num_seqs * 2 * decode_query_len, 512)`` (1024 on data-centre Blackwell
  since late 2025; ``max_cudagraph_capture_size``); V0 engine (up to 0.10):
  ``[1, 2, 4] + [8 * i for i in 1..32]`` up to ``max_num_seqs`` (256). Batches are always padded
  to the next captured size; above the largest they run eager.
"""
from __future__ import annotations

import re

from ._base import StepInfo, StepMarker, capture_list, no_info, phase_from_counts

NAME = "vllm"
LABEL = "vLLM"
#: Language of :func:`config_snippet`'s text (for Markdown fences).
SNIPPET_LANGUAGE = "bash"
#: Sources read for this module (repository, file, commit or PR).
VERSIONS_READ = (
    "vllm-project/vllm vllm/v1/worker/gpu_worker.py @ 35d5cda1 (execute_new_{N}_cached_{M}, PR #22496)",
    "vllm-project/vllm vllm/v1/utils.py compute_iteration_details and gpu_worker.annotate_profile "
    "(execute_context_{C}({t})_generation_{G}({t}), PR #31193)",
    "vllm-project/vllm PR #37524 (detailed_trace_annotation, capture_torch_profiler_dir); "
    "TraceLens traces at 8bb88d08 written by it",
    "vllm-project/vllm vllm/profiler/wrapper.py @ cda1b348 (record_function with the torch profiler, "
    "torch.cuda.nvtx.range with the CUDA profiler)",
    "vllm-project/vllm vllm/config/vllm.py _set_cudagraph_sizes and CompilationConfig.max_cudagraph_capture_size "
    "docs (V1 capture sizes); vllm/worker/model_runner.py _BATCH_SIZES_TO_CAPTURE (V0)",
)


def _detailed(m: re.Match[str]) -> StepInfo:
    ctx, gen = int(m["ctx"]), int(m["gen"])
    return StepInfo(phase_from_counts(ctx, gen), ctx + gen, int(m["tokens"]))


def _context_generation(m: re.Match[str]) -> StepInfo:
    ctx, gen = int(m["ctx"]), int(m["gen"])
    return StepInfo(phase_from_counts(ctx, gen), ctx + gen, int(m["ctx_tokens"]) + int(m["gen_tokens"]))


def _new_cached(m: re.Match[str]) -> StepInfo:
    new, cached = int(m["new"]), int(m["cached"])
    # A cached request may be in the middle of a chunked prefill: only "no cached ones" says the phase.
    return StepInfo("prefill" if new > 0 and cached == 0 else None, new + cached, None)


_WORKER = "vllm/v1/worker/gpu_worker.py Worker.annotate_profile"
STEP_MARKERS = (
    StepMarker(NAME, "annotation", re.compile(
        r"^execute_(?P<tokens>\d+)_context_(?P<ctx>\d+)\([^)]*\)_generation_(?P<gen>\d+)\([^)]*\)$"),
        _detailed, f"{_WORKER}, detailed_trace_annotation (PR #37524)"),
    StepMarker(NAME, "annotation", re.compile(
        r"^execute_context_(?P<ctx>\d+)\((?P<ctx_tokens>\d+)[^)]*\)_generation_(?P<gen>\d+)\((?P<gen_tokens>\d+)[^)]*\)$"),
        _context_generation, f"{_WORKER} (PR #31193)"),
    StepMarker(NAME, "annotation", re.compile(r"^execute_new_(?P<new>\d+)_cached_(?P<cached>\d+)$"),
               _new_cached, f"{_WORKER} (PR #22496)"),
    StepMarker(NAME, "annotation", re.compile(r"^execute_model$"), no_info,
               "a record_function / NVTX range named execute_model"),
    StepMarker(NAME, "python", re.compile(r"(?:^|/)vllm/v1/worker/(?:gpu_model_runner|gpu/model_runner)\.py\(\d+\): "
                                          r"execute_model$"),
               no_info, "GPUModelRunner.execute_model (V1 and V2 runners), traces taken with_stack"),
)
#: A capture trace's range per captured size: ``capture_{size}_{FULL|PIECEWISE}``.
CAPTURE_ANNOTATION = re.compile(r"^capture_(?P<size>\d+)_(?P<mode>FULL|PIECEWISE)$")
#: Python files of vLLM in with_stack traces (site-packages prefixes are stripped by torch).
PYTHON_CUE = re.compile(r"(?:^|/)vllm/[\w/]+\.py\(\d+\)")
#: Custom op namespaces that only vLLM registers (``vllm::unified_attention_with_output``, ...).
OP_CUE = re.compile(r"^(?:vllm|_C_cache_ops|_moe_C|_rocm_C|_vllm_fa\d?_C)::")
#: Communication kernels named by vLLM's own all-reduce implementations (custom all-reduce, QuickReduce).
COLLECTIVE_KERNELS = r"cross_device_reduce|quick_?reduce"

#: Largest default capture size of the V1 engine (``max_cudagraph_capture_size`` cap).
DEFAULT_MAX_SIZE = 512
#: The V0 engine captured up to ``max_num_seqs`` (default 256).
V0_DEFAULT_MAX_SIZE = 256


def v1_sizes(max_size: int | None = None, padding: str = "pad") -> list[int]:
    """V1 default: ``[1, 2, 4] + range(8, 256, 8) + range(256, max + 1, 16)``, max 512 by default."""
    top = DEFAULT_MAX_SIZE if max_size is None else max_size
    return capture_list([1, 2, 4] + list(range(8, 256, 8)) + list(range(256, top + 1, 16)), top)


def v0_sizes(max_size: int | None = None, padding: str = "pad") -> list[int]:
    """V0 engine: ``[1, 2, 4] + [8 * i for i in 1..32]`` cut at ``max_num_seqs`` (256 by default)."""
    top = V0_DEFAULT_MAX_SIZE if max_size is None else max_size
    return capture_list([1, 2, 4] + [8 * i for i in range(1, 33)], top)


#: Default capture lists by version, newest first; the planner uses the first.
CAPTURE_LISTS = {"V1 engine (0.11+, max_cudagraph_capture_size)": v1_sizes, "V0 engine (up to 0.10)": v0_sizes}


def default_sizes(max_size: int | None = None, padding: str = "pad") -> list[int]:
    """The newest default capture list cut at ``max_size`` (vLLM always pads, so ``padding`` does not matter)."""
    return v1_sizes(max_size)


def capture_config(buckets: list[int], padding: str) -> dict:
    """``compilation_config`` fields that capture exactly ``buckets``."""
    return {"cudagraph_capture_sizes": list(buckets)}


def config_snippet(buckets: list[int], padding: str) -> str:
    """The same as a command-line flag (``--enforce-eager`` when nothing is captured)."""
    if not buckets:
        return "--enforce-eager"
    text = f"--compilation-config '{{\"cudagraph_capture_sizes\": {list(buckets)}}}'"
    if padding == "exact":
        text += "  # vLLM always pads to the next captured size; exact match is not an option there"
    return text
