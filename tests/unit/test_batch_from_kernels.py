"""Batch per step from the launch configuration of kernels whose grid follows the tokens or the sequences, with its
source and confidence; phase from the two counts. Hand-built traces (exact) and the real engine traces with their
step markers taken out (what an older vLLM without the annotation leaves)."""
from __future__ import annotations

import gzip
import json
from dataclasses import replace
from pathlib import Path

import pytest

from launchgap.loaders import load_trace
from launchgap.render import render_trace
from launchgap.verdict import batch_basis
from launchgap.report import AnalysisOptions, analyze_trace
from launchgap.steps import PHASE_WORDS, find_steps
from tests.conftest import TRACES
from tests.unit.kineto_tiny import ann, kernel, launch, write

KV = "void vllm::reshape_and_cache_flash_kernel<__nv_bfloat16, __nv_bfloat16, (vllm::Fp8KVCacheDataType)0>"
ARGMAX = "void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float, at::native::ArgMaxOps<float>>>"


def _grid(ev: dict, x: int) -> dict:
    ev["args"].update({"grid": [x, 1, 1], "block": [128, 1, 1]})
    return ev


def _step(t0: float, text: str, corr: int, tokens: int | None, seqs: int | None, graph: bool = False) -> list[dict]:
    """A 50 us step: two KV-cache writes of ``tokens`` blocks (one per layer), an argmax of ``seqs`` blocks."""
    ev = [ann(text, t0, 50.0)]
    if graph:  # one graph launch replaying the kernels: they share its correlation id
        ev.append(launch(t0 + 1.0, 2.0, corr, name="cudaGraphLaunch"))
    for i, (name, x) in enumerate([(KV, tokens), (KV, tokens), (ARGMAX, seqs)]):
        if x is None:
            continue
        c = corr if graph else corr + i
        if not graph:
            ev.append(launch(t0 + 2.0 + 10 * i, 2.0, c))
        ev.append(_grid(kernel(t0 + 5.0 + 10 * i, 3.0, c, name=name), x))
    return ev


def test_batch_phase_and_source_from_kernel_grids(tmp_path: Path) -> None:
    events = (_step(0.0, "model_step", 10, tokens=6, seqs=6)      # 6 tokens for 6 sequences: decode at 6
              + _step(100.0, "model_step", 20, tokens=1049, seqs=1)  # one sequence, 1,049 tokens: prefill
              + _step(200.0, "model_step", 30, tokens=4, seqs=None)  # tokens only: batch 4, phase unknown
              + _step(300.0, "model_step", 40, tokens=8, seqs=None, graph=True)  # inside a replay: captured size 8
              + _step(400.0, "model_step bs=3", 50, tokens=5, seqs=5)  # the marker wins
              + _step(500.0, "model_step", 60, tokens=None, seqs=None))  # nothing: unknown
    steps = find_steps(load_trace(write(tmp_path, events)))
    assert steps.batch_size.tolist() == [6, 1, 4, 8, 3, -1]
    assert steps.batch_source == [f"kernel_grid:{a}" for a in ("at::native::reduce_kernel", "at::native::reduce_kernel",
                                                                "vllm::reshape_and_cache_flash_kernel",
                                                                "vllm::reshape_and_cache_flash_kernel")] + [
        "marker", "none"]
    assert steps.batch_confidence == ["medium", "medium", "medium", "low", "high", None]
    assert steps.phase == ["decode", "prefill", None, None, "decode", None]
    # a step's own annotation naming its phase says it where the kernels do not; they win where they do
    named = [{**e, "name": e["name"].replace("model_step", "decode_step")} for e in events]
    assert find_steps(load_trace(write(tmp_path, named))).phase == ["decode", "prefill", "decode", "decode", "decode",
                                                                     "decode"]
    assert [m.group(1) for m in map(PHASE_WORDS.search, ["decode_step[bs=8]", "Prefill batch", "decoder_layer"])
            if m] == ["decode", "Prefill"]
    # the replayed KV-cache write ran at the captured size 8: the batch is at most that, the tokens are not known
    assert steps.tokens.tolist() == [6, 1049, 4, -1, 5, -1] and steps.requests.tolist() == [6, 1, -1, -1, 5, -1]
    rep = analyze_trace(load_trace(write(tmp_path, events)), AnalysisOptions())
    assert [(st.batch_source, st.batch_confidence) for st in rep.steps][:2] == [
        ("kernel_grid:at::native::reduce_kernel", "medium")] * 2
    assert len(rep.steps) == 5  # the step without kernels has no GPU window
    # the report says where the batches came from, most steps first, and how sure each is
    assert ("; batch from the grid of at::native::reduce_kernel (2 of 5, the kernel ran eagerly), the grid of "
            "vllm::reshape_and_cache_flash_kernel (1 of 5, the kernel ran eagerly), the grid of "
            "vllm::reshape_and_cache_flash_kernel (1 of 5, inside a graph replay: at most that), the step's marker "
            "or an annotation in it (1 of 5)\n") in render_trace(rep)
    assert batch_basis([replace(st, batch_source="none", batch_confidence=None) for st in rep.steps]) == ""


def _without_markers(src: Path, dst: Path) -> Path:
    """The trace with its engine step annotations renamed to a bare ``execute_model`` (no counts)."""
    doc = json.loads(gzip.decompress(src.read_bytes()))
    for e in doc["traceEvents"]:
        name = e.get("name", "")
        if isinstance(name, str) and (name.startswith("execute_") or name.startswith("step[")):
            e["name"] = "execute_model"
    dst.write_text(json.dumps(doc))
    return dst


@pytest.mark.parametrize("folder, file, batch, source, phase, tokens", [
    # vLLM PIECEWISE, one mixed step of 8,192 tokens: the KV-cache write runs eagerly, one block per token
    ("tracelens-vllm-prefilldecode-piecewise-mi300x", "graph_execution.json.gz", 8192,
     "kernel_grid:vllm::reshape_and_cache_flash_kernel", None, 8192),
    # SGLang EXTEND of 15 requests (15,360 tokens): the argmax over the logits has one block per request
    ("tracelens-sglang-qwen3-8b-decode-mi300x", "sglang_Qwen3-8B_prefilldecode.json.gz", 15,
     "kernel_grid:at::native::reduce_kernel", "prefill", 15360),
    # SGLang DECODE at 32: the replayed kernels carry no grid on ROCm; the eager argmax after the replay does
    ("tracelens-sglang-qwen3-8b-decode-mi300x", "sglang_Qwen3-8B_decode.json.gz", 32,
     "kernel_grid:at::native::reduce_kernel", None, None),
    # vLLM eager prefill of 888 tokens on a B200 (TP8): the token ids' recorded shape comes first (the same 888),
    # the KV-cache write's grid gives the tokens
    ("tracelens-b200-eager-llm", "eager_trace.json.gz", 888, "input_shapes", None, 888),
])
def test_engine_traces_without_markers(tmp_path: Path, folder: str, file: str, batch: int, source: str,
                                       phase: str | None, tokens: int | None) -> None:
    rep = analyze_trace(load_trace(_without_markers(TRACES / "engines" / folder / file, tmp_path / "t.json")),
                        AnalysisOptions())
    st = rep.steps[0]
    assert (st.batch_size, st.batch_source, st.batch_confidence, st.phase, st.tokens) == (batch, source, "medium",
                                                                                         phase, tokens)
