"""What ``launchgap analyze`` reads from real serving-engine traces (traces/engines, see PROVENANCE.md).

The capture traces cross-check the execution traces: the launches recorded per graph are the
kernels each replay runs (421 for vLLM FULL, 25 pieces of 361 kernels for vLLM PIECEWISE, 544
for SGLang at batch 32).
"""
from __future__ import annotations

from pathlib import Path

import pytest

from launchgap.cli import main
from launchgap.planning.inputs import distribution_from_steps
from launchgap.planning.request import trace_steps
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
                                                 "launches left for 425 kernels; 1 graph launch(es) per step replay")
    assert "already graphed" not in rep.summary.verdict_detail  # said once, in the verdict


def test_vllm_piecewise_mixed_step(engines_dir: Path) -> None:
    rep = _report(engines_dir, f"{VLLM_PIECEWISE}/graph_execution.json.gz")
    assert rep.summary.engine == "vllm" and rep.mode == "mixed"
    assert _step(rep) == ("mixed", 46, 8192, 46, "piecewise", 25, 52, 413)  # 9 prefill + 37 decode requests
    assert rep.summary.verdict_detail.startswith("vLLM trace: 1 mixed step, piecewise: 25 graph launches, 52 eager "
                                                 "launches between them")
    assert distribution_from_steps([trace_steps(rep)]) == {}  # a mixed step is not a decode bucket


def test_sglang_decode_and_extend(engines_dir: Path) -> None:
    dec = _report(engines_dir, f"{SGLANG}/sglang_Qwen3-8B_decode.json.gz")
    assert dec.summary.engine == "sglang"
    assert dec.steps[0].name == "step[DECODE bs=32]"  # inside a vLLM-style range: one step, SGLang's
    assert _step(dec) == ("decode", 32, 32, 32, "full", 1, 6, 550)
    ext = _report(engines_dir, f"{SGLANG}/sglang_Qwen3-8B_prefilldecode.json.gz")
    assert ext.summary.engine == "sglang" and ext.mode == "eager"
    assert _step(ext) == ("prefill", 15, 15360, 15, "eager", 0, 521, 521)
    assert distribution_from_steps([trace_steps(dec), trace_steps(ext)]) == {32: 1.0}


def test_vllm_b200_eager_prefill(engines_dir: Path) -> None:
    rep = _report(engines_dir, "tracelens-b200-eager-llm/eager_trace.json.gz")
    # vLLM compiles the model with Inductor even without graphs: the trace's one Torch-Compiled Region says so
    assert rep.summary.engine == "vllm" and rep.mode == "compiled"
    assert rep.summary.compile_evidence == ["1 Torch-Compiled Region range"]
    assert _step(rep) == ("prefill", 1, 888, 1, "eager", 0, 768, 768)
    # one group: its verdict is the trace's, not repeated in the detail
    assert rep.summary.verdict_detail.startswith("vLLM trace: 1 prefill step, eager: 768 eager launches; the GPU idles ")
    # named compiled on every page (the verdict), as a trace of torch.compile without an engine is
    assert rep.summary.verdict == "launch-bound (torch.compile, no CUDA graphs)"
    assert rep.summary.verdict_detail.endswith(" | torch.compile ran (1 Torch-Compiled Region range); no CUDA graph "
                                               "was replayed")


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


# --- item 7: the capture trace beside its execution trace (analyze EXEC --capture CAPTURE) -------------

CAPTURE_PAIRS = {
    "vllm_full": (f"{VLLM_FULL}/graph_execution.json.gz",
                  f"{VLLM_FULL}/capture_traces__graph_capture_rank_0.1773709742341309550.pt.trace.json.gz"),
    "vllm_piecewise": (f"{VLLM_PIECEWISE}/graph_execution.json.gz",
                       f"{VLLM_PIECEWISE}/capture_traces__graph_capture_rank_0.1773709679453551615.pt.trace.json.gz"),
    "sglang": (f"{SGLANG}/sglang_Qwen3-8B_decode.json.gz", f"{SGLANG}/capture_traces__bs_32_rank0.json.gz"),
}


def _paired(engines_dir: Path, key: str) -> dict:
    from launchgap.report import with_capture

    ex, cap = (load_trace(engines_dir / rel) for rel in CAPTURE_PAIRS[key])
    rep = with_capture(analyze_trace(ex), ex, cap)
    assert rep.capture_pairing is not None
    return rep.capture_pairing


