"""The harness's CUDA-only control flow on the CPU, through a stand-in ``torch.cuda``.

Capturing is what a CPU cannot do: here a "capture" runs the captured function once and a
"replay" runs it again, each capture grows the allocator's reserved memory by 2 MiB and the
driver's used memory by 3 MiB, and every graph has 42 kernel nodes. What is left to check
is the harness's own bookkeeping on the CUDA paths: which sizes are captured in which order
and pool, what each graph-memory entry, sweep row, profiler row and serving entry holds, and
that the file validates. (Replays against eager, weak aliases and node counting have their
own tests; the real thing runs in tests/integration/test_harness_gpu.py.) A transformers model's
piecewise step is captured in segments of one forward: a segment's "capture" ends at an
attention call and its "replay" only logs itself, so what is checked there is the structure:
pieces, eager attention islands between replays, and the entries.
"""
from __future__ import annotations

import contextlib
import time
from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch", reason="torch not installed (pip install 'launchgap[record]')")

from launchgap.cli import main  # noqa: E402
from launchgap.timings import load_timings  # noqa: E402

MIB = 1 << 20


class _Event:
    def __init__(self, enable_timing: bool = False) -> None:
        self.t = 0.0

    def record(self, stream: Any = None) -> None:
        self.t = time.perf_counter()

    def elapsed_time(self, other: _Event) -> float:
        return (other.t - self.t) * 1e3


class _Stream:
    def wait_stream(self, other: Any) -> None:
        pass


class _Graph:
    def __init__(self, fn: Any) -> None:
        self.fn = fn

    def replay(self) -> None:
        self.fn()


