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

from ._base import CaptureSettings, PhaseKernel, SequenceKernel, StepInfo, StepMarker, capture_list, no_info, \
    phase_from_counts, read_bool, read_int, read_int_list, read_word

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
    "vllm-project/vllm vllm/v1/worker/block_table.py (_compute_slot_mapping_kernel[(num_reqs + 1,)]), "
    "vllm/v1/worker/gpu/input_batch.py (_prepare_pos_seq_lens_kernel[(num_reqs + 1,)], "
    "_combine_sampled_and_draft_tokens_kernel[(num_reqs,)]), vllm/v1/worker/gpu/sample/gumbel.py (argmax over the "
    "tiles' maxima); grids checked on vLLM 0.24.0's H200 traces (traces/h200-vllm-2026-12-04)",
    "vllm-project/vllm csrc/cache_kernels.cu @ 002a0ba9 and later (grid(num_tokens), num_tokens = "
    "slot_mapping.size(0)); vllm/v1/attention/ops/triton_reshape_and_cache_flash.py @ 027e07f2; "
    "vllm/v1/attention/backends/rocm_aiter_fa.py @ 002d0eb6 (KV-cache writes per backend)",
    "vllm-project/vllm vllm/v1/worker/gpu_worker.py (annotate_profile wraps execute_model; sample_tokens a call of "
    "its own); vllm/profiler/wrapper.py @ 02773ee0 ({instance_id}-rank-{rank} file per worker)",
    "flashinfer-ai/flashinfer include/flashinfer/sampling.cuh (sampling kernels: nblks(batch_size))",
    "vllm-project/vllm vllm/v1/attention/backends/flashinfer.py @ 00a817ad (decode wrapper use_tensor_cores=True); "
    "vllm/attention/ops/chunked_prefill_paged_decode.py @ 06964ace (paged_attention_rocm over every sequence)",
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
    # The V1 runner's forward-pass range, once per iteration: the steps only where nothing above is in the trace
    # (a trace taken without with_stack by a release before Worker.annotate_profile). Not the older bare "Forward":
    # any user's record_function("Forward") would read as vLLM steps.
    StepMarker(NAME, "annotation", re.compile(r"^gpu_model_runner: forward$"), no_info,
               "GPUModelRunner.execute_model's record_function_or_nullcontext range around the forward pass",
               fallback=True),
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


#: How the engine's default runs a step that is not a uniform decode batch (prefill, or prefill beside decode rows)
#: on its capture list: ``cudagraph_mode=FULL_AND_PIECEWISE`` (the V1 default since 0.11) dispatches such a batch
#: to the PIECEWISE graphs of the same ``cudagraph_capture_sizes``, its tokens padded to the next size, eager above
#: the largest (``vllm/v1/cudagraph_dispatcher.py``; docs/design/cuda_graphs.md).
MIXED_STEPS_ON_LIST = "as PIECEWISE graphs of the same list under cudagraph_mode FULL_AND_PIECEWISE, the default, " \
                      "their tokens padded to the next size, eager above the largest"


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


#: The first release whose default engine is V1 (``VLLM_USE_V1=1`` by default from 0.8.0).
V1_DEFAULT_FROM = (0, 8)


def version_default(version: str | None, max_num_seqs: int | None) -> tuple[list[int], str]:
    """The default list a server of ``version`` captured (and which default it is), where its log names none: the
    V0 engine's before 0.8 (up to ``max_num_seqs``, 256), else V1's (up to ``min(2 x max_num_seqs, 512)``); an
    unknown version takes the newest."""
    m = re.match(r"v?(\d+)\.(\d+)", version or "")
    if m and (int(m.group(1)), int(m.group(2))) < V1_DEFAULT_FROM:
        return v0_sizes(min(max_num_seqs, V0_DEFAULT_MAX_SIZE) if max_num_seqs else None), "V0 engine (up to 0.10)"
    top = min(2 * max_num_seqs, DEFAULT_MAX_SIZE) if max_num_seqs else None
    return v1_sizes(top), "V1 engine (0.11+, max_cudagraph_capture_size)"


#: Largest default capture size on data-centre Blackwell GPUs (``max_cudagraph_capture_size`` docs, late 2025).
BLACKWELL_MAX_SIZE = 1024
_BLACKWELL = re.compile(r"(?i)\b(?:GB|B)(?:100|200|300)\b")


