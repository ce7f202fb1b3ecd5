"""The fresh H100 sweeps of 2026-12-06 (``traces/h100-2026-12-05c``, ``h100-2026-12-06``, ``h100-2026-12-06b``, each
recorded once after the rules they check were set on earlier recordings): the cost curve from one traced row with the
latency-bound attention rule, and the eager estimate's GPU-bound end, against the unprofiled truth (``timings.json``);
piecewise -> FULL on six models (``h100-piecewise-2026-12-06``). The figures are the ones the PROVENANCE.md files report
(``bench/costmodel_eval.py``, ``bench/eager_host_eval.py``)."""
from __future__ import annotations

import json

import numpy as np
import pytest

from launchgap.loaders import load_trace
from launchgap.report import AnalysisOptions, analyze_trace, with_observed_step
from tests.conftest import TRACES

SET = TRACES / "h100-2026-12-05c"
SET_06 = TRACES / "h100-2026-12-06"
SET_06B = TRACES / "h100-2026-12-06b"
PIECEWISE = TRACES / "h100-piecewise-2026-12-06"
LATENCY_NOTE = "attention launches within 1.2 x 9 us (one latency-bound wave"


def _rows(model: str, folder=SET) -> dict[int, dict]:
    return {int(r["batch_size"]): r for r in json.loads((folder / "timings.json").read_text())["rows"]
            if r["model"] == model}


@pytest.mark.parametrize(("folder", "model", "median", "worst", "latency_bound"), [
    (SET, "phi-4-mini-like", 0.0224, 0.0424, True),  # within both bars (4.97 / 6.03% without the rule)
    (SET, "qwen3-0.6b-like", 0.0254, 0.0718, True),  # 3.21 / 10.96% without it
    (SET, "qwen2.5-7b-like", 0.0371, 0.0551, True),  # 5.29 / 8.64% without it
    (SET, "falcon3-1b-like", 0.0520, 0.0934, False),  # head dim 256: one row's attention past the bound, the rule idle
    # checked once, after nothing changed: head dim 64 within both bars but smollm2-360m; head dim 128 attention's
    # growth to 64 rows under-predicted 27-34% (qwen3-8b misses the median bar)
    (SET_06, "smollm2-360m-like", 0.0431, 0.0581, True),
    (SET_06, "tinyllama-1.1b-like", 0.0218, 0.0322, True),
    (SET_06, "qwen3-8b-like", 0.0403, 0.0536, True),
    (SET_06B, "llama-3.2-3b-like", 0.0150, 0.0404, True),
    (SET_06B, "qwen2.5-1.5b-like", 0.0188, 0.0517, True),
    (SET_06B, "granite-3.1-2b-like", 0.0182, 0.0394, True),
], ids=lambda v: getattr(v, "name", v))
def test_the_curve_from_one_row_on_the_h100(folder, model: str, median: float, worst: float,
                                           latency_bound: bool) -> None:
    truth = {b: float(r["graph_us"]) for b, r in _rows(model, folder).items()}
    curve = analyze_trace(load_trace(folder / "traces" / f"{model}_bs1_graph.json.gz")).cost_curve
    err = np.abs([(curve.at(b) - t) / t for b, t in sorted(truth.items())])
    assert len(err) == 14 and float(np.median(err)) == pytest.approx(median, abs=1e-4)
    assert float(err.max()) == pytest.approx(worst, abs=1e-4)
    assert any(n.startswith(LATENCY_NOTE) for n in curve.notes) is latency_bound


@pytest.mark.parametrize(("folder", "model", "want"), [
    (SET, "phi-4-mini-like", {64: -0.0112, 100: -0.0047, 128: -0.0060}),
    (SET, "qwen2.5-7b-like", {64: 0.0027, 100: -0.0025, 128: -0.0020}),
    (SET_06, "qwen3-8b-like", {64: 0.0075, 100: 0.0040, 128: 0.0075}),  # checked once
], ids=lambda v: getattr(v, "name", v))
def test_the_eager_estimate_where_the_gpu_bounds_it(folder, model: str, want: dict[int, float]) -> None:
    """From the FULL-graph trace at 64 rows alone (no eager launch in it: the host's cost is the prior) the eager step
    at 64, 100 and 128 rows is the graph curve plus 1 us per kernel: within 1.2% of the unprofiled eager step, where
    the graph step alone (the floor before) was 2.7-6.7% low."""
    rows = _rows(model, folder)
    rep = analyze_trace(load_trace(folder / "traces" / f"{model}_bs64_graph.json.gz"))
    for b, err in want.items():
        assert rep.eager_curve.at(b) / rows[b]["eager_us"] - 1 == pytest.approx(err, abs=1e-4)
        assert rep.cost_curve.at(b) / rows[b]["eager_us"] - 1 < -0.025  # the graph step alone
    assert "at least the graph step plus 1 us per kernel (a GPU-bound eager step)" in rep.eager_curve.detail


