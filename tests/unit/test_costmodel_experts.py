"""The batch-scaling model's routed experts (launchgap.costmodel): classes, k/E from config / two sizes / prior, exact numbers."""
from __future__ import annotations

import numpy as np
import pytest

from launchgap.costmodel import KERNEL_CLASSES, ScalingModel, SizeSample, classify_kernels, expert_share, \
    experts_hit, experts_of_kernels, fit_cost_curve, size_samples
from launchgap.dims import moe_routing

H200 = {"name": "NVIDIA H200", "sm_count": 132}
RIDGE = 989e12 / 4.8e12  # rows at which an H200 bf16 matmul turns compute-bound
GEMM, ATTN, KV, COLL, ELEM, EXPERT, ROW_GEMM = range(len(KERNEL_CLASSES))

#: The band's measured floor at bs 1 from a trace at bs 8 (launchgap.costmodel.band_fraction): 2% + 1.5% x ln 8.
MEASURED_AT_1 = 0.02 + 0.015 * float(np.log(8))

def test_expert_kernels_and_their_routing_are_told_apart() -> None:
    names = np.array([
        "fused_moe_kernel",  # vLLM / SGLang Triton
        "_ZN7cutlass13device_kernelIN2at4cuda6detail25enable_3x_kernel_for_sm9xINS_4gemm6kernel13GemmUniversalINS5_17"
        "GroupProblemShapeIN4cute5tupleIJiiiEEEEE",  # torch._grouped_mm (transformers' grouped_mm experts)
        "void tensorrt_llm::kernels::cutlass_kernels::MoeFCGemm<__nv_bfloat16>",
        "void deep_gemm::fp8_m_grouped_gemm_nt_masked_kernel<128>",
        "_matmul_ogs_NNT_bf16xbf16xmxfp4_16x128x256x1_swiglu",  # triton_kernels (vLLM gpt-oss, the MI300X trace)
        "void at::cuda::detail::prepare_grouped_gemm_data<cutlass::bfloat16_t, float>",  # arguments of the grouped GEMM
        "void vllm::moe::topkGatingSoftmax<4, 64, 4, 16, int>", "void vllm::moe::moe_align_block_size_kernel<int>",
        "void vllm::moe::moe_sum_kernel<c10::BFloat16, 2>",
        "triton_poi_fused__grouped_mm_ge_masked_fill_mul_silu_split_transpose_unsqueeze_10",  # Inductor's pointwise
        "nvjet_sm90_tst_64x8_64x16_1x1_h_bz_TNT"])  # the router's own matmul: a dense one
    assert classify_kernels(names).tolist() == [EXPERT] * 5 + [ELEM] * 5 + [GEMM]


def test_distinct_experts_hit() -> None:
    # 64 experts, top 8: one token hits 8; 8 tokens 64 * (1 - (7/8)^8) = 42.009; 64 tokens all but 0.012
    assert 64 * experts_hit(1, 8 / 64) == pytest.approx(8.0)
    assert 64 * experts_hit(8, 8 / 64) == pytest.approx(42.00903, abs=1e-5)
    assert 64 * experts_hit(64, 8 / 64) == pytest.approx(63.98756, abs=1e-5)


#: An expert launch's fixed part (launchgap.costmodel.ScalingModel.expert_fixed_us): 7 us of a 100 us launch.
FIXED = 7.0

#: The curve's note on the expert launches' fixed part (an assumed prior, said as such).
FIXED_NOTE = ("expert launches keep a fixed part of 7 us each (assumed: a grouped GEMM's set-up and scheduling, the "
              "prior of docs/costmodel.md; not in the trace), the rest scales")


def _moe_sample(b0: int, expert_us: float, level: float = 300.0) -> SizeSample:
    # a step of a persistent expert GEMM (132 blocks) and a 2 us dense matmul
    return SizeSample(b0, level, np.array([EXPERT, GEMM], dtype=np.int8), np.array([expert_us, 2.0]),
                      np.array([132, 4], dtype=np.int64), np.array([384, 384], dtype=np.int64))


