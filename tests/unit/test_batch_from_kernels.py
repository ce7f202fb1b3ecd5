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
from tests.conftest import REPO, TRACES
from tests.unit.kineto_tiny import ann, kernel, launch, write

KV = "void vllm::reshape_and_cache_flash_kernel<__nv_bfloat16, __nv_bfloat16, (vllm::Fp8KVCacheDataType)0>"
#: FlashInfer's CUDA-core decode kernel (one query token per request) and its batch prefill kernel (every phase).
DECODE = ("void flashinfer::BatchDecodeWithPagedKVCacheKernel<(flashinfer::PosEncodingMode)0, 2u, 4u, 8u, 16u, 1u, 8u, "
          "(flashinfer::PageStorage)0, flashinfer::DefaultAttention<false, false, false, false>, "
          "flashinfer::BatchDecodeParams<__nv_bfloat16, __nv_bfloat16, __nv_bfloat16, int>>("
          "flashinfer::BatchDecodeParams<__nv_bfloat16, __nv_bfloat16, __nv_bfloat16, int>)")
PAGED_PREFILL = ("void flashinfer::BatchPrefillWithPagedKVCacheKernel<flashinfer::KernelTraits<(flashinfer::MaskMode)1, "
                 "16u, 1u, 8u, 8u, 8u, 1u, 4u>, flashinfer::BatchPrefillPagedParams<__nv_bfloat16, __nv_bfloat16, "
                 "__nv_bfloat16, int>>(flashinfer::BatchPrefillPagedParams<__nv_bfloat16, __nv_bfloat16, "
                 "__nv_bfloat16, int>)")
RAGGED = "void flashinfer::BatchPrefillWithRaggedKVCacheKernel<flashinfer::KernelTraits<(flashinfer::MaskMode)1>>"
CONTEXT = "fmhaSm100aKernel_QkvE4m3OBfloat16H64PagedKvCausalP16VarSeqQ128Kv128PersistentContext"
GEN = "fmhaSm100fKernel_QkvE4m3OBfloat16H64PagedKvCausalP16VarSeqQ8Kv128StaticSwapsAbForGen"
MMHA = ("void tensorrt_llm::kernels::mmha::masked_multihead_attention_kernel<__nv_bfloat16, __nv_bfloat16, "
        "tensorrt_llm::kernels::KVBlockArray, 128u, 8u>(tensorrt_llm::kernels::Multihead_attention_params"
        "<__nv_bfloat16, false>, tensorrt_llm::kernels::KVBlockArray)")
XQA = "kernel_mha"  # TensorRT-LLM's XQA (extern "C": the bare name)
FA2 = "void flash::flash_fwd_splitkv_kernel<Flash_fwd_kernel_traits<128, 64, 128, 4, false, false, cutlass::bfloat16_t>>"
ARGMAX = "void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float, at::native::ArgMaxOps<float>>>"


def _grid(ev: dict, x: int) -> dict:
    ev["args"].update({"grid": [x, 1, 1], "block": [128, 1, 1]})
    return ev


def _step(t0: float, text: str, corr: int, tokens: int | None, seqs: int | None, graph: bool = False,
          attention: tuple[str, ...] = ()) -> list[dict]:
    """A 50 us step: two KV-cache writes of ``tokens`` blocks (one per layer), the ``attention`` kernels (no grid), an
    argmax of ``seqs`` blocks."""
    ev = [ann(text, t0, 50.0)]
    if graph:  # one graph launch replaying the kernels: they share its correlation id
        ev.append(launch(t0 + 1.0, 2.0, corr, name="cudaGraphLaunch"))
    attn = [(a, 0) for a in attention]
    for i, (name, x) in enumerate([(KV, tokens), (KV, tokens), *attn, (ARGMAX, seqs)]):
        if x is None:
            continue
        c = corr if graph else corr + i
        if not graph:
            ev.append(launch(t0 + 2.0 + 10 * i, 2.0, c))
        ev.append(_grid(kernel(t0 + 5.0 + 10 * i, 3.0, c, name=name), x) if x else kernel(t0 + 5.0 + 10 * i, 3.0, c,
                                                                                         name=name))
    return ev


