"""What launchgap reads from real vLLM 0.24.0 traces recorded on the H200 (traces/h200-vllm-2026-12-04, see its
PROVENANCE.md): vLLM's own profiler, step annotations, CUDA graphs and log, with both of its model runners, with and
without Python stacks, eager and FULL-graph."""
from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from launchgap.cli import main
from launchgap.loaders import load_trace
from launchgap.report import TraceReport, analyze_trace

SET = "h200-vllm-2026-12-04"
#: trace -> steps per (phase, graph coverage), as vLLM's annotations and its graph launches say them
STEPS = {
    "full-stack/shrinking": {("prefill", "eager"): 1, ("mixed", "eager"): 2, ("decode", "full"): 61},
    "full-stack-v1runner/shrinking": {("prefill", "eager"): 1, ("mixed", "eager"): 2, ("decode", "full"): 60},
    "full-stack-v1runner/arrivals": {("prefill", "eager"): 1, ("mixed", "eager"): 7, ("decode", "full"): 42},
    "full-nostack/shrinking": {("prefill", "eager"): 1, ("mixed", "eager"): 2, ("decode", "full"): 61},
    "full-nostack/arrivals": {("prefill", "eager"): 1, ("mixed", "eager"): 10, ("decode", "full"): 51},
    "eager-stack/shrinking": {("prefill", "eager"): 1, ("mixed", "eager"): 1, ("decode", "eager"): 24},
    "eager-nostack/shrinking": {("prefill", "eager"): 1, ("mixed", "eager"): 2, ("decode", "eager"): 59},
    "qwen2.5-7b-like-nostack/shrinking": {("prefill", "eager"): 1, ("mixed", "eager"): 2, ("decode", "full"): 61},
    "qwen2.5-7b-like-nostack/arrivals": {("prefill", "eager"): 1, ("mixed", "eager"): 9, ("decode", "full"): 53},
    "qwen1.5-moe-a2.7b-like-nostack/shrinking": {("prefill", "eager"): 1, ("mixed", "eager"): 2,
                                                 ("decode", "full"): 61},
    "qwen1.5-moe-a2.7b-like-nostack/arrivals": {("prefill", "eager"): 1, ("mixed", "eager"): 7,
                                                ("decode", "full"): 54},
}


@pytest.fixture(scope="module")
def vllm_dir(reference_traces: Path) -> Path:
    return reference_traces / SET


_REPORTS: dict[str, TraceReport] = {}


def _report(vllm_dir: Path, name: str) -> TraceReport:
    if name not in _REPORTS:  # each trace analysed once for the module's tests
        _REPORTS[name] = analyze_trace(load_trace(vllm_dir / f"{name}.pt.trace.json.gz"))
    return _REPORTS[name]


@pytest.mark.parametrize("name", sorted(STEPS))
def test_every_step_has_its_batch_from_vllms_annotation(vllm_dir: Path, name: str) -> None:
    rep = _report(vllm_dir, name)
    assert rep.summary.engine == "vllm" and rep.summary.step_source == "engine"
    assert Counter((s.phase, s.graph_coverage) for s in rep.steps) == STEPS[name]
    assert {s.batch_source for s in rep.steps} == {"marker"}
    for s in rep.steps:  # execute_context_C(T)_generation_G(T): the batch is its requests, context and generation
        ctx, gen = s.name.removeprefix("execute_context_").split("_generation_")
        assert s.batch_size == s.requests == int(ctx.split("(")[0]) + int(gen.split("(")[0])
        assert s.phase == ("decode" if ctx.startswith("0(") else "prefill" if gen.startswith("0(") else "mixed")


@pytest.mark.parametrize("name", ["full-stack/shrinking", "full-stack-v1runner/shrinking", "full-nostack/shrinking",
                                  "qwen2.5-7b-like-nostack/shrinking", "qwen1.5-moe-a2.7b-like-nostack/shrinking"])