@pytest.mark.parametrize(("model", "pieces", "predicted_us"), [
    ("olmo-2-1b-like", 17, {4: 3577.795, 16: 4180.383, 48: 4971.034}),
    ("falcon3-1b-like", 19, {4: 3734.165, 16: 5225.792, 48: 9049.37}),
    ("gemma-3-1b-like", 27, {4: 6114.51, 16: 6456.078, 48: 7125.92}),
    ("phi-4-mini-like", 33, {4: 7620.618, 16: 11783.352, 48: 21421.855}),
    ("qwen2.5-0.5b-like", 25, {4: 3382.639, 16: 4251.983, 48: 6515.42}),
    ("llama-3.2-3b-like", 29, {4: 6853.38, 16: 10504.186, 48: 18917.148}),
])
def test_piecewise_to_full_on_the_h100(model: str, pieces: int, predicted_us: dict[int, float]) -> None:
    """Six models run piecewise on an H100 for the first time (checked once): the FULL step predicted from each
    piecewise trace within 3% of the unprofiled FULL graph (+0.12..+2.85%), the piecewise step's own unprofiled
    estimate within 1.5% of its measured step."""
    truth = {r["batch_size"]: r for r in json.loads((PIECEWISE / model / "timings_piecewise.json").read_text())["rows"]}
    for bs, want in predicted_us.items():
        rep = analyze_trace(load_trace(PIECEWISE / model / "piecewise" / f"{model}_bs{bs}_piecewise.json.gz"))
        assert [st.graph_coverage for st in rep.steps] == ["piecewise"] * 3
        assert rep.summary.graph_launches_per_step_median == pieces
        got = rep.summary.predicted_graph_step_us_median
        assert got == pytest.approx(want, abs=1e-3)
        assert 0 < got / truth[bs]["graph_us"] - 1 <= 0.03
        assert abs(rep.summary.estimated_unprofiled_step_us_median / truth[bs]["piecewise_us"] - 1) <= 0.015


@pytest.mark.parametrize(("model", "graph_us", "graph_err", "eager_us", "eager_err", "speedup", "low", "high"), [
    ("granite-3.1-2b-like", 9027.358, 0.0391, 59391.362, 0.5269, 6.579, 4.385, 7.467),
    ("llama-3.2-3b-like", 8181.814, 0.0192, 45796.702, 0.6438, 5.597, 3.66, 6.165),
    ("qwen2.5-1.5b-like", 5756.923, 0.0434, 36523.317, 0.0739, 6.344, 4.228, 7.218),
])
def test_eager_traces_on_the_h100_host(model: str, graph_us: float, graph_err: float, eager_us: float,
                                      eager_err: float, speedup: float, low: float, high: float) -> None:
    """The sweeps' eager traces at 8 rows (record_shapes), read as a user's eager trace: the FULL-graph step predicted
    from the eager launches is within 5% of the unprofiled graph step on this other GPU, but the unprofiled eager step
    is over-estimated on two of three (+53%, +64%): that host's profiler costs 2-3x per host event what the H200
    host's does, which the ratio model (fitted there) does not see (docs/profiler-overhead.md, Another host). Pinned:
    a change to either estimate shows here; the report warns that the estimate likely reads high."""
    truth = _rows(model, SET_06B)[8]
    trace = load_trace(SET_06B / "eager" / f"{model}_bs8_eager.json.gz")
    rep = analyze_trace(trace)
    s = rep.summary
    assert s.profiler_settings["tier"] == "shapes"
    # 4.57-4.73 host events per launch against the fit's 3.97: the report says the estimate likely reads high
    (mix,) = [w for w in rep.warnings if w.startswith("the eager steps record 4.")]
    assert "likely read high" in mix
    assert not any(w.startswith("the eager steps record") for w in analyze_trace(
        trace, AnalysisOptions(observed_step_us=truth["eager_us"])).warnings)  # a measured step: nothing to doubt
    assert mix not in with_observed_step(rep, truth["eager_us"]).warnings  # one set afterwards (the Diagnosis page)
    assert mix in with_observed_step(rep, None).warnings
    assert s.predicted_graph_step_us_median == pytest.approx(graph_us, abs=1e-2)
    assert s.predicted_graph_step_us_median / truth["graph_us"] - 1 == pytest.approx(graph_err, abs=1e-4)
    assert s.estimated_unprofiled_step_us_median == pytest.approx(eager_us, abs=1e-2)
    assert s.estimated_unprofiled_step_us_median / truth["eager_us"] - 1 == pytest.approx(eager_err, abs=1e-4)
    assert (s.predicted_speedup, s.predicted_speedup_low, s.predicted_speedup_high) == pytest.approx(
        (speedup, low, high), abs=1e-3)


@pytest.mark.parametrize(("path", "per_launch"), [
    ("h200/1b_bs1_eager.json.gz", None),  # the harness decoder the model was fitted on: 3.96
    ("h200/70b-slice_bs64_eager.json.gz", None),
    ("h200-hf-2026-12-02/traces/llama-3.2-1b-like_bs8_eager.json.gz", "4.86"),  # +38% measured on the H200
    ("h200-vllm-2026-12-04/eager-nostack/shrinking.pt.trace.json.gz", "6.57"),  # vLLM's eager runner: +28%
    ("h200-hf-2026-12-02/traces/llama-3.2-1b-like-compiled_bs8_eager.json.gz", None),  # compiled: its own share
])
def test_the_op_mix_warning_on_real_eager_traces(path: str, per_launch: str | None) -> None:
    said = [w for w in analyze_trace(load_trace(TRACES / path)).warnings if w.startswith("the eager steps record")]
    assert len(said) == (0 if per_launch is None else 1)
    if per_launch is not None:
        assert said[0].startswith(f"the eager steps record {per_launch} host events per kernel launch")
