"""The one verdict and the bounds on the predicted graph step, on tiny hand-built traces: a piecewise step's
estimate includes its eager launches' host time, a graph step is never predicted above the step it replaces, the
node cost is fitted on the trace's own replays, a torch.compile'd trace without graphs is named."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from launchgap.loaders import load_trace
from launchgap.predict import PredictionModel
from launchgap.report import AnalysisOptions, analyze_trace, with_observed_step
from launchgap.verdict import node_cost_text
from tests.unit.kineto_tiny import ann, cpu_op, kernel, launch, write


def _piecewise(tmp_path: Path) -> Path:
    """One step: graph piece 1 (two 10 us kernels), an eager kernel, graph piece 2 (two 10 us kernels)."""
    return write(tmp_path, [
        ann("decode_step[bs=8]", 0.0, 200.0),
        launch(10.0, 3.0, 1, name="cudaGraphLaunch"), kernel(20.0, 10.0, 1, "p0"), kernel(30.0, 10.0, 1, "p1"),
        launch(15.0, 3.0, 2), kernel(45.0, 10.0, 2, "attn"),
        launch(20.0, 3.0, 3, name="cudaGraphLaunch"), kernel(60.0, 10.0, 3, "p2"), kernel(70.0, 10.0, 3, "p3")])


def test_a_piecewise_step_includes_its_eager_launches_host_time(tmp_path: Path) -> None:
    opts = AnalysisOptions(model=PredictionModel(profiler_us_per_host_event=10.0))
    rep = analyze_trace(load_trace(_piecewise(tmp_path)), opts)
    st, s = rep.steps[0], rep.summary
    assert st.graph_coverage == "piecewise" and rep.mode == "mixed"
    # FULL graph: busy 50 + 0.34 x 5 short kernels + 3 = 54.7 (too few replay gaps to fit: the prior)
    assert (s.node_us, s.node_us_source) == (0.34, "prior")
    assert st.predicted_graph_us == pytest.approx(54.7)
    # profiled window 60 less 10 us x 3 runtime calls = 30, at least the busy 50 -- but a piecewise step is at
    # least its FULL step plus 1.9 us per eager launch between the pieces: 54.7 + 1.9 = 56.6
    assert s.estimated_unprofiled_step_us_median == pytest.approx(56.6)
    assert s.predicted_speedup == pytest.approx(56.6 / 54.7, abs=1e-3)
    assert s.predicted_speedup >= 1.0


def test_a_full_graph_step_is_never_predicted_above_its_replay(tmp_path: Path) -> None:
    # 120 kernels of 1 us with 0.5 us between them in one replay: window 179.5 us
    ev = [ann("decode_step[bs=1]", 0.0, 400.0), launch(5.0, 3.0, 1, name="cudaGraphLaunch")]
    ev += [kernel(10.0 + 1.5 * i, 1.0, 1, f"n{i}") for i in range(120)]
    rep = analyze_trace(load_trace(write(tmp_path, ev)), AnalysisOptions(model=PredictionModel(
        profiler_us_per_host_event=0.0)))
    s = rep.summary
    # 119 gaps of 0.5 us after short kernels: node cost 0.79 x 0.5 = 0.395 us
    assert (s.node_us, s.node_us_source) == (0.395, "trace replays")
    # the replays' kernels at 0.987 of their profiled time: 0.987 x 120 + 0.395 x 120 + 3 = 168.84 <= the replay's 179.5
    assert rep.steps[0].predicted_graph_us == pytest.approx(168.84)
    assert rep.mode == "graph" and s.verdict == "already graphed"
    # --node-us wins over the fit; 1.0 x 120 + 123 = 243 is above the replay: bounded by it
    forced = analyze_trace(load_trace(write(tmp_path, ev, name="f.json")), AnalysisOptions(model=PredictionModel(
        node_us=1.0, node_us_fixed=True, profiler_us_per_host_event=0.0)))
    assert (forced.summary.node_us, forced.summary.node_us_source) == (1.0, "flag")
    assert forced.steps[0].predicted_graph_us == pytest.approx(179.5)
    assert forced.summary.predicted_speedup == 1.0


def test_the_node_cost_is_the_mean_replay_gap_up_to_the_cap(tmp_path: Path) -> None:
    # 122 kernels of 1 us in one replay; after them 100 gaps of 0.4 us, 20 of 0.7 us and one of 7 us (a dependency)
    gaps = [0.4] * 100 + [0.7] * 20 + [7.0]
    starts = [10.0]
    for g in gaps:
        starts.append(starts[-1] + 1.0 + g)
    ev = [ann("decode_step[bs=1]", 0.0, 400.0), launch(5.0, 3.0, 1, name="cudaGraphLaunch")]
    ev += [kernel(t, 1.0, 1, f"n{i}") for i, t in enumerate(starts)]
    rep = analyze_trace(load_trace(write(tmp_path, ev)), AnalysisOptions(model=PredictionModel(
        profiler_us_per_host_event=0.0)))
    s = rep.summary
    # the 7 us gap is over the 2 us cap: mean (100 x 0.4 + 20 x 0.7) / 120 = 0.45, node cost 0.79 x 0.45 = 0.3555 (the
    # median, 0.4, would say 0.316)
    assert s.node_us_source == "trace replays" and s.node_us == pytest.approx(0.3555, abs=1e-3)
    # 0.987 x 122 + 0.3555 x 122 + 3 = 166.785, below the replay's window 122 + 40 + 14 + 7 = 183
    assert rep.steps[0].predicted_graph_us == pytest.approx(166.785, abs=1e-3)
    # the step as it ran, unprofiled: its window less the profiler's lengthening of its kernels, 0.013 x 122 = 1.586
    assert s.estimated_unprofiled_step_us_median == pytest.approx(181.414, abs=1e-3)
    # it already replays one FULL graph: 1.00x, and its time per token is the same before and after
    assert (s.predicted_speedup, s.predicted_speedup_rule) == (1.0, "all FULL")
    assert s.decode_tpot_ms_after == s.decode_tpot_ms_before == 0.181
    # the cap is the model's: at 10 us the dependency counts, (54 + 7) / 121 = 0.50413 x 0.79 = 0.39826
    wide = analyze_trace(load_trace(write(tmp_path, ev, name="w.json")), AnalysisOptions(model=PredictionModel(
        profiler_us_per_host_event=0.0, replay_gap_cap_us=10.0)))
    assert wide.summary.node_us == pytest.approx(0.79 * 61 / 121, abs=1e-3)


NCCL = "ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>)"


def _replay_with_collectives(tmp_path: Path, blocks: int, plain: int = 5, name: str = "tp.json") -> Path:
    """One step replaying one graph: ``blocks`` times ``plain`` 1 us kernels then an NCCL all-reduce of 1 us; 0.5 us
    before each plain kernel, 3 us before each all-reduce (above the common node's 2 us cap)."""
    starts, t, n = [], 10.0, plain + 1
    for i in range(n * blocks):
        starts.append(t)
        t += 1.0 + (3.0 if i % n == plain - 1 else 0.5)
    ev = [ann("decode_step[bs=1]", 0.0, 400.0), launch(5.0, 3.0, 1, name="cudaGraphLaunch")]
    ev += [kernel(x, 1.0, 1, NCCL if i % n == plain else f"n{i}") for i, x in enumerate(starts)]
    return write(tmp_path, ev, name=name)


def test_a_collectives_node_cost_is_measured_apart_on_the_replays(tmp_path: Path) -> None:
    opts = AnalysisOptions(model=PredictionModel(profiler_us_per_host_event=0.0))
    rep = analyze_trace(load_trace(_replay_with_collectives(tmp_path, 21)), opts)
    s = rep.summary
    # 104 gaps of 0.5 us before plain kernels: node cost 0.79 x 0.5 = 0.395; 21 gaps of 3 us before the all-reduces,
    # left out of it: a collective's node 0.79 x 3 = 2.37
    assert (s.node_us, s.node_us_source, s.collective_node_us) == (0.395, "trace replays", 2.37)
    # 0.987 x 126 + 0.395 x 126 short kernels + (2.37 - 0.395) x 21 all-reduces + 3 = 218.607, under the replay's
    # window 126 + 52 + 63 = 241
    assert rep.steps[0].predicted_graph_us == pytest.approx(218.607, abs=1e-3)
    text = json.dumps(rep.to_dict())
    assert '"collective_node_us": 2.37' in text
    # the CLI's and the Diagnosis page's words
    assert node_cost_text(s) == ("node cost 0.395 us per kernel node, from trace replays; a collective kernel's "
                                 "2.37 us, from the trace's replays")
    # 15 gaps before a collective are too few to measure (119 before plain kernels): the all-reduces' nodes cost
    # what any node does, 0.987 x 135 + 0.395 x 135 + 3 = 189.57
    few = analyze_trace(load_trace(_replay_with_collectives(tmp_path, 15, 8, "few.json")), opts)
    assert few.summary.collective_node_us is None and few.summary.node_us == 0.395
    assert node_cost_text(few.summary) == "node cost 0.395 us per kernel node, from trace replays"
    assert few.steps[0].predicted_graph_us == pytest.approx(189.57, abs=1e-3)
    # a forced node cost wins for every node: 126 + 1.0 x 126 + 3 = 255 is above the replay's 241, bounded by it
    forced = analyze_trace(load_trace(_replay_with_collectives(tmp_path, 21, name="forced.json")), AnalysisOptions(
        model=PredictionModel(profiler_us_per_host_event=0.0, node_us=1.0, node_us_fixed=True)))
    assert forced.summary.collective_node_us is None
    assert forced.steps[0].predicted_graph_us == pytest.approx(241.0, abs=1e-3)


def _slow_graph_launches(tmp_path: Path, piecewise: bool) -> Path:
    """One step whose graph launch calls take 50 us each (the profiler records their nodes): piecewise, two pieces
    of two 10 us kernels with an eager 10 us kernel between them (GPU window 62-260 us); or FULL, five 10 us kernels
    of one replay 5 us apart (GPU window 10-80 us)."""
    if piecewise:
        return write(tmp_path, [
            ann("decode_step[bs=8]", 0.0, 300.0),
            launch(10.0, 50.0, 1, name="cudaGraphLaunch"), kernel(62.0, 10.0, 1, "p0"), kernel(72.0, 10.0, 1, "p1"),
            launch(61.0, 3.0, 2), kernel(85.0, 10.0, 2, "attn"),
            launch(65.0, 50.0, 3, name="cudaGraphLaunch"), kernel(240.0, 10.0, 3, "p2"), kernel(250.0, 10.0, 3, "p3")],
            name="pw.json")
    return write(tmp_path, [ann("decode_step[bs=8]", 0.0, 300.0), launch(5.0, 50.0, 1, name="cudaGraphLaunch")]
                 + [kernel(10.0 + 15 * i, 10.0, 1, f"n{i}") for i in range(5)], name="full.json")


def test_a_piecewise_steps_graph_launches_beyond_an_unprofiled_launch_are_the_profilers(tmp_path: Path) -> None:
    opts = AnalysisOptions(model=PredictionModel(profiler_us_per_host_event=2.0))
    rep = analyze_trace(load_trace(_slow_graph_launches(tmp_path, piecewise=True)), opts)
    assert rep.steps[0].graph_coverage == "piecewise"
    # window 198 less 2 us x 3 runtime calls less (50 - 3) us for the second graph launch = 145, above its floor
    # 54.7 + 1.9; the first launch ends before the step's GPU work starts: it is not in the window
    assert rep.summary.estimated_unprofiled_step_us_median == pytest.approx(145.0)
    # a FULL step's one launch runs while the GPU replays: its window 70 less 2 us x 1 call = 68, the launch kept
    full = analyze_trace(load_trace(_slow_graph_launches(tmp_path, piecewise=False)), opts)
    assert full.steps[0].graph_coverage == "full"
    assert full.summary.estimated_unprofiled_step_us_median == pytest.approx(68.0)


def test_torch_compile_without_graphs_is_named(tmp_path: Path) -> None:
    ev = [ann("decode_step[bs=2]", 0.0, 100.0), cpu_op("Torch-Compiled Region: 0/0", 2.0, 90.0)]
    ev += [launch(5.0 + 10 * i, 4.0, i + 1) for i in range(4)]
    ev += [kernel(10.0 + 10 * i, 3.0, i + 1, f"triton_poi_fused_add_{i}") for i in range(4)]
    rep = analyze_trace(load_trace(write(tmp_path, ev)))
    assert rep.mode == "compiled"
    assert rep.summary.compile_evidence == ["1 Torch-Compiled Region range",
                                            "4 of 4 kernels generated by Inductor (triton_*)"]
    assert rep.summary.verdict.endswith("(torch.compile, no CUDA graphs)")
    assert rep.summary.verdict_detail.startswith("torch.compile ran (Inductor kernels) but no CUDA graph was replayed")
    # the verdict survives a measured step unchanged in kind
    assert with_observed_step(rep, 50.0).summary.verdict.endswith("(torch.compile, no CUDA graphs)")


def _reduce_overhead_warmup(tmp_path: Path, with_stack: bool) -> Path:
    """One decode step of a torch.compile(mode="reduce-overhead") model on a shape's first call, recorded as
    torch 2.13 records it: Dynamo's region (cpu_op), Inductor's ``## Call CompiledFxGraph <key> ##``
    (user_annotation), cudagraph_trees.cudagraphify's ``dynamo_timed`` range (cpu_op, _RecordFunctionFast),
    then the tree manager's warm-up run: each Triton kernel launched by cuLaunchKernel inside its own
    cpu_op; no stream capture, no cudaGraphLaunch. ``with_stack``: the manager's Python frames instead of
    the dynamo_timed range (a later call of a shape it runs eagerly for good records only those)."""
    ev = [ann("decode_step[bs=4]", 0.0, 120.0), cpu_op("Torch-Compiled Region: 0/1", 1.0, 115.0),
          ann("## Call CompiledFxGraph fk3q2c4nxlp ##", 4.0, 110.0)]
    if with_stack:
        ev += [{"ph": "X", "cat": "python_function", "name": name, "pid": 1, "tid": 1, "ts": 3.0, "dur": 112.0}
               for name in ("torch/_inductor/cudagraph_trees.py(2372): run",
                            "torch/_inductor/cudagraph_trees.py(2455): run_eager")]
    else:
        ev.append(cpu_op("cudagraphify.get_container (dynamo_timed)", 2.0, 1.5))
    for i in range(4):
        name = f"triton_poi_fused_add_mul_{i}"
        ev += [cpu_op(name, 10.0 + 20 * i, 8.0), launch(12.0 + 20 * i, 4.0, i + 1, name="cuLaunchKernel"),
               kernel(20.0 + 20 * i, 3.0, i + 1, name)]
    return write(tmp_path, ev, name=f"ro{int(with_stack)}.json")


@pytest.mark.parametrize("with_stack", [False, True])
def test_reduce_overhead_that_replayed_nothing_is_named(tmp_path: Path, with_stack: bool) -> None:
    rep = analyze_trace(load_trace(_reduce_overhead_warmup(tmp_path, with_stack)))
    s = rep.summary
    assert rep.mode == "compiled" and s.compile_mode == "reduce-overhead"
    marker = ("torch/_inductor/cudagraph_trees.py(2372): run" if with_stack
              else "cudagraphify.get_container (dynamo_timed)")
    assert s.compile_evidence == ["1 Torch-Compiled Region range", "4 of 4 kernels generated by Inductor (triton_*)",
                                  f'CUDA graph trees (mode="reduce-overhead") ran ({marker}) but no graph was '
                                  "replayed"]
    assert s.verdict.endswith("(compiled, reduce-overhead: no graph replayed)")
    assert s.verdict_detail.startswith('torch.compile ran with mode="reduce-overhead" (CUDA graph trees in the '
                                       "trace) but no graph was replayed")
    assert with_observed_step(rep, 60.0).summary.verdict == s.verdict  # the banner's call keeps it


def test_torch_compile_without_graph_trees_is_not_called_reduce_overhead(tmp_path: Path) -> None:
    ev = [ann("decode_step[bs=2]", 0.0, 100.0), cpu_op("Torch-Compiled Region: 0/0", 2.0, 90.0)]
    ev += [launch(5.0 + 10 * i, 4.0, i + 1) for i in range(4)]
    ev += [kernel(10.0 + 10 * i, 3.0, i + 1, f"triton_poi_fused_add_{i}") for i in range(4)]
    s = analyze_trace(load_trace(write(tmp_path, ev))).summary
    assert s.compile_mode == "no graphs" and "reduce-overhead: no graph replayed" not in s.verdict
    # an eager trace is neither
    plain = [ann("decode_step[bs=2]", 0.0, 100.0), launch(5.0, 4.0, 1), kernel(10.0, 3.0, 1, "gemm")]
    assert analyze_trace(load_trace(write(tmp_path, plain, name="e.json"))).summary.compile_mode is None


def test_one_verdict_for_a_graph_serving_trace_with_fallbacks() -> None:
    # the Diagnosis banner calls with_observed_step on every page load: it must not lose the fallbacks' verdict
    trace = Path(__file__).resolve().parents[2] / "traces" / "h200-session-2026-12-01" / "serving" / \
        "1b_serving_serve.json.gz"
    rep = analyze_trace(load_trace(trace))
    assert rep.summary.verdict == "graphed, with eager fallbacks"
    again = with_observed_step(rep, None).summary
    assert (again.verdict, again.verdict_detail) == (rep.summary.verdict, rep.summary.verdict_detail)
    measured = with_observed_step(rep, 2900.0).summary
    assert measured.verdict == "graphed, with eager fallbacks"
    # its decode steps mix FULL replays and eager steps: the headline is the decode time, said first, and a measured
    # step (one step time) leaves it as it is
    assert rep.summary.predicted_speedup_rule == "decode time"
    assert measured.verdict_detail.startswith("capturing the 3 uncaptured steps' sizes and replaying the 4 fallbacks' "
                                              "captured graphs would make decode 1.42x faster over this trace's 48 "
                                              "decode steps (range ")
    assert "; 4 of 48 decode steps fell back to eager" in measured.verdict_detail
    assert (measured.predicted_speedup, measured.predicted_speedup_low, measured.predicted_speedup_high) == (
        rep.summary.predicted_speedup, rep.summary.predicted_speedup_low, rep.summary.predicted_speedup_high)


def test_a_compiled_trace_takes_the_compiled_share() -> None:
    from launchgap.overhead import ProfilerSettings, estimate_overhead
    ps = ProfilerSettings("shapes", True, False, False, False, False, 100, 100, host_ref_us=0.5)
    eager = estimate_overhead(ps, step_us=1000.0, host_events=100.0)
    compiled = estimate_overhead(ps, step_us=1000.0, host_events=100.0, compiled=True)
    # share x step / events: 0.3339 x 1000 / 100 and 0.4463 x 1000 / 100 us per host event
    assert (eager.us_per_event, compiled.us_per_event) == (3.339, 4.463)
    assert "torch.compile'd" in compiled.source


def test_compiled_llama_unprofiled_step_and_speedup_against_the_truth() -> None:
    # traces/h200-hf-2026-12-02: torch.compile'd llama-3.2-1b-like, eager Inductor kernels, with the unprofiled
    # truth at every size (the share was fitted on these two recordings: this checks the fit)
    root = Path(__file__).resolve().parents[2] / "traces" / "h200-hf-2026-12-02"
    truth = {r["batch_size"]: r for r in json.loads((root / "timings_fullrange_compiled.json").read_text())["rows"]}
    for bs in (8, 64):
        rep = analyze_trace(load_trace(root / "traces" / f"llama-3.2-1b-like-compiled_bs{bs}_eager.json.gz"))
        s, t = rep.summary, truth[bs]
        assert rep.mode == "compiled"
        assert abs(s.estimated_unprofiled_step_us_median / t["eager_us"] - 1) < 0.015
        assert abs(s.predicted_speedup / (t["eager_us"] / t["graph_us"]) - 1) < 0.015


def test_host_idle_is_read_on_the_unprofiled_step() -> None:
    from launchgap.verdict import unprofiled_host_idle_fraction

    # a 10,000 us profiled step idles 46% host-side; its unprofiled estimate is 5,400 us: the profiler's 4,600 us
    # slowed the host, so 4,600 - 4,600 = 0 us of that idle is left: 0% of the real step
    assert unprofiled_host_idle_fraction(10_000.0, 0.46, 5_400.0) == 0.0
    # 90% host-side idle, 2,000 us real: 9,000 - 8,000 = 1,000 us of the real 2,000: 50%
    assert unprofiled_host_idle_fraction(10_000.0, 0.90, 2_000.0) == pytest.approx(0.5)
    # no unprofiled estimate (or a real step above the profiled one: nothing taken off): the profiled share
    assert unprofiled_host_idle_fraction(10_000.0, 0.30, None) == 0.30
    assert unprofiled_host_idle_fraction(10_000.0, 0.30, 12_000.0) == pytest.approx(3_000 / 12_000)
