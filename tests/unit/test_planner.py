"""Capture planner: exact numbers on a tiny instance, properties against brute force."""
from __future__ import annotations

import itertools
import json

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from launchgap.errors import InputError
from launchgap.planning.costs import CostPoint, CostTable
from launchgap.render import render_plan
from launchgap.planning.memory import ListCost, MemoryModel, ModelDims
from launchgap.planning.planner import (
    SCHEMA,
    BaselineSpec,
    PlanOptions,
    plan_capture,
    score_buckets,
    sglang_default_sizes,
    tensorrt_llm_default_sizes,
    vllm_default_sizes,
)

# bs 1: eager 100, graph 20; bs 4: 100, 50; bs 8: 120, 80. Linear between: bs 2 graph 30.
TINY = CostTable((CostPoint(1, 100.0, 20.0, "measured", None), CostPoint(4, 100.0, 50.0, "measured", None),
                  CostPoint(8, 120.0, 80.0, "measured", None)), "tiny")
DIST = {1: 5, 2: 3, 4: 2}  # shares 0.5, 0.3, 0.2


# --- exact numbers ------------------------------------------------------------------------------

@pytest.mark.parametrize("k, buckets, us", [
    (0, [], 100.0),             # all eager
    (1, [2], 44.0),             # 0.8 * 30 + 0.2 * 100
    (2, [2, 4], 34.0),          # 0.8 * 30 + 0.2 * 50
    (3, [1, 2, 4], 29.0),       # 0.5 * 20 + 0.3 * 30 + 0.2 * 50
    (None, [1, 2, 4], 29.0),
])
def test_pad_plan_tiny(k, buckets, us):
    plan = plan_capture(TINY, DIST, PlanOptions(max_graphs=k))
    assert list(plan.buckets) == buckets
    assert plan.expected_step_us == pytest.approx(us, abs=1e-9)
    assert plan.all_eager_expected_step_us == pytest.approx(100.0)


@pytest.mark.parametrize("k, buckets, us", [
    (1, [1], 60.0),             # savings: bs1 0.5*80=40, bs2 0.3*70=21, bs4 0.2*50=10
    (2, [1, 2], 39.0),
    (3, [1, 2, 4], 29.0),
])
def test_exact_plan_tiny(k, buckets, us):
    plan = plan_capture(TINY, DIST, PlanOptions(max_graphs=k, padding="exact"))
    assert list(plan.buckets) == buckets
    assert plan.expected_step_us == pytest.approx(us, abs=1e-9)


def test_padding_waste_and_rows_tiny():
    s = score_buckets(TINY, DIST, [2, 4])
    # bs 1 runs the bs-2 graph: 0.5 * (30 - 20) = 5 us wasted per step.
    assert s.padding_waste_us == pytest.approx(5.0)
    # rows computed: 0.5*2 + 0.3*2 + 0.2*4 = 2.4, of which padding 0.5*1.
    assert s.padded_rows_fraction == pytest.approx(0.5 / 2.4)
    assert s.graph_step_fraction == pytest.approx(1.0)
    s = score_buckets(TINY, DIST, [2], padding="exact")
    assert s.expected_step_us == pytest.approx(0.7 * 100 + 0.3 * 30)
    assert s.graph_step_fraction == pytest.approx(0.3)
    assert s.padding_waste_us == 0.0


def test_memory_budget_caps_graphs():
    plan = plan_capture(TINY, DIST, PlanOptions(memory_budget_mib=25, graph_memory_mib=10))
    assert list(plan.buckets) == [2, 4] and plan.max_graphs_effective == 2
    assert plan.memory_used_mib == pytest.approx(20.0)
    assert any("allows 2 graphs" in w for w in plan.warnings)
    assert any("the budget binds: without it 3 graphs would give 29.0 us" in w for w in plan.warnings)
    plan = plan_capture(TINY, DIST, PlanOptions(max_graphs=1, memory_budget_mib=25, graph_memory_mib=10))
    assert list(plan.buckets) == [2]


def test_graph_memory_sources():
    assert "assumed 32 MiB" in plan_capture(TINY, DIST).graph_memory_source
    t = CostTable((CostPoint(1, 100.0, 20.0, "measured", 3 * 2**20), CostPoint(4, 100.0, 50.0, "measured", 0)))
    plan = plan_capture(t, DIST)
    assert plan.graph_memory_mib == pytest.approx(3.0)
    assert "measured" in plan.graph_memory_source


def test_max_batch_size_sends_larger_batches_eager():
    plan = plan_capture(TINY, DIST, PlanOptions(max_batch_size=2))
    assert list(plan.buckets) == [1, 2]
    assert plan.expected_step_us == pytest.approx(0.5 * 20 + 0.3 * 30 + 0.2 * 100)
    assert any("20.0% of steps have a batch size above --max-batch-size 2" in w for w in plan.warnings)
    assert plan.baselines["tensorrt_llm"].score.buckets == (1, 2)


@pytest.mark.parametrize("threshold, crossover", [(0.05, None), (0.6, 7), (2.0, 3), (5.0, 1)])
def test_crossover_tiny(threshold, crossover):
    # win = e/g - 1: bs1 4.0, bs2 2.33, bs3 1.5, bs4 1.0, bs5 .826, bs6 .692, bs7 .586, bs8 .5
    plan = plan_capture(TINY, DIST, PlanOptions(win_threshold=threshold))
    assert plan.crossover_batch_size == crossover


@pytest.mark.parametrize("max_size, crossover", [(None, 7), (6, None), (7, 7), (2, None)])
def test_crossover_stops_at_the_largest_batch(max_size, crossover):
    # win at threshold 0.6 ends at bs 7 (test_crossover_tiny); no batch above max_size: none there
    plan = plan_capture(TINY, {1: 1}, PlanOptions(win_threshold=0.6, max_batch_size=max_size))
    assert plan.crossover_batch_size == crossover