def test_batch_phase_and_source_from_kernel_grids(tmp_path: Path) -> None:
    events = (_step(0.0, "model_step", 10, tokens=6, seqs=6)      # 6 tokens for 6 sequences: decode at 6
              + _step(100.0, "model_step", 20, tokens=1049, seqs=1)  # one sequence, 1,049 tokens: prefill
              # tokens only, and a decode attention kernel of one token per request: batch 4, decode
              + _step(200.0, "model_step", 30, tokens=4, seqs=None, attention=(DECODE,))
              # inside a replay of a decode graph: the captured size 8
              + _step(300.0, "model_step", 40, tokens=8, seqs=None, graph=True, attention=(DECODE,))
              + _step(400.0, "model_step bs=3", 50, tokens=5, seqs=5)  # the marker wins
              + _step(500.0, "model_step", 60, tokens=None, seqs=None))  # nothing: unknown
    steps = find_steps(load_trace(write(tmp_path, events)))
    assert steps.batch_size.tolist() == [6, 1, 4, 8, 3, -1]
    assert steps.batch_source == [f"kernel_grid:{a}" for a in ("at::native::reduce_kernel", "at::native::reduce_kernel",
                                                                "vllm::reshape_and_cache_flash_kernel",
                                                                "vllm::reshape_and_cache_flash_kernel")] + [
        "marker", "none"]
    assert steps.batch_confidence == ["medium", "medium", "medium", "low", "high", None]
    assert steps.phase == ["decode", "prefill", "decode", "decode", "decode", None]
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
    decode = "tokens as requests: flashinfer::BatchDecodeWithPagedKVCacheKernel runs only in decode, one token per request"
    assert ("; batch from the grid of at::native::reduce_kernel (2 of 5, the kernel ran eagerly), the grid of "
            f"vllm::reshape_and_cache_flash_kernel (1 of 5, the kernel ran eagerly; {decode}), the grid of "
            f"vllm::reshape_and_cache_flash_kernel (1 of 5, inside a graph replay: at most that; {decode}), the step's "
            "marker or an annotation in it (1 of 5)\n") in render_trace(rep)
    assert batch_basis([replace(st, batch_source="none", batch_confidence=None, batch_note=None)
                        for st in rep.steps]) == ""


NO_SAMPLER = "no sampler kernel and no attention kernel that runs in one phase only"


