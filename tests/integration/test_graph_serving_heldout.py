"""Graph-mode serving on a held-out model: 3b recordings made after the analysis was written
(traces/h200-heldout-3b-2026-12-02, PROVENANCE.md there; a different capture list, seed and
fallback count than the 1b session the analysis was developed on). Nothing here was tuned to them."""
from __future__ import annotations

import json
import statistics
from functools import lru_cache

import numpy as np
import pytest

from launchgap.loaders import load_trace
from launchgap.report import AnalysisOptions, TraceReport, analyze_trace
from tests.conftest import TRACES

HELD = TRACES / "h200-heldout-3b-2026-12-02"
SERVE_SIZES = (1, 2, 4, 8, 12, 16, 24, 32, 48, 64)


def _doc(name: str) -> dict:
    return json.loads((HELD / name).read_text())


def _graph_cost() -> dict[int, float]:
    by: dict[int, list[float]] = {}
    for r in _doc("timings_fullrange.json")["rows"]:
        if r.get("graph_us") is not None:
            by.setdefault(r["batch_size"], []).append(r["graph_us"])
    return {b: statistics.median(v) for b, v in by.items()}


@lru_cache(maxsize=4)
def _serving(opts: AnalysisOptions = AnalysisOptions()) -> TraceReport:
    return analyze_trace(load_trace(HELD / "serving" / "3b_serving_serve.json.gz"), opts)


@pytest.mark.parametrize("opts, source", [(AnalysisOptions(), "markers"),
                                          (AnalysisOptions(capture_sizes=SERVE_SIZES), "flag")])
def test_fallbacks_and_uncaptured_exact(opts: AnalysisOptions, source: str) -> None:
    truth = _doc("timings_serving.json")["serving"][0]
    s = _serving(opts).summary
    assert s.capture_sizes_source == source
    assert s.fallback_steps == truth["fallback_steps"] == [10, 19, 27, 35, 39]
    assert s.uncaptured_steps == truth["uncaptured_steps"] == [0, 1, 15, 16, 33]


def test_bucket_and_padded_rows_exact() -> None:
    truth = {st["index"]: st for st in _doc("timings_serving.json")["serving"][0]["steps"]}
    rep = _serving(AnalysisOptions(capture_sizes=SERVE_SIZES))
    graph = [st for st in rep.steps if st.padded_rows is not None]
    assert len(graph) == sum(1 for t in truth.values() if t["mode"] == "graph") == 30
    for st in graph:
        assert (st.batch_size, st.bucket) == (truth[st.index]["batch_size"], truth[st.index]["bucket"])
        assert st.padded_rows == st.bucket - st.batch_size
    assert sum(st.padded_rows for st in graph) == 126


def test_padding_cost_with_timings_matches_the_full_range_truth() -> None:
    cost = _graph_cost()
    rep = _serving(AnalysisOptions(capture_sizes=SERVE_SIZES, graph_timings_us=tuple(sorted(cost.items()))))
    steps = [st for st in rep.steps if st.padded_rows is not None and st.bucket <= max(cost)]
    truth = sum(cost[st.bucket] - cost[st.batch_size] for st in steps)
    assert len(steps) == 28 and truth == pytest.approx(1060.5, abs=0.1)
    assert sum(st.padding_us for st in steps) == pytest.approx(truth, rel=0.01)


def test_padding_cost_from_the_trace_alone_within_20_percent() -> None:
    """No timings: the cost curve of launchgap.costmodel from the trace's own kernels (the real list given)."""
    cost = _graph_cost()
    rep = _serving(AnalysisOptions(capture_sizes=SERVE_SIZES))
    steps = [st for st in rep.steps if st.padded_rows is not None and st.bucket <= max(cost)]
    truth = sum(cost[st.bucket] - cost[st.batch_size] for st in steps)
    got = sum(st.padding_us for st in steps)
    assert got == pytest.approx(1116.3, abs=0.1)  # +5.3% of the truth, 1,060.5 us
    assert got == pytest.approx(truth, rel=0.20)
    assert sum(st.padding_us_low for st in steps) <= truth <= sum(st.padding_us_high for st in steps)


