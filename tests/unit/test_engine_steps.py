"""Serving-engine steps, graph coverage, capture traces and the old Kineto schema on hand-built traces."""
from __future__ import annotations

from pathlib import Path

import pytest

from launchgap.planning.inputs import distribution_from_steps
from launchgap.planning.request import trace_steps
from launchgap.graph_mode import step_coverage
from launchgap.loaders import load_trace
from launchgap.render import render_trace
from launchgap.report import analyze_trace
from launchgap.steps import StepOptions, assign_rows_to_steps, detect_engine, find_steps
from tests.builders import GraphReplay, TraceSpec
from tests.unit.kineto_tiny import HOST_PID, HOST_TID, ann, cpu_op, kernel, launch, runtime, write

RUNNER = "vllm/v1/worker/gpu_model_runner.py(3380): execute_model"


def pyfn(name: str, ts: float, dur: float) -> dict:
    return {"ph": "X", "cat": "python_function", "name": name, "pid": HOST_PID, "tid": HOST_TID, "ts": ts,
            "dur": dur, "args": {"Python id": 1}}


def graph_launch(ts: float, corr: int, n_kernels: int, first_kernel_ts: float) -> list[dict]:
    """A cudaGraphLaunch and the kernels it replays (1 us each, back to back)."""
    return [launch(ts, 3.0, corr, name="cudaGraphLaunch")] + [
        kernel(first_kernel_ts + i, 1.0, corr, name=f"g{i}") for i in range(n_kernels)]


def eager(ts: float, corr: int, kernel_ts: float, name: str = "e") -> list[dict]:
    return [launch(ts, 2.0, corr), kernel(kernel_ts, 1.0, corr, name=name)]


# --- vLLM with_stack, no annotations ---------------------------------------------------------

def _vllm_python_only() -> list[dict]:
    ev = [pyfn("vllm/v1/worker/gpu_worker.py(610): execute_model", -5.0, 500.0)]  # the worker: not a step
    # step 0: one graph launch of 10 kernels and one eager kernel (1 of 11 = 9% eager): full
    ev += [pyfn(RUNNER, 0.0, 100.0)] + graph_launch(10.0, 1, 10, 20.0) + eager(40.0, 2, 45.0)
    # step 1: three eager kernels: eager
    ev += [pyfn(RUNNER, 200.0, 100.0)] + eager(210.0, 3, 215.0) + eager(220.0, 4, 225.0) + eager(230.0, 5, 235.0)
    # step 2: no GPU work: left out
    ev += [pyfn(RUNNER, 400.0, 50.0), cpu_op("aten::empty", 410.0, 1.0)]
    return ev


def test_vllm_with_stack_without_annotations(tmp_path: Path) -> None:
    trace = load_trace(write(tmp_path, _vllm_python_only()))
    steps = find_steps(trace)
    assert steps.source == "engine" and steps.engine == "vllm" and len(steps) == 3
    assert steps.cpu_start_ns.tolist() == [0, 200_000, 400_000]
    assert steps.phase == [None, None, None] and steps.requests.tolist() == [-1, -1, -1]
    rep = analyze_trace(trace)
    assert [st.index for st in rep.steps] == [0, 1]
    assert [st.graph_coverage for st in rep.steps] == ["full", "eager"]
    assert [st.graph_launches for st in rep.steps] == [1, 0]
    assert [st.kernels for st in rep.steps] == [11, 3]
    assert [(st.phase, st.requests, st.tokens) for st in rep.steps] == [(None, None, None)] * 2
    s = rep.summary
    assert s.engine == "vllm" and s.step_source == "engine"
    assert s.steps_by_coverage == {"full": 1, "piecewise": 0, "eager": 1}
    assert [(g["phase"], g["graph_coverage"], g["steps"]) for g in s.step_groups] == [(None, "full", 1),
                                                                                      (None, "eager", 1)]
    assert s.verdict_detail.startswith("vLLM trace: 1 step (phase unknown), full: 1 graph launch and 1 eager "
                                       "launches left for 11 kernels — ")
    assert " | 1 step (phase unknown), eager: 3 eager launches — " in s.verdict_detail
    assert "1 of 3 steps launched no GPU work" in rep.warnings[0]
    cov = step_coverage(trace, assign_rows_to_steps(trace, steps), len(steps))
    assert cov.eager_kernels.tolist() == [1, 3, 0] and cov.graph_kernels.tolist() == [10, 0, 0]


