"""Batch, phase and ``batch_source`` per step on hand-built multi-step vLLM V1 traces shaped as vLLM writes them
(docs/engines.md, "Batch from kernel grids"): one file per tensor-parallel rank (``{instance}-rank-{r}.{ts}
.pt.trace.json.gz``), the worker's ``execute_model`` (Python function of a ``with_stack`` trace, with or without
the ``execute_context_...`` annotation around it), the sampler in ``sample_tokens`` after it, FULL graphs for
decode and an eager prefill over the largest captured size.

(a) H100: a replayed kernel keeps its grid (the captured size); the KV-cache write is the CUDA
``reshape_and_cache_flash_kernel`` (FLASH_ATTN / FLASHINFER) and the rotary embedding is fused by Inductor (no
token kernel of its own); sampling is the argmax over the logits or FlashInfer's top-k/top-p kernel.
(b) MI300X: a replayed kernel carries no grid (ROCm); the KV-cache write is the HIP ``reshape_and_cache_flash_kernel``
(ROCM_AITER_FA), the HIP ``reshape_and_cache_kernel`` (ROCM_ATTN) or the Triton ``reshape_and_cache_kernel_flash``
(TRITON_ATTN), and ``vllm::rotary_embedding_kernel`` runs as a custom op.
"""
from __future__ import annotations

import gzip
import json
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from launchgap.errors import InputError
from launchgap.loaders import load_trace
from launchgap.rank_split import split_ranks
from launchgap.steps import find_steps
from tests.unit.kineto_tiny import HOST_PID, HOST_TID, ann, doc

RUNNER = "vllm/v1/worker/gpu_model_runner.py(3410): execute_model"
SAMPLE = "vllm/v1/worker/gpu_model_runner.py(3702): sample_tokens"
KV_CUDA = "void vllm::reshape_and_cache_flash_kernel<__nv_bfloat16, __nv_bfloat16, (vllm::Fp8KVCacheDataType)0>"
KV_HIP = "void vllm::reshape_and_cache_flash_kernel<__hip_bfloat16, __hip_bfloat16, (vllm::Fp8KVCacheDataType)0>"
KV_HIP_PAGED = "void vllm::reshape_and_cache_kernel<__hip_bfloat16, __hip_bfloat16, (vllm::Fp8KVCacheDataType)0>"
KV_TRITON = "reshape_and_cache_kernel_flash"
ROPE = "void vllm::rotary_embedding_kernel<c10::BFloat16, true>"
ARGMAX = "void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float, at::native::ArgMaxOps<float>>>"
FLASHINFER = "void flashinfer::sampling::TopKTopPSamplingFromProbKernel<1024u, (cub::BlockScanAlgorithm)0>"
GEMM = "sm90_xmma_gemm_bf16bf16_bf16f32"
ALL_REDUCE = "void vllm::cross_device_reduce_1stage<__nv_bfloat16, 4>"
LAYERS = 2


@dataclass(frozen=True)
class Gpu:
    """What differs between the two machines: runtime call names, whether replayed kernels keep their grid,
    the KV-cache write kernel, and whether the rotary embedding is a kernel of its own."""

    launch: str
    graph_launch: str
    replay_grid: bool
    kv: str
    rope: bool


H100 = Gpu("cudaLaunchKernel", "cudaGraphLaunch", True, KV_CUDA, False)
MI300X = Gpu("hipLaunchKernel", "hipGraphLaunch", False, KV_HIP, True)


@dataclass(frozen=True)
class Step:
    """One engine iteration: ``requests`` sequences, ``tokens`` tokens; ``bucket``: the captured size its FULL graph
    replays (None: eager); ``piecewise``: PIECEWISE pieces with the attention (KV-cache write) eager between them."""

    requests: int
    tokens: int
    bucket: int | None = None
    piecewise: bool = False

    @property
    def annotation(self) -> str:
        if self.tokens > self.requests:  # every request in its prompt
            return f"execute_context_{self.requests}({self.tokens})_generation_0(0)"
        return f"execute_context_0(0)_generation_{self.requests}({self.tokens})"


