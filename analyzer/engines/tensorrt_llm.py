"""TensorRT-LLM (PyTorch backend): its iteration ranges, detection cues, collectives and capture lists.

Facts read from NVIDIA/TensorRT-LLM (commits in docs/engines.md):

* **Iteration range.** ``PyExecutor._forward_step`` (``tensorrt_llm/_torch/pyexecutor/py_executor.py``)
  runs the model inside an NVTX range
  ``[Executor] _forward_step {iteration}: {C} ctx reqs, {G} gen reqs`` (``nvtx_range`` in
  ``tensorrt_llm/_utils.py``: ``nvtx.annotate``, domain ``TensorRT-LLM``). It is an NVTX range,
  not a ``record_function``: it shows in Nsight exports, not in torch.profiler traces. C context
  (prefill) requests, G generation requests; the token count is not in the text.
* **Python function** (torch.profiler traces taken ``with_stack``): one
  ``tensorrt_llm/_torch/pyexecutor/py_executor.py(N): _forward_step`` per iteration.
* **Profiling switches.** ``TLLM_PROFILE_START_STOP=A-B`` calls ``cudaProfilerStart/Stop`` around
  iterations A..B (for ``nsys profile -c cudaProfilerApi``); with ``TLLM_TORCH_PROFILE_TRACE=path``
  as well, a torch.profiler trace of those iterations is written there.
* **Default capture sizes** (``CudaGraphConfig``; ``max_batch_size`` 0 means 128;
  ``enable_padding`` defaults to False): with padding ``[1, 2, 4] + [8 * i for i in 1..16]``,
  then steps of 64 up to ``max_batch_size`` (1.x); without, ``1..31, 32, 64, 128`` then powers of
  two below it. The maximum is appended when missing. Earlier releases (``PyTorchConfig``
  ``cuda_graph_batch_sizes`` / ``cuda_graph_padding_enabled``) added powers of two to both lists.
"""
from __future__ import annotations

import math
import re

from ._base import CaptureSettings, PhaseKernel, StepInfo, StepMarker, capture_list, find_key, no_info, phase_from_counts, \
    read_bool, read_int, read_int_list

NAME = "tensorrt_llm"
LABEL = "TensorRT-LLM"
SNIPPET_LANGUAGE = "yaml"
#: How the default runs a prefill or mixed step on the capture list (see ``vllm.MIXED_STEPS_ON_LIST``): not at all,
#: ``cuda_graph_config`` captures generation-only batches (a context phase's piecewise graphs take their own
#: ``prefill_capture_num_tokens``).
MIXED_STEPS_ON_LIST = None
VERSIONS_READ = (
    "NVIDIA/TensorRT-LLM tensorrt_llm/_torch/pyexecutor/py_executor.py @ 9521caf4 (_forward_step NVTX range, "
    "TLLM_PROFILE_START_STOP, TLLM_TORCH_PROFILE_TRACE)",
    "NVIDIA/TensorRT-LLM tensorrt_llm/_utils.py @ ed53795b (nvtx_range = nvtx.annotate, domain TensorRT-LLM)",
    "NVIDIA/TensorRT-LLM tensorrt_llm/llmapi/llm_args.py @ fcd3f316 (PyTorchConfig cuda_graph_* sizes) and "
    "CudaGraphConfig._generate_cuda_graph_batch_sizes of 1.x (steps of 64 with padding)",
)


def _executor_range(m: re.Match[str]) -> StepInfo:
    ctx, gen = int(m["ctx"]), int(m["gen"])
    return StepInfo(phase_from_counts(ctx, gen), ctx + gen, None)


STEP_MARKERS = (
    StepMarker(NAME, "annotation", re.compile(
        r"^\[Executor\] _forward_step (?P<iteration>\d+): (?P<ctx>\d+) ctx reqs, (?P<gen>\d+) gen reqs$"),
        _executor_range, "PyExecutor._forward_step NVTX range"),
    StepMarker(NAME, "python", re.compile(r"(?:^|/)tensorrt_llm/_torch/pyexecutor/py_executor\.py\(\d+\): "
                                          r"_forward_step$"),
               no_info, "PyExecutor._forward_step, torch.profiler traces taken with_stack"),
)
#: TensorRT-LLM names no capture ranges.
CAPTURE_ANNOTATION = None
PYTHON_CUE = re.compile(r"(?:^|/)tensorrt_llm/[\w/]+\.py\(\d+\)")
OP_CUE = re.compile(r"^(?:trtllm|tensorrt_llm)::")
#: NVIDIA userbuffers (TensorRT-LLM's fused all-reduce); its other all-reduce kernels say "allreduce".
COLLECTIVE_KERNELS = r"userbuffers"

