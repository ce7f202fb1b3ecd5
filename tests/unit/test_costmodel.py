"""The batch-scaling model and the one cost curve (launchgap.costmodel), with exact numbers on hand-built kernels."""
from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from launchgap.costmodel import ATTENTION_MATMUL_WINDOW, DEFAULT_SCALING, KERNEL_CLASSES, ScalingModel, SizeSample, \
    attention_matmuls, band_fraction, classify_kernels, fit_attention_wave_share, fit_cost_curve, gemm_tile_side, \
    gpu_peaks, is_attention_softmax, resident_blocks, size_samples

H200 = {"name": "NVIDIA H200", "sm_count": 132}
GEMM, ATTN, KV, COLL, ELEM, EXPERT, ROW_GEMM = range(len(KERNEL_CLASSES))


def test_kernel_classes() -> None:
    names = np.array(["nvjet_sm90_tst_128x8_64x12_2x1_v_bz_TNT", "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize",
                      "Cijk_Ailk_Bljk_BBS_BH_MT64x16x64", "void cublasLt::splitKreduce_kernel<32, 16, int>",
                      "cudnn_generated_fort_native_sdpa_sm90_flash_fprop_wgmma_f16_knob_7",
                      "void vllm::reshape_and_cache_flash_kernel<__nv_bfloat16>", "ncclDevKernel_AllReduce_Sum_bf16",
                      "void vllm::cross_device_reduce_1stage<__nv_bfloat16, 4>", "_fwd_kernel_unified_attention_2d",
                      "void at::native::vectorized_elementwise_kernel<8, at::native::CUDAFunctor_add<c10::BFloat16>>",
                      "triton_poi_fused__scaled_dot_product_cudnn_attention__to_copy_0", "triton_tem_fused_mm_1"])
    assert classify_kernels(names).tolist() == [GEMM, GEMM, GEMM, GEMM, ATTN, KV, COLL, COLL, ATTN, ELEM, ELEM, GEMM]
    assert classify_kernels(np.array([], dtype=object)).tolist() == []
    # attention whose template arguments name the KV cache (SGLang on MI300X: the decode and prefill attention of the
    # TraceLens traces) is attention; the KV writes stay KV writes, "flash" or "KVCache" in their names or not
    rocm = np.array(["void paged_attention_ll4mi_QKV_mfma16_kernel<0, __hip_bfloat16, __hip_bfloat16, "
                     "(vllm::Fp8KVCacheDataType)0, 256, 128>",
                     "_ZN7ck_tile6kentryILi2ENS_38FmhaBatchPrefillWithPagedKVCacheKernelINS_40BlockFmhaBatchPrefill",
                     "void (anonymous namespace)::store_kvcache<2048l, 4, false, long>",
                     "void vllm::reshape_and_cache_flash_kernel<__hip_bfloat16, __hip_bfloat16, "
                     "(vllm::Fp8KVCacheDataType)0>", "copy_kv_cache_to_buffer"])
    assert classify_kernels(rocm).tolist() == [ATTN, ATTN, KV, KV, KV]
    # FlashInfer's attention by its kernel name; its norms, activations and sampling, and a kernel whose argument list
    # names flashinfer, are element-wise
    fi = np.array(["void flashinfer::BatchDecodeWithPagedKVCacheKernel<true, 4u, 1u, 16u, 4u, 1u>(...)",
                   "void flashinfer::BatchPrefillWithRaggedKVCacheKernel<128u, 1u>(flashinfer::Params)",
                   "void flashinfer::norm::FusedAddRMSNormKernel<8u, __nv_bfloat16>(__nv_bfloat16*)",
                   "void flashinfer::activation::act_and_mul_kernel<__nv_bfloat16, &silu>(__nv_bfloat16*)",
                   "void flashinfer::sampling::TopKTopPSamplingFromProbKernel<1024u>(float*)",
                   "void tensorrt_llm::kernels::quantize_with_block_size<(tensorrt_llm::BlockScaleQuantizationType)2, "
                   "__nv_bfloat16, 32, true>(int, flashinfer::QuantizationSFLayout)",
                   "void flash_fwd_splitkv_kernel<Flash_fwd_kernel_traits<128, 64, 128, 4>>(Flash_fwd_params)",
                   "void at::native::(anonymous namespace)::multi_tensor_apply_kernel<float>(float*)"])
    assert classify_kernels(fi).tolist() == [ATTN, ATTN, ELEM, ELEM, ELEM, ELEM, ATTN, ELEM]
    # a return type with parentheses in it does not hide the kernel's own name: cuBLAS's gemv (a matmul at one row)
    # and vLLM's fused norm; TensorRT-LLM's XQA and the Triton attention kernels of SGLang and vLLM by their names
    more = np.array(["std::enable_if<!(false), void>::type internal::gemvx::kernel<int, int, __nv_bfloat16, float, "
                     "cublasGemvParamsEx<int, float> >(cublasGemvParamsEx<int, float>)",
                     "std::enable_if<(((8)>(0)))&&vllm::_typeConvert<c10::BFloat16>::exists, void>::type "
                     "vllm::fused_add_rms_norm_kernel<c10::BFloat16, 8>(c10::BFloat16*, long, int)",
                     "xqa_kernel_dt_bf16_d_128_beam_1_kvt_bf16_nqpkv_8_m_8_sm_90", "kernel_mha",
                     "_fwd_kernel_stage1", "_fwd_grouped_kernel_stage1", "_fwd_kernel_stage2", "_fwd_kernel",
                     "reduce_segments", "void at::native::reduce_kernel<512, 1>(at::native::ReduceOp<float>)"])
    assert classify_kernels(more).tolist() == [GEMM, ELEM, ATTN, ATTN, ATTN, ATTN, ATTN, ATTN, ATTN, ELEM]


def test_gpu_peaks() -> None:
    assert gpu_peaks("NVIDIA H200") == (989e12, 4.8e12, "NVIDIA H200 data sheet")
    assert gpu_peaks("", {"memory_bandwidth_bytes_per_s": 2e12, "sm_count": 100, "clock_rate_hz": 1.5e9}) == (
        2048.0 * 100 * 1.5e9, 2e12, "device properties (SM count x clock, bandwidth)")
    assert gpu_peaks(None)[2] == "assumed (GPU not recognised)"


def test_a_gpu_the_trace_does_not_name_is_known_by_its_properties() -> None:
    """ROCm exports may write ``name: ""`` (TraceLens' vLLM MI300X traces): gfx942 (9.4), 304 CUs, 64-wide wavefronts
    and 192 GiB are an MI300X (1,307 TFLOP/s bf16 dense, 5.3 TB/s); the same die with 256 GiB an MI325X (6.0 TB/s);
    an NVIDIA device with a 9.4 capability is no AMD GPU."""
    mi300x = {"name": "", "compute_capability": "9.4", "sm_count": 304, "warp_size": 64,
              "total_memory_bytes": 206141652992}
    x = _sample(8, 100.0, [40.0], [ATTN], [-1])
    c = fit_cost_curve([x], 32, None, mi300x)
    assert c.peaks == ("AMD Instinct MI300X data sheet (the trace names no GPU: its compute capability, SMs and memory "
                       "identify it)")
    assert gpu_peaks("AMD Instinct MI300X")[:2] == (1307e12, 5.3e12)
    c325 = fit_cost_curve([x], 32, None, {**mi300x, "total_memory_bytes": 256 * 2**30})
    assert c325.peaks.startswith("AMD Instinct MI325X data sheet") and gpu_peaks("MI325X")[:2] == (1307e12, 6.0e12)
    assert fit_cost_curve([x], 32, None, {**mi300x, "warp_size": 32}).peaks == "assumed (GPU not recognised)"
    # a name written wins, and says nothing of the properties
    assert fit_cost_curve([x], 32, None, {**mi300x, "name": "NVIDIA H200"}).peaks == "NVIDIA H200 data sheet"


def _sample(b0: int, level: float, us: list[float], cls: list[int], blocks: list[int]) -> SizeSample:
    n = len(us)
    return SizeSample(b0, level, np.array(cls, dtype=np.int8), np.array(us, dtype=float),
                      np.array(blocks, dtype=np.int64), np.full(n, 128, dtype=np.int64))