def parse_config(text: str) -> CaptureSettings | None:
    """vLLM's capture settings in pasted text, ``None`` when there are none.

    Read, as JSON (``--compilation-config '{...}'``), the Python dict the launch log prints, or
    command-line flags (``--cudagraph-capture-sizes 1 2 4``, ``-cc.cudagraph_capture_sizes '[1,2]'``):
    ``cudagraph_capture_sizes`` (the list), ``max_cudagraph_capture_size``, ``cuda_graph_sizes``
    (0.10-0.11; one value is the maximum), ``max_num_seqs`` (the default maximum is
    ``min(2 x max_num_seqs, 512)``), ``cudagraph_mode`` and ``enforce_eager`` (``NONE`` / true: no graphs).
    """
    sizes = read_int_list(text, "cudagraph_capture_sizes")
    legacy = read_int_list(text, "cuda_graph_sizes")
    top = read_int(text, "max_cudagraph_capture_size")
    seqs = read_int(text, "max_num_seqs")
    mode = read_word(text, "cudagraph_mode")
    eager = read_bool(text, "enforce_eager")
    read = []
    if sizes:
        read.append(f"cudagraph_capture_sizes={list(sizes)}")
    if legacy and sizes is None:
        if len(legacy) == 1:
            top = top or legacy[0]
        else:
            sizes = legacy
        read.append(f"cuda_graph_sizes={list(legacy)}")
    if top is not None:
        read.append(f"max_cudagraph_capture_size={top}")
    elif seqs is not None and not sizes:
        top = min(2 * seqs, DEFAULT_MAX_SIZE)
        read.append(f"max_num_seqs={seqs} (default maximum min(2 x {seqs}, {DEFAULT_MAX_SIZE}) = {top})")
    disabled = bool(eager) or mode == "NONE"
    if mode is not None:
        read.append(f"cudagraph_mode={mode}")
    if eager:
        read.append("enforce_eager=true")
    if not read:
        return None
    return CaptureSettings(NAME, sizes or None, top, "pad", disabled, tuple(read))


def trace_default(device_name: str | None, memory_gib: float | None, world_size: int | None) -> tuple[list[int], str]:
    """The default list for the GPU the trace ran on: maximum 1024 on data-centre Blackwell, else 512
    (``max_num_seqs`` is not in a trace; a server with another one should paste its config)."""
    if device_name and _BLACKWELL.search(device_name):
        return v1_sizes(BLACKWELL_MAX_SIZE), f"vLLM V1 default, maximum {BLACKWELL_MAX_SIZE} on {device_name}"
    return v1_sizes(), f"vLLM V1 default, maximum {DEFAULT_MAX_SIZE}"


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


#: Kernels launched with one block per token (grid x = the step's tokens). The KV-cache writes: the CUDA/HIP kernels
#: of ``csrc/cache_kernels.cu`` (``reshape_and_cache_kernel``: ROCM_ATTN's paged layout; ``reshape_and_cache_flash_kernel``:
#: FLASH_ATTN, FLASHINFER, ROCM_AITER_FA, TRITON_ATTN on CUDA; ``concat_and_cache_mla_kernel`` /
#: ``concat_and_cache_ds_mla_kernel``: MLA backends incl. ROCm AITER MLA), each ``grid(num_tokens)`` with
#: ``num_tokens = slot_mapping.size(0)``; the Triton ones (``reshape_and_cache_kernel_flash`` and ``..._diffkv`` in
#: ``triton_reshape_and_cache_flash.py``: grid ``(slot_mapping.shape[0], tiles)``; ``_reshape_cache_per_token``: grid
#: ``(num_tokens,)``; ROCM_AITER_FA's shuffle-layout ``reshape_and_cache_shuffle_kernel``: grid ``(num_tokens,
#: num_kv_heads)``). The slot mapping is not padded when the write runs eagerly (eager mode, and attention between
#: the PIECEWISE pieces: the tokens scheduled); a write inside a graph replays at the size it was captured at (FULL
#: graphs; padding slots are -1 and skipped). And ``vllm::rotary_embedding_kernel``
#: (``csrc/pos_encoding_kernels.cu``: ``grid(num_tokens)``, positions padded as the model's input). Not matched: AITER's
#: fused ``_fused_qk_rope_reshape_and_cache_kernel`` (grid x = tokens x query heads) and the context gathers
#: (``cp_mha_gather_cache_kernel``: context tokens).
TOKEN_KERNELS = re.compile(r"reshape_and_cache(?:_flash)?_kernel|reshape_and_cache_kernel_flash(?:_diffkv)?\b|"
                           r"reshape_and_cache_shuffle_kernel|\b_reshape_cache_per_token\b|"
                           r"concat_and_cache_(?:ds_)?mla_kernel|vllm::rotary_embedding_kernel")
