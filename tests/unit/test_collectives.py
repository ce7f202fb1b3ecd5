"""Collective wait vs work on hand-built two-rank traces (times in us; arithmetic in comments).

One decode step ``decode_step[bs=2]`` over [0, 100] on each rank; two all-reduces of a
[2, 1024] bf16 tensor (2048 elements, 4096 bytes) recorded by ``record_param_comms``.

Rank 0 (slow host, device 0): its collectives start last, so they never wait::

    gemm [5, 15]  launched at 1
    AR   [50, 56] launched at 41 (inside record_param_comms [40, 48])
    gemm [65, 75] launched at 60
    AR   [88, 93] launched at 81 (inside record_param_comms [80, 86])

Rank 1 (fast host, device 1): its collectives start early and spin until rank 0 arrives::

    gemm [5, 15]  launched at 1
    AR   [16, 56] launched at 10: rank 0 starts at 50 -> wait 34, work 6
    gemm [56, 66] launched at 12
    AR   [66, 93] launched at 14: rank 0 starts at 88 -> wait 22, work 5
    AR   [120, 170] no launch call, after the step (unmatched on purpose)

Analyses use ``long_kernel_us=1000`` so every kernel is charged the 0.39 us node cost:
predicted graph step = busy + 4 x 0.39 + 5.
"""
from __future__ import annotations

import json

import numpy as np
import pytest

from launchgap.collectives import (
    CollectiveModel,
    WaitSource,
    align_ranks,
    align_steps,
    align_waits,
    bus_factor,
    collective_rows,
    element_bytes,
    estimate_wait_single,
    is_collective_name,
    message_elems,
)
from launchgap.errors import InputError
from launchgap.loaders import load_trace
from launchgap.predict import PredictionModel
from launchgap.ranks import (
    analyze_job,
    analyze_with_collectives,
    group_by_job,
    group_traces,
    job_key,
    rank_from_name,
)
from launchgap.render import render_job
from launchgap.report import AnalysisOptions, analyze_trace
from launchgap.steps import Steps, assign_rows_to_steps, find_steps
from tests.unit.kineto_tiny import ann, cpu_op, kernel, launch, write

AR = "ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>)"
DIMS = [[[2, 1024]], [], []]
# Constants pinned here so the expected numbers do not move with the fitted defaults.
OPTS = AnalysisOptions(model=PredictionModel(node_us=0.39, long_kernel_us=1000.0, graph_launch_us=5.0))
# Prior 2 us + 4096 B / 100 GB/s = 2.041 us; the fastest instance is believed up to 4 x that.
MODEL = CollectiveModel(latency_us=2.0, bus_gbps=100.0, work_percentile=5.0, trust_factor=4.0)


def rank0_events(shift: float = 0.0) -> list[dict]:
    e = [
        ann("decode_step[bs=2]", 0, 100),
        launch(1, 2, 1), kernel(5, 10, 1, name="gemm"),
        cpu_op("record_param_comms", 40, 8, DIMS), launch(41, 3, 2), kernel(50, 6, 2, name=AR),
        launch(60, 2, 3), kernel(65, 10, 3, name="gemm"),
        cpu_op("record_param_comms", 80, 6, DIMS), launch(81, 3, 4), kernel(88, 5, 4, name=AR),
    ]
    return _shift(e, shift)


def rank1_events(shift: float = 0.0, first_ar: tuple[float, float] = (16, 40)) -> list[dict]:
    e = [
        ann("decode_step[bs=2]", 0, 100),
        launch(1, 2, 1), kernel(5, 10, 1, name="gemm", device=1),
        cpu_op("record_param_comms", 9, 3, DIMS), launch(10, 1, 2), kernel(*first_ar, 2, name=AR, device=1),
        launch(12, 1, 3), kernel(56, 10, 3, name="gemm", device=1),
        cpu_op("record_param_comms", 13, 3, DIMS), launch(14, 1, 4), kernel(66, 27, 4, name=AR, device=1),
        kernel(120, 50, None, name=AR, device=1),
    ]
    return _shift(e, shift)


def _shift(events: list[dict], shift: float) -> list[dict]:
    return [dict(ev, ts=ev["ts"] + shift) for ev in events]


def _write_pair(tmp_path, shift1: float = 0.0, **kw):
    p0 = write(tmp_path, rank0_events(), name="job_rank0.json",
               distributedInfo={"rank": 0, "world_size": 2, "backend": "nccl"})
    p1 = write(tmp_path, rank1_events(shift1, **kw), name="job_rank1.json",
               distributedInfo={"rank": 1, "world_size": 2, "backend": "nccl"})
    return p0, p1


