"""Workload identity on hand-built traces: one model across batch sizes and modes, others apart."""
from __future__ import annotations

import pytest

from launchgap.errors import InputError
from launchgap.loaders import load_trace
from launchgap.report import analyze_trace
from launchgap.workload import group_by_workload, kernel_family, make_workload, mix_warning, pick_workload
from tests.unit.kineto_tiny import ann, kernel, launch, write

ELEMENTWISE = "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>, std::array<char*, 3ul> >(int)"
ELEMENTWISE_BS64 = "void at::native::elementwise_kernel<128, 4, at::native::gpu_kernel_impl_nocast<at::native::BinaryFunctor<float> > >(int)"
REDUCE = "void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float, at::native::MeanOps<float, float, float, float>, unsigned int, float, 4, 4> >(at::native::ReduceOp<float>)"
SPLITK = "void cublasLt::splitKreduce_kernel<32, 16, int, float, __nv_bfloat16, float>(cublasLt::cublasSplitKParams<float>)"


def step_kernels(layers: int, bs: int) -> list[str]:
    """Per layer an elementwise op, a GEMM whose tile follows the batch size (plus a split-K reduce at
    batch 1, as cuBLAS picks at small batch) and a reduction."""
    gemm = f"nvjet_sm90_tst_{64 if bs == 1 else 128}x{8 if bs == 1 else 64}_64x16_4x1_v_bz_TNT"
    out: list[str] = []
    for _ in range(layers):
        out += [ELEMENTWISE if bs == 1 else ELEMENTWISE_BS64, gemm] + ([SPLITK] if bs == 1 else []) + [REDUCE]
    return out


def trace_events(layers: int, bs: int, mode: str = "eager", steps: int = 2) -> list[dict]:
    ev: list[dict] = []
    corr = 1
    for s in range(steps):
        t0 = s * 1000.0
        names = step_kernels(layers, bs)
        ev.append(ann(f"decode_step[bs={bs}]", t0, 900))
        if mode == "graph":
            ev.append(launch(t0 + 1, 5, corr, name="cudaGraphLaunch"))
            ev += [kernel(t0 + 10 + 3 * i, 2, corr, name=n) for i, n in enumerate(names)]
            corr += 1
        else:
            for i, n in enumerate(names):
                ev += [launch(t0 + 1 + 5 * i, 2, corr), kernel(t0 + 4 + 5 * i, 2, corr, name=n)]
                corr += 1
    return ev


def workload(tmp_path, layers: int, bs: int, mode: str = "eager", name: str = "t.json", **extra):
    return analyze_trace(load_trace(write(tmp_path, trace_events(layers, bs, mode), name=name, **extra))).workload


def test_kernel_families_fold_batch_size_variants() -> None:
    assert kernel_family("nvjet_sm90_tst_64x8_64x16_4x1_v_bz_TNT") == "gemm"
    assert kernel_family(SPLITK) == "gemm"
    assert kernel_family("sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize64x128x64") == "gemm"
    assert kernel_family("cudnn_generated_fort_native_sdpa_sm90_flash_fprop_wgmma_f16_knob_7_64x128x64") == "attention"
    assert kernel_family("fmha_cutlassF_bf16_aligned_64x64_rf_sm80") == "attention"
    assert kernel_family(ELEMENTWISE) == kernel_family(ELEMENTWISE_BS64) == "elementwise"
    assert kernel_family("void at::native::(anonymous namespace)::indexSelectSmallIndex<c10::BFloat16, long>(int)") \
        == kernel_family("void at::native::vectorized_gather_kernel<16, long>(char*)") == "elementwise"
    assert kernel_family("ncclDevKernel_AllReduce_Sum_bf16_RING_LL") == "collective"
    assert kernel_family("void at::native::(anonymous namespace)::CatArrayBatchedCopy_vectorized<OpaqueType<2u>>(int)") \
        == kernel_family("void at::native::(anonymous namespace)::CatArrayBatchedCopy_alignedK<OpaqueType<2u>>(int)") \
        == "CatArrayBatchedCopy"
    assert kernel_family(REDUCE) == "reduce_kernel"
    assert kernel_family("triton_poi_fused__unsafe_view_mul_silu_9") == "triton"
    assert kernel_family("memcpy32_post") is None  # inside graph replays, not the model's
    assert kernel_family("memcpy128") is None and kernel_family("memset32") is None  # the driver's, by transfer size
    assert kernel_family("memcpy_kernel") == "memcpy_kernel"  # a kernel of the program's own keeps its name
    # a return type with parentheses in it (vLLM's fused norm): the kernel's own name, not "enable_if"
    assert kernel_family("std::enable_if<(((8)>(0)))&&vllm::_typeConvert<c10::BFloat16>::exists, void>::type "
                         "vllm::fused_add_rms_norm_kernel<c10::BFloat16, 8>(c10::BFloat16*, long)") \
        == "fused_add_rms_norm_kernel"


