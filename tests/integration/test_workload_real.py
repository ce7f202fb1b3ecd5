"""Workloads and profiler settings on the bundled H200 traces: 1b and 8b are never pooled."""
from __future__ import annotations

import json

import pytest

from launchgap.cli import main
from launchgap.fleet import FleetAccumulator, summarize_trace
from launchgap.loaders import load_trace
from launchgap.overhead_fit import main as fit_main
from launchgap.planning.request import PlanInput, PlanRequest
from launchgap.report import analyze_trace
from tests.conftest import REPO


@pytest.fixture(scope="module")
def h200(reference_traces):
    d = reference_traces / "h200"
    assert (d / "timings.json").is_file(), f"{d} is part of the repository"
    return d


@pytest.fixture(scope="module")
def reports(h200, reference_traces):
    files = sorted(h200.glob("*.json.gz")) + sorted((reference_traces / "h200-1b").glob("*.json.gz")) \
        + sorted((reference_traces / "h200x2-tp2-1b").glob("*.json.gz"))
    return {f"{f.parent.name}/{f.name.removesuffix('.json.gz')}": analyze_trace(load_trace(f)) for f in files}


def test_one_workload_per_model_across_batch_sizes_and_modes(reports) -> None:
    by_model: dict[str, set[str]] = {}
    for name, rep in reports.items():
        folder, base = name.split("/")
        model = folder + ":" + base.split("_bs")[0] + ("_rank" + base[-1] if "rank" in base else "")
        by_model.setdefault(model, set()).add(rep.workload.id)
    # tiny, 1b, 8b, 70b-slice of the harness (bs 1 and 64, eager and graph), the reference 1b (bs 8/64,
    # eager and graph), and the two ranks of the tensor-parallel 1b: one id each, all different.
    assert {m: len(ids) for m, ids in by_model.items()} == {m: 1 for m in by_model}
    assert len({next(iter(ids)) for ids in by_model.values()}) == len(by_model) == 7


def test_1b_and_8b_signatures(reports) -> None:
    w1, w8 = reports["h200/1b_bs64_eager"].workload, reports["h200/8b_bs1_graph"].workload
    assert (w1.kernels_per_step, w1.structural_kernels_per_step) == (737, 640)
    assert (w8.kernels_per_step, w8.structural_kernels_per_step) == (1489, 1264)
    assert w1.device == w8.device == "NVIDIA H200" and w1.families == w8.families  # same code, other depth
    assert reports["h200/1b_bs1_eager"].workload.id == reports["h200/1b_bs64_graph"].workload.id == w1.id


def test_profiler_settings_of_the_harness_traces(reports) -> None:
    for name, rep in reports.items():
        ps = rep.summary.profiler_settings
        if rep.mode == "eager":
            assert ps["tier"] == "shapes" and ps["record_shapes"] is True, name  # record_shapes=True in the harness
            assert 0.4 < ps["host_ref_us"] < 1.2, name
            lo, mid, hi = (rep.summary.predicted_speedup_low, rep.summary.predicted_speedup,
                           rep.summary.predicted_speedup_high)
            assert lo < mid < hi, name