@pytest.fixture()
def pair(tmp_path):
    p0, p1 = _write_pair(tmp_path)
    return load_trace(p0), load_trace(p1)


# ---- recognising collectives ----------------------------------------------------------------

@pytest.mark.parametrize("name", [
    AR,
    "ncclKernel_AllReduce_RING_LL_Sum_half(ncclWorkElem)",
    "ncclDevKernel_AllGather_RING_LL(ncclDevKernelArgsStorage<4096ul>)",
    "ncclDevKernel_SendRecv(ncclDevKernelArgsStorage<4096ul>)",
    "void vllm::cross_device_reduce_1stage<__nv_bfloat16, 2>(vllm::RankData*, vllm::RankSignals, int)",
    "void vllm::cross_device_reduce_2stage<half, 8>(vllm::RankData*, vllm::RankSignals, int)",
    "void c10d::symmetric_memory::two_shot_all_reduce_kernel<float, 16, 4>(float**, unsigned long)",
    "one_shot_all_reduce_kernel",
    "multimem_all_reduce_kernel",
    "void tensorrt_llm::kernels::oneShotAllReduceKernel<__nv_bfloat16, 2>(AllReduceParams)",
    "custom_allreduce_kernel",
    "reduce_scatter_kernel",
    "userbuffers_fp16_sum_inplace_gpu_rw",
])
def test_collective_names(name: str) -> None:
    assert is_collective_name(name)


@pytest.mark.parametrize("name", [
    "void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float>>(at::native::ReduceOp<float>)",
    "void cub::DeviceReduceSingleTileKernel<float>",
    "void splitKreduce_kernel<32, 16, int, float>",
    "ampere_bf16_s16816gemm_bf16_128x64_ldg8_f2f_tn",
    "fused_add_rms_norm_kernel",
    "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>>",
    "Memcpy DtoD (Device -> Device)",
])
def test_not_collective_names(name: str) -> None:
    assert not is_collective_name(name)


def test_element_bytes_and_bus_factor() -> None:
    assert element_bytes(AR) == 2
    assert element_bytes("ncclKernel_AllReduce_RING_LL_Sum_float(ncclWorkElem)") == 4
    assert element_bytes("ncclDevKernel_AllReduce_Sum_f32_RING_LL") == 4
    assert element_bytes("cross_device_reduce_1stage<half, 2>") == 2
    assert element_bytes("ncclDevKernel_AllReduce_Sum_f8e4m3_RING_LL") == 1
    assert element_bytes("ncclDevKernel_AllReduce_Sum_f64_RING_LL") == 8
    assert element_bytes("multimem_all_reduce_kernel") is None
    assert bus_factor(AR, 2) == 1.0  # 2 (n-1) / n
    assert bus_factor(AR, 8) == 1.75
    assert bus_factor("ncclDevKernel_AllGather_RING_LL", 4) == 0.75  # (n-1) / n
    assert bus_factor("ncclDevKernel_SendRecv", 4) == 1.0


def test_collective_rows_and_message_size(pair) -> None:
    t0, t1 = pair
    rows0 = collective_rows(t0)
    assert [str(n) for n in t0.names[t0.name_id[rows0]]] == [AR, AR]
    assert message_elems(t0, rows0).tolist() == [2048, 2048]  # 2 x 1024 from record_param_comms
    rows1 = collective_rows(t1)
    assert message_elems(t1, rows1).tolist() == [2048, 2048, -1]  # the last has no launch call


def test_prior_formula() -> None:
    assert MODEL.prior_work_ns(np.array([4096, -1, 0])).tolist() == [2041, 2000, 2000]
    assert CollectiveModel().prior_work_ns(np.array([4096, 262144])).tolist() == [8041, 10621]


# ---- one rank alone -------------------------------------------------------------------------