def test_exact_fields(tmp_path) -> None:
    w = workload(tmp_path, layers=4, bs=1)
    assert w.kernels_per_step == 16.0  # 4 layers x (elementwise, gemm, split-K reduce, reduce)
    assert w.structural_kernels_per_step == 8.0  # GEMM kernels left out
    assert w.count_bin == 24  # round(8 x log2 8)
    assert w.families == ("elementwise", "gemm", "reduce_kernel")
    assert w.device == "Test GPU" and w.rank is None
    assert w.id.startswith("wl-") and len(w.id) == 11
    assert w.label == "Test GPU · 16 kernels/step (8 besides GEMM/attention)"


def test_one_model_across_batch_sizes_and_modes(tmp_path) -> None:
    ids = {workload(tmp_path, 4, bs, mode, name=f"{bs}_{mode}.json").id
           for bs in (1, 64) for mode in ("eager", "graph")}
    assert len(ids) == 1


def test_other_layer_count_device_or_rank_is_another_workload(tmp_path) -> None:
    base = workload(tmp_path, 4, 1, name="a.json")
    assert workload(tmp_path, 8, 1, name="b.json").id != base.id  # 16 structural kernels: bin 32
    other_gpu = workload(tmp_path, 4, 1, name="c.json", deviceProperties=[{"id": 0, "name": "NVIDIA H100"}])
    assert other_gpu.id != base.id and other_gpu.device == "NVIDIA H100"
    r0 = workload(tmp_path, 4, 1, name="d.json", distributedInfo={"rank": 0, "world_size": 2})
    r1 = workload(tmp_path, 4, 1, name="e.json", distributedInfo={"rank": 1, "world_size": 2})
    assert len({base.id, r0.id, r1.id}) == 3 and r1.label.endswith("rank 1 of 2")


def test_a_kernel_of_a_few_steps_only_is_no_family(tmp_path) -> None:
    # three steps of one model; an occasional kernel in the first only, another in two of the three: the families
    # are those of at least half of the steps
    ev = trace_events(4, 1, steps=3)
    extra = [(0, "rare_kernel", 900), (0, "often_kernel", 901), (1, "often_kernel", 902)]
    for step, name, corr in extra:
        t0 = 1000.0 * step + 850
        ev += [launch(t0, 2, corr), kernel(t0 + 3, 2, corr, name=name)]
    w = analyze_trace(load_trace(write(tmp_path, ev))).workload
    assert w.families == ("elementwise", "gemm", "often_kernel", "reduce_kernel")
    # the same model without them: the one workload with the kernel of two steps, not with the rare one
    plain = workload(tmp_path, 4, 1, name="plain.json")
    assert plain.families == ("elementwise", "gemm", "reduce_kernel") and plain.id != w.id
    few = [e for e in ev if e.get("name") != "often_kernel" and e.get("args", {}).get("correlation") not in (901, 902)]
    assert analyze_trace(load_trace(write(tmp_path, few, name="few.json"))).workload.id == plain.id


def test_an_engines_request_state_kernels_are_no_family(tmp_path) -> None:
    # vLLM's V2 runner writes staged request state (_apply_write_kernel) when requests arrive or finish, and
    # prepares prompt inputs when a step holds prompt tokens: in every step here, still not the model's identity
    assert kernel_family("_apply_write_kernel") is None and kernel_family("_prepare_prefill_inputs_kernel") is None
    assert kernel_family("_prepare_pos_seq_lens_kernel") == "_prepare_pos_seq_lens_kernel"  # every step's, kept
    ev = trace_events(4, 1, steps=3)
    for step in range(3):
        t0 = 1000.0 * step + 850
        ev += [launch(t0, 2, 900 + step), kernel(t0 + 3, 2, 900 + step, name="_apply_write_kernel"),
               launch(t0 + 10, 2, 910 + step), kernel(t0 + 13, 2, 910 + step, name="_prepare_prefill_inputs_kernel")]
    w = analyze_trace(load_trace(write(tmp_path, ev))).workload
    plain = workload(tmp_path, 4, 1, name="plain.json")
    assert w.families == plain.families == ("elementwise", "gemm", "reduce_kernel")
    assert w.id == plain.id and w.structural_kernels_per_step == plain.structural_kernels_per_step == 8.0
    assert w.kernels_per_step == plain.kernels_per_step + 2 == 18.0  # counted among the step's kernels, not its identity


def test_a_step_without_kernels_counts_for_no_family(tmp_path) -> None:
    # four steps, the second launches nothing; a kernel of the last two steps runs in 2 of the 3 that ran kernels
    ev = [e for e in trace_events(4, 1, steps=4) if e["name"].startswith("decode_step") or not 1000 <= e["ts"] < 2000]
    for step, corr in ((2, 900), (3, 901)):
        t0 = 1000.0 * step + 850
        ev += [launch(t0, 2, corr), kernel(t0 + 3, 2, corr, name="aaa_kernel")]
    w = analyze_trace(load_trace(write(tmp_path, ev))).workload
    assert w.families == ("aaa_kernel", "elementwise", "gemm", "reduce_kernel")