@pytest.fixture
def fake_cuda(monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    from launchgap.harness import graphs, profiling, serving
    from launchgap.harness.sweep import run
    from launchgap.harness.hf import HFDecoder
    from launchgap.harness.model import Decoder

    state: dict[str, Any] = {"reserved": 0, "used": 10 * 1024 * MIB, "captures": [], "pools": set(), "calls": []}

    def capture_one(torch_: Any, fn: Any, pool: Any, stream: Any, keep: bool) -> tuple[Any, float, int | None]:
        fn()
        state["reserved"] += 2 * MIB
        state["used"] += 3 * MIB
        state["captures"].append(pool)
        state["pools"].add(id(pool))
        return _Graph(fn), 0.01, 42 if keep else None

    class CpuDecoder(Decoder):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            kwargs["device"] = "cpu"
            super().__init__(*args, **kwargs)

    real_record_steps = profiling.record_steps

    def record_steps_cpu(torch_: Any, body: Any, dst: Path, on_cuda: bool, **kw: Any) -> None:
        real_record_steps(torch_, body, dst, False, **kw)

    c = torch.cuda
    for name, value in {
        "is_available": lambda: True, "get_device_name": lambda i=0: "Fake GPU", "synchronize": lambda: None,
        "empty_cache": lambda: None, "memory_reserved": lambda: state["reserved"],
        "mem_get_info": lambda: (80 * 1024 * MIB - state["used"], 80 * 1024 * MIB),
        "graph_pool_handle": lambda: object(), "Stream": _Stream, "current_stream": lambda: _Stream(),
        "stream": lambda s: contextlib.nullcontext(), "Event": _Event,
    }.items():
        monkeypatch.setattr(c, name, value)
    def segment_begin(torch_: Any, pool: Any, keep: bool) -> tuple[Any, bool]:
        state["calls"].append("begin")
        return pool, keep

    def segment_end(torch_: Any, begun: tuple[Any, bool]) -> tuple[Any, float, int | None]:
        pool, keep = begun
        state["reserved"] += 2 * MIB
        state["used"] += 3 * MIB
        state["captures"].append(pool)
        state["pools"].add(id(pool))
        state["calls"].append("end")
        return _Graph(lambda: state["calls"].append("replay")), 0.01, 42 if keep else None

    real_island = graphs._island

    def island(*args: Any) -> None:
        state["calls"].append("island")
        real_island(*args)

    class CpuHFDecoder(HFDecoder):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            kwargs["device"] = "cpu"
            super().__init__(*args, **kwargs)

    monkeypatch.setattr(graphs, "_capture_one", capture_one)
    monkeypatch.setattr(graphs, "_segment_begin", segment_begin)
    monkeypatch.setattr(graphs, "_segment_end", segment_end)
    monkeypatch.setattr(graphs, "_island", island)
    # Strong references: a CPU tensor's memory is freed with its last reference (a weak alias would dangle).
    monkeypatch.setattr(graphs, "weak_alias", lambda torch_, t: (t, True))
    monkeypatch.setattr(run, "HFDecoder", CpuHFDecoder)
    monkeypatch.setattr(graphs, "replay_error", lambda torch_, model, cap: 0.0)
    monkeypatch.setattr(run, "Decoder", CpuDecoder)
    monkeypatch.setattr(run, "nvtx_range_factory", lambda torch_, on_cuda: lambda msg: contextlib.nullcontext())
    monkeypatch.setattr(profiling, "record_steps", record_steps_cpu)
    monkeypatch.setattr(serving, "record_steps", record_steps_cpu)
    return state


SMALL = ["--model", "tiny", "--layers", "2", "--context-len", "32", "--start-pos", "4", "--repeats", "2",
         "--warmup", "1", "--steps", "1", "--no-micro", "--no-kernel-count"]


def test_sweep_profiler_rows_and_graph_memory(tmp_path: Path, fake_cuda: dict[str, Any]) -> None:
    out = tmp_path / "o"
    rc = main(["record", *SMALL, "--batch-sizes", "1,2", "--modes", "eager,graph,piecewise", "--no-trace",
               "--trace-batch-sizes", "2", "--profiler-settings", "plain", "--capture-lists", "pow2-4,single-4",
               "--out", str(out)])
    assert rc == 0
    doc = load_timings(out / "timings.json")
    assert doc["device"] == "Fake GPU"
    rows = {r["batch_size"]: r for r in doc["rows"]}
    for r in rows.values():
        assert r["eager_us"] > 0 and r["graph_us"] > 0 and r["piecewise_us"] > 0
        assert (r["graph_nodes"], r["piecewise_nodes"], r["piecewise_graphs"]) == (42, 3 * 42, 3)
        assert (r["graph_pool_bytes"], r["piecewise_pool_bytes"]) == (2 * MIB, 3 * 2 * MIB)
        assert r["capture_s"] == 0.01 and r["piecewise_capture_s"] == 0.03
        assert r["graph_replay_ok"] is True and r["piecewise_replay_ok"] is True
    (pvu,) = doc["profiled_vs_unprofiled"]
    assert (pvu["batch_size"], pvu["profiler"], pvu["repeats"]) == (2, "plain", 2)
    # The graph step is timed in the blocks around the trace (a capture of its own), not taken from the sweep.
    g_before, g_after = pvu["unprofiled_graph_us_before"], pvu["unprofiled_graph_us_after"]
    assert min(g_before, g_after) <= pvu["unprofiled_graph_us"] <= max(g_before, g_after)
    assert 1 <= pvu["attempts"] <= 3 and pvu["drift_limit"] == 0.05
    # drift is rounded from the unrounded steps: against the stored (rounded) steps it agrees to its last digit
    assert pvu["drift"] == pytest.approx(pvu["unprofiled_eager_us_after"] / pvu["unprofiled_eager_us_before"] - 1,
                                         abs=1e-4)
    assert (out / pvu["trace"]).exists()
    mem = {(g["mode"], g["list_name"]): g for g in doc["graph_memory"]}
    full, pw = mem[("full", "pow2-4")], mem[("piecewise", "pow2-4")]
    assert full["capture_sizes"] == [1, 2, 4] and [p["size"] for p in full["per_size"]] == [4, 2, 1]
    assert (full["graphs"], full["reserved_mib"], full["device_used_mib"]) == (3, 6.0, 9.0)
    assert full["nodes_per_graph"] == {"1": 42, "2": 42, "4": 42} and full["capture_s"] == 0.03
    assert (pw["graphs"], pw["reserved_mib"], pw["device_used_mib"]) == (9, 18.0, 27.0)
    assert pw["nodes_per_graph"] == {"1": 126, "2": 126, "4": 126}
    assert pw["per_size"][0] == {"size": 4, "reserved_mib": 6.0, "device_used_mib": 9.0, "capture_s": 0.03,
                                 "nodes": 126}
    assert mem[("full", "single-4")]["graphs"] == 1 and mem[("piecewise", "single-4")]["graphs"] == 3
    assert "weak aliases" in doc["graph_memory_method"]["piecewise_outputs"]
    # Sweep graphs: one pool per size (and per mode); the profiled size's graph: one; each list: one pool
    # for all its captures.
    assert len(fake_cuda["pools"]) == 2 * 2 + 1 + 4
    # A rerun finds the rows, profiler rows and lists done.
    n = len(fake_cuda["captures"])
    assert main(["record", *SMALL, "--batch-sizes", "1,2", "--modes", "eager,graph,piecewise", "--no-trace",
                 "--trace-batch-sizes", "2", "--profiler-settings", "plain", "--capture-lists", "pow2-4,single-4",
                 "--out", str(out)]) == 0
    assert len(fake_cuda["captures"]) == n


def test_serving_on_the_cuda_path(tmp_path: Path, fake_cuda: dict[str, Any]) -> None:
    out = tmp_path / "s"
    rc = main(["record", *SMALL, "--capture-sizes", "1,2,4", "--capture-sizes", "p=4", "--serving-steps", "6",
               "--sampler", "2,0.9,6", "--inject-fallbacks", "1", "--serving-rounds", "2",
               "--serving-graphs", "piecewise", "--out", str(out)])
    assert rc == 0
    small, big = load_timings(out / "timings.json")["serving"]
    assert (small["graphs"], small["capture_s"], small["reserved_mib"], small["device_used_mib"]) == (9, 0.09, 18.0,
                                                                                                      27.0)
    assert (big["graphs"], big["capture_s"]) == (3, 0.03)
    for e in (small, big):
        assert len(e["steps"]) == 6 and len(e["fallback_steps"]) == 1 and (out / e["trace"]).exists()
        assert all(s["annotation"].endswith("piecewise]") for s in e["steps"] if s["mode"] == "graph")


def test_a_step_that_cannot_be_captured_keeps_its_eager_rows_with_a_reason(
        tmp_path: Path, fake_cuda: dict[str, Any], monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    from launchgap.harness import graphs

    def capture_fails(torch_: Any, fn: Any, pool: Any, stream: Any, keep: bool) -> Any:
        try:
            raise RuntimeError("CUDA error: operation not permitted when stream is capturing")
        except RuntimeError:  # capture_end's own error, raised while handling the first, as torch does
            raise RuntimeError("CUDA error: operation failed due to a previous error during capture") from None

    monkeypatch.setattr(graphs, "_capture_one", capture_fails)
    out = tmp_path / "o"
    rc = main(["record", *SMALL, "--batch-sizes", "1,2", "--modes", "eager,graph", "--trace-batch-sizes", "2",
               "--capture-lists", "single-2", "--out", str(out)])
    io = capsys.readouterr()
    said = io.out + io.err  # the log's stream is whatever sys.stderr was when the CLI module was imported
    assert rc == 0
    doc = load_timings(out / "timings.json")
    assert [(r["batch_size"], r["graph_us"]) for r in doc["rows"]] == [(1, None), (2, None)]
    assert all(r["eager_us"] > 0 for r in doc["rows"])
    cap = doc["models"]["tiny-layers2"]["capture"]
    assert cap["ok"] is False
    assert cap["reason"] == ("the step asks the host for a value while capturing (a CPU sync: .item(), nonzero, "
                             "data-dependent shapes): RuntimeError: CUDA error: operation not permitted when "
                             "stream is capturing")
    assert "cannot capture the step as a CUDA graph" in said and "2 profiled/memory/serving items skipped" in said
    assert "graph_memory" not in doc
    assert sorted(p.name for p in out.glob("*.json.gz")) == ["tiny-layers2_bs2_eager.json.gz"]


HF_TINY = {"architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3", "hidden_size": 64, "intermediate_size": 96,
           "num_hidden_layers": 3, "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16,
           "vocab_size": 256, "max_position_embeddings": 1024}
HF_SMALL = ["--context-len", "32", "--start-pos", "4", "--repeats", "2", "--warmup", "1", "--steps", "1",
            "--no-micro", "--no-kernel-count"]


#: Gemma 3's text model: sliding-window layers (every layer but the sixth here) beside a global one, each with its mask.
GEMMA3_TINY = {**HF_TINY, "architectures": ["Gemma3ForCausalLM"], "model_type": "gemma3_text", "sliding_window": 32,
               "query_pre_attn_scalar": 16, "num_hidden_layers": 3, "layer_types": ["sliding_attention",
                                                                                     "full_attention",
                                                                                     "sliding_attention"]}


def _hf_config(tmp_path: Path, config: dict[str, Any] = HF_TINY, name: str = "qwen3-tiny") -> Path:
    import json

    pytest.importorskip("transformers", reason="transformers not installed (pip install 'launchgap[record]')")
    p = tmp_path / f"{name}.json"
    p.write_text(json.dumps(config))
    return p


@pytest.mark.parametrize("config", [HF_TINY, GEMMA3_TINY], ids=["qwen3", "gemma3"])
def test_transformers_piecewise_capture_is_pieces_around_eager_attention(tmp_path: Path, fake_cuda: dict[str, Any],
                                                                          config: dict[str, Any]) -> None:
    from launchgap.harness import graphs
    from launchgap.harness.hf import HFDecoder, read_hf_config

    model = HFDecoder(read_hf_config(_hf_config(tmp_path, config)), 4, 32, 4, device="cpu")
    stream = torch.cuda.Stream()
    cap = graphs.capture(torch, model, 3, "piecewise", None, stream)
    calls = fake_cuda["calls"]
    # 3 attention layers: 4 pieces, each ended at an attention call that then ran once eagerly.
    assert calls == ["begin", "end", "island", "begin", "end", "island", "begin", "end", "island", "begin", "end"]
    assert (len(cap.graphs), cap.nodes, cap.capture_s, cap.mode, cap.size) == (4, 4 * 42, 0.04, "piecewise", 3)
    step = cap.holder
    assert isinstance(step, graphs.SegmentedStep) and len(step.islands) == 3
    # The islands write the model's one static buffer per output shape: (max batch 4, 1 token, 4 heads, 16).
    (buf,) = model._segment_out.values()
    assert tuple(buf.shape) == (4, 1, 4, 16)
    assert all(i.args[-1].data_ptr() == buf.data_ptr() and tuple(i.args[-1].shape) == (3, 1, 4, 16)
               for i in step.islands)
    # Each island keeps its layer's own inputs: Gemma 3's sliding layers share one mask, its global layer another.
    masks = [i.args[1][4] for i in step.islands]
    if config is GEMMA3_TINY:
        assert masks[0] is masks[2] and masks[1] is not masks[0]
        assert [i.args[2]["sliding_window"] for i in step.islands] == [32, None, 32]
    else:
        assert masks[0] is masks[1] is masks[2]
    calls.clear()
    cap.run()
    assert calls == ["replay", "island", "replay", "island", "replay", "island", "replay"]
    # An island recomputes its layer's attention from the recorded inputs into the buffer.
    for i in step.islands:
        fn, args, kwargs, out = i.args
        buf.zero_()
        i()
        assert torch.equal(out, fn(*args, **kwargs))


def test_transformers_piecewise_sweep_memory_and_serving(tmp_path: Path, fake_cuda: dict[str, Any]) -> None:
    cfg = _hf_config(tmp_path)
    out = tmp_path / "o"
    rc = main(["record", "--hf-config", str(cfg), *HF_SMALL, "--batch-sizes", "1,2", "--modes",
               "eager,graph,piecewise", "--no-trace", "--trace-batch-sizes", "2", "--capture-lists", "pow2-4",
               "--memory-modes", "piecewise", "--out", str(out)])
    assert rc == 0
    doc = load_timings(out / "timings.json")
    rows = {r["batch_size"]: r for r in doc["rows"]}
    assert sorted(rows) == [1, 2]
    for r in rows.values():
        assert r["eager_us"] > 0 and r["graph_us"] > 0 and r["piecewise_us"] > 0
        assert (r["graph_nodes"], r["piecewise_nodes"], r["piecewise_graphs"]) == (42, 4 * 42, 4)
        assert (r["graph_pool_bytes"], r["piecewise_pool_bytes"]) == (2 * MIB, 4 * 2 * MIB)
        assert r["piecewise_capture_s"] == 0.04 and r["piecewise_replay_ok"] is True
    (pw,) = doc["graph_memory"]
    assert (pw["mode"], pw["capture_sizes"], pw["graphs"], pw["reserved_mib"], pw["device_used_mib"]) == \
        ("piecewise", [1, 2, 4], 12, 24.0, 36.0)
    assert pw["nodes_per_graph"] == {"1": 168, "2": 168, "4": 168}

    srv = tmp_path / "s"
    rc = main(["record", "--hf-config", str(cfg), *HF_SMALL, "--capture-sizes", "1,2,4", "--serving-steps", "6",
               "--sampler", "2,0.9,6", "--inject-fallbacks", "1", "--serving-rounds", "2",
               "--serving-graphs", "piecewise", "--out", str(srv)])
    assert rc == 0
    (e,) = load_timings(srv / "timings.json")["serving"]
    assert (e["graph_mode"], e["graphs"], e["capture_s"]) == ("piecewise", 12, 0.12)
    assert len(e["steps"]) == 6 and len(e["fallback_steps"]) == 1 and (srv / e["trace"]).exists()
    assert e["trace"] == "qwen3-tiny_serving_piecewise_1-2-4.json.gz"
    assert all(s["annotation"].endswith("piecewise]") for s in e["steps"] if s["mode"] == "graph")