def test_one_size_exact() -> None:
    m = DEFAULT_SCALING
    # bs 8 on an H200: a 100 us matmul, a 10 us attention kernel of 64 blocks (8 per row), 20 us element-wise,
    # 5 us all-reduce; the step costs 150 us as one FULL graph (the level the curve is anchored at)
    x = _sample(8, 150.0, [100.0, 10.0, 20.0, 5.0], [GEMM, ATTN, ELEM, COLL], [24, 64, 16, 8])
    c = fit_cost_curve([x], 300, None, H200, m)
    ridge = 989 / 4.8  # 206 rows: the matmul turns compute-bound there

    def at(b: int) -> float:
        gemm = 100 * (1 + b / m.gemm_rows) / (1 + 8 / m.gemm_rows) * max(1.0, b / ridge)
        f = m.attention_fixed_waves
        attn = 10 * (f + max(1.0, np.ceil(8 * b / 132 - 1e-9))) / (f + 1)  # whole waves of 132 blocks
        elem = 20 * ((b / (b + m.elementwise_rows)) / (8 / (8 + m.elementwise_rows))) ** m.elementwise_power
        coll = 5 * (m.collective_rows + b) / (m.collective_rows + 8)
        return 150.0 + (gemm - 100) + (attn - 10) + (elem - 20) + (coll - 5)

    for b in (1, 8, 16, 17, 34, 64, 128, 300):
        assert c.at(b) == pytest.approx(at(b), rel=1e-12), b
    assert c.at(8) == 150.0 and c.source_at(8) == "trace" and c.source_at(9) == "model"
    # the 17th row needs a second wave of attention blocks: a step of 10 / 1.1 us (one wave's share of the kernel)
    assert c.at(17) - c.at(16) == pytest.approx(10 / (1 + m.attention_fixed_waves), abs=0.5)
    # the band: every constant halved / doubled, at least the measured error: 2% at the traced size, 1.5% more per
    # e-fold from it (bs 1: 2% + 1.5% x ln 8 = 5.12%)
    lo, hi = (fit_cost_curve([x], 300, None, H200, m.scaled(f)) for f in m.band_factors)
    for b in (1, 64, 300):
        rel = 0.02 + 0.015 * abs(np.log(b / 8))
        assert c.low(b) == pytest.approx(min(c.at(b), lo.at(b), hi.at(b), c.at(b) * (1 - rel)))
        assert c.high(b) == pytest.approx(max(c.at(b), lo.at(b), hi.at(b), c.at(b) * (1 + rel)))
    assert band_fraction(np.array([1.0]), np.array([8]))[0] == pytest.approx(0.0511916, abs=1e-6)
    assert c.low(8) == pytest.approx(147.0) and c.high(8) == pytest.approx(153.0)
    assert c.origin == "trace" and c.sizes.tolist() == [8] and c.peaks == "NVIDIA H200 data sheet"


def test_a_size_moves_with_how_the_observed_cost_was_built_from_its_kernels() -> None:
    """The observed graph_us is kernel_scale x kernel time + node_us per kernel shorter than short_us (+ launch): a
    size's cost adds the kernels' change at that scale and the node cost of the kernels that cross short_us."""
    import dataclasses
    m = DEFAULT_SCALING
    # bs 64: a 30 us matmul (flat below the ridge but for its rows), two 12 us collectives (bytes per row)
    plain = _sample(64, 100.0, [30.0, 12.0, 12.0], [GEMM, COLL, COLL], [24, 8, 8])
    built = dataclasses.replace(plain, kernel_scale=0.987, node_us=0.3, short_us=20.0)
    base = fit_cost_curve([plain], 64, None, H200, m)
    c = fit_cost_curve([built], 64, None, H200, m)
    coll = 12 * (m.collective_rows + 1) / (m.collective_rows + 64)  # 6.09 us at one row
    gemm = 30 * (1 + 1 / m.gemm_rows) / (1 + 64 / m.gemm_rows)
    kernels_at_1 = gemm + 2 * coll
    assert base.at(1) == pytest.approx(100.0 + kernels_at_1 - 54.0, rel=1e-12)
    # the matmul stays long (29.6 us at one row), the 12 us collectives were short already: no node changes
    assert c.at(1) == pytest.approx(100.0 + 0.987 * (kernels_at_1 - 54.0), rel=1e-12)
    # a 24 us collective at 64 rows is 12.2 us at one: it crosses short_us and pays one node there
    crossing = dataclasses.replace(built, kernel_us=np.array([30.0, 12.0, 24.0]))
    c2 = fit_cost_curve([crossing], 64, None, H200, m)
    at_1 = gemm + coll + 24 * (m.collective_rows + 1) / (m.collective_rows + 64)  # 12.19 us: now short
    assert c2.at(1) == pytest.approx(100.0 + 0.987 * (at_1 - 66.0) + 0.3, rel=1e-12)
    assert c.at(64) == c2.at(64) == 100.0


def test_persistent_attention_grid_reads_the_work_from_the_time() -> None:
    m = ScalingModel()
    f = m.attention_fixed_waves
    # 132 blocks on 132 SMs at bs 19: the grid no longer says the work; 1.9 waves' time of m.attention_wave_us each
    # (the 1b serving trace's cuDNN kernel: 8 blocks per row, 152 blocks in 2 waves). The time says 2 whole waves; the
    # last one half full: 1.5 x 132 / 19 = 10.4 blocks per row, the nearest power of two 8 (at least 132 / 19 = 6.9).
    # Before, 1.9 x 132 / 19 = 13 blocks per row put the waves every 10 rows (7 waves at 64 rows, not 4).
    t0 = m.attention_wave_us * (f + 1.9) / (1 + f)
    c = fit_cost_curve([_sample(19, 500.0, [t0], [ATTN], [132])], 64, None, H200, m)
    w0 = 2.0  # 8 x 19 = 152 blocks
    for b, w in ((1, 1), (16, 1), (17, 2), (33, 2), (34, 3), (49, 3), (50, 4), (64, 4)):
        assert c.at(b) == pytest.approx(500.0 + t0 * ((f + w) / (f + w0) - 1)), b
    # one wave's time at bs 24 on a persistent grid: half a wave of blocks would be 2.75 per row, but more blocks than
    # SMs means at least 132 / 24 = 5.5 per row: the power of two above it, 8 (64 rows: 512 blocks, 4 waves)
    t1 = m.attention_wave_us
    c = fit_cost_curve([_sample(24, 500.0, [t1], [ATTN], [132])], 64, None, H200, m)
    for b, w in ((16, 1), (17, 2), (64, 4)):
        assert c.at(b) == pytest.approx(500.0 + t1 * ((f + w) / (f + 2) - 1)), b


def test_without_launch_configuration_the_row_ratio() -> None:
    m = ScalingModel()
    x = _sample(8, 100.0, [40.0], [ATTN], [-1])
    c = fit_cost_curve([x], 32, None, {}, m)  # no device properties either
    assert c.at(32) == pytest.approx(100.0 + 40.0 * ((m.attention_rows + 32) / (m.attention_rows + 8) - 1))
    assert c.peaks == "assumed (GPU not recognised)"


def test_two_sizes_pass_through_both_and_follow_the_model_between() -> None:
    m = ScalingModel()
    # between 4 and 12 the curve rises from 50 to 70: the element-wise kernel's measured rise (10 -> 12 us) along its
    # shape from 4, the rest of the step's (18 us: replay cost, idle) linearly
    a = _sample(4, 50.0, [10.0], [ELEM], [1])
    b = _sample(12, 70.0, [12.0], [ELEM], [3])
    c = fit_cost_curve([a, b], 16, None, H200, m)
    g = {k: (k / (k + m.elementwise_rows)) ** m.elementwise_power for k in range(1, 17)}
    assert c.at(4) == 50.0 and c.at(12) == 70.0 and c.source_at(4) == c.source_at(12) == "trace"
    for k in (5, 8, 11):
        frac = (g[k] - g[4]) / (g[12] - g[4])
        assert c.at(k) == pytest.approx(50.0 + 2.0 * frac + 18.0 * (k - 4) / 8), k
    # outside: the nearest size's own prediction
    assert c.at(2) == pytest.approx(50.0 + 10.0 * (g[2] / g[4] - 1))
    assert c.at(16) == pytest.approx(70.0 + 12.0 * (g[16] / g[12] - 1))
    # the band: the two single-size predictions
    assert c.low(16) == pytest.approx(min(c.at(16), 50.0 + 10.0 * (g[16] / g[4] - 1)))