def test_the_decode_batch_shrinks_from_48_to_1_and_pads_to_vllms_default_sizes(vllm_dir: Path, name: str) -> None:
    rep = _report(vllm_dir, name)
    dec = [s for s in rep.steps if s.phase == "decode"]
    sizes = [s.batch_size for s in dec]
    assert sizes[0] == 48 and sizes[-1] == 1 and sizes == sorted(sizes, reverse=True)  # requests only finish
    assert rep.mode == "graph" and rep.summary.verdict == "already graphed"
    # every decode step replays one FULL graph: 1.00x, though the prefill and mixed steps beside them ran eager
    s = rep.summary
    assert (s.predicted_speedup, s.predicted_speedup_rule) == (1.0, "all FULL")
    assert s.decode_tpot_ms_after == s.decode_tpot_ms_before
    assert all(s.graph_launches == 1 for s in dec)
    default = (1, 2, 4, 8, 16, 24, 32, 40, 48)  # vLLM V1's capture sizes up to the largest batch here
    assert all(s.bucket == min(b for b in default if b >= s.batch_size) for s in dec)


@pytest.mark.parametrize("name", ["eager-stack/shrinking", "eager-nostack/shrinking"])
def test_the_eager_trace_predicts_a_graph_win_from_its_own_launches(vllm_dir: Path, name: str) -> None:
    rep = _report(vllm_dir, name)
    assert rep.mode == "eager" and rep.summary.verdict == "launch-bound"
    assert rep.summary.graph_launches_per_step_median == 0
    assert all(s.kernel_launches == s.kernels for s in rep.steps)  # every kernel launched by its own call
    # the engine's own unprofiled steps: eager 13-26 ms, FULL graphs 2.7-3.5 ms (engine_steps.json)
    assert 2_500 < rep.summary.predicted_graph_step_us_median < 3_500
    # the profiler setting is read from the trace: Python stacks on in one run, off in the other
    assert rep.summary.profiler_settings["tier"] == ("stack" if "-stack/" in name else "plain")


def test_plan_from_a_vllm_serving_trace_and_its_log(vllm_dir: Path, tmp_path: Path) -> None:
    out = tmp_path / "plan.json"
    trace = vllm_dir / "full-nostack/shrinking.pt.trace.json.gz"
    assert main(["plan", str(trace), "--server-log", str(vllm_dir / "full-nostack/vllm.log"),
                 "--format", "json", "-o", str(out)]) == 0
    plan = json.loads(out.read_text())
    # the capture sizes and the graph memory are the server's own, from its log
    assert plan["sources"]["capture_sizes"] == "vLLM log vllm.log"
    assert plan["baselines"]["current"]["buckets"] == [1, 2, 4, 8, *range(16, 129, 8)]
    assert plan["memory"]["graph_memory_source"].startswith("the server's own capture: 205 MiB and 2 s")
    # its max_num_seqs 64 caps the batch: vLLM's default list cut there is the 11 FULL sizes the log captured
    assert ("largest batch 64 from vLLM log vllm.log (the server's cap on running requests: no decode batch runs "
            "above it; --max-batch-size sets another)") in plan["inputs"]
    assert plan["baselines"]["vllm"]["buckets"] == [1, 2, 4, 8, 16, 24, 32, 40, 48, 56, 64]
    assert plan["crossover_batch_size"] is None and plan["options"]["max_batch_size"] == 64
    # the distribution is the trace's 61 decode steps (not its prefill and mixed steps, which the plan counts apart:
    # 3 of 64 steps, eager and long, near half the traced time)
    assert "distribution from 61 decode steps in 1 serving trace(s)" in plan["inputs"]
    assert ("3 mixed or prefill steps of the serving trace(s) left out of the plan (5% of their steps, 48% of their "
            "profiled step time): it is for decode batches, and that time is what it does not change") in plan["inputs"]
    assert max(plan["buckets"]) == 48 and plan["expected_step_us"] < plan["all_eager_expected_step_us"]
    # vLLM runs those on the same list (PIECEWISE graphs): none fits either list (the trace ran all three eager)
    mixed = ("vLLM runs prefill and mixed steps as PIECEWISE graphs of the same list under cudagraph_mode "
             "FULL_AND_PIECEWISE, the default, their tokens padded to the next size, eager above the largest: of the "
             "serving trace(s)' 3 such steps (249-16,384 tokens), 0 fit this plan's list (largest 48) and 0 the "
             "current one (largest {}); the plan prices decode steps only")
    assert mixed.format("128, from vLLM log vllm.log") in plan["inputs"]
    # the trace was analysed under the log's list: its 249-token step ran eager above 128, as that list says
    assert [n["text"] for n in plan["trace_notes"]] == ["1 of 65 steps launched no GPU work and were left out"]
    # and from the trace alone, the same distribution and an exit 0; the current list the engine's default, assumed
    assert main(["plan", str(trace), "--format", "json", "-o", str(out)]) == 0
    alone = json.loads(out.read_text())
    assert "distribution from 61 decode steps in 1 serving trace(s)" in alone["inputs"]
    assert mixed.format("512, the engine's default, assumed").replace("0 the current", "1 the current") in \
        alone["inputs"]
    # which the trace contradicts: its 249-token step ran eager under 512
    assert any(n["text"].startswith("capture sizes from vLLM V1 default, maximum 512 (51 sizes, largest 512) disagree "
                                    "with the trace: 1 prefill or mixed step(s) of 249 tokens ran eager")
               for n in alone["trace_notes"])


