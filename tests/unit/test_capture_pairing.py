"""Capture trace beside an execution trace: a tiny hand-built pair with exact numbers.

Capture (vLLM-style range ``capture_4_PIECEWISE``, two graphs): graph 0 records ``gemm`` under
``aten::mm`` and ``norm`` under ``vllm::norm``; graph 1 records ``add`` under ``aten::add_`` (nested
in ``aten::add``), ``copy`` outside any op, ``add`` under ``aten::add``. Execution: graph 0 replayed
twice (kernels 4 + 1 us, then 3 + 1 us), graph 1 once (0.5 + 1.5 + 0.5 us): 11.5 us of replay kernels.
"""
from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import numpy as np
import pytest

from launchgap.cli import main
from launchgap.graph_mode import captured_nodes, pair_capture
from launchgap.loaders import load_trace
from tests.builders import TraceSpec

TID = 1


def _x(cat: str, name: str, ts_ns: int, dur_ns: int, **args: object) -> dict:
    return {"ph": "X", "cat": cat, "name": name, "pid": 100, "tid": TID, "ts": ts_ns / 1e3, "dur": dur_ns / 1e3,
            "args": dict(args)}


def capture_doc(kernel_names: bool = True) -> dict:
    corr = iter(range(1, 100))

    def launch(t: int, kernel: str) -> dict:
        return _x("cuda_runtime", "cudaLaunchKernel", t, 20, correlation=next(corr),
                  **({"kernel": kernel} if kernel_names else {}))

    ev = [_x("user_annotation", "capture_4_PIECEWISE", 0, 10_000),
          _x("cuda_runtime", "cudaStreamBeginCapture", 100, 10),
          _x("cpu_op", "aten::mm", 200, 300), launch(300, "gemm"),
          _x("cpu_op", "vllm::norm", 600, 300), launch(700, "norm"),
          _x("cuda_runtime", "cudaStreamEndCapture", 1000, 10),
          _x("cuda_runtime", "cudaGraphInstantiate", 1100, 50),
          _x("cuda_runtime", "cudaStreamBeginCapture", 2000, 10),
          _x("cpu_op", "aten::add", 2100, 300), _x("cpu_op", "aten::add_", 2150, 200), launch(2200, "add"),
          launch(2500, "copy"),
          _x("cpu_op", "aten::add", 2550, 150), launch(2600, "add"),
          _x("cuda_runtime", "cudaStreamEndCapture", 3000, 10),
          _x("cuda_runtime", "cudaGraphInstantiate", 3100, 50),
          # one kernel ran (a warm-up outside capture)
          _x("cuda_runtime", "cudaLaunchKernel", 5000, 20, correlation=99),
          {"ph": "X", "cat": "kernel", "name": "warmup", "pid": 0, "tid": 7, "ts": 5.1, "dur": 1.0,
           "args": {"device": 0, "stream": 7, "correlation": 99}}]
    return {"schemaVersion": 1, "deviceProperties": [{"id": 0, "name": "NVIDIA H200"}], "traceEvents": ev}


def execution_spec(extra_replay: bool = False) -> TraceSpec:
    s = TraceSpec()
    s.graph_launch(10_000, 5_000, 10, 1, [("gemm", 20_000, 4_000), ("norm", 24_500, 1_000)])
    s.graph_launch(30_000, 5_000, 11, 2, [("add", 40_000, 500), ("copy", 41_000, 1_500), ("add", 43_000, 500)])
    s.graph_launch(50_000, 5_000, 12, 1, [("gemm", 60_000, 3_000), ("norm", 63_500, 1_000)])
    if extra_replay:  # a graph the capture trace does not have (5 kernels)
        s.graph_launch(70_000, 5_000, 13, 3, [(f"k{i}", 80_000 + 1_000 * i, 500) for i in range(5)])
    return s


@pytest.fixture()
def pair(tmp_path: Path) -> tuple[Path, Path]:
    cap = tmp_path / "capture.json"
    cap.write_text(json.dumps(capture_doc()))
    return execution_spec().write_kineto(tmp_path / "exec.json"), cap


GRAPHS = [{"graph": 0, "size": 4, "mode": "PIECEWISE", "nodes": 2, "replays": 2, "kernel_us": 9.0,
           "share_of_replay_time": 0.7826},
          {"graph": 1, "size": 4, "mode": "PIECEWISE", "nodes": 3, "replays": 1, "kernel_us": 2.5,
           "share_of_replay_time": 0.2174}]
