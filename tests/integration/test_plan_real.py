"""``launchgap plan`` on the H200 1b traces (eager + graph at bs 1/8/64/256) and truth.json."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

from launchgap.cli import main
from launchgap.loaders import expand_paths, load_trace
from launchgap.planning.inputs import costs_from_steps, costs_from_timings
from launchgap.planning.request import trace_steps
from launchgap.planning.planner import PlanOptions, plan_capture, score_buckets
from launchgap.report import analyze_trace

#: A skewed decode distribution: most steps at small batches (the one in docs/planner.md).
SKEWED = {1: 400, 2: 200, 3: 150, 4: 120, 6: 90, 8: 80, 12: 60, 16: 50, 24: 40, 32: 30, 48: 20, 64: 15, 96: 10,
          128: 6, 200: 3, 256: 2}


@pytest.fixture(scope="module")
def h200(reference_traces):
    return reference_traces / "h200-1b"


@pytest.fixture(scope="module")
def reports(h200):
    files = expand_paths([h200])
    assert len(files) == 8
    return [analyze_trace(load_trace(f)) for f in files]


@pytest.fixture()
def dist_csv(tmp_path):
    f = tmp_path / "skewed.csv"
    f.write_text("batch_size,count\n" + "".join(f"{b},{n}\n" for b, n in SKEWED.items()))
    return f


def _plan_json(capsys, argv) -> dict:
    assert main(["plan", *argv, "--format", "json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_costs_from_all_eight_traces(h200, reports):
    t = costs_from_steps([trace_steps(r) for r in reports])
    # every size 1..256: the graph cost curve of the traces' kernels (launchgap.costmodel), eager linear between
    # the eager traces' sizes
    assert t.batch_sizes == list(range(1, 257))
    measured = [p.batch_size for p in t.points if p.source == "measured"]
    assert measured == [1, 8, 64, 256]  # eager and graph trace at those sizes
    assert {p.source for p in t.points if p.batch_size not in measured} == {"interpolated"}
    truth = costs_from_timings(h200 / "truth.json", "1b")
    # Graph steps barely inflate under the profiler, and the model carries them to the other timed sizes: within 5%
    # of the unprofiled truth at every timed size (bs 1, 2, 4, ..., 256).
    for b in truth.batch_sizes:
        assert t.at(b).graph_us == pytest.approx(truth.at(b).graph_us, rel=0.05), b
    g = [t.at(b).graph_us for b in measured]
    assert g == sorted(g)
    assert all(t.at(b).eager_us > 3 * t.at(b).graph_us for b in measured)  # truth: 3.3x at bs 256, 5.6x at bs 1


def test_plan_with_truth_and_skewed_distribution(h200, dist_csv, capsys):
    d = _plan_json(capsys, [str(h200), "--model", "1b", "--distribution", str(dist_csv)])
    assert d["schema"] == "launchgap.plan/1"
    assert any("truth.json" in n for n in d["inputs"])
    # No budget: every distribution size is its own graph, nothing is padded.
    assert d["buckets"] == sorted(SKEWED)
    assert d["padding_waste_us"] == 0.0
    assert d["crossover_batch_size"] is None  # the 1b model is launch-bound up to bs 256
    assert d["expected_step_us"] < d["all_eager_expected_step_us"] / 5
    for name in ("vllm", "sglang", "tensorrt_llm"):
        b = d["baselines"][name]
        assert b["expected_step_us"] >= d["expected_step_us"]  # the unbounded optimum beats any list
        assert b["n_graphs"] == len(b["buckets"])
    assert [b["n_graphs"] for b in d["baselines"].values()] == [51, 36, 19]
    assert d["configs"]["vllm"]["cudagraph_capture_sizes"] == d["buckets"]
    assert sum(r["weight"] for r in d["per_batch"]) == pytest.approx(1.0)
    assert {r["source"] for r in d["per_batch"]} == {"measured", "interpolated"}


def test_budget_trades_graphs_for_padding(h200, dist_csv, capsys):
    argv = [str(h200), "--model", "1b", "--distribution", str(dist_csv)]
    k4 = _plan_json(capsys, argv + ["--max-graphs", "4"])
    k8 = _plan_json(capsys, argv + ["--max-graphs", "8"])
    free = _plan_json(capsys, argv)
    assert len(k4["buckets"]) == 4 and len(k8["buckets"]) == 8
    assert free["expected_step_us"] <= k8["expected_step_us"] <= k4["expected_step_us"]
    assert k4["buckets"][-1] == 256 and k8["buckets"][-1] == 256  # eager at 256 costs 3x a padded graph
    assert k4["padding_waste_us"] > k8["padding_waste_us"] > 0
    assert k8["baselines"]["vllm"]["within_budget"] is False
    # Memory: truth.json measured 2 MiB pool growth per graph; 10 MiB allow 5 graphs.
    mem = _plan_json(capsys, argv + ["--memory-budget-mib", "10"])
    assert mem["memory"]["graph_memory_mib"] == 2.0 and len(mem["buckets"]) == 5


def test_held_out_style_eager_traces_only(h200, reports):
    """Plan from eager traces (graph costs predicted) with 8 graphs, score with unprofiled truth."""
    eager = [r for r in reports if r.mode == "eager"]
    truth = costs_from_timings(h200 / "truth.json", "1b")
    dists = {"listed": SKEWED, "zipf": {b: 1000.0 / b for b in range(1, 257)}}
    for name, dist in dists.items():
        plan = plan_capture(costs_from_steps([trace_steps(r) for r in eager]), dist, PlanOptions(max_graphs=8))
        # graph costs predicted (from the eager steps' kernels); eager measured at 1, 8, 64, 256, linear between
        assert {p.source for p in plan.costs.points} == {"predicted", "interpolated"}
        got = score_buckets(truth, dist, plan.buckets).expected_step_us
        best = plan_capture(truth, dist, PlanOptions(max_graphs=8)).expected_step_us
        # measured: listed within 2%; zipf 2.7% (1.4% before the occupancy rule, 1.9% with graph costs linear
        # between the four predicted sizes before the cost curve). This older recording's cuDNN attention holds 2
        # blocks per SM: whole waves over-predicted it from bs 1 and 8 at 128 rows (57 us a launch from bs 8, against
        # ~40 interpolated between bs 64's 22.5 and bs 256's 74.3; the rule now gives 43), which hid the matmuls' and
        # element-wise kernels' growth below the ridge that the model keeps flat: the curves from bs 1 and 8 are now
        # 5-6% low at 128 (docs/costmodel.md)
        assert best <= got <= best * 1.03, name


def test_one_eager_trace_prices_every_size(h200, dist_csv, capsys):
    """One eager trace at one batch size: eager costs at the other sizes from its eager curve (scaled to its own
    steps), so the plan weighs every size of the distribution; scored on the unprofiled truth with 4 graphs."""
    truth = costs_from_timings(h200 / "truth.json", "1b")
    best = plan_capture(truth.extended_to(SKEWED), SKEWED, PlanOptions(max_graphs=4)).expected_step_us
    for b in (1, 8, 64):
        d = _plan_json(capsys, [str(h200 / f"1b_bs{b}_eager.json.gz"), "--distribution", str(dist_csv),
                                "--max-graphs", "4"])
        assert not any("left out" in n for n in d["warnings"]), d["warnings"]
        assert any(n.startswith("eager costs at the other sizes") for n in d["warnings"])
        assert len(d["buckets"]) == 4  # with one size's eager cost alone every size cost the same: one graph, [256]
        got = score_buckets(truth.extended_to(SKEWED), SKEWED, d["buckets"]).expected_step_us
        assert best <= got <= best * 1.03, (b, d["buckets"], got, best)


def test_crossover_70b_slice(h200, dist_csv, capsys):
    d = _plan_json(capsys, ["--timings", str(h200 / "truth.json"), "--model", "70b-slice",
                            "--distribution", str(dist_csv), "--max-graphs", "4"])
    # Linear between bs 128 (eager 6,731.6 fitted, graph 5,228.4) and 256 (7,787.6 / 7,809.6):
    # eager/graph - 1 falls under 5% from bs 225.
    assert d["crossover_batch_size"] == 225
    assert d["buckets"] == [1, 6, 32, 96]
    assert [r["bucket"] for r in d["per_batch"] if r["batch_size"] >= 128] == [None, None, None]


def test_text_and_markdown(h200, dist_csv, capsys):
    assert main(["plan", str(h200), "--model", "1b", "--distribution", str(dist_csv), "--max-graphs", "8"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("Capture 8 graphs [1, 4, 8, 16, 32, 64, 128, 256]")
    for s in ("Against the servers' default lists", "vLLM default (over budget)", "Per batch size", "crossover",
              "--cuda-graph-bs 1 4 8 16 32 64 128 256", "enable_padding: true",
              "default lists as of: vLLM V1 engine (0.11+, max_cudagraph_capture_size); SGLang current"):
        assert s in out
    assert main(["plan", str(h200), "--model", "1b", "--distribution", str(dist_csv), "--format",
                 "markdown"]) == 0
    md = capsys.readouterr().out
    assert md.startswith("**Capture 16 graphs") and "| this plan |" in md


def test_traces_only_distribution_and_subprocess(h200, tmp_path):
    files = [str(f) for f in sorted(h200.glob("*.json.gz"))]
    out = tmp_path / "plan.json"
    # launchgap record sweeps (one batch size each) are benchmarks: costs, never the production distribution
    r = subprocess.run([sys.executable, "-m", "launchgap", "plan", *files, "--format", "json", "--output", str(out)],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 2 and r.stderr.strip() == (
        "launchgap: error: no batch-size distribution: benchmark traces (recorded by launchgap record, or passed "
        "with --costs) give costs only; pass --distribution FILE or a serving trace")
    dist = tmp_path / "d.csv"
    dist.write_text("1,1\n8,1\n64,1\n256,1\n")
    r = subprocess.run([sys.executable, "-m", "launchgap", "plan", *files, "--distribution", str(dist), "--format",
                        "json", "--output", str(out)], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    d = json.loads(out.read_text())
    assert [(x["batch_size"], x["weight"]) for x in d["per_batch"]] == [(1, 0.25), (8, 0.25), (64, 0.25),
                                                                         (256, 0.25)]
    assert d["buckets"] == [1, 8, 64, 256]
    assert any(n.startswith("8 benchmark trace(s) (recorded by launchgap record, or --costs) give costs only")
               for n in d["inputs"])