class _Writer:
    """Events of one rank's trace; times in us, correlation ids counted up."""

    def __init__(self, gpu: Gpu, rank: int) -> None:
        self.gpu, self.rank, self.ev, self.corr, self.gpu_t = gpu, rank, [], 1000 * (rank + 1), 0.0

    def _kernel(self, name: str, corr: int, dur: float, grid: int | None) -> None:
        self.gpu_t += 1.0
        args = {"device": self.rank, "stream": 7, "correlation": corr}
        if grid is not None:
            args.update({"grid": [grid, 1, 1], "block": [256, 1, 1]})
        self.ev.append({"ph": "X", "cat": "kernel", "name": name, "pid": self.rank, "tid": 7, "ts": self.gpu_t,
                        "dur": dur, "args": args})
        self.gpu_t += dur

    def _call(self, t: float, name: str) -> int:
        self.corr += 1
        self.ev.append({"ph": "X", "cat": "cuda_runtime", "name": name, "pid": HOST_PID, "tid": HOST_TID, "ts": t,
                        "dur": 2.0, "args": {"correlation": self.corr}})
        self.gpu_t = max(self.gpu_t, t + 3.0)
        return self.corr

    def eager(self, t: float, name: str, grid: int | None) -> float:
        self._kernel(name, self._call(t, self.gpu.launch), 4.0, grid)
        return t + 3.0

    def layers(self, t: float, step: Step) -> float:
        """The decoder layers: one FULL graph replay, PIECEWISE pieces with eager attention, or all eager."""
        graph = step.bucket is not None
        grid_in_graph = step.bucket if self.gpu.replay_grid else None
        if graph and not step.piecewise:
            corr = self._call(t, self.gpu.graph_launch)
            for _ in range(LAYERS):
                if self.gpu.rope:
                    self._kernel(ROPE, corr, 2.0, grid_in_graph)
                for name, grid in ((GEMM, None), (self.gpu.kv, grid_in_graph), ("attention_decode", None),
                                   (ALL_REDUCE, None)):
                    self._kernel(name, corr, 3.0, grid)
            return t + 3.0
        for _ in range(LAYERS):
            if graph:  # a piece up to the attention: the rotary embedding replays at the captured size
                corr = self._call(t, self.gpu.graph_launch)
                t += 3.0
                for name, grid in ((GEMM, None), (ROPE, grid_in_graph)) if self.gpu.rope else ((GEMM, None),):
                    self._kernel(name, corr, 3.0, grid)
            else:
                t = self.eager(t, GEMM, None)
                if self.gpu.rope:
                    t = self.eager(t, ROPE, step.tokens)
            t = self.eager(t, self.gpu.kv, step.tokens)  # the write's slot mapping is not padded
            t = self.eager(t, "attention_varlen", None)
            t = self.eager(t, ALL_REDUCE, None)
        return t

    def step(self, t0: float, step: Step, annotate: bool, sampler: str, sample_inside: bool = False) -> None:
        end = self.layers(t0 + 10.0, step) + 5.0
        if sample_inside:  # V1 before the sampling split: the sampler runs at the end of execute_model
            end = self.eager(end, sampler, step.requests) + 5.0
        if annotate:
            self.ev.append(ann(step.annotation, t0, end - t0 + 2.0))
        self.ev.append(_pyfn(RUNNER, t0 + 1.0, end - t0))
        if not sample_inside:  # Worker.sample_tokens: a call of its own after execute_model
            s0 = end + 5.0
            self.ev.append(_pyfn(SAMPLE, s0, 12.0))
            self.eager(s0 + 2.0, sampler, step.requests)


def _pyfn(name: str, ts: float, dur: float) -> dict:
    return {"ph": "X", "cat": "python_function", "name": name, "pid": HOST_PID, "tid": HOST_TID, "ts": ts,
            "dur": dur, "args": {"Python id": 1}}


#: A prefill of 3 requests (1,049 tokens, over the largest captured size: eager), then decode: 3 requests padded
#: to the captured 4 (three times), 4 requests (the captured size itself), 5 requests in PIECEWISE pieces padded to 8.
WORKLOAD = (Step(3, 1049), Step(3, 3, 4), Step(3, 3, 4), Step(3, 3, 4), Step(4, 4, 4), Step(5, 5, 8, piecewise=True))


