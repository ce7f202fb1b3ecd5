"""Graph memory and capture-time model: exact numbers on hand-built dimensions and measurements."""
from __future__ import annotations

import json

import numpy as np
import pytest

from launchgap.errors import InputError
from launchgap.planning.inputs import (
    graph_memory_from_timings,
    load_model_dims,
    model_dims_from_timings,
)
from launchgap.planning.memory import (
    GraphMemoryMeasurement,
    MemoryModel,
    ModelDims,
    _nnls,
    default_memory_model,
    fit_memory_model,
    main,
)

# 2 * hidden + vocab = 2048 + 260,096 = 2**18 elements of 2 bytes: 0.5 MiB per batch row.
DIMS = ModelDims("m", layers=2, hidden=1024, heads=8, kv_heads=8, mlp=1024, vocab=260096, head_dim=128)
# 100 nodes per size (45 * 2 + 10): 1 MiB and 0.1 s of nodes per size.
MODEL = MemoryModel(base_mib=100.0, pool_per_act=2.0, graph_mib=10.0, node_kib=10.24, capture_base_s=0.5,
                    capture_graph_s=0.1, capture_node_ms=1.0, nodes_per_layer=45.0, nodes_base=10.0)


def test_dims_activation_and_kv_bytes():
    assert DIMS.act_row_mib == 0.5
    assert DIMS.kv_bytes_per_token == 2 * 2 * 8 * 128 * 2
    assert DIMS.default_pieces == 3
    hf = ModelDims.from_mapping({"num_hidden_layers": 28, "hidden_size": 3072, "num_attention_heads": 24,
                                 "num_key_value_heads": 8, "intermediate_size": 8192, "vocab_size": 128256,
                                 "torch_dtype": "bfloat16", "model_type": "llama"})
    assert (hf.name, hf.layers, hf.head_dim, hf.kv_heads, hf.dtype_bytes) == ("llama", 28, 128, 8, 2)
    assert hf.kv_bytes_per_token == 114688  # 2 * 28 * 8 * 128 * 2: Llama-3.2-3B's 112 KiB per token
    with pytest.raises(InputError, match="lack 'vocab'"):
        ModelDims.from_mapping({"layers": 2, "hidden": 8, "heads": 2, "mlp": 8})
    with pytest.raises(InputError, match="layers of 'x' is 0"):
        ModelDims("x", 0, 8, 2, 2, 8, 8, 4)


def test_predict_full_and_piecewise_exact():
    # Full: 100 + 2 * 0.5 * 8 (largest 8) + 4 sizes * (10 + 100 nodes * 10.24 KiB) = 152 MiB;
    # capture 0.5 + 4 * (0.1 + 100 * 1 ms) = 1.3 s.
    assert MODEL.predict(DIMS, [1, 2, 4, 8]) == (pytest.approx(152.0), pytest.approx(1.3))
    # Piecewise, 3 pieces per size: 100 + 8 + 4 * (30 + 1) = 232 MiB; 0.5 + 4 * (0.3 + 0.1) = 2.1 s.
    assert MODEL.predict(DIMS, [1, 2, 4, 8], "piecewise") == (pytest.approx(232.0), pytest.approx(2.1))
    assert MODEL.predict(DIMS, [8], nodes_per_size=200) == (pytest.approx(100 + 8 + 10 + 2), pytest.approx(0.8))
    assert MODEL.predict(DIMS, []) == (0.0, 0.0)
    cost = MODEL.list_cost(DIMS)
    assert cost.memory_mib(np.array([0, 1, 2]), np.array([8, 8, 16])).tolist() == [0.0, 119.0, 138.0]
    with pytest.raises(InputError, match="graph mode"):
        MODEL.list_cost(DIMS, "partial")
    assert MemoryModel.from_dict(MODEL.to_dict()) == MODEL
    with pytest.raises(InputError, match="lacks graph_mib"):
        MemoryModel.from_dict({k: v for k, v in MODEL.to_dict().items() if k != "graph_mib"})
    with pytest.raises(InputError, match="parameter pool_per_act is 'x'"):
        MemoryModel.from_dict({**MODEL.to_dict(), "pool_per_act": "x"})


def test_nnls_is_exact_on_a_small_problem():
    # Unconstrained least squares wants a negative second coefficient; NNLS drops that column.
    a = np.array([[1.0, 0.0], [1.0, 1.0], [1.0, 2.0]])
    y = np.array([3.0, 2.0, 1.0])
    assert _nnls(a, y).tolist() == pytest.approx([2.0, 0.0])
    assert _nnls(a, np.array([1.0, 2.0, 3.0])).tolist() == pytest.approx([1.0, 1.0])


def _measure(model: MemoryModel, dims: ModelDims, mode: str, name: str, sizes: list[int]) -> GraphMemoryMeasurement:
    g = 1 if mode == "full" else dims.default_pieces
    mib, s = model.predict(dims, sizes, mode)
    return GraphMemoryMeasurement(dims.name, mode, name, tuple(sizes), g * len(sizes),
                                  model.nodes_per_size(dims) * len(sizes), mib, s)


LISTS = {"pow2": [1, 2, 4, 8, 16, 32, 64, 128], "dense": list(range(1, 33)), "one": [64],
         "step8": list(range(8, 257, 8))}


