"""Held-out check of the planner's extrapolation (issue 16, fix 6) on the bundled H200 timings.

The production case: an eager trace whose steps cover batch 4-159 while the batch-size
distribution reaches 232. Here the costs are the harness's unprofiled timings of each preset
(bs 1, 2, 4, ..., 256), cut at 159 (so the planner sees bs 1..128); the plan at 8 graphs is
made on the cut table and scored on the full one, against the oracle plan made on the full
table. The bar is 2%. Clamping above the largest size, as the planner did before, misses it.
"""
from __future__ import annotations

import numpy as np
import pytest

from launchgap.planning.costs import CostPoint, CostTable
from launchgap.planning.inputs import costs_from_timings
from launchgap.planning.planner import PlanOptions, plan_capture, score_buckets

MODELS = ("tiny", "1b", "8b", "70b-slice")
_B = np.arange(4, 233)
#: Decode batch-size distributions over 4..232: a broad hump (mode 48), flat, and decaying.
DISTRIBUTIONS = {
    "hump": dict(zip(_B.tolist(), (_B * np.exp(-_B / 48)).tolist())),
    "flat": {int(b): 1.0 for b in _B},
    "decaying": dict(zip(_B.tolist(), np.exp(-_B / 80).tolist())),
}


def _gap(full: CostTable, seen: CostTable, dist: dict[int, float]) -> float:
    oracle = plan_capture(full, dist, PlanOptions(max_graphs=8))
    plan = plan_capture(seen, dist, PlanOptions(max_graphs=8))
    return score_buckets(full, dist, plan.buckets).expected_step_us / oracle.expected_step_us - 1


def _clamped(table: CostTable, top: int) -> CostTable:
    """The old rule: every size above the table's largest costs what the largest does."""
    hi = table.points[-1]
    extra = tuple(CostPoint(b, hi.eager_us, hi.graph_us, "interpolated") for b in range(hi.batch_size + 1, top + 1))
    return CostTable(table.points + extra)


@pytest.mark.parametrize("model", MODELS)
@pytest.mark.parametrize("dist_name", sorted(DISTRIBUTIONS))
def test_plan_from_costs_cut_at_159_is_within_2pct_of_oracle(reference_traces, model, dist_name):
    full = costs_from_timings(reference_traces / "h200" / "timings.json", model)
    seen = CostTable(tuple(p for p in full.points if p.batch_size <= 159), full.origin)
    dist = DISTRIBUTIONS[dist_name]
    gap = _gap(full, seen, dist)
    assert 0 <= gap < 0.02, gap
    # The check has teeth: clamping (the old rule) is well over the fitted extrapolation's gap.
    assert _gap(full, _clamped(seen, 232), dist) > 0.01
