"""``launchgap fleet`` on serving-engine traces: per-trace and fleet step counts by phase, decode-only plan."""
from __future__ import annotations

import copy
from pathlib import Path

from launchgap.fleet import FleetAccumulator, summarize_trace
from launchgap.render import render_fleet

SGLANG = "tracelens-sglang-qwen3-8b-decode-mi300x"
FILES = (f"{SGLANG}/sglang_Qwen3-8B_decode.json.gz",  # 1 decode step, bs 32
         f"{SGLANG}/sglang_Qwen3-8B_prefilldecode.json.gz",  # 1 prefill (EXTEND) step, 15 requests
         "tracelens-vllm-prefilldecode-piecewise-mi300x/graph_execution.json.gz")  # 1 mixed step, 46 requests


def test_fleet_counts_steps_by_phase_and_plans_decode_only(reference_traces: Path) -> None:
    recs = [summarize_trace(reference_traces / "engines" / f) for f in FILES]
    assert [r["error"] for r in recs] == [None] * 3
    assert [r["steps_by_phase"] for r in recs] == [
        {"decode": 1, "prefill": 0, "mixed": 0, "unknown": 0},
        {"decode": 0, "prefill": 1, "mixed": 0, "unknown": 0},
        {"decode": 0, "prefill": 0, "mixed": 1, "unknown": 0}]
    assert [r["steps"]["phase"] for r in recs] == [["decode"], ["prefill"], ["mixed"]]
    assert [r["steps"]["graph_coverage"] for r in recs] == [["full"], ["eager"], ["piecewise"]]
    assert [r["batch_histogram"] for r in recs] == [{"32": 1}, {}, {}]  # prefill and mixed steps: no bucket
    acc = FleetAccumulator()
    for r in recs:
        acc.add(r)
    rep = acc.finish()
    assert rep.phases == {"decode": 1, "prefill": 1, "mixed": 1, "unknown": 0}
    assert rep.engines == {"sglang": 2, "vllm": 1}
    assert [(r.engine, r.steps_by_phase["prefill"]) for r in rep.rows] == [("sglang", 0), ("sglang", 1), ("vllm", 0)]
    assert rep.batch_histogram == {32: 1} and rep.unknown_batch_steps == 0
    assert rep.to_dict()["phases"] == rep.phases
    text = render_fleet(rep)
    assert "steps by phase: decode 1, prefill 1, mixed 1; engines: sglang 2, vllm 1" in text


def test_results_without_phases_read_as_unknown(reference_traces: Path) -> None:
    """A results file written before phases were recorded: every step of unknown phase, all planned."""
    rec = summarize_trace(reference_traces / "engines" / FILES[1])
    old = copy.deepcopy(rec)
    del old["steps"]["phase"], old["steps"]["graph_coverage"], old["steps_by_phase"]
    acc = FleetAccumulator()
    acc.add(old)
    rep = acc.finish()
    assert rep.phases == {"decode": 0, "prefill": 0, "mixed": 0, "unknown": 1}
    assert rep.batch_histogram == {15: 1}


def test_the_fleet_plan_says_which_input_gave_what_as_plan_does(reference_traces: Path, capsys) -> None:
    """A vLLM serving trace in a fleet: its plan carries ``launchgap plan``'s notes on its inputs, the one on what the
    list does to vLLM's prefill and mixed steps included (from the steps' tokens the summary keeps); a summary written
    before tokens were recorded plans the same and says nothing of those steps."""
    import json

    from launchgap.cli import main

    trace = reference_traces / "h200-vllm-2026-12-04/full-nostack/shrinking.pt.trace.json.gz"
    assert main(["plan", str(trace), "--format", "json"]) == 0
    want = json.loads(capsys.readouterr().out)["inputs"]
    rec = summarize_trace(trace)
    assert sum(t is not None and t > 0 for t in rec["steps"]["tokens"]) == len(rec["steps"]["tokens"])
    acc = FleetAccumulator()
    acc.add(rec)
    rep = acc.finish()
    assert list(rep.plan_inputs) == want and rep.to_dict()["workloads"][0]["inputs"] == want
    mixed = [n for n in want if n.startswith("vLLM runs prefill and mixed steps as PIECEWISE graphs")]
    assert len(mixed) == 1 and "of the serving trace(s)' 3 such steps (249-16,384 tokens)" in mixed[0]
    assert f"note: {mixed[0]}" in render_fleet(rep)
    old = copy.deepcopy(rec)
    del old["steps"]["tokens"]
    acc = FleetAccumulator()
    acc.add(old)
    rep_old = acc.finish()
    assert rep_old.plan.to_dict() == rep.plan.to_dict()
    assert list(rep_old.plan_inputs) == [n for n in want if n not in mixed]