def test_between_two_sizes_each_class_rises_along_its_own_shape() -> None:
    """16 and 24 rows: a 32-heads attention kernel (2 resident per SM) rises 22 -> 31 us, a matmul 10 -> 10.4 us, the
    step 100 -> 112 us. The attention's rise follows its own shape from 16 (a third wave begun at 17 rows costs 0.35
    of a wave at once); the matmul's and the rest's (2.6 us) rise linearly (the model's matmul is flat here)."""
    def at(b0: int, level: float, attn: float, gemm: float) -> SizeSample:
        return SizeSample(b0, level, np.array([ATTN, GEMM], dtype=np.int8), np.array([attn, gemm]),
                          np.array([32 * b0, 64]), np.array([128, 128]), resident=np.array([2, 1]))
    c = fit_cost_curve([at(16, 100.0, 22.0, 10.0), at(24, 112.0, 31.0, 10.4)], 24, None, H200, DEFAULT_SCALING)

    def load(b: int) -> float:  # blocks per SM, a begun wave after the first costing 0.35 of it at once
        p = 32 * b / 132
        return 0.65 * p + 0.35 * (min(p, 2) + 2 * (np.ceil(p / 2 - 1e-9) - 1))
    gemm = (1 + 24 / 5000) / (1 + 16 / 5000)  # the model's matmul growth: its rise goes linearly all the same
    for k in (17, 20):
        attn = (load(k) - load(16)) / (load(24) - load(16))
        lin = (k - 16) / 8
        g = ((1 + k / 5000) / (1 + 16 / 5000) - 1) / (gemm - 1)
        assert c.at(k) == pytest.approx(100.0 + 9.0 * attn + 0.4 * g + 2.6 * lin, rel=1e-12), k
    # the 17th row begins the third wave: 44% of the attention's rise in one row (linear: an eighth)
    assert (load(17) - load(16)) / (load(24) - load(16)) == pytest.approx(0.4374, abs=1e-4)


def test_timings_win_and_keep_the_shape() -> None:
    x = _sample(8, 100.0, [10.0], [ELEM], [1])
    c = fit_cost_curve([x], 16, {4: 90.0, 16: 130.0}, H200)
    model = fit_cost_curve([x], 16, None, H200)
    assert c.at(4) == 90.0 and c.at(16) == 130.0 and c.source_at(4) == "timings" and c.source_at(8) == "trace"
    off8 = (90.0 - model.at(4)) + (130.0 - model.at(16) - (90.0 - model.at(4))) * (8 - 4) / 12
    assert c.at(8) == pytest.approx(model.at(8) + off8)
    assert c.origin == "timings+trace"
    only = fit_cost_curve([], 8, {2: 10.0, 6: 30.0}, H200)  # no trace: linear between the timings
    assert only.at(4) == 20.0 and only.at(1) == 10.0 and only.at(8) == 30.0 and only.notes


def test_size_samples_take_each_size_median_step() -> None:
    # steps 0-2 at bs 4 (FULL-graph 10, 30, 20 us), step 3 at bs 8, step 4 unknown; one kernel per step
    xs = size_samples(np.array([0, 1, 2, 3, 4, -1]), np.array([ELEM] * 6, dtype=np.int8),
                      np.array([1.0, 3.0, 2.0, 4.0, 5.0, 9.0]), np.full(6, -1), np.full(6, -1),
                      np.array([4, 4, 4, 8, -1]), np.array([10.0, 30.0, 20.0, 40.0, 50.0]))
    assert [(x.batch, x.graph_us, x.kernel_us.tolist()) for x in xs] == [(4, 20.0, [2.0]), (8, 40.0, [4.0])]


def test_elementwise_grid_in_waves_follows_the_rows() -> None:
    m = ScalingModel()
    # a 128-thread element-wise kernel: 16 resident per SM (2,048 threads), 2,112 blocks per wave on 132 SMs.
    # Over the whole KV cache at bs 8 it has 16,384 blocks (W0 = 7.76 waves): its time is a fixed part of 0.7 of a
    # wave plus its waves, which follow the rows: 20 x (0.7 + 8 W0) / (0.7 + W0) = 148.41 us at bs 64 and
    # 20 x (0.7 + W0 / 8) / (0.7 + W0) = 3.95 us at bs 1; a 32-block kernel stays latency-bound (the power law)
    # until its blocks fill a wave (bs 8 x 2,112 / 32 = 528)
    x = SizeSample(8, 100.0, np.array([ELEM, ELEM], dtype=np.int8), np.array([20.0, 2.0]),
                   np.array([16384, 32], dtype=np.int64), np.array([128, 128], dtype=np.int64))
    c = fit_cost_curve([x], 64, None, H200, m)
    k, p = m.elementwise_rows, m.elementwise_power
    small = 2.0 * ((64 / (64 + k)) / (8 / (8 + k))) ** p
    w0 = 16384 / 2112
    assert m.elementwise_fixed_waves == 0.7
    assert 20.0 * (0.7 + 8 * w0) / (0.7 + w0) == pytest.approx(148.41, abs=0.01)
    assert c.at(64) == pytest.approx(100.0 + (20.0 * (0.7 + 8 * w0) / (0.7 + w0) - 20.0) + (small - 2.0))
    assert c.at(1) == pytest.approx(100.0 + (20.0 * (0.7 + w0 / 8) / (0.7 + w0) - 20.0)
                                    + (2.0 * ((1 / (1 + k)) / (8 / (8 + k))) ** p - 2.0))


def test_grid_sized_to_the_gpu_is_not_in_waves() -> None:
    m = ScalingModel()
    # PyTorch's CatArrayBatchedCopy launches 4 x 132 blocks of 512 threads (as many as the SMs hold at once: 2,048
    # threads each) whatever it copies: a grid-stride loop, its grid does not say its work (HF llama at bs 8 and 64:
    # 528 blocks, 2.19 -> 2.73 us). It scales as a latency-bound kernel, not with its rows (8x).
    x = SizeSample(8, 50.0, np.array([ELEM], dtype=np.int8), np.array([2.0]), np.array([528], dtype=np.int64),
                   np.array([512], dtype=np.int64))
    c = fit_cost_curve([x], 64, None, H200, m)
    k, p = m.elementwise_rows, m.elementwise_power
    assert c.at(64) == pytest.approx(50.0 + 2.0 * (((64 / (64 + k)) / (8 / (8 + k))) ** p - 1))
    # one block fewer than the SMs hold at once is not sized to the GPU (527 is no multiple of 132): 0.998 of a wave,
    # 7.98 waves at bs 64: in waves above the fixed part, (0.7 + 7.985) / (0.7 + 0.998) = 5.1144x
    y = SizeSample(8, 50.0, np.array([ELEM], dtype=np.int8), np.array([2.0]), np.array([527], dtype=np.int64),
                   np.array([512], dtype=np.int64))
    w = 527 / 528
    assert (0.7 + 8 * w) / (0.7 + w) == pytest.approx(5.1144, abs=1e-4)
    assert fit_cost_curve([y], 64, None, H200, m).at(64) == pytest.approx(50.0 + 2.0 * ((0.7 + 8 * w) / (0.7 + w) - 1))


def test_elementwise_grid_short_of_a_wave_is_latency_bound_then_in_waves() -> None:
    m = ScalingModel()
    # A 128-thread kernel of 1,024 blocks per row (0.485 of the 2,112 blocks 132 SMs hold at once) takes 3.7 us at
    # bs 1: latency-bound there, g(1) = (1 / 17)^0.116 = 0.71989 (above the waves' (0.7 + 0.485) / 1.7 = 0.69697); at
    # bs 64 its 31.03 waves run above the fixed part, g(64) = (0.7 + 31.0303) / 1.7 = 18.6649: 25.93x, 95.93 us
    # (granite's MoE kernels: 3.7 us at bs 1, 79 us at 64). Down from bs 64 it ends at the latency-bound time, 3.7 us.
    x = SizeSample(1, 100.0, np.array([ELEM], dtype=np.int8), np.array([3.7]), np.array([1024], dtype=np.int64),
                   np.array([128], dtype=np.int64))
    assert (1 / 17) ** 0.116 == pytest.approx(0.71989, abs=1e-5)
    assert (0.7 + 64 * 1024 / 2112) / 1.7 == pytest.approx(18.6649, abs=1e-4)
    assert fit_cost_curve([x], 64, None, H200, m).at(64) == pytest.approx(100.0 + 3.7 * (18.6649 / 0.71989 - 1),
                                                                            rel=1e-5)
    assert 3.7 * 18.6649 / 0.71989 == pytest.approx(95.93, abs=0.01)
    y = SizeSample(64, 200.0, np.array([ELEM], dtype=np.int8), np.array([95.93]),
                   np.array([64 * 1024], dtype=np.int64), np.array([128], dtype=np.int64))
    assert fit_cost_curve([y], 64, None, H200, m).at(1) == pytest.approx(200.0 + 3.7 - 95.93, abs=0.01)