def test_annotation_wins_over_the_python_function_it_wraps(tmp_path: Path) -> None:
    ev = [ann("execute_context_2(40)_generation_6(6)", 0.0, 120.0), pyfn(RUNNER, 5.0, 100.0)]
    # two graph pieces of 4 kernels with 3 eager kernels between them (3 of 11 = 27%): piecewise
    ev += graph_launch(10.0, 1, 4, 20.0) + eager(30.0, 2, 31.0) + eager(32.0, 3, 33.0) + eager(34.0, 4, 35.0)
    ev += graph_launch(40.0, 5, 4, 50.0)
    rep = analyze_trace(load_trace(write(tmp_path, ev)))
    [st] = rep.steps
    assert st.name == "execute_context_2(40)_generation_6(6)"
    assert (st.phase, st.requests, st.tokens, st.batch_size) == ("mixed", 8, 46, 8)
    assert (st.graph_coverage, st.graph_launches, st.kernel_launches, st.kernels) == ("piecewise", 2, 3, 11)
    assert rep.summary.verdict_detail.startswith("vLLM trace: 1 mixed step, piecewise: 2 graph launches, 3 eager "
                                                 "launches between them; the GPU idles 68% of each step")


@pytest.mark.parametrize("outer, inner, name, info", [
    # equal information: the innermost marker is the step
    ("execute_context_0(0)_generation_4(4)", "step[DECODE bs=4]", "step[DECODE bs=4]", ("decode", 4, 4)),
    # the outer one says more: it is the step
    ("execute_4_context_0(sq0sk0sqsq0sqsk0)_generation_4(sq4sk90sqsq4sqsk90)", "step[TARGET_VERIFY bs=4]",
     "execute_4_context_0(sq0sk0sqsq0sqsk0)_generation_4(sq4sk90sqsq4sqsk90)", ("decode", 4, 4)),
    # a tie; the inner one is the step and the outer one fills in the phase it lacks
    ("[Executor] _forward_step 5: 0 ctx reqs, 4 gen reqs", "step[DRAFT_EXTEND bs=4 toks=12]",
     "step[DRAFT_EXTEND bs=4 toks=12]", ("decode", 4, 12)),
])
def test_nested_engine_markers_are_one_step(tmp_path: Path, outer: str, inner: str, name: str,
                                            info: tuple) -> None:
    ev = [ann(outer, 0.0, 100.0), ann(inner, 5.0, 80.0)] + eager(10.0, 1, 12.0)
    ev += [ann(outer, 200.0, 100.0), ann(inner, 205.0, 80.0)] + eager(210.0, 2, 212.0)
    steps = find_steps(load_trace(write(tmp_path, ev)))
    assert steps.source == "engine" and steps.names == [name, name]
    assert list(zip(steps.phase, steps.requests.tolist(), steps.tokens.tolist())) == [info, info]
    assert steps.batch_size.tolist() == [4, 4]


ARGMAX = "void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float, at::native::ArgMaxOps<float>>>"


def _forward_ranges(outer: list[tuple[str, str]] | None = None) -> list[dict]:
    """Three vLLM V1 iterations as a trace without with_stack and before Worker.annotate_profile writes them:
    the runner's ``gpu_model_runner: preprocess / forward / sample`` ranges, a kernel in the forward pass, the
    argmax sampler (one block per row) after it; ``outer``: (source, text) markers wrapping each iteration."""
    ev: list[dict] = []
    for i, bs in enumerate((4, 4, 6)):
        t = 1000.0 * i
        for source, text in outer or []:
            ev.append(ann(text, t - 5, 200.0) if source == "annotation" else pyfn(text, t - 5, 200.0))
        ev += [ann("gpu_model_runner: preprocess", t, 20.0), ann("gpu_model_runner: forward", t + 30, 100.0)]
        ev += eager(t + 40, 10 * i + 1, t + 45)
        ev += [ann("gpu_model_runner: sample", t + 140, 40.0), launch(t + 145, 2.0, 10 * i + 2),
               dict(kernel(t + 150, 5.0, 10 * i + 2, name=ARGMAX), args={"device": 0, "stream": 7,
                                                                         "correlation": 10 * i + 2,
                                                                         "grid": [bs, 1, 1], "block": [512, 1, 1]})]
    return ev