#: ``CudaGraphConfig.max_batch_size`` when not set.
DEFAULT_MAX_SIZE = 128


def _with_max(sizes: list[int], top: int) -> list[int]:
    sizes = capture_list(sizes, top)
    return sizes if sizes and sizes[-1] == top else sizes + [top]


def current_sizes(max_size: int | None = None, padding: str = "pad") -> list[int]:
    """1.x ``CudaGraphConfig``: with padding ``[1, 2, 4] + 8..128`` then steps of 64; without, ``1..31, 32, 64,
    128`` then powers of two below the maximum; the maximum appended when missing."""
    top = DEFAULT_MAX_SIZE if max_size is None else max_size
    if padding == "pad":
        sizes = [1, 2, 4] + list(range(8, 129, 8))
        while sizes[-1] + 64 <= top:
            sizes.append(sizes[-1] + 64)
    else:
        sizes = list(range(1, 32)) + [32, 64, 128]
        p = 256
        while p < top:
            sizes.append(p)
            p *= 2
    return _with_max(sizes, top)


def pytorch_config_sizes(max_size: int | None = None, padding: str = "pad") -> list[int]:
    """Earlier ``PyTorchConfig``: the 1..128 lists above plus ``2**i`` for ``8 <= i < floor(log2(max))``."""
    top = DEFAULT_MAX_SIZE if max_size is None else max_size
    sizes = [1, 2, 4] + [8 * i for i in range(1, 17)] if padding == "pad" else list(range(1, 32)) + [32, 64, 128]
    sizes += [2 ** i for i in range(8, math.floor(math.log2(top)))] if top > 1 else []
    return _with_max(sizes, top)


CAPTURE_LISTS = {"1.x (CudaGraphConfig)": current_sizes,
                 "pre-1.0 (PyTorchConfig cuda_graph_batch_sizes)": pytorch_config_sizes}


def default_sizes(max_size: int | None = None, padding: str = "pad") -> list[int]:
    """The newest default list cut at ``max_size`` under the padding policy."""
    return current_sizes(max_size, padding)


def _block(rest: str) -> str:
    """The value of a key: a ``{...}`` flow mapping up to its first ``}``, else the rest of the line and the
    indented lines below it (a YAML block ends at the next line that starts at column 0)."""
    if rest.lstrip().startswith("{"):
        return rest[:rest.find("}") + 1] if "}" in rest else rest
    m = re.search(r"\n(?=\S)", rest)
    return rest[:m.start()] if m else rest


def parse_config(text: str) -> CaptureSettings | None:
    """TensorRT-LLM's capture settings in pasted text, ``None`` when there are none: the
    ``cuda_graph_config`` block of an ``extra_llm_api_options`` YAML (or its JSON form) with
    ``batch_sizes``, ``max_batch_size`` and ``enable_padding`` (``cuda_graph_config: null``: no graphs),
    or the pre-1.0 ``cuda_graph_batch_sizes`` / ``cuda_graph_max_batch_size`` /
    ``cuda_graph_padding_enabled``. Read as text by the same grammar as the other engines, never
    evaluated. ``enable_padding`` defaults to false (exact sizes only)."""
    block = find_key(text, "cuda_graph_config")
    read: list[str] = []
    if block is not None:
        rest = _block(text[block.end():])
        if re.match(r"(?:null|None|~)\b", rest):
            return CaptureSettings(NAME, None, None, None, True, ("cuda_graph_config=null",))
        sizes, top, pad = read_int_list(rest, "batch_sizes"), read_int(rest, "max_batch_size"), \
            read_bool(rest, "enable_padding")
        read.append("cuda_graph_config")
    else:
        sizes, top, pad = read_int_list(text, "cuda_graph_batch_sizes"), read_int(text, "cuda_graph_max_batch_size"), \
            read_bool(text, "cuda_graph_padding_enabled")
    if sizes:
        read.append(f"batch_sizes={list(sizes)}")
    if top is not None:
        read.append(f"max_batch_size={top}")
    if pad is not None:
        read.append(f"enable_padding={str(pad).lower()}")
    if not read:
        return None
    return CaptureSettings(NAME, sizes or None, top, "pad" if pad else "exact", False, tuple(read))


