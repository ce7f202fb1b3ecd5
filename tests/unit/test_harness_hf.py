"""``record --hf-config`` and ``--compile`` without a GPU: tiny transformers configs written here (nothing
downloaded), the step against transformers' own dynamic-cache forward, the CLI end to end on the CPU, the
timings' ``model_source``/``compiled`` fields, and bad configs."""
from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from launchgap.cli import main
from launchgap.dims import moe_routing
from launchgap.errors import InputError
from launchgap.timings import load_timings, validate_timings

torch = pytest.importorskip("torch", reason="torch not installed (pip install 'launchgap[record]')")
transformers = pytest.importorskip("transformers", reason="transformers not installed (pip install 'launchgap[record]')")

from launchgap.harness.hf import HFDecoder, read_hf_config  # noqa: E402

BASE = {"hidden_size": 64, "intermediate_size": 96, "num_hidden_layers": 2, "num_attention_heads": 4,
        "num_key_value_heads": 2, "vocab_size": 256, "max_position_embeddings": 1024}
CONFIGS = {
    "llama": {"architectures": ["LlamaForCausalLM"], "model_type": "llama", **BASE},
    "qwen2": {"architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2", **BASE, "tie_word_embeddings": True},
    "gemma2": {"architectures": ["Gemma2ForCausalLM"], "model_type": "gemma2", **BASE, "head_dim": 16,
               "sliding_window": 512, "query_pre_attn_scalar": 16},
    "mixtral": {"architectures": ["MixtralForCausalLM"], "model_type": "mixtral", **BASE, "num_local_experts": 4,
                "num_experts_per_tok": 2},
}


def _write(tmp_path: Path, name: str, **extra) -> Path:
    p = tmp_path / f"{name}.json"
    p.write_text(json.dumps({**CONFIGS[name], **extra}))
    return p


def _reference_logits(dec: HFDecoder, bs: int) -> torch.Tensor:
    """transformers' own forward for the same step: a DynamicCache holding the static cache's first
    ``pos`` positions of rows ``[0, bs)``, then the current token at position ``pos``."""
    pos = int(dec.pos[0])
    cache = transformers.DynamicCache(config=dec.model.config)
    for i, (k, v) in enumerate(dec._full):
        cache.update(k[:bs, :, :pos].clone(), v[:bs, :, :pos].clone(), i)
    ids = dec.tokens[:bs].clone().view(bs, 1)
    with torch.no_grad():
        out = dec.model(input_ids=ids, past_key_values=cache, use_cache=True,
                        position_ids=torch.full((bs, 1), pos, dtype=torch.long))
    return out.logits[:, -1]


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_step_matches_transformers_own_forward(tmp_path: Path, name: str) -> None:
    dec = HFDecoder(read_hf_config(_write(tmp_path, name)), max_batch_size=4, context_len=64, start_pos=16,
                    device="cpu", seed=1)
    for _ in range(2):  # the second step reads what the first wrote into the cache
        want = _reference_logits(dec, 3)
        dec.step(3)
        got = dec.last_logits
        assert got.shape == (3, 256)
        assert torch.allclose(got, want, atol=1e-4, rtol=1e-4), (got - want).abs().max()
        assert torch.equal(dec.tokens[:3], want.argmax(-1))
    assert dec.pos.tolist() == [18] * len(dec.cache.layers)


def test_a_zero_initialised_router_is_drawn_at_random(tmp_path: Path) -> None:
    """ERNIE-4.5-MoE's router is all zeros from from_config: every token would pick the same experts. The harness draws
    it like the other weights, so 32 tokens spread over the experts as a trained model's do."""
    cfg = {"architectures": ["Ernie4_5_MoeForCausalLM"], "model_type": "ernie4_5_moe", **BASE, "head_dim": 16,
           "moe_intermediate_size": 32, "moe_num_experts": 16, "moe_k": 2, "moe_layer_start_index": 0,
           "moe_num_shared_experts": 0}
    p = tmp_path / "ernie.json"
    p.write_text(json.dumps(cfg))
    dec = HFDecoder(read_hf_config(p), max_batch_size=32, context_len=64, start_pos=16, device="cpu", seed=1)
    gate = dict(dec.model.named_modules())["model.layers.0.mlp.gate"]
    assert bool(gate.weight.any())
    picked = []
    gate.register_forward_hook(lambda mod, inp, out: picked.append(out[-1]))
    dec.step(32)
    assert picked[0].shape == (32, 2) and picked[0].unique().numel() > 2  # zeros: the same 2 for every token