def write_rank(folder: Path, gpu: Gpu, rank: int, annotate: bool, sampler: str = ARGMAX,
               steps: tuple[Step, ...] = WORKLOAD, sample_inside: bool = False) -> Path:
    w = _Writer(gpu, rank)
    for i, st in enumerate(steps):
        w.step(1000.0 * i + 7.0 * rank, st, annotate, sampler, sample_inside)
    body = doc(w.ev, distributedInfo={"backend": "nccl", "rank": rank, "world_size": 4})
    body["deviceProperties"] = [{"id": rank, "name": "NVIDIA H100 80GB HBM3" if gpu is H100 else ""}]
    path = folder / f"vllm-3f2a-rank-{rank}.1764760000{rank}.pt.trace.json.gz"
    path.write_bytes(gzip.compress(json.dumps(body).encode()))
    return path


def _rows(path: Path) -> list[tuple]:
    s = find_steps(load_trace(path))
    return list(zip(s.batch_size.tolist(), s.phase, s.batch_source, s.batch_confidence, s.tokens.tolist(),
                    s.requests.tolist()))


ARGMAX_SRC = "kernel_grid:at::native::reduce_kernel"
# Without annotations: the requests from the sampler's grid; tokens from the KV-cache write where it ran eagerly
# (the prefill, the PIECEWISE step); a FULL graph's replayed write gives the captured size, not the tokens.
H100_BARE = [(3, "prefill", ARGMAX_SRC, "medium", 1049, 3)] + [(3, None, ARGMAX_SRC, "medium", -1, 3)] * 3 + [
    (4, "decode", ARGMAX_SRC, "medium", -1, 4), (5, "decode", ARGMAX_SRC, "medium", 5, 5)]
# ROCm: replayed kernels carry no grid, so a FULL-graph step has no tokens at all
MI300X_BARE = [(3, "prefill", ARGMAX_SRC, "medium", 1049, 3)] + [(3, None, ARGMAX_SRC, "medium", -1, 3)] * 3 + [
    (4, None, ARGMAX_SRC, "medium", -1, 4), (5, "decode", ARGMAX_SRC, "medium", 5, 5)]
MARKED = [(3, "prefill", "marker", "high", 1049, 3)] + [(3, "decode", "marker", "high", 3, 3)] * 3 + [
    (4, "decode", "marker", "high", 4, 4), (5, "decode", "marker", "high", 5, 5)]


@pytest.mark.parametrize("gpu, annotate, expected", [
    (H100, False, H100_BARE), (MI300X, False, MI300X_BARE), (H100, True, MARKED), (MI300X, True, MARKED)],
    ids=["h100-bare", "mi300x-bare", "h100-annotated", "mi300x-annotated"])
def test_tp4_ranks_batch_phase_and_source(tmp_path: Path, gpu: Gpu, annotate: bool, expected: list[tuple]) -> None:
    for rank in range(4):  # every rank runs the same steps (and samples: V1 gathers the logits on all of them)
        assert _rows(write_rank(tmp_path, gpu, rank, annotate)) == expected


@pytest.mark.parametrize("gpu", [H100, MI300X], ids=["h100", "mi300x"])
def test_the_issue_shape_old_v1_piecewise_batch_one(tmp_path: Path, gpu: Gpu) -> None:
    """The shape issue 26 reports (KV-cache write grid 1 in every decode step, 1,049 in the prefill): a V1
    release before the step annotation and before the sampling split (sampler inside execute_model), PIECEWISE
    graphs (the default then) with the attention eager between the pieces; one request."""
    steps = (Step(1, 1049),) + (Step(1, 1, 1, piecewise=True),) * 4
    for rank in range(4):
        rows = _rows(write_rank(tmp_path, gpu, rank, annotate=False, steps=steps, sample_inside=True))
        assert rows == [(1, "prefill", ARGMAX_SRC, "medium", 1049, 1)] + [(1, "decode", ARGMAX_SRC, "medium", 1, 1)] * 4
    done = _launchgap("plan", str(tmp_path), "--format", "json")
    assert done.returncode == 0, done.stderr
    plan = json.loads(done.stdout)  # one plan for the job's four ranks (launchgap.workload.tp_job)
    # the four decode steps at batch 1; the prefill left out
    assert [(b["batch_size"], b["weight"]) for b in plan["per_batch"]] == [(1, 1.0)]