def test_baselines_and_configs_tiny():
    plan = plan_capture(TINY, DIST, PlanOptions(max_graphs=2))
    d = plan.to_dict()
    assert d["schema"] == SCHEMA
    assert set(d["baselines"]) == {"vllm", "sglang", "tensorrt_llm"}
    v = d["baselines"]["vllm"]
    assert v["n_graphs"] == 51 and v["buckets"][:4] == [1, 2, 4, 8] and v["buckets"][-1] == 512
    assert v["expected_step_us"] == pytest.approx(29.0)  # each size has its own graph
    assert v["within_budget"] is False
    assert v["plan_saving_fraction"] == pytest.approx(1 - 34.0 / 29.0, abs=1e-6)
    assert d["configs"] == {"vllm": {"cudagraph_capture_sizes": [2, 4]}, "sglang": {"cuda_graph_bs": [2, 4]},
                            "tensorrt_llm": {"cuda_graph_config": {"batch_sizes": [2, 4], "enable_padding": True}}}
    assert d["config_snippets"]["sglang"] == "--cuda-graph-bs 2 4"
    assert [r["bucket"] for r in d["per_batch"]] == [2, 2, 4]
    assert [r["planned_us"] for r in d["per_batch"]] == [30.0, 30.0, 50.0]
    assert [r["source"] for r in d["per_batch"]] == ["measured", "interpolated", "measured"]
    assert [r["weight"] for r in d["per_batch"]] == [0.5, 0.3, 0.2]
    assert d["tradeoff"] == [{"graphs": 0, "expected_step_us": 100.0}, {"graphs": 1, "expected_step_us": 44.0},
                             {"graphs": 2, "expected_step_us": 34.0}]
    json.dumps(d, allow_nan=False)
    exact = plan_capture(TINY, DIST, PlanOptions(max_graphs=2, padding="exact")).to_dict()
    assert exact["configs"]["sglang"] == {"cuda_graph_bs": [1, 2], "disable_cuda_graph_padding": True}
    assert exact["configs"]["tensorrt_llm"]["cuda_graph_config"]["enable_padding"] is False
    assert exact["baselines"]["sglang"]["buckets"] == list(range(1, 257))


def test_no_graph_plan_configs():
    plan = plan_capture(TINY, DIST, PlanOptions(max_graphs=0))
    assert plan.buckets == () and plan.config_snippets()["vllm"] == "--enforce-eager"
    assert any("run eager" in w for w in plan.warnings)


def test_sizes_left_eager_on_a_tie_say_the_plan_rests_on_the_estimate():
    # bs 1 wins with a graph (100 -> 20 us); bs 4 and 8 tie (100, 120 us), their eager cost at its floor (the graph step itself)
    part = CostTable((CostPoint(1, 100.0, 20.0, "measured", None), CostPoint(4, 100.0, 100.0, "predicted", None),
                      CostPoint(8, 120.0, 120.0, "predicted", None)), "t")
    plan = plan_capture(part, {1: 5, 4: 3, 8: 2})
    assert plan.buckets == (1,) and not plan.eager_equals_graph
    assert plan.warnings[-1] == (
        "bs 4, 8 (50.0% of steps) run eager in this plan only because their eager cost is estimated at its floor, the "
        "graph step itself (no eager step measured there): a real eager step also pays the framework's host time per "
        "op, so capturing them may well pay; measure a few eager steps (or pass harness timings) before leaving them "
        "uncaptured")
    assert plan.eager_tied_batch_sizes == (4, 8) and plan.to_dict()["eager_tied_batch_sizes"] == [4, 8]
    assert render_plan(plan).splitlines()[0].endswith(
        "). bs [4, 8] stay eager on an estimated tie (eager cost at its floor): measure eager steps before leaving "
        "them uncaptured.")
    assert plan_capture(TINY, DIST).eager_tied_batch_sizes == ()
    # the win ends at bs 4 only where the eager estimate meets its floor: the text says so
    assert plan.crossover_batch_size == 4 and plan.crossover_on_tie
    assert ("graphs win less than 5% from batch size 4 up (where the eager estimate meets its floor, the graph step: "
            "no eager step measured)") in render_plan(plan)
    assert not plan_capture(TINY, DIST).crossover_on_tie
    # measured costs where graphs win at every size: no such note; an all-tie plan of no graphs keeps its own note
    assert not any("run eager in this plan only" in w for w in plan_capture(TINY, DIST).warnings)
    floor = CostTable((CostPoint(1, 20.0, 20.0, "predicted", None), CostPoint(8, 80.0, 80.0, "predicted", None)), "t")
    assert not any("run eager in this plan only" in w for w in plan_capture(floor, DIST).warnings)
    assert plan_capture(floor, DIST).eager_tied_batch_sizes == (1, 2, 4)  # said by eager_equals_graph's verdict
    assert "estimated tie" not in render_plan(plan_capture(floor, DIST)).splitlines()[0]


def test_equal_eager_and_graph_costs_are_no_verdict_to_turn_graphs_off():
    # an eager cost estimated at its floor (the graph step) where no eager step was measured: no graph can win
    floor = CostTable((CostPoint(1, 20.0, 20.0, "predicted", None), CostPoint(8, 80.0, 80.0, "predicted", None)), "t")
    # expected step 0.5 x 20 + 0.3 x (20 + 60/7) + 0.2 x (20 + 180/7) = 27.71 us, all eager
    plan = plan_capture(floor, DIST)
    assert plan.buckets == () and plan.eager_equals_graph and not plan_capture(TINY, DIST).eager_equals_graph
    # the JSON says so beside its configs (a script reading config_snippets would apply --enforce-eager)
    assert plan.to_dict()["eager_equals_graph"] is True and plan.to_dict()["config_snippets"]["vllm"] == "--enforce-eager"
    assert plan_capture(TINY, DIST).to_dict()["eager_equals_graph"] is False
    assert plan.warnings[-1].startswith("no bucket lowers the expected step time: eager and graph costs are equal at "
                                        "every batch size of the distribution (an eager cost estimated at its floor")
    assert render_plan(plan).splitlines()[0] == (
        "No CUDA graph is predicted to lower the expected step (27.7 us), but eager and graph costs are equal at "
        "every size (the eager one an estimate at its floor where no eager step was measured; see the notes): "
        "measure eager steps before turning graphs off.")
    assert render_plan(plan_capture(TINY, DIST, PlanOptions(max_graphs=0))).startswith("Run eager: ")
    # its configs turn graphs off: said above them
    text = render_plan(plan)
    assert text[text.index("\nConfigs\n"):].startswith(
        "\nConfigs\n(eager and graph costs tie, the eager one estimated: these configs turn graphs off; keep the "
        "server's until eager steps are measured)\nvLLM:\n    --enforce-eager")
    assert "costs tie" not in render_plan(plan_capture(TINY, DIST, PlanOptions(max_graphs=0)))