def test_capture_pairing_vllm_full(engines_dir: Path) -> None:
    p = _paired(engines_dir, "vllm_full")
    assert (p["matched_by"], p["graphs_captured"], p["replays"], p["replays_matched"], p["replay_kernels"],
            p["replay_kernels_named"], p["replay_kernel_us"]) == ("kernel names", 1, 1, 1, 421, 421, 10388.482)
    assert p["graphs"] == [{"graph": 0, "size": 32, "mode": "FULL", "nodes": 421, "replays": 1,
                            "kernel_us": 10388.482, "share_of_replay_time": 1.0}]
    assert p["kernels"][0] == {"op": "vllm::moe_forward", "name": "_matmul_ogs_NNT_bf16xbf16xmxfp4_16x128x256x1",
                               "count": 24, "kernel_us": 3761.878, "share_of_replay_time": 0.3621}
    assert p["kernels"][2]["op"] == "vllm::unified_attention_with_output"


def test_capture_pairing_vllm_piecewise(engines_dir: Path) -> None:
    p = _paired(engines_dir, "vllm_piecewise")
    assert (p["matched_by"], p["graphs_captured"], p["replays"], p["replays_matched"], p["replay_kernels"],
            p["replay_kernels_named"], p["replay_kernel_us"]) == ("kernel names", 25, 25, 25, 361, 361, 149919.755)
    # One replay per piece, each matched to its own piece (equal layers: by place in the step).
    assert [g["replays"] for g in p["graphs"]] == [1] * 25 and [g["graph"] for g in p["graphs"]] == list(range(25))
    assert [g["nodes"] for g in p["graphs"]] == [4] + [15] * 23 + [12]
    assert p["graphs"][1] == {"graph": 1, "size": 8192, "mode": "PIECEWISE", "nodes": 15, "replays": 1,
                              "kernel_us": 6210.31, "share_of_replay_time": 0.0414}
    assert p["kernels"][0] == {"op": "vllm::moe_forward",
                               "name": "_matmul_ogs_NNT_bf16xbf16xmxfp4_128x128x128x1_swiglu", "count": 24,
                               "kernel_us": 83288.347, "share_of_replay_time": 0.5556}


def test_capture_pairing_sglang(engines_dir: Path) -> None:
    p = _paired(engines_dir, "sglang")
    assert (p["replays"], p["replays_matched"], p["replay_kernels_named"], p["replay_kernel_us"]) == (1, 1, 544,
                                                                                                      9656.404)
    assert p["graphs"][0]["mode"] == "DECODE" and p["graphs"][0]["size"] == 32
    assert (p["kernels"][0]["op"], p["kernels"][0]["count"], p["kernels"][0]["kernel_us"],
            p["kernels"][0]["share_of_replay_time"]) == ("aten::mm", 36, 2417.659, 0.2504)


@pytest.mark.parametrize("key", sorted(CAPTURE_PAIRS))
def test_capture_pairing_by_order_agrees_with_names(engines_dir: Path, key: str) -> None:
    """A CUDA trace's launch calls do not name their kernel: node count and order give the same pairing."""
    import dataclasses

    import numpy as np

    from launchgap.graph_mode import pair_capture
    from launchgap.steps import StepOptions, assign_rows_to_steps, find_steps

    ex, cap = (load_trace(engines_dir / rel) for rel in CAPTURE_PAIRS[key])
    row_step = assign_rows_to_steps(ex, find_steps(ex, StepOptions()))
    a = pair_capture(ex, cap, row_step)
    b = pair_capture(ex, dataclasses.replace(cap, kernel_name_id=np.full(len(cap), -1, dtype=np.int32)), row_step)
    assert (a.matched_by, b.matched_by) == ("kernel names", "node count and order")
    assert a.replays_matched == b.replays_matched == a.replays
    assert a.graph.tolist() == b.graph.tolist() and a.op.tolist() == b.op.tolist()


def test_cli_capture_pairing_text(engines_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    ex, cap = CAPTURE_PAIRS["vllm_piecewise"]
    assert main(["analyze", str(engines_dir / ex), "--capture", str(engines_dir / cap)]) == 0
    out = capsys.readouterr().out
    assert "25 of 25 replays matched a captured graph (kernel names; 25 graphs captured); 361 of 361 replay " \
           "kernels named, 100.0% of 149,919.8 us replay kernel time" in out
