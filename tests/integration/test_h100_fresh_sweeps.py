"""The fresh H100 sweeps of 2026-12-06 (``traces/h100-2026-12-05c``, recorded once after the two rules they check were
set on earlier recordings): the cost curve from one traced row with the latency-bound attention rule, and the eager
estimate's GPU-bound end, against the unprofiled truth (``timings.json``). The figures are the ones its PROVENANCE.md
reports (``bench/costmodel_eval.py``, ``bench/eager_host_eval.py``)."""
from __future__ import annotations

import json

import numpy as np
import pytest

from launchgap.loaders import load_trace
from launchgap.report import analyze_trace
from tests.conftest import TRACES

SET = TRACES / "h100-2026-12-05c"
LATENCY_NOTE = "attention launches within 1.2 x 9 us (one latency-bound wave"


def _rows(model: str) -> dict[int, dict]:
    return {int(r["batch_size"]): r for r in json.loads((SET / "timings.json").read_text())["rows"]
            if r["model"] == model}


@pytest.mark.parametrize(("model", "median", "worst", "latency_bound"), [
    ("phi-4-mini-like", 0.0224, 0.0424, True),  # within both bars (4.97 / 6.03% without the rule)
    ("qwen3-0.6b-like", 0.0254, 0.0718, True),  # 3.21 / 10.96% without it
    ("qwen2.5-7b-like", 0.0371, 0.0551, True),  # 5.29 / 8.64% without it
    ("falcon3-1b-like", 0.0520, 0.0934, False),  # head dim 256: one row's attention past the bound, the rule idle
])
def test_the_curve_from_one_row_on_the_h100(model: str, median: float, worst: float, latency_bound: bool) -> None:
    truth = {b: float(r["graph_us"]) for b, r in _rows(model).items()}
    curve = analyze_trace(load_trace(SET / "traces" / f"{model}_bs1_graph.json.gz")).cost_curve
    err = np.abs([(curve.at(b) - t) / t for b, t in sorted(truth.items())])
    assert len(err) == 14 and float(np.median(err)) == pytest.approx(median, abs=1e-4)
    assert float(err.max()) == pytest.approx(worst, abs=1e-4)
    assert any(n.startswith(LATENCY_NOTE) for n in curve.notes) is latency_bound


@pytest.mark.parametrize(("model", "want"), [
    ("phi-4-mini-like", {64: -0.0112, 100: -0.0047, 128: -0.0060}),
    ("qwen2.5-7b-like", {64: 0.0027, 100: -0.0025, 128: -0.0020}),
])
def test_the_eager_estimate_where_the_gpu_bounds_it(model: str, want: dict[int, float]) -> None:
    """From the FULL-graph trace at 64 rows alone (no eager launch in it: the host's cost is the prior) the eager step
    at 64, 100 and 128 rows is the graph curve plus 1 us per kernel: within 1.2% of the unprofiled eager step, where
    the graph step alone (the floor before) was 3.2-6.7% low."""
    rows = _rows(model)
    rep = analyze_trace(load_trace(SET / "traces" / f"{model}_bs64_graph.json.gz"))
    for b, err in want.items():
        assert rep.eager_curve.at(b) / rows[b]["eager_us"] - 1 == pytest.approx(err, abs=1e-4)
        assert rep.cost_curve.at(b) / rows[b]["eager_us"] - 1 < -0.03  # the graph step alone
    assert "at least the graph step plus 1 us per kernel (a GPU-bound eager step)" in rep.eager_curve.detail