def test_the_runners_forward_range_makes_the_steps_only_where_no_other_marker_does(tmp_path: Path) -> None:
    # alone: one step per forward range, the sampler after it counted for it (its grid: the batch)
    steps = find_steps(load_trace(write(tmp_path, _forward_ranges(), name="fwd.json")))
    assert steps.source == "engine" and steps.names == ["gpu_model_runner: forward"] * 3
    assert steps.batch_size.tolist() == [4, 4, 6]
    assert [s.startswith("kernel_grid:") for s in steps.batch_source] == [True] * 3
    # a bare execute_model range or the with_stack runner function around each iteration: they make the steps
    # (on a tie of what they say the innermost marker would have won: the forward range must not)
    for outer in ([("annotation", "execute_model")], [("python", RUNNER)]):
        steps = find_steps(load_trace(write(tmp_path, _forward_ranges(outer), name="outer.json")))
        assert steps.names == [outer[0][1]] * 3 and steps.batch_size.tolist() == [4, 4, 6]


def test_user_regex_ignores_engine_markers(tmp_path: Path) -> None:
    ev = [ann("execute_context_0(0)_generation_4(4)", 0.0, 100.0)] + eager(10.0, 1, 12.0)
    steps = find_steps(load_trace(write(tmp_path, ev)), StepOptions(step_regex="^execute"))
    assert steps.source == "user-regex" and steps.phase == [None] and steps.batch_size.tolist() == [-1]
    steps = find_steps(load_trace(write(tmp_path, ev)), StepOptions(batch_regex=r"generation_(\d+)"))
    assert steps.source == "engine" and steps.batch_size.tolist() == [4]


def test_two_phases_get_one_verdict_line_each(tmp_path: Path) -> None:
    ev = [ann("step[EXTEND bs=2 toks=300]", 0.0, 100.0)] + eager(10.0, 1, 12.0) + eager(20.0, 2, 22.0)
    ev += [ann("step[DECODE bs=2]", 200.0, 100.0)] + graph_launch(210.0, 3, 20, 215.0)
    rep = analyze_trace(load_trace(write(tmp_path, ev)))
    s = rep.summary
    assert s.engine == "sglang"
    assert [(g["phase"], g["graph_coverage"], g["steps"]) for g in s.step_groups] == [("decode", "full", 1),
                                                                                      ("prefill", "eager", 1)]
    parts = s.verdict_detail.removeprefix("SGLang trace: ").split(" | ")
    assert parts[0].startswith("1 decode step, full: 1 graph launch and 0 eager launches left for 20 kernels — "
                               "already graphed: ")
    assert parts[1].startswith("1 prefill step, eager: 2 eager launches — ")
    assert s.verdict == "already graphed"  # decode steps set the verdict
    # The planner takes decode steps only.
    assert distribution_from_steps([trace_steps(rep)]) == {2: 1.0}
    text = render_trace(rep)
    assert "Steps by phase and graph coverage" in text and "engine                       SGLang" in text