def test_distribution_beyond_costs_is_extrapolated_with_band():
    # TINY's growth over bs 2..8 (fitted on 4 and 8): eager +5 us, graph +7.5 us per row, so at
    # bs 16 eager 160, graph 140. One graph: {4} costs (50 + 160) / 2 = 105, {16} costs 140.
    plan = plan_capture(TINY, {4: 1, 16: 1}, PlanOptions(max_graphs=1))
    assert list(plan.buckets) == [4]
    assert plan.expected_step_us == pytest.approx(105.0)
    assert any("above the largest size with costs (8): extrapolated" in w for w in plan.warnings)
    x = plan.to_dict()["extrapolation"]
    assert x["batch_sizes"] == [16] and x["top_batch_size"] == 8 and x["fit_batch_sizes"] == [4, 8]
    assert (x["eager_us_per_bs"], x["graph_us_per_bs"]) == (5.0, 7.5)
    # Low line: eager 120 + 2.5 * 8 = 140; high: max(120 + 10 * 8, 80 + 15 * 8) = 200.
    assert (x["expected_step_us_low"], x["expected_step_us_high"]) == (95.0, 125.0)
    assert plan_capture(TINY, DIST).to_dict()["extrapolation"] is None


def test_server_default_lists():
    v = vllm_default_sizes()
    assert len(v) == 51 and v[:5] == [1, 2, 4, 8, 16] and v[-3:] == [480, 496, 512]
    s = sglang_default_sizes()
    assert len(s) == 36 and s[:6] == [1, 2, 4, 8, 12, 16] and s[-1] == 256
    assert sglang_default_sizes(100)[-2:] == [96, 100]
    assert sglang_default_sizes(600)[-6:] == [480, 496, 512, 544, 576, 600]  # steps of 32 above 512, max appended
    t = tensorrt_llm_default_sizes()
    assert t == [1, 2, 4] + list(range(8, 129, 8))
    assert tensorrt_llm_default_sizes(300)[-4:] == [128, 192, 256, 300]
    assert tensorrt_llm_default_sizes(4) == [1, 2, 4]
    assert tensorrt_llm_default_sizes(padding="exact") == list(range(1, 33)) + [64, 128]


@pytest.mark.parametrize("kw, msg", [
    ({"max_graphs": -1}, "--max-graphs"), ({"memory_budget_mib": -5.0}, "--memory-mib"),
    ({"capture_budget_s": float("inf")}, "--capture-seconds"), ({"kv_bytes_per_token": 0}, "--kv-bytes-per-token"),
    ({"graph_memory_mib": float("nan")}, "--graph-memory-mib"), ({"max_batch_size": 0}, "--max-batch-size"),
    ({"padding": "round"}, "--padding"), ({"win_threshold": -0.1}, "--win-threshold"),
])
def test_bad_options(kw, msg):
    with pytest.raises(InputError, match=msg):
        PlanOptions(**kw)


@pytest.mark.parametrize("dist, msg", [({}, "empty"), ({4: 0}, "no steps"), ({0: 3}, "positive"),
                                       ({4: float("inf")}, "finite")])
def test_bad_distribution(dist, msg):
    with pytest.raises(InputError, match=msg):
        plan_capture(TINY, dist)


# --- properties -------------------------------------------------------------------------------

def _reference_cost(table: CostTable, dist: dict[int, float], buckets, padding: str) -> float:
    """Direct evaluation, size by size, independent of the planner's vectorised scoring."""
    total = sum(dist.values())
    out = 0.0
    for b, w in dist.items():
        c = table.at(b)
        if padding == "pad":
            over = [x for x in buckets if x >= b]
            cost = table.at(min(over)).graph_us if over else c.eager_us
        else:
            cost = c.graph_us if b in buckets else c.eager_us
        out += w / total * cost
    return out


@st.composite
def instances(draw):
    top = draw(st.integers(2, 9))
    inner = draw(st.sets(st.integers(2, top - 1), max_size=3)) if top > 2 else set()
    obs = sorted({1, top} | inner)
    # Graphs mostly cheaper than eager at small sizes, dearer growth: budgets bind and the
    # crossover falls inside the range often enough to exercise the DP (flat costs do not).
    e0 = draw(st.integers(100, 600))
    g0 = draw(st.integers(5, 200))
    de = draw(st.lists(st.integers(0, 80), min_size=len(obs), max_size=len(obs)))
    dg = draw(st.lists(st.integers(1, 120), min_size=len(obs), max_size=len(obs)))
    pts, e, g = [], e0, g0
    for b, x, y in zip(obs, de, dg):
        e, g = e + x, g + y
        pts.append(CostPoint(b, float(e), float(g), "measured", None))
    table = CostTable(tuple(pts))
    sizes = draw(st.sets(st.integers(1, top), min_size=1, max_size=top))
    dist = {b: float(draw(st.integers(1, 30))) for b in sorted(sizes)}
    k = draw(st.one_of(st.integers(0, top), st.none()))
    max_bs = draw(st.one_of(st.none(), st.integers(1, top)))
    return table, dist, k, max_bs, top


