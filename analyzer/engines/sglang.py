"""SGLang: its step spans, detection cues, collectives and CUDA-graph capture lists.

Facts read from sgl-project/sglang (PRs and files in docs/engines.md):

* **Step span.** ``ModelRunner.forward`` wraps each forward in ``profile_range`` with the name
  from ``_build_step_span_name`` (PR #23419, Apr 2026): ``step[EXTEND bs={bs} toks={tokens}]``
  for an extend (prefill) batch, ``step[{MODE} bs={bs}]`` for every other ``ForwardMode``
  (``DECODE``, ``MIXED``, ``IDLE``, ``TARGET_VERIFY``, ``DRAFT_EXTEND``, ...). The PR's
  description also shows lower-case forms (``step[decode bs=N]``, ``step[prefill bs=N toks=T]``,
  ``step[mixed bs=N ext=T dec=D]``, ``step[idle]``); later PRs add spans for graph replays that
  bypass ``forward`` (PR #32850) and append per-step aggregates inside the brackets
  (``roofline_annotations``, PR #24911). All read the same way: mode first, then ``key=value``.
  ``bs`` is the number of requests; a ``DECODE`` step processes one token per request.
* **Python functions** (traces taken ``with_stack``): one
  ``sglang/srt/model_executor/model_runner.py(N): forward`` per forward pass.
* **Capture.** ``--enable-profile-cuda-graph`` profiles graph capture (``cuda_graph_runner.py``
  ``capture_one_batch_size``); the TraceLens fork names each size ``capture_{bs}_DECODE``.
* **Default capture sizes** (``server_args._generate_cuda_graph_batch_sizes``):
  ``[1, 2, 4, 8, 12] + range(16, 257, 8) + range(272, 512, 16) + range(512, max + 1, 32)`` cut at
  ``cuda_graph_max_bs``; ``--disable-cuda-graph-padding``: every size ``1..max``.
  ``cuda_graph_runner.get_batch_sizes_to_capture`` adds the largest running batch when the list
  goes past it. ``cuda_graph_max_bs`` depends on GPU memory and TP size
  (:func:`default_max_bs`): 256 on an H100/H200 at TP < 4, 512 at TP >= 4 or on B200/MI300.
  Older releases (the list in ``cuda_graph_runner``): ``[1, 2, 4, 8] + range(16, 161, 8)``, plus
  ``range(160, 257, 8)`` on GPUs over 80 GiB.
"""
from __future__ import annotations

import re

from ._base import CaptureSettings, PhaseKernel, StepInfo, StepMarker, capture_list, no_info, read_bool, read_int, read_int_list

NAME = "sglang"
LABEL = "SGLang"
SNIPPET_LANGUAGE = "bash"
#: How the default runs a prefill or mixed step on the capture list (see ``vllm.MIXED_STEPS_ON_LIST``): not at all,
#: its CUDA graphs run decode batches only by default (a prefill's piecewise graphs,
#: ``--enable-piecewise-cuda-graph``, take their own token list).
MIXED_STEPS_ON_LIST = None
VERSIONS_READ = (
    "sgl-project/sglang python/sglang/srt/model_executor/model_runner.py _build_step_span_name (PR #23419); "
    "spans of graph replays (PR #32850) and roofline aggregates (PR #24911)",
    "sgl-project/sglang python/sglang/srt/server_args.py _generate_cuda_graph_batch_sizes and the "
    "GPU-memory table of cuda_graph_max_bs; cuda_graph_runner.get_batch_sizes_to_capture (older list)",
    "TraceLens traces at 8bb88d08 (SGLang with the unmerged profiling PR #21765: capture_{bs}_DECODE ranges "
    "and a vLLM-style execute_... range around each step[...])",
    "sgl-project/sglang python/sglang/srt/layers/attention/triton_ops/decode_attention.py @ 03cd2ec4 (decode "
    "kernels); layers/attention/flashinfer_backend.py should_use_tensor_core",
)

_PREFILL_MODES = {"EXTEND", "PREFILL", "SPLIT_PREFILL"}
_DECODE_MODES = {"DECODE", "TARGET_VERIFY"}
_KEY_VALUE = re.compile(r"\b(\w+)=(\d+)\b")


def _step_span(m: re.Match[str]) -> StepInfo:
    mode = m["mode"].upper()
    kv = {k: int(v) for k, v in _KEY_VALUE.findall(m["rest"] or "")}
    phase = ("prefill" if mode in _PREFILL_MODES else "decode" if mode in _DECODE_MODES
             else "mixed" if mode == "MIXED" else None)
    bs = kv.get("bs")
    if "toks" in kv:
        tokens = kv["toks"]
    elif "ext" in kv and "dec" in kv:
        tokens = kv["ext"] + kv["dec"]
    elif mode == "DECODE" and bs is not None:
        tokens = bs  # one new token per request in a plain decode batch
    else:
        tokens = None
    if mode == "IDLE" and bs is None:
        bs = 0
    return StepInfo(phase, bs, tokens)