@pytest.mark.parametrize("kv", [KV_HIP_PAGED, KV_TRITON], ids=["rocm-attn", "triton-attn"])
def test_rocm_kv_write_kernels_give_the_tokens(tmp_path: Path, kv: str) -> None:
    gpu = Gpu("hipLaunchKernel", "hipGraphLaunch", False, kv, False)
    rows = _rows(write_rank(tmp_path, gpu, 0, annotate=False, steps=(Step(3, 1049), Step(5, 5, 8, piecewise=True))))
    assert rows == [(3, "prefill", ARGMAX_SRC, "medium", 1049, 3), (5, "decode", ARGMAX_SRC, "medium", 5, 5)]


def test_flashinfer_sampler_and_a_replay_without_sampler(tmp_path: Path) -> None:
    """FlashInfer's top-k/top-p kernel has one block per sequence. Where a step shows no sequence count, a FULL
    graph's replayed KV-cache write is the captured size of its tokens: the batch (at most that, low confidence) only
    where an attention kernel in the graph says decode of one token per request (FlashInfer's CUDA-core decode);
    an attention kernel of every phase leaves it unknown."""
    rows = _rows(write_rank(tmp_path, H100, 0, annotate=False, sampler=FLASHINFER, steps=(Step(3, 1049),)))
    assert rows == [(3, "prefill", "kernel_grid:flashinfer::sampling::TopKTopPSamplingFromProbKernel", "medium",
                     1049, 3)]
    path = write_rank(tmp_path, H100, 0, annotate=False, sampler="some_other_kernel", steps=(Step(3, 3, 4),))
    assert _rows(path) == [(-1, None, "none", None, -1, -1)]
    body = gzip.decompress(path.read_bytes()).decode().replace(
        '"attention_decode"', '"void flashinfer::BatchDecodeWithPagedKVCacheKernel<(flashinfer::PosEncodingMode)0>"')
    path.write_bytes(gzip.compress(body.encode()))
    assert _rows(path) == [(4, "decode", "kernel_grid:vllm::reshape_and_cache_flash_kernel", "low", -1, -1)]


def _launchgap(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "launchgap", *args], capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("gpu", [H100, MI300X], ids=["h100", "mi300x"])
def test_plan_on_the_tp4_traces_alone(tmp_path: Path, gpu: Gpu) -> None:
    for rank in range(4):
        write_rank(tmp_path, gpu, rank, annotate=False)
    done = _launchgap("plan", str(tmp_path), "--format", "json")
    assert done.returncode == 0, done.stderr
    plan = json.loads(done.stdout)
    # one plan for the job: a server captures one list on every rank (each rank alone is a workload of its own for
    # the analysis; launchgap.workload.tp_job groups them for the plan)
    assert "workloads" not in plan and plan["workload"]["rank"] is None and plan["workload"]["world_size"] == 4
    assert any(n.startswith("ranks 0, 1, 2, 3 of 4 planned together") for n in plan["inputs"])
    # the decode steps (the prefill is not one): 3, 3, 3, 4, 5 on every rank
    assert [(b["batch_size"], b["weight"]) for b in plan["per_batch"]] == [(3, 0.6), (4, 0.2), (5, 0.2)]


def _merged_tp4(tmp_path: Path, annotate: bool, one_gpu: bool) -> Path:
    """The four H100 rank files' events in one Kineto file, each rank's host process and thread its own; each rank on
    its own GPU, or (``one_gpu``) all on GPU 0 with the same correlation ids."""
    events: list[dict] = []
    for rank in range(4):
        body = json.loads(gzip.decompress(write_rank(tmp_path, H100, 0 if one_gpu else rank, annotate).read_bytes()))
        for e in body["traceEvents"]:
            if e["pid"] == HOST_PID:
                e["pid"], e["tid"] = HOST_PID + rank, HOST_TID + rank
        events += body["traceEvents"]
    merged = tmp_path / "merged" / "tp4.json"
    merged.parent.mkdir()
    merged.write_text(json.dumps(doc(events)))
    return merged