def _all_subsets(table, dist, max_bs, top, padding) -> list[tuple[float, int]]:
    """(expected step, graphs) of every bucket set over ALL sizes 1..top, not only the
    distribution's: also checks that restricting candidates to distribution sizes loses nothing."""
    allowed = [s for s in range(1, top + 1) if max_bs is None or s <= max_bs]
    at = {s: table.at(s) for s in range(1, top + 1)}
    total = sum(dist.values())
    out = []
    for r in range(len(allowed) + 1):
        for c in itertools.combinations(allowed, r):
            cost = 0.0
            for b, w in dist.items():
                if padding == "pad":
                    over = [x for x in c if x >= b]
                    cost += w / total * (at[min(over)].graph_us if over else at[b].eager_us)
                else:
                    cost += w / total * (at[b].graph_us if b in c else at[b].eager_us)
            out.append((cost, r))
    return out


@given(instances(), st.sampled_from(["pad", "exact"]))
def test_dp_equals_brute_force(inst, padding):
    table, dist, _, max_bs, top = inst
    subsets = _all_subsets(table, dist, max_bs, top, padding)
    for k in [None, *range(top + 1)]:
        plan = plan_capture(table, dist, PlanOptions(max_graphs=k, max_batch_size=max_bs, padding=padding))
        feasible = [(c, r) for c, r in subsets if k is None or r <= k]
        best = min(c for c, _ in feasible)
        assert plan.expected_step_us == pytest.approx(best, rel=1e-9), k
        # Fewest graphs among the optimal sets.
        assert len(plan.buckets) == min(r for c, r in feasible if c <= best * (1 + 1e-9)), k
        # The reported cost is the cost of the reported buckets, and they respect the budget.
        assert plan.expected_step_us == pytest.approx(_reference_cost(table, dist, set(plan.buckets), padding),
                                                      rel=1e-9)
        assert k is None or len(plan.buckets) <= k
        assert max_bs is None or all(b <= max_bs for b in plan.buckets)
        assert set(plan.buckets) <= set(dist)


@given(instances(), st.sampled_from(["pad", "exact"]))
def test_more_budget_never_plans_worse(inst, padding):
    table, dist, _, max_bs, top = inst
    costs = [plan_capture(table, dist, PlanOptions(max_graphs=k, max_batch_size=max_bs, padding=padding))
             .expected_step_us for k in range(top + 1)]
    assert all(b <= a * (1 + 1e-12) for a, b in zip(costs, costs[1:]))
    unbounded = plan_capture(table, dist, PlanOptions(max_batch_size=max_bs, padding=padding)).expected_step_us
    assert unbounded == pytest.approx(costs[-1], rel=1e-12)
    by_memory = [plan_capture(table, dist, PlanOptions(memory_budget_mib=m, graph_memory_mib=10.0,
                                                       max_batch_size=max_bs, padding=padding)).expected_step_us
                 for m in (0, 10, 25, 40, 1000)]
    assert all(b <= a * (1 + 1e-12) for a, b in zip(by_memory, by_memory[1:]))


def _cheap_graphs(table: CostTable) -> CostTable:
    """The same table with graph costs scaled so the dearest graph costs no more than the cheapest eager step."""
    g_max = max(p.graph_us for p in table.points)
    e_min = min(p.eager_us for p in table.points)
    f = min(1.0, e_min / g_max)
    return CostTable(tuple(CostPoint(p.batch_size, p.eager_us, p.graph_us * f, p.source, None) for p in table.points))


@given(instances())
def test_exact_never_beats_pad_when_padded_graphs_are_cheaper(inst):
    # "When pad's costs are lower": every padded graph run is cheaper than the eager step it
    # replaces. Monotone costs alone are not enough (see test_exact_can_beat_pad_...).
    table, dist, k, max_bs, _ = inst
    table = _cheap_graphs(table)
    pad = plan_capture(table, dist, PlanOptions(max_graphs=k, max_batch_size=max_bs, padding="pad"))
    exact = plan_capture(table, dist, PlanOptions(max_graphs=k, max_batch_size=max_bs, padding="exact"))
    assert pad.expected_step_us <= exact.expected_step_us * (1 + 1e-12)


def test_exact_can_beat_pad_when_a_padded_graph_is_dearer_than_eager():
    # Monotone costs: eager 100, 100, 300; graph 20, 150, 160 (bs 1, 2, 3). Half the steps at bs 2,
    # half at bs 3. Exact runs bs 2 eager (100) and graphs bs 3 (160): 130 us. Padding must send
    # bs 2 to a graph (150 or 160): best {2, 3} = (150 + 160) / 2 = 155 us.
    t = CostTable((CostPoint(1, 100.0, 20.0, "measured"), CostPoint(2, 100.0, 150.0, "measured"),
                   CostPoint(3, 300.0, 160.0, "measured")))
    pad = plan_capture(t, {2: 1, 3: 1}, PlanOptions(padding="pad"))
    exact = plan_capture(t, {2: 1, 3: 1}, PlanOptions(padding="exact"))
    assert (list(pad.buckets), pad.expected_step_us) == ([2, 3], pytest.approx(155.0))
    assert (list(exact.buckets), exact.expected_step_us) == ([3], pytest.approx(130.0))


# A graph slower than eager at bs 1 (issue 16, fix 5): exactly one graph costs 103.0 us, but a
# budget of one graph plans none (102.5 us); the curve is "at most k graphs".
SLOW_GRAPH = CostTable((CostPoint(1, 100.0, 101.0, "measured"), CostPoint(2, 105.0, 103.0, "measured"),
                        CostPoint(3, 105.0, 104.0, "measured")))


def test_tradeoff_curve_is_at_most_k_graphs():
    plan = plan_capture(SLOW_GRAPH, {1: 1, 2: 1})
    assert plan.tradeoff == ((0, 102.5), (1, 102.5), (2, 102.0))
    one = plan_capture(SLOW_GRAPH, {1: 1, 2: 1}, PlanOptions(max_graphs=1))
    assert (one.buckets, one.expected_step_us) == ((), 102.5)
    assert (plan.buckets, plan.expected_step_us) == ((1, 2), 102.0)