def test_analyze_reads_the_capture_list_from_the_servers_log(vllm_dir: Path, tmp_path: Path) -> None:
    """A server log given beside its engine's trace states the list the trace is analysed under (as plan does), above
    the engine's default; the user's own --capture-sizes wins over it."""
    trace = vllm_dir / "full-nostack/arrivals.pt.trace.json.gz"
    log = vllm_dir / "full-nostack/vllm.log"
    out = tmp_path / "a.json"
    assert main(["analyze", str(trace), str(log), "--format", "json", "-o", str(out)]) == 0
    s = json.loads(out.read_text())["traces"][0]["summary"]
    assert s["capture_sizes"] == [1, 2, 4, 8, *range(16, 129, 8)]
    assert (s["capture_sizes_source"], s["capture_sizes_detail"]) == (
        "config", "vLLM log vllm.log: capture sizes [1, 2, 4, 8, 16, 24, 32, 40, ..., 128]")
    doc = json.loads(out.read_text())
    assert not any("disagree with the trace" in w for w in doc["traces"][0]["warnings"])
    assert main(["analyze", str(trace), str(log), "--capture-sizes", "1,2,4,8,16,32,64", "--format", "json",
                 "-o", str(out)]) == 0
    s = json.loads(out.read_text())["traces"][0]["summary"]
    assert (s["capture_sizes"], s["capture_sizes_source"]) == ([1, 2, 4, 8, 16, 32, 64], "flag")
    assert main(["analyze", str(trace), "--format", "json", "-o", str(out)]) == 0  # alone: the default, contradicted
    doc = json.loads(out.read_text())["traces"][0]
    assert doc["summary"]["capture_sizes_source"] == "default"
    assert any("2 prefill or mixed step(s) of 219-445 tokens ran eager" in w for w in doc["warnings"])


def test_vllms_async_scheduling_shows_where_the_host_keeps_ahead(vllm_dir: Path) -> None:
    # without Python stacks the host's next step begins before the GPU's step ends (vLLM 0.24 schedules ahead)
    fast = _report(vllm_dir, "full-nostack/shrinking").summary
    assert fast.host_ahead_steps == 57
    # with them the profiled host is slower than the GPU's step: few steps begin ahead, the what-if stays
    slow = _report(vllm_dir, "full-stack/shrinking").summary
    assert slow.host_ahead_steps == 6 and slow.async_hidden_us_per_step > 1_000