def test_fit_recovers_a_known_model_and_states_held_out_errors():
    other = ModelDims("big", layers=6, hidden=2048, heads=16, kv_heads=4, mlp=4096, vocab=128000, head_dim=128)
    meas = [_measure(MODEL, d, mode, n, s) for d in (DIMS, other) for n, s in LISTS.items()
            for mode in ("full", "piecewise")]
    fit = fit_memory_model(meas, {"m": DIMS, "big": other}, fitted_on="synthetic")
    for k in ("base_mib", "pool_per_act", "graph_mib", "node_kib", "capture_base_s", "capture_graph_s",
              "capture_node_ms", "nodes_per_layer", "nodes_base"):
        assert getattr(fit, k) == pytest.approx(getattr(MODEL, k), rel=1e-6, abs=1e-9), k
    s = fit.errors["summary"]
    assert (s["lists"], s["models"]) == (16, 2)
    assert s["memory_leave_list_out"] == 0.0 and s["memory_leave_model_out_8_to_128_graphs"] == 0.0
    row = fit.errors["lists"][0]
    assert (row["model"], row["mode"], row["list_name"], row["graphs"]) == ("m", "full", "pow2", 8)
    assert row["measured_mib"] == pytest.approx(100 + 128 + 8 * 11)


def test_fit_needs_dims_and_data():
    m = _measure(MODEL, DIMS, "full", "one", [8])
    with pytest.raises(InputError, match="no model dimensions for m"):
        fit_memory_model([m], {})
    with pytest.raises(InputError, match="no graph_memory measurement"):
        fit_memory_model([], {"m": DIMS})


FIXTURE = "issue16-graph-memory/graph_memory.json"


def test_read_issue16_fixture(samples):
    dims, meas = graph_memory_from_timings(samples / FIXTURE)
    assert list(dims) == ["3b-class"] and dims["3b-class"].layers == 28
    assert [(m.list_name, m.mode, m.graphs, m.device_used_mib) for m in meas] == [
        ("pow2-128", "full", 8, 480.0), ("vllm-256", "full", 35, 1308.0), ("every-1-128", "full", 128, 1526.0),
        ("single-128", "full", 1, 240.0), ("single-128", "piecewise", 21, 848.0)]
    assert meas[0].nodes == 8 * 1272 and meas[4].capture_s is None
    assert model_dims_from_timings(samples / FIXTURE, None).name == "3b-class"


@pytest.mark.parametrize("entry, reason", [
    ({"mode": "both"}, "mode is 'both'"),
    ({"capture_sizes": []}, "capture_sizes must be a non-empty list"),
    ({"graphs": 0}, "graphs is 0"),
    ({"device_used_mib": "x"}, "device_used_mib is 'x'"),
])
def test_graph_memory_bad_entries(tmp_path, entry, reason):
    good = {"model": "m", "mode": "full", "list_name": "l", "capture_sizes": [1, 2], "graphs": 2,
            "nodes_per_graph": {"1": 10, "2": None}, "device_used_mib": 100.0, "capture_s": 1.0}
    f = tmp_path / "t.json"
    f.write_text(json.dumps({"schema": "launchgap.timings/1", "graph_memory": [{**good, **entry}]}))
    with pytest.raises(InputError, match=reason):
        graph_memory_from_timings(f)
    f.write_text(json.dumps({"schema": "launchgap.timings/1", "graph_memory": [good]}))
    assert graph_memory_from_timings(f)[1][0].nodes == 20.0  # the counted size's median for the other
    f.write_text(json.dumps({"schema": "launchgap.timings/1", "rows": []}))
    with pytest.raises(InputError, match="no graph_memory"):
        graph_memory_from_timings(f)


def test_load_model_dims_formats(tmp_path):
    f = tmp_path / "config.json"
    f.write_text(json.dumps({"num_hidden_layers": 2, "hidden_size": 64, "num_attention_heads": 4,
                             "intermediate_size": 128, "vocab_size": 1000}))
    d = load_model_dims(f)
    assert (d.kv_heads, d.head_dim) == (4, 16)
    f.write_text(json.dumps({"models": {"a": DIMS.to_dict(), "b": DIMS.to_dict()}}))
    assert load_model_dims(f, "b") == ModelDims(**{**DIMS.to_dict(), "name": "b"})
    with pytest.raises(InputError, match="not in the file's models"):
        load_model_dims(f)


def test_committed_defaults_are_the_fit_of_their_data(samples, tmp_path):
    """The defaults are what ``python -m launchgap.planning.memory fit`` writes from the files they name."""
    committed = default_memory_model()
    files = [str(samples.parent / f.strip()) for f in committed.fitted_on.split(",")]
    out = tmp_path / "model.json"
    assert main(["fit", *files, "--out", str(out)]) == 0
    refit = MemoryModel.from_dict(json.loads(out.read_text()))
    for k in ("base_mib", "pool_per_act", "graph_mib", "node_kib", "capture_base_s", "capture_graph_s",
              "capture_node_ms"):
        assert getattr(refit, k) == pytest.approx(getattr(committed, k), rel=1e-9, abs=1e-12), k
    assert refit.errors["summary"] == committed.errors["summary"]


def test_fit_command_errors(tmp_path, capsys):
    bad = tmp_path / "t.json"
    bad.write_text("{}")
    assert main(["fit", str(bad), "--out", str(tmp_path / "m.json")]) == 2
    assert "no graph_memory" in capsys.readouterr().err
