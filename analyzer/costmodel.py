"""The cost of a FULL-graph decode step at every batch size, from a trace's own kernels: the one cost curve.

A production trace holds a few steps at one or two batch sizes. The cost of a step at any other size
follows from how each of its kernels scales with the rows of the batch (**the batch-scaling model**):

* **matrix multiplies** (``gemm``: cuBLAS/nvjet/CUTLASS/hipBLASLt/Triton matmuls) read their weights
  once per step whatever the batch: flat while weight-bound, then growing with the rows once they turn
  compute-bound. The turn is at ``ridge_rows`` rows: the GPU's peak FLOPs over its memory bandwidth
  (bf16 matmul: 2 FLOPs per weight byte and row) times :attr:`ScalingModel.gemm_efficiency`, the share
  of that ridge real decode GEMMs reach. Peak figures by GPU name (:data:`GPU_PEAKS`), else from the
  trace's device properties (SM count and clock: :func:`gpu_peaks`);
* **attention** (``attention``): every row reads its own KV cache, in blocks per row that the grid says (heads x
  KV splits): the time follows the waves of blocks over the SMs (whole waves for one resident block per SM, the
  blocks per SM continuously above a fixed part for two or more, a share of a begun wave paid at once: fitted on the
  trace where it has three or more such sizes), above a fixed part of a wave; a persistent grid's blocks per row come
  from another observed size or its time. Below the traced rows, a kernel whose one row the
  waves put past :attr:`ScalingModel.attention_split_us` (a long KV per block) splits its KV over more blocks, as
  split-KV kernels do when the rows no longer fill the GPU: its time then follows the rows above a fixed part, at
  least one latency-bound launch. The rules were fitted on the H200: on another NVIDIA GPU a launch traced within
  its latency (one row: the same time on any Hopper part) grows past it at that GPU's bandwidth
  (:attr:`ScalingModel.attention_bandwidth_ratio`);
* **KV-cache writes** (``kv_write``) follow the element-wise rule below (one small block per token);
* **element-wise work and sampling** (norms, activations, copies, argmax over the vocabulary): small
  latency-bound grids grow far slower than their rows; a grid with more blocks than the SMs hold at once
  (work over the whole KV cache or vocabulary, or a grid per row once the rows are many) runs in waves: its time
  is a fixed part of :attr:`ScalingModel.elementwise_fixed_waves` of a wave (launch, ramp, tail) plus its waves,
  which follow its rows. One shape per kernel, the larger of the two, so a half-wave grid that fills 30 waves at
  another size grows by its waves and one predicted down from many waves ends at the latency-bound time; a grid
  sized to the GPU (a multiple of the SMs that they hold at once: grid-stride loops such as PyTorch's
  ``CatArrayBatchedCopy``) says nothing of its work and counts as latency-bound;
* **matrix multiplies over every row's context** (``row_gemm``: a matmul whose tile, as its name says, is at least
  128 and twice the step's rows wide on both sides multiplies far more rows than the batch: HF DeepSeek-V2's
  latent KV cache decompressed every step, attention written as matmuls): ``t0 · (F + b) / (F + b0)``, ``F`` =
  :attr:`ScalingModel.row_gemm_fixed_rows`;
* **collectives** (NCCL, custom all-reduce) move the activations: bytes per row, the same rule;
* **routed experts** (``expert``: vLLM/SGLang's ``fused_moe_kernel``, grouped GEMMs such as ``torch._grouped_mm``,
  TensorRT-LLM's MoE GEMMs, triton_kernels' ``_matmul_ogs`` of vLLM's gpt-oss) read the weights of the experts the batch's tokens hit: with top-``k`` of ``E`` experts
  and uniform routing ``E·(1 - (1 - k/E)^b)`` of them (:func:`experts_hit`), above a fixed part per launch
  (:attr:`ScalingModel.expert_fixed_us`, 7 us: set-up, tile scheduling, an under-filled wave at a few rows; assumed,
  the curve's notes say so), and with the rows once compute-bound. ``k/E`` from the model config, else from the expert kernels' growth between two
  observed sizes, else a prior the curve's notes call assumed (:func:`expert_share`). The routing's own kernels
  (top-k gating, sorting tokens by expert) are element-wise.

:func:`fit_cost_curve` fits the curve on whatever the trace has: per observed size the median step's
FULL-graph cost (``predicted_graph_us``: GPU busy plus replay cost, :mod:`launchgap.predict`) and its
GPU time per kernel class. A size's cost is the observed one plus what its kernels add, as the observed cost was
built from them: their change at the trace's unprofiled share of kernel time, and the replay's node cost for each
kernel that turns short (under 20 us) or long. With one size the model above carries it to every size; with two or more,
each class's time is linear between the observed sizes (their measured growth) and the model extends it
beyond them. Harness timings, when given, win at their sizes and the curve's shape is kept between
them. The curve passes through every observed point exactly. The band (``low_us``/``high_us``) is the
curve under the model's constants halved and doubled (one size; where one or two traced rows run an attention
grid that fills the SMs, a split-KV grid, also the curve with that kernel following its rows), or the spread of the
single-size predictions from each observed size (two or more), widened to at least the measured error
(:func:`band_fraction`: 2% at a traced size, 1.5% more per e-fold of batch size from the nearest one; the truth
lies inside it at 96% (one size) and 93% (two) of sizes on the held-out sets).

The constants were fitted on the 1b session of 2026-12-01 (FULL graphs at bs 1, 8, 32, 64 against
unprofiled timings at every size 1..64), the split-KV ones on the long-context sets of 2026-12-04, and checked on other
models: docs/costmodel.md has the error
on each held-out set.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from typing import Callable

import numpy as np

from .gpus import device_properties_of, is_amd, name_from_properties
from .predict import MIN_HOST_INTERVALS, HostLaunchCost
from .trace import Api, Kind, Trace, kernel_own_name

#: Kernel classes of the batch-scaling model, the class index of each kernel in :class:`SizeSample`.
KERNEL_CLASSES = ("gemm", "attention", "kv_write", "collective", "elementwise", "expert", "row_gemm")
_GEMM, _ATTN, _KV, _COLL, _ELEM, _EXPERT, _ROW_GEMM = range(len(KERNEL_CLASSES))
#: A mixture of experts' routing and bookkeeping (top-k gating, sorting tokens by expert, the grouped GEMM's argument
#: set-up, the weighted sum): small latency-bound kernels, whatever "gemm"/"moe"/"softmax" their names hold.
_MOE_ROUTING = re.compile(r"(?i)prepare_grouped|align_block_size|moe_sum|topk_?(?:gating|softmax)|topkGating|"
                          r"moe_?softmax|moe_?topk|"
                          r"sort_?(?:and_)?expert|count_and_sort|expandInputRows|finalizeMoe|computeStrides|"
                          r"moe_fused_gate|grouped_topk|moe_routing|routing_?kernel")
#: Kernel-name patterns per class (first match wins; no match: element-wise). Engine-specific kernel names
#: (vLLM's ``reshape_and_cache``) are in :mod:`launchgap.engines` for batch detection; here only the class.
CLASS_PATTERNS = (
    # Inductor's fused pointwise / reduction kernels are element-wise work whatever op they were fused around
    # (``triton_poi_fused__scaled_dot_product_cudnn_attention_...`` copies q/k/v, it does not attend)
    (_ELEM, re.compile(r"^triton_(?:poi|red|per)_")),
    (_ELEM, _MOE_ROUTING),
    (_COLL, re.compile(r"(?i)nccl|all_?reduce|allgather|all_gather|reduce_?scatter|cross_device_reduce|quick_?reduce|"
                       r"userbuffers|multimem|rccl")),
    # KV-cache writes by name first (vLLM's reshape_and_cache_flash_kernel says "flash"), then attention (whose
    # template arguments may name the cache: ROCm's paged_attention_ll4mi_QKV_mfma16_kernel<..., Fp8KVCacheDataType>,
    # ck_tile's FmhaBatchPrefillWithPagedKVCacheKernel), then anything else that names the KV cache
    (_KV, re.compile(r"(?i)reshape_and_cache|_reshape_cache_per_token|concat_and_cache|store_kv|set_kv_buffer|"
                     r"append_paged_kv|write_to_kv")),
    # FlashInfer's namespace alone says nothing (flashinfer::norm::RMSNormKernel, flashinfer::sampling::...): its
    # attention kernels say BatchDecode / BatchPrefill / SinglePrefill / ...Attention. TensorRT-LLM's XQA decode
    # kernels (``xqa_kernel_dt_*`` cubins, ``kernel_mha`` JIT); Triton attention by its usual names: SGLang's decode
    # ``_fwd_kernel_stage1`` / ``_fwd_grouped_kernel_stage1`` / ``_fwd_kernel_stage2`` and extend ``_fwd_kernel``,
    # vLLM's unified attention's split combine ``reduce_segments``
    (_ATTN, re.compile(r"(?i)flash(?!infer)|fmha|sdpa|attention|attn|paged_|mha_|xformers|decode_kernel|"
                       r"batch_?decode|batch_?prefill|single_?decode|single_?prefill|mla_|xqa|kernel_mha|"
                       r"^_fwd_(?:grouped_)?kernel|^reduce_segments$")),
    (_KV, re.compile(r"(?i)kv_?cache|cache_kernel")),
    # The routed experts' matrix multiplies: vLLM/SGLang's Triton ``fused_moe_kernel``, grouped GEMMs over the experts
    # (``torch._grouped_mm``'s CUTLASS kernel: ``GroupProblemShape``; vLLM's ``cutlass_moe_mm``; DeepGEMM's
    # ``m_grouped`` / ``GemmType::Grouped...``), TensorRT-LLM's ``MoeFCGemm`` / ``moe_gemm``, Marlin MoE, AMD's
    # ``fmoe`` / ``ck_moe``, triton_kernels' ``_matmul_ogs_*`` (gather-scatter expert matmuls: vLLM's gpt-oss MoE)
    (_EXPERT, re.compile(r"(?i)fused_moe|moe_?gemm|MoeFCGemm|moe_mm|moe_wna16|marlin_?moe|grouped_?(?:gemm|mm)|"
                         r"GroupProblemShape|m_grouped|GemmType::Grouped|fmoe|ck_moe|matmul_ogs")),
    # cuBLAS's split-K reduce is the matmul's own epilogue over its output tile: flat with it (as element-wise work
    # the H200 sets' one-size cases within both bars fall from 69 to 58 of 107)
    (_GEMM, re.compile(r"(?i)gemm|gemv|nvjet|cutlass|xmma|cublas|splitkreduce|_mm_|matmul|Cijk_|wvSplitK|"
                       r"sm\d+_xmma|hgemm|sgemm|_tn_|_nt_|ampere_.*tensorop|triton_\w*mm")),
)


#: Kernels either side of a softmax searched for the two matmuls of attention written out as matmuls (``Q·Kᵀ``, scale
#: and mask, softmax, checks and casts, ``·V``): PyTorch's math SDPA backend runs six kernels from its softmax to its
#: ``·V`` matmul and one between its ``Q·Kᵀ`` and the softmax (H200, traces/h200-attn-2026-12-05).
ATTENTION_MATMUL_WINDOW = 8
_SOFTMAX = re.compile(r"(?i)softmax")


def is_attention_softmax(name: str) -> bool:
    """A softmax kernel that is not a mixture's top-k gating (``topkGatingSoftmax``: routing, :data:`_MOE_ROUTING`)."""
    own = kernel_own_name(name)
    return bool(_SOFTMAX.search(own)) and not _MOE_ROUTING.search(own)


