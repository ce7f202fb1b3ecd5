"""The Server page in Streamlit's AppTest: a log and a scrape uploaded on the Traces page (by content,
whatever their names), the log's figures, the plan in the server's own syntax; a bad log is one error line."""
from __future__ import annotations

import gzip
from pathlib import Path

from tests.unit.apptest_helpers import goto, metrics, new_app, upload

LOGS = Path(__file__).resolve().parents[2] / "traces" / "serverlogs"


def test_log_and_scrape_uploaded_reach_the_server_page():
    at = new_app()
    at = upload(at, [("server.txt", (LOGS / "sglang-0.5.9-tp2-ceiling.log.gz").read_bytes()),
                     ("m.json", gzip.decompress((LOGS / "sglang-metrics.prom.gz").read_bytes()))])
    assert not at.error, [e.value for e in at.error]
    at = goto(at, "server")
    assert at.selectbox(key="lg_server_choice").options == ["server.txt", "m.json"]
    assert metrics(at)["Eager share"] == "41.6%"  # the scrape: sglang:cuda_graph_passes_total, every step
    at.selectbox(key="lg_server_choice").set_value("server.txt").run()
    assert not at.exception
    assert metrics(at) == {"Eager share": "73.5%", "Largest captured size": "32", "Absorbing ceiling state": "yes",
                           "Capture time": "8.36 s", "Capture memory": "2,232 MiB"}
    assert at.subheader[0].value == "SGLang log: absorbing ceiling state"
    snippet = at.code[0].value
    assert snippet.startswith("--cuda-graph-bs ") and max(map(int, snippet.split()[1:])) > 32  # above the ceiling
    assert any("the server captures up to 32" in c.value for c in at.caption)


def test_a_text_file_with_no_server_line_is_one_error():
    at = new_app()
    at = upload(at, [("notes.log", b"hello\nworld\n")])
    errs = [e.value for e in at.error]
    assert len(errs) == 1 and "notes" in errs[0] and "no vLLM, SGLang or TensorRT" in errs[0], errs