KERNELS = [{"op": "aten::mm", "name": "gemm", "count": 2, "kernel_us": 7.0, "share_of_replay_time": 0.6087},
           {"op": "vllm::norm", "name": "norm", "count": 2, "kernel_us": 2.0, "share_of_replay_time": 0.1739},
           {"op": None, "name": "copy", "count": 1, "kernel_us": 1.5, "share_of_replay_time": 0.1304},
           {"op": "aten::add", "name": "add", "count": 1, "kernel_us": 0.5, "share_of_replay_time": 0.0435},
           {"op": "aten::add_", "name": "add", "count": 1, "kernel_us": 0.5, "share_of_replay_time": 0.0435}]


def test_captured_nodes_innermost_op_and_graph(pair: tuple[Path, Path]) -> None:
    c = captured_nodes(load_trace(pair[1]))
    assert c.nodes.tolist() == [2, 3]
    assert c.graph.tolist() == [0, 0, 1, 1, 1] and c.position.tolist() == [0, 1, 0, 1, 2]
    assert c.kernel.tolist() == ["gemm", "norm", "add", "copy", "add"]
    assert c.op.tolist() == ["aten::mm", "vllm::norm", "aten::add_", None, "aten::add"]
    assert (c.sizes, c.modes, c.ordinal.tolist()) == ([4, 4], ["PIECEWISE", "PIECEWISE"], [0, 1])


def test_pairing_by_kernel_names(pair: tuple[Path, Path]) -> None:
    p = pair_capture(load_trace(pair[0]), load_trace(pair[1]))
    d = p.to_dict()
    assert d["matched_by"] == "kernel names"
    assert (d["graphs_captured"], d["replays"], d["replays_matched"], d["replay_kernels"],
            d["replay_kernels_named"], d["replay_kernel_us"], d["named_share_of_replay_time"]) == (2, 3, 3, 7, 7, 11.5,
                                                                                                   1.0)
    assert d["graphs"] == GRAPHS and d["kernels"] == KERNELS
    assert p.op.tolist() == ["aten::mm", "vllm::norm", "aten::add_", None, "aten::add", "aten::mm", "vllm::norm"]


def test_pairing_by_count_and_order_without_kernel_names(tmp_path: Path) -> None:
    """CUPTI's launch calls do not name their kernel: the same pairing from node count and order."""
    cap = tmp_path / "capture.json"
    cap.write_text(json.dumps(capture_doc(kernel_names=False)))
    p = pair_capture(load_trace(execution_spec().write_kineto(tmp_path / "exec.json")), load_trace(cap))
    d = p.to_dict()
    assert d["matched_by"] == "node count and order" and d["graphs"] == GRAPHS and d["kernels"] == KERNELS


def test_unmatched_replay_stays_unnamed(tmp_path: Path) -> None:
    cap = tmp_path / "capture.json"
    cap.write_text(json.dumps(capture_doc()))
    p = pair_capture(load_trace(execution_spec(extra_replay=True).write_kineto(tmp_path / "exec.json")),
                     load_trace(cap))
    d = p.to_dict()
    assert (d["replays"], d["replays_matched"], d["replay_kernels"], d["replay_kernels_named"]) == (4, 3, 12, 7)
    assert d["replay_kernel_us"] == 14.0 and d["named_share_of_replay_time"] == round(11.5 / 14.0, 4)
    assert p.graph[-5:].tolist() == [-1] * 5 and p.op[-5:].tolist() == [None] * 5


def test_order_fallback_agrees_when_names_are_dropped(pair: tuple[Path, Path]) -> None:
    cap = load_trace(pair[1])
    unnamed = dataclasses.replace(cap, kernel_name_id=np.full(len(cap), -1, dtype=np.int32))
    ex = load_trace(pair[0])
    a, b = pair_capture(ex, cap), pair_capture(ex, unnamed)
    assert a.graph.tolist() == b.graph.tolist() and a.op.tolist() == b.op.tolist()


def test_cli_capture_flag(pair: tuple[Path, Path], capsys: pytest.CaptureFixture[str]) -> None:
    ex, cap = pair
    assert main(["analyze", str(ex), "--capture", str(cap), "--format", "json"]) == 0
    [t] = json.loads(capsys.readouterr().out)["traces"]
    assert t["capture_pairing"]["graphs"] == GRAPHS and t["capture_pairing"]["kernels"] == KERNELS
    assert main(["analyze", str(ex), "--capture", str(cap)]) == 0
    out = capsys.readouterr().out
    assert "Inside graph replays" in out and "3 of 3 replays matched a captured graph (kernel names" in out


def test_cli_capture_flag_rejects_an_execution_trace(pair: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
                                                     ) -> None:
    ex, _ = pair
    assert main(["analyze", str(ex), "--capture", str(ex)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and str(ex) in err[0] and "not a CUDA-graph capture trace" in err[0]