def test_an_already_graphed_trace_stays_at_1x_with_or_without_a_measured_step(vllm_dir: Path) -> None:
    from launchgap.report import with_observed_step
    from launchgap.verdict import headline

    rep = _report(vllm_dir, "full-nostack/shrinking")
    for obs in (None, 3_000.0):  # the dashboard recomputes through with_observed_step, measured step or not
        h = headline(with_observed_step(rep, obs).summary)
        assert (h.predicted_speedup, h.predicted_speedup_low, h.predicted_speedup_high) == (1.0, 1.0, 1.0)


def _interleaved(vllm_dir: Path, engine: str) -> list[tuple[float, TraceReport]]:
    """Per block of an interleaved recording: its truth (the median unprofiled step around it) and its report."""
    folder = vllm_dir / "interleaved" / engine
    blocks = json.loads((folder / "interleaved.json").read_text())["blocks"]
    return [(float(np.median(b["unprofiled_before_us"] + b["unprofiled_after_us"])),
             analyze_trace(load_trace(folder / b["trace"]))) for b in blocks]


def test_python_calls_are_priced_on_a_full_graph_trace_with_stacks(vllm_dir: Path) -> None:
    # vLLM's V1 runner with Python stacks: ~1,300-1,800 Python calls per FULL step's window for ~220 host events; each
    # past 0.25 per host event costs 1.78x the host reference. The step estimate lands on the engine's unprofiled step
    # measured around the same profiled steps (it read +66% with the harness's stack rate alone)
    for truth, rep in _interleaved(vllm_dir, "full-stack-v1runner"):
        s = rep.summary
        assert s.profiler_settings["tier"] == "stack" and s.python_calls_per_step_median > 1_000
        assert s.profiler_python_call_us == pytest.approx(1.78 * s.profiler_settings["host_ref_us"], abs=1e-3)
        assert {st.graph_coverage for st in rep.steps} == {"full"} and {st.batch_size for st in rep.steps} == {16}
        assert abs(s.estimated_unprofiled_step_us_median / truth - 1) < 0.05
        # the engine's step: the replay and the GPU work between steps (sampling after the marker: 36-37 us here)
        assert 30 < s.inter_step_gpu_busy_us_median < 45 and s.decode_tpot_between_steps_us == s.inter_step_gpu_busy_us_median
        assert s.decode_tpot_ms_before == pytest.approx(
            (s.estimated_unprofiled_step_us_median + s.inter_step_gpu_busy_us_median) / 1e3, abs=1e-3)
        assert abs(s.decode_tpot_ms_before * 1e3 / truth - 1) < 0.05


@pytest.mark.parametrize("engine", ["full-stack-v2runner", "qwen2.5-7b-like-full-stack"])
def test_python_call_rate_holds_on_recordings_it_was_not_fitted_on(vllm_dir: Path, engine: str) -> None:
    # held out: the V2 runner (it prepares the next step while the GPU runs: its FULL steps read their replay) and a
    # 7B model on the V1 runner, recorded after the rate was fitted; without pricing their calls they read +28..+62%
    for truth, rep in _interleaved(vllm_dir, engine):
        assert rep.summary.python_calls_per_step_median > 1_000
        assert -0.12 < rep.summary.estimated_unprofiled_step_us_median / truth - 1 < 0.05
        # the time per output token holds the GPU work between steps: the V2 runner computes its logits and samples
        # after its step marker (0.23-0.25 ms of GPU work; the step alone read -4..-11%)
        assert abs(rep.summary.decode_tpot_ms_before * 1e3 / truth - 1) < 0.05
    if engine == "full-stack-v2runner":
        assert all(200 < rep.summary.inter_step_gpu_busy_us_median < 300 for _, rep in _interleaved(vllm_dir, engine))