def test_nsys_nvtx_markers_and_whole_graph_replays(tmp_path: Path) -> None:
    spec = TraceSpec()
    # step 0: a whole-graph replay and an eager kernel after it: full
    spec.annotate("[Executor] _forward_step 1: 0 ctx reqs, 2 gen reqs", 0, 100_000)
    spec.call("cudaGraphLaunch", 10_000, 3_000, corr=1)
    spec.replays.append(GraphReplay(7, 20_000, 30_000, corr=1))
    spec.launch("sample", 60_000, 2_000, 62_000, 1_000, corr=2)
    # step 1: an eager kernel launched between two replays: piecewise
    spec.annotate("[Executor] _forward_step 2: 1 ctx reqs, 1 gen reqs", 200_000, 100_000)
    spec.call("cudaGraphLaunch", 210_000, 3_000, corr=3)
    spec.replays.append(GraphReplay(7, 215_000, 10_000, corr=3))
    spec.launch("attn", 230_000, 2_000, 232_000, 1_000, corr=4)
    spec.call("cudaGraphLaunch", 240_000, 3_000, corr=5)
    spec.replays.append(GraphReplay(8, 245_000, 10_000, corr=5))
    rep = analyze_trace(load_trace(spec.write_nsys(tmp_path / "t.sqlite")))
    assert rep.summary.engine == "tensorrt_llm" and rep.summary.step_source == "engine"
    assert [(st.phase, st.requests, st.tokens, st.batch_size) for st in rep.steps] == [("decode", 2, None, 2),
                                                                                      ("mixed", 2, None, 2)]
    assert [st.graph_coverage for st in rep.steps] == ["full", "piecewise"]


@pytest.mark.parametrize("events, engine", [
    ([cpu_op("sglang::store_cache", 1.0, 1.0)], "sglang"),
    ([cpu_op("vllm::unified_attention_with_output", 1.0, 1.0)], "vllm"),
    ([cpu_op("trtllm::fused_moe", 1.0, 1.0)], "tensorrt_llm"),
    ([pyfn("tensorrt_llm/_torch/modules/linear.py(100): forward", 1.0, 1.0)], "tensorrt_llm"),
    # the engine's Python runner outweighs another engine's annotation (TraceLens' SGLang traces)
    ([ann("execute_context_0(0)_generation_4(4)", 0.0, 9.0),
      pyfn("/w/sglang/python/sglang/srt/model_executor/model_runner.py(3123): forward", 1.0, 5.0)], "sglang"),
    ([cpu_op("aten::mm", 1.0, 1.0), cpu_op("_C::rms_norm", 2.0, 1.0)], None),
])
def test_engine_detection(tmp_path: Path, events: list[dict], engine: str | None) -> None:
    assert detect_engine(load_trace(write(tmp_path, events + eager(0.0, 1, 3.0)))) == engine


# --- capture traces ---------------------------------------------------------------------------

def _capture(begin: str, end: str, inst: str, label: str | None, recorded: int, ran: int) -> list[dict]:
    ev = [runtime(0.0, 1.0, begin)]
    ev += [launch(1.0 + i, 0.5, corr=100 + i, name="hipLaunchKernel") for i in range(recorded)]  # nothing runs
    ev += [runtime(50.0, 1.0, end), runtime(52.0, 5.0, inst)]
    for i in range(ran):  # warm-up kernels that did run
        ev += eager(60.0 + 2 * i, 200 + i, 61.0 + 2 * i)
    if label:
        ev.append(ann(label, -1.0, 60.0))
    return ev


@pytest.mark.parametrize("names, label, size, mode", [
    (("hipStreamBeginCapture", "hipStreamEndCapture", "hipGraphInstantiateWithFlags"), "capture_16_FULL", 16, "FULL"),
    (("cudaStreamBeginCapture", "cudaStreamEndCapture", "cudaGraphInstantiate"), "capture_8_DECODE", 8, "DECODE"),
    (("cudaStreamBeginCapture_v10000", "cudaStreamEndCapture_v10000", "cudaGraphInstantiateWithFlags_v11040"), None,
     None, None),
])
def test_capture_trace(tmp_path: Path, names: tuple[str, str, str], label: str | None, size: int | None,
                       mode: str | None) -> None:
    rep = analyze_trace(load_trace(write(tmp_path, _capture(*names, label, recorded=12, ran=2))))
    assert rep.mode == "capture" and rep.steps == [] and rep.top_gaps == []
    c = rep.capture
    assert (c.graphs, c.sizes, c.modes, c.nodes_per_graph, c.launches_recorded, c.kernels_run) == (
        1, [size], [mode], [12], 12, 2)
    s = rep.summary
    assert s.verdict == "capture trace" and s.predicted_speedup == 0.0 and s.steps == 0
    assert s.verdict_detail.startswith("CUDA-graph capture trace: 1 graph captured")
    assert rep.to_dict()["capture"]["nodes_per_graph"] == [12]
    assert "Captured graphs" in render_trace(rep)