def test_plan_cli_plans_each_workload(h200, tmp_path, capsys) -> None:
    files = [str(h200 / f) for f in ("1b_bs1_eager.json.gz", "1b_bs64_eager.json.gz", "8b_bs1_eager.json.gz")]
    # launchgap record sweeps are benchmarks: costs only, the distribution from a histogram
    dist = tmp_path / "d.csv"
    dist.write_text("1,3\n64,1\n")
    files = [*files, "--distribution", str(dist)]
    assert main(["plan", *files, "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    plans = doc["workloads"]
    # 1b (bs 1 and 64) and 8b (bs 1): each plan sees only its own model's costs (8b's extend from its bs 1).
    assert [(p["workload"]["kernels_per_step"], [r["batch_size"] for r in p["per_batch"]]) for p in plans] \
        == [(737, [1, 64]), (1489, [1, 64])]
    ids = [p["workload"]["id"] for p in plans]
    assert plans[0]["per_batch"][0]["eager_us"] < plans[1]["per_batch"][0]["eager_us"]  # 1b is cheaper than 8b
    assert main(["plan", *files, "--workload", ids[1]]) == 0
    out = capsys.readouterr().out
    labels = [p["workload"]["label"] for p in plans]
    # one plan, its workload named by its label (the id the user passed beside it)
    assert f"workload {labels[1]} ({ids[1]})" in out and "Workload " not in out
    assert main(["plan", *files]) == 0
    text = capsys.readouterr().out
    # a title per workload: its label, and the id only as the handle --workload takes
    assert [line for line in text.splitlines() if line.startswith("Workload ")] == [
        f"Workload {lab} (--workload {i})" for lab, i in zip(labels, ids)]
    assert f"of {labels[0]}" in text and "trace(s) of wl-" not in text  # the plan's sources too
    assert main(["plan", *files, "--workload", "wl-00000000"]) == 2
    assert "is not among the traces' workloads" in capsys.readouterr().err


def test_fleet_plans_each_workload_and_compares_peers_within_one(h200, tmp_path) -> None:
    acc = FleetAccumulator()
    for f in ("1b_bs1_eager.json.gz", "1b_bs64_eager.json.gz", "8b_bs1_eager.json.gz"):
        rec = summarize_trace(h200 / f)
        assert rec["error"] is None and rec["workload"]["id"].startswith("wl-") and rec["benchmark"] is True
        acc.add(rec)
    # launchgap record sweeps give costs only, in a fleet as in launchgap plan: no distribution of their own
    rep = acc.finish()
    assert rep.batch_histogram == {} and rep.benchmark_traces == 3
    assert all(w.plan is None and w.plan_note.startswith("no batch-size distribution: benchmark traces")
               for w in rep.workloads)
    dist = tmp_path / "d.csv"
    dist.write_text("1,3\n64,1\n")
    req = PlanRequest(inputs=(PlanInput("distribution", str(dist), ("distribution",), path=str(dist)),))
    rep = acc.finish(req)
    assert rep.plan is None and "2 workloads" in rep.plan_note
    assert [w.traces for w in rep.workloads] == [2, 1]
    assert all(w.plan is not None for w in rep.workloads)
    assert {r.step_vs_peers for r in rep.rows} == {1.0}  # no trace has a peer of its own workload, mode and bs
    chosen = acc.finish(req, workload=rep.workloads[1].id)
    assert chosen.plan is not None and [r["batch_size"] for r in chosen.plan.to_dict()["per_batch"]] == [1, 64]
    assert json.loads(json.dumps(rep.to_dict()))["workloads"][0]["workload"]["id"] == rep.workloads[0].id


def test_fit_command_on_the_bundled_timings(h200, capsys) -> None:
    """The bundled timings were not taken in the same process as the traces (the host's speed changed
    between them, see traces/h200/PROVENANCE.md), so this checks the command, not a target."""
    assert fit_main(["fit", str(h200)]) == 0
    out = capsys.readouterr().out
    assert out.count("h200/") == 6  # the six eager traces against timings.json
    assert "former 1.8 us/event: speedup error median" in out and "refit (ref), leave-one-out" in out


@pytest.mark.parametrize("files", [
    # vLLM 0.24 eager, with and without Python stacks (one server configuration, constant batch 16)
    [f"h200-vllm-2026-12-04/interleaved/eager-{s}/block{b}.pt.trace.json.gz" for s in ("stack", "nostack")
     for b in range(3)],
    # OLMoE's graph at batch 8 and 64 and its serving run: the driver's memcpy128 runs at 64 only
    ["h200-hf-2026-12-02/traces/olmoe-1b-7b-like_bs8_graph.json.gz",
     "h200-hf-2026-12-02/traces/olmoe-1b-7b-like_bs64_graph.json.gz",
     "h200-padding-2026-12-03d/olmoe-1b-7b-like/serving/olmoe-1b-7b-like_serving_serve.json.gz"],
    # vLLM 0.24's V2 runner, FULL graphs: a constant batch of 16 and a server whose requests arrive and finish (its
    # staged request-state writes, _apply_write_kernel, run in most of its steps and in none of the constant batch)
    ["h200-vllm-2026-12-04/interleaved/full-stack-v2runner/block0.pt.trace.json.gz",
     "h200-vllm-2026-12-04/full-stack/shrinking.pt.trace.json.gz",
     "h200-vllm-2026-12-04/full-nostack/arrivals.pt.trace.json.gz"],
], ids=["vllm-eager-blocks", "olmoe-sizes", "vllm-v2-constant-and-arrivals"])
def test_one_server_or_model_is_one_workload(files: list[str]) -> None:
    ids = {analyze_trace(load_trace(REPO / "traces" / f)).workload.id for f in files}
    assert len(ids) == 1
