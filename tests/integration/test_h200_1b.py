"""Acceptance on the real H200 traces: steps, batch sizes, modes, and the graph prediction vs truth."""
from __future__ import annotations

import json

import numpy as np
import pytest

from launchgap.cli import main

SIZES = (1, 8, 64, 256)
CONTRACT_TRACE = {"path", "format", "mode", "devices", "summary", "steps", "warnings"}
CONTRACT_DEVICE = {"device", "kernels", "gpu_busy_us", "gpu_window_us", "idle_us_by_cause"}
CONTRACT_SUMMARY = {"steps", "step_us_median", "gpu_busy_us_median", "gpu_idle_fraction", "kernels_per_step_median",
                    "kernel_launches_per_step_median", "graph_launches_per_step_median",
                    "launch_api_us_per_step_median", "launch_to_kernel_ratio", "predicted_graph_step_us_median",
                    "predicted_speedup"}
CONTRACT_STEP = {"index", "name", "batch_size", "start_us", "dur_us", "gpu_busy_us", "gpu_idle_us", "kernels",
                 "launch_api_us", "predicted_graph_us"}
CAUSES = {"host", "launch", "sync", "gpu", "unattributed"}


@pytest.fixture(scope="module")
def reports(reference_traces):
    d = reference_traces / "h200-1b"
    import io
    from contextlib import redirect_stdout

    buf = io.StringIO()
    with redirect_stdout(buf):
        rc = main(["analyze", str(d), "--format", "json"])
    assert rc == 0
    doc = json.loads(buf.getvalue())
    assert doc["schema"] == "launchgap.report/1"
    truth = {r["bs"]: r for r in json.loads((d / "truth.json").read_text())["rows"] if r["model"] == "1b"}
    by_name = {t["path"].rsplit("/", 1)[-1]: t for t in doc["traces"]}
    return by_name, truth


def test_json_contract(reports) -> None:
    by_name, _ = reports
    assert len(by_name) == 8
    for t in by_name.values():
        assert CONTRACT_TRACE <= set(t)
        assert t["format"] == "kineto"
        for d in t["devices"]:
            assert CONTRACT_DEVICE <= set(d) and CAUSES <= set(d["idle_us_by_cause"])
        assert CONTRACT_SUMMARY <= set(t["summary"])
        for s in t["steps"]:
            assert CONTRACT_STEP <= set(s)


@pytest.mark.parametrize("bs", SIZES)
def test_steps_batch_and_mode(reports, bs) -> None:
    by_name, _ = reports
    eager, graph = by_name[f"1b_bs{bs}_eager.json.gz"], by_name[f"1b_bs{bs}_graph.json.gz"]
    for t, mode in ((eager, "eager"), (graph, "graph")):
        assert t["mode"] == mode
        assert t["summary"]["steps"] == 6
        assert [s["batch_size"] for s in t["steps"]] == [bs] * 6
        for s in t["steps"]:
            assert sum(s["idle_us_by_cause"].values()) == pytest.approx(s["gpu_idle_us"], abs=0.01)
    assert graph["summary"]["graph_launches_per_step_median"] == 1
    assert eager["summary"]["graph_launches_per_step_median"] == 0
    assert graph["summary"]["kernels_per_step_median"] == eager["summary"]["kernels_per_step_median"]


def test_prediction_vs_unprofiled_truth(reports) -> None:
    by_name, truth = reports
    errs = []
    for bs in SIZES:
        pred = by_name[f"1b_bs{bs}_eager.json.gz"]["summary"]["predicted_graph_step_us_median"]
        errs.append(pred / truth[bs]["graph_us"] - 1)
    errs = np.abs(errs)
    assert np.median(errs) < 0.05, errs
    assert errs.max() < 0.10, errs


def test_eager_traces_are_launch_bound(reports) -> None:
    by_name, _ = reports
    for bs in SIZES:
        s = by_name[f"1b_bs{bs}_eager.json.gz"]["summary"]
        assert s["verdict"] == "launch-bound"
        # At batch 256 kernels outgrow their launch calls, yet Python dispatch still starves the GPU.
        assert (s["launch_to_kernel_ratio"] > 1) == (bs < 256)