# Found by the derandomized suite (issue 17) on the planner before that fix: a graph dearer than
# eager at bs 3, mid-range, made the curve rise from 191.73 us at one graph to 192.0 at two.
GRAPH_DEARER_MID = CostTable((CostPoint(1, 100.0, 6.0, "measured"), CostPoint(2, 100.0, 19.0, "measured"),
                              CostPoint(3, 133.0, 139.0, "measured"), CostPoint(4, 213.0, 211.0, "measured")))


@given(instances())
@example((SLOW_GRAPH, {1: 1.0, 2: 1.0}, None, None, 3))
@example((GRAPH_DEARER_MID, {2: 2.0, 3: 1.0, 4: 19.0}, None, None, 4))
def test_tradeoff_curve_matches_plans(inst):
    table, dist, _, max_bs, _ = inst
    plan = plan_capture(table, dist, PlanOptions(max_batch_size=max_bs))
    for k, us in plan.tradeoff:
        assert us == pytest.approx(plan_capture(table, dist, PlanOptions(max_graphs=k, max_batch_size=max_bs))
                                   .expected_step_us, rel=1e-9)
    steps = [us for _, us in plan.tradeoff]
    assert all(b <= a for a, b in zip(steps, steps[1:]))  # more budget never plans worse
    near = plan.buckets_within_1pct
    assert _reference_cost(table, dist, set(near), "pad") <= plan.expected_step_us * 1.01 + 1e-9


# --- the command line ---------------------------------------------------------------------------

@pytest.fixture(scope="module")
def monkeypatch_module():
    """The Pareto table unthinned (every set of the front) for the brute-force comparison."""
    from launchgap.planning import planner

    mp = pytest.MonkeyPatch()
    mp.setattr(planner, "PARETO_MIN_GAIN", 0.0)
    mp.setattr(planner, "PARETO_MAX_POINTS", 10 ** 9)
    yield mp
    mp.undo()


@pytest.fixture()
def tiny_files(tmp_path):
    timings = tmp_path / "timings.json"
    timings.write_text(json.dumps({"schema": "launchgap.timings/1", "device": "test", "torch": "x", "rows": [
        {"model": "m", "batch_size": b, "eager_us": e, "graph_us": g, "graph_pool_bytes": None}
        for b, e, g in [(1, 100.0, 20.0), (4, 100.0, 50.0), (8, 120.0, 80.0)]]}))
    dist = tmp_path / "dist.csv"
    dist.write_text("batch_size,count\n1,5\n2,3\n4,2\n")
    return timings, dist