def test_gemm_tile_side() -> None:
    names = np.array(["nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_TNT", "nvjet_sm90_tst_64x8_64x16_4x1_v_bz_TNT",
                      "void cutlass::Kernel2<cutlass_80_simt_sgemm_64x64_8x5_tn_align1>(cutlass_80_simt_sgemm)",
                      "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize64x128x64_warpgroupsize1x1x1_execute",
                      "Cijk_Alik_Bljk_BBS_BH_MT128x64x64_MI16x16x16x1_SN", "ampere_bf16_s16816gemm_bf16_128x64_ldg8_f2f_tn",
                      "void gemv2T_kernel_val<int, int, __nv_bfloat16>", "triton_tem_fused_mm_1"], dtype=object)
    assert gemm_tile_side(names).tolist() == [128, 8, 64, 64, 64, 64, -1, -1]
    assert gemm_tile_side(np.array([], dtype=object)).tolist() == []


def test_matmul_over_many_more_rows_than_the_batch_follows_the_rows() -> None:
    m = ScalingModel()
    # At bs 8 a matmul whose tile is 256x128 multiplies far more rows than 8 (HF DeepSeek-V2 decompresses its whole
    # latent KV cache every step): a row_gemm, t0 (F + b) / (F + b0) with F = 1 row: 30 us -> 216.7 us at bs 64;
    # a 64x8-tile matmul beside it reads its weights (flat). At bs 64 the 128 tile is still twice the rows; at bs 128
    # it is not (weight matmuls' tiles reach 128 there).
    xs = size_samples(np.zeros(2, dtype=np.int64), np.array([GEMM, GEMM], dtype=np.int8), np.array([30.0, 5.0]),
                      np.array([132, 44]), np.array([384, 384]), np.array([8]), np.array([100.0]),
                      kernel_tile=np.array([128, 8]))
    assert xs[0].kernel_class.tolist() == [ROW_GEMM, GEMM]
    assert m.row_gemm_fixed_rows == 1.0
    c = fit_cost_curve(xs, 64, None, H200, m)
    gemm = 5.0 * (1 + 64 / m.gemm_rows) / (1 + 8 / m.gemm_rows)
    assert 30.0 * 65 / 9 == pytest.approx(216.67, abs=0.01)
    assert c.at(64) == pytest.approx(100.0 + (30.0 * 65 / 9 - 30.0) + (gemm - 5.0))
    for b0, want in ((64, ROW_GEMM), (128, GEMM)):
        got = size_samples(np.zeros(1, dtype=np.int64), np.array([GEMM], dtype=np.int8), np.array([30.0]),
                           np.array([132]), np.array([384]), np.array([b0]), np.array([100.0]),
                           kernel_tile=np.array([128]))
        assert got[0].kernel_class.tolist() == [want], b0


#: An H200 as its Kineto trace's deviceProperties give it (launchgap.trace.DEVICE_PROPERTY_KEYS).
H200_PROPS = {"name": "NVIDIA H200", "sm_count": 132, "warp_size": 32, "max_threads_per_sm": 2048,
              "registers_per_sm": 65536, "shared_memory_per_sm_bytes": 233472,
              "shared_memory_per_block_optin_bytes": 232448}


def test_resident_blocks_arithmetic() -> None:
    threads = [128, 384, 128, 64, 96, 128, 128, -1, 128]
    regs = [246, 168, 32, 16, 170, 32, 0, 32, -1]
    smem = [86336, 137216, 0, 0, 0, 116224, 0, 0, 0]
    # cuDNN's SDPA kernel: registers 246 -> 248 per thread (256 per warp) x 32 x 4 warps = 31,744 of 65,536 -> 2;
    #   shared memory 86,336 + 1,024 reserved -> 233,472 // 87,360 = 2;
    # the harness decoder's wgmma kernel: 168 x 32 = 5,376 per warp x 12 warps = 64,512 -> 1 (and 138 KB shared) -> 1;
    # 128 threads, 32 registers: 2,048 threads // 128 = 16 = 65,536 // 4,096;
    # 64 threads, 16 registers: 32 by threads, 64 by registers -> the 32-block cap;
    # 96 threads (3 warps), 170 registers: 5,440 -> 5,632 per warp x 3 = 16,896 -> 3 (4 without the per-warp rounding);
    # 116,224 B of shared memory + 1,024 reserved per block: 233,472 // 117,248 = 1 (2 without the reserve);
    # no registers: no limit from them (2,048 // 128 = 16); threads or registers unknown: -1
    assert resident_blocks(threads, regs, smem, H200_PROPS).tolist() == [2, 1, 16, 32, 3, 1, 16, -1, -1]
    # the SM's registers or shared memory unknown: -1 for every kernel; no opt-in maximum: no reserve assumed
    assert resident_blocks([128], [32], [0], {"sm_count": 132}).tolist() == [-1]
    no_optin = {k: v for k, v in H200_PROPS.items() if k != "shared_memory_per_block_optin_bytes"}
    assert resident_blocks([128], [32], [116224], no_optin).tolist() == [2]


def _attention_sample(resident: int | None) -> SizeSample:
    """bs 8: one 20 us attention kernel of 256 blocks (32 per row: heads x rows) and 128 threads; a 100 us step."""
    return SizeSample(8, 100.0, np.array([ATTN], dtype=np.int8), np.array([20.0]), np.array([256]), np.array([128]),
                      resident=None if resident is None else np.array([resident]))


@pytest.mark.parametrize("resident", [2, 4])
def test_attention_with_two_or_more_resident_blocks_follows_the_load_continuously(resident: int) -> None:
    """Two or more blocks per SM: t0 (f + L(b)) / (f + L(b0)), f = 0.5, L = 0.65 P + 0.35 (min(P, R) + R (ceil(P/R) - 1)),
    P = max(1, 32 b / 132) the blocks per SM, R the blocks an SM holds at once: a wave begun after the first costs 0.35
    of it at once."""
    m = DEFAULT_SCALING
    assert (m.attention_shared_fixed, m.attention_whole_wave_share) == (0.5, 0.35)
    c = fit_cost_curve([_attention_sample(resident)], 64, None, H200, m)

    def load(b: int) -> float:
        p = max(1.0, 32 * b / 132)
        return 0.65 * p + 0.35 * (min(p, resident) + resident * (np.ceil(p / resident - 1e-9) - 1))

    for b in (1, 2, 4, 5, 8, 9, 16, 17, 64):
        assert c.at(b) == pytest.approx(100.0 + 20.0 * (0.5 + load(b)) / (0.5 + load(8)) - 20.0, rel=1e-12), b
    # bs 1 (32 blocks): under one block per SM, the floor of one
    assert load(1) == 1.0 and c.at(1) == pytest.approx(80.0 + 20.0 * 1.5 / (0.5 + load(8)))
    if resident == 2:  # 16 rows fill 2 waves of 2 blocks per SM (3.88 per SM); the 17th row starts the third wave
        assert load(8) == pytest.approx(256 / 132)  # 1.94 blocks per SM: inside the first wave, continuous
        assert load(16) == pytest.approx(0.65 * 512 / 132 + 0.35 * 4)
        assert load(17) == pytest.approx(0.65 * 544 / 132 + 0.35 * 6)
        assert c.at(17) - c.at(16) == pytest.approx(20.0 * (0.65 * 32 / 132 + 0.7) / (0.5 + load(8)))


def _two_per_sm_load(b: int, share: float) -> float:
    """The load of a 32-blocks-a-row attention kernel, 2 blocks per SM on 132 SMs, with ``share`` paid in whole waves."""
    p = max(1.0, 32 * b / 132)
    return (1 - share) * p + share * (min(p, 2) + 2 * (np.ceil(p / 2 - 1e-9) - 1))