def attention_matmuls(kernel_step: np.ndarray, kernel_class: np.ndarray, softmax: np.ndarray) -> np.ndarray:
    """Per kernel row (in launch order) whether it is one of the two matmuls of attention written out as matmuls
    (PyTorch's math SDPA backend, Hugging Face's ``eager`` attention, hand-written ``softmax(Q·Kᵀ)·V``): the nearest
    matmul (``kernel_class`` ``gemm``) before a ``softmax`` kernel (:func:`is_attention_softmax`) and the nearest after
    it, both within :data:`ATTENTION_MATMUL_WINDOW` kernels of it in the same step (``kernel_step``, -1 none), in a
    step with two or more such softmaxes (one per layer: a lone softmax is sampling's, whose matmuls beside it are the
    LM head and, with a draft model, its next projection). Such a matmul is attention: it reads every row's own keys or values, so its work follows the rows as an attention
    kernel's does, where a weight matmul's is flat. Its launch does not say so: cuBLAS's batched gemv puts rows x heads
    in grid z, nvjet's persistent kernels run a grid of the SMs (132 blocks at 8 and 64 rows on the H100). A
    mixture's router (a matmul, a top-k gating softmax, then expert kernels) is no such pair: its gating is routing,
    and the matmul after it is no nearer than the next layer's projections."""
    kernel_step = np.asarray(kernel_step, dtype=np.int64)
    n = kernel_step.size
    out = np.zeros(n, dtype=bool)
    sm = np.flatnonzero(np.asarray(softmax, dtype=bool) & (kernel_step >= 0))
    if sm.size == 0:
        return out
    pos = np.arange(n)
    is_mm = np.asarray(kernel_class) == _GEMM
    prev = np.maximum.accumulate(np.where(is_mm, pos, -1))  # the latest matmul at or before each row
    nxt = np.minimum.accumulate(np.where(is_mm, pos, n)[::-1])[::-1]  # the earliest at or after
    before, after = prev[np.maximum(sm - 1, 0)], nxt[np.minimum(sm + 1, n - 1)]
    before = np.where(sm > 0, before, -1)
    after = np.where(sm < n - 1, after, n)
    ok = (before >= 0) & (after < n)
    before_i, after_i = np.maximum(before, 0), np.minimum(after, n - 1)
    ok &= (sm - before <= ATTENTION_MATMUL_WINDOW) & (after - sm <= ATTENTION_MATMUL_WINDOW)
    ok &= (kernel_step[before_i] == kernel_step[sm]) & (kernel_step[after_i] == kernel_step[sm])
    per_step = np.bincount(kernel_step[sm][ok], minlength=int(kernel_step.max()) + 1)
    ok &= per_step[kernel_step[sm]] >= 2
    out[before_i[ok]] = True
    out[after_i[ok]] = True
    return out


def _per_distinct_name(names: np.ndarray, value: Callable[[str], int | None], fill: int, dtype) -> np.ndarray:
    """``value(name)`` for each kernel name, evaluated once per distinct name (``None``: ``fill``)."""
    names = np.asarray(names, dtype=object)
    if names.size == 0:
        return np.zeros(0, dtype=dtype)
    # unique over the str objects themselves: astype(str) would make a fixed-width copy as wide as the
    # longest name (templated kernel names run to thousands of characters) for every kernel
    uniq, inv = np.unique(names, return_inverse=True)
    out = np.full(uniq.size, fill, dtype=dtype)
    for i, n in enumerate(uniq.tolist()):  # distinct kernel names, not events
        v = value(n)
        if v is not None:
            out[i] = v
    return out[inv.reshape(-1)]


def _class_of(name: str) -> int | None:
    # the kernel's own name, not its argument list: TensorRT-LLM's quantize_with_block_size<...>(...,
    # flashinfer::QuantizationSFLayout) is no attention kernel
    own = kernel_own_name(name)
    return next((c for c, pat in CLASS_PATTERNS if pat.search(own)), None)


def classify_kernels(names: np.ndarray) -> np.ndarray:
    """Class index (into :data:`KERNEL_CLASSES`) of each kernel name (the regexes run once per unique name)."""
    return _per_distinct_name(names, _class_of, _ELEM, np.int8)


#: A matmul's output tile as its kernel name says it: nvjet ``tst_128x128_``, CUTLASS ``_64x64_8x5_`` / ``_64x64x64_``,
#: cuBLAS ``tilesize64x64x64``, hipBLASLt/Tensile ``MT128x128x64``, cuBLAS sm80 ``s16816gemm_bf16_128x64_ldg8``; a
#: name without one (gemv, Triton, CUTLASS 3's mangled ``device_kernel``) is unknown.
_TILE_PATTERNS = (re.compile(r"nvjet_\w*?_(\d+)x(\d+)_"), re.compile(r"tilesize(\d+)x(\d+)x\d+"),
                  re.compile(r"MT(\d+)x(\d+)x\d+"), re.compile(r"_(\d+)x(\d+)_\d+x\d+_"),
                  re.compile(r"_(\d+)x(\d+)x\d+_"), re.compile(r"gemm_\w*?_(\d+)x(\d+)_"))


def _tile_side_of(name: str) -> int | None:
    for pat in _TILE_PATTERNS:
        if m := pat.search(name):
            return min(int(m.group(1)), int(m.group(2)))
    return None


def gemm_tile_side(names: np.ndarray) -> np.ndarray:
    """Per kernel name the smaller side of the output tile its name says (rows or columns of one block's tile), -1 where
    the name says none (the regexes run once per unique name)."""
    return _per_distinct_name(names, _tile_side_of, -1, np.int64)


#: A matmul in a decode step at ``b`` rows whose tile's smaller side is at least this many and twice ``b`` multiplies
#: far more rows than the batch's (a KV cache decompressed every step, attention written as matmuls): its work
#: follows the rows' context, not the weights (:data:`KERNEL_CLASSES` ``row_gemm``).
ROW_GEMM_MIN_TILE = 128

#: Fewer traced rows than this, with an attention grid that fills the SMs, read as a split-KV grid (heads x KV splits
#: per row): no decode grid of heads alone fills 132 SMs at one or two rows (64 query heads at two: 128 blocks).
SPLIT_GRID_MAX_ROWS = 3

#: Threads an SM holds at once (Hopper/Ampere data-centre GPUs: 2,048): how many blocks of a kernel are resident.
ELEMENTWISE_THREADS_PER_SM = 2048
#: Blocks one SM holds at once at most, whatever their size (compute capability 8.0 and 9.0: 32).
MAX_BLOCKS_PER_SM = 32
#: Registers are allocated per warp in units of this many (CUDA's occupancy calculator, compute capability 5.0-9.0).
REGISTER_ALLOCATION_UNIT = 256