def test_single_rank_fastest_instances(pair) -> None:
    t0, _ = pair
    cw = estimate_wait_single(t0, MODEL)
    # durations 6, 5: the 5th percentile (lower) of two is the fastest, 5 us, within 4 x 2.041 us
    assert cw.work_ns.tolist() == [5000, 5000]
    assert cw.wait_ns.tolist() == [1000, 0]
    assert cw.source.tolist() == [WaitSource.FASTEST] * 2
    assert cw.estimate == "fastest-instances"
    (kind,) = cw.kinds
    assert (kind.device, kind.message_elems, kind.bus_bytes, kind.count) == (0, 2048, 4096, 2)
    assert (kind.fastest_us, kind.prior_us, kind.work_us) == (5.0, 2.041, 5.0)
    rep = analyze_trace(t0, OPTS, wait_ns=cw.wait_per_row())
    st = rep.steps[0]
    # window [5, 93]; busy 10 + 5 (AR from 51) + 10 + 5 = 30; gap [15, 51]: host 26 (to the launch at 41),
    # launch 9 (to the AR's start 50), peer 1; gaps [56, 65] and [75, 88]: host 4 + 6, launch 5 + 7
    assert (st.dur_us, st.gpu_busy_us, st.gpu_idle_us) == (88.0, 30.0, 58.0)
    assert st.idle_us_by_cause == {"host": 36.0, "launch": 21.0, "sync": 0.0, "gpu": 0.0, "unattributed": 0.0,
                                   "peer": 1.0}
    assert st.predicted_graph_us == pytest.approx(36.56)  # 30 + 4 x 0.39 + 5


def test_single_rank_cost_model_when_every_instance_waited(pair) -> None:
    _, t1 = pair
    cw = estimate_wait_single(t1, MODEL)
    # sized group: durations 40, 27 -> fastest 27 us > 4 x 2.041 us: every instance waited, work = prior
    # unsized (no launch) group: 50 us > 4 x 2 us -> work = 2 us
    assert cw.work_ns.tolist() == [2041, 2041, 2000]
    assert cw.wait_ns.tolist() == [37959, 24959, 48000]
    assert cw.source.tolist() == [WaitSource.MODEL] * 3
    assert cw.estimate == "cost-model"
    assert "cost-model prior" in cw.warning()
    rep = analyze_trace(t1, OPTS, wait_ns=cw.wait_per_row())
    st = rep.steps[0]
    assert st.gpu_busy_us == 24.082  # 10 + 2.041 + 10 + 2.041
    assert st.idle_us_by_cause["peer"] == 62.918  # 37.959 + 24.959
    assert st.predicted_graph_us == pytest.approx(30.642)  # 24.082 + 1.56 + 5


def test_single_rank_percentile_picks_an_observed_low_duration(tmp_path) -> None:
    # 21 instances lasting 1..21 us: the lower 5th percentile is index floor(0.05 x 20) = 1 -> 2 us
    ev = [ann("decode_step", 0, 500)]
    for i in range(21):
        ev += [launch(1 + i, 0.5, 100 + i), kernel(10 + 20 * i, 1 + i, 100 + i, name=AR)]
    t = load_trace(write(tmp_path, ev))
    cw = estimate_wait_single(t, CollectiveModel(latency_us=10.0))
    assert cw.work_ns[:3].tolist() == [1000, 2000, 2000]  # never more than the instance itself
    assert cw.wait_ns[:3].tolist() == [0, 0, 1000]
    assert cw.wait_ns[-1] == 19000


def test_no_collectives(tmp_path) -> None:
    t = load_trace(write(tmp_path, [ann("decode_step", 0, 50), launch(1, 2, 1), kernel(5, 10, 1, name="gemm")]))
    cw = estimate_wait_single(t)
    assert len(cw) == 0 and cw.estimate == "none" and cw.warning() is None
    assert not cw.wait_per_row().any()
    rep = analyze_with_collectives(t, OPTS)
    assert rep.warnings == [] and rep.steps[0].idle_us_by_cause["peer"] == 0.0


# ---- ranks together -------------------------------------------------------------------------

def _aligned(t0, t1):
    st = [find_steps(t0), find_steps(t1)]
    rs = [assign_rows_to_steps(t0, st[0]), assign_rows_to_steps(t1, st[1])]
    al = align_ranks([t0, t1], st, rs)
    singles = [estimate_wait_single(t0, MODEL), estimate_wait_single(t1, MODEL)]
    return al, align_waits([t0, t1], al, singles)


