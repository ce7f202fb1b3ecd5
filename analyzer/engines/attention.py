"""Attention kernels of the libraries several engines share, and which phase each says a step is in.

A step launches the attention kernels of the requests it holds. Some kernels run only for requests that
generate (decode) or only for requests in their prompt (prefill); a step with only the first is a decode step,
with only the second a prefill step, with both a mixed one (:mod:`launchgap.steps`). Engine-specific ones are in
each engine module's ``PHASE_KERNELS``; these are the libraries' (FlashInfer, the TensorRT-LLM-generated FMHA
cubins that FlashInfer ships). Read from the libraries' and the engines' source:

* FlashInfer ``BatchDecodeWithPagedKVCacheKernel`` (also ``...KernelMLA``, ``...KernelMlaCuteSM80``;
  ``include/flashinfer/attention/decode.cuh``): the decode wrapper without tensor cores; it refuses more than one
  query token per request (``flashinfer/decode.py``: "q_len_per_req > 1" needs ``use_tensor_cores``). Decode,
  one token per request.
* FlashInfer ``BatchPrefillWithRaggedKVCacheKernel`` (the queries attend to their own K/V laid out flat: new
  prompt tokens) and ``SinglePrefillWithKVCacheKernel`` (one request's prompt; ``include/flashinfer/attention/
  prefill.cuh``). Prefill.
* Not phase kernels: FlashInfer's ``BatchPrefillWithPagedKVCacheKernel`` also runs decode: the decode wrapper
  with ``use_tensor_cores=True`` plans the batch prefill module (``flashinfer/decode.py``), which vLLM V1 always
  sets (``vllm/v1/attention/backends/flashinfer.py``: "Tensor cores are enabled by default") and SGLang sets for
  large query-head groups. FlashAttention's kernels run every phase: vLLM calls ``flash_attn_varlen_func`` for
  prefill, decode and mixed batches alike, and with a paged KV cache FlashAttention 2 always takes
  ``flash_fwd_splitkv_kernel`` (``mha_varlen_fwd``: ``force_split_kernel = paged_KV``); FlashAttention 3's
  ``FlashAttnFwdSm90`` is one kernel for all. vLLM's Triton ``kernel_unified_attention_2d`` / ``_3d`` choose
  between them by program count in some releases and by ``max_seqlen_q`` in others. AITER's ck_tile
  ``FmhaBatchPrefillWithPagedKVCacheKernel`` was not read for decode use: not matched.
* TensorRT-LLM's generated FMHA kernels (``fmhaSm100aKernel_...``; FlashInfer's ``trtllm_batch_context_with_kv_cache``
  / ``trtllm_batch_decode_with_kv_cache``, which vLLM and SGLang call on Blackwell): the name ends in the kernel
  type, ``toString(FmhaKernelType)``: ``Context`` (the context phase: prefill) or ``Gen`` / ``SwapsAbForGen`` /
  ``KeepsAbForGen`` (generation: decode; ``include/flashinfer/trtllm/fmha/fmhaRunnerParams.h``). The generation
  kernels also verify speculative decoding's several draft tokens per request (vLLM's FlashInfer backend
  ``supports_spec_as_decode``: requests of up to 1 + draft tokens query tokens take the decode path): decode,
  tokens per request not fixed.
* XQA's ``kernel_mha`` (TensorRT-LLM ``cpp/kernels/xqa/mha.cu``, ``mha_sm90.cu``, ``mla_sm120.cu``: ``extern "C"``
  under ``CUBIN_EXPORT``, precompiled or JIT-compiled; FlashInfer ships the same kernel): TensorRT-LLM runs it only
  in the generation phase (``AttentionOp::enqueueGeneration``: "XQA kernels are selected in the generation phase",
  ``mXqaDispatcher->run``), one row per sequence and beam, and for Medusa/draft tokens ``num_medusa_tokens + 1``
  per request: decode, tokens per request not fixed. TensorRT-LLM's context FMHA (``fmha_v2_…`` cubins) is no
  phase kernel: ``enqueueGeneration`` falls back to it where XQA does not apply ("Use FMHA otherwise").
* Not a phase kernel either: ROCm's paged attention ``paged_attention_ll4mi_QKV_mfma{4,16}_kernel`` (vLLM
  ``csrc/rocm/attention.cu``, and AITER's copy), a decode kernel that vLLM's ``chunked_prefill_paged_decode``
  launches over every sequence of every step, prefill-only steps included, skipping the prompt rows inside
  (``vllm/attention/ops/chunked_prefill_paged_decode.py``). Nor FlashMLA's ``flash_fwd_splitkv_mla_kernel``
  (``flash_mla_with_kvcache``, a decode kernel): vLLM's FLASHMLA backend sends prefills of up to 128 query tokens
  down its decode path (``reorder_batch_threshold = 128``, ``vllm/v1/attention/backends/mla/flashmla.py``).
"""
from __future__ import annotations

import re

from ._base import PhaseKernel

_FI = "flashinfer-ai/flashinfer @ fb28d724"
#: Attention kernels of shared libraries that run in one phase only (engine-specific ones: each engine's
#: ``PHASE_KERNELS``).
PHASE_KERNELS = (
    PhaseKernel(re.compile(r"\bBatchDecodeWithPagedKVCacheKernel"), "decode", True,
                f"{_FI} include/flashinfer/attention/decode.cuh; flashinfer/decode.py (q_len_per_req > 1 only with "
                f"use_tensor_cores, which runs the batch prefill kernel)"),
    PhaseKernel(re.compile(r"\bBatchPrefillWithRaggedKVCacheKernel|\bSinglePrefillWithKVCacheKernel"), "prefill",
                False, f"{_FI} include/flashinfer/attention/prefill.cuh"),
    PhaseKernel(re.compile(r"\b[fF]mhaSm\d+\w*Kernel_\w*Context\b"), "prefill", False,
                f"{_FI} include/flashinfer/trtllm/fmha/fmhaRunnerParams.h (FmhaKernelType::Context); TensorRT-LLM "
                f"trtllm-gen FMHA toString(FmhaKernelType)"),
    PhaseKernel(re.compile(r"\bkernel_mha\b"), "decode", False,
                "NVIDIA/TensorRT-LLM cpp/kernels/xqa/mha.cu, mha_sm90.cu (CUBIN_EXPORT kernel_mha); "
                "cpp/tensorrt_llm/common/attentionOp.cpp enqueueGeneration (XQA in the generation phase only; rows "
                "batch x beam, Medusa tokens + 1 per request)"),
    PhaseKernel(re.compile(r"\b[fF]mhaSm\d+\w*Kernel_\w*Gen\b"), "decode", False,
                f"{_FI} include/flashinfer/trtllm/fmha/fmhaRunnerParams.h (Generation, SwapsMmaAbForGeneration, "
                f"KeepsMmaAbForGeneration; also speculative decoding's draft tokens)"),
)
