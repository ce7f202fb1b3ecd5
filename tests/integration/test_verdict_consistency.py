"""One figure, one value: what `launchgap analyze` says of a graph-mode serving trace's fallbacks and capture list
against what `launchgap plan` says of the same trace (H200 serving trace with unprofiled truth,
traces/h200-padding-2026-12-03c/qwen2.5-1.5b-like, PROVENANCE.md there)."""
from __future__ import annotations

import json

import pytest

from launchgap.cli import main
from tests.conftest import TRACES

TRACE = TRACES / "h200-padding-2026-12-03c" / "qwen2.5-1.5b-like" / "serving" / "qwen2.5-1.5b-like_serving_serve.json.gz"


def _json(capsys, *args: str) -> dict:
    assert main([*args, "--format", "json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_fallback_lost_and_planner_comparison_are_the_plans_costs(capsys) -> None:
    rep = _json(capsys, "analyze", str(TRACE))["traces"][0]
    plan = _json(capsys, "plan", str(TRACE))
    s, pts = rep["summary"], {p["batch_size"]: p for p in plan["costs"]["points"]}
    fb = [st for st in rep["steps"] if st["fallback"]]
    # each fallback loses the plan's eager cost at its batch less the plan's graph cost at its bucket
    assert [(st["index"], st["batch_size"]) for st in fb] == [(19, 33), (24, 16), (32, 28), (35, 19)]
    bucket = {33: 48, 16: 16, 28: 32, 19: 24}
    for st in fb:
        assert st["fallback_eager_us"] == pytest.approx(pts[st["batch_size"]]["eager_us"], abs=1e-3)
        assert st["fallback_lost_us"] == pytest.approx(pts[st["batch_size"]]["eager_us"]
                                                       - pts[bucket[st["batch_size"]]]["graph_us"], abs=1e-3)
    assert [st["fallback_lost_us"] for st in fb] == [11226.0, 15322.705, 13237.192, 14118.607]
    assert s["fallback_lost_us_per_step"] == 1347.613  # truth 1,480.4 (eager step in isolation less the bucket's
    # replay, timings_serving.json 'kinds' and timings_fullrange.json): -9.0%; each step's own profiled time gave +57.7%
    # the analysis' planner comparison prices the current list as the plan's baseline does
    pc, cur = s["planner_comparison"], plan["baselines"]["current"]
    assert cur["buckets"] == s["capture_sizes"] == [8, 16, 24, 32, 48, 64]
    assert (pc["current_expected_step_us"], pc["current_padding_waste_us"]) == (cur["expected_step_us"],
                                                                                cur["padding_waste_us"]) == (
        9701.848, 667.637)
    # and the list it finds is the plan's best of as many graphs
    six = next(t for t in plan["tradeoff"] if t["graphs"] == pc["graphs"] == 6)
    assert pc["expected_step_us"] == six["expected_step_us"] == 8805.832
    # the padding line counts the graph steps that ran (593.1 us per step); the planner prices the fallbacks at their
    # buckets too: 33 -> 48, 19 -> 24, 28 -> 32 add 2,981.2 us over 40 steps
    assert s["padding_us_per_step"] == 593.107
    assert (pc["current_padding_waste_us"] - s["padding_us_per_step"]) * 40 == pytest.approx(2981.2, abs=0.1)


def test_eager_group_step_is_the_plans_eager_cost(capsys) -> None:
    rep = _json(capsys, "analyze", str(TRACE))["traces"][0]
    plan = _json(capsys, "plan", str(TRACE))
    pts = {p["batch_size"]: p for p in plan["costs"]["points"]}
    eager = next(g for g in rep["summary"]["step_groups"] if g["graph_coverage"] == "eager")
    # 4 fallbacks and 4 uncaptured sizes (bs 16, 19, 28, 33, 73, 82, 92, 94): their step is the plan's eager cost,
    # 21,436.8 us at every size (1,404 kernels x 15.3 us per launch measured on the trace), against a median
    # unprofiled eager truth of 23,018 us (-6.9%); their profiled windows gave 15,920 (-30.8%)
    assert eager["eager_step_source"] == "eager curve"
    assert eager["estimated_unprofiled_step_us_median"] == pytest.approx(pts[28]["eager_us"], abs=1e-3) == 21436.834
    assert (eager["predicted_graph_step_us_median"], eager["predicted_speedup"]) == (10760.825, 1.992)
