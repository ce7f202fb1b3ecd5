"""notes/replay_diag.py (issue 31's replay check) on the CPU: its eager parts on a tiny transformers config,
its kernel-sequence comparison on hand-built sequences, and its one-line exit without CUDA."""
from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

torch = pytest.importorskip("torch", reason="torch not installed (pip install 'launchgap[record]')")
pytest.importorskip("transformers", reason="transformers not installed (pip install 'launchgap[record]')")

SCRIPT = Path(__file__).resolve().parents[2] / "notes" / "replay_diag.py"
TINY = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 64, "intermediate_size": 96,
        "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 256,
        "max_position_embeddings": 1024}


@pytest.fixture(scope="module")
def diag():
    spec = importlib.util.spec_from_file_location("replay_diag", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_eager_parts_on_cpu_repeat_a_step_exactly(diag, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cfg = tmp_path / "tiny.json"
    cfg.write_text(json.dumps(TINY))
    assert diag.main([str(cfg), "--sizes", "3,1", "--device", "cpu"]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert len(lines) == 1
    (model,) = json.loads(lines[0])["configs"]
    assert [r["batch_size"] for r in model["sizes"]] == [1, 3]
    for row in model["sizes"]:
        # Restoring tokens and positions repeats the step bit for bit, as restoring the whole cache does;
        # the float32 reference (a copy of the weights over its own StaticCache) computes the same step.
        assert row["eager_bitwise_equal"] is True
        assert row["eager_vs_eager"] == 0.0
        assert row["full_restore_vs_eager"] == 0.0
        assert row["dtype"] == "float32"
        assert row["bf16_vs_fp32"] < 1e-6
        assert row["argmax_agree_fp32"] == 1.0
        assert row["position"] == 128
        assert row["graph"] == "skipped: no CUDA"


def test_kernel_sequences_compare_names_then_launch_configs(diag) -> None:
    eager = [("gemm_a", (4, 1, 1), (128, 1, 1)), ("norm", (8, 1, 1), (256, 1, 1)), ("gemm_b", (2, 1, 1), (64, 1, 1))]
    assert diag.compare_kernels(eager, list(eager)) == {
        "eager": 3, "graph": 3, "names_equal": True, "launch_equal": True, "first_diff": None, "count_differs": {}}
    grid = [eager[0], ("norm", (16, 1, 1), (256, 1, 1)), eager[2]]
    out = diag.compare_kernels(eager, grid)
    assert (out["names_equal"], out["launch_equal"]) == (True, False)
    assert out["first_diff"] == {"index": 1, "eager": ["norm", [8, 1, 1], [256, 1, 1]],
                                 "graph": ["norm", [16, 1, 1], [256, 1, 1]]}
    extra = [*eager, ("splitk_reduce", (1, 1, 1), (32, 1, 1))]
    out = diag.compare_kernels(eager, extra)
    assert out["first_diff"] == {"index": 3, "eager": None, "graph": ["splitk_reduce", [1, 1, 1], [32, 1, 1]]}
    assert out["count_differs"] == {"splitk_reduce": [0, 1]}


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the message given without CUDA")
def test_without_cuda_one_line_and_exit_2(diag, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert diag.main([str(tmp_path / "any.json")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("replay_diag: CUDA is not available") and "\n" not in err