def test_one_size_with_the_config_exact() -> None:
    m = ScalingModel()
    x = _moe_sample(8, 100.0)
    c = fit_cost_curve([x], 2000, None, H200, m, experts=(64, 8))

    def at(b: int) -> float:
        work = max(1 - (7 / 8) ** b, b * 0.125 / RIDGE) / (1 - (7 / 8) ** 8)  # experts hit, or compute-bound rows
        gemm = 2.0 * (1 + b / m.gemm_rows) / (1 + 8 / m.gemm_rows) * max(1.0, b / RIDGE)
        return 300.0 + (FIXED + (100.0 - FIXED) * work - 100.0) + (gemm - 2.0)

    for b in (1, 2, 8, 16, 64, 128, 1648, 2000):
        assert c.at(b) == pytest.approx(at(b), rel=1e-12), b
    # bs 1 hits 8 of the 42 experts bs 8 hits: 7 + 93 x 8/42.009 = 24.71 us of the 100
    assert c.at(1) - c.at(8) == pytest.approx(7 + 93 * 8 / 42.00903 - 100 + 2.0 * ((1 + 1 / 5000) / (1 + 8 / 5000) - 1),
                                               abs=1e-3)
    assert c.at(1) - c.at(8) == pytest.approx(24.7105 - 100 - 0.0028, abs=1e-4)
    assert c.notes == ("experts scale with the distinct experts the batch hits, 1 - (1 - k/E)^b: model config: top 8 "
                       "of 64 experts", FIXED_NOTE)
    # the band leaves the config's k/E alone: at bs 1 it is the other constants' spread only
    lo, hi = (fit_cost_curve([x], 2000, None, H200, m.scaled(f), experts=(64, 8)) for f in m.band_factors)
    assert c.low(1) == pytest.approx(min(c.at(1), lo.at(1), hi.at(1), c.at(1) * (1 - MEASURED_AT_1)))


def test_one_size_alone_assumes_the_prior_and_says_so() -> None:
    m = ScalingModel()
    x = _moe_sample(8, 100.0)
    c = fit_cost_curve([x], 64, None, H200, m)
    assert c.at(1) == pytest.approx(fit_cost_curve([x], 64, None, H200, m, experts=(8, 1)).at(1))  # the prior: 1/8
    assert "assumed: k/E 0.125" in c.notes[0]
    # the band: the prior halved and doubled with the other constants (k/E 1/4: fewer new experts per row, higher)
    wide = fit_cost_curve([x], 64, None, H200, m.scaled(0.5))
    assert wide.at(1) == pytest.approx(fit_cost_curve([x], 64, None, H200, m.scaled(0.5), experts=(4, 1)).at(1))
    assert c.low(1) <= min(c.at(1), wide.at(1)) and c.high(1) >= max(c.at(1), wide.at(1))
    assert c.high(1) > c.at(1) > c.low(1)


def test_two_sizes_read_the_share_from_the_growth() -> None:
    # the expert GEMM at bs 8 and 64 of a top-8-of-64 model (above its 7 us fixed part: 93 x 64.0 / 42.0 experts)
    a = _moe_sample(8, 100.0)
    b = _moe_sample(64, FIXED + 93.0 * experts_hit(64, 0.125) / experts_hit(8, 0.125), 400.0)
    s, how = expert_share([a, b])
    assert s == pytest.approx(0.125, rel=3e-3) and how.startswith("k/E 0.125 from the expert kernels' growth from bs 8 to 64")
    # the config wins over the growth
    assert expert_share([a, b], (128, 8)) == (0.0625, "model config: top 8 of 128 experts")
    # flat within the noise (every expert hit at both sizes, 4% more): no reading, the prior; as fast as the rows (each
    # token its own weights): the least share
    assert expert_share([a, _moe_sample(64, FIXED + 93.0 * 1.04)])[0] == ScalingModel().expert_share
    assert expert_share([a, _moe_sample(64, FIXED + 93.0 * 1.06)])[0] == pytest.approx(0.301, abs=0.002)  # (1-(1-s)^64)/(1-(1-s)^8) = 1.06
    assert expert_share([a, _moe_sample(64, FIXED + 93.0 * 8)])[0] == pytest.approx(1e-4)
    # read above the fixed part (7 us), not the 2 us of the rule before: 2 + 98 x 1.06 is 98.88 above it, 1.063 x 93
    assert expert_share([a, _moe_sample(64, 2.0 + 98.0 * 1.06)])[0] == pytest.approx(0.297, abs=0.001)
    # no expert kernel: no share, no note
    dense = SizeSample(8, 50.0, np.array([GEMM], dtype=np.int8), np.array([10.0]), np.array([4]), np.array([384]))
    assert expert_share([dense]) == (None, "")
    assert fit_cost_curve([dense], 16, None, H200).notes == ()


def test_moe_routing_from_a_config() -> None:
    assert moe_routing({"num_experts": 64, "num_experts_per_tok": 8, "hidden_size": 2048}) == (64, 8)
    assert moe_routing({"text_config": {"num_local_experts": 8, "num_experts_per_tok": 2}}) == (8, 2)  # Mixtral-like
    assert moe_routing({"n_routed_experts": 256, "num_experts_per_tok": 8}) == (256, 8)  # DeepSeek-V3-like
    assert moe_routing({"moe_num_experts": 64, "moe_k": 6, "moe_num_shared_experts": 2}) == (64, 6)  # ERNIE-4.5
    assert moe_routing({"ffn_config": {"moe_num_experts": 16, "moe_top_k": 4}}) == (16, 4)  # DBRX
    assert moe_routing({"num_experts": 64, "moe_topk": 8}) == (64, 8)  # Hunyuan-A13B-like
    assert moe_routing({"intermediate_size": 8192}) is None  # dense
    assert moe_routing({"num_experts": 8, "num_experts_per_tok": 16}) is None  # k > E: not a routing
    assert moe_routing({"num_experts": True, "num_experts_per_tok": 1}) is None
    assert moe_routing([]) is None