@pytest.mark.parametrize("bs", [4, 16, 48])
def test_piecewise_to_full_within_3pct(bs: int) -> None:
    truth = next(r["graph_us"] for r in _doc("timings_piecewise.json")["rows"] if r["batch_size"] == bs)
    rep = analyze_trace(load_trace(HELD / "piecewise" / f"3b_bs{bs}_piecewise.json.gz"), AnalysisOptions())
    assert {st.graph_coverage for st in rep.steps} == {"piecewise"}
    predicted = statistics.median(st.predicted_graph_us for st in rep.steps)
    assert abs(predicted / truth - 1) <= 0.03


def test_capture_sizes_from_a_pasted_config_on_the_command_line(tmp_path, capsys) -> None:
    """The same capture list pasted three ways (SGLang flags, a TensorRT-LLM YAML file, plain sizes) gives the same
    fallbacks; a config the parser cannot read is one line and exit 2."""
    from launchgap.cli import main

    trace = str(HELD / "serving" / "3b_serving_serve.json.gz")
    yaml_file = tmp_path / "extra_llm_api_options.yaml"
    yaml_file.write_text("cuda_graph_config:\n  batch_sizes: [1, 2, 4, 8, 12, 16, 24, 32, 48, 64]\n"
                         "  enable_padding: true\n")
    for argv, source, detail in (
            (["--capture-sizes", "--cuda-graph-bs 1 2 4 8 12 16 24 32 48 64"], "config",
             "SGLang server config: cuda_graph_bs=[1, 2, 4, 8, 12, 16, 24, 32, 48, 64]"),
            (["--server-config", str(yaml_file)], "config", "TensorRT-LLM server config: cuda_graph_config, "
             "batch_sizes=[1, 2, 4, 8, 12, 16, 24, 32, 48, 64], enable_padding=true"),
            (["--capture-sizes", "1,2,4,8,12,16,24,32,48,64"], "flag", "--capture-sizes")):
        assert main(["analyze", trace, "--format", "json", *argv]) == 0
        s = json.loads(capsys.readouterr().out)["traces"][0]["summary"]
        assert (s["capture_sizes"], s["capture_sizes_source"], s["capture_sizes_detail"]) == (list(SERVE_SIZES),
                                                                                              source, detail)
        assert s["fallback_steps"] == [10, 19, 27, 35, 39] and s["uncaptured_steps"] == [0, 1, 15, 16, 33]
    assert main(["analyze", trace, "--capture-sizes", "--cuda-graph-bs one two"]) == 2
    err = capsys.readouterr().err.strip()
    assert err == "launchgap: error: --capture-sizes: server config (SGLang): cuda_graph_bs: expected a list of positive integers"


