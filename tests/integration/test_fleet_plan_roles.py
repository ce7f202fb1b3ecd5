"""fleet and plan read the same inputs the same way: a serving trace gives the distribution, launchgap record's
sweeps of the same workload give costs only (issue 26), through the one plan builder."""
from __future__ import annotations

import json

import numpy as np

from launchgap.cli import main
from launchgap.fleet import FleetAccumulator, summarize_trace, summary_steps
from launchgap.loaders import load_trace
from launchgap.planning.inputs import distribution_from_steps
from launchgap.planning.request import PlanRequest, build_plan, trace_steps
from launchgap.ranks import analyze_with_collectives
from launchgap.render import render_fleet
from launchgap.workload import Workload

SERVING = "h200-session-2026-12-01/serving/1b_serving_serve.json.gz"
SWEEPS = ("h200/1b_bs1_eager.json.gz", "h200/1b_bs64_eager.json.gz")


def test_fleet_plan_equals_plan_with_sweeps_costs_only(reference_traces, capsys) -> None:
    files = [str(reference_traces / f) for f in (SERVING, *SWEEPS)]
    acc = FleetAccumulator()
    recs = [summarize_trace(f) for f in files]
    assert [r["benchmark"] for r in recs] == [False, True, True]
    assert len({r["workload"]["id"] for r in recs}) == 1  # one workload: the sweeps' costs join the serving trace's
    for r in recs:
        acc.add(r)
    rep = acc.finish()
    # the fleet's distribution is the serving trace's decode steps alone: 48 steps, none at the sweeps' bs 1
    serving = trace_steps(analyze_with_collectives(load_trace(files[0])))
    assert rep.batch_histogram == {b: int(n) for b, n in distribution_from_steps([serving]).items()}
    assert sum(rep.batch_histogram.values()) == 48 and 1 not in rep.batch_histogram
    assert rep.benchmark_traces == 2 and rep.unknown_batch_steps == 0
    # the same plan as launchgap plan on the same files: distribution, costs (the sweeps' bs 1 and 64), buckets
    assert main(["plan", *files, "--format", "json"]) == 0
    ref = json.loads(capsys.readouterr().out)
    notes, workload = ref.pop("inputs"), ref.pop("workload")  # the plan command's own additions to the plan
    got = rep.plan.to_dict()
    assert got == ref and workload["id"] == rep.workloads[0].id
    assert [(p["batch_size"], p["weight"]) for p in got["per_batch"]] == [
        (b, round(n / 48, 9)) for b, n in sorted(rep.batch_histogram.items())]
    assert any(n.startswith("2 benchmark trace(s) (recorded by launchgap record, or --costs) give costs only")
               for n in notes)
    # the same request and notes from the one builder, given the fleet's planning view of the three summaries
    steps = [summary_steps(r["path"], r["mode"], r["summary"], *_cols(r), r["cost_curve"], r["benchmark"])
             for r in recs]
    plan, built_notes = build_plan(PlanRequest().with_traces(steps, Workload.from_dict(workload).label))
    assert plan.to_dict() == got and built_notes == notes
    assert "1: 0" not in " ".join(render_fleet(rep).splitlines()) and \
        "(48 steps with a known size, 0 unknown; 2 launchgap record sweep(s) give costs only)" in render_fleet(rep)


def _cols(r: dict) -> tuple:
    """The step columns summary_steps takes, from a fleet summary (as FleetAccumulator.add reads them)."""
    st = r["steps"]
    bs = np.array([-1 if b is None else b for b in st["batch_size"]], dtype=np.int64)
    return (bs, np.array(st["dur_us"], dtype=float), np.array(st["predicted_graph_us"], dtype=float), st["phase"],
            Workload.from_dict(r["workload"]))