def test_without_stacks_no_python_call_is_priced(vllm_dir: Path) -> None:
    for _, rep in _interleaved(vllm_dir, "eager-nostack"):
        s = rep.summary
        assert s.profiler_settings["tier"] == "plain"
        assert (s.python_calls_per_step_median, s.profiler_python_call_us) == (0.0, 0.0)
    # with stacks the eager step's Python calls are priced: its estimate falls to the no-stack trace's (12-14 ms;
    # the GPU window of a step whose engine step, host work between steps included, is 15.6-18.6 ms)
    for truth, rep in _interleaved(vllm_dir, "eager-stack"):
        assert rep.summary.python_calls_per_step_median > 5_000
        assert 0.6 * truth < rep.summary.estimated_unprofiled_step_us_median < 1.05 * truth


def test_an_eager_engine_steps_tpot_holds_its_host_work_between_steps(vllm_dir: Path) -> None:
    # the engine's eager step waits for its host work between steps (scheduling, sampling): its time per output token
    # adds that gap unprofiled, at least its GPU work. Against the engine's step around each block: median |error|
    # 10.7% over the six blocks (16.3% with the GPU window alone), the median signed error -6% (was -16%)
    errors, alone = [], []
    for engine in ("eager-nostack", "eager-stack"):
        for truth, rep in _interleaved(vllm_dir, engine):
            s = rep.summary
            assert s.decode_tpot_between_steps_us == s.inter_step_host_us_unprofiled_median
            assert s.inter_step_gpu_busy_us_median < s.inter_step_host_us_unprofiled_median < s.inter_step_host_us_median
            assert s.decode_tpot_ms_before == pytest.approx(
                (s.estimated_unprofiled_step_us_median + s.decode_tpot_between_steps_us) / 1e3, abs=1e-3)
            errors.append(s.decode_tpot_ms_before * 1e3 / truth - 1)
            alone.append(s.estimated_unprofiled_step_us_median / truth - 1)
    assert float(np.median(np.abs(errors))) == pytest.approx(0.107, abs=0.005)
    assert float(np.median(np.abs(alone))) == pytest.approx(0.163, abs=0.005)


def test_an_eager_engine_traces_speedup_is_its_whole_steps(vllm_dir: Path) -> None:
    # the headline speaks for the engine's whole step (rule "whole step"): the TPOT's ratio. Given the engine's
    # measured step (a server's inter-token latency: the whole step), the speedup lands on the truth, the eager block's
    # engine step over the same block's in the FULL-graph run on the same V2 runner (batch 16, the same requests):
    # -3.8..+1.6% on the six blocks, where over the graph step's window alone it read +5.5..+11.4% (the sampling after
    # vLLM's step marker was in the measured step and not in the graph step)
    from launchgap.report import with_observed_step
    graph = [truth for truth, _ in _interleaved(vllm_dir, "full-stack-v2runner")]
    whole, windows = [], []
    for engine in ("eager-nostack", "eager-stack"):
        for (truth, rep), g_truth in zip(_interleaved(vllm_dir, engine), graph):
            s = rep.summary
            assert s.predicted_speedup_rule == "whole step"
            assert s.predicted_speedup == pytest.approx(s.decode_tpot_ms_before / s.decode_tpot_ms_after, rel=2e-3)
            m = with_observed_step(rep, truth).summary
            assert (m.whole_step_us_before, m.decode_tpot_ms_before) == (pytest.approx(truth, abs=1e-3),
                                                                       pytest.approx(truth / 1e3, abs=1e-3))
            whole.append(m.predicted_speedup / (truth / g_truth) - 1)
            windows.append(truth / s.predicted_graph_step_us_median / (truth / g_truth) - 1)
    assert max(np.abs(whole)) < 0.05 and float(np.median(np.abs(whole))) == pytest.approx(0.016, abs=0.003)
    assert min(windows) > 0.05  # the window's ratio overstates every block