def test_positions_wrap_to_start_before_leaving_the_cache(tmp_path: Path) -> None:
    dec = HFDecoder(read_hf_config(_write(tmp_path, "llama")), max_batch_size=2, context_len=20, start_pos=16,
                    device="cpu")
    seen = []
    for _ in range(9):
        dec.step(2)
        seen.append(int(dec.pos[0]))
    assert seen == [17, 18, 19, 16, 17, 18, 19, 16, 17]
    assert dec.kv_cache_bytes() == 2 * 2 * (2 * 2 * 20 * 16 * 4)  # layers x (K, V) x (bs, kv, ctx, hd) x fp32


def test_spec_reads_dimensions_hash_and_architecture(tmp_path: Path) -> None:
    p = _write(tmp_path, "qwen2")
    spec = read_hf_config(p)
    assert (spec.name, spec.layers, spec.hidden, spec.heads, spec.kv_heads, spec.mlp, spec.vocab, spec.head_dim) == \
        ("qwen2", 2, 64, 4, 2, 96, 256, 16)
    assert spec.tied_embeddings and spec.architecture == "Qwen2ForCausalLM"
    assert spec.sha256 == hashlib.sha256(p.read_bytes()).hexdigest()
    folder = tmp_path / "my-model"
    folder.mkdir()
    (folder / "config.json").write_bytes(p.read_bytes())
    assert read_hf_config(folder).name == "my-model"
    assert read_hf_config(folder, name="x").name == "x"
    mix = read_hf_config(_write(tmp_path, "mixtral"))
    assert mix.experts == 4 and mix.experts_per_token == 2 and not mix.tied_embeddings


def test_tied_embeddings_are_counted_once(tmp_path: Path) -> None:
    tied = HFDecoder(read_hf_config(_write(tmp_path, "qwen2")), 1, 32, 8, device="cpu")
    untied = HFDecoder(read_hf_config(_write(tmp_path, "qwen2", tie_word_embeddings=False)), 1, 32, 8, device="cpu")
    assert untied.param_count() - tied.param_count() == 256 * 64
    assert tied.weight_bytes() == tied.param_count() * 4


def test_short_sliding_window_is_refused(tmp_path: Path) -> None:
    spec = read_hf_config(_write(tmp_path, "gemma2", sliding_window=32))
    with pytest.raises(InputError, match="sliding window of 32 is shorter than --context-len 64"):
        HFDecoder(spec, 2, context_len=64, start_pos=8, device="cpu")


@pytest.mark.parametrize("content,reason", [
    (b"{", "not a JSON config"), (b"[1]", "expected a JSON object"), (b'{"hidden_size": 8}', "no model_type"),
    (json.dumps({**CONFIGS["llama"], "num_hidden_layers": 0}).encode(), "num_hidden_layers is 0"),
    (json.dumps({**CONFIGS["llama"], "model_type": "no-such-model"}).encode(), "cannot read model_type"),
    (json.dumps({**CONFIGS["llama"], "model_type": "t5", "d_model": 64}).encode(),
     "cannot build a causal LM from this config: Unrecognized configuration class"),
])
def test_bad_config_is_one_line_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str], content: bytes,
                                       reason: str) -> None:
    p = tmp_path / "config.json"
    p.write_bytes(content)
    rc = main(["record", "--hf-config", str(p), "--batch-sizes", "1", "--out", str(tmp_path / "o"), "--no-trace",
               "--no-kernel-count", "--repeats", "1", "--warmup", "0"])
    err = capsys.readouterr().err
    assert rc == 2 and "Traceback" not in err
    errors = [line for line in err.splitlines() if line.startswith("launchgap: error:")]
    assert len(errors) == 1 and reason in errors[0] and str(p) in errors[0]