def _wave_samples(share: float, sizes: tuple[int, ...] = (8, 16, 24, 40)) -> list[SizeSample]:
    """One attention kernel (32 blocks a row, 128 threads, 2 per SM) and a 100 us matmul per size, the kernel's time
    ``4 (0.5 + L(b))`` us: what the rule gives with ``share`` of the load paid in whole waves."""
    return [SizeSample(b, 1000.0 + 4.0 * (0.5 + _two_per_sm_load(b, share)), np.array([ATTN, GEMM], dtype=np.int8),
                       np.array([4.0 * (0.5 + _two_per_sm_load(b, share)), 100.0]), np.array([32 * b, 64]),
                       np.array([128, 256]), resident=np.array([2, 1])) for b in sizes]


@pytest.mark.parametrize("share", [0.0, 0.7, 1.0])
def test_whole_wave_share_is_fitted_on_three_or_more_traced_sizes(share: float) -> None:
    """Traced at 8, 16, 24, 40 rows with a kernel that pays ``share`` of its load in whole waves: the fit finds it on
    the grid (the matmul beside it plays no part), the curve's notes say it, and each traced size's own prediction
    then carries its attention exactly to the others (40 -> 17: the 17th row's third wave; the matmul adds its
    (1 + b/5000) rows)."""
    xs = _wave_samples(share)
    assert fit_attention_wave_share(DEFAULT_SCALING, xs, 200.0, 132) == (pytest.approx(share), 4)
    c = fit_cost_curve(xs, 64, None, H200)
    assert any(n.startswith(f"attention's share of its load paid in whole waves (co-resident blocks): {share:.2g}, "
                            "fitted on the trace's 4 sizes (prior 0.35; docs/costmodel.md, the whole-wave share from "
                            "the trace)") for n in c.notes)
    want = 4.0 * (_two_per_sm_load(40, share) - _two_per_sm_load(17, share)) + 100.0 * (23 / 5000) / (1 + 40 / 5000)
    assert c.own_change(40, 17) == pytest.approx(want, rel=1e-9)
    if share == 0.0:  # continuous: 24 -> 17 rows is 7 rows' blocks, 7 x 32 / 132 blocks per SM
        assert c.own_change(24, 17) == pytest.approx(4.0 * 7 * 32 / 132 + 100.0 * (7 / 5000) / (1 + 24 / 5000), rel=1e-9)


def test_whole_wave_share_keeps_the_prior_where_the_trace_cannot_say() -> None:
    """Two traced sizes (one pair: a rise, not how it splits), no SM count, or sizes all inside the first wave of
    co-resident blocks (5, 6, 8 rows: 1.2-1.9 blocks per SM, no wave begun, every share alike): no fit, no note; a
    kernel of one block per SM is no co-resident one: nothing to fit. Where the best share ties the prior's score, the
    prior."""
    m = DEFAULT_SCALING
    assert fit_attention_wave_share(m, _wave_samples(0.0, (8, 16)), 200.0, 132) is None
    assert fit_attention_wave_share(m, _wave_samples(0.0), 200.0, None) is None
    assert fit_attention_wave_share(m, _wave_samples(0.0, (5, 6, 8)), 200.0, 132) is None
    assert not any("whole waves" in n for n in fit_cost_curve(_wave_samples(0.0, (5, 6, 8)), 64, None, H200).notes)
    assert fit_attention_wave_share(m, _wave_samples(0.35), 200.0, 132) == (0.35, 4)
    one = [replace(x, resident=np.array([1, 1])) for x in _wave_samples(0.0)]
    assert fit_attention_wave_share(m, one, 200.0, 132) is None
    assert not any("whole waves" in n for n in fit_cost_curve(one, 64, None, H200).notes)


@pytest.mark.parametrize("resident", [1, None], ids=["one", "unknown"])
def test_attention_with_one_resident_block_or_unknown_steps_in_whole_waves(resident: int | None) -> None:
    """One block per SM, or occupancy unknown: the staircase t0 (f + ceil(L(b))) / (f + ceil(L(b0))), f = 0.1."""
    m = DEFAULT_SCALING
    c = fit_cost_curve([_attention_sample(resident)], 64, None, H200, m)
    f = m.attention_fixed_waves
    for b in (1, 4, 5, 8, 9, 16, 64):
        waves = max(1.0, np.ceil(32 * b / 132 - 1e-9))
        assert c.at(b) == pytest.approx(100.0 + 20.0 * (f + waves) / (f + 2) - 20.0, rel=1e-12), b
    assert c.at(5) - c.at(4) == pytest.approx(20.0 / (f + 2))  # the 5th row starts the second wave: a whole step


def test_long_attention_below_the_traced_rows_splits_its_kv_and_follows_the_rows() -> None:
    """bs 8, 4,096 positions: a 103 us attention kernel of 192 blocks (24 per row), 2 resident per SM (cuDNN's SDPA on
    the H200: 103.1 us at 8 rows, 16.7 us at one, grid [8, 24, 1] there). The waves give one row
    103 (0.5 + 1) / (0.5 + 192/132) us, past ``attention_split_us``: the kernel splits its KV below 8 rows, its time
    ``max(latency, A + (t0 - A) b / 8)``, ``A`` = 6 us, never above the waves; at and above 8 rows the waves alone."""
    m = DEFAULT_SCALING
    assert (m.attention_split_us, m.attention_split_fixed_us, m.attention_latency_us) == (30.0, 6.0, 9.0)
    x = SizeSample(8, 1000.0, np.array([ATTN], dtype=np.int8), np.array([103.0]), np.array([192]), np.array([128]),
                   resident=np.array([2]))
    c = fit_cost_curve([x], 64, None, H200, m)

    def waves(b: int) -> float:
        p = max(1.0, 24 * b / 132)
        return 103.0 * (0.5 + 0.65 * p + 0.35 * (min(p, 2) + 2 * (np.ceil(p / 2 - 1e-9) - 1))) / (0.5 + 192 / 132)

    assert waves(1) == pytest.approx(79.047, abs=1e-3) and waves(1) > m.attention_split_us
    for b in (1, 2, 4, 7):
        assert c.at(b) == pytest.approx(1000.0 - 103.0 + min(waves(b), 6.0 + 97.0 * b / 8), rel=1e-12), b
    assert c.at(1) == pytest.approx(1000.0 - 103.0 + 18.125)
    assert c.notes == ("attention launches whose one row the waves put past 30 us (a long KV per block): 1 of 1 at bs 8; "
                       "below that size taken as split-KV, their time following the rows above 6 us, at least 9 us "
                       "(docs/costmodel.md, Long context)",)
    for b in (8, 9, 16, 64):
        assert c.at(b) == pytest.approx(1000.0 - 103.0 + waves(b), rel=1e-12), b
    # a short kernel (20 us at 8 rows: 12.3 us by the waves at one row) never splits: the waves alone
    short = fit_cost_curve([_attention_sample(2)], 64, None, H200, m)
    assert short.at(1) == pytest.approx(80.0 + 20.0 * 1.5 / (0.5 + 256 / 132)) and short.notes == ()
    # the latency floor: a kernel whose rows would take less than one launch
    tiny = SizeSample(64, 1000.0, np.array([ATTN], dtype=np.int8), np.array([60.0]), np.array([64]),
                      np.array([128]), resident=np.array([2]))
    assert fit_cost_curve([tiny], 64, None, H200, m).at(1) == pytest.approx(1000.0 - 60.0 + 9.0)


def test_a_split_grid_at_one_row_widens_the_band_to_growth_by_rows() -> None:
    """bs 1: a 10 us attention kernel of 256 blocks (one row filling 132 SMs: heads x KV splits) in a 500 us step. The
    curve keeps the waves; the band's low end also takes the kernel as following its rows, 6 + (10 - 6) b us
    (``attention_split_rows``), and a note says so. A grid short of the SMs at one row: no such end, no note."""
    m = DEFAULT_SCALING

    def sample(blocks: int) -> SizeSample:
        return SizeSample(1, 500.0, np.array([ATTN], dtype=np.int8), np.array([10.0]), np.array([blocks]),
                          np.array([128]), resident=np.array([2]))

    rows = fit_cost_curve([sample(256)], 64, None, H200, replace(m, attention_split_rows=True))
    assert rows.at(64) == pytest.approx(500.0 - 10.0 + 6.0 + 4.0 * 64) and rows.at(1) == pytest.approx(500.0)
    c = fit_cost_curve([sample(256)], 64, None, H200, m)
    waves = fit_cost_curve([sample(256)], 64, None, H200, replace(m, attention_split_rows=False))
    assert c.at(64) == waves.at(64) > rows.at(64)  # the curve itself: the waves
    assert c.low(64) <= rows.at(64) < c.at(64)  # the band reaches down to growth by rows
    assert c.notes == ("attention at bs 1 runs a grid that fills the SMs (a split-KV grid: heads x KV splits per "
                       "row): how its work grows with the rows is not in the trace; the band's low end takes it as "
                       "following the rows (docs/costmodel.md, Long context)",)
    short = fit_cost_curve([sample(32)], 64, None, H200, m)
    assert short.notes == () and fit_cost_curve([sample(32)], 64, None, H200,
                                                replace(m, attention_split_rows=True)).at(64) == short.at(64)