def test_analyze_says_the_servers_inter_token_latency_under_its_trace(vllm_dir: Path, tmp_path: Path, capsys) -> None:
    # a vLLM trace and a /metrics scrape of vLLM given together: under the trace, the server's own time per output
    # token beside the trace's (4,000 tokens in 68.24 s between the scrapes: 17.06 ms)
    def scrape(stamp: str, b3: int, s: float) -> str:
        lab = 'engine="0",model_name="m"'
        return (f"{stamp}\n# TYPE vllm:num_requests_running gauge\nvllm:num_requests_running{{{lab}}} 16\n"
                f"# TYPE vllm:inter_token_latency_seconds histogram\n"
                f'vllm:inter_token_latency_seconds_bucket{{{lab},le="+Inf"}} {b3}\n'
                f"vllm:inter_token_latency_seconds_sum{{{lab}}} {s}\nvllm:inter_token_latency_seconds_count{{{lab}}} {b3}\n")
    prom = tmp_path / "vllm.prom"
    prom.write_text(scrape("2026-12-04 20:40:00", 1000, 17.0) + scrape("2026-12-04 20:41:00", 5000, 85.24))
    trace = vllm_dir / "interleaved" / "eager-nostack" / "block1.pt.trace.json.gz"
    assert main(["analyze", str(trace), str(prom)]) == 0
    out = capsys.readouterr().out
    assert ("\n\nserver: The server's /metrics (vllm.prom): inter-token latency 17.1 ms mean over 4,000 tokens between "
            "the first and the last scrape (vllm:inter_token_latency_seconds), at a median "
            "16 running requests: the server's time per output token, the prefill steps its decode steps wait behind "
            "included; at batch 16, 17.1 ms mean over 4,000 tokens in 1 interval between scrapes that read 16 running "
            "requests. This trace's TPOT is 16.48 ms at batch 16: give that mean as the measured step "
            "(--observed-step-us, or the Diagnosis page's field).\n") in out
    # a scrape of another engine: nothing said under the trace
    other = tmp_path / "sglang.prom"
    other.write_text(prom.read_text().replace("vllm:num_requests_running", "sglang:num_running_reqs")
                     .replace("vllm:inter_token", "sglang:inter_token"))
    assert main(["analyze", str(trace), str(other)]) == 0
    out = capsys.readouterr().out
    assert "inter-token latency  17.1 ms mean" in out and "server: " not in out


def _eager_truth_us(vllm_dir: Path) -> dict[int, float]:
    """The 3B server's unprofiled eager engine step per batch size: the median of its three eager runs."""
    runs = [{int(r["batch_size"]): float(r["engine_step_us"]) for r in json.loads((vllm_dir / f).read_text())["rows"]}
            for f in ("eager-nostack/engine_steps.json", "eager-stack/engine_steps.json",
                      "eager-stack/engine_steps.rerun.json")]
    return {b: float(np.median([r[b] for r in runs])) for b in set.intersection(*(set(r) for r in runs))}


@pytest.mark.parametrize("name", ["interleaved/full-stack-v2runner/block0", "interleaved/full-stack-v1runner/block0",
                                  "full-stack/shrinking", "full-nostack/arrivals"])
def test_a_full_graph_traces_eager_cost_is_measured_on_its_own_launches(vllm_dir: Path, name: str) -> None:
    """A FULL-graph trace's all-eager cost (what an uncaptured size costs) comes from the intervals between its eager
    launches, priced at the profiler's rate per event and per Python call: within 30% of the same server's eager
    engine step at batch 16 (23.0 ms, the median of three eager runs: 23.0, 14.1 and 23.1 ms). Before, a V2 block read +83% (the Python
    tracer's cost left in), a V1 block fell to the prior (-87%: 78 intervals, fewer than the minimum then) and the
    stacks' shrinking trace -25% (its intervals priced at the ratio model's 9.25 us a host event)."""
    rep = analyze_trace(load_trace(vllm_dir / f"{name}.pt.trace.json.gz"))
    truth = _eager_truth_us(vllm_dir)[16]
    assert truth == pytest.approx(22_986.5, abs=0.1)
    assert "measured: median of" in rep.eager_curve.detail and "a prior" not in rep.eager_curve.detail
    assert abs(rep.eager_curve.us[15] / truth - 1) < 0.30, (rep.eager_curve.us[15], rep.eager_curve.detail)
