"""Host time between steps on real serving-engine traces (traces/engines, TraceLens samples, PROVENANCE.md there):
which of the engines' own host functions the phase maps name, and what one-step traces report; and the rule that
a gap's phases never overlap (they sum to at most the gap)."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from launchgap.engines import engine
from launchgap.host_gaps import host_gaps
from launchgap.loaders import load_trace
from launchgap.report import analyze_trace
from launchgap.steps import assign_rows_to_steps, find_steps
from tests.conftest import TRACES
from tests.unit.kineto_tiny import HOST_PID, HOST_TID, ann, write

ENG = TRACES / "engines"
VLLM_FULL = ENG / "tracelens-vllm-decode-fullgraph-mi300x" / "graph_execution.json.gz"
VLLM_PIECEWISE = ENG / "tracelens-vllm-prefilldecode-piecewise-mi300x" / "graph_execution.json.gz"
SGLANG_DECODE = ENG / "tracelens-sglang-qwen3-8b-decode-mi300x" / "sglang_Qwen3-8B_decode.json.gz"
SGLANG_EXTEND = ENG / "tracelens-sglang-qwen3-8b-decode-mi300x" / "sglang_Qwen3-8B_prefilldecode.json.gz"
VLLM_EAGER_B200 = ENG / "tracelens-b200-eager-llm" / "eager_trace.json.gz"


def _mapped(path: Path, name: str) -> dict[str, set[str]]:
    """Per phase of engine ``name``'s map the function names (line numbers dropped) it takes in the trace."""
    pc = load_trace(path).python_calls
    out: dict[str, set[str]] = {}
    for text in {str(pc.names[i]) for i in np.unique(pc.name_id).tolist()}:  # unique names
        for pat, ph in engine(name).HOST_PHASES:
            if pat.search(text):
                out.setdefault(ph, set()).add(text.split("/")[-1].split("(")[0] + ": " + text.rsplit(": ", 1)[1])
                break
    return out


def test_vllm_map_names_the_runners_own_functions() -> None:
    assert _mapped(VLLM_FULL, "vllm") == {
        "_update_states": {"gpu_model_runner.py: _update_states"},
        "_prepare_inputs": {"gpu_model_runner.py: _prepare_inputs"},
        "preprocess": {"gpu_model_runner.py: _determine_batch_execution_and_padding",
                       "gpu_model_runner.py: _build_attention_metadata"}}
    assert set(_mapped(VLLM_PIECEWISE, "vllm")) == {"_update_states", "_prepare_inputs", "preprocess"}


def test_sglang_map_names_the_runners_own_functions() -> None:
    assert _mapped(SGLANG_DECODE, "sglang") == {
        "prepare_inputs": {"forward_batch_info.py: init_new"},
        "sampler": {"sampler.py: forward", "model_runner.py: sample"},
        "replay_prepare": {"cuda_graph_runner.py: replay_prepare"}}


@pytest.mark.parametrize("path, source_engine", [(VLLM_FULL, "vllm"), (VLLM_PIECEWISE, "vllm"),
                                                 (SGLANG_DECODE, "sglang"), (SGLANG_EXTEND, "sglang"),
                                                 (VLLM_EAGER_B200, "vllm")])
def test_one_step_engine_traces_have_no_gap(path: Path, source_engine: str) -> None:
    # every bundled engine sample holds one step: there is no time between steps to measure or name
    s = analyze_trace(load_trace(path)).summary
    assert (s.engine, s.steps) == (source_engine, 1)
    assert (s.inter_step_host_us_median, s.host_phases_us_per_step, s.host_phases_source) == (0.0, {}, "none")
    assert s.async_hidden_us_per_step == 0.0


def _pyfn(name: str, ts: float, dur: float) -> dict:
    return {"ph": "X", "cat": "python_function", "name": name, "pid": HOST_PID, "tid": HOST_TID, "ts": ts,
            "dur": dur, "args": {"Python id": 1}}


def _graph_step(t0: float, corr: int) -> list[dict]:
    from tests.unit.kineto_tiny import kernel, launch
    return [ann("decode_step[bs=4 graph]", t0, 50.0), launch(t0 + 5.0, 3.0, corr, name="cudaGraphLaunch")] + [
        kernel(t0 + 20.0 + i, 1.0, corr, name=f"g{i}") for i in range(10)]


def test_phases_never_overlap(tmp_path: Path) -> None:
    runner = "vllm/v1/worker/gpu_model_runner.py({}): {}"
    ev = _graph_step(0.0, 1)
    # gap [30, 120]: the scheduler [35, 65] crosses _update_states [55, 75] (a profiler's rounding makes ranges
    # cross instead of nest); _prepare_inputs [70, 90] crosses _update_states too; sampler [80, 130] runs past the
    # gap's end (the next step's first GPU op at 120)
    ev += [_pyfn("vllm/v1/core/sched/scheduler.py(300): schedule", 35.0, 30.0),
           _pyfn(runner.format(1, "_update_states"), 55.0, 20.0),
           _pyfn(runner.format(2, "_prepare_inputs"), 70.0, 20.0),
           _pyfn(runner.format(3, "sample_tokens"), 80.0, 50.0)]
    ev += _graph_step(100.0, 2)
    trace = load_trace(write(tmp_path, ev))
    steps = find_steps(trace)
    rs = assign_rows_to_steps(trace, steps)
    hg = host_gaps(trace, rs, steps.cpu_start_ns, np.array([20_000, 120_000]), np.array([30_000, 130_000]),
                   np.array([10.0, 10.0]), "vllm")
    # each instant goes to the latest-started range holding it: scheduler [35, 55], _update_states [55, 70],
    # _prepare_inputs [70, 80], sampler [80, 120] (cut at the gap's end)
    assert hg.phases_us[1] == {"scheduler": 20.0, "_update_states": 15.0, "_prepare_inputs": 10.0, "sampler": 40.0}
    assert sum(hg.phases_us[1].values()) <= hg.gap_us[1] == 90.0


def test_phases_sum_to_at_most_the_gap_on_the_h200_serving_trace() -> None:
    rep = analyze_trace(load_trace(TRACES / "h200-session-2026-12-01" / "serving" / "1b_serving_serve.json.gz"))
    over = [(st.index, sum(st.host_phases_us.values()), st.inter_step_host_us) for st in rep.steps
            if st.inter_step_host_us is not None and sum(st.host_phases_us.values()) > st.inter_step_host_us + 1e-3]
    assert over == []
    gaps = [st.inter_step_host_us for st in rep.steps if st.inter_step_host_us is not None]
    assert sum(rep.summary.host_phases_us_per_step.values()) <= sum(gaps) / len(gaps) + 1e-3