#: Kernels launched with one block per sequence, plus a known extra
#: (:class:`~launchgap.engines._base.SequenceKernel`): their grid gives the step's requests, before the argmax over
#: the logits (:data:`launchgap.steps.REQUEST_KERNELS`) does, as the V2 model runner's argmax runs over per-tile
#: maxima (``gpu/sample/gumbel.py``: ``local_max.argmax(dim=-1)``, 126 columns for a 128K vocabulary), whose
#: reduction packs 16 rows a block (grid x 3 for 48 requests on the H200 traces). The input preparation runs eagerly
#: before a FULL graph's replay, at the step's own requests.
REQUEST_KERNELS = (
    SequenceKernel(re.compile(r"flashinfer::sampling::\w*SamplingFrom\w*Kernel"), 0,
                   "FlashInfer include/flashinfer/sampling.cuh: dim3 nblks(batch_size); vLLM's top-k / top-p sampler"
                   " on CUDA (vllm/v1/sample/ops/topk_topp_sampler.py)"),
    SequenceKernel(re.compile(r"^_combine_sampled_and_draft_tokens_kernel$"), 0,
                   "vllm/v1/worker/gpu/input_batch.py (V2 runner): _combine_sampled_and_draft_tokens_kernel"
                   "[(num_reqs,)]"),
    SequenceKernel(re.compile(r"^_prepare_pos_seq_lens_kernel$"), 1,
                   "vllm/v1/worker/gpu/input_batch.py (V2 runner): _prepare_pos_seq_lens_kernel[(num_reqs + 1,)], "
                   "the last block pads seq_lens for FULL graphs"),
    SequenceKernel(re.compile(r"^_compute_slot_mapping_kernel$"), 1,
                   "vllm/v1/worker/block_table.py (V1 runner): _compute_slot_mapping_kernel[(num_reqs + 1,)]"),
)
#: The V2 model runner's request-state kernels (:data:`launchgap.engines.STATE_KERNELS`): ``_apply_write_kernel``
#: (``vllm/v1/worker/gpu/buffer_utils.py``, ``[(n,)]`` over the staged writes of block tables and request state, so
#: it runs when requests arrive, finish or take a new KV block) and ``_prepare_prefill_inputs_kernel``
#: (``gpu/input_batch.py``, when a step holds prompt tokens). A server's trace of decode alone runs neither.
STATE_KERNELS = re.compile(r"^_apply_write_kernel$|^_prepare_prefill_inputs_kernel$")
#: Attention kernels of vLLM's own that run in one phase only (:class:`~launchgap.engines._base.PhaseKernel`; the
#: libraries' in :mod:`launchgap.engines.attention`): none. What the V1 backends launch runs in every phase:
#: FLASH_ATTN calls ``flash_attn_varlen_func`` for prefill, decode and mixed batches; FLASHINFER's decode wrapper is
#: built ``use_tensor_cores=True`` and so runs the batch *prefill* kernel for decodes
#: (``vllm/v1/attention/backends/flashinfer.py``); TRITON_ATTN's ``kernel_unified_attention_2d`` / ``_3d`` are
#: chosen by program count in some releases; ROCM_ATTN's ``chunked_prefill_paged_decode`` launches
#: ``paged_attention_rocm`` (``paged_attention_ll4mi_*``) or ``kernel_paged_attention_2d`` over every sequence of
#: every step and skips the prompt rows inside (``vllm/attention/ops/chunked_prefill_paged_decode.py``).
PHASE_KERNELS: tuple[PhaseKernel, ...] = ()


#: Host work between steps, by name (:mod:`launchgap.host_gaps`; innermost match wins). From
#: vllm/v1/worker/gpu_model_runner.py (``record_function_or_nullcontext("gpu_model_runner: preprocess")``, written
#: ``"Preprocess"`` / ``"Sample"`` / ``"Postprocess"`` / ``"Bookkeep"`` in V1 releases before that prefix,
#: around ``_update_states`` and ``_prepare_inputs``; ``"gpu_model_runner: sample"`` around ``_sample``;
#: ``postprocess``, ``bookkeep``, ``draft``) and vllm/v1/core/sched/scheduler.py (``schedule``,
#: ``update_from_output``) as Python functions of a ``with_stack`` trace. Versions without the
#: ``preprocess`` range (the TraceLens gpt-oss samples in traces/engines) run the rest of the input
#: preparation in ``execute_model`` itself: ``_determine_batch_execution_and_padding`` and
#: ``_build_attention_metadata`` count as ``preprocess`` there.
HOST_PHASES = (
    (re.compile(r"(?:^|/)gpu_model_runner\.py\(\d+\): _update_states$"), "_update_states"),
    (re.compile(r"(?:^|/)gpu_model_runner\.py\(\d+\): _prepare_inputs$"), "_prepare_inputs"),
    (re.compile(r"^(?:gpu_model_runner: preprocess|Preprocess)$|(?:^|/)gpu_model_runner\.py\(\d+\): "
                r"(?:_determine_batch_execution_and_padding|_build_attention_metadata)$"), "preprocess"),
    (re.compile(r"^(?:gpu_model_runner: sample|Sample)$|(?:^|/)vllm/v1/sample/sampler\.py\(\d+\): forward$|"
                r"(?:^|/)gpu_model_runner\.py\(\d+\): (?:_sample|sample_tokens)$"), "sampler"),
    (re.compile(r"^(?:gpu_model_runner: (?:postprocess|bookkeep)|Postprocess|Bookkeep)$"), "postprocess"),
    (re.compile(r"^gpu_model_runner: draft$"), "draft"),
    (re.compile(r"(?:^|/)vllm/v1/core/sched/scheduler\.py\(\d+\): (?:schedule|update_from_output)$|"
                r"^schedule: "), "scheduler"),
)
