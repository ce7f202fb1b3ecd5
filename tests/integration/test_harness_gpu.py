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
    from analyzer.harness.model import PRESETS, Decoder

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
    from analyzer.cli import main

    out = tmp_path / "rec"
    rc = main(["record", "--model", "tiny", "--batch-sizes", "1,4", "--out", str(out), "--repeats", "10",
               "--rounds", "2", "--warmup", "2", "--steps", "3", "--context-len", "64", "--start-pos", "8", "--no-micro"])
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
    from analyzer.loaders import load_trace
    from analyzer.report import analyze_trace

    for mode in ("eager", "graph"):
        rep = analyze_trace(load_trace(out / f"tiny_bs4_{mode}.json.gz"))
        assert rep.summary.steps == 3
        assert rep.summary.batch_sizes == [4]
        assert rep.mode == mode
        assert rep.summary.kernels_per_step_median >= rows[4]["kernels_per_step"]