def test_the_curve_keeps_its_notes_through_a_summary() -> None:
    from launchgap.costmodel import curve_from_dict, curve_to_dict
    c = fit_cost_curve([_moe_sample(8, 100.0)], 16, None, H200)
    back, _ = curve_from_dict(curve_to_dict(c))
    assert back.notes == c.notes and back.at(1) == c.at(1)


def test_a_traces_expert_kernels_scale_with_the_config_given() -> None:
    # OLMoE (64 experts, top 8) through transformers' grouped_mm experts at bs 8, one FULL graph: the config's k/E, or
    # without it the experts the trace says with an assumed k, which the curve says (the same 8/64 here: one curve)
    from pathlib import Path

    from launchgap.loaders import load_trace
    from launchgap.report import AnalysisOptions, analyze_trace
    path = Path(__file__).resolve().parents[2] / "traces/h200-hf-2026-12-02/traces/olmoe-1b-7b-like_bs8_graph.json.gz"
    trace = load_trace(path)
    given = analyze_trace(trace, AnalysisOptions(moe_routing=(64, 8))).cost_curve
    alone = analyze_trace(trace, AnalysisOptions()).cost_curve
    # torch._grouped_mm's set-up kernel runs one thread per expert: 64 experts, k the usual 8 for as many
    assert given.notes[-2].endswith("model config: top 8 of 64 experts") and "assumed: k/E 8/64 (64 experts from the " \
        "trace's kernels" in alone.notes[-2]
    assert given.notes[-1] == alone.notes[-1] == FIXED_NOTE
    assert given.at(1) == pytest.approx(alone.at(1)) and given.at(1) < 0.6 * given.at(8)  # 8 experts hit of 42
    half = analyze_trace(trace, AnalysisOptions(moe_routing=(64, 4))).cost_curve  # top 4: 1 row hits 4 of 26.3
    assert half.at(1) < given.at(1)


def test_plan_model_config_gives_the_analysis_its_routing(tmp_path) -> None:
    import json

    from launchgap.cli import build_parser
    from launchgap.commands._shared import analysis_options
    moe, dense = tmp_path / "moe.json", tmp_path / "dense.json"
    moe.write_text(json.dumps({"num_hidden_layers": 16, "hidden_size": 2048, "num_attention_heads": 16,
                               "intermediate_size": 1024, "vocab_size": 50304, "num_experts": 64,
                               "num_experts_per_tok": 8}))
    dense.write_text(json.dumps({"num_hidden_layers": 16, "hidden_size": 2048, "num_attention_heads": 32,
                                 "intermediate_size": 8192, "vocab_size": 128256}))
    parse = build_parser("plan").parse_args
    assert analysis_options(parse(["plan", "t.json", "--model-config", str(moe)])).moe_routing == (64, 8)
    assert analysis_options(parse(["plan", "t.json", "--model-config", str(dense)])).moe_routing is None
    assert analysis_options(parse(["plan", "t.json"])).moe_routing is None
    # a timings file's models section (the harness's layout) names them too
    timings = tmp_path / "timings.json"
    timings.write_text(json.dumps({"models": {"moe": {"experts": 60, "experts_per_token": 4}, "dense": {"mlp": 1}}}))
    assert analysis_options(parse(["plan", "t.json", "--model-config", str(timings), "--model", "moe"])).moe_routing \
        == (60, 4)
    assert analysis_options(parse(["plan", "t.json", "--model-config", str(timings), "--model", "dense"])).moe_routing \
        is None