def test_aligned_split(pair) -> None:
    t0, t1 = pair
    al, (c0, c1) = _aligned(t0, t1)
    assert len(al) == 2 and al.trusted and al.step_match == "name"
    assert al.clock_offset_ns.tolist() == [0, 0]  # both ranks' ARs end at 56 and 93
    assert al.end_residual_ns_median == 0.0
    assert al.wait_ns.tolist() == [[0, 34000], [0, 22000]]  # rank 0 starts last: 50 vs 16, 88 vs 66
    assert al.work_ns.tolist() == [[6000, 6000], [5000, 5000]]
    assert c0.wait_ns.tolist() == [0, 0] and c0.estimate == "aligned"
    # the unmatched third AR of rank 1 takes the median aligned work of its name: 5.5 us of 50
    assert c1.work_ns.tolist() == [6000, 5000, 5500]
    assert c1.wait_ns.tolist() == [34000, 22000, 44500]
    assert c1.source.tolist() == [WaitSource.ALIGNED, WaitSource.ALIGNED, WaitSource.ALIGNED_NAME]
    assert c1.estimate == "aligned"
    rep1 = analyze_trace(t1, OPTS, wait_ns=c1.wait_per_row())
    st = rep1.steps[0]
    # busy 10 + 6 + 10 + 5 = 31; gap [15, 50]: peer 34 (from the AR's start at 16), gpu 1 (launched at 10 < 15);
    # gap [66, 88]: peer 22
    assert (st.gpu_busy_us, st.gpu_idle_us) == (31.0, 57.0)
    assert st.idle_us_by_cause == {"host": 0.0, "launch": 0.0, "sync": 0.0, "gpu": 1.0, "unattributed": 0.0,
                                   "peer": 56.0}
    assert st.predicted_graph_us == pytest.approx(37.56)  # 31 + 1.56 + 5


def test_aligned_removes_clock_offset(tmp_path) -> None:
    p0, p1 = _write_pair(tmp_path, shift1=1000.0)  # rank 1's clock reads 1 ms later
    al, (_, c1) = _aligned(load_trace(p0), load_trace(p1))
    assert al.clock_offset_ns.tolist() == [0, 1_000_000]
    assert al.wait_ns.tolist() == [[0, 34000], [0, 22000]]
    assert c1.wait_ns[:2].tolist() == [34000, 22000]


def test_alignment_not_trusted_when_ends_disagree(tmp_path) -> None:
    # rank 1's first AR is [16, 20]: ends 56/20 and 93/93 -> offset median(-36, 0) = -18 us; corrected
    # rank-1 ends 38 and 111 sit 9 us from each instance's median end; works 6, 0, 5, 23 -> median 5.5;
    # 9 > 0.5 x 5.5, so the match is refused and the single-rank split stays.
    p0, p1 = _write_pair(tmp_path, first_ar=(16, 4))
    t0, t1 = load_trace(p0), load_trace(p1)
    al, (c0, c1) = _aligned(t0, t1)
    assert al.clock_offset_ns.tolist() == [0, -18000]
    assert al.end_residual_ns_median == 9000.0
    assert not al.trusted
    assert c0.estimate == "fastest-instances"
    job = analyze_job([t0, t1], OPTS, model=MODEL)
    assert job.summary.wait_estimate == "single-rank"
    assert any("do not end together" in w for w in job.warnings)


def test_align_steps_by_name_then_position() -> None:
    def steps(names: list[str]) -> Steps:
        n = len(names)
        return Steps("annotation", names, np.arange(n), np.arange(n) + 1, np.full(n, -1), [None] * n, np.full(n, -1), np.full(n, -1))

    table, how = align_steps([steps(["P#3", "P#4", "P#5"]), steps(["P#2", "P#3", "P#4"])])
    assert how == "name" and table.tolist() == [[0, 1], [1, 2]]
    table, how = align_steps([steps(["d", "d", "d"]), steps(["d", "d"])])
    assert how == "position" and table.tolist() == [[0, 0], [1, 1]]


# ---- the job report -------------------------------------------------------------------------

def test_analyze_job_two_ranks(tmp_path) -> None:
    p0, p1 = _write_pair(tmp_path)
    job = analyze_job([p1, p0], OPTS, model=MODEL)  # any order: sorted by rank
    s = job.summary
    assert s.ranks == [0, 1] and s.world_size == 2
    assert s.wait_estimate == "aligned" and s.aligned_collectives == 2 and s.steps == 1
    assert s.predicted_graph_step_us_alone_by_rank == [36.56, 30.642]
    assert s.predicted_graph_step_us_by_rank == [37.56, 37.56]
    assert s.predicted_graph_step_us_median == 37.56
    assert s.start_skew_us_median == 28.0  # skews 34 and 22
    assert s.launch_lag_us_median == 49.0  # launches 41 vs 10 and 81 vs 14: lags 31 and 67
    assert s.slowest_rank == 0
    assert "starts last at 2 of 2" in s.slowest_rank_reason and "waiting for its own host" in s.slowest_rank_reason
    r0, r1 = job.ranks
    assert (r0.last_at_collectives, r1.last_at_collectives) == (2, 0)
    # rank 0: host 36 + launch 21 of an 88 us window; rank 1: peer 56 of 88
    assert (r0.host_idle_fraction, r0.peer_idle_fraction) == (0.648, 0.0)
    assert (r1.host_idle_fraction, r1.peer_idle_fraction) == (0.0, 0.636)
    assert r1.collective_wait_us_per_step_median == 56.0
    assert (r0.wait_estimate, r1.wait_estimate) == ("aligned", "aligned")
    (gs,) = job.steps
    assert gs.name == "decode_step[bs=2]" and gs.batch_size == 2 and gs.collectives == 2
    assert gs.predicted_graph_us_by_rank == [37.56, 37.56] and gs.predicted_graph_us == 37.56
    assert (gs.start_skew_us_median, gs.start_skew_us_max) == (28.0, 34.0)
    assert (gs.launch_lag_us_median, gs.launch_lag_us_max) == (49.0, 67.0)
    assert gs.last_rank == 0
    assert [r.rank for r in job.reports] == [0, 1]
    assert any("estimated by aligned" in w for w in job.reports[1].warnings)
    d = json.loads(json.dumps(job.to_dict(include_traces=True), allow_nan=False))
    assert d["schema"] == "launchgap.job/1" and len(d["traces"]) == 2
    assert d["summary"]["predicted_graph_step_us_median"] == 37.56
    text = render_job(job)
    assert "rank 0 starts last" in text and "37.6" in text
    assert "| rank |" in render_job(job, markdown=True)


