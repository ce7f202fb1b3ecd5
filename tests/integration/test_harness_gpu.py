"""The recording harness on a real GPU: eager vs graph, traces the analyzer reads back.

Skips without CUDA (``pytest -m gpu`` on a GPU machine runs it).
"""
from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

torch = pytest.importorskip("torch", reason="torch not installed (pip install 'launchgap[record]')")

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU"),
]


def test_graph_replay_matches_eager_step() -> None:
    """From the same state, a replayed graph computes what the eager step computes."""
    from launchgap.harness.model import PRESETS, Decoder

    m = Decoder(PRESETS["tiny"], max_batch_size=8, context_len=64, start_pos=8, device="cuda", seed=1)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        m.step(8)  # warm-up: pos 8 -> 9
    torch.cuda.current_stream().wait_stream(side)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        m.step(8)  # capture runs nothing: the state stays at pos 9
    graph_logits = m.last_logits
    tokens0, pos0 = m.tokens.clone(), m.pos.clone()
    caches0 = [(layer["k_cache"].clone(), layer["v_cache"].clone()) for layer in m.layers]
    eager_tokens = m.step(8).clone()
    eager_logits = m.last_logits.clone()
    eager_k = m.layers[-1]["k_cache"][:8, :, 9].clone()
    m.tokens.copy_(tokens0)
    m.pos.copy_(pos0)
    for layer, (k, v) in zip(m.layers, caches0):
        layer["k_cache"].copy_(k)
        layer["v_cache"].copy_(v)
    g.replay()
    torch.cuda.synchronize()
    assert int(m.pos.item()) == 10
    # bf16: the graph may run other GEMM algorithms than eager, so compare with a tolerance.
    assert torch.allclose(graph_logits.float(), eager_logits.float(), rtol=0.02, atol=0.05)
    assert torch.allclose(m.layers[-1]["k_cache"][:8, :, 9].float(), eager_k.float(), rtol=0.02, atol=0.05)
    assert torch.equal(m.tokens[:8], graph_logits.argmax(-1))
    assert eager_tokens.shape == (8,)


def test_record_cuda_end_to_end(tmp_path: Path) -> None:
    """Timings for both modes, traces with kernels, and the analyzer finds the annotated steps."""
    from launchgap.cli import main

    out = tmp_path / "rec"
    rc = main(["record", "--model", "tiny", "--batch-sizes", "1,4", "--out", str(out), "--repeats", "10",
               "--rounds", "2", "--warmup", "2", "--steps", "3", "--context-len", "64", "--start-pos", "8",
               "--no-micro"])
    assert rc == 0
    doc = json.loads((out / "timings.json").read_text())
    assert doc["schema"] == "launchgap.timings/1" and doc["cuda"]
    rows = {r["batch_size"]: r for r in doc["rows"]}
    assert set(rows) == {1, 4}
    for r in rows.values():
        assert r["eager_us"] > 0 and r["graph_us"] > 0 and r["capture_s"] > 0
        assert r["repeats"] == 20 and len(r["eager_us_rounds"]) == len(r["graph_us_rounds"]) == 2
        assert r["kernels_per_step"] > 100  # 4 layers x ~46 kernels
        # A replayed tiny-model graph is far faster than its ~150 eager launches.
        assert r["graph_us"] < r["eager_us"]
    with gzip.open(out / "tiny_bs4_eager.json.gz", "rt") as fh:
        events = json.load(fh)["traceEvents"]
    # Eager: exactly the 3 active steps' kernels. (Graph traces also catch kernels of replays
    # just before the active window, so their total is not a multiple of the step.)
    assert sum(1 for e in events if e.get("cat") == "kernel") == 3 * rows[4]["kernels_per_step"]
    assert sum(1 for e in events if e.get("cat") == "user_annotation" and e["name"] == "decode_step[bs=4]") == 3
    pytest.importorskip("msgspec", reason="the analyzer's loader needs msgspec")
    from launchgap.loaders import load_trace
    from launchgap.report import analyze_trace

    for mode in ("eager", "graph"):
        rep = analyze_trace(load_trace(out / f"tiny_bs4_{mode}.json.gz"))
        assert rep.summary.steps == 3
        assert rep.summary.batch_sizes == [4]
        assert rep.mode == mode
        assert rep.summary.kernels_per_step_median >= rows[4]["kernels_per_step"]


# --------------------------------------------------------------------------------------------
# piecewise mode, capture lists in one shared pool, graph memory, serving, profiler rows


def _state(m):
    return m.tokens.clone(), m.pos.clone(), [(la["k_cache"].clone(), la["v_cache"].clone()) for la in m.layers]


def _restore(m, state) -> None:
    tokens, pos, caches = state
    m.tokens.copy_(tokens)
    m.pos.copy_(pos)
    for layer, (k, v) in zip(m.layers, caches):
        layer["k_cache"].copy_(k)
        layer["v_cache"].copy_(v)