def test_cli_plan_json(tiny_files, capsys):
    from launchgap.cli import main

    timings, dist = tiny_files
    assert main(["plan", "--timings", str(timings), "--distribution", str(dist), "--max-graphs", "2",
                 "--format", "json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert (d["buckets"], d["expected_step_us"], d["all_eager_expected_step_us"]) == ([2, 4], 34.0, 100.0)
    assert d["inputs"][:2] == ["costs from timings.json, model m, test", f"distribution from {dist}"]


def test_cli_plan_text_verdict_first(tiny_files, capsys):
    from launchgap.cli import main

    timings, dist = tiny_files
    assert main(["plan", "--timings", str(timings), "--distribution", str(dist), "--max-graphs", "2"]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0] == ("Capture 2 graphs [2, 4]: expected step 34.0 us vs 100.0 us all-eager (2.94x); "
                                   "17.2% slower than the best server default (vLLM, 51 graphs: over the budget).")
    # without a budget every default is in it
    assert main(["plan", "--timings", str(timings), "--distribution", str(dist)]) == 0
    assert capsys.readouterr().out.splitlines()[0].endswith("(vLLM, 51 graphs).")


@pytest.mark.parametrize("extra, message", [
    ([], "nothing to plan from"),
    (["--timings", "{timings}", "--distribution", "{bad}"], "{bad}: line 2: count 'x' is not a number"),
    (["--timings", "{timings}"], "no batch-size distribution"),
    (["--timings", "{timings}", "--distribution", "{dist}", "--max-graphs", "-1"], "--max-graphs must be >= 0"),
    (["--timings", "{timings}", "--distribution", "{dist}", "--output", "{tmp}/no/such/dir/p.txt"],
     "cannot write the plan"),
    (["{tmp}/missing.json.gz"], "no such file"),
])
def test_cli_plan_errors_exit_2(tiny_files, tmp_path, capsys, extra, message):
    from launchgap.cli import main

    timings, dist = tiny_files
    bad = tmp_path / "bad.csv"
    bad.write_text("batch_size,count\n8,x\n")
    fill = {"timings": str(timings), "dist": str(dist), "bad": str(bad), "tmp": str(tmp_path)}
    argv = ["plan", *[a.format(**fill) for a in extra]]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("launchgap: error: ") and message.format(**fill) in err
    assert err.count("\n") == 1


# --- budgets on memory and capture time (the memory model) ------------------------------------

# 0.5 MiB of pool activations per batch row in full mode (2 * 1024 + 249,856 vocab + 2 layers * 40 * 128
# kept elements of 2 bytes, see test_memory_model.DIMS); with pool_per_act 2 the pool
# costs 1 MiB per row of the largest bucket, each size 10 MiB, each list 100 MiB; capture 0.5 s
# per list and 0.1 s per size. KV cache: 2 * 2 * 8 * 128 * 2 = 8,192 bytes (1/128 MiB) per token.
MEM_DIMS = ModelDims("m", layers=2, hidden=1024, heads=8, kv_heads=8, mlp=1024, vocab=249856, head_dim=128)
MEM_MODEL = MemoryModel(base_mib=100.0, pool_per_act=2.0, graph_mib=10.0, node_kib=0.0, capture_base_s=0.5,
                        capture_graph_s=0.1, capture_node_ms=0.0)


@pytest.mark.parametrize("opts, buckets, us, mib", [
    # {2,4}: 34 us at 100 + 4 + 20 = 124 MiB; {1,2}: 39 us at 122 MiB (a smaller largest bucket).
    (PlanOptions(memory_budget_mib=123), [1, 2], 39.0, 122.0),
    (PlanOptions(memory_budget_mib=124), [2, 4], 34.0, 124.0),
    (PlanOptions(memory_budget_mib=110), [], 100.0, 0.0),  # one graph needs 111 MiB at least
    (PlanOptions(capture_budget_s=0.65), [2], 44.0, 112.0),  # one size: 0.6 s
    (PlanOptions(), [1, 2, 4], 29.0, 134.0),
])
def test_memory_and_capture_budgets_tiny(opts, buckets, us, mib):
    plan = plan_capture(TINY, DIST, opts, dims=MEM_DIMS, memory_model=MEM_MODEL)
    assert list(plan.buckets) == buckets
    assert plan.expected_step_us == pytest.approx(us)
    assert plan.memory_used_mib == pytest.approx(mib)
    d = plan.to_dict()["memory"]
    assert d["model"] == "m" and d["predicted_mib"] == pytest.approx(mib)
    assert d["kv_tokens_lost"] == int(mib * 128)
    assert d["predicted_capture_s"] == pytest.approx(0.5 + 0.1 * len(buckets) if buckets else 0.0)


def test_a_budgets_note_names_its_own_basis():
    """The note on how many graphs a budget allows says what it rests on: the capture time per size for a capture
    budget (it named the memory basis before), the memory per graph for a memory budget, both for both."""
    def note(opts: PlanOptions) -> str:
        plan = plan_capture(TINY, DIST, opts, dims=MEM_DIMS, memory_model=MEM_MODEL)
        return next(w for w in plan.warnings if "budget allows" in w)
    assert note(PlanOptions(capture_budget_s=0.65)) == "the capture budget allows 1 graphs at most (capture: 0.5 s + 0.1 s per size)"
    memory = note(PlanOptions(memory_budget_mib=123))
    assert memory.startswith("the memory budget allows ") and "(memory: " in memory and "capture:" not in memory
    both = note(PlanOptions(memory_budget_mib=123, capture_budget_s=0.65))
    assert both.startswith("the memory and capture budget allows 1 graphs at most (memory: ")
    assert both.endswith("; capture: 0.5 s + 0.1 s per size)")


def test_pareto_table_tiny():
    plan = plan_capture(TINY, DIST, PlanOptions(memory_budget_mib=123), dims=MEM_DIMS, memory_model=MEM_MODEL)
    rows = [(p.graphs, list(p.buckets), p.expected_step_us, p.memory_mib, p.capture_s, p.within_budget)
            for p in plan.pareto]
    # {4} (50 us, 114 MiB) loses to {2} (44 us, 112 MiB); {1,4} (35 us, 124 MiB) to {2,4} (34 us).
    assert rows == [(0, [], 100.0, 0.0, 0.0, True),
                    (1, [1], pytest.approx(60.0), 111.0, pytest.approx(0.6), True),
                    (1, [2], pytest.approx(44.0), 112.0, pytest.approx(0.6), True),
                    (2, [1, 2], pytest.approx(39.0), 122.0, pytest.approx(0.7), True),
                    (2, [2, 4], pytest.approx(34.0), 124.0, pytest.approx(0.7), False),
                    (3, [1, 2, 4], pytest.approx(29.0), 134.0, pytest.approx(0.8), False)]
    assert plan.to_dict()["pareto"][3] == {"graphs": 2, "buckets": [1, 2], "expected_step_us": 39.0,
                                           "memory_mib": 122.0, "capture_s": 0.7, "within_budget": True}
    # The curve is the best with at most k graphs within the memory budget.
    assert plan.tradeoff == ((0, 100.0), (1, pytest.approx(44.0)), (2, pytest.approx(39.0)),
                             (3, pytest.approx(39.0)))


def test_baselines_carry_memory_capture_and_version():
    plan = plan_capture(TINY, DIST, PlanOptions(memory_budget_mib=1000), dims=MEM_DIMS, memory_model=MEM_MODEL)
    v = plan.to_dict()["baselines"]["vllm"]
    # 51 sizes up to 512: 100 + 512 + 510 MiB; 0.5 + 5.1 s.
    assert (v["memory_mib"], v["capture_s"], v["version"], v["within_budget"]) == (
        1122.0, 5.6, "V1 engine (0.11+, max_cudagraph_capture_size)", False)
    versions = {k: b["version"] for k, b in plan.to_dict()["baselines"].items()}
    assert versions == {"vllm": "V1 engine (0.11+, max_cudagraph_capture_size)",
                        "sglang": "current (server_args._generate_cuda_graph_batch_sizes)",
                        "tensorrt_llm": "1.x (CudaGraphConfig)"}
    spec = BaselineSpec("mine", "1.0", (1, 4), "a hand-made list")
    plan = plan_capture(TINY, DIST, dims=MEM_DIMS, memory_model=MEM_MODEL, baselines=[spec])
    b = plan.to_dict()["baselines"]
    assert list(b) == ["mine"] and b["mine"]["version"] == "1.0" and b["mine"]["expected_step_us"] == 35.0


def test_capture_budget_needs_a_capture_model():
    with pytest.raises(InputError, match="--capture-seconds needs a capture-time model"):
        plan_capture(TINY, DIST, PlanOptions(capture_budget_s=1.0))
    plan = plan_capture(TINY, DIST, PlanOptions(kv_bytes_per_token=2 ** 20))  # flat 32 MiB per graph
    assert plan.to_dict()["memory"]["kv_tokens_lost"] == 96 and plan.capture_s is None
    assert plan.pareto[-1].capture_s is None


@st.composite
def budget_instances(draw):
    table, dist, k, max_bs, top = draw(instances())
    cost = ListCost(fixed_mib=float(draw(st.integers(0, 50))), pool_mib_per_row=float(draw(st.integers(0, 20))),
                    per_size_mib=float(draw(st.integers(0, 30))), fixed_s=draw(st.integers(0, 10)) / 10,
                    per_size_s=draw(st.integers(0, 10)) / 10)
    mem = draw(st.one_of(st.none(), st.integers(0, 400).map(float)))
    cap = draw(st.one_of(st.none(), st.integers(0, 60).map(lambda x: x / 10)))
    return table, dist, k, max_bs, top, cost, mem, cap


def _subsets_with_resources(table, dist, max_bs, top, padding, cost):
    """(expected step, graphs, MiB, s, set) of every bucket set over all sizes 1..top."""
    out = []
    for (us, r), c in zip(_all_subsets(table, dist, max_bs, top, padding), _subsets(max_bs, top)):
        mib, s = cost.of(c)
        out.append((us, r, mib, s, c))
    return out


def _subsets(max_bs, top):
    allowed = [s for s in range(1, top + 1) if max_bs is None or s <= max_bs]
    return [c for r in range(len(allowed) + 1) for c in itertools.combinations(allowed, r)]


@given(budget_instances(), st.sampled_from(["pad", "exact"]))
def test_budgets_equal_brute_force(monkeypatch_module, inst, padding):
    table, dist, k, max_bs, top, cost, mem, cap = inst
    opts = PlanOptions(max_graphs=k, memory_budget_mib=mem, capture_budget_s=cap, max_batch_size=max_bs,
                       padding=padding)
    plan = plan_capture(table, dist, opts, list_cost=cost)
    subsets = _subsets_with_resources(table, dist, max_bs, top, padding, cost)
    fits = [x for x in subsets if (k is None or x[1] <= k) and (mem is None or x[2] <= mem + 1e-9)
            and (cap is None or x[3] <= cap + 1e-9)]
    best = min(x[0] for x in fits)
    assert plan.expected_step_us == pytest.approx(best, rel=1e-9)
    assert len(plan.buckets) == min(x[1] for x in fits if x[0] <= best * (1 + 1e-9))
    mib, s = cost.of(plan.buckets)
    assert (mem is None or mib <= mem + 1e-9) and (cap is None or s <= cap + 1e-9)
    assert plan.expected_step_us == pytest.approx(_reference_cost(table, dist, set(plan.buckets), padding), rel=1e-9)
    # The curve: at most k graphs within the memory and capture budgets, equal to those plans.
    for kk, us in plan.tradeoff:
        alone = plan_capture(table, dist, PlanOptions(max_graphs=kk, memory_budget_mib=mem, capture_budget_s=cap,
                                                      max_batch_size=max_bs, padding=padding), list_cost=cost)
        assert us == pytest.approx(alone.expected_step_us, rel=1e-9)
    # The Pareto table (unthinned) is the front of every bucket set, budgets aside.
    front = set()
    for us, _, mib, s, _ in subsets:
        if not any(u2 <= us + 1e-9 and m2 <= mib + 1e-9 and s2 <= s + 1e-9
                   and (u2 < us - 1e-9 or m2 < mib - 1e-9 or s2 < s - 1e-9) for u2, _, m2, s2, _ in subsets):
            front.add((round(us, 6), round(mib, 6), round(s, 6)))
    got = {(round(p.expected_step_us, 6), round(p.memory_mib, 6), round(p.capture_s, 6)) for p in plan.pareto}
    assert got == front
    for p in plan.pareto:
        assert cost.of(p.buckets) == (pytest.approx(p.memory_mib), pytest.approx(p.capture_s))
        assert _reference_cost(table, dist, set(p.buckets), padding) == pytest.approx(p.expected_step_us, rel=1e-9)


def test_cli_plan_budgets_with_model_config(tiny_files, tmp_path, capsys):
    from launchgap.cli import main

    timings, dist = tiny_files
    cfg = tmp_path / "config.json"
    cfg.write_text(json.dumps(MEM_DIMS.to_dict()))
    model = tmp_path / "memory_model.json"
    model.write_text(json.dumps(MEM_MODEL.to_dict()))
    argv = ["plan", "--timings", str(timings), "--distribution", str(dist), "--model-config", str(cfg),
            "--memory-model", str(model)]
    assert main([*argv, "--memory-mib", "123", "--format", "json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert (d["buckets"], d["expected_step_us"]) == ([1, 2], 39.0)
    assert {k: d["memory"][k] for k in ("model", "predicted_mib", "predicted_capture_s", "kv_tokens_lost")} == {
        "model": "m", "predicted_mib": 122.0, "predicted_capture_s": 0.7, "kv_tokens_lost": 15616}
    assert [p["buckets"] for p in d["pareto"]] == [[], [1], [2], [1, 2], [2, 4], [1, 2, 4]]
    assert {"memory_mib", "capture_s", "version"} <= set(d["baselines"]["sglang"])
    assert any("model dimensions of m from" in n for n in d["inputs"])
    assert main([*argv, "--capture-seconds", "0.65"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("Capture 1 graph [2]: expected step 44.0 us")
    assert "Trade-off: expected step, graph memory, capture time (Pareto)" in out
    assert "capture budget 0.65 s" in out
    assert main([*argv, "--kv-bytes-per-token", "1048576", "--format", "markdown"]) == 0
    md = capsys.readouterr().out
    assert "## Trade-off: expected step, graph memory, capture time (Pareto)" in md
    assert "134.0 MiB, capture 0.8 s, 134 KV-cache tokens at 1,048,576 bytes per token" in md


def test_cli_capture_budget_without_dims_exit_2(tiny_files, capsys):
    from launchgap.cli import main

    timings, dist = tiny_files
    assert main(["plan", "--timings", str(timings), "--distribution", str(dist), "--capture-seconds", "1"]) == 2
    assert "--capture-seconds needs a capture-time model" in capsys.readouterr().err


def test_cli_bad_memory_model_file_exit_2(tiny_files, tmp_path, capsys):
    from launchgap.cli import main

    timings, dist = tiny_files
    bad = tmp_path / "model.json"
    bad.write_text(json.dumps({"base_mib": -1}))
    cfg = tmp_path / "config.json"
    cfg.write_text(json.dumps(MEM_DIMS.to_dict()))
    argv = ["plan", "--timings", str(timings), "--distribution", str(dist), "--model-config", str(cfg)]
    assert main([*argv, "--memory-model", str(bad)]) == 2
    assert "memory model lacks pool_per_act" in capsys.readouterr().err
    assert main([*argv, "--memory-model", str(tmp_path / "none.json")]) == 2
    assert "cannot read the memory model" in capsys.readouterr().err
    cfg.write_text(json.dumps({"layers": 2}))
    assert main(argv) == 2
    assert "model dimensions lack 'hidden'" in capsys.readouterr().err


# --- the planner beside a server's capture list (a trace's planner_comparison) ------------------

def test_compare_capture_list_exact() -> None:
    from launchgap.planning.planner import compare_capture_list

    d = compare_capture_list(TINY, DIST, [4, 8])
    # The planner with 2 graphs: [2, 4] at 0.5 x 30 + 0.3 x 30 + 0.2 x 50 = 34 us (g(2) = 30, interpolated).
    assert (d["graphs"], d["capture_sizes"], d["expected_step_us"]) == (2, [2, 4], 34.0)
    # The current list [4, 8]: every step pads to 4 (50 us); padded rows (0.5 x 3 + 0.3 x 2) / 4 = 0.525;
    # waste 0.5 x (50 - 20) + 0.3 x (50 - 30) = 21 us.
    assert (d["current_graphs"], d["current_expected_step_us"], d["current_padded_rows_fraction"],
            d["current_padding_waste_us"]) == (2, 50.0, 0.525, 21.0)
    # The planner's [2, 4]: bs 1 pads to 2 (0.5 x 1 row of 0.5 x 2 + 0.3 x 2 + 0.2 x 4 = 2.4 rows), waste 0.5 x 10.
    assert (d["padded_rows_fraction"], d["padding_waste_us"]) == (round(0.5 / 2.4, 3), 5.0)


def test_table_of_steps_medians_eager_steps() -> None:
    import numpy as np

    from launchgap.planning.costs import table_of_steps

    t = table_of_steps(np.array([1, 1, 1, 4, -1]), np.array([90.0, 100.0, 130.0, 110.0, 5.0]),
                       np.array([1, 4]), np.array([20.0, 50.0]), "steps")
    assert [(p.batch_size, p.eager_us, p.graph_us, p.source) for p in t.points] == [
        (1, 100.0, 20.0, "measured"), (4, 110.0, 50.0, "measured")]
    assert table_of_steps(np.array([-1]), np.array([5.0]), np.array([1]), np.array([2.0]), "x") is None
    assert table_of_steps(np.array([1]), np.array([5.0]), np.array([], dtype=np.int64), np.array([]), "x") is None


def test_capture_time_from_kernel_nodes_without_dimensions() -> None:
    """No dimensions, but kernels per step known: the capture-time part of the memory model, FULL graphs:
    0.5 s per list + (0.1 s per graph + 1 ms x 200 nodes) per size; memory stays a constant per graph."""
    from launchgap.render.plan import memory_basis

    model = MemoryModel(base_mib=100.0, pool_per_act=2.0, graph_mib=10.0, node_kib=0.0, capture_base_s=0.5,
                        capture_graph_s=0.1, capture_node_ms=1.0)
    plan = plan_capture(TINY, DIST, memory_model=model, nodes_per_size=200.0)
    assert plan.buckets == (1, 2, 4) and plan.capture_s == pytest.approx(0.5 + 0.3 * 3)
    assert plan.memory_used_mib == 96.0 and "assumed 32 MiB per graph" in plan.graph_memory_source
    assert memory_basis(plan) == (
        "Graph memory 96 MiB = 32 MiB per graph x 3 graphs (assumed 32 MiB per graph (no measurement, no model "
        "dimensions)); capture time 1.4 s = 0.5 s per list + 0.3 s per size x 3 sizes (the memory model's "
        "capture-time part).")
    # A capture budget now binds without dimensions: 0.5 + 0.3 k <= 1.2 allows two graphs.
    two = plan_capture(TINY, DIST, PlanOptions(capture_budget_s=1.2), memory_model=model, nodes_per_size=200.0)
    assert len(two.buckets) == 2 and two.capture_s == pytest.approx(1.1)
    unknown = plan_capture(TINY, DIST)
    assert unknown.capture_s is None and memory_basis(unknown).endswith(
        "capture time unknown: the capture-time model needs the model's dimensions (a config.json, or harness "
        "timings with a 'models' section) or the kernels per step of traces or timings.")


def test_cost_band_expected_step_at_either_end_and_the_regret_of_keeping_the_list() -> None:
    # graph costs 20 / 50 / 80 at bs 1 / 4 / 8 with a band: low 0.9 / 0.5 / 0.9, high 1.5 / 1.0 / 1.1 of them
    banded = TINY.with_graph_band({1: 0.9, 4: 0.5, 8: 0.9}, {1: 1.5, 4: 1.0, 8: 1.1})
    plan = plan_capture(banded, DIST, PlanOptions(max_graphs=1))
    assert plan.buckets == (2,) and plan.expected_step_us == pytest.approx(44.0)  # 0.8 x 30 + 0.2 x 100
    band = plan.cost_band
    # low end: graph 18 / 25 / 72, bs 2 interpolated 20.333: [2] costs 0.8 x 20.333 + 0.2 x 100 = 36.267, while every
    # step padded to 4 costs 25 there (the low end plans [4]); high end: 30 / 50 / 88, bs 2 36.667: [2] 49.333 (its own
    # plan: [4] would cost 50)
    assert band["expected_step_us_low"] == pytest.approx(36.267, abs=1e-3)
    assert band["expected_step_us_high"] == pytest.approx(49.333, abs=1e-3)
    assert (band["buckets_low"], band["buckets_high"], band["sizes_with_band"]) == ([4], [2], 3)
    assert band["regret_fraction"] == pytest.approx(36.26667 / 25.0 - 1, abs=1e-6)  # 45.07% at the low end
    assert json.loads(json.dumps(plan.to_dict()))["cost_band"] == dict(band)
    assert "at either end this list is within 45.07% of the one planned there" in render_plan(plan)
    # a table without a band (timings, eager traces) has none
    assert plan_capture(TINY, DIST, PlanOptions(max_graphs=1)).cost_band is None