@pytest.mark.parametrize("annotate", [False, True], ids=["python-markers", "annotations"])
def test_ranks_merged_into_one_file_are_split(tmp_path: Path, annotate: bool) -> None:
    """Four ranks' events in one file (each rank's host process and thread ids its own, each on its own GPU): the
    file is split per rank (launchgap.rank_split); each rank has the steps of its own file, and a plan reads one
    rank (pooling them would count every step four times)."""
    merged = _merged_tp4(tmp_path, annotate, one_gpu=False)
    split = split_ranks(load_trace(merged))
    assert [(r.rank, r.pid, r.devices) for r in split.ranks] == [(k, HOST_PID + k, (k,)) for k in range(4)]
    for part in split.traces:
        s = find_steps(part)
        assert list(zip(s.batch_size.tolist(), s.phase, s.batch_source, s.batch_confidence, s.tokens.tolist(),
                        s.requests.tolist())) == (MARKED if annotate else H100_BARE)
    done = _launchgap("analyze", str(merged), "--format", "json")
    assert done.returncode == 0, done.stderr
    job, = json.loads(done.stdout)["jobs"]
    assert job["summary"]["ranks"] == [0, 1, 2, 3] and job["split"].startswith(f"{merged} held 4 ranks")
    done = _launchgap("plan", str(merged), "--format", "json")
    assert done.returncode == 0, done.stderr
    plan = json.loads(done.stdout)  # one plan (one rank), the decode steps of one rank: 3, 3, 3, 4, 5
    assert [(b["batch_size"], b["weight"]) for b in plan["per_batch"]] == [(3, 0.6), (4, 0.2), (5, 0.2)]
    assert any(n["kind"] == "warning" and n["traces"] == [f"{merged}#rank0"] and n["text"].startswith(
        f"the file holds 4 ranks of one job; the plan reads rank 0 = pid {HOST_PID} on GPU 0 only")
        for n in plan["trace_notes"])  # the rank's analysis warning, a trace note named by the rank read


def test_ranks_merged_on_one_gpu_are_refused(tmp_path: Path) -> None:
    """Four ranks' markers running at once with every launch on one GPU and the same correlation ids: which process
    drives the GPU is unknown, so the file cannot be split; refused with one line, exit code 2."""
    merged = _merged_tp4(tmp_path, annotate=False, one_gpu=True)
    with pytest.raises(InputError, match=r"step markers come from 4 threads .* could not be split per rank"):
        find_steps(load_trace(merged))
    done = _launchgap("analyze", str(merged))
    assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert "Traceback" not in done.stderr


def test_markers_of_two_threads_one_after_the_other_are_kept(tmp_path: Path) -> None:
    """Two threads' step markers that do not run at once (one stray overlap in eight steps) are one trace's steps."""
    events: list[dict] = []
    for i in range(8):
        tid = HOST_TID + (i % 2)  # alternating threads, one step after the other
        t0 = 100.0 * i
        events += [_pyfn(RUNNER, t0, 60.0 if i != 3 else 130.0) | {"tid": tid}]
        events += [{"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": HOST_PID, "tid": tid,
                    "ts": t0 + 5.0, "dur": 2.0, "args": {"correlation": i + 1}},
                   {"ph": "X", "cat": "kernel", "name": ARGMAX, "pid": 0, "tid": 7, "ts": t0 + 8.0, "dur": 3.0,
                    "args": {"device": 0, "stream": 7, "correlation": i + 1, "grid": [2, 1, 1], "block": [512, 1, 1]}}]
    path = tmp_path / "two_threads.json"
    path.write_text(json.dumps(doc(events)))
    steps = find_steps(load_trace(path))
    assert steps.source == "engine" and steps.batch_size.tolist() == [2] * 8