def trace_default(device_name: str | None, memory_gib: float | None, world_size: int | None) -> tuple[list[int], str]:
    """The default list (it does not depend on the GPU): ``max_batch_size`` 128, padding off."""
    return current_sizes(None, "exact"), f"TensorRT-LLM default, max_batch_size {DEFAULT_MAX_SIZE}, padding off"


def capture_config(buckets: list[int], padding: str) -> dict:
    """``cuda_graph_config`` (LLM API / ``extra_llm_api_options`` YAML) capturing exactly ``buckets``."""
    return {"cuda_graph_config": {"batch_sizes": list(buckets), "enable_padding": padding == "pad"}}


def config_snippet(buckets: list[int], padding: str) -> str:
    """The same as YAML (``cuda_graph_config: null`` when nothing is captured)."""
    if not buckets:
        return "cuda_graph_config: null"
    return (f"cuda_graph_config:\n  batch_sizes: {list(buckets)}\n  enable_padding: "
            f"{'true' if padding == 'pad' else 'false'}")


#: TensorRT-LLM's KV-cache write is fused into its attention kernels, whose grids do not follow the token
#: count alone: no kernel gives the tokens.
TOKEN_KERNELS = None
#: Kernels launched with one block per sequence (grid x = the step's requests); ``None``: none known.
REQUEST_KERNELS = None
#: No request-state kernels of its own are known (:data:`launchgap.engines.STATE_KERNELS`).
STATE_KERNELS = None
#: Attention kernels of TensorRT-LLM's own that run in one phase only: the masked multi-head attention kernel
#: (``tensorrt_llm::kernels::mmha::masked_multihead_attention_kernel``), which ``AttentionOp::enqueueGeneration``
#: (and the TensorRT plugin's ``GPTAttentionPluginCommon::enqueueGeneration``) launches through
#: ``fusedQKV_masked_attention_dispatch``: generation only, one row per sequence and beam (so not one token per
#: request under beam search). Not read, so not matched: its context FMHA (``fmha_v2_*``) and XQA kernels. Its
#: generated Blackwell FMHA kernels, which name their phase, are in
#: :mod:`launchgap.engines.attention`.
PHASE_KERNELS: tuple[PhaseKernel, ...] = (
    PhaseKernel(re.compile(r"\bmmha::masked_multihead_attention_kernel\b"), "decode", False,
                "NVIDIA/TensorRT-LLM cpp/tensorrt_llm/common/attentionOp.cpp and "
                "plugins/gptAttentionCommon/gptAttentionCommon.cpp (enqueueGeneration -> "
                "fusedQKV_masked_attention_dispatch; rows batch x beam)"),
)


#: Host work between iterations, by name (:mod:`launchgap.host_gaps`; innermost match wins), as Python
#: functions of a ``with_stack`` trace of the PyTorch backend: ``PyExecutor._schedule``,
#: ``_fetch_new_requests``, ``_update_requests`` / ``_handle_responses`` (py_executor.py), the model
#: engine's ``_prepare_inputs`` (model_engine.py) and the sampler (sampler.py).
HOST_PHASES = (
    (re.compile(r"(?:^|/)tensorrt_llm/_torch/pyexecutor/py_executor\.py\(\d+\): (?:_schedule|_fetch_new_requests)$"),
     "scheduler"),
    (re.compile(r"(?:^|/)tensorrt_llm/_torch/pyexecutor/model_engine\.py\(\d+\): _prepare_inputs$"),
     "_prepare_inputs"),
    (re.compile(r"(?:^|/)tensorrt_llm/_torch/pyexecutor/sampler\.py\(\d+\): \w*sample\w*$"), "sampler"),
    (re.compile(r"(?:^|/)tensorrt_llm/_torch/pyexecutor/py_executor\.py\(\d+\): "
                r"(?:_update_requests|_handle_responses)$"), "update_requests"),
)