def test_the_experts_a_trace_says() -> None:
    # torch._grouped_mm's set-up kernel: one thread per expert (<<<1, group_count>>>); the fused top-k gating of
    # vLLM / TensorRT-LLM and SGLang: the experts in its template; anything else says nothing
    names = np.array(["void at::cuda::detail::prepare_grouped_gemm_data<cutlass::bfloat16_t, float>(float*)",
                      "void vllm::moe::topkGatingSoftmax<4, 64, 4, 16, int>(float const*, bool const*)",
                      "void topkGatingSoftmax<float, 8, 256, 4, 16>(float const*)", "fused_moe_kernel",
                      "void at::cuda::detail::prepare_grouped_gemm_data<cutlass::bfloat16_t, float>(float*)"], dtype=object)
    assert experts_of_kernels(names, np.array([60, 128, 128, 128, -1])).tolist() == [60, 64, 256, -1, -1]
    # the same from the distinct names and each kernel's index into them (as trace_samples passes them)
    distinct, index = np.unique(names, return_inverse=True)
    assert experts_of_kernels(distinct, np.array([60, 128, 128, 128, -1]), index).tolist() == [60, 64, 256, -1, -1]
    # per size, the median of what the step's kernels say: step 0 (bs 8) 60 twice, step 1 (bs 64) nothing
    xs = size_samples(np.array([0, 0, 0, 1]), np.array([ELEM, ELEM, EXPERT, EXPERT], dtype=np.int8),
                      np.array([1.0, 1.0, 50.0, 90.0]), np.full(4, -1), np.full(4, -1), np.array([8, 64]),
                      np.array([100.0, 200.0]), np.array([60, 60, -1, -1]))
    assert [x.experts for x in xs] == [60, None]


def test_one_size_with_the_experts_the_trace_says() -> None:
    m = ScalingModel()
    few = SizeSample(**{**_moe_sample(8, 100.0).__dict__, "experts": 8})  # 8 experts: k 2 assumed, k/E 1/4
    many = SizeSample(**{**_moe_sample(8, 100.0).__dict__, "experts": 60})  # 60: k 8, 8/60
    assert expert_share([few]) == (0.25, "assumed: k/E 2/8 (8 experts from the trace's kernels, 2 per token the usual "
                                         "for as many; uniform routing; no model config and one observed size to read "
                                         "k from)")
    assert expert_share([many])[0] == 8 / 60
    c = fit_cost_curve([few], 64, None, H200, m)
    assert c.at(1) == pytest.approx(fit_cost_curve([few], 64, None, H200, m, experts=(8, 2)).at(1))
    # assumed: the band halves and doubles the share (1/8 and 1/2)
    lo = fit_cost_curve([few], 64, None, H200, m.scaled(2.0), experts=(8, 1))
    hi = fit_cost_curve([few], 64, None, H200, m.scaled(0.5), experts=(2, 1))
    assert c.low(1) == pytest.approx(min(c.at(1), lo.at(1), hi.at(1), c.at(1) * (1 - MEASURED_AT_1)))
    assert c.high(1) == pytest.approx(max(c.at(1), lo.at(1), hi.at(1), c.at(1) * (1 + MEASURED_AT_1)))
    # the config and two sizes win over what the trace says
    assert expert_share([few], (64, 8))[0] == 0.125


def test_an_expert_launch_keeps_its_fixed_part() -> None:
    # top 2 of 8 experts (k/E 1/4), bs 1: a 27 us launch (7 us fixed + 20 us for its 2 experts) and a 5 us one, below
    # the fixed part, which stays flat; at bs 8 the first reads 8 x (1 - (3/4)^8) = 7.2 experts: 7 + 20 x 3.6 = 79.0 us
    m = ScalingModel()
    x = SizeSample(1, 300.0, np.array([EXPERT, EXPERT, GEMM], dtype=np.int8), np.array([27.0, 5.0, 2.0]),
                   np.array([132, 132, 4], dtype=np.int64), np.array([384, 384, 384], dtype=np.int64))
    c = fit_cost_curve([x], 8, None, H200, m, experts=(8, 2))
    gemm = 2.0 * ((1 + 8 / 5000) / (1 + 1 / 5000) - 1)
    assert c.at(8) - c.at(1) == pytest.approx(20.0 * (1 - 0.75 ** 8) / 0.25 - 20.0 + gemm, rel=1e-12)
    assert c.at(8) - c.at(1) == pytest.approx(51.9910 + 0.0028, abs=1e-4)
    # a 2 us fixed part (the step's fastest kernel, the rule before): the 27 us launch 2 + 25 x 3.6 = 92.0 us at bs 8
    # and the 5 us one 2 + 3 x 3.6 = 12.8 us, 8 x (3.6 - 1) = 20.8 us more in all
    g = (1 - 0.75 ** 8) / 0.25
    low = fit_cost_curve([x], 8, None, H200, ScalingModel(expert_fixed_us=2.0), experts=(8, 2))
    assert low.at(8) - c.at(8) == pytest.approx(8 * (g - 1), rel=1e-12) and low.at(8) - c.at(8) == pytest.approx(20.796,
                                                                                                             abs=1e-3)
    # the band: the fixed part halved and doubled with the other constants (14 us keeps the 5 us launch flat too)
    assert c.low(8) <= min(low.at(8), c.at(8)) and c.high(8) >= c.at(8)