def test_missing_config_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rc = main(["record", "--hf-config", str(tmp_path / "nope"), "--out", str(tmp_path / "o")])
    assert rc == 2 and "no such file" in capsys.readouterr().err


def test_cli_records_eager_on_cpu_with_model_source(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cfgs = [_write(tmp_path, n) for n in ("llama", "mixtral")]
    out = tmp_path / "run"
    rc = main(["record", "--hf-config", str(cfgs[0]), "--hf-config", str(cfgs[1]), "--batch-sizes", "1,3",
               "--modes", "eager,graph,piecewise", "--repeats", "3", "--warmup", "1", "--steps", "1",
               "--trace-batch-sizes", "3", "--out", str(out)])
    io = capsys.readouterr()
    assert rc == 0, io.err
    assert "graph mode needs a CUDA GPU" in io.err
    doc = load_timings(out / "timings.json")
    assert sorted((r["model"], r["batch_size"]) for r in doc["rows"]) == \
        [("llama", 1), ("llama", 3), ("mixtral", 1), ("mixtral", 3)]
    assert all(r["eager_us"] > 0 and r["graph_us"] is None for r in doc["rows"])
    src = doc["models"]["llama"]["model_source"]
    assert src == {"kind": "hf-config", "path": cfgs[0].as_posix(), "architecture": "LlamaForCausalLM",
                   "model_type": "llama", "sha256": hashlib.sha256(cfgs[0].read_bytes()).hexdigest()}
    assert doc["models"]["llama"]["compiled"] is False
    assert doc["models"]["mixtral"]["experts"] == 4 and doc["models"]["mixtral"]["class"] == "MixtralForCausalLM"
    assert moe_routing(doc["models"]["mixtral"]) == (4, 2)  # the timings' entry gives the cost model its routing
    assert sorted(p.name for p in out.glob("*.json.gz")) == ["llama_bs3_eager.json.gz", "mixtral_bs3_eager.json.gz"]


def test_graph_modes_alone_need_cuda(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rc = main(["record", "--hf-config", str(_write(tmp_path, "llama")), "--modes", "graph", "--batch-sizes", "1",
               "--out", str(tmp_path / "o")])
    assert rc == 2 and "graph mode needs a CUDA GPU" in capsys.readouterr().err


def test_dry_run_needs_no_transformers_build(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rc = main(["record", "--hf-config", str(_write(tmp_path, "qwen2")), "--compile", "--batch-sizes", "1..4",
               "--out", str(tmp_path / "o"), "--dry-run"])
    out = capsys.readouterr().out
    assert rc == 0 and "qwen2-compiled (2 layers, hidden 64) (torch.compile, dynamic batch)" in out
    assert not (tmp_path / "o").exists()


def test_timings_validate_model_source_and_compile() -> None:
    row = {"model": "m", "batch_size": 1, "eager_us": 5.0}
    ok = {"rows": [row], "models": {"m": {"model_source": {"kind": "hf-config", "sha256": "a" * 64,
                                                           "architecture": "LlamaForCausalLM"},
                                          "compiled": True, "compile": {"compile_s": 3.5, "graphs": 2},
                                          "capture": {"ok": False, "reason": "cpu sync"}}}}
    assert validate_timings(ok) is ok
    bad = [({"model_source": {"kind": "pip"}}, "models['m'].model_source.kind"),
           ({"model_source": {"kind": "hf-config", "sha256": "xyz"}}, "models['m'].model_source.sha256"),
           ({"compiled": "yes"}, "models['m'].compiled"),
           ({"compile": {"compile_s": -1}}, "models['m'].compile.compile_s"),
           ({"capture": {"ok": False}}, "models['m'].capture.reason")]
    for entry, where in bad:
        with pytest.raises(InputError, match=r"t\.json: " + where.replace("[", r"\[").replace("]", r"\]")):
            validate_timings({"rows": [row], "models": {"m": entry}}, "t.json")


def test_eager_attention_is_the_models_own_and_makes_no_tensor_from_host_data(tmp_path: Path) -> None:
    """``eager_attention``: the model's own eager attention (matmul, softmax, matmul), called through transformers'
    AttentionInterface as :data:`EAGER_ATTENTION`, computes the SDPA model's step, and its mask is made on the device:
    no tensor from host data during the step (transformers' own eager mask makes one, ``torch.tensor(0.0,
    device=...)``, a host-to-device copy CUDA graph capture refuses). Piecewise mode cuts it like SDPA."""
    from torch.utils._python_dispatch import TorchDispatchMode

    from launchgap.harness.hf import EAGER_ATTENTION
    from launchgap.harness.sweep import model_modes as _model_modes

    class HostData(TorchDispatchMode):
        def __init__(self) -> None:
            super().__init__()
            self.ops: list[str] = []

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            if "lift_fresh" in str(func):
                self.ops.append(str(func))
            return func(*args, **(kwargs or {}))

    spec = read_hf_config(_write(tmp_path, "llama"))
    sdpa = HFDecoder(spec, 2, 32, 8, device="cpu", seed=3)
    eager = HFDecoder(spec, 2, 32, 8, device="cpu", seed=3, eager_attention=True)
    assert eager.model.config._attn_implementation == EAGER_ATTENTION == "launchgap_eager"
    assert sdpa.model.config._attn_implementation == "sdpa"
    sdpa.step(2)
    with HostData() as seen:
        eager.step(2)
    assert seen.ops == []
    torch.testing.assert_close(eager.last_logits, sdpa.last_logits, rtol=1e-4, atol=1e-4)
    with HostData() as seen:  # the check sees transformers' own eager mask do it
        from transformers.masking_utils import eager_mask
        eager_mask(batch_size=1, q_length=1, kv_length=4, device="cpu")
    assert seen.ops and all("lift_fresh" in op for op in seen.ops)
    assert _model_modes(eager, ("eager", "graph", "piecewise"), [].append) == ("eager", "graph", "piecewise")
    calls: list[int] = []

    def hook(fn, args, kwargs):
        calls.append(1)
        return fn(*args, **kwargs)

    eager.piecewise_forward(2, hook)
    assert len(calls) == spec.layers


def test_piecewise_is_dropped_only_for_compiled_models(tmp_path: Path) -> None:
    from launchgap.harness.model import Decoder, resolve_config
    from launchgap.harness.sweep import model_modes as _model_modes

    said: list[str] = []
    hf = HFDecoder(read_hf_config(_write(tmp_path, "llama")), 1, 32, 8, device="cpu")
    assert _model_modes(hf, ("eager", "graph", "piecewise"), said.append) == ("eager", "graph", "piecewise")
    hf.compiled = True
    assert _model_modes(hf, ("eager", "graph", "piecewise"), said.append) == ("eager", "graph")
    dec = Decoder(resolve_config("tiny", layers=1), 1, 32, 8, device="cpu")
    assert _model_modes(dec, ("eager", "piecewise"), said.append) == ("eager", "piecewise")
    dec.compiled = True
    assert _model_modes(dec, ("eager", "piecewise"), said.append) == ("eager",)
    assert len(said) == 2 and all("not recorded with --compile" in line for line in said)


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_piecewise_step_run_directly_is_the_step(tmp_path: Path, name: str) -> None:
    """Cut at its attention calls (their outputs through the static buffer), the forward computes what the
    step computes, bit for bit, step after step; the router is transformers' only while it runs."""
    from launchgap.harness.graphs import SegmentedStep, piecewise_step

    spec = read_hf_config(_write(tmp_path, name))
    ref = HFDecoder(spec, max_batch_size=4, context_len=64, start_pos=16, device="cpu", seed=1)
    dec = HFDecoder(spec, max_batch_size=4, context_len=64, start_pos=16, device="cpu", seed=1)
    step = piecewise_step(dec, 3)
    assert isinstance(step, SegmentedStep)
    sdpa = transformers.AttentionInterface._global_mapping["sdpa"]
    for _ in range(3):
        ref.step(3)
        step.run()
        assert torch.equal(dec.last_logits, ref.last_logits) and torch.equal(dec.tokens, ref.tokens)
        assert torch.equal(dec.pos, ref.pos)
    assert transformers.AttentionInterface._global_mapping["sdpa"] is sdpa
    # One call per layer, each returning the model's one buffer of its output shape (batch 3 of 4 rows).
    (buf,) = dec._segment_out.values()
    assert len(step.outputs) == 2 and all(o.data_ptr() == buf.data_ptr() and o.shape[0] == 3 for o in step.outputs)
    assert tuple(buf.shape[:2]) == (4, 1)
    # The pieces alone skip attention: the buffer is read, not written.
    buf.fill_(0.5)
    step.run_pieces_directly()
    assert bool((buf == 0.5).all())


def test_piecewise_needs_an_attention_call(tmp_path: Path) -> None:
    dec = HFDecoder(read_hf_config(_write(tmp_path, "llama")), 1, 32, 8, device="cpu")
    sdpa = transformers.AttentionInterface._global_mapping["sdpa"]
    dec.model.config._attn_implementation = "eager"  # transformers' own eager attention: no call through "sdpa"
    with pytest.raises(InputError, match="LlamaForCausalLM made no attention call through transformers' "
                                         "AttentionInterface \\('sdpa'\\): no place to split the step"):
        dec.piecewise_forward(1, lambda fn, args, kwargs: fn(*args, **kwargs))
    assert transformers.AttentionInterface._global_mapping["sdpa"] is sdpa

def test_compiled_steps_give_the_eager_tokens(tmp_path: Path) -> None:
    """--compile on the CPU (Inductor's C++ backend): transformers' forward and the built-in decoder,
    compiled once for a dynamic batch (sizes 3 and 2 share a graph; 1 compiles once more)."""
    from launchgap.harness.compiled import graphs_compiled
    from launchgap.harness.model import Decoder, resolve_config

    spec = read_hf_config(_write(tmp_path, "llama"))
    built = [lambda c: HFDecoder(spec, 3, 32, 8, device="cpu", seed=2, compile=c),
             lambda c: _compiled_decoder(Decoder(resolve_config("tiny", layers=1, hidden=64, heads=2, kv_heads=1,
                                                                mlp=96, vocab=128), 3, 32, 8, device="cpu",
                                                 seed=2), c)]
    for make in built:
        eager, comp = make(False), make(True)
        before = graphs_compiled(torch)
        for bs in (3, 2, 1, 3):
            want, got = eager.step(bs).clone(), comp.step(bs).clone()
            assert torch.equal(want, got), (bs, want, got)
            assert torch.allclose(eager.last_logits, comp.last_logits, atol=1e-4, rtol=1e-4)
        assert graphs_compiled(torch) - before == 2
        assert torch.equal(eager.pos, comp.pos)


def _compiled_decoder(dec, compile: bool):
    if compile:
        dec.compile()
    return dec


def test_resume_follows_the_config_hash_not_its_path(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    first = _write(tmp_path, "llama")
    out = tmp_path / "run"
    args = ["--batch-sizes", "1", "--repeats", "1", "--warmup", "0", "--no-trace", "--out", str(out)]
    assert main(["record", "--hf-config", str(first), *args]) == 0
    moved = tmp_path / "elsewhere"
    moved.mkdir()
    (moved / "llama.json").write_bytes(first.read_bytes())
    assert main(["record", "--hf-config", str(moved / "llama.json"), *args]) == 0
    assert "1 items done before" in capsys.readouterr().err
    (moved / "llama.json").write_text(json.dumps({**CONFIGS["llama"], "rope_theta": 1000.0}))
    assert main(["record", "--hf-config", str(moved / "llama.json"), *args]) == 2
    assert "holds a model named 'llama' from another config" in capsys.readouterr().err