def test_one_kernel_more_stays_in_the_bin() -> None:
    a = make_workload(device="G", kernels_per_step=737, structural_kernels_per_step=640, families=["x"])
    b = make_workload(device="G", kernels_per_step=721, structural_kernels_per_step=646, families=["x"])
    c = make_workload(device="G", kernels_per_step=1489, structural_kernels_per_step=1264, families=["x"])
    assert a.id == b.id != c.id and (a.count_bin, c.count_bin) == (75, 82)


def test_grouping_picking_and_the_mix_warning() -> None:
    a = make_workload(device="G", kernels_per_step=10, structural_kernels_per_step=8, families=["x"])
    b = make_workload(device="G", kernels_per_step=20, structural_kernels_per_step=16, families=["x"])
    items = [("t1", a), ("t2", b), ("t3", a), ("t4", None)]
    groups = group_by_workload(items, lambda it: it[1])
    assert [(g.id, [it[0] for it in g.items]) for g in groups] == [(a.id, ["t1", "t3"]), (b.id, ["t2"]),
                                                                  ("unknown", ["t4"])]
    assert pick_workload(groups, b.id).items == [("t2", b)]
    assert a.id[:7] != b.id[:7] and pick_workload(groups, b.id[:7]).id == b.id  # a unique prefix will do
    with pytest.raises(InputError, match="is not among the traces' workloads"):
        pick_workload(groups, "wl-nope")
    assert mix_warning(groups[:1]) is None
    assert "3 different workloads" in mix_warning(groups)


def test_workload_in_the_report_json(tmp_path) -> None:
    rep = analyze_trace(load_trace(write(tmp_path, trace_events(4, 1))))
    d = rep.to_dict()["workload"]
    assert d["families"] == ["elementwise", "gemm", "reduce_kernel"] and d["id"] == rep.workload.id
    from launchgap.workload import Workload

    assert Workload.from_dict(d) == rep.workload


def test_display_names_are_labels_with_the_id_only_where_two_share_one() -> None:
    from launchgap.workload import display_names, make_workload, shared_label
    a = make_workload(device="NVIDIA H200", kernels_per_step=536, structural_kernels_per_step=439,
                      families=["gemm"], model="~1.0B-class")
    b = make_workload(device="NVIDIA H200", kernels_per_step=536, structural_kernels_per_step=439,
                      families=["gemm", "reduce_kernel"], model="~1.0B-class")  # same label, other families
    c = make_workload(device="NVIDIA H100 80GB HBM3", kernels_per_step=900, structural_kernels_per_step=700,
                      families=["gemm"], rank=1, world_size=4)
    assert a.label == b.label and a.id != b.id
    names = display_names([a, b, c, None])
    assert names == {a.id: f"{a.label} ({a.id})", b.id: f"{b.label} ({b.id})", c.id: c.label,
                     "unknown": "unknown workload (no kernel signature)"}
    assert c.label == "H100 · TP4 · 900 kernels/step (700 besides GEMM/attention) · rank 1 of 4"
    assert shared_label(c) == "H100 · TP4 · 900 kernels/step (700 besides GEMM/attention)"
    assert shared_label(a) == a.label
    lone = make_workload(device="AMD Instinct MI300X", kernels_per_step=413, structural_kernels_per_step=293,
                         families=["gemm"], rank=0, world_size=1)
    assert lone.label == "MI300X · 413 kernels/step (293 besides GEMM/attention)"  # a world of one: no rank


def test_a_tensor_parallel_jobs_ranks_are_one_job() -> None:
    """tp_job: the ranks of one job share a job workload (rank None, an id of its own, the label without the rank);
    group_by_workload(ranks_together=True) groups them, without it each rank is its own workload."""
    from launchgap.workload import group_by_workload, tp_job

    ranks = [make_workload(device="NVIDIA H100", kernels_per_step=900, structural_kernels_per_step=700,
                           families=["gemm"], rank=r, world_size=4) for r in range(4)]
    jobs = {tp_job(w).id for w in ranks}
    assert len(jobs) == 1 and len({w.id for w in ranks}) == 4 and jobs.isdisjoint(w.id for w in ranks)
    job = tp_job(ranks[2])
    assert job.rank is None and job.world_size == 4
    assert job.label == "H100 · TP4 · 900 kernels/step (700 besides GEMM/attention) · all ranks"
    other = make_workload(device="NVIDIA H100", kernels_per_step=900, structural_kernels_per_step=700,
                          families=["gemm"], rank=0, world_size=8)  # another world size: another job
    assert tp_job(other).id not in jobs
    lone = make_workload(device="G", kernels_per_step=10, structural_kernels_per_step=8, families=["x"],
                         rank=0, world_size=1)
    assert tp_job(lone) is lone and tp_job(None) is None
    items = [*ranks, other]
    assert [len(g.items) for g in group_by_workload(items, lambda w: w)] == [1, 1, 1, 1, 1]
    together = group_by_workload(items, lambda w: w, ranks_together=True)
    assert [len(g.items) for g in together] == [4, 1] and together[0].workload == job