@pytest.mark.parametrize("mode", ["full", "piecewise"])
def test_list_in_one_shared_pool_replays_like_eager(mode: str) -> None:
    """Sizes captured largest first into one pool (piecewise: graph pieces with weak-aliased
    outputs) each replay what the eager step computes from the same state, in any order."""
    from launchgap.harness.graphs import capture_list
    from launchgap.harness.model import PRESETS, Decoder
    from launchgap.harness.profiling import count_kernels_per_step
    from launchgap.timings import validate_timings

    m = Decoder(PRESETS["tiny"], max_batch_size=8, context_len=64, start_pos=8, device="cuda", seed=1)
    cl = capture_list(torch, m, [2, 8, 4], mode, "t", torch.cuda.Stream())
    e = cl.entry
    validate_timings({"rows": [], "graph_memory": [e]}, "entry")
    pieces = 1 if mode == "full" else PRESETS["tiny"].layers + 1
    assert e["capture_sizes"] == [2, 4, 8] and e["graphs"] == 3 * pieces
    assert [p["size"] for p in e["per_size"]] == [8, 4, 2] and e["capture_s"] > 0
    kernels = count_kernels_per_step(torch, lambda: m.step(8))
    nodes = e["nodes_per_graph"]["8"]
    assert nodes is not None, "kernel nodes unreadable (keep_graph or libcuda.so.1 cuGraphGetNodes failed)"
    if mode == "full":
        assert abs(nodes - kernels) <= 0.02 * kernels
    else:  # the pieces hold everything but attention (K/V write, SDPA)
        assert 0.5 * kernels < nodes < kernels
    for size in (8, 2, 4, 8):
        before = _state(m)
        m.step(size)
        want = m.last_logits.float().clone()
        _restore(m, before)
        cap = cl.captures[size]
        cap.run()
        torch.cuda.synchronize()
        assert torch.allclose(cap.logits.float(), want, rtol=0.02, atol=0.05), f"{mode} bs {size}"
        assert torch.equal(m.tokens[:size], cap.logits.argmax(-1))
        assert int(m.pos.item()) == int(before[1].item()) + 1
    cl.release(torch)


@pytest.mark.parametrize("mode", ["full", "piecewise"])
def test_transformers_list_in_one_shared_pool_replays_like_eager(tmp_path: Path, mode: str) -> None:
    """A transformers model's sizes in one pool (piecewise: its forward cut at its attention calls, one
    piece per call + 1) each replay what the eager step computes from the same state, in any order."""
    pytest.importorskip("transformers", reason="transformers not installed (pip install 'launchgap[record]')")
    from launchgap.harness.graphs import capture_list
    from launchgap.harness.hf import HFDecoder, read_hf_config

    cfg = tmp_path / "qwen3-small.json"
    cfg.write_text(json.dumps({"architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3", "hidden_size": 256,
                               "intermediate_size": 512, "num_hidden_layers": 3, "num_attention_heads": 4,
                               "num_key_value_heads": 2, "head_dim": 64, "vocab_size": 1024,
                               "max_position_embeddings": 1024}))
    m = HFDecoder(read_hf_config(cfg), max_batch_size=8, context_len=64, start_pos=8, device="cuda", seed=1)
    cl = capture_list(torch, m, [2, 8, 4], mode, "t", torch.cuda.Stream())
    assert cl.entry["graphs"] == 3 * (1 if mode == "full" else 4)
    for size in (8, 2, 4, 8):
        tokens, pos, caches = m.tokens.clone(), m.pos.clone(), [(k.clone(), v.clone()) for k, v in m._full]
        m.step(size)
        want = m.last_logits.float().clone()
        m.tokens.copy_(tokens)
        m.pos.copy_(pos)
        for (k, v), (k0, v0) in zip(m._full, caches):
            k.copy_(k0)
            v.copy_(v0)
        cap = cl.captures[size]
        cap.run()
        torch.cuda.synchronize()
        assert torch.allclose(cap.logits.float(), want, rtol=0.02, atol=0.05), f"{mode} bs {size}"
        assert torch.equal(m.tokens[:size], cap.logits.argmax(-1))
        assert torch.equal(m.pos, pos + 1)
    cl.release(torch)