def test_analyze_job_one_rank_alone(tmp_path) -> None:
    _, p1 = _write_pair(tmp_path)
    job = analyze_job([p1], OPTS, model=MODEL)
    assert job.summary.wait_estimate == "single-rank" and job.summary.slowest_rank is None
    assert job.summary.predicted_graph_step_us_median == 30.642
    assert job.ranks[0].wait_estimate == "cost-model"
    assert any("1 of 2 ranks present" in w for w in job.warnings)


def test_analyze_job_one_trace_without_rank(tmp_path) -> None:
    anon = write(tmp_path, rank0_events(), name="anon.json")
    job = analyze_job([anon], OPTS, model=MODEL)
    assert job.summary.ranks == [0] and job.summary.world_size is None
    assert job.summary.predicted_graph_step_us_median == 36.56  # as rank 0 alone above


def test_analyze_job_rejects_duplicate_and_unknown_ranks(tmp_path) -> None:
    p0, _ = _write_pair(tmp_path)
    twin = write(tmp_path, rank0_events(), name="other_rank0.json", distributedInfo={"rank": 0, "world_size": 2})
    with pytest.raises(InputError, match="rank 0 appears twice"):
        analyze_job([p0, twin])
    anon = write(tmp_path, rank0_events(), name="anon.json")
    with pytest.raises(InputError, match="cannot tell this trace's rank"):
        analyze_job([p0, anon])


# ---- grouping files ---------------------------------------------------------------------------

@pytest.mark.parametrize("name, rank", [
    ("tp1b_bs1_eager_rank0.json.gz", 0), ("job-rank-1.json", 1), ("rank1.json", 1),
    ("trace_rank_3.pt.trace.json", 3), ("RANK12_x.json", 12), ("ranking.json", None), ("crank1.json", None),
    ("worker0.json", None),
])
def test_rank_from_name(name: str, rank: int | None) -> None:
    assert rank_from_name(name) == rank


def test_group_by_job(tmp_path) -> None:
    names = ["a_rank1.json", "b_rank0.json", "a_rank0.json", "c.json", "b_rank1.json"]
    groups = group_by_job([tmp_path / n for n in names])
    assert [[p.name for p in g] for g in groups] == [["a_rank0.json", "a_rank1.json"], ["b_rank0.json", "b_rank1.json"],
                                                     ["c.json"]]
    assert job_key(tmp_path / "a_rank1.json") == str(tmp_path / "a_rank*.json")


def test_group_traces_by_distributed_info(tmp_path) -> None:
    d1 = tmp_path / "one"
    d1.mkdir()
    a = write(d1, rank1_events(), name="host_a.json", distributedInfo={"rank": 1, "world_size": 2})
    b = write(d1, rank0_events(), name="host_b.json", distributedInfo={"rank": 0, "world_size": 2})
    groups = group_traces([load_trace(a), load_trace(b)])
    assert [[t.rank for t in g] for g in groups] == [[0, 1]]
    d2 = tmp_path / "two"
    d2.mkdir()
    c = write(d2, rank0_events(), name="x.json", distributedInfo={"rank": 0, "world_size": 2})
    e = write(d2, rank0_events(), name="y.json", distributedInfo={"rank": 0, "world_size": 2})
    groups = group_traces([load_trace(c), load_trace(e)])
    assert [len(g) for g in groups] == [1, 1]  # two rank 0s: cannot tell the jobs apart