STEP_MARKERS = (
    StepMarker(NAME, "annotation", re.compile(r"^step\[(?P<mode>[A-Za-z][A-Za-z0-9_]*)(?P<rest>\s[^\]]*)?\]$"),
               _step_span, "ModelRunner.forward, _build_step_span_name (PR #23419)"),
    StepMarker(NAME, "python", re.compile(r"(?:^|/)sglang/srt/model_executor/model_runner\.py\(\d+\): forward$"),
               no_info, "ModelRunner.forward, traces taken with_stack"),
)
CAPTURE_ANNOTATION = re.compile(r"^capture_(?P<size>\d+)_(?P<mode>DECODE)$")
PYTHON_CUE = re.compile(r"(?:^|/)sglang/srt/[\w/]+\.py\(\d+\)")
OP_CUE = re.compile(r"^(?:sglang|sgl_kernel|sglang_profiler)::")
COLLECTIVE_KERNELS = r"cross_device_reduce|quick_?reduce"

#: ``cuda_graph_max_bs`` the planner assumes (an H100/H200 at TP < 4; see :func:`default_max_bs`).
DEFAULT_MAX_SIZE = 256


def default_max_bs(gpu_memory_gib: float | None, tp_size: int = 1) -> int:
    """SGLang's default ``cuda_graph_max_bs`` for a GPU of this much memory (GiB) and TP size."""
    if gpu_memory_gib is None:
        return 160
    mem_mib = gpu_memory_gib * 1024
    small_tp = tp_size < 4
    if mem_mib < 35 * 1024:  # T4, 4090-class
        return 24 if small_tp else 80
    if mem_mib < 60 * 1024:  # A100 40GB, L40
        return 32 if small_tp else 160
    if mem_mib < 160 * 1024:  # H100, A100 80GB, H20, H200
        return 256 if small_tp else 512
    return 512  # B200, MI300


def current_sizes(max_size: int | None = None, padding: str = "pad") -> list[int]:
    """``_generate_cuda_graph_batch_sizes``, with the largest size appended as the runner does."""
    top = DEFAULT_MAX_SIZE if max_size is None else max_size
    if padding == "exact":
        return list(range(1, top + 1))
    sizes = capture_list([1, 2, 4, 8, 12] + list(range(16, 257, 8)) + list(range(272, 512, 16))
                         + list(range(512, top + 1, 32)), top)
    return sizes if top in sizes else sizes + [top]


def older_sizes(max_size: int | None = None, padding: str = "pad") -> list[int]:
    """Older ``get_batch_sizes_to_capture``: ``[1, 2, 4, 8] + range(16, 161, 8)`` (+ to 256 above 80 GiB)."""
    top = DEFAULT_MAX_SIZE if max_size is None else max_size
    if padding == "exact":
        low = list(range(1, 33)) + list(range(40, 161, 16))
    else:
        low = [1, 2, 4, 8] + list(range(16, 161, 8))
    return capture_list(low + list(range(160, 257, 8)), top)


CAPTURE_LISTS = {"current (server_args._generate_cuda_graph_batch_sizes)": current_sizes,
                 "older (cuda_graph_runner.get_batch_sizes_to_capture, GPU over 80 GiB)": older_sizes}


def default_sizes(max_size: int | None = None, padding: str = "pad") -> list[int]:
    """The newest default list cut at ``max_size`` (``padding="exact"``: every size up to it)."""
    return current_sizes(max_size, padding)


def parse_config(text: str) -> CaptureSettings | None:
    """SGLang's capture settings in pasted text (``--cuda-graph-bs 1 2 4``, ``--cuda-graph-max-bs 160``,
    ``--disable-cuda-graph-padding``, ``--disable-cuda-graph``, or the launch log's
    ``server_args=ServerArgs(cuda_graph_max_bs=..., cuda_graph_bs=[...], ...)`` dump; 0.5.14+'s per-phase
    ``cuda_graph_bs_decode`` / ``cuda_graph_max_bs_decode``), ``None`` when there are none."""
    sizes = read_int_list(text, "cuda_graph_bs")
    if sizes is None:
        sizes = read_int_list(text, "cuda_graph_bs_decode")
    top = read_int(text, "cuda_graph_max_bs")
    if top is None:
        top = read_int(text, "cuda_graph_max_bs_decode")
    no_pad = read_bool(text, "disable_cuda_graph_padding")
    off = read_bool(text, "disable_cuda_graph")
    read = []
    if sizes:
        read.append(f"cuda_graph_bs={list(sizes)}")
    if top is not None:
        read.append(f"cuda_graph_max_bs={top}")
    if no_pad is not None:
        read.append(f"disable_cuda_graph_padding={str(no_pad).lower()}")
    if off:
        read.append("disable_cuda_graph=true")
    if not read:
        return None
    return CaptureSettings(NAME, sizes or None, top, "exact" if no_pad else "pad", bool(off), tuple(read))


