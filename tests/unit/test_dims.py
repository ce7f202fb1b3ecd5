"""analyzer/dims.py: ModelDims read from the harness's layout and from Hugging Face configs (nested and MoE ones),
and the harness's model descriptions are ModelDims (one home for dimensions)."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from launchgap.dims import ModelDims, text_config
from launchgap.errors import InputError

LLAMA_3B = {"num_hidden_layers": 28, "hidden_size": 3072, "num_attention_heads": 24, "num_key_value_heads": 8,
            "intermediate_size": 8192, "vocab_size": 128256, "model_type": "llama"}


def test_head_dim_left_out_is_hidden_over_heads() -> None:
    assert ModelDims("m", 2, 1024, 8, 8, 1024, 100).head_dim == 128
    assert ModelDims("m", 2, 1024, 8, 8, 1024, 100, head_dim=256).head_dim == 256
    with pytest.raises(InputError, match="head_dim of 'm' is 0"):
        ModelDims("m", 2, 4, 8, 8, 1024, 100)


def test_hf_config_nested_text_config_and_expert_width() -> None:
    nested = {"model_type": "llava", "text_config": {**LLAMA_3B, "head_dim": None}, "vision_config": {"hidden_size": 1}}
    assert text_config(nested) is nested["text_config"] and text_config(LLAMA_3B) is LLAMA_3B
    d = ModelDims.from_mapping(nested, "vlm")
    assert (d.name, d.layers, d.hidden, d.heads, d.kv_heads, d.mlp, d.vocab, d.head_dim) == \
        ("vlm", 28, 3072, 24, 8, 8192, 128256, 128)
    moe = {"model_type": "deepseek_v3", "hidden_size": 64, "moe_intermediate_size": 32, "num_hidden_layers": 2,
           "num_attention_heads": 4, "vocab_size": 256, "torch_dtype": "float32"}
    d = ModelDims.from_mapping(moe)
    assert (d.name, d.mlp, d.kv_heads, d.head_dim, d.dtype_bytes) == ("deepseek_v3", 32, 4, 16, 4)


@pytest.mark.parametrize("doc,message", [
    ({**LLAMA_3B, "num_hidden_layers": 0}, "model dimension num_hidden_layers is 0, expected a positive integer"),
    ({**LLAMA_3B, "hidden_size": 3072.0}, "model dimension hidden_size is 3072.0, expected a positive integer"),
    ({**LLAMA_3B, "num_key_value_heads": True}, "model dimension num_key_value_heads is True, expected"),
    ({k: v for k, v in LLAMA_3B.items() if k != "vocab_size"}, "model dimensions lack 'vocab' (or 'vocab_size')"),
])
def test_bad_dimension_names_its_key(doc: dict, message: str) -> None:
    with pytest.raises(InputError) as err:
        ModelDims.from_mapping(doc)
    assert str(err.value).startswith(message)


def test_harness_models_are_model_dims(tmp_path: Path) -> None:
    pytest.importorskip("torch", reason="the harness's modules import with torch installed")
    from launchgap.harness.hf import read_hf_config
    from launchgap.harness.model import PRESETS, resolve_config

    p3b = PRESETS["3b"]
    assert isinstance(p3b, ModelDims)
    # Llama-3.2-3B's 112 KiB of KV cache per token, from the preset and from its config alike.
    assert p3b.kv_bytes_per_token == ModelDims.from_mapping(LLAMA_3B).kv_bytes_per_token == 114688
    # An override of hidden or heads re-derives head_dim (it is never carried over from the preset).
    assert (resolve_config("1b", hidden=1024).head_dim, resolve_config("1b", heads=16, kv_heads=8).head_dim) == (32, 128)
    with pytest.raises(TypeError):
        type(p3b)("x", layers=1, hidden=64, heads=2, kv_heads=2, mlp=8, vocab=8, head_dim=16)
    cfg = tmp_path / "config.json"
    cfg.write_text(json.dumps({**LLAMA_3B, "torch_dtype": "float32", "head_dim": 96}))
    spec = read_hf_config(cfg)
    assert isinstance(spec, ModelDims)
    assert (spec.name, spec.head_dim, spec.dtype_bytes) == (tmp_path.name, 96, 2)  # the harness builds in bf16
