"""The Capture plan page's trade-off (issue 16): Pareto chart and table, memory metrics, through AppTest."""
from __future__ import annotations

import json

import pytest

pytest.importorskip("streamlit")
pytest.importorskip("plotly")

import streamlit as st  # noqa: E402

from launchgap.dashboard.text import md_escape  # noqa: E402
from tests.unit.apptest_helpers import goto, metrics, new_app  # noqa: E402

# 2 * hidden + vocab = 2**18 elements of 2 bytes: 0.5 MiB per batch row (tests/unit/test_memory_model.py).
DIMS = {"layers": 2, "hidden": 1024, "heads": 8, "kv_heads": 8, "mlp": 1024, "vocab": 260096, "head_dim": 128}
TIMINGS = {"schema": "launchgap.timings/1", "device": "test", "models": {"m": DIMS}, "rows": [
    {"model": "m", "batch_size": b, "eager_us": e, "graph_us": g, "kernels_per_step": 100}
    for b, e, g in [(1, 100.0, 20.0), (4, 100.0, 50.0), (8, 120.0, 80.0)]]}


@pytest.fixture(autouse=True)
def bundled_timings(tmp_path, monkeypatch):
    """The bundled samples: one timings file with the model's dimensions; caches rebuilt per test."""
    root = tmp_path / "samples"
    root.mkdir()
    (root / "timings.json").write_text(json.dumps(TIMINGS))
    monkeypatch.setenv("LAUNCHGAP_SAMPLES_DIR", str(root))
    st.cache_resource.clear()
    yield
    st.cache_resource.clear()


def test_plan_page_shows_the_pareto_chart_and_table() -> None:
    at = goto(new_app(), "plan")
    at.radio(key="lg_plan_src").set_value("harness timings (JSON)").run()
    at.radio(key="lg_plan_dsrc").set_value("a CSV / JSON histogram").run()
    at.file_uploader(key="lg_plan_dist_widget").set_value(("d.csv", b"batch_size,count\n1,5\n2,3\n4,2\n", "text/csv"))
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    m = metrics(at)
    assert m["Graphs to capture"] == "3" and m["Expected step"] == "29 us"
    assert m["Capture time"].endswith(" s") and m["KV-cache tokens lost"] != "unknown"
    charts = [json.loads(c.proto.spec) for c in at.get("plotly_chart")]
    pareto = [c for c in charts if c["layout"]["title"]["text"] == "Graph memory vs expected step"]
    assert len(pareto) == 1
    assert [t["name"] for t in pareto[0]["data"]] == ["Pareto", "this plan", "server defaults"]
    table = next(d.value for d in at.dataframe if "capture (s)" in d.value.columns and "buckets" in d.value.columns)
    assert list(table["graphs"])[0] == 0 and list(table["buckets"])[-1] == "1, 2, 4"
    # A memory budget: drawn on the chart as a line.
    at.slider(key="lg_plan_mem").set_value(64).run()
    assert not at.exception
    chart = next(json.loads(c.proto.spec) for c in at.get("plotly_chart")
                 if json.loads(c.proto.spec)["layout"]["title"]["text"] == "Graph memory vs expected step")
    assert any(s.get("type") == "line" for s in chart["layout"].get("shapes", []))


def test_plan_page_takes_a_model_config() -> None:
    at = goto(new_app(), "plan")
    at.radio(key="lg_plan_src").set_value("harness timings (JSON)").run()
    at.radio(key="lg_plan_dsrc").set_value("a CSV / JSON histogram").run()
    at.file_uploader(key="lg_plan_dist_widget").set_value(("d.csv", b"batch_size,count\n1,5\n2,3\n4,2\n", "text/csv"))
    at.toggle(key="lg_plan_cfg_on").set_value(True).run()
    cfg = {"num_hidden_layers": 4, "hidden_size": 1024, "num_attention_heads": 8, "intermediate_size": 1024,
           "vocab_size": 260096, "_name_or_path": "other-model"}
    at.file_uploader(key="lg_plan_model_cfg_widget").set_value(("config.json", json.dumps(cfg).encode(),
                                                                "application/json"))
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    want = md_escape("Graph memory and capture time from the memory model, for other-model's dimensions.")
    assert want in [c.value for c in at.caption]
    # 4 layers of 8 KV heads of 128, bf16: 16 KiB per token.
    mib = float(metrics(at)["Graph memory"].split()[0].replace(",", ""))
    assert metrics(at)["KV-cache tokens lost"].replace(",", "").isdigit()
    assert int(metrics(at)["KV-cache tokens lost"].replace(",", "")) == pytest.approx(mib * 64, abs=64)