@pytest.mark.parametrize("tokens, seqs, graph, attention, batch, phase, source, confidence, note", [
    # decode with a sampler: the argmax's grid is the requests, as many as the tokens
    (6, 6, False, (FA2,), 6, "decode", "kernel_grid:at::native::reduce_kernel", "medium", None),
    # a chunked prefill in which no request finishes its prompt: no sampler; a prefill-only attention kernel
    (1049, None, False, (RAGGED, PAGED_PREFILL), -1, "prefill", "none", None,
     "a prefill step (flashinfer::BatchPrefillWithRaggedKVCacheKernel runs only in prefill): the grid of "
     "vllm::reshape_and_cache_flash_kernel counts its 1,049 tokens, not its requests"),
    (888, None, False, (CONTEXT,), -1, "prefill", "none", None,
     f"a prefill step ({CONTEXT} runs only in prefill): the grid of vllm::reshape_and_cache_flash_kernel counts its "
     f"888 tokens, not its requests"),
    # decode and prefill kernels in one step, no sampler: mixed
    (300, None, False, (DECODE, RAGGED), -1, "mixed", "none", None,
     "a mixed step (flashinfer::BatchDecodeWithPagedKVCacheKernel runs only in decode, "
     "flashinfer::BatchPrefillWithRaggedKVCacheKernel only in prefill): the grid of "
     "vllm::reshape_and_cache_flash_kernel counts its 300 tokens, not its requests"),
    # with a sampler the tokens against the requests say a prompt is in the step, the decode kernel that others
    # generate: mixed, the batch from the sampler
    (300, 9, False, (DECODE, PAGED_PREFILL), 9, "mixed", "kernel_grid:at::native::reduce_kernel", "medium", None),
    # a decode kernel that also verifies draft tokens (speculative decoding): decode, the tokens are not the batch
    (32, None, True, (GEN,), -1, "decode", "none", None,
     f"a decode step whose {GEN} may run several tokens per request (speculative decoding's draft tokens, beam "
     f"search's beams): the grid of vllm::reshape_and_cache_flash_kernel in a graph replay is the captured size 32, "
     f"not its requests"),
    # TensorRT-LLM's masked multi-head attention: generation only, one row per sequence and beam
    (24, None, False, (MMHA,), -1, "decode", "none", None,
     "a decode step whose tensorrt_llm::kernels::mmha::masked_multihead_attention_kernel may run several tokens per "
     "request (speculative decoding's draft tokens, beam search's beams): the grid of "
     "vllm::reshape_and_cache_flash_kernel counts its 24 tokens, not its requests"),
    # TensorRT-LLM's XQA: generation only, rows per sequence and beam, draft tokens + 1 per request
    (16, None, False, (XQA,), -1, "decode", "none", None,
     "a decode step whose kernel_mha may run several tokens per request (speculative decoding's draft tokens, beam "
     "search's beams): the grid of vllm::reshape_and_cache_flash_kernel counts its 16 tokens, not its requests"),
    # only kernels that run in every phase (FlashAttention's split-KV, FlashInfer's batch prefill): ambiguous
    (1049, None, False, (FA2,), -1, None, "none", None,
     f"{NO_SAMPLER}: the grid of vllm::reshape_and_cache_flash_kernel counts its 1,049 tokens, not its requests"),
    (4, None, False, (PAGED_PREFILL,), -1, None, "none", None,
     f"{NO_SAMPLER}: the grid of vllm::reshape_and_cache_flash_kernel counts its 4 tokens, not its requests"),
    (8, None, True, (), -1, None, "none", None,
     f"{NO_SAMPLER}: the grid of vllm::reshape_and_cache_flash_kernel in a graph replay is the captured size 8, "
     f"not its requests"),
], ids=["decode-sampler", "prefill-flashinfer", "prefill-trtllm-gen", "mixed", "mixed-sampler", "decode-spec",
        "decode-trtllm-mmha", "decode-trtllm-xqa",
        "ambiguous-fa2", "ambiguous-flashinfer-paged", "ambiguous-replay"])
def test_phase_and_batch_from_attention_kernels(tmp_path: Path, tokens: int, seqs: int | None, graph: bool,
                                                attention: tuple[str, ...], batch: int, phase: str | None,
                                                source: str, confidence: str | None, note: str | None) -> None:
    """A step's token count is its batch only where each request has one token; which attention kernels ran say
    the phase where no sampler kernel gives the requests (a chunked prefill in which no request finishes its prompt
    samples nothing)."""
    events = _step(0.0, "model_step", 10, tokens=tokens, seqs=seqs, graph=graph, attention=attention)
    s = find_steps(load_trace(write(tmp_path, events)))
    assert (s.batch_size.tolist(), s.phase, s.batch_source, s.batch_confidence, s.batch_note) == (
        [batch], [phase], [source], [confidence], [note])
    assert s.tokens.tolist() == [-1 if graph else tokens]  # a replayed write gives the captured size, not the tokens
    rep = analyze_trace(load_trace(write(tmp_path, events)), AnalysisOptions())
    assert (rep.steps[0].batch_size, rep.steps[0].batch_note) == (None if batch < 0 else batch, note)
    if batch < 0:  # the report says why there is no batch, and shows the tokens it counted
        text = render_trace(rep)
        assert f"batch sizes: unknown; batch from unknown (1 of 1; {note})\n" in text
        lines = text.splitlines()
        header = next(i for i, line in enumerate(lines) if line.startswith("step "))
        if not graph:  # a replayed write counts no tokens: then nothing of the engine columns is known
            assert lines[header].split()[:5] == ["step", "bs", "phase", "reqs", "tokens"]
            assert lines[header + 2].split()[:5] == ["0", "-", phase or "-", "-", str(tokens)]