def test_record_modes_memory_and_profiler_rows_end_to_end(tmp_path: Path) -> None:
    """One CLI run: eager/graph/piecewise rows and traces, profiler rows, two lists' graph memory."""
    from launchgap.cli import main

    out = tmp_path / "rec"
    rc = main(["record", "--model", "tiny", "--batch-sizes", "1,4", "--modes", "eager,graph,piecewise",
               "--repeats", "8", "--warmup", "2", "--steps", "2", "--context-len", "64", "--start-pos", "8",
               "--no-micro", "--trace-batch-sizes", "4", "--profiler-settings", "plain,stack",
               "--capture-lists", "pow2-8,single-8", "--out", str(out)])
    assert rc == 0
    from launchgap.timings import load_timings

    doc = load_timings(out / "timings.json")
    rows = {r["batch_size"]: r for r in doc["rows"]}
    for r in rows.values():
        assert r["eager_us"] > r["piecewise_us"] > 0 and r["graph_us"] > 0
        assert r["piecewise_graphs"] == 5 and r["piecewise_capture_s"] > 0
        assert r["graph_nodes"] > r["piecewise_nodes"] > 0
    pvu = doc["profiled_vs_unprofiled"]
    assert [(p["batch_size"], p["profiler"]) for p in pvu] == [(4, "plain"), (4, "stack")]
    # each profiler row times its own graph step around its trace (the interleaved truth), the same
    # size's step as the sweep's row within a few percent
    assert all(abs(p["unprofiled_graph_us"] / rows[4]["graph_us"] - 1) < 0.10 for p in pvu)
    mem = {(g["mode"], g["list_name"]): g for g in doc["graph_memory"]}
    assert set(mem) == {(m, n) for m in ("full", "piecewise") for n in ("pow2-8", "single-8")}
    assert mem[("full", "pow2-8")]["graphs"] == 4 and mem[("piecewise", "pow2-8")]["graphs"] == 20
    assert all(g["device_used_mib"] is not None and g["nodes_per_graph"]["8"] for g in mem.values())
    with gzip.open(out / "tiny_bs4_piecewise.json.gz", "rt") as fh:
        events = json.load(fh)["traceEvents"]
    assert sum(1 for e in events if e.get("cat") == "user_annotation" and e["name"] == "decode_step[bs=4]") == 2
    launches = sum(1 for e in events if e.get("cat") == "cuda_runtime" and e["name"].startswith("cudaGraphLaunch"))
    assert launches >= 2 * 5  # five pieces per profiled step (replays just before the window may add some)


def test_serving_on_cuda(tmp_path: Path) -> None:
    """Buckets replay their graphs (one cudaGraphLaunch inside each graph step's annotation,
    none inside eager steps); memory and capture time of the list are measured."""
    from launchgap.cli import main
    from launchgap.timings import load_timings

    out = tmp_path / "srv"
    rc = main(["record", "--model", "tiny", "--capture-sizes", "1,2,4,8", "--serving-steps", "12",
               "--sampler", "4,0.8,12", "--inject-fallbacks", "2", "--repeats", "5", "--warmup", "2",
               "--serving-rounds", "2", "--context-len", "64", "--start-pos", "8", "--out", str(out)])
    assert rc == 0
    (e,) = load_timings(out / "timings.json")["serving"]
    assert e["graphs"] == 4 and e["capture_s"] > 0 and e["device_used_mib"] is not None
    assert len(e["fallback_steps"]) == 2 and e["throughput_tokens_per_s"] > 0
    with gzip.open(out / e["trace"], "rt") as fh:
        events = json.load(fh)["traceEvents"]
    steps = sorted((x for x in events if x.get("cat") == "user_annotation" and x["name"].startswith("decode_step")),
                   key=lambda x: x["ts"])
    assert [x["name"] for x in steps] == [s["annotation"] for s in e["steps"]]
    launches = [x["ts"] for x in events if x.get("cat") == "cuda_runtime" and x["name"].startswith("cudaGraphLaunch")]
    for x, s in zip(steps, e["steps"]):
        inside = sum(1 for t in launches if x["ts"] <= t <= x["ts"] + x["dur"])
        assert inside == (1 if s["mode"] == "graph" else 0), s["annotation"]


def test_hf_config_records_eager_and_graph_on_cuda(tmp_path: Path) -> None:
    """A tiny transformers config (no download): every size captures, the replay advances the positions and
    writes the cache as the eager step does, and the timings say what was measured."""
    transformers = pytest.importorskip("transformers", reason="transformers not installed")
    from launchgap.cli import main
    from launchgap.harness.hf import HFDecoder, read_hf_config
    from launchgap.timings import load_timings

    cfg = tmp_path / "tiny-llama.json"
    cfg.write_text(json.dumps({"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 128,
                               "intermediate_size": 256, "num_hidden_layers": 2, "num_attention_heads": 4,
                               "num_key_value_heads": 2, "vocab_size": 512}))
    dec = HFDecoder(read_hf_config(cfg), max_batch_size=4, context_len=64, start_pos=8, device="cuda", seed=1)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        dec.step(4)  # warm-up: pos 8 -> 9
    torch.cuda.current_stream().wait_stream(side)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        dec.step(4)
    assert dec.pos.tolist() == [9, 9]  # a capture runs nothing
    k0 = dec._full[0][0][:4, :, 9].clone()
    g.replay()
    torch.cuda.synchronize()
    assert dec.pos.tolist() == [10, 10] and not torch.equal(dec._full[0][0][:4, :, 9], k0)
    out = tmp_path / "run"
    assert main(["record", "--hf-config", str(cfg), "--batch-sizes", "1,3", "--repeats", "5", "--steps", "1",
                 "--no-micro", "--out", str(out)]) == 0
    doc = load_timings(out / "timings.json")
    assert all(r["eager_us"] > 0 and r["graph_us"] > 0 and r["graph_nodes"] for r in doc["rows"])
    entry = doc["models"]["tiny-llama"]
    assert entry["capture"] == {"ok": True, "reason": None}
    assert entry["model_source"]["architecture"] == "LlamaForCausalLM"
    assert entry["transformers"] == transformers.__version__