def trace_default(device_name: str | None, memory_gib: float | None, world_size: int | None) -> tuple[list[int], str]:
    """The default list for the trace's GPU: ``cuda_graph_max_bs`` from its memory and TP size
    (:func:`default_max_bs`; unknown memory: 160 as SGLang does)."""
    top = default_max_bs(memory_gib, world_size or 1)
    mem = f"{memory_gib:.0f} GiB" if memory_gib else "unknown memory"
    return current_sizes(top), f"SGLang default, cuda_graph_max_bs {top} ({mem}, TP {world_size or 1})"


def capture_config(buckets: list[int], padding: str) -> dict:
    """Server arguments that capture exactly ``buckets``."""
    out: dict = {"cuda_graph_bs": list(buckets)}
    if padding == "exact":
        out["disable_cuda_graph_padding"] = True
    return out


def config_snippet(buckets: list[int], padding: str) -> str:
    """The same as command-line flags (``--disable-cuda-graph`` when nothing is captured)."""
    if not buckets:
        return "--disable-cuda-graph"
    text = "--cuda-graph-bs " + " ".join(str(x) for x in buckets)
    if padding == "exact":
        text += " --disable-cuda-graph-padding"
    return text


#: Kernels launched with one block per token (grid x = the step's tokens): ``sgl_kernel``'s
#: ``store_kvcache`` (the KV-cache write) and ``rotary_embedding_kernel`` (``grid(num_tokens)``).
TOKEN_KERNELS = re.compile(r"store_kvcache|(?<!vllm::)rotary_embedding_kernel")
#: Kernels launched with one block per sequence (grid x = the step's requests); ``None``: none known.
REQUEST_KERNELS = None
#: No request-state kernels of its own are known (:data:`launchgap.engines.STATE_KERNELS`).
STATE_KERNELS = None
#: Attention kernels of SGLang's own that run in one phase only (the libraries' are in
#: :mod:`launchgap.engines.attention`): the Triton backend's decode attention (``_fwd_kernel_stage1``,
#: ``_fwd_grouped_kernel_stage1`` and their ``_int8`` forms in ``layers/attention/triton_ops/decode_attention.py``,
#: grid ``(batch, heads, kv_splits)`` over ``q`` of one row per request; an EAGLE draft step with top-k > 1 has one
#: row per request and branch), called by ``forward_decode`` only; the
#: extend (prefill) kernel is a bare ``_fwd_kernel``, too common a name to match. Its FlashInfer backend builds the
#: decode wrapper with tensor cores for an FP8 KV cache or more than 4 query heads per KV head
#: (``should_use_tensor_core``), which then runs FlashInfer's batch prefill kernel.
PHASE_KERNELS = (
    PhaseKernel(re.compile(r"\b_fwd_(?:grouped_)?kernel_stage1(?:_int8)?\b"), "decode", True,
                "sgl-project/sglang python/sglang/srt/layers/attention/triton_ops/decode_attention.py @ 03cd2ec4"),
)


#: Host work between steps, by name (:mod:`launchgap.host_gaps`; innermost match wins), as Python
#: functions of a ``with_stack`` trace: the scheduler's ``get_next_batch_to_run`` and
#: ``process_batch_result*`` (python/sglang/srt/managers/scheduler.py and its output-processor mixin),
#: ``ScheduleBatch.prepare_for_decode`` (schedule_batch.py), ``ForwardBatch.init_new``
#: (forward_batch_info.py: the model's inputs), the sampler (layers/sampler.py ``forward``, inside
#: model_runner.py ``sample``) and ``CudaGraphRunner.replay_prepare`` (copying the batch into the
#: graph's input buffers before a replay; seen in the TraceLens Qwen3-8B decode sample).
HOST_PHASES = (
    (re.compile(r"(?:^|/)sglang/srt/managers/scheduler\.py\(\d+\): (?:get_next_batch_to_run|recv_requests)$"),
     "scheduler"),
    (re.compile(r"(?:^|/)sglang/srt/managers/\w+\.py\(\d+\): process_batch_result\w*$"), "process_batch_result"),
    (re.compile(r"(?:^|/)sglang/srt/managers/schedule_batch\.py\(\d+\): prepare_for_decode$"), "prepare_for_decode"),
    (re.compile(r"(?:^|/)sglang/srt/model_executor/forward_batch_info\.py\(\d+\): init_new$"), "prepare_inputs"),
    (re.compile(r"(?:^|/)sglang/srt/layers/sampler\.py\(\d+\): forward$|"
                r"(?:^|/)sglang/srt/model_executor/model_runner\.py\(\d+\): sample$"), "sampler"),
    (re.compile(r"(?:^|/)sglang/srt/model_executor/cuda_graph_runner\.py\(\d+\): replay_prepare$"),
     "replay_prepare"),
)