@pytest.mark.parametrize("fmt", ["kineto", "nsys"])
def test_trace_samples_carry_each_kernels_resident_blocks(tmp_path, fmt: str) -> None:
    """From a loaded trace: the kernel's registers and shared memory (per name) and the device's SM limits."""
    from launchgap.costmodel import trace_samples
    from launchgap.loaders import load_trace
    from launchgap.trace import Kind
    from tests.builders import TraceSpec, write

    spec = TraceSpec(device_names={0: "NVIDIA H200"})
    spec.kineto_device_extra = {0: {"numSms": 132, "warpSize": 32, "maxThreadsPerMultiprocessor": 2048,
                                    "regsPerMultiprocessor": 65536, "sharedMemPerMultiprocessor": 233472,
                                    "sharedMemPerBlockOptin": 232448}}
    spec.nsys_gpu_extra = {0: {"smCount": 132, "threadsPerWarp": 32, "maxRegistersPerSm": 65536,
                               "maxShmemPerSm": 233472, "maxShmemPerBlockOptin": 232448}}
    spec.launch("sdpa_flash_fprop", 1_000, 4_000, 6_000, 20_000, corr=1, grid=(1, 32, 8), block=(128, 1, 1),
                registers=246, shared_memory=(86_336, 0))
    spec.launch("nvjet_gemm", 30_000, 4_000, 35_000, 5_000, corr=2, grid=(2, 66, 1), block=(384, 1, 1),
                registers=168, shared_memory=(0, 164_308))
    spec.launch("copy", 50_000, 4_000, 55_000, 5_000, corr=3, grid=(16, 1, 1), block=(128, 1, 1))
    trace = load_trace(write(spec, fmt, tmp_path))
    row_step = np.where(trace.kind == Kind.KERNEL, 0, -1)
    (x,) = trace_samples(trace, row_step, np.array([0]), np.array([0]), np.array([8]), np.array([100.0]))
    # 2 and 1 resident (nsys' TARGET_INFO_GPU gives no threads per SM: 2,048 assumed), the copy's resources unknown
    assert x.resident.tolist() == [2, 1, -1]
    assert x.threads.tolist() == [128, 384, 128] and x.blocks.tolist() == [256, 132, 16]


def test_attention_written_as_matmuls_is_the_matmuls_either_side_of_a_softmax() -> None:
    """Step 0, two layers of PyTorch's math SDPA: a weight matmul, Q·Kᵀ, the mask's add, the softmax, six kernels of
    checks and casts, ·V, the output projection. Steps 1-3, two layers each: a softmax whose next matmul is one kernel
    past the window; Q·Kᵀ one kernel further from the softmax than the window; no matmul after the softmax. Step 4:
    one pair alone (sampling's softmax between the LM head and a draft model's projection)."""
    w = ATTENTION_MATMUL_WINDOW
    assert w == 8
    M, E, S = (GEMM, False), (ELEM, False), (ELEM, True)  # matmul, other kernel, softmax
    layer = [M, M, E, S] + [E] * 6 + [M, M]
    steps = [layer * 2, ([M, S] + [E] * w + [M]) * 2, ([M] + [E] * w + [S, M]) * 2, [M, S, E] * 2, [M, E, S, M]]
    rows = [(i, kind) for i, st in enumerate(steps) for kind in st]
    step = np.array([r[0] for r in rows])
    cls = np.array([r[1][0] for r in rows], dtype=np.int8)
    softmax = np.array([r[1][1] for r in rows])
    assert np.flatnonzero(attention_matmuls(step, cls, softmax)).tolist() == [1, 10, 13, 22]
    # Q·Kᵀ w kernels before the softmax and ·V w after: within the window
    near = np.array(([GEMM] + [ELEM] * (w - 1) + [ELEM] + [ELEM] * (w - 1) + [GEMM]) * 2, dtype=np.int8)
    got = attention_matmuls(np.zeros(near.size, dtype=np.int64), near, np.arange(near.size) % (2 * w + 1) == w)
    assert np.flatnonzero(got).tolist() == [0, 2 * w, 2 * w + 1, 4 * w + 1]
    # across a step boundary, or outside any step: none
    three = np.array([GEMM, ELEM, GEMM] * 2, dtype=np.int8), np.array([False, True, False] * 2)
    assert not attention_matmuls(np.array([0, 0, 1, 1, 1, 2]), *three).any()
    assert not attention_matmuls(np.full(6, -1), *three).any()
    assert attention_matmuls(np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int8),
                             np.zeros(0, dtype=bool)).tolist() == []


def test_a_mixtures_gating_softmax_is_no_attention_softmax() -> None:
    names = ["void (anonymous namespace)::softmax_warp_forward<float, float, float, 9, false, false>(float*, int)",
             "void at::native::(anonymous namespace)::cunn_SoftMaxForward<4, float, float>(float*, float const*, int)",
             "triton_per_fused__softmax_add_0", "void vllm::moe::topkGatingSoftmax<4, 60, 4>(float const*, int)",
             "void vllm::moe::moeSoftmax<256, __nv_bfloat16>(__nv_bfloat16 const*, float*, int)",
             "void vllm::moe::moeTopK<256, int>(float const*, int)", "nvjet_sm90_tst_64x8_64x16_2x1_v_bz_TNT"]
    assert [is_attention_softmax(n) for n in names] == [True, True, True, False, False, False, False]
    assert classify_kernels(np.array(names[3:6], dtype=object)).tolist() == [ELEM] * 3


def test_attention_matmul_on_a_persistent_grid_follows_the_rows_of_context() -> None:
    """An attention matmul whose grid is the GPU's (nvjet: 132 blocks on 132 SMs at 64 rows) says nothing by its grid:
    its time follows the rows as a matmul over their context, t0 (1 + b) / (1 + b0): 49.5 us at 64 rows -> 1.523 us
    at 1, 6.854 us at 8. The same launch read as an attention kernel takes the persistent-grid rule instead."""
    def sample(marked: bool) -> SizeSample:
        return SizeSample(64, 100.0, np.array([ATTN], dtype=np.int8), np.array([49.5]), np.array([132]),
                          np.array([384]), attention_matmul=np.array([marked]))
    m = ScalingModel()
    c = fit_cost_curve([sample(True)], 64, None, H200, m)
    assert 49.5 * 2 / 65 == pytest.approx(1.5231, abs=1e-4)
    assert c.at(1) == pytest.approx(100.0 + 49.5 * 2 / 65 - 49.5)
    assert c.at(8) == pytest.approx(100.0 + 49.5 * 9 / 65 - 49.5)
    assert c.notes == ("attention written out as matmuls (a matmul either side of a softmax): 1 launch at bs 64 "
                       "scale as attention, with the rows, not as weight matmuls (docs/costmodel.md)",)
    assert fit_cost_curve([sample(False)], 64, None, H200, m).at(1) != pytest.approx(c.at(1))
    # a grid that follows the rows (cuBLAS's batched gemv, 1,536 blocks at 64 rows) keeps the attention rule
    grid = SizeSample(64, 100.0, np.array([ATTN], dtype=np.int8), np.array([49.5]), np.array([1536]),
                      np.array([128]), attention_matmul=np.array([True]))
    plain = SizeSample(64, 100.0, np.array([ATTN], dtype=np.int8), np.array([49.5]), np.array([1536]),
                       np.array([128]))
    assert fit_cost_curve([grid], 64, None, H200, m).at(8) == pytest.approx(fit_cost_curve([plain], 64, None, H200,
                                                                                           m).at(8))