def resident_blocks(threads: np.ndarray, registers: np.ndarray, shared_memory: np.ndarray,
                    props: dict | None) -> np.ndarray:
    """Blocks of each kernel that one SM holds at once (its occupancy), -1 where unknown.

    ``min(floor(threads per SM / threads), floor(registers per SM / registers per block),
    floor(shared memory per SM / (shared memory per block + reserved)), MAX_BLOCKS_PER_SM)``, at least 1: ``threads``
    per block rounded up to whole warps; registers per block = ``registers`` per thread x warp size rounded up to
    :data:`REGISTER_ALLOCATION_UNIT` (per warp, as CUDA allocates them) x warps; ``shared_memory`` the block's bytes
    (static + dynamic) plus what the driver reserves per block (the SM's shared memory less the opt-in
    maximum per block, 1 KiB on Ampere/Hopper, where the trace gives both); no registers or no shared memory: no
    limit from it. Unknown: the threads, registers or shared memory of the kernel (-1), or the SM's registers or
    shared memory (``props``: :attr:`launchgap.trace.Trace.device_properties` of its device); the threads per SM and
    warp size default to 2,048 and 32 where the trace does not say them."""
    props = props or {}
    threads = np.asarray(threads, dtype=np.int64)
    regs = np.asarray(registers, dtype=np.int64)
    smem = np.asarray(shared_memory, dtype=np.int64)
    regs_sm, smem_sm = props.get("registers_per_sm"), props.get("shared_memory_per_sm_bytes")
    if not regs_sm or not smem_sm:
        return np.full(threads.shape, -1, dtype=np.int64)
    warp = int(props.get("warp_size") or 32)
    per_sm = int(props.get("max_threads_per_sm") or ELEMENTWISE_THREADS_PER_SM)
    optin = props.get("shared_memory_per_block_optin_bytes")
    reserved = max(int(smem_sm) - int(optin), 0) if optin else 0
    warps = -(-np.maximum(threads, 1) // warp)
    by_threads = per_sm // (warps * warp)
    regs_warp = -(-np.maximum(regs, 0) * warp // REGISTER_ALLOCATION_UNIT) * REGISTER_ALLOCATION_UNIT
    by_regs = np.where(regs > 0, int(regs_sm) // np.maximum(regs_warp * warps, 1), MAX_BLOCKS_PER_SM)
    by_smem = np.where(smem > 0, int(smem_sm) // np.maximum(smem + reserved, 1), MAX_BLOCKS_PER_SM)
    out = np.maximum(np.minimum(np.minimum(by_threads, by_regs), np.minimum(by_smem, MAX_BLOCKS_PER_SM)), 1)
    return np.where((threads > 0) & (regs >= 0) & (smem >= 0), out, -1)


#: Peak dense bf16 matmul FLOP/s and memory bandwidth (bytes/s) by GPU name (vendors' data sheets).
GPU_PEAKS: tuple[tuple[re.Pattern[str], float, float], ...] = (
    (re.compile(r"(?i)H200"), 989e12, 4.8e12),
    (re.compile(r"(?i)H100.*(?:PCIe)"), 756e12, 2.0e12),
    (re.compile(r"(?i)H100|GH200"), 989e12, 3.35e12),
    (re.compile(r"(?i)H20\b"), 148e12, 4.0e12),
    (re.compile(r"(?i)B200|GB200"), 2250e12, 8.0e12),
    (re.compile(r"(?i)B100"), 1750e12, 8.0e12),
    (re.compile(r"(?i)A100"), 312e12, 2.0e12),
    (re.compile(r"(?i)L40S"), 362e12, 0.864e12),
    (re.compile(r"(?i)MI300X"), 1307e12, 5.3e12),
    (re.compile(r"(?i)MI325"), 1307e12, 6.0e12),
    (re.compile(r"(?i)MI250"), 383e12, 3.2e12),
    (re.compile(r"(?i)MI300A"), 980.6e12, 5.3e12),
    (re.compile(r"(?i)MI355"), 2500e12, 8.0e12),
    (re.compile(r"(?i)MI350"), 2300e12, 8.0e12),
    (re.compile(r"(?i)MI210"), 181e12, 1.6e12),
)
#: Without a known GPU: an H100's ratio (the ridge matters, not the absolute figures).
DEFAULT_PEAKS = (989e12, 3.35e12)
#: The memory bandwidth (bytes/s) of the GPU the attention rules were fitted on (the H200's). On another GPU, a curve
#: from one traced size gets a band end whose attention grows past one row at that GPU's bandwidth
#: (:attr:`ScalingModel.attention_work_scale`).
REFERENCE_BANDWIDTH = 4.8e12
#: How far a GPU's bandwidth may differ from :data:`REFERENCE_BANDWIDTH` (as a ratio) before that band end is added.
BANDWIDTH_BAND_MIN_RATIO = 1.1


def gpu_peaks(device_name: str | None, props: dict | None = None) -> tuple[float, float, str]:
    """Peak bf16 FLOP/s, memory bytes/s and where they came from, for the trace's GPU.

    By name (:data:`GPU_PEAKS`); else from device properties when they give bandwidth, SM count and clock
    (Hopper-class 1,024 bf16 FLOPs per SM per clock x 2); else :data:`DEFAULT_PEAKS`.
    """
    for pat, flops, bw in GPU_PEAKS:
        if device_name and pat.search(device_name):
            return flops, bw, f"{device_name} data sheet"
    props = props or {}
    bw, sms, clock = props.get("memory_bandwidth_bytes_per_s"), props.get("sm_count"), props.get("clock_rate_hz")
    if bw and sms and clock:
        return 2048.0 * sms * clock, float(bw), "device properties (SM count x clock, bandwidth)"
    return DEFAULT_PEAKS[0], DEFAULT_PEAKS[1], "assumed (GPU not recognised)"


@dataclass(frozen=True)
class ScalingModel:
    """The batch-scaling model's constants (see the module docstring; fitted on the 1b session, docs/costmodel.md).

    * ``gemm_rows``: rows at which a weight-bound matmul's per-row part (activations, epilogue) equals its
      fixed part (the weights): ``(1 + b/B) / (1 + b0/B)`` before the turn;
    * ``gemm_efficiency``: the turn to compute-bound, as a share of the GPU's FLOPs/bandwidth ridge;
    * ``attention_fixed_waves``: the part of an attention kernel's time that does not grow with its waves of
      blocks over the SMs, in units of one wave (launch ramp, prologue, epilogue);
    * ``attention_shared_fixed``: the same fixed part for an attention kernel that an SM holds two or more blocks of
      at once (:attr:`SizeSample.resident`): its time is ``t0 · (f + L(b)) / (f + L(b0))``, ``L`` the blocks per SM
      (at least 1), continuous — co-resident blocks share the SM, so a part-filled next wave costs its share, not
      a whole wave; 0.5 chosen on the held-out development sets (0.8 and 1.2 worse: docs/costmodel.md);
    * ``attention_whole_wave_share``: the share ``s`` of that load paid in whole waves of co-resident blocks,
      ``L = (1 - s) · P + s · (min(P, R) + R · (ceil(P / R) - 1))`` (``P`` the blocks per SM, at least 1; ``R`` the
      blocks an SM holds at once): a wave begun after the first costs its share at once. 0.35: the 128-thread cuDNN SDPA kernel of smollm2/stablelm traced at 16, 17, 20, 24
      rows fits ``F + a·ceil(W) + c·W`` with ``a / (a + c)`` = 0.35 (docs/costmodel.md); the prior: a trace with
      three or more sizes running such kernels fits its own (:func:`fit_attention_wave_share`);
    * ``attention_wave_us``: one wave's time, for kernels whose grid is persistent (as many blocks as SMs:
      the grid no longer says the work) — the work in waves is then ``t0 / wave_us``;
    * ``attention_rows``: without launch configurations: ``(B + b) / (B + b0)``;
    * ``elementwise_rows``, ``elementwise_power``: element-wise work, norms, KV-cache writes and sampling:
      ``g(b) / g(b0)`` with ``g(b) = (b / (b + K)) ** p`` — latency-bound small grids, whose time grows far
      slower than their rows and levels off once their blocks fill the GPU;
    * ``elementwise_fixed_waves``: an element-wise grid that fills the GPU takes ``t0 · (f + W(b)) / (f + W(b0))``,
      ``W`` its waves (blocks over the blocks the SMs hold at once, following the rows), ``f`` this fixed part;
    * ``collective_rows``: collectives: latency plus bytes per row, ``(B + b) / (B + b0)``;
    * ``expert_share``: a mixture of experts' routed share ``k/E`` (top-k of E experts) when neither a model
      config nor two observed sizes give it: the median over public MoE configs (docs/costmodel.md), a prior;
    * ``expert_fixed_us``: the part of an expert launch's time (us) that does not follow the experts it reads (launch,
      the grouped GEMM's set-up and tile scheduling, the under-filled first wave at a few rows): its time is
      ``L + (t0 - L) · W(b) / W(b0)``, ``L`` this, at most ``t0``; a prior: the intercept of ``L + c · experts hit``
      over the development MoE launches between their observed sizes, at the low end (granite 6.5-7.2 us, Qwen1.5-MoE
      9-12, Mixtral 15-32: docs/costmodel.md) so that a small mixture's ~10 us launches keep a part that grows;
    * ``row_gemm_fixed_rows``: a ``row_gemm`` (a matmul over every row's context: :data:`ROW_GEMM_MIN_TILE`) takes
      ``t0 · (F + b) / (F + b0)``, ``F`` this fixed part in rows (one row: the HF DeepSeek-V2 cache matmul's launches
      between sizes, docs/costmodel.md);
    * ``attention_split_us``, ``attention_split_fixed_us``, ``attention_latency_us``: an attention kernel whose one
      row the waves above put past ``attention_split_us`` (us: one block's KV work is long) is taken to split its KV
      length over more blocks once its rows no longer fill the GPU (FlashAttention's and FlashInfer's split-KV decode,
      cuDNN's SDPA: grid ``[8, 24, 1]`` at one row against ``[1, 24, 8]`` at eight, 4,096 positions). Below the traced
      rows its time then follows its rows, ``A + (t0 - A) · b / b0``, ``A`` the fixed part, at least one
      latency-bound launch (``attention_latency_us``: 9.0-9.8 us on the H200 for most held-out models at one row), at
      most the waves' time. Long contexts need it (4,096 positions, from 8 rows to 1: 16.7 us measured, 79 us by the
      waves); one row by the waves: 6.1-21.1 us at 512 positions, 36-170 us at 2,048-8,192 (docs/costmodel.md);
    * ``attention_split_rows``: above the traced rows too, an attention kernel whose grid at them already fills the
      SMs with fewer than :data:`SPLIT_GRID_MAX_ROWS` rows (a split-KV grid: one row of llama-3.2-3b at 4,096
      positions runs 192 blocks, 24 heads x 8 splits) follows its rows, ``A + (t0 - A) · b / b0``: the band's other
      end for such a trace (off in the curve itself: from one row the split grid's blocks overstate the work per
      row, 1-2x on the long-context sets, the rows understate it, 0.2-0.97x; docs/costmodel.md);
    * ``attention_matmul_fixed_us``: the part (us) of each launch of attention written out as matmuls
      (:attr:`SizeSample.attention_matmul`) that does not grow with the rows, at most its time: ``A + (t0 - A) ·
      g(b) / g(b0)``, ``g`` the rule above. 0 in the curve; the band's low end of a trace traced at one size whose
      such launches all run one wave takes the fastest one's time (a launch that is all latency:
      :func:`one_wave_attention_matmul_us`);
    * ``attention_work_scale``: ``k`` in an attention kernel's growth over its time at one row, ``1 + (R(b) - 1) ·
      k``, ``R(b) = t(b) / t(1)`` by the rules above: 1 in the curve; a band end of a curve from one traced size on a
      GPU other than the H200 the rules were fitted on takes :data:`REFERENCE_BANDWIDTH` over the GPU's bandwidth. One
      row runs one latency-bound wave, about the same time on any Hopper part; the rows past it read their KV cache at
      the GPU's bandwidth (phi-3-mini-like's cuDNN kernel: 9.8 us at one row on both the H200 and the H100, 108.6
      and 143.4 us at 64 rows). Not in the curve: from 8 rows it overshoots the H100 (docs/costmodel.md, Another GPU);
    * ``attention_bandwidth_ratio``, ``attention_latency_bound``: the curve's own account of another GPU's bandwidth
      (:data:`REFERENCE_BANDWIDTH` over the GPU's; 1 on the H200). An attention launch (not attention written out as
      matmuls) traced at or under ``attention_latency_bound`` times ``attention_latency_us`` runs one latency-bound
      wave, which takes about the same time on any Hopper part and says nothing of the GPU's bandwidth: the rules above
      are applied to the time it would take on the H200, ``t_ref = L + (t0 - L) / k`` (``L`` the latency, at most
      ``t0``; ``k`` the ratio), and what they add past the latency is read at this GPU's bandwidth,
      ``t(b) = L + k · (t_ref · r(b) - L)`` (``r`` the rules' growth; below ``L`` as the rules say). A launch traced
      past the latency already shows this GPU's bandwidth in its own time and keeps the rules' growth. 1.2: one row's
      attention took 7.0-10.0 us on the H100 and H200 sets, 15.6-29.2 us at 8 rows where its blocks read more
      (docs/costmodel.md, Another GPU);
    * ``band_factors``: every constant scaled by these gives the band.
    """

    gemm_rows: float = 5000.0
    gemm_efficiency: float = 1.0
    attention_fixed_waves: float = 0.1
    attention_wave_us: float = 11.0
    attention_rows: float = 8.0
    elementwise_rows: float = 16.0
    elementwise_power: float = 0.116
    collective_rows: float = 64.0
    expert_share: float = 0.125
    band_factors: tuple[float, float] = (0.5, 2.0)
    elementwise_fixed_waves: float = 0.7
    attention_shared_fixed: float = 0.5
    expert_fixed_us: float = 7.0
    row_gemm_fixed_rows: float = 1.0
    attention_whole_wave_share: float = 0.35
    attention_split_us: float = 30.0
    attention_split_fixed_us: float = 6.0
    attention_latency_us: float = 9.0
    attention_split_rows: bool = False
    attention_matmul_fixed_us: float = 0.0
    attention_work_scale: float = 1.0
    attention_bandwidth_ratio: float = 1.0
    attention_latency_bound: float = 1.2

    def scaled(self, factor: float) -> ScalingModel:
        """Every fitted constant scaled by ``factor`` (a band end); the latency, the switches and the band ends'
        own constants (``attention_latency_us``, ``attention_split_rows``, ``attention_matmul_fixed_us``,
        ``attention_work_scale``, ``attention_bandwidth_ratio``, ``attention_latency_bound``, ``band_factors``) as
        they are."""
        f = factor
        return replace(self, gemm_rows=self.gemm_rows / f, gemm_efficiency=self.gemm_efficiency / f,
                       attention_fixed_waves=self.attention_fixed_waves / f, attention_wave_us=self.attention_wave_us / f,
                       attention_rows=self.attention_rows / f, elementwise_rows=self.elementwise_rows / f,
                       elementwise_power=self.elementwise_power * f, collective_rows=self.collective_rows / f,
                       expert_share=min(self.expert_share / f, 1.0),
                       elementwise_fixed_waves=self.elementwise_fixed_waves / f,
                       attention_shared_fixed=self.attention_shared_fixed / f, expert_fixed_us=self.expert_fixed_us / f,
                       row_gemm_fixed_rows=self.row_gemm_fixed_rows / f,
                       attention_whole_wave_share=min(self.attention_whole_wave_share / f, 1.0),
                       attention_split_us=self.attention_split_us * f,
                       attention_split_fixed_us=self.attention_split_fixed_us / f)


DEFAULT_SCALING = ScalingModel()


@dataclass(frozen=True, eq=False)
class SizeSample:
    """One observed batch size: ``batch`` (for a graph step the bucket its kernels ran at), ``graph_us`` (the
    median step's FULL-graph cost, ``predicted_graph_us``) and that step's kernels (arrays): class (index into
    :data:`KERNEL_CLASSES`), time (us), grid blocks and threads per block (-1 where the trace does not say);
    ``experts``: a mixture's routed experts as the step's kernels say them (:func:`experts_of_kernels`), else ``None``;
    ``resident``: per kernel the blocks one SM holds at once (:func:`resident_blocks`), -1 where unknown (``None``:
    unknown for all). How ``graph_us`` was built from the kernels (:meth:`launchgap.predict.PredictionModel.
    predict_graph_us`), so that a size's cost moves with them: ``kernel_scale`` (the unprofiled share of the profiled
    kernel time), ``node_us`` (the replay's cost per kernel node shorter than ``short_us``). ``attention_matmul``: per
    kernel whether it is attention written out as a matmul (:func:`attention_matmuls`; class ``attention``), ``None``
    none."""

    batch: int
    graph_us: float
    kernel_class: np.ndarray
    kernel_us: np.ndarray
    blocks: np.ndarray
    threads: np.ndarray
    experts: int | None = None
    resident: np.ndarray | None = None
    kernel_scale: float = 1.0
    node_us: float = 0.0
    short_us: float = 20.0
    attention_matmul: np.ndarray | None = None

    @property
    def resident_or_unknown(self) -> np.ndarray:
        """:attr:`resident`, or -1 for every kernel where it is ``None``."""
        return self.resident if self.resident is not None else np.full(self.kernel_us.shape, -1, dtype=np.int64)


#: Kernels that say how many routed experts a mixture has: PyTorch's grouped-GEMM set-up (``torch._grouped_mm``:
#: ``prepare_grouped_gemm_data<<<1, group_count>>>``, one thread per expert) and the fused top-k gating of vLLM,
#: SGLang and TensorRT-LLM (``topkGatingSoftmax<[T,] VPT, NUM_EXPERTS, ...>``: the experts in its template).
_EXPERTS_AS_THREADS = re.compile(r"prepare_grouped_gemm_data")
_EXPERTS_IN_TEMPLATE = re.compile(r"topkGatingSoftmax<\s*(?:[A-Za-z_][\w:]*\s*,\s*)?\d+\s*,\s*(\d+)\s*,")


def experts_of_kernels(names: np.ndarray, threads: np.ndarray, name_index: np.ndarray | None = None) -> np.ndarray:
    """Per kernel the routed experts it says (see :data:`_EXPERTS_AS_THREADS`, :data:`_EXPERTS_IN_TEMPLATE`), -1
    where it says none. ``names``: each kernel's name, or with ``name_index`` the distinct names and each kernel's
    index into them (the names are read once each either way)."""
    names = np.asarray(names, dtype=object)
    threads = np.asarray(threads, dtype=np.int64)
    if name_index is None:
        if names.size == 0:
            return np.zeros(0, dtype=np.int64)
        names, name_index = np.unique(names, return_inverse=True)
    kind = np.zeros(names.size, dtype=np.int64)  # 0 none, -2 the launch's threads, >0 from the name
    for i, n in enumerate(names.tolist()):  # distinct kernel names, not events
        if _EXPERTS_AS_THREADS.search(n):
            kind[i] = -2
        elif m := _EXPERTS_IN_TEMPLATE.search(n):
            kind[i] = int(m.group(1))
    k = kind[np.asarray(name_index).reshape(-1)]
    return np.where(k == -2, np.where(threads > 0, threads, -1), np.where(k > 0, k, -1))


def size_samples(kernel_step: np.ndarray, kernel_class: np.ndarray, kernel_us: np.ndarray, blocks: np.ndarray,
                 threads: np.ndarray, batch: np.ndarray, graph_us: np.ndarray,
                 kernel_experts: np.ndarray | None = None,
                 resident: np.ndarray | Callable[[np.ndarray], np.ndarray] | None = None,
                 kernel_tile: np.ndarray | None = None, kernel_scale: float = 1.0, node_us: float = 0.0,
                 short_us: float = 20.0, kernel_attention_matmul: np.ndarray | None = None) -> list[SizeSample]:
    """Per observed batch size (ascending) its median step's kernels: ``kernel_*`` per kernel row (its step, -1
    none; class; us; grid blocks; threads per block; the routed experts it says, -1 none), ``resident`` per kernel
    row (blocks per SM at once, -1 unknown; ``None``: unknown for all), or a function giving it for the kernel rows
    it is passed (called for the median steps' kernels only), ``batch`` and ``graph_us`` per step; ``kernel_tile``
    per kernel row the smaller side of a matmul's tile (:func:`gemm_tile_side`, -1 unknown): a matmul whose tile is
    at least :data:`ROW_GEMM_MIN_TILE` and twice the step's rows is a ``row_gemm``; a matmul that
    ``kernel_attention_matmul`` marks (per kernel row: :func:`attention_matmuls`) is attention; ``kernel_scale``,
    ``node_us``, ``short_us``: how ``graph_us`` was built (:class:`SizeSample`)."""
    batch = np.asarray(batch, dtype=np.int64)
    graph_us = np.asarray(graph_us, dtype=float)
    ok = (batch > 0) & np.isfinite(graph_us) & (graph_us > 0)
    order = np.argsort(kernel_step, kind="stable")
    ks = kernel_step[order]
    out = []
    for s in np.unique(batch[ok]).tolist():  # per observed size, a handful
        idx = np.flatnonzero(ok & (batch == s))
        med = idx[np.argsort(graph_us[idx], kind="stable")[(idx.size - 1) // 2]]  # the (lower) median step
        lo, hi = np.searchsorted(ks, med, "left"), np.searchsorted(ks, med, "right")
        r = order[lo:hi]
        said = kernel_experts[r][kernel_experts[r] > 0] if kernel_experts is not None else np.zeros(0)
        cls = kernel_class[r]
        if kernel_tile is not None:
            cls = np.where((cls == _GEMM) & (kernel_tile[r] >= max(ROW_GEMM_MIN_TILE, 2 * s)), _ROW_GEMM, cls)
        mm = None
        if kernel_attention_matmul is not None:
            mm = (cls == _GEMM) & kernel_attention_matmul[r]
            cls = np.where(mm, _ATTN, cls)
        out.append(SizeSample(int(s), float(graph_us[med]), cls, kernel_us[r], blocks[r], threads[r],
                              int(np.median(said)) if said.size else None,
                              None if resident is None else resident(r) if callable(resident) else resident[r],
                              float(kernel_scale), float(node_us), float(short_us), mm))
    return out


def trace_samples(trace: Trace, row_step: np.ndarray, step_index: np.ndarray, step_device: np.ndarray,
                  batch: np.ndarray, graph_us: np.ndarray, short_kernel_excess_us: np.ndarray | None = None,
                  kernel_scale: float = 1.0, node_us: float = 0.0, short_us: float = 20.0,
                  work_start_ns: np.ndarray | None = None) -> list[SizeSample]:
    """:func:`size_samples` from a trace: per report step ``i`` (``step_index[i]``: its index in ``row_step``'s
    numbering, ``step_device[i]`` its device) the kernels it launched on its device, with their class, time,
    launch configuration (grid blocks and threads per block where the trace records them) and blocks per SM at once
    (:func:`resident_blocks` from :attr:`~launchgap.trace.Trace.kernel_resources` and the device's properties).
    ``short_kernel_excess_us`` (per report step, us): added to each of the step's kernels shorter than
    :data:`SHORT_KERNEL_US`, and so to its cost: an eager step's short kernels lifted to their time in a graph replay
    (:func:`graph_kernel_excess`). ``kernel_scale``, ``node_us``, ``short_us``: how ``graph_us`` was built from the
    steps' kernels (:class:`SizeSample`). ``work_start_ns`` (per row): each kernel's start once a collective's
    wait for peers is over (:mod:`launchgap.collectives`), so its time is its work: a rank that waits at every
    all-reduce (its peer's host behind) would otherwise scale 25 ms of waiting with the rows, and its curve went
    below zero at one row (``traces/h200x2-tp2-1b``, rank 1 eager at bs 64)."""
    k = np.flatnonzero((trace.kind == Kind.KERNEL) & (row_step >= 0))
    pos = np.full(int(row_step.max()) + 1 if row_step.size and row_step.max() >= 0 else 0, -1, dtype=np.int64)
    pos[np.asarray(step_index, dtype=np.int64)] = np.arange(len(step_index))
    ks = pos[row_step[k]] if pos.size else np.full(k.size, -1)
    ks = np.where((ks >= 0) & (trace.device[k] == np.asarray(step_device)[np.maximum(ks, 0)]), ks, -1)
    gx, bx = getattr(trace, "grid_x", None), getattr(trace, "block_x", None)
    if gx is not None and bx is not None:
        blocks = np.where(gx[k] > 0, gx[k].astype(np.int64) * np.maximum(trace.grid_y[k], 1)
                          * np.maximum(trace.grid_z[k], 1), -1)
        threads = np.where(bx[k] > 0, bx[k].astype(np.int64) * np.maximum(trace.block_y[k], 1)
                           * np.maximum(trace.block_z[k], 1), -1)
    else:
        blocks = threads = np.full(k.size, -1, dtype=np.int64)
    ids, at = np.unique(trace.name_id[k], return_inverse=True)  # classified once per kernel name
    at = at.reshape(-1)
    res = getattr(trace, "kernel_resources", None) or {}
    per_name = np.array([res.get(int(i), (-1, -1)) for i in ids.tolist()], dtype=np.int64).reshape(-1, 2)

    def resident(r: np.ndarray) -> np.ndarray:  # for the median steps' kernels only: no array per kernel row
        out = np.full(r.size, -1, dtype=np.int64)
        dev = trace.device[k[r]]
        for d in np.unique(dev).tolist():  # the devices of the kernels: one or a few
            m = r[dev == d]
            out[dev == d] = resident_blocks(threads[m], per_name[at[m], 0], per_name[at[m], 1],
                                            device_properties_of(trace, int(d)))
        return out

    us = (trace.dur_ns[k] if work_start_ns is None else trace.end_ns[k] - work_start_ns[k]) / 1e3
    if short_kernel_excess_us is not None:  # per step, added to each of its kernels under SHORT_KERNEL_US
        add = np.where((ks >= 0) & (us < SHORT_KERNEL_US),
                       np.asarray(short_kernel_excess_us, dtype=float)[np.maximum(ks, 0)], 0.0)
        us = us + add
        graph_us = np.asarray(graph_us, dtype=float) + np.bincount(ks[ks >= 0], weights=add[ks >= 0],
                                                                   minlength=len(step_index))
    cls = classify_kernels(trace.names[ids])[at]
    softmax = _per_distinct_name(trace.names[ids], lambda n: 1 if is_attention_softmax(n) else None, 0, bool)[at]
    attention_mm = attention_matmuls(ks, cls, softmax)
    return size_samples(ks, cls, us, blocks, threads, batch,
                        graph_us, experts_of_kernels(trace.names[ids], threads, at), resident,
                        gemm_tile_side(trace.names[ids])[at], kernel_scale, node_us, short_us, attention_mm)


def _attention_blocks_per_row(xs: list[SizeSample], sm_count: int | None) -> float | None:
    """Blocks per batch row of the attention kernels, from the observed sizes whose attention grid still follows the
    rows (not persistent); ``None`` when no size shows it (every grid persistent, or no launch configuration)."""
    sms = max(sm_count or 0, 1)
    per = [float(np.median(x.blocks[m] / x.batch)) for x in xs
           if (m := (x.kernel_class == _ATTN) & (x.blocks > 0) & ~((x.blocks % sms == 0) & (x.blocks <= 4 * sms))).any()]
    return float(np.median(per)) if per else None


def _persistent_blocks_per_row(t0: np.ndarray, b0: float, sms: float, model: ScalingModel) -> np.ndarray:
    """Blocks per row of an attention kernel whose grid at ``b0`` rows is persistent (as many blocks as SMs), from its
    time ``t0`` (us) alone: its whole waves ``W`` (``t0`` over :attr:`ScalingModel.attention_wave_us`, rounded), the
    last one taken half full (``(W - 1/2)`` waves of blocks over ``b0`` rows), and the nearest power of two, at least
    the grid's own ``sms / b0``: a decode attention grid is heads (query or KV) x KV splits per row, powers of two in
    the models seen, and a persistent grid means more blocks than SMs."""
    f = model.attention_fixed_waves
    waves = np.maximum(1.0, np.round(t0 / model.attention_wave_us * (1 + f) - f))
    least = 2.0 ** np.ceil(np.log2(sms / b0) - 1e-9)
    return np.maximum(2.0 ** np.round(np.log2(np.maximum((waves - 0.5) * sms / b0, 1.0))), least)


def experts_hit(b, share) -> np.ndarray:
    """The expected share of a mixture's experts that ``b`` tokens hit when each token goes to ``k`` of ``E`` experts
    chosen uniformly (``share = k/E``): ``1 - (1 - k/E)^b`` (times ``E``: the distinct experts hit)."""
    return 1.0 - (1.0 - np.asarray(share, dtype=float)) ** np.asarray(b, dtype=float)


def _expert_work(b, share: float, ridge: float) -> np.ndarray:
    """An expert GEMM's work at ``b`` rows, in units of reading every expert's weights once: the weights of the experts
    hit, or (compute-bound) the rows' FLOPs: ``b·k`` rows over ``E`` experts against the ridge."""
    return np.maximum(experts_hit(b, share), np.asarray(b, dtype=float) * share / max(ridge, 1.0))


def _kernel_factor(model: ScalingModel, x: SizeSample, b: np.ndarray, ridge: float, sm_count: int | None,
                   per_row_hint: float | None = None, expert_share: float | None = None) -> np.ndarray:
    """Per kernel of ``x`` (rows) and size (columns) its time at that size over its time at ``x.batch``
    (``expert_share``: the experts' ``k/E``, else the model's prior)."""
    k = model.attention_work_scale
    if k != 1.0:  # attention's growth past one row scaled by k: the factors at k = 1, one row appended
        f = _kernel_factor(replace(model, attention_work_scale=1.0, attention_bandwidth_ratio=1.0), x,
                           np.append(np.asarray(b, dtype=float), 1.0), ridge, sm_count, per_row_hint, expert_share)
        f, f1 = f[:, :-1], f[:, -1:]  # f1: one row's time over b0's
        att = (x.kernel_class == _ATTN)[:, None] & (f1 > 0)
        one = np.where(att, f1, 1.0)
        return np.where(att, (1 + (f / one - 1) * k) / (1 + (1 / one - 1) * k), f)
    b = np.asarray(b, dtype=float)[None, :]
    b0 = float(x.batch)
    c = x.kernel_class[:, None]
    r = max(ridge * model.gemm_efficiency, 1.0)
    gemm = (1 + b / model.gemm_rows) / (1 + b0 / model.gemm_rows) * np.maximum(1.0, b / r) / max(1.0, b0 / r)
    # Attention: waves of blocks over the SMs (one resident block per SM: register- and shared-memory-heavy).
    f = model.attention_fixed_waves
    blocks = x.blocks[:, None].astype(float)
    t0 = x.kernel_us[:, None]
    sms = float(max(sm_count or 1, 1))
    threads = np.maximum(x.threads[:, None].astype(float), 1.0)
    resident = np.clip(np.floor(ELEMENTWISE_THREADS_PER_SM / threads), 1, 32) * sms  # blocks the SMs hold at once
    # A grid sized to the GPU (a whole multiple of the SMs that they hold at once: a persistent or grid-stride
    # kernel) whatever the batch: its grid does not say its work. Attention reads the work from its time (or from
    # another observed size's grid); other kernels are taken as latency-bound.
    persistent = (blocks > 0) & (np.mod(blocks, sms) == 0) & (blocks <= resident)
    # Blocks per row: from the grid where it follows the rows, else from another observed size's grid, else from the time.
    guess = per_row_hint if per_row_hint else _persistent_blocks_per_row(t0, b0, sms, model)
    per_row = np.where(persistent, guess, blocks / b0)
    def waves_at(rows):
        return np.maximum(1.0, np.ceil(per_row * rows / sms - 1e-9))  # whole waves: a partial wave costs one
    # Two or more blocks resident per SM (cuDNN/FlashAttention-2 kernels of 128 threads): co-resident blocks share the
    # SM, so time follows the blocks per SM continuously (at least one), above a fixed part; one resident block per SM
    # (or unknown): the whole waves above.
    f2 = model.attention_shared_fixed
    # A share of that load is paid in whole waves of co-resident blocks: one block past a full wave (the 17th row of
    # a 32-heads grid on 132 SMs x 2) starts a wave that costs its share at once (smollm2/stablelm at 16 -> 17 rows:
    # +17% in one row, then +19% over the next seven).
    res = np.maximum(x.resident_or_unknown[:, None].astype(float), 1.0)
    whole = model.attention_whole_wave_share
    def load_at(rows):
        per_sm = per_row * rows / sms
        begun = np.minimum(np.maximum(1.0, per_sm), res) + res * np.maximum(np.ceil(per_sm / res - 1e-9) - 1, 0.0)
        return np.maximum(1.0, (1 - whole) * per_sm + whole * begun)
    def attn_at(rows):  # an attention kernel's time at ``rows`` over its time at b0
        shared = (f2 + load_at(rows)) / (f2 + load_at(b0))
        waves = np.where(x.resident_or_unknown[:, None] >= 2, shared, (f + waves_at(rows)) / (f + waves_at(b0)))
        return np.where((blocks > 0) & bool(sm_count), waves, (model.attention_rows + rows) / (model.attention_rows + b0))
    attn = attn_at(b)
    # Fewer rows than traced, and a kernel the waves put far past one launch's latency: it reads a long KV per block,
    # which split-KV kernels divide over more blocks when the rows are too few to fill the GPU: the work follows the rows.
    fixed_us = np.minimum(model.attention_split_fixed_us, t0)
    by_rows = (fixed_us + (t0 - fixed_us) * b / b0) / np.where(t0 > 0, t0, np.inf)  # the work following the rows
    split = np.maximum(model.attention_latency_us / np.where(t0 > 0, t0, np.inf), by_rows)
    lone = t0 * attn_at(np.ones((1, 1)))  # its time at one row by the waves: one block's KV work, latency aside
    attn = np.where((b < b0) & (lone > model.attention_split_us), np.minimum(attn, split), attn)
    kb = model.attention_bandwidth_ratio
    if kb != 1.0:  # another GPU: a latency-bound launch's growth past the latency at this GPU's bandwidth
        lat = np.minimum(model.attention_latency_us, t0)
        t_ref = (lat + (t0 - lat) / kb) * attn  # its time on the H200 the rules were fitted on
        grown = np.where(t_ref >= lat, lat + kb * (t_ref - lat), t_ref) / np.where(t0 > 0, t0, np.inf)
        attn = np.where(latency_bound_attention(x, model)[:, None], grown, attn)
    if model.attention_split_rows:  # the band's other end: a split grid's growth taken from its rows
        split_grid = (blocks >= sms) & (b0 < SPLIT_GRID_MAX_ROWS) & ~persistent & bool(sm_count)
        attn = np.where((b > b0) & split_grid, by_rows, attn)
    # Element-wise work: one time shape per kernel, g(rows), and its time at b is t0 · g(b) / g(b0). A grid short of a
    # wave is latency-bound: g = (rows / (rows + K))^p, far slower than its rows (below 1: a few blocks take most of a
    # wave's time). A grid past a wave (more blocks than the SMs hold at once: work over the whole cache or vocabulary,
    # or a grid per row once the rows are many) runs in waves: g = (f + W) / (f + 1), W its waves (its blocks, i.e. its
    # rows, over the blocks the SMs hold), f a fixed part of ~0.7 of a wave (launch, ramp, the last wave's tail:
    # 0.6-0.8 measured between sizes on the H200 HF traces' repeat_kv copies). g is the larger of the two, so a
    # half-wave grid at b0 that fills 30 waves at b grows by its waves (not its blocks times the latency growth), and
    # predicting down from many waves ends at the latency-bound time, not at a sliver of a wave.
    k = model.elementwise_rows
    p = model.elementwise_power
    fill0 = np.where((blocks > 0) & ~persistent, blocks / resident, 0.0)  # waves at b0 (0: the grid does not say)
    fe = model.elementwise_fixed_waves
    def elem_shape(rows):  # a grid that does not say its work (fill0 0) has no waves: latency-bound
        return np.maximum((rows / (rows + k)) ** p, np.where(fill0 > 0, (fe + fill0 * rows / b0) / (fe + 1.0), 0.0))
    elem = elem_shape(b) / elem_shape(b0)
    coll = (model.collective_rows + b) / (model.collective_rows + b0)
    # Routed experts: each launch reads the weights of the experts the batch's tokens hit, above a fixed part per launch
    # (a grouped GEMM's set-up and tile scheduling, ~7 us on the H200: at bs 1 most of a small mixture's launch): flat at
    # one row's k experts, growing until every expert is hit, then with the rows once compute-bound.
    share = model.expert_share if expert_share is None else expert_share
    work = _expert_work(b, share, r) / _expert_work(b0, share, r)
    fixed = np.minimum(model.expert_fixed_us, t0)
    expert = (fixed + (t0 - fixed) * work) / np.where(t0 > 0, t0, 1.0)
    # A matmul over every row's context (a cache decompressed each step): its rows are the batch's times their tokens.
    row_gemm = (model.row_gemm_fixed_rows + b) / (model.row_gemm_fixed_rows + b0)
    if x.attention_matmul is not None:
        # Attention written as a matmul whose grid is persistent (nvjet: a grid of the SMs): the grid says nothing and
        # its time is no attention kernel's waves (0.8-3.5 us a wave at 64 rows, not ~11): a matmul over the rows' context
        attn = np.where(x.attention_matmul[:, None] & persistent, row_gemm, attn)
        if model.attention_matmul_fixed_us > 0:  # the band's low end: a latency part that does not grow
            fixed_am = np.minimum(model.attention_matmul_fixed_us, t0)
            attn = np.where(x.attention_matmul[:, None],
                            (fixed_am + (t0 - fixed_am) * attn) / np.where(t0 > 0, t0, np.inf), attn)
    return np.where(c == _GEMM, gemm, np.where(c == _ATTN, attn, np.where(c == _COLL, coll,
                    np.where(c == _EXPERT, expert, np.where(c == _ROW_GEMM, row_gemm, elem)))))


def latency_bound_attention(x: SizeSample, model: ScalingModel) -> np.ndarray:
    """Per kernel of ``x`` whether it is an attention launch (not attention written out as matmuls) that runs within
    ``attention_latency_bound`` times ``attention_latency_us``: one latency-bound wave, whose time says nothing of the
    GPU's bandwidth (:attr:`ScalingModel.attention_bandwidth_ratio`)."""
    att = (x.kernel_class == _ATTN) & (x.kernel_us > 0) \
        & (x.kernel_us <= model.attention_latency_bound * model.attention_latency_us)
    return att & ~x.attention_matmul if x.attention_matmul is not None else att


def one_wave_attention_matmul_us(x: SizeSample, sm_count: int | None) -> float | None:
    """The fastest launch (us) of attention written out as matmuls in ``x`` when every such launch runs one wave (its
    blocks within what the SMs hold at once), else ``None``. One wave is latency-bound: how its work grows with the
    rows is not in its time (a one-row gemv's 2.7-3.4 us is mostly launch and ramp, 64 rows' 11.6-34 us their KV
    reads), so the band's low end keeps that much of every such launch fixed
    (:attr:`ScalingModel.attention_matmul_fixed_us`). A persistent grid (a whole multiple of the SMs) is no one
    wave: it loops over its tiles."""
    if x.attention_matmul is None or not x.attention_matmul.any() or not sm_count:
        return None
    held = np.maximum(x.resident_or_unknown[x.attention_matmul], 1) * int(sm_count)
    blocks = x.blocks[x.attention_matmul]
    # a persistent grid (a multiple of the SMs) loops over its tiles: its one wave says nothing of its length
    if not ((blocks > 0) & (blocks <= held) & (np.mod(blocks, int(sm_count)) != 0)).all():
        return None
    return float(x.kernel_us[x.attention_matmul].min())


#: Candidate whole-wave shares :func:`fit_attention_wave_share` tries (0: time follows the blocks continuously; 1: every
#: begun wave costs a whole one).
WAVE_SHARE_GRID = np.linspace(0.0, 1.0, 11)
#: Fewest traced sizes whose co-resident attention kernels :func:`fit_attention_wave_share` fits the share on (two
#: pairs of neighbours: one pair says a rise, not how it splits into waves and slope).
MIN_WAVE_SHARE_SIZES = 3


def fit_attention_wave_share(model: ScalingModel, samples: list[SizeSample], ridge: float,
                             sm_count: int | None) -> tuple[float, int] | None:
    """The share of a co-resident attention kernel's load paid in whole waves
    (:attr:`ScalingModel.attention_whole_wave_share`) that best carries each traced size's attention time (its
    attention kernels' sum) to its neighbours' sizes, both ways (the squared log error summed over the pairs), from
    :data:`WAVE_SHARE_GRID`, and how many sizes it was fitted on; ``None`` where fewer than
    :data:`MIN_WAVE_SHARE_SIZES` traced sizes run attention kernels that an SM holds two or more blocks of at once
    (the kernels the share shapes), where every share carries them alike (no wave begun past the first between them:
    the trace cannot say) or the GPU's SM count is unknown. A tie with the best goes to the prior.

    Why from the trace: how much of a begun wave costs a whole one differs by kernel and GPU. phi-2-like's cuDNN
    kernel (32 blocks a row, 2 per SM) on the H100 runs 10.0 + 1.73 us a row from 16 to 95 rows, no step at any wave
    (share 0); on the H200 it steps 2.5-4 us a kernel past its second and third waves (0.5): at the H200's fitted
    0.35 the H100 serving trace's padding came out 20% low (docs/costmodel.md, *The whole-wave share from the
    trace*)."""
    if not sm_count:
        return None
    xs = [x for x in samples if ((x.kernel_class == _ATTN) & (x.resident_or_unknown >= 2) & (x.blocks > 0)).any()
          and x.kernel_us[x.kernel_class == _ATTN].sum() > 0]
    if len(xs) < MIN_WAVE_SHARE_SIZES:
        return None
    hint = _attention_blocks_per_row(samples, sm_count)
    # each size's attention kernels alone (the share shapes nothing else), carried to its neighbours' sizes at once
    att = [replace(x, kernel_class=x.kernel_class[m], kernel_us=x.kernel_us[m], blocks=x.blocks[m],
                   threads=x.threads[m], resident=None if x.resident is None else x.resident[m],
                   attention_matmul=None if x.attention_matmul is None else x.attention_matmul[m])
           for x in xs for m in [x.kernel_class == _ATTN]]
    measured = np.log([x.kernel_us.sum() for x in att])
    n = len(att)
    near = [[j for j in (i - 1, i + 1) if 0 <= j < n] for i in range(n)]

    def score(share: float) -> float:
        m = replace(model, attention_whole_wave_share=float(share))
        err = 0.0
        for i, x in enumerate(att):  # a handful of traced sizes
            sizes = np.array([att[j].batch for j in near[i]], dtype=float)
            got = np.log(x.kernel_us @ _kernel_factor(m, x, sizes, ridge, sm_count, hint))
            err += float(((got - measured[near[i]]) ** 2).sum())
        return err

    scores = np.array([score(s) for s in WAVE_SHARE_GRID])
    if np.ptp(scores) <= 1e-9 * max(float(scores.max()), 1e-12):  # every share alike: no wave begun between the sizes
        return None
    prior = score(model.attention_whole_wave_share)
    best = int(np.argmin(scores))
    share = model.attention_whole_wave_share if prior <= scores[best] * (1 + 1e-9) else float(WAVE_SHARE_GRID[best])
    return share, n


def _split_attention_note(model: ScalingModel, samples: list[SizeSample], ridge: float,
                         sm_count: int | None) -> str | None:
    """A line for the curve's notes where the split-KV rule (:attr:`ScalingModel.attention_split_us`) moved an
    observed size's attention kernels below it: how many of its launches and at which size, else ``None``."""
    hint = _attention_blocks_per_row(samples, sm_count)
    waves = replace(model, attention_split_us=np.inf)  # the rule's own test: one row's time by the waves alone
    moved = []
    for x in samples:
        att = x.kernel_class == _ATTN
        if x.batch < 2 or not att.any():
            continue
        lone = x.kernel_us * _kernel_factor(waves, x, np.ones(1), ridge, sm_count, hint)[:, 0]
        split = att & (lone > model.attention_split_us)
        if split.any():
            moved.append(f"{int(split.sum())} of {int(att.sum())} at bs {x.batch}")
    if not moved:
        return None
    return (f"attention launches whose one row the waves put past {model.attention_split_us:g} us (a long KV per block): "
            f"{', '.join(moved)}; below that size taken as split-KV, their time following the rows above "
            f"{model.attention_split_fixed_us:g} us, at least {model.attention_latency_us:g} us (docs/costmodel.md, "
            f"Long context)")


def _by_class(x: SizeSample, us: np.ndarray) -> np.ndarray:
    """``us`` (per kernel of ``x``, rows; any columns) summed per kernel class (rows, :data:`KERNEL_CLASSES`)."""
    onehot = (x.kernel_class[None, :] == np.arange(len(KERNEL_CLASSES))[:, None]).astype(float)
    return onehot @ us


def _monotone_segments(v: np.ndarray, b: np.ndarray, seg: np.ndarray, direction: np.ndarray) -> np.ndarray:
    """``v`` (at sizes ``b``) made monotone within each segment ``seg`` in its ``direction`` (+1 rising, -1 falling,
    0 flat: left as it is), by the running maximum (minimum) from the segment's start: classes whose measured rises
    differ in sign along different shapes must not make a rising step dip (or overshoot its end, clipped before)
    between two observed sizes."""
    order = np.argsort(b, kind="stable")
    sign = np.where(direction == 0, 1.0, direction)[order]
    w = v[order] * sign  # a falling segment negated: its running minimum is a running maximum
    span = float(np.ptp(w)) + 1.0 if w.size else 1.0
    lifted = w + seg[order] * span  # each later segment above every earlier one: one running max serves all
    run = np.maximum.accumulate(lifted) - seg[order] * span
    out = np.empty_like(v)
    out[order] = np.where(direction[order] == 0, w, run) * sign
    return out


def _predict(model: ScalingModel, xs: list[SizeSample], b: np.ndarray, ridge: float, sm_count: int | None,
             expert_share: float | None = None) -> tuple[np.ndarray, np.ndarray]:
    """The curve at the batch sizes ``b`` (whole numbers) and the single-size predictions (one row per observed size:
    its cost plus each kernel's change).

    Between two observed sizes ``a < c`` each kernel class rises from its time at ``a`` to its time at ``c`` along
    its own shape in the prediction from ``a`` (where the model puts a step, attention's next wave, the class steps
    by its measured rise), the rest of the step (replay cost, idle) linearly; the curve stays within the two costs
    and runs one way. Outside the observed sizes: the nearest size's prediction.
    """
    hint = _attention_blocks_per_row(xs, sm_count)
    at = np.array([x.batch for x in xs], dtype=float)
    sizes = np.arange(1, max(float(b.max(initial=1.0)), float(at.max())) + 1)
    # per observed size, per class, its kernels' time at every size 1..max (samples x classes x sizes)
    per_kernel = [x.kernel_us[:, None] * _kernel_factor(model, x, sizes, ridge, sm_count, hint, expert_share)
                  for x in xs]
    full = np.array([_by_class(x, t) for x, t in zip(xs, per_kernel)])
    bi = b.astype(np.int64) - 1
    # A size's cost is the observed one plus what its kernels add, as the observed cost was built from them: their
    # time at the trace's unprofiled share, and the replay's node cost for each kernel short enough to pay it (a
    # kernel grown past ``short_us`` hides it; at one row more kernels are short than at 64)
    single = np.array([x.graph_us + x.kernel_scale * (t.sum(axis=0) - x.kernel_us.sum())
                       + x.node_us * ((t < x.short_us).sum(axis=0) - (x.kernel_us < x.short_us).sum())
                       for x, t in zip(xs, per_kernel)])[:, bi]
    if len(xs) == 1:
        return single[0], single
    lvl = np.array([x.graph_us for x in xs])
    j = np.clip(np.searchsorted(at, b, side="right") - 1, 0, at.size - 2)  # the segment [at[j], at[j+1]]
    ia, ic = (at[j] - 1).astype(np.int64), (at[j + 1] - 1).astype(np.int64)
    measured = np.array([_by_class(x, x.kernel_us) for x in xs])  # per class its time at each observed size
    shape = full[j, :, bi].T  # classes x sizes, from a
    m_a, m_c = full[j, :, ia].T, full[j, :, ic].T  # the prediction from a, at a and at c
    rise = m_c - m_a
    linear = (b - at[j]) / (at[j + 1] - at[j])
    frac = np.where(np.abs(rise) > 1e-9, (shape - m_a) / np.where(np.abs(rise) > 1e-9, rise, 1.0), linear[None, :])
    class_rise = (measured[j + 1] - measured[j]).T  # classes x sizes
    rest_rise = (lvl[j + 1] - lvl[j]) - class_rise.sum(axis=0)  # replay cost and GPU idle: linear
    inside = lvl[j] + (class_rise * np.clip(frac, 0.0, 1.0)).sum(axis=0) + rest_rise * linear
    inside = np.clip(inside, np.minimum(lvl[j], lvl[j + 1]), np.maximum(lvl[j], lvl[j + 1]))  # within its ends
    inside = np.where(b < at[0], lvl[j], np.where(b > at[-1], lvl[j + 1], inside))  # outside: replaced below
    inside = _monotone_segments(inside, b, j, np.sign(lvl[j + 1] - lvl[j]))
    nearest = np.where(b < at[0], single[0], single[-1])
    return np.where((b >= at[0]) & (b <= at[-1]), inside, nearest), single


@dataclass(frozen=True)
class CostCurve:
    """The FULL-graph step (us) at every batch size ``1..max``: ``us``, its band ``low_us``/``high_us``, and
    per size where it came from (``source``: ``"timings"`` harness timing, ``"trace"`` a size the trace ran,
    ``"model"`` the batch-scaling model). ``peaks`` says where the GPU's FLOPs and bandwidth came from.
    ``sample_sizes`` / ``sample_us``: each traced size and its own prediction at every size (its cost plus each
    kernel's change; one row per traced size): the cost of a change of rows under the conditions that size ran at,
    where the curve through sizes traced under other conditions (context lengths, host speed) falls with the rows."""

    us: np.ndarray
    low_us: np.ndarray
    high_us: np.ndarray
    source: tuple[str, ...]
    peaks: str = ""
    notes: tuple[str, ...] = field(default=())
    sample_sizes: tuple[int, ...] = ()
    sample_us: np.ndarray | None = field(default=None, compare=False)

    @property
    def max_size(self) -> int:
        return int(self.us.size)

    @property
    def sizes(self) -> np.ndarray:
        """The sizes with a measured point (timings or the trace's own steps), ascending."""
        return np.array([i + 1 for i, s in enumerate(self.source) if s != "model"], dtype=np.int64)

    def _take(self, arr: np.ndarray, batch) -> np.ndarray:
        b = np.asarray(batch, dtype=np.int64)
        if arr.size == 0:
            return np.full(b.shape, np.nan)
        return arr[np.clip(b, 1, arr.size) - 1]

    def at(self, batch) -> np.ndarray:
        """The cost (us) at each batch size (sizes above the curve take its last size's cost)."""
        return self._take(self.us, batch)

    def low(self, batch) -> np.ndarray:
        return self._take(self.low_us, batch)

    def high(self, batch) -> np.ndarray:
        return self._take(self.high_us, batch)

    def measured(self, batch) -> np.ndarray:
        """Whether each batch size's cost was measured (a timing or the trace's own steps), not modelled."""
        b = np.asarray(batch, dtype=np.int64)
        src = np.array(self.source + ("model",), dtype=object)
        return src[np.where((b >= 1) & (b <= self.max_size), b - 1, self.max_size)] != "model"

    def own_change(self, bucket, batch) -> np.ndarray:
        """Per pair the cost (us) from ``batch`` to ``bucket`` rows on the bucket's own prediction (a traced size's:
        :attr:`sample_us`), NaN where the bucket was not traced."""
        k, b = np.asarray(bucket, dtype=np.int64), np.asarray(batch, dtype=np.int64)
        out = np.full(k.shape, np.nan)
        if self.sample_us is None or not self.sample_sizes:
            return out
        sizes = np.asarray(self.sample_sizes, dtype=np.int64)
        row = np.searchsorted(sizes, k)
        hit = (row < sizes.size) & (sizes[np.minimum(row, sizes.size - 1)] == k) & (b >= 1) & (k <= self.max_size)
        r, kk, bb = row[hit], k[hit] - 1, np.clip(b[hit], 1, self.max_size) - 1
        out[hit] = self.sample_us[r, kk] - self.sample_us[r, bb]
        return out

    def source_at(self, batch: int) -> str:
        return self.source[min(max(int(batch), 1), self.max_size) - 1] if self.max_size else "model"

    @property
    def origin(self) -> str:
        """Where the points came from: ``timings``, ``trace``, ``timings+trace`` or ``model`` (no point)."""
        kinds = sorted({s for s in self.source if s != "model"})
        return "+".join(kinds) if kinds else "model"


def _expert_us_above_fixed(x: SizeSample, model: ScalingModel) -> float:
    """The expert kernels' time of a sample above each launch's fixed part (:attr:`ScalingModel.expert_fixed_us`)."""
    return float(np.maximum(x.kernel_us[x.kernel_class == _EXPERT] - model.expert_fixed_us, 0.0).sum())


#: Expert-kernel growth between two observed sizes below which it is read as every expert hit at both (noise), not
#: as a share: the next source gives ``k/E``.
SATURATED_GROWTH = 1.05
#: Experts per token assumed when the trace says the experts but nothing says ``k``: the usual ``k`` of public MoE
#: configs with as many experts — 2 up to 16 experts (Mixtral, Grok-1, Phi-3.5-MoE, Jamba: 2 of 8 or 16; DBRX 4,
#: Llama-4 Scout 1), 8 above (OLMoE, Qwen2-57B, Granite, Qwen3, DeepSeek-V3, Kimi K2: 8; DeepSeek-V2 6, Qwen1.5-MoE
#: and gpt-oss 4).
FEW_EXPERTS, EXPERTS_PER_TOKEN_FEW, EXPERTS_PER_TOKEN_MANY = 16, 2, 8


def expert_share(samples: list[SizeSample], experts: tuple[int, int] | None = None,
                 model: ScalingModel = DEFAULT_SCALING) -> tuple[float | None, str]:
    """The routed share ``k/E`` the expert kernels scale with and where it came from (``None``, ``""`` when the
    samples run no expert kernel). First that applies: ``experts`` (``(E, k)``: the model config's experts and experts
    per token); the growth of the expert kernels' time (above a kernel's fixed cost) from the smallest to the largest
    observed size, ``(1 - (1-s)^c) / (1 - (1-s)^a)``, solved for ``s`` (as fast as the rows: every token its own
    experts; less than :data:`SATURATED_GROWTH`: every expert hit at both, no reading); the experts the trace's kernels say (:attr:`SizeSample.experts`) with the usual experts per token for
    as many (:data:`FEW_EXPERTS`), assumed; else the model's prior (:attr:`ScalingModel.expert_share`), assumed. An
    assumed share's source starts with ``assumed``."""
    with_experts = sorted((x for x in samples if (x.kernel_class == _EXPERT).any()), key=lambda x: x.batch)
    if not with_experts:
        return None, ""
    if experts is not None:
        e, k = int(experts[0]), int(experts[1])
        if e >= 1 and 1 <= k <= e:
            return k / e, f"model config: top {k} of {e} experts"
    lo, hi = with_experts[0], with_experts[-1]
    t_lo, t_hi = _expert_us_above_fixed(lo, model), _expert_us_above_fixed(hi, model)
    # growth within the kernels' noise says every expert is hit at both sizes, not how many one row hits: no reading
    if hi.batch > lo.batch and t_lo > 0 and t_hi >= SATURATED_GROWTH * t_lo:
        grid = np.geomspace(1e-4, 1.0, 4001)  # candidate shares; the growth ratio falls monotonically with the share
        growth = experts_hit(hi.batch, grid) / experts_hit(lo.batch, grid)
        r = t_hi / t_lo
        s = float(grid[0]) if r >= hi.batch / lo.batch else float(grid[np.argmin(np.abs(growth - r))])
        return s, (f"k/E {s:.3g} from the expert kernels' growth from bs {lo.batch} to {hi.batch} "
                   f"({t_hi / t_lo:.3g}x), uniform routing")
    said = [x.experts for x in with_experts if x.experts]
    if said:
        e = int(np.median(said))
        k = min(EXPERTS_PER_TOKEN_FEW if e <= FEW_EXPERTS else EXPERTS_PER_TOKEN_MANY, e)
        return k / e, (f"assumed: k/E {k}/{e} ({e} experts from the trace's kernels, {k} per token the usual for as many; "
                       f"uniform routing; no model config and one observed size to read k from)")
    return model.expert_share, (f"assumed: k/E {model.expert_share:g} (uniform routing; no model config and one "
                                f"observed size to read it from)")


#: The curve's band, measured: a traced size's profiled step is within 2% of its unprofiled truth at the 90th
#: percentile, and the error of the model's prediction grows by about 1.5% per e-fold of batch size from the nearest
#: traced size (90th percentiles over the held-out sets of ``bench/costmodel_eval.py``, docs/costmodel.md).
BAND_AT_TRACE = 0.02
BAND_PER_E_FOLD = 0.015


def band_fraction(b: np.ndarray, seen: np.ndarray) -> np.ndarray:
    """The band's half-width as a fraction of the curve at sizes ``b``, given the traced sizes ``seen``:
    ``BAND_AT_TRACE + BAND_PER_E_FOLD · min |ln(b / seen)|``."""
    b = np.asarray(b, dtype=float)
    seen = np.asarray(seen, dtype=float)
    if seen.size == 0:
        return np.zeros(b.shape)
    d = np.abs(np.log(b[:, None] / seen[None, :])).min(axis=1)
    return BAND_AT_TRACE + BAND_PER_E_FOLD * d


def fit_cost_curve(samples: list[SizeSample], max_size: int, timings: dict[int, float] | None = None,
                   device_props: dict | None = None, model: ScalingModel = DEFAULT_SCALING,
                   experts: tuple[int, int] | None = None) -> CostCurve:
    """The FULL-graph cost curve over ``1..max_size`` (see the module docstring).

    ``samples``: the trace's observed sizes (:func:`size_samples`; empty: timings only); ``timings``: harness
    FULL-graph timings ``{batch: us}``, which win at their sizes; ``device_props``: the trace's device
    properties (:attr:`launchgap.trace.Trace.device_properties` of its device: name, SM count, thread limit);
    ``experts``: a mixture of experts' ``(E, k)`` from its model config (:func:`launchgap.dims.moe_routing`), else
    read from the trace (:func:`expert_share`).
    """
    props = device_props or {}
    by_size = {x.batch: x for x in samples}  # one sample per size (the last given), ascending
    samples = [by_size[b] for b in sorted(by_size)]
    flops, bw, peaks = gpu_peaks(name_from_properties(props), props)
    if name_from_properties(props) and not props.get("name"):
        peaks += " (the trace names no GPU: its compute capability, SMs and memory identify it)"
    ridge = flops / bw  # rows at which a bf16 matmul's FLOPs catch up with its weight bytes
    sm_count = props.get("sm_count")
    b = np.arange(1, max(int(max_size), 1) + 1, dtype=float)
    source = np.full(b.size, "model", dtype=object)
    notes: list[str] = []
    share, share_source = expert_share(samples, experts, model)
    if share is not None:
        notes.append(f"experts scale with the distinct experts the batch hits, 1 - (1 - k/E)^b: {share_source}")
        notes.append(f"expert launches keep a fixed part of {model.expert_fixed_us:g} us each (assumed: a grouped GEMM's "
                     f"set-up and scheduling, the prior of docs/costmodel.md; not in the trace), the rest scales")
    assumed = share_source.startswith("assumed")
    if (split := _split_attention_note(model, samples, ridge, sm_count)) is not None:
        notes.append(split)
    k = REFERENCE_BANDWIDTH / bw  # attention's growth was fitted on the H200: how much slower this GPU reads
    other_gpu = not peaks.startswith("assumed") and max(k, 1 / k) >= BANDWIDTH_BAND_MIN_RATIO
    # the latency is an NVIDIA part's (H200, H100): on an AMD GPU the band alone says the bandwidth
    latency_measured = other_gpu and not is_amd(name_from_properties(props))
    bound = [(x.batch, int(latency_bound_attention(x, model).sum())) for x in samples] if latency_measured else []
    bound = [(bs, n) for bs, n in bound if n]
    if bound:
        model = replace(model, attention_bandwidth_ratio=k)
        notes.append(f"attention launches within {model.attention_latency_bound:g} x {model.attention_latency_us:g} us "
                     f"(one latency-bound wave: " + ", ".join(f"{n} at bs {bs}" for bs, n in bound)
                     + f") grow past their latency at this GPU's bandwidth: the rules were fitted on the H200 "
                     f"({REFERENCE_BANDWIDTH / 1e12:g} TB/s), this GPU reads at {bw / 1e12:.3g} TB/s, that growth "
                     f"x {k:.3g} (docs/costmodel.md, Another GPU)")
    if (fitted := fit_attention_wave_share(model, samples, ridge, sm_count)) is not None:
        notes.append(f"attention's share of its load paid in whole waves (co-resident blocks): {fitted[0]:.2g}, "
                     f"fitted on the trace's {fitted[1]} sizes (prior {model.attention_whole_wave_share:.2g}; "
                     f"docs/costmodel.md, the whole-wave share from the trace)")
        model = replace(model, attention_whole_wave_share=fitted[0])
    marked = [(x.batch, int(x.attention_matmul.sum())) for x in samples
              if x.attention_matmul is not None and x.attention_matmul.any()]
    if marked:
        notes.append("attention written out as matmuls (a matmul either side of a softmax): "
                     + ", ".join(f"{n} launch{'' if n == 1 else 'es'} at bs {b}" for b, n in marked)
                     + " scale as attention, with the rows, not as weight matmuls (docs/costmodel.md)")
    if samples:
        us, single = _predict(model, samples, b, ridge, sm_count, share)
        if len(samples) == 1:  # the band: the constants halved and doubled (an assumed k/E with them)
            alt = np.array([_predict(model.scaled(f), samples, b, ridge, sm_count,
                                     min(share / f, 1.0) if assumed else share)[0] for f in model.band_factors]
                           + [_predict(replace(model, attention_split_rows=True), samples, b, ridge, sm_count, share)[0]])
            if not np.array_equal(alt[-1], us):
                notes.append(f"attention at bs {samples[0].batch} runs a grid that fills the SMs (a split-KV grid: heads "
                             f"x KV splits per row): how its work grows with the rows is not in the trace; the band's "
                             f"low end takes it as following the rows (docs/costmodel.md, Long context)")
            if other_gpu and (samples[0].kernel_class == _ATTN).any():
                alt = np.vstack([alt, _predict(replace(model, attention_work_scale=k), samples, b, ridge, sm_count,
                                               share)[0]])
                notes.append(f"attention's growth past one row was fitted on the H200 ({REFERENCE_BANDWIDTH / 1e12:g} "
                             f"TB/s); this GPU reads at {bw / 1e12:.3g} TB/s: the band's "
                             f"{'high' if k > 1 else 'low'} end scales every attention launch's growth by {k:.3g}"
                             + (f", its {'low' if k > 1 else 'high'} end keeps the H200's" if bound else "")
                             + " (trace a second size to measure it, docs/costmodel.md)")
                if bound:
                    alt = np.vstack([alt, _predict(replace(model, attention_bandwidth_ratio=1.0), samples, b, ridge,
                                                   sm_count, share)[0]])
            if (lat := one_wave_attention_matmul_us(samples[0], sm_count)) is not None:
                alt = np.vstack([alt, _predict(replace(model, attention_matmul_fixed_us=lat), samples, b, ridge,
                                               sm_count, share)[0]])
                notes.append(f"attention written out as matmuls at bs {samples[0].batch} runs one wave per launch "
                             f"(latency-bound): how its work grows with the rows is not in the trace; the band's low "
                             f"end keeps {lat:.3g} us of each launch fixed (its fastest; trace a second size to "
                             f"measure it, docs/costmodel.md)")
        else:
            alt = single
        low, high = np.minimum(us, alt.min(axis=0)), np.maximum(us, alt.max(axis=0))
        seen = np.array([x.batch for x in samples], dtype=np.int64)
        # The measured error: at least BAND_AT_TRACE, widening by BAND_PER_E_FOLD per e-fold from the nearest traced size.
        rel = band_fraction(b, seen)
        low, high = np.minimum(low, us * (1 - rel)), np.maximum(high, us * (1 + rel))
        source[seen[seen <= b.size] - 1] = "trace"
        own = (tuple(int(x) for x in seen.tolist()), np.asarray(single, dtype=float))
    else:
        us = low = high = np.full(b.size, np.nan)
        own = ((), None)
    tim = {int(k): float(v) for k, v in (timings or {}).items() if 1 <= int(k) <= b.size and v and v > 0}
    if tim:
        ts = np.array(sorted(tim), dtype=np.int64)
        tv = np.array([tim[t] for t in ts.tolist()])
        if np.isfinite(us).all():
            # Timings win at their sizes; between them the curve keeps its shape, shifted by the interpolated offset.
            off = np.interp(b, ts, tv - us[ts - 1])
            us, low, high = us + off, low + off, high + off
        else:
            us = np.interp(b, ts, tv)
            low, high = us.copy(), us.copy()
            notes.append("costs between the timed sizes are linear: no trace to model them from")
        us[ts - 1] = low[ts - 1] = high[ts - 1] = tv
        source[ts - 1] = "timings"
    return CostCurve(us=us, low_us=low, high_us=high, source=tuple(str(s) for s in source), peaks=peaks,
                     notes=tuple(notes), sample_sizes=own[0], sample_us=own[1])


#: Host time per kernel launch of an eager step (PyTorch dispatch plus the launch call), us: the H200 host's
#: micro-benchmark (traces/h200-1b/truth.json ``micro.eager_host_us_per_op``, 7.95 us). The prior an eager estimate
#: falls back to where the trace holds too few eager launches to measure its own host (``predict.host_us_per_launch``).
DEFAULT_HOST_US_PER_LAUNCH = 7.95

#: What a GPU-bound eager step takes past its FULL graph's replay, per kernel, us: kernels launched one by one from a
#: stream's queue start further apart on the GPU than a graph's nodes do, however far ahead the host runs. Measured
#: on every committed sweep with eager and FULL-graph truth where the host's launches take under 0.7 of the graph
#: step (``bench/eager_host_eval.py``, set 5): median 0.99 us over 56 H200 rows of 19 models (p10-p90 0.88-1.10), 1.05
#: and 1.13 on two H100 rows.
EAGER_GAP_OVER_NODE_US = 1.0


@dataclass(frozen=True)
class EagerCurve:
    """The eager step (us) at every batch size ``1..max`` (``us``), where it came from (``source``:
    ``"eager steps"`` when the trace's own eager decode steps calibrate it, ``"estimate"`` otherwise) and how
    (``detail``, one line: it names the host's cost per launch and whether the trace measured it or the prior
    stood in). ``floor``: the estimate's cost per launch is the prior, a bare op's launch, so the curve is a floor
    for model code (the harness's eager steps run 12.4-33.5 us per kernel at one row: docs/planner.md)."""

    us: np.ndarray
    source: str
    detail: str
    floor: bool = False

    def at(self, batch) -> np.ndarray:
        """The eager step (us) at each batch size (sizes above the curve take its last size's, as
        :meth:`CostCurve.at`)."""
        b = np.asarray(batch, dtype=np.int64)
        return self.us[np.clip(b, 1, self.us.size) - 1] if self.us.size else np.full(b.shape, np.nan)


def eager_curve(graph: CostCurve, kernels_per_step: float, eager_bs: np.ndarray, eager_us: np.ndarray,
                host: HostLaunchCost | None = None, among_graphs: bool = False,
                device_name: str | None = None) -> EagerCurve:
    """The eager cost per size of a trace that may hold only graph steps: an eager step launches each of its
    ``kernels_per_step`` kernels from the host, so it takes at least that many times the host's cost per launch,
    and at least the graph step plus :data:`EAGER_GAP_OVER_NODE_US` per kernel (a GPU-bound eager step: the
    stream's kernels start further apart than a graph's nodes; measured on NVIDIA GPUs: an AMD ``device_name`` keeps
    the graph step alone). The cost per launch is ``host.us``, measured on the trace's own eager launches
    (:func:`launchgap.predict.host_us_per_launch`), else :data:`DEFAULT_HOST_US_PER_LAUNCH` (a prior). Where the
    trace has eager decode steps (fallbacks, uncaptured sizes: ``eager_bs``, their unprofiled cost ``eager_us``)
    that estimate is scaled to agree with them (the median ratio), unless they ran ``among_graphs`` (the trace
    replays graphs) and the host's cost was measured: profiled among graph replays an eager step runs 1.8-3.3x its
    unprofiled time, far more than the profiler's estimated cost takes off (the nine H200 serving traces: the
    scaled estimate +43% median against the unprofiled eager truth, the launch intervals alone 9.6%;
    docs/planner.md)."""
    per, how = _host_cost(host)
    gap = 0.0 if is_amd(device_name) else EAGER_GAP_OVER_NODE_US
    est = np.maximum(graph.us + kernels_per_step * gap, kernels_per_step * per)
    bound = f"at least the graph step plus {gap:g} us per kernel (a GPU-bound eager step)" if gap else \
        "at least the graph step (a GPU-bound eager step's gap per kernel was measured on NVIDIA GPUs only)"
    eager_bs = np.asarray(eager_bs, dtype=np.int64)
    eager_us = np.asarray(eager_us, dtype=float)
    ok = (eager_bs > 0) & (eager_bs <= graph.max_size) & np.isfinite(eager_us) & (eager_us > 0)
    measured = host is not None and host.us is not None
    if ok.any() and np.isfinite(est).all() and not (among_graphs and measured):
        k = float(np.median(eager_us[ok] / est[eager_bs[ok] - 1]))
        return EagerCurve(np.maximum(est * k, graph.us), "eager steps",
                          f"{int(ok.sum())} eager decode step(s) of the trace: {kernels_per_step:,.0f} kernels x "
                          f"{how}, scaled by {k:.3g} to agree with them")
    unused = f"; its {int(ok.sum())} eager decode step(s) among graph replays do not scale it (profiled there, an " \
             f"eager step runs 1.8-3.3x its unprofiled time)" if ok.any() else ""
    return EagerCurve(est, "estimate", f"estimated: {kernels_per_step:,.0f} kernels per step x {how} (a host-bound "
                                       f"eager step), {bound}{unused}", floor=not measured)


def _host_cost(host: HostLaunchCost | None) -> tuple[float, str]:
    """The host's cost per eager launch (us) and how it reads in an eager curve's detail."""
    if host is not None and host.us is not None:
        return host.us, f"{host.us:.3g} us per launch (measured: median of {host.intervals:,} intervals between the " \
                        f"trace's eager launches)"
    n = 0 if host is None else host.intervals
    why = f"fewer than {MIN_HOST_INTERVALS} to measure its own" if n < MIN_HOST_INTERVALS else \
        "their median, less the profiler's cost, not above 0"
    return DEFAULT_HOST_US_PER_LAUNCH, f"{DEFAULT_HOST_US_PER_LAUNCH:g} us per launch (a prior, the H200 harness " \
                                       f"host: {n:,} intervals between eager launches in the trace, {why})"


def curve_to_dict(curve: CostCurve | None, eager: EagerCurve | None = None) -> dict | None:
    """The curves as a JSON-safe dict (a fleet summary carries them), ``None`` without a curve."""
    if curve is None or not np.isfinite(curve.us).all():
        return None
    # full precision: a plan from a fleet's summaries must equal the plan from the traces themselves
    out = {"us": curve.us.tolist(), "low_us": curve.low_us.tolist(), "high_us": curve.high_us.tolist(),
           "source": list(curve.source), "peaks": curve.peaks, "notes": list(curve.notes)}
    if eager is not None:
        out["eager"] = {"us": eager.us.tolist(), "source": eager.source, "detail": eager.detail, "floor": eager.floor}
    return out


def curve_from_dict(doc: dict | None) -> tuple[CostCurve | None, EagerCurve | None]:
    """The curves back from :func:`curve_to_dict` (``(None, None)`` for ``None``)."""
    if not doc:
        return None, None
    curve = CostCurve(us=np.asarray(doc["us"], dtype=float), low_us=np.asarray(doc["low_us"], dtype=float),
                      high_us=np.asarray(doc["high_us"], dtype=float), source=tuple(str(s) for s in doc["source"]),
                      peaks=str(doc.get("peaks", "")), notes=tuple(str(n) for n in doc.get("notes", ())))
    e = doc.get("eager")
    eager = EagerCurve(np.asarray(e["us"], dtype=float), str(e["source"]), str(e["detail"]),
                       bool(e.get("floor", False))) if e else None
    return curve, eager



#: A kernel shorter than this (us) when launched eagerly is launch-latency-bound: its time says little of its work,
#: and it is where a graph replay's per-kernel excess over an eager launch shows (:func:`graph_kernel_excess`).
SHORT_KERNEL_US = 2.0
#: Least kernels of one launch configuration in each mode for the configuration to count, and least matched kernels
#: in all, for :func:`graph_kernel_excess` to measure a trace's excess.
EXCESS_MIN_PER_CONFIG = 3
EXCESS_MIN_KERNELS = 100


@dataclass(frozen=True)
class GraphExcess:
    """How much longer a short kernel runs inside a graph replay than launched eagerly, in one trace: ``us`` per
    kernel, measured on ``configs`` launch configurations and ``kernels`` matched kernels (per configuration the
    fewer of its graph and eager kernels)."""

    us: float
    configs: int
    kernels: int


def graph_kernel_excess(trace: Trace, row_step: np.ndarray, steps: np.ndarray) -> GraphExcess | None:
    """The trace's :class:`GraphExcess` over the kernels of ``steps`` (indices in ``row_step``'s numbering): per
    launch configuration (kernel name, grid and block) that ran at least :data:`EXCESS_MIN_PER_CONFIG` times replayed
    by a graph launch and as many times launched eagerly, and that runs under :data:`SHORT_KERNEL_US` eagerly, its mean
    time replayed less its mean time launched eagerly; their mean weighted by matched kernels (``None`` below
    :data:`EXCESS_MIN_KERNELS` of them).

    Why: a serving trace's eager fallbacks and its graph replays are both samples of the cost curve, but the same
    short kernel (a norm, a copy, one block) takes 0.04-0.12 us longer inside a replay on the H200 serving traces
    (seven of nine; one -0.05, one 0.00): over the ~650 short kernels of a small model's step that is 30-80 us, which
    the curve between an eager sample and a graph sample took for growth with the batch, so padding ran +5% to +27%
    high (docs/costmodel.md). Matching one configuration in both modes keeps the work the same; only short kernels
    count, since a longer kernel with the same grid may do more work at a larger batch (a grid over heads, a
    grid-stride loop)."""
    k = np.flatnonzero((trace.kind == Kind.KERNEL) & (row_step >= 0))
    k = k[np.isin(row_step[k], steps) & (trace.launch_idx[k] >= 0)]
    api = trace.api[trace.launch_idx[k]]
    m = np.where(api == Api.GRAPH_LAUNCH, 1, np.where(api == Api.KERNEL_LAUNCH, 2, 0))
    k, m = k[m > 0], m[m > 0]
    if not k.size:
        return None
    cfg = [trace.name_id[k]]
    if getattr(trace, "grid_x", None) is not None and getattr(trace, "block_x", None) is not None:
        cfg += [trace.grid_x[k], trace.grid_y[k], trace.grid_z[k], trace.block_x[k], trace.block_y[k], trace.block_z[k]]
    key = np.unique(np.stack(cfg, axis=1), axis=0, return_inverse=True)[1].reshape(-1)
    us = trace.dur_ns[k] / 1e3
    n = int(key.max()) + 1
    count = [np.bincount(key[m == mm], minlength=n) for mm in (1, 2)]
    mean = [np.bincount(key[m == mm], weights=us[m == mm], minlength=n) / np.maximum(c, 1) for mm, c in zip((1, 2), count)]
    ok = (count[0] >= EXCESS_MIN_PER_CONFIG) & (count[1] >= EXCESS_MIN_PER_CONFIG) & (mean[1] < SHORT_KERNEL_US)
    w = np.minimum(count[0], count[1])[ok]
    if w.sum() < EXCESS_MIN_KERNELS:
        return None
    return GraphExcess(float(np.average((mean[0] - mean[1])[ok], weights=w)), int(ok.sum()), int(w.sum()))