def _without_markers(src: Path, dst: Path) -> Path:
    """The trace with its engine step annotations renamed to a bare ``execute_model`` (no counts)."""
    doc = json.loads(gzip.decompress(src.read_bytes()))
    for e in doc["traceEvents"]:
        name = e.get("name", "")
        if isinstance(name, str) and (name.startswith("execute_") or name.startswith("step[")):
            e["name"] = "execute_model"
    dst.write_text(json.dumps(doc))
    return dst


@pytest.mark.parametrize("folder, file, batch, source, phase, tokens, note", [
    # vLLM PIECEWISE, one mixed step of 8,192 tokens (46 requests): the KV-cache write runs eagerly, one block per
    # token; no sampler ran and the Triton unified attention runs in every phase: the tokens are no batch
    ("tracelens-vllm-prefilldecode-piecewise-mi300x", "graph_execution.json.gz", None, "none", None, 8192,
     "no sampler kernel and no attention kernel that runs in one phase only: the grid of "
     "vllm::reshape_and_cache_flash_kernel counts its 8,192 tokens, not its requests"),
    # SGLang EXTEND of 15 requests (15,360 tokens): the argmax over the logits has one block per request
    ("tracelens-sglang-qwen3-8b-decode-mi300x", "sglang_Qwen3-8B_prefilldecode.json.gz", 15,
     "kernel_grid:at::native::reduce_kernel", "prefill", 15360, None),
    # SGLang DECODE at 32: the replayed kernels carry no grid on ROCm; the eager argmax after the replay does
    ("tracelens-sglang-qwen3-8b-decode-mi300x", "sglang_Qwen3-8B_decode.json.gz", 32,
     "kernel_grid:at::native::reduce_kernel", None, None, None),
    # vLLM eager prefill of one request's 888 tokens on a B200 (TP8): the token ids' recorded shape is flattened (888
    # tokens) and the attention is TensorRT-LLM's generated context-phase kernel: a prefill, no batch
    ("tracelens-b200-eager-llm", "eager_trace.json.gz", None, "none", "prefill", 888,
     "a prefill step (fmhaSm100aKernel_QkvE4m3OBfloat16H64PagedKvSlidingOrChunkedCausalP16VarSeqQ128Kv128"
     "PersistentContext runs only in prefill): the grid of vllm::rotary_embedding_kernel counts its 888 tokens, not "
     "its requests"),
])
def test_engine_traces_without_markers(tmp_path: Path, folder: str, file: str, batch: int | None, source: str,
                                       phase: str | None, tokens: int | None, note: str | None) -> None:
    rep = analyze_trace(load_trace(_without_markers(TRACES / "engines" / folder / file, tmp_path / "t.json")),
                        AnalysisOptions())
    st = rep.steps[0]
    assert (st.batch_size, st.batch_source, st.batch_confidence, st.phase, st.tokens, st.batch_note) == (
        batch, source, "medium" if batch else None, phase, tokens, note)


V2_PREP = ("_prepare_pos_seq_lens_kernel", 1)  # vLLM V2 runner: _prepare_pos_seq_lens_kernel[(num_reqs + 1,)]
V2_COMBINE = ("_combine_sampled_and_draft_tokens_kernel", 0)  # [(num_reqs,)]
V1_SLOTS = ("_compute_slot_mapping_kernel", 1)  # vLLM V1 runner's block table: [(num_reqs + 1,)]