def test_attention_growth_at_another_gpus_bandwidth() -> None:
    """The attention rules were fitted on the H200 (4.8 TB/s); an H100 reads at 3.35 TB/s, k = 1.4328. A 10 us
    kernel of 32 blocks per row traced at one row runs one latency-bound wave (10 us <= 1.2 x 9 us): 9 us of latency
    and 1 us of work, 0.6979 us on the H200: 9.6979 us there. The rules put 2 waves at 8 rows, (0.1 + 2) / (0.1 + 1) =
    1.9091x: 18.5142 us on the H200, of which 9.5142 past the latency is read at the H100's bandwidth: 9 + 13.6323 =
    22.6323 us in the curve, against 19.0909 by the rules alone (the H200's growth: the band's low end) and 10 x (1 +
    0.9091 k) = 23.0258 us with every attention launch's growth scaled (the band's high end)."""
    from launchgap.costmodel import REFERENCE_BANDWIDTH

    h100 = {"name": "NVIDIA H100 80GB HBM3", "sm_count": 132}
    x = SizeSample(1, 500.0, np.array([ATTN, ELEM], dtype=np.int8), np.array([10.0, 5.0]), np.array([32, 4]),
                   np.array([128, 128]))
    k = REFERENCE_BANDWIDTH / 3.35e12
    assert k == pytest.approx(1.43284, abs=1e-5)
    m = ScalingModel()
    c = fit_cost_curve([x], 64, None, h100, m)
    rules = fit_cost_curve([x], 64, None, H200, m)  # the same SMs at the H200's bandwidth: the rules' growth
    assert c.at(1) == rules.at(1) == 500.0
    assert c.at(8) - rules.at(8) == pytest.approx(9 + k * ((9 + 1 / k) * 2.1 / 1.1 - 9) - 10 * 2.1 / 1.1)  # +3.5414
    assert c.at(8) - rules.at(8) == pytest.approx(3.5414, abs=1e-4)
    scaled = fit_cost_curve([x], 64, None, h100, replace(m, attention_work_scale=k))
    assert scaled.at(8) - rules.at(8) == pytest.approx(10.0 * (1 + (2.1 / 1.1 - 1) * k) - 10.0 * 2.1 / 1.1)  # +3.9349
    assert c.low(8) <= rules.at(8) < c.at(8) < scaled.at(8) <= c.high(8)
    assert ("attention launches within 1.2 x 9 us (one latency-bound wave: 1 at bs 1) grow past their latency at "
            "this GPU's bandwidth: the rules were fitted on the H200 (4.8 TB/s), this GPU reads at 3.35 TB/s, that "
            "growth x 1.43 (docs/costmodel.md, Another GPU)") in c.notes
    assert ("attention's growth past one row was fitted on the H200 (4.8 TB/s); this GPU reads at 3.35 TB/s: the "
            "band's high end scales every attention launch's growth by 1.43, its low end keeps the H200's (trace a "
            "second size to measure it, docs/costmodel.md)") in c.notes
    # the H200 itself, and a GPU the trace does not identify: the rules alone, no note
    for props in (H200, {"sm_count": 132}):
        other = fit_cost_curve([x], 64, None, props, m)
        assert not any("fitted on the H200" in n for n in other.notes)
        assert np.array_equal(other.us, rules.us)
    # an AMD part: its launch latency was not measured; the band alone says the bandwidth
    mi300x = fit_cost_curve([x], 64, None, {"name": "AMD Instinct MI300X", "sm_count": 132}, m)
    assert np.array_equal(mi300x.us, rules.us)
    assert not any("latency-bound wave" in n for n in mi300x.notes)
    assert any("band's low end scales every attention launch's growth by 0.906 (" in n for n in mi300x.notes)
    # a launch traced past the latency (10.9 us > 10.8) already shows the H100's bandwidth: the rules' growth
    past = replace(x, kernel_us=np.array([10.9, 5.0]))
    assert np.array_equal(fit_cost_curve([past], 64, None, h100, m).us, fit_cost_curve([past], 64, None, H200, m).us)
    # from 8 rows the one-row anchor holds for the band's high end: 8 rows -> 1 row by the rules, then scaled
    x8 = replace(x, batch=8, blocks=np.array([256, 4]))
    c8 = fit_cost_curve([x8], 64, None, h100, replace(m, attention_work_scale=k))
    r1 = 1.1 / 2.1  # one row's time over 8 rows' by the rules
    assert c8.at(1) - fit_cost_curve([x8], 64, None, H200, m).at(1) == pytest.approx(
        10.0 / (1 + (1 / r1 - 1) * k) - 10.0 * r1)


def test_latency_bound_attention_below_the_latency_keeps_the_rules() -> None:
    """Predicted down from 64 rows, a 10 us attention launch of 4 blocks per row (256 blocks, two whole waves on 132
    SMs) falls to one wave: (0.1 + 1) / (0.1 + 2) of its time on the H200 (9.6979 us) is 5.0799 us, under the 9 us
    latency: the rules' time as it is, no bandwidth in it (0.50799 of its 10 us; 0.52381 by the rules on the traced
    time). A 7 us launch of one block per row runs one wave at every size: 7 us throughout, on either GPU."""
    from launchgap.costmodel import REFERENCE_BANDWIDTH, _kernel_factor

    k = REFERENCE_BANDWIDTH / 3.35e12
    m = replace(ScalingModel(), attention_bandwidth_ratio=k)
    x = SizeSample(64, 500.0, np.array([ATTN, ATTN], dtype=np.int8), np.array([10.0, 7.0]), np.array([256, 64]),
                   np.array([128, 128]))
    f = _kernel_factor(m, x, np.array([1.0, 8.0, 64.0]), 295.0, 132)
    assert f[0, 0] == pytest.approx((9 + 1 / k) * 1.1 / 2.1 / 10.0)  # below the latency: the rules on the H200 time
    assert f[0, 0] == pytest.approx(0.50799, abs=1e-5)
    f_h200 = _kernel_factor(ScalingModel(), x, np.array([1.0, 8.0, 64.0]), 295.0, 132)
    assert f_h200[0, 0] == pytest.approx(1.1 / 2.1)
    assert np.allclose(f[0, 1:], [1.1 / 2.1 * (9 + 1 / k) / 10.0, 1.0])  # 8 rows: 32 blocks, one wave as at one row
    assert np.allclose(f[1], 1.0) and np.allclose(f_h200[1], 1.0)


def test_one_wave_attention_matmuls_widen_the_band_low_end() -> None:
    """At one row attention written as matmuls runs one latency-bound wave per launch (a 3.0 us gemv of 64 blocks, a
    2.5 us one of 8, on 132 SMs): how their work grows with the rows is not in the trace, so the band's low end keeps
    the fastest launch's 2.5 us of each fixed. The 3.0 us launch's 64 blocks per row are 4 waves at 8 rows, (0.1 + 4)
    / (0.1 + 1) = 3.7273x: 11.182 us in the curve, 2.5 + 0.5 x 3.7273 = 4.364 us at the low end (-6.818 us); the 2.5
    us launch stays one wave, 2.5 us either way."""
    from dataclasses import replace

    from launchgap.costmodel import one_wave_attention_matmul_us

    def sample(blocks: list[int], marked: tuple[bool, ...] | None = (False, True, True)) -> SizeSample:
        return SizeSample(1, 200.0, np.array([GEMM, ATTN, ATTN], dtype=np.int8), np.array([100.0, 3.0, 2.5]),
                          np.array([24, *blocks]), np.array([128, 384, 384]),
                          attention_matmul=None if marked is None else np.array(marked))
    x = sample([64, 8])
    assert one_wave_attention_matmul_us(x, 132) == 2.5
    m = ScalingModel()
    c = fit_cost_curve([x], 64, None, H200, m)
    fixed = fit_cost_curve([x], 64, None, H200, replace(m, attention_matmul_fixed_us=2.5))
    assert (0.1 + 4) / (0.1 + 1) == pytest.approx(3.72727, abs=1e-5)
    assert c.at(8) - fixed.at(8) == pytest.approx(3.0 * 4.1 / 1.1 - (2.5 + 0.5 * 4.1 / 1.1))  # 6.818 us
    assert c.at(1) == fixed.at(1) == 200.0
    assert c.low(8) <= fixed.at(8) < c.at(8)
    assert c.notes[-1] == ("attention written out as matmuls at bs 1 runs one wave per launch (latency-bound): how its "
                           "work grows with the rows is not in the trace; the band's low end keeps 2.5 us of each "
                           "launch fixed (its fastest; trace a second size to measure it, docs/costmodel.md)")
    # the curve itself is the rule's: the same as without the fixed part
    assert c.at(8) == pytest.approx(fit_cost_curve([x], 64, None, H200, replace(m, attention_matmul_fixed_us=0.0)).at(8))
    # past one wave (a grid the SMs do not hold at once), a persistent grid, no marks, no SM count: no low end of this kind
    assert one_wave_attention_matmul_us(sample([64, 200]), 132) is None
    assert one_wave_attention_matmul_us(sample([64, 132]), 132) is None
    assert one_wave_attention_matmul_us(sample([64, 8], None), 132) is None
    assert one_wave_attention_matmul_us(sample([64, 8], (False, False, False)), 132) is None
    assert one_wave_attention_matmul_us(x, None) is None
    assert not any("one wave per launch" in n for n in fit_cost_curve([sample([64, 200])], 64, None, H200, m).notes)


