"""Tensor-parallel decode on two H200s (traces/h200x2-tp2-1b): collective waits.

The acceptance of issue 11: from each rank's eager trace alone, and from both ranks together,
the predicted CUDA-graph step is within 10% of the unprofiled graph step measured per rank
(truth.json), and the two ranks of one batch size agree. The graph traces must analyse as
graphed, with the ranks in step.
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from launchgap.loaders import expand_paths, load_trace
from launchgap.ranks import analyze_for_plan, analyze_job, analyze_with_collectives, group_by_job

TOLERANCE = 0.10
BATCH_SIZES = (1, 64)


@pytest.fixture(scope="module")
def tp_dir(reference_traces: Path) -> Path:
    return reference_traces / "h200x2-tp2-1b"


@pytest.fixture(scope="module")
def truth(tp_dir: Path) -> dict[tuple[int, int], float]:
    rows = json.loads((tp_dir / "truth.json").read_text())["rows"]
    return {(r["rank"], r["bs"]): r["graph_us"] for r in rows}


@pytest.fixture(scope="module")
def traces(tp_dir: Path) -> dict[tuple[str, int, int], object]:
    return {(mode, bs, r): load_trace(tp_dir / f"tp1b_bs{bs}_{mode}_rank{r}.json.gz")
            for mode in ("eager", "graph") for bs in BATCH_SIZES for r in (0, 1)}


def _rel(pred: float, true: float) -> float:
    return abs(pred - true) / true


@pytest.mark.parametrize("bs", BATCH_SIZES)
def test_each_rank_alone_predicts_its_graph_step(traces, truth, bs: int) -> None:
    preds = {}
    for r in (0, 1):
        rep = analyze_with_collectives(traces[("eager", bs, r)])
        preds[r] = rep.summary.predicted_graph_step_us_median
        assert _rel(preds[r], truth[(r, bs)]) <= TOLERANCE, (r, preds[r], truth[(r, bs)])
        assert rep.rank == r and rep.world_size == 2
        assert any("collective wait for peers" in w for w in rep.warnings)
    # rank 1 waits at every collective (its host runs ahead), rank 0 never does
    assert _rel(preds[0], preds[1]) <= TOLERANCE
    r1 = analyze_with_collectives(traces[("eager", bs, 1)])
    assert r1.summary.verdict == "waiting for peers"
    assert r1.summary.idle_fraction_by_cause["peer"] > 0.8


@pytest.mark.parametrize("bs", BATCH_SIZES)
def test_ranks_together_predict_the_group_step(traces, truth, bs: int) -> None:
    job = analyze_job([traces[("eager", bs, 0)], traces[("eager", bs, 1)]])
    s = job.summary
    assert s.wait_estimate == "aligned" and s.step_match == "name"
    assert s.aligned_collectives == 128  # 2 all-reduces x 16 layers x 4 steps
    for r in (0, 1):
        assert _rel(s.predicted_graph_step_us_median, truth[(r, bs)]) <= TOLERANCE
        assert _rel(s.predicted_graph_step_us_by_rank[r], truth[(r, bs)]) <= TOLERANCE
    # one host: the ranks' clocks agree and matched collectives end together
    assert all(abs(o) < 1.0 for o in s.clock_offset_us_by_rank)
    assert s.end_residual_us_median < 1.0
    assert s.slowest_rank == 0 and job.ranks[0].last_at_collectives == 128
    assert job.ranks[0].host_idle_fraction > 0.8
    assert s.start_skew_us_median > 100.0  # rank 1's collectives wait hundreds of us for rank 0
    assert len(job.steps) == 4 and all(st.last_rank == 0 for st in job.steps)


@pytest.mark.parametrize("bs", BATCH_SIZES)
def test_graph_traces_are_sane(traces, truth, bs: int) -> None:
    job = analyze_job([traces[("graph", bs, 0)], traces[("graph", bs, 1)]])
    s = job.summary
    assert s.wait_estimate == "aligned"
    for rep in job.reports:
        assert rep.mode == "graph"
        assert rep.summary.idle_fraction_by_cause["peer"] < 0.02
    assert s.start_skew_us_median < 5.0
    assert "run in step" in s.slowest_rank_reason
    for r in (0, 1):
        assert _rel(s.predicted_graph_step_us_median, truth[(r, bs)]) <= TOLERANCE
        alone = analyze_with_collectives(traces[("graph", bs, r)])
        assert _rel(alone.summary.predicted_graph_step_us_median, truth[(r, bs)]) <= TOLERANCE
        # each NCCL node priced at its own replay cost (1.63-1.88 us measured, other nodes 0.34): every prediction
        # within 3.5% of the unprofiled replay (2.9-5.1% under it at the common node cost)
        assert 1.5 < alone.summary.collective_node_us < 2.0
        assert _rel(alone.summary.predicted_graph_step_us_median, truth[(r, bs)]) <= 0.035
        assert _rel(s.predicted_graph_step_us_by_rank[r], truth[(r, bs)]) <= 0.035


@pytest.mark.parametrize("bs", BATCH_SIZES)
def test_a_waiting_ranks_cost_curve_scales_its_collectives_work(traces, truth, bs: int) -> None:
    """Rank 1 waits at every all-reduce of its eager steps (25 ms a step at bs 64): the plan's cost curve scales each
    collective's work, not its wait. Scaling the waits, the curve from bs 64 read -8,100 us at bs 1 (the plan refused:
    costs must be positive) and the curve from bs 1 +955% at bs 64; now -7.6..+5.2% off the unprofiled graph step
    at both sizes, both ranks."""
    for r in (0, 1):
        rep, _ = analyze_for_plan(traces[("eager", bs, r)])
        curve = rep.cost_curve
        assert (curve.us > 0).all()
        for b in BATCH_SIZES:
            assert _rel(float(curve.at(b)), truth[(r, b)]) <= 0.08, (r, bs, b, float(curve.at(b)))


def test_directory_groups_into_four_jobs(tp_dir: Path) -> None:
    groups = group_by_job(expand_paths([tp_dir]))
    assert sorted(len(g) for g in groups) == [2, 2, 2, 2]
    assert all([p.name.endswith(f"rank{i}.json.gz") for i, p in enumerate(g)] == [True, True] for g in groups)