def test_plan_from_the_serving_trace_alone(capsys) -> None:
    """launchgap plan SERVING_TRACE, no timings, no histogram: costs from its kernels, distribution from its decode
    steps, the server's current list from its markers (the buckets it replayed), each named in the plan."""
    from launchgap.cli import main

    trace = str(HELD / "serving" / "3b_serving_serve.json.gz")
    assert main(["plan", trace, "--format", "json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert set(d["sources"].values()) - {None} == {"1 trace(s) of " + d["workload"]["label"]}
    assert d["sources"]["capture_sizes"] and d["baselines"]["current"]["buckets"] == [12, 16, 24, 32, 48, 64]
    assert [p["batch_size"] for p in d["costs"]["points"]] == list(range(1, 129))  # every size, with its source
    assert {p["source"] for p in d["costs"]["points"]} == {"predicted"}  # eager costs estimated from the fallbacks
    assert d["inputs"][:2] == ["costs from 0 eager and 1 graph trace(s), cost curve of their kernels",
                               "distribution from 40 decode steps in 1 serving trace(s)"]
    # eager costs from the host's measured cost per launch; the eager steps among graph replays do not scale it
    eager = [n for n in d["costs"]["warnings"] if n.startswith("eager costs ")]
    assert len(eager) == 1 and eager[0].startswith("eager costs estimated: 1,307 kernels per step x 25.9 us per "
                                                   "launch (measured: median of 12,844 intervals")
    assert "its 10 eager decode step(s) among graph replays do not scale it" in eager[0]
    assert d["all_eager_expected_step_us"] == pytest.approx(33810, abs=1)  # 1,307 x 25.9 us (truth 21.7 ms)
    assert d["expected_step_us"] < d["baselines"]["current"]["expected_step_us"]
    # the graph costs carry the cost curve's band; at either end the list stays (within 0.01% of the end's own plan)
    pt = d["costs"]["points"][0]
    assert pt["graph_us_low"] < pt["graph_us"] < pt["graph_us_high"]
    band = d["cost_band"]
    assert band["sizes_with_band"] == 128 and band["regret_fraction"] < 1e-4
    assert band["expected_step_us_low"] < d["expected_step_us"] < band["expected_step_us_high"]


def test_the_cost_curve_rises_between_sizes_whose_steps_rise() -> None:
    """Between two sizes the trace ran whose costs rise, the curve rises and stays within them: each kernel class
    rises along its own shape, and classes whose rises differ in sign must not make it dip (the 3b's attention rises
    with a wave step where its eager steps' element-wise time falls: a dip of 5-10 us at 17-19, 50-61, 69-91 before)."""
    curve = _serving().cost_curve
    assert curve is not None
    us = np.array([curve.at(b) for b in range(1, curve.max_size + 1)])
    seen = [b for b in range(1, curve.max_size + 1) if curve.source_at(b) == "trace"]
    assert len(seen) >= 10
    rising = 0
    for a, c in zip(seen, seen[1:]):
        if us[c - 1] >= us[a - 1]:
            seg = us[a - 1:c]
            assert (np.diff(seg) >= 0).all() and seg.min() >= us[a - 1] and seg.max() <= us[c - 1], (a, c)
            rising += 1
    assert rising >= 8


def test_steps_that_replay_full_graphs_gain_nothing_from_one() -> None:
    """The FULL-graph steps' group predicts 1.00x (1.00-1.00x): their real step less the predicted FULL graph is the
    profiler's cost inside the replays (it read 1.02-1.12x on the H200 serving traces, whose truth is the same
    graph); the eager fallbacks' group keeps its gain."""
    groups = {g["graph_coverage"]: g for g in _serving().summary.step_groups}
    full, eager = groups["full"], groups["eager"]
    assert (full["predicted_speedup"], full["predicted_speedup_low"], full["predicted_speedup_high"]) == (1.0, 1.0, 1.0)
    assert eager["predicted_speedup"] > 2.0


def test_plan_from_two_graph_traces_names_each_eager_estimate(tmp_path, capsys) -> None:
    """Two graph-only traces of one server: the plan's eager cost is the median of their eager curves, and its note
    names each trace with its own estimate (it named the first trace only)."""
    import shutil

    from launchgap.cli import main

    src = HELD / "serving" / "3b_serving_serve.json.gz"
    a, b = tmp_path / "server-a.json.gz", tmp_path / "server-b.json.gz"
    shutil.copy(src, a)
    shutil.copy(src, b)
    assert main(["plan", str(a), str(b), "--format", "json"]) == 0
    d = json.loads(capsys.readouterr().out)
    eager = [n for n in d["costs"]["warnings"] if n.startswith("eager costs")]
    assert len(eager) == 1 and eager[0].startswith("eager costs: the median over 2 traces' eager curves")
    assert f"{a}: estimated: 1,307 kernels per step x 25.9 us per launch" in eager[0]
    assert f"{b}: estimated: 1,307 kernels per step x 25.9 us per launch" in eager[0]
