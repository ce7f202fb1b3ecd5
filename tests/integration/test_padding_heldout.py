"""Padding cost from a graph-mode serving trace alone on two more held-out models (traces/h200-padding-2026-12-03,
PROVENANCE.md there: the 8b decoder and a transformers qwen2.5-0.5b-like, a capture list and seed no earlier
recording used, recorded after the cost model was settled): the real list given, no timings, within 20% of the
FULL-graph truth at every size; the steps' buckets and padded rows exact against the harness's own record."""
from __future__ import annotations

import json
import statistics

import pytest

from launchgap.loaders import load_trace
from launchgap.report import AnalysisOptions, analyze_trace
from tests.conftest import TRACES

HELD = TRACES / "h200-padding-2026-12-03"
SERVE_SIZES = (1, 2, 4, 8, 16, 24, 32, 48, 64)


@pytest.mark.parametrize("model, trace, expect_us, truth_us", [
    ("8b", "8b_serving_serve.json.gz", 2766.1, 3248.1),
    ("qwen2.5-0.5b-like", "qwen2.5-0.5b-like_serving_serve.json.gz", 12242.4, 11017.5)])
def test_padding_from_the_trace_alone_within_20_percent(model: str, trace: str, expect_us: float,
                                                        truth_us: float) -> None:
    folder = HELD / model
    by: dict[int, list[float]] = {}
    for r in json.loads((folder / "timings_fullrange.json").read_text())["rows"]:
        if r.get("graph_us") is not None:
            by.setdefault(r["batch_size"], []).append(r["graph_us"])
    cost = {b: statistics.median(v) for b, v in by.items()}
    rep = analyze_trace(load_trace(folder / "serving" / trace), AnalysisOptions(capture_sizes=SERVE_SIZES))
    record = {st["index"]: st for st in json.loads((folder / "timings_serving.json").read_text())["serving"][0]["steps"]}
    graph = [st for st in rep.steps if st.padded_rows is not None]
    assert len(graph) == sum(1 for t in record.values() if t["mode"] == "graph") == 30
    for st in graph:
        assert (st.batch_size, st.bucket) == (record[st.index]["batch_size"], record[st.index]["bucket"])
    truth = sum(cost[st.bucket] - cost[st.batch_size] for st in graph)
    got = sum(st.padding_us for st in graph)
    assert truth == pytest.approx(truth_us, abs=0.1)
    assert got == pytest.approx(expect_us, abs=0.1)
    assert got == pytest.approx(truth, rel=0.20)
