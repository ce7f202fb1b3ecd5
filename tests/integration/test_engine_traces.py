"""What ``launchgap analyze`` reads from real serving-engine traces (traces/engines, see PROVENANCE.md).

The capture traces cross-check the execution traces: the launches recorded per graph are the
kernels each replay runs (421 for vLLM FULL, 25 pieces of 361 kernels for vLLM PIECEWISE, 544
for SGLang at batch 32).
"""
from __future__ import annotations

from pathlib import Path

import pytest

from launchgap.cli import main
from launchgap.planning.inputs import distribution_from_reports
from launchgap.loaders import load_trace
from launchgap.report import TraceReport, analyze_trace

VLLM_FULL = "tracelens-vllm-decode-fullgraph-mi300x"
VLLM_PIECEWISE = "tracelens-vllm-prefilldecode-piecewise-mi300x"
SGLANG = "tracelens-sglang-qwen3-8b-decode-mi300x"


@pytest.fixture(scope="module")
def engines_dir(reference_traces: Path) -> Path:
    return reference_traces / "engines"


def _report(engines_dir: Path, rel: str) -> TraceReport:
    return analyze_trace(load_trace(engines_dir / rel))


def _step(rep: TraceReport) -> tuple:
    [st] = rep.steps
    return (st.phase, st.requests, st.tokens, st.batch_size, st.graph_coverage, st.graph_launches,
            st.kernel_launches, st.kernels)


def test_vllm_full_graph_decode(engines_dir: Path) -> None:
    rep = _report(engines_dir, f"{VLLM_FULL}/graph_execution.json.gz")
    assert rep.summary.engine == "vllm" and rep.summary.step_source == "engine" and rep.mode == "graph"
    assert _step(rep) == ("decode", 32, 32, 32, "full", 1, 4, 425)
    assert rep.summary.steps_by_coverage == {"full": 1, "piecewise": 0, "eager": 0}
    assert rep.summary.verdict == "already graphed"
    assert rep.summary.verdict_detail.startswith("vLLM trace: 1 decode step, full: 1 graph launch and 4 eager "
                                                 "launches left for 425 kernels")


def test_vllm_piecewise_mixed_step(engines_dir: Path) -> None:
    rep = _report(engines_dir, f"{VLLM_PIECEWISE}/graph_execution.json.gz")
    assert rep.summary.engine == "vllm" and rep.mode == "mixed"
    assert _step(rep) == ("mixed", 46, 8192, 46, "piecewise", 25, 52, 413)  # 9 prefill + 37 decode requests
    assert rep.summary.verdict_detail.startswith("vLLM trace: 1 mixed step, piecewise: 25 graph launches, 52 eager "
                                                 "launches between them")
    assert distribution_from_reports([rep]) == {}  # a mixed step is not a decode bucket


def test_sglang_decode_and_extend(engines_dir: Path) -> None:
    dec = _report(engines_dir, f"{SGLANG}/sglang_Qwen3-8B_decode.json.gz")
    assert dec.summary.engine == "sglang"
    assert dec.steps[0].name == "step[DECODE bs=32]"  # inside a vLLM-style range: one step, SGLang's
    assert _step(dec) == ("decode", 32, 32, 32, "full", 1, 6, 550)
    ext = _report(engines_dir, f"{SGLANG}/sglang_Qwen3-8B_prefilldecode.json.gz")
    assert ext.summary.engine == "sglang" and ext.mode == "eager"
    assert _step(ext) == ("prefill", 15, 15360, 15, "eager", 0, 521, 521)
    assert distribution_from_reports([dec, ext]) == {32: 1.0}


def test_vllm_b200_eager_prefill(engines_dir: Path) -> None:
    rep = _report(engines_dir, "tracelens-b200-eager-llm/eager_trace.json.gz")
    assert rep.summary.engine == "vllm" and rep.mode == "eager"
    assert _step(rep) == ("prefill", 1, 888, 1, "eager", 0, 768, 768)
    assert rep.summary.verdict_detail.startswith("vLLM trace: 1 prefill step, eager: 768 eager launches — "
                                                 "launch-bound: ")


@pytest.mark.parametrize("rel, engine, graphs, sizes, modes, nodes, recorded, ran", [
    (f"{VLLM_FULL}/capture_traces__graph_capture_rank_0.1773709742341309550.pt.trace.json.gz", "vllm", 1, [32],
     ["FULL"], [421], 421, 7),
    (f"{VLLM_PIECEWISE}/capture_traces__graph_capture_rank_0.1773709679453551615.pt.trace.json.gz", "vllm", 25,
     [8192] * 25, ["PIECEWISE"] * 25, [4] + [15] * 23 + [12], 361, 99),
    (f"{SGLANG}/capture_traces__bs_32_rank0.json.gz", "sglang", 1, [32], ["DECODE"], [544], 544, 2),
])
def test_capture_traces(engines_dir: Path, rel: str, engine: str, graphs: int, sizes: list, modes: list,
                        nodes: list, recorded: int, ran: int) -> None:
    rep = _report(engines_dir, rel)
    assert rep.mode == "capture" and rep.summary.engine == engine
    c = rep.capture
    assert (c.graphs, c.sizes, c.modes, c.nodes_per_graph, c.launches_recorded, c.kernels_run) == (
        graphs, sizes, modes, nodes, recorded, ran)
    assert sum(c.nodes_per_graph) == recorded
    assert rep.steps == [] and rep.summary.verdict == "capture trace" and rep.summary.predicted_speedup == 0.0


def test_old_kineto_schema_sample(engines_dir: Path) -> None:
    rep = _report(engines_dir, "kineto-tbplugin-resnet50-v100-oldformat/worker0.1623143089861.pt.trace.json.gz")
    assert rep.devices[0].name == "Tesla V100-DGXS-32GB"
    assert (rep.devices[0].kernels, rep.devices[0].gpu_ops) == (8772, 9096)
    assert rep.summary.step_source == "profiler-step" and len(rep.steps) == 6
    assert {st.kernels for st in rep.steps} == {1462} and rep.summary.engine is None


def test_cli_json_has_the_engine_fields(engines_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import json

    assert main(["analyze", "--format", "json", str(engines_dir / VLLM_FULL)]) == 0
    doc = json.loads(capsys.readouterr().out)
    by_mode = {t["mode"]: t for t in doc["traces"]}
    assert set(by_mode) == {"graph", "capture"}
    step = by_mode["graph"]["steps"][0]
    assert {k: step[k] for k in ("phase", "requests", "tokens", "graph_coverage", "graph_launches")} == {
        "phase": "decode", "requests": 32, "tokens": 32, "graph_coverage": "full", "graph_launches": 1}
    assert by_mode["graph"]["summary"]["engine"] == "vllm"
    assert by_mode["graph"]["summary"]["steps_by_coverage"] == {"full": 1, "piecewise": 0, "eager": 0}
    assert by_mode["capture"]["capture"]["nodes_per_graph"] == [421]
