"""Workload labels read as names: model class from the matmuls' recorded shapes, the GPU from the device
properties (an empty ROCm name identified by its properties; an unlisted device id by the one GPU kind listed),
tensor parallelism from the ranks. Exact labels on tiny hand-built traces."""
from __future__ import annotations

from pathlib import Path

from launchgap.loaders import load_trace
from launchgap.report import analyze_trace
from launchgap.workload import gpu_short_name
from tests.unit.kineto_tiny import HOST_PID, HOST_TID, ann, kernel, launch, write

MI300X = {"name": "", "totalGlobalMem": 206141652992, "numSms": 304, "warpSize": 64, "computeMajor": 9,
          "computeMinor": 4}


def _linear(ts: float, out_f: int, in_f: int) -> dict:
    return {"ph": "X", "cat": "cpu_op", "name": "aten::linear", "pid": HOST_PID, "tid": HOST_TID, "ts": ts,
            "dur": 1.0, "args": {"Input Dims": [[4, in_f], [out_f, in_f], []]}}


def _events(device: int) -> list[dict]:
    """One decode step of a 4096-wide layer pair: 4096 x 4096 + 14336 x 4096 weights read, as ``aten::linear``."""
    return [ann("decode_step[bs=4]", 0.0, 100.0), _linear(5.0, 4096, 4096), _linear(20.0, 14336, 4096),
            {"ph": "X", "cat": "python_function", "name": "vllm/model_executor/models/llama.py(10): forward",
             "pid": HOST_PID, "tid": HOST_TID, "ts": 2.0, "dur": 60.0, "args": {}},
            launch(6.0, 2.0, 1), kernel(10.0, 5.0, 1, "gemm_a", device=device),
            launch(21.0, 2.0, 2), kernel(25.0, 5.0, 2, "gemm_b", device=device)]


def test_model_class_gpu_and_tp_from_the_trace(tmp_path: Path) -> None:
    # devices 0-3 listed with an empty name (ROCm), the kernels on device 6: one GPU kind, identified as MI300X
    props = [{"id": i, **MI300X} for i in range(4)]
    p = write(tmp_path, _events(6), deviceProperties=props, distributedInfo={"rank": 2, "world_size": 4})
    w = analyze_trace(load_trace(p)).workload
    # (4096 x 4096 + 14336 x 4096) x 4 ranks = 302,006,272 weights: ~302M-class
    assert w.device == "AMD Instinct MI300X"
    assert w.label == "Llama ~302M-class · MI300X · TP4 · 2 kernels/step (0 besides GEMM/attention) · rank 2 of 4"


def test_no_shapes_no_class_and_two_gpu_kinds_name_none(tmp_path: Path) -> None:
    ev = [e for e in _events(6) if e.get("name") != "aten::linear"]
    props = [{"id": 0, "name": "NVIDIA H100 80GB HBM3"}, {"id": 1, "name": "NVIDIA A100-SXM4-80GB"}]
    w = analyze_trace(load_trace(write(tmp_path, ev, deviceProperties=props))).workload
    assert w.label == "unknown GPU · 2 kernels/step (0 besides GEMM/attention)"


def test_gpu_short_names() -> None:
    assert [gpu_short_name(n) for n in ("NVIDIA H100 80GB HBM3", "AMD Instinct MI300X", "NVIDIA H200", "Test GPU",
                                         "NVIDIA GeForce RTX 4090")] == ["H100", "MI300X", "H200", "Test GPU",
                                                                         "RTX 4090"]


def test_a_mixture_of_experts_by_its_grouped_gemm_is_named_moe_without_a_size(tmp_path: Path) -> None:
    # transformers' grouped_mm experts: a CUTLASS kernel with GroupProblemShape in its name, no "moe" in it; the
    # linear ops' 302M weights are the dense part only, so no class is read from them
    expert = "cutlass::device_kernel<GemmUniversal<cutlass::gemm::GroupProblemShape<cute::tuple<int, int, int>>>>"
    ev = _events(0) + [launch(31.0, 2.0, 3), kernel(35.0, 5.0, 3, expert, device=0)]
    props = [{"id": 0, "name": "NVIDIA H200"}]
    w = analyze_trace(load_trace(write(tmp_path, ev, deviceProperties=props))).workload
    assert w.label == "Llama MoE · H200 · 3 kernels/step (0 besides GEMM/attention)"