def test_capture_calls_in_a_trace_that_ran_its_kernels_are_not_a_capture_trace(tmp_path: Path) -> None:
    ev = _capture("cudaStreamBeginCapture", "cudaStreamEndCapture", "cudaGraphInstantiate", None, recorded=3, ran=5)
    rep = analyze_trace(load_trace(write(tmp_path, ev)))
    assert rep.mode == "eager" and rep.capture is None


# --- the TensorBoard-plugin-era Kineto schema ---------------------------------------------------

def test_old_kineto_schema(tmp_path: Path) -> None:
    ev = [{"ph": "X", "cat": "Operator", "name": "ProfilerStep#1", "pid": 1, "tid": "1", "ts": 0, "dur": 100,
           "args": {}},
          {"ph": "X", "cat": "Operator", "name": "aten::conv2d", "pid": 1, "tid": "1", "ts": 5, "dur": 20,
           "args": {"Input Dims": [[8, 3, 224, 224]]}},
          {"ph": "X", "cat": "Runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": "1", "ts": 10, "dur": 5,
           "args": {"correlation": 7}},
          {"ph": "X", "cat": "Kernel", "name": "implicit_gemm", "pid": 0, "tid": "stream 7", "ts": 20, "dur": 30,
           "args": {"device": 0, "stream": 7, "correlation": 7}},
          {"ph": "X", "cat": "Runtime", "name": "cudaMemcpyAsync", "pid": 1, "tid": "1", "ts": 60, "dur": 5,
           "args": {"correlation": 8}},
          {"ph": "X", "cat": "Memcpy", "name": "Memcpy DtoH (Device -> Pinned)", "pid": 0, "tid": "stream 7",
           "ts": 70, "dur": 4, "args": {"device": 0, "stream": 7, "correlation": 8}}]
    rep = analyze_trace(load_trace(write(tmp_path, ev)))
    assert rep.summary.step_source == "profiler-step" and len(rep.steps) == 1
    [st] = rep.steps
    assert (st.kernels, st.kernel_launches, st.dur_us, st.gpu_busy_us) == (1, 1, 54.0, 34.0)
    assert rep.devices[0].kernels == 1 and rep.devices[0].gpu_ops == 2


@pytest.mark.parametrize("pieces, eager_between, coverage, mode", [
    # three graphs chained by one eager launch in each gap (2 of 62 kernels, 3%: under the 10% that alone makes a
    # step piecewise): a model cut at its attention calls, piecewise
    (3, (1, 1), "piecewise", "mixed"),
    # one gap without eager work: fewer eager launches between than gaps, not a chain (a FULL step whose sampler
    # is a second graph, an input copy before it): full
    (3, (1, 0), "full", "graph"),
    # one graph and its eager launches after it: full
    (1, (), "full", "graph"),
])
def test_graphs_chained_by_eager_launches_are_piecewise(tmp_path: Path, pieces: int, eager_between: tuple,
                                                         coverage: str, mode: str) -> None:
    ev, t, corr = [ann("step[DECODE bs=4]", 0.0, 2000.0)], 10.0, 1
    for p in range(pieces):
        ev += graph_launch(t, corr, 20, t + 5.0)
        corr, t = corr + 1, t + 40.0
        for _ in range(eager_between[p] if p < len(eager_between) else 0):
            ev += eager(t, corr, t + 2.0)
            corr, t = corr + 1, t + 10.0
    ev += eager(t, corr, t + 2.0)  # after the last graph (sampling): not between
    rep = analyze_trace(load_trace(write(tmp_path, ev)))
    [st] = rep.steps
    assert (st.graph_launches, st.kernel_launches) == (pieces, sum(eager_between) + 1)
    assert st.graph_coverage == coverage
    assert rep.mode == mode
