"""Piecewise -> FULL on transformers models cut at their attention calls (traces/h200-piecewise-2026-12-03, bench/
gpu_heldout.sh part 13, checked once): the steps read piecewise (their graphs chained by eager attention, 4-9% of
the kernels) and the FULL step predicted from each piecewise trace within 3% of the unprofiled FULL graph, at a
fixed batch and over a piecewise serving run against the same sequence's FULL replays; figures pinned."""
from __future__ import annotations

import json
import statistics

import pytest

from launchgap.loaders import load_trace
from launchgap.report import AnalysisOptions, analyze_trace
from tests.conftest import TRACES

SET = TRACES / "h200-piecewise-2026-12-03"


@pytest.mark.parametrize("model, bs, predicted_us, pieces", [
    ("qwen3-1.7b-like", 4, 6226.302, 29), ("qwen3-1.7b-like", 16, 8048.412, 29), ("qwen3-1.7b-like", 48, 13598.034, 29),
    ("gemma-3-1b-like", 4, 5985.639, 27), ("gemma-3-1b-like", 16, 6208.523, 27), ("gemma-3-1b-like", 48, 6891.056, 27),
])
def test_piecewise_to_full_at_a_fixed_batch(model: str, bs: int, predicted_us: float, pieces: int) -> None:
    truth = {r["batch_size"]: r for r in json.loads((SET / model / "timings_piecewise.json").read_text())["rows"]}
    rep = analyze_trace(load_trace(SET / model / "piecewise" / f"{model}_bs{bs}_piecewise.json.gz"), AnalysisOptions())
    assert [st.graph_coverage for st in rep.steps] == ["piecewise"] * 3
    assert rep.mode == "mixed" and rep.summary.graph_launches_per_step_median == pieces
    got = rep.summary.predicted_graph_step_us_median
    assert got == pytest.approx(predicted_us, abs=1e-3)
    assert abs(got / truth[bs]["graph_us"] - 1) <= 0.03


@pytest.mark.parametrize("model, median_error", [("qwen3-1.7b-like", 0.0208), ("gemma-3-1b-like", 0.0179)])
def test_piecewise_to_full_on_a_serving_run(model: str, median_error: float) -> None:
    entry = json.loads((SET / model / "timings_serving_full.json").read_text())["serving"][0]
    truth = {k["bucket"]: k["us"] for k in entry["kinds"] if k["mode"] == "graph"}
    rep = analyze_trace(load_trace(SET / model / "serving" / f"{model}_serving_piecewise_serve.json.gz"),
                        AnalysisOptions())
    graph = [st for st in rep.steps if st.graph_coverage == "piecewise"]
    assert len(graph) == 20 and {st.graph_coverage for st in rep.steps} == {"piecewise", "eager"}
    errs = [st.predicted_graph_us / truth[st.bucket] - 1 for st in graph]
    med = statistics.median(abs(e) for e in errs)
    assert med == pytest.approx(median_error, abs=5e-5)
    assert med <= 0.03
