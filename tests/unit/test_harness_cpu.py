"""The recording harness without a GPU: the model against a float64 reference, the CPU sweep end
to end through the CLI, resuming, the speedup curve, and bad input."""
from __future__ import annotations

import gzip
import json
import sys
from pathlib import Path

import pytest

from launchgap.cli import main
from launchgap.errors import AnalyzerError, InputError, NoGpuActivityError

try:
    import torch
except ImportError:  # the torch-free tests below (curve, committed H200 samples) still run
    torch = None

needs_torch = pytest.mark.skipif(torch is None, reason="torch not installed (pip install 'launchgap[record]')")
SAMPLES = Path(__file__).resolve().parents[2] / "traces" / "h200"

ROW_KEYS = {"model", "batch_size", "eager_us", "graph_us", "eager_host_us", "capture_s", "graph_pool_bytes",
            "kernels_per_step", "repeats"}


# --------------------------------------------------------------------------------------------
# the model


def _reference_step(m, bs: int) -> tuple[torch.Tensor, list[tuple[torch.Tensor, torch.Tensor]]]:
    """One decode step in float64, written the textbook way (KV heads repeated, explicit softmax)."""
    cfg = m.cfg
    f = lambda t: t.double()  # noqa: E731
    hd, h, kvh = cfg.head_dim, cfg.heads, cfg.kv_heads
    pos = int(m.pos.item())
    x = f(m.embed)[m.tokens[:bs]]
    ang = pos * (1.0 / (cfg.rope_theta ** (torch.arange(0, hd, 2, dtype=torch.float64) / hd)))
    cos, sin = ang.cos(), ang.sin()

    def rope(t):
        a, b = t[..., : hd // 2], t[..., hd // 2:]
        return torch.cat((a * cos - b * sin, b * cos + a * sin), dim=-1)

    def norm(t, w):
        return f(w) * t / torch.sqrt(t.pow(2).mean(-1, keepdim=True) + cfg.norm_eps)

    caches = []
    for layer in m.layers:
        qkv = norm(x, layer["attn_norm"]) @ f(layer["wqkv"]).T
        q = rope(qkv[:, : h * hd].reshape(bs, h, hd))
        k = rope(qkv[:, h * hd: (h + kvh) * hd].reshape(bs, kvh, hd))
        v = qkv[:, (h + kvh) * hd:].reshape(bs, kvh, hd)
        kc, vc = f(layer["k_cache"][:bs]).clone(), f(layer["v_cache"][:bs]).clone()
        kc[:, :, pos], vc[:, :, pos] = k, v
        caches.append((kc, vc))
        kr = kc.repeat_interleave(h // kvh, dim=1)[:, :, : pos + 1]  # (bs, h, pos+1, hd)
        vr = vc.repeat_interleave(h // kvh, dim=1)[:, :, : pos + 1]
        scores = torch.einsum("bhd,bhtd->bht", q, kr) / hd ** 0.5
        attn = torch.einsum("bht,bhtd->bhd", scores.softmax(-1), vr).reshape(bs, h * hd)
        x = x + attn @ f(layer["wo"]).T
        gate, up = (norm(x, layer["mlp_norm"]) @ f(layer["wgu"]).T).chunk(2, dim=-1)
        x = x + (torch.nn.functional.silu(gate) * up) @ f(layer["wdown"]).T
    logits = norm(x, m.final_norm) @ f(m.lm_head).T
    return logits, caches


@needs_torch
def test_decoder_step_matches_float64_reference() -> None:
    from launchgap.harness.model import Decoder, resolve_config

    cfg = resolve_config("tiny", layers=2, vocab=512)
    m = Decoder(cfg, max_batch_size=3, context_len=16, start_pos=5, device="cpu", seed=3)
    for _ in range(2):  # check a step that attends to positions written by earlier steps
        logits, caches = _reference_step(m, 3)
        nxt = m.step(3).clone()
        assert torch.equal(nxt, logits.argmax(-1))
        for layer, (kc, vc) in zip(m.layers, caches):
            assert torch.allclose(layer["k_cache"][:3].double(), kc, rtol=1e-4, atol=1e-5)
            assert torch.allclose(layer["v_cache"][:3].double(), vc, rtol=1e-4, atol=1e-5)
    assert int(m.pos.item()) == 7


@needs_torch
def test_position_wraps_to_start_before_leaving_cache() -> None:
    from launchgap.harness.model import Decoder, resolve_config

    m = Decoder(resolve_config("tiny", layers=1, vocab=64), max_batch_size=1, context_len=8, start_pos=5, device="cpu")
    seen = []
    for _ in range(5):
        m.step(1)
        seen.append(int(m.pos.item()))
    assert seen == [6, 7, 5, 6, 7]


@needs_torch
def test_presets_and_overrides() -> None:
    from launchgap.harness.model import PRESETS, resolve_config

    b1 = PRESETS["1b"]
    assert (b1.layers, b1.hidden, b1.heads, b1.kv_heads, b1.mlp, b1.vocab) == (16, 2048, 32, 8, 8192, 32000)
    s70 = PRESETS["70b-slice"]
    assert (s70.hidden, s70.heads, s70.kv_heads, s70.mlp) == (8192, 64, 8, 28672)
    # Llama-3-8B has 8.03 B parameters (untied embedding and LM head).
    assert round(PRESETS["8b"].param_count() / 1e9, 2) == 8.03
    c = resolve_config("1b", layers=4)
    assert c.name == "1b-layers4" and c.layers == 4
    assert resolve_config("1b", name="mine", layers=4).name == "mine"
    with pytest.raises(InputError, match="unknown model preset"):
        resolve_config("13b")
    with pytest.raises(InputError, match="not a multiple of kv_heads"):
        resolve_config("tiny", kv_heads=3)


@needs_torch
def test_row_pools_all_rounds() -> None:
    """Medians and percentiles over every timed step of every round; one median per round."""
    from launchgap.harness.clock import Timed as _Timed
    from launchgap.harness.sweep import make_row as _make_row

    eager = [_Timed(device_us=[10.0, 30.0, 20.0], host_us=[9.0, 9.0, 9.0]),
             _Timed(device_us=[40.0, 50.0, 60.0], host_us=[1.0, 1.0, 100.0])]
    graph = [_Timed(device_us=[5.0, 5.0, 6.0], host_us=[2.0, 2.0, 2.0]),
             _Timed(device_us=[7.0, 8.0, 9.0], host_us=[3.0, 3.0, 3.0])]
    row = _make_row("m", 8, eager, graph, None, 12)
    assert (row.eager_us, row.graph_us) == (35.0, 6.5)  # medians of the 6 pooled steps
    assert (row.eager_host_us, row.graph_host_us) == (9.0, 2.5)
    assert (row.eager_us_p10, row.eager_us_p90) == (15.0, 55.0)  # linear between ranks 0.5 and 4.5
    assert row.eager_us_rounds == [20.0, 50.0] and row.graph_us_rounds == [5.0, 8.0]
    assert (row.repeats, row.rounds, row.kernels_per_step) == (6, 2, 12)
    assert row.capture_s is None and row.graph_pool_bytes is None
    cpu = _make_row("m", 1, eager[:1], [], None, None)
    assert cpu.graph_us is None and cpu.graph_us_rounds is None and cpu.eager_us == 20.0


def test_batch_size_and_mode_parsing() -> None:
    from launchgap.harness.sweep import parse_batch_sizes, parse_modes

    assert parse_batch_sizes("1-16") == (1, 2, 4, 8, 16)
    assert parse_batch_sizes("8,1, 3,8") == (1, 3, 8)
    for bad in ("a", "0", "4-2", ""):
        with pytest.raises(InputError):
            parse_batch_sizes(bad)
    assert parse_modes("graph,eager,graph") == ("graph", "eager")
    with pytest.raises(InputError, match="unknown mode"):
        parse_modes("eager,compiled")


def test_missing_torch_says_how_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    from launchgap.harness import import_torch

    monkeypatch.setitem(sys.modules, "torch", None)  # makes `import torch` raise ImportError
    with pytest.raises(AnalyzerError, match=r"pip install 'launchgap\[record\]'"):
        import_torch()


# --------------------------------------------------------------------------------------------
# the CPU sweep, end to end

ARGS = ["--model", "tiny", "--batch-sizes", "1,3", "--repeats", "3", "--rounds", "2", "--warmup", "1", "--steps", "2",
        "--context-len", "32", "--start-pos", "4", "--layers", "2"]


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if torch is None:
        pytest.skip("torch not installed (pip install 'launchgap[record]')")
    out = tmp_path_factory.mktemp("rec")
    assert main(["record", *ARGS, "--out", str(out)]) == 0
    return out


def test_cpu_sweep_writes_timings(recorded: Path) -> None:
    doc = json.loads((recorded / "timings.json").read_text())
    assert doc["schema"] == "launchgap.timings/1"
    assert doc["cuda"] is None and doc["device"].startswith("cpu")
    assert isinstance(doc["torch"], str) and doc["created"][:2] == "20"
    assert doc["models"]["tiny-layers2"]["layers"] == 2
    rows = doc["rows"]
    assert [(r["model"], r["batch_size"]) for r in rows] == [("tiny-layers2", 1), ("tiny-layers2", 3)]
    for r in rows:
        assert ROW_KEYS <= set(r)
        assert r["eager_us"] > 0 and r["eager_host_us"] > 0
        assert r["repeats"] == 6 and r["rounds"] == 2 and len(r["eager_us_rounds"]) == 2
        # No graph mode, no kernels without CUDA.
        assert r["graph_us"] is None and r["capture_s"] is None and r["kernels_per_step"] is None


def test_cpu_sweep_writes_annotated_traces(recorded: Path) -> None:
    for bs in (1, 3):
        path = recorded / f"tiny-layers2_bs{bs}_eager.json.gz"
        with gzip.open(path, "rt") as fh:
            events = json.load(fh)["traceEvents"]
        steps = [e for e in events if e.get("cat") == "user_annotation" and e["name"].startswith("decode_step")]
        assert [e["name"] for e in steps] == [f"decode_step[bs={bs}]"] * 2  # --steps 2 active steps
        assert any(e.get("cat") == "cpu_op" and e["name"] == "aten::scaled_dot_product_attention" for e in events)
    assert not list(recorded.glob("*_graph.json.gz"))


def test_cpu_trace_has_no_gpu_work_for_the_analyzer(recorded: Path) -> None:
    from launchgap.loaders import load_trace

    with pytest.raises(NoGpuActivityError, match="no GPU kernels"):
        load_trace(recorded / "tiny-layers2_bs1_eager.json.gz")


def test_resume_skips_done_work_and_force_redoes_it(recorded: Path, capsys: pytest.CaptureFixture[str]) -> None:
    trace = recorded / "tiny-layers2_bs1_eager.json.gz"
    before = (trace.stat().st_mtime_ns, (recorded / "timings.json").read_text())
    assert main(["record", *ARGS, "--out", str(recorded)]) == 0
    err = capsys.readouterr().err
    assert "0 new rows, 0 traces, 4 items done before" in err
    assert (trace.stat().st_mtime_ns, (recorded / "timings.json").read_text()) == before
    assert main(["record", *ARGS, "--batch-sizes", "1", "--no-trace", "--force", "--out", str(recorded)]) == 0
    assert "1 new rows, 0 traces" in capsys.readouterr().err
    rows = json.loads((recorded / "timings.json").read_text())["rows"]
    assert [r["batch_size"] for r in rows] == [1, 3]  # the redone row replaced, not appended


def test_resume_refuses_other_settings(recorded: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["record", *ARGS, "--context-len", "64", "--out", str(recorded)]) == 2
    assert "context_len 32, this run asks 64" in capsys.readouterr().err


@needs_torch
def test_graph_only_without_cuda_is_an_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    assert main(["record", *ARGS, "--modes", "graph", "--out", str(tmp_path)]) == 2
    assert "graph mode needs a CUDA GPU" in capsys.readouterr().err
    assert not (tmp_path / "timings.json").exists()


# --------------------------------------------------------------------------------------------
# the speedup curve


def _doc(rows: list[tuple[str, int, float | None, float | None]]) -> dict:
    return {"schema": "launchgap.timings/1", "device": "NVIDIA H200", "torch": "2.11.0", "cuda": "13.0",
            "created": "2026-11-30T00:00:00+00:00",
            "rows": [{"model": m, "batch_size": b, "eager_us": e, "graph_us": g, "eager_host_us": None,
                      "capture_s": None, "graph_pool_bytes": None, "kernels_per_step": None, "repeats": 10}
                     for m, b, e, g in rows]}


def test_win_gone_at_needs_every_larger_size_under_threshold() -> None:
    from launchgap.harness.curve import win_gone_at

    # 1.04 at 4 is noise: 8 wins again, so the win is gone only from 16 on.
    assert win_gone_at([1, 2, 4, 8, 16, 32], [2.0, 1.5, 1.04, 1.2, 1.03, 0.99]) == 16
    assert win_gone_at([1, 2], [2.0, 1.5]) is None
    assert win_gone_at([1, 2], [1.01, 1.049]) == 1
    assert win_gone_at([1, 2, 4], [1.2, 1.06, None]) is None  # a size without graph timing is ignored
    assert win_gone_at([1, 2], [1.2, 1.08], threshold=0.10) == 2


def test_curve_cli_formats(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "timings.json"
    path.write_text(json.dumps(_doc([("a", 1, 300.0, 100.0), ("a", 64, 520.0, 500.0), ("b", 1, 50.0, None),
                                     ("c", 1, None, 40.0), ("d", 1, 50.0, None), ("d", 2, None, 45.0)])))
    assert main(["record", "--curve", str(path), "--format", "json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["schema"] == "launchgap.curve/1"
    a, b, _, _ = out["curves"]
    assert [p["speedup"] for p in a["points"]] == [3.0, 1.04]
    assert [p["win_pct"] for p in a["points"]] == [200.0, 4.0]
    assert a["win_gone_at"] == 64 and b["win_gone_at"] is None
    assert main(["record", "--curve", str(path), "--format", "markdown"]) == 0
    md = capsys.readouterr().out
    assert "| 64 | 520.0 | 500.0 | 1.04 | 4.0 | - |" in md
    assert "**a**: the win falls under 5% from batch 64 on." in md
    assert "**b**: no graph timings, no speedup." in md
    assert "**c**: no eager timings, no speedup." in md  # a graph-only sweep (--modes graph)
    assert "**d**: no size with both eager and graph timings, no speedup." in md
    assert main(["record", "--curve", str(path)]) == 0
    assert "a: the win falls under 5% from batch 64 on" in capsys.readouterr().out


@pytest.mark.parametrize("content, message", [
    (b"\x00\x01garbage", "not a timings JSON file"),
    (b'{"schema": "launchgap.report/1", "rows": []}', "expected schema 'launchgap.timings/1'"),
    (b'{"schema": "launchgap.timings/1", "rows": [{"model": "a"}]}', "rows[0].batch_size is None"),
])
def test_curve_bad_file_is_one_line_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str], content: bytes,
                                           message: str) -> None:
    path = tmp_path / "t.json"
    path.write_bytes(content)
    assert main(["record", "--curve", str(path)]) == 2
    err = capsys.readouterr().err
    assert message in err and str(path) in err and err.count("\n") == 1


def test_record_needs_model_and_out(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["record", "--model", "tiny"]) == 2
    assert "needs --model or --hf-config, and --out" in capsys.readouterr().err


# --------------------------------------------------------------------------------------------
# the committed H200 samples (traces/h200): the analyzer on the harness's own GPU traces


@pytest.mark.parametrize("model, bs", [("1b", 64), ("70b-slice", 1)])
def test_h200_sample_prediction_matches_unprofiled_graph(model: str, bs: int) -> None:
    """Steps and batch size found; the graph step predicted from the eager trace lies within
    10% of the graph replay timed without a profiler in the same run (timings.json)."""
    from launchgap.loaders import load_trace
    from launchgap.report import analyze_trace
    from launchgap.timings import load_timings

    rows = {(r["model"], r["batch_size"]): r for r in load_timings(SAMPLES / "timings.json")["rows"]}
    truth = rows[(model, bs)]
    eager = analyze_trace(load_trace(SAMPLES / f"{model}_bs{bs}_eager.json.gz"))
    assert eager.mode == "eager"
    assert (eager.summary.steps, eager.summary.batch_sizes) == (3, [bs])
    assert eager.summary.kernels_per_step_median == truth["kernels_per_step"]
    assert abs(eager.summary.predicted_graph_step_us_median / truth["graph_us"] - 1) < 0.10
    graph = analyze_trace(load_trace(SAMPLES / f"{model}_bs{bs}_graph.json.gz"))
    assert graph.mode == "graph"
    assert (graph.summary.steps, graph.summary.batch_sizes) == (3, [bs])
    assert graph.summary.graph_launches_per_step_median == 1


def test_h200_timings_file_is_complete() -> None:
    """The committed sweep: 4 presets x 9 batch sizes, both modes, every schema key filled."""
    from launchgap.timings import load_timings

    doc = load_timings(SAMPLES / "timings.json")
    assert doc["device"] == "NVIDIA H200" and doc["cuda"] == "13.0"
    got = {(r["model"], r["batch_size"]) for r in doc["rows"]}
    assert got == {(m, 2 ** i) for m in ("tiny", "1b", "8b", "70b-slice") for i in range(9)}
    for r in doc["rows"]:
        assert ROW_KEYS <= set(r) and all(r[k] is not None for k in ROW_KEYS)
        assert r["repeats"] == 200 and r["rounds"] == 5


def test_curve_says_what_was_measured(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from launchgap.harness.curve import build_curves, source_text

    rows = [{"model": m, "batch_size": 1, "eager_us": 10.0, "graph_us": 5.0} for m in ("a", "b", "c")]
    doc = {"rows": rows, "models": {
        "a": {"model_source": {"kind": "hf-config", "sha256": "0123456789abcdef" * 4, "architecture": "X"},
              "compiled": True},
        "b": {"model_source": {"kind": "preset", "preset": "1b"}, "compiled": False},
        "c": {"layers": 2}}}
    a, b, c = build_curves(doc)
    assert source_text(a.source) == "transformers X (config sha256 0123456789ab), compiled"
    assert source_text(b.source) == "launchgap's decoder, preset 1b, not compiled"
    assert c.source is None and source_text(c.source) is None
    path = tmp_path / "t.json"
    path.write_text(json.dumps(doc))
    assert main(["record", "--curve", str(path)]) == 0
    out = capsys.readouterr().out
    assert "a: the win stays above 5% up to batch 1\n  measured: transformers X (config sha256 0123456789ab), " \
           "compiled\n" in out
    assert "c: the win stays above 5% up to batch 1\n batch" in out