def _runner_step(t0: float, corr: int, seqs: int, prep: list[tuple[str, int]], argmax: tuple[int, int]) -> list[dict]:
    """A bare ``execute_model`` step of ``seqs`` decoding requests: the runner's input preparation kernels (name, extra
    blocks: grid x = seqs + extra), then an argmax launched with ``argmax`` = (grid x, block y)."""
    ev = [ann("execute_model", t0, 80.0)]
    for i, (name, extra) in enumerate(prep):
        ev += [launch(t0 + 2.0 + 10 * i, 2.0, corr + i), _grid(kernel(t0 + 5.0 + 10 * i, 3.0, corr + i, name=name),
                                                               seqs + extra)]
    c = corr + len(prep)
    k = kernel(t0 + 65.0, 3.0, c, name=ARGMAX)
    k["args"].update({"grid": [argmax[0], 1, 1], "block": [32, argmax[1], 1]})
    return ev + [launch(t0 + 60.0, 2.0, c), k]


@pytest.mark.parametrize("prep, argmax, batch, source", [
    # V2 runner: its argmax reduces per-tile maxima, 16 rows a block (grid 3 for 48 rows): its own kernels win
    ([V2_PREP, V2_COMBINE], (3, 16), 48, "_prepare_pos_seq_lens_kernel"),
    ([V2_COMBINE], (1, 16), 9, "_combine_sampled_and_draft_tokens_kernel"),
    # V1 runner: the slot mapping's extra block is not a request; its argmax over the vocabulary agrees
    ([V1_SLOTS], (33, 16), 33, "_compute_slot_mapping_kernel"),
    # no engine kernel: the argmax over the vocabulary, one block per row
    ([], (21, 16), 21, "at::native::reduce_kernel"),
], ids=["v2-runner", "v2-combine-only", "v1-runner", "argmax-alone"])
def test_engine_sequence_kernels_win_over_the_argmax(tmp_path: Path, prep: list[tuple[str, int]],
                                                     argmax: tuple[int, int], batch: int, source: str) -> None:
    steps = find_steps(load_trace(write(tmp_path, _runner_step(0.0, 10, batch, prep, argmax)
                                        + _runner_step(200.0, 20, batch, prep, argmax))))
    assert steps.source == "engine" and steps.batch_size.tolist() == [batch, batch]
    assert steps.batch_source == [f"kernel_grid:{source}"] * 2 and steps.batch_confidence == ["medium"] * 2
    assert steps.requests.tolist() == [batch, batch]


@pytest.mark.parametrize("run", ["full-stack-v2runner", "full-stack-v1runner", "eager-stack"])
def test_own_vllm_traces_without_their_annotation_keep_every_batch(tmp_path: Path, run: str) -> None:
    # vLLM 0.24's traces (H200, 16 requests decoding) with the execute_context annotation taken out: the steps come
    # from the runner's Python function, the batch from its input preparation kernels (V2: its argmax over per-tile
    # maxima ran grid 1 for 16 rows, which read as batch 1 before), the same as the annotation's on every step
    src = REPO / "traces" / "h200-vllm-2026-12-04" / "interleaved" / run / "block0.pt.trace.json.gz"
    marked = find_steps(load_trace(src))
    doc = json.loads(gzip.decompress(src.read_bytes()))
    doc["traceEvents"] = [e for e in doc["traceEvents"] if not str(e.get("name", "")).startswith("execute_context")]
    (tmp_path / "bare.json").write_text(json.dumps(doc))
    bare = find_steps(load_trace(tmp_path / "bare.json"))
    assert marked.batch_size.tolist() == [16] * 6 and bare.batch_size.tolist() == [16] * 6
    grid = "_compute_slot_mapping_kernel" if run.endswith("v1runner") else "_prepare_pos_seq_lens_kernel"
    assert bare.batch_source == [f"kernel_grid:{grid}"] * 6 and bare.batch_confidence == ["medium"] * 6
