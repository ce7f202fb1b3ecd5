"""The dashboard's "Server config" field: the same parser as --capture-sizes, its list on the Diagnosis page."""
from __future__ import annotations

from tests.conftest import TRACES
from tests.unit.apptest_helpers import goto, new_app, upload

SERVING = TRACES / "h200-heldout-3b-2026-12-02" / "serving" / "3b_serving_serve.json.gz"


def _apply(at, text: str):
    at.text_area[0].set_value(text)
    next(b for b in at.button if b.label == "Apply to all traces").click().run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def test_server_config_field_sets_the_capture_list() -> None:
    at = upload(new_app(), [(SERVING.name, SERVING.read_bytes())])
    _apply(at, "python -m sglang.launch_server --cuda-graph-bs 1 2 4 8 12 16 24 32 48 64")
    assert not at.error
    goto(at, "diagnosis")
    captions = " ".join(c.value for c in at.caption).replace("\\", "")  # Markdown escapes dropped
    assert ("Capture sizes (given: SGLang server config: cuda_graph_bs=[1, 2, 4, 8, 12, 16, 24, 32, 48, 64]): "
            "1, 2, 4, 8, 12, 16, 24, 32, 48, 64; uncaptured sizes at steps 0, 1, 15, 16, 33") in captions
    goto(at, "traces")
    _apply(at, "--cuda-graph-bs one")
    assert [e.value.replace("\\", "") for e in at.error] == [
        "server config (SGLang): cuda_graph_bs: expected a list of positive integers"]