@pytest.mark.parametrize("fmt", ["kineto", "nsys"])
def test_trace_samples_class_attention_written_as_matmuls_as_attention(tmp_path, fmt: str) -> None:
    """From a loaded trace, two layers: the matmuls either side of PyTorch's softmax kernel (cuBLAS's batched gemv,
    grid z 192; nvjet's persistent kernel, a grid of the SMs) are attention; the weight gemv before stays a matmul,
    the softmax element-wise."""
    from launchgap.costmodel import trace_samples
    from launchgap.loaders import load_trace
    from launchgap.trace import Kind
    from tests.builders import TraceSpec, write

    spec = TraceSpec(device_names={0: "NVIDIA H200"})
    for i, (name, grid) in enumerate([("internal::gemvx::kernel<int, int, float>", (8, 1, 1)),
                                      ("gemv2T_kernel_val<int, int, float>", (64, 1, 192)),
                                      ("(anonymous namespace)::softmax_warp_forward<float, float, float, 9>", (48, 1, 1)),
                                      ("nvjet_sm90_tst_64x8_64x16_2x1_v_bz_NNT", (2, 66, 1))] * 2):
        spec.launch(name, 1_000 + 20_000 * i, 4_000, 6_000 + 20_000 * i, 10_000, corr=i + 1, grid=grid,
                    block=(128, 1, 1))
    trace = load_trace(write(spec, fmt, tmp_path))
    row_step = np.where(trace.kind == Kind.KERNEL, 0, -1)
    (x,) = trace_samples(trace, row_step, np.array([0]), np.array([0]), np.array([8]), np.array([100.0]))
    assert x.kernel_class.tolist() == [GEMM, ATTN, ELEM, ATTN] * 2
    # the same matmuls marked by hand through size_samples
    xs = size_samples(np.zeros(2, dtype=np.int64), np.array([GEMM, GEMM], dtype=np.int8), np.array([14.0, 5.0]),
                      np.array([384, 132]), np.array([256, 384]), np.array([8]), np.array([100.0]),
                      kernel_attention_matmul=np.array([True, False]))
    assert xs[0].kernel_class.tolist() == [ATTN, GEMM]


def test_a_segment_between_two_sizes_is_monotone_its_way() -> None:
    """Within each segment between two observed sizes the curve runs one way: the running maximum of a rising segment,
    the running minimum of a falling one, a flat one as it is (the sizes in any order)."""
    from launchgap.costmodel import _monotone_segments
    v = np.array([1.0, 3.0, 2.0, 4.0, 10.0, 8.0, 9.0, 5.0, 4.0])
    seg = np.array([0, 0, 0, 0, 1, 1, 1, 2, 2])
    way = np.array([1, 1, 1, 1, -1, -1, -1, 0, 0])
    b = np.arange(1, 10)
    assert _monotone_segments(v, b, seg, way).tolist() == [1.0, 3.0, 3.0, 4.0, 10.0, 8.0, 8.0, 5.0, 4.0]
    order = np.array([3, 0, 8, 5, 1, 7, 2, 6, 4])  # the same sizes shuffled
    assert _monotone_segments(v[order], b[order], seg[order], way[order]).tolist() == [4.0, 1.0, 4.0, 8.0, 3.0, 5.0,
                                                                                       3.0, 8.0, 10.0]


@pytest.mark.parametrize("fmt", ["kineto", "nsys"])
def test_graph_kernel_excess_matches_short_kernels_of_one_launch_configuration(tmp_path, fmt: str) -> None:
    """Kernels replayed by graph launches (step 0) and the same kernels launched eagerly (step 1, and two eager
    launches in step 0): per launch configuration run at least 3 times each way and under 2 us eagerly, its mean
    time replayed less its mean launched eagerly, weighted by the fewer of its kernels: norm (grid 1) 1.10 - 1.00 us
    x 60, copy (grid 8) 1.55 - 1.50 us x 50; a 10 us gemm, a copy of another grid launched eagerly only and a kernel
    run twice each way are left out: (60 x 0.10 + 50 x 0.05) / 110 = 0.0772727 us."""
    from launchgap.costmodel import graph_kernel_excess, trace_samples
    from launchgap.loaders import load_trace
    from launchgap.trace import Kind
    from tests.builders import TraceSpec, write

    spec = TraceSpec(device_names={0: "NVIDIA H200"})
    t, corr = 1_000, 0

    def run(name: str, dur_ns: int, grid: tuple[int, int, int], n: int, graph: bool) -> None:
        nonlocal t, corr
        corr += 1
        if graph:  # one graph launch replaying n kernels of one configuration
            spec.graph_launch(t, 500, corr, 1, [(name, t + 1_000 + 20_000 * i, dur_ns) for i in range(n)],
                              grid=grid, block=(128, 1, 1))
            t += 20_000 * n
            return
        for _ in range(n):
            spec.launch(name, t, 500, t + 1_000, dur_ns, corr=corr, grid=grid, block=(128, 1, 1))
            corr += 1
            t += 20_000

    for norm, copy, gemm, graph in ((1_100, 1_550, 10_500, True), (1_000, 1_500, 10_000, False)):
        run("norm", norm, (1, 1, 1), 60, graph)
        run("copy", copy, (8, 1, 1), 50, graph)
        run("gemm", gemm, (132, 1, 1), 40, graph)
        run("once", 800, (1, 1, 1), 2, graph)
        if graph:  # eager launches inside the graph step count as eager
            run("norm", 1_000, (1, 1, 1), 2, False)
    run("copy", 1_200, (16, 1, 1), 5, False)  # eager only
    trace = load_trace(write(spec, fmt, tmp_path))
    k = trace.kind == Kind.KERNEL
    order = np.cumsum(k) - 1  # each kernel's position: 154 in step 0, 157 in step 1
    row_step = np.where(k, np.where(order < 154, 0, 1), -1)
    ex = graph_kernel_excess(trace, row_step, np.array([0, 1]))
    assert (ex.configs, ex.kernels) == (2, 110)
    assert ex.us == pytest.approx((60 * 0.10 + 50 * 0.05) / 110, abs=1e-9)
    # step 0 alone (two eager norms: under 3), or the replayed norms left out (50 matched copies): not measured
    assert graph_kernel_excess(trace, row_step, np.array([0])) is None
    assert graph_kernel_excess(trace, np.where(order >= 60, row_step, -1), np.array([0, 1])) is None
    # the eager step's kernels under 2 us lifted by it, and its cost with them: 60 + 50 + 2 + 5 short kernels
    xs = trace_samples(trace, row_step, np.array([0, 1]), np.array([0, 0]), np.array([8, 6]), np.array([500.0, 400.0]),
                       np.array([0.0, ex.us]))
    x6 = next(x for x in xs if x.batch == 6)
    assert x6.graph_us == pytest.approx(400.0 + 117 * ex.us)
    assert sorted(set(np.round(x6.kernel_us, 6).tolist())) == pytest.approx(
        sorted({1.0 + ex.us, 1.5 + ex.us, 10.0, 0.8 + ex.us, 1.2 + ex.us}))
    x8 = next(x for x in xs if x.batch == 8)
    assert x8.graph_us == 500.0 and x8.kernel_us.sum() == pytest.approx(
        60 * 1.1 + 50 * 1.55 + 40 * 10.5 + 2 * 0.8 + 2 * 1.0)
