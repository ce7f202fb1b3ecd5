"""The Server page in Streamlit's AppTest: a log and a scrape uploaded on the Traces page (by content,
whatever their names), the log's figures, the plan in the server's own syntax; a bad log is one error line."""
from __future__ import annotations

import base64
import gzip
import json
from pathlib import Path

import numpy as np

from launchgap.dashboard.text import md_escape
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
    # the plan under the scrape is the log's (a scrape gives no costs): the page says which file planned, and with
    # no limit by default plans what `launchgap plan --server-log` plans on that log (81 graphs up to 89)
    assert [m.value for m in at.markdown if "graphs up to" in m.value][0].startswith(
        md_escape("From SGLang log server.txt: capture 81 graphs up to 89: expected step 7,926 us"))
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


def test_scrape_files_uploaded_one_by_one_are_also_one_series():
    def scrape(stamp: str, running: int) -> bytes:
        return (f"{stamp}\n# TYPE vllm:num_requests_running gauge\n"
                f'vllm:num_requests_running{{model_name="m"}} {running}.0\n').encode()

    at = new_app()
    at = upload(at, [("b.prom", scrape("2026-11-03 08:00:15", 7) + scrape("2026-11-03 08:00:30", 9)),
                     ("a.prom", scrape("2026-11-03 08:00:00", 5))])
    assert not at.error, [e.value for e in at.error]
    at = goto(at, "server")
    box = at.selectbox(key="lg_server_choice")
    assert box.options == ["b.prom", "a.prom", "vLLM scrapes, 2 files as one series"]
    assert box.value == "vLLM scrapes, 2 files as one series"  # the last: the merged series
    assert at.subheader[0].value.startswith("vLLM metrics")
    (trace,) = json.loads(at.get("plotly_chart")[0].proto.spec)["data"]  # the timeline: running requests per scrape
    y = trace["y"]
    assert (np.frombuffer(base64.b64decode(y["bdata"]), dtype=y["dtype"]).tolist() if isinstance(y, dict)
            else y) == [5, 7, 9]  # a.prom's 08:00:00 first: in time order across the files


def test_scrapes_of_two_models_are_two_series_and_each_names_its_model():
    def scrape(stamp: str, model: str, running: int) -> bytes:
        return (f"{stamp}\n# TYPE vllm:num_requests_running gauge\n"
                f'vllm:num_requests_running{{model_name="{model}"}} {running}.0\n').encode()

    at = upload(new_app(), [("a1.prom", scrape("2026-11-03 08:00:00", "qwen", 5)),
                            ("b1.prom", scrape("2026-11-03 08:00:00", "llama", 7)),
                            ("a2.prom", scrape("2026-11-03 08:00:15", "qwen", 6)),
                            ("b2.prom", scrape("2026-11-03 08:00:15", "llama", 8))])
    at = goto(at, "server")
    box = at.selectbox(key="lg_server_choice")
    assert box.options == ["a1.prom", "b1.prom", "a2.prom", "b2.prom", "vLLM scrapes of qwen, 2 files as one series",
                           "vLLM scrapes of llama, 2 files as one series"]
    assert md_escape("Model: llama; vLLM (version not in the file).") in [c.value for c in at.caption]


def test_a_server_logs_capture_list_is_the_one_its_traces_are_analysed_under():
    """A vLLM trace uploaded alone is analysed under vLLM's default list (which it contradicts); its server's log
    uploaded after it states the list the server ran, and the trace is analysed again under that one."""
    from launchgap.dashboard import session

    folder = Path(__file__).resolve().parents[2] / "traces" / "h200-vllm-2026-12-04" / "full-nostack"
    def entry():  # the uploaded trace among the bundled samples
        (e,) = [e for e in at.session_state[session.TRACES_KEY].values() if e.name == "arrivals.pt.trace.json.gz"]
        return e

    at = upload(new_app(), [("arrivals.pt.trace.json.gz", (folder / "arrivals.pt.trace.json.gz").read_bytes())])
    s = entry().report.summary
    assert s.capture_sizes_source == "default"
    assert any("disagree with the trace" in w for w in entry().report.warnings)
    at = upload(at, [("arrivals.pt.trace.json.gz", (folder / "arrivals.pt.trace.json.gz").read_bytes()),
                     ("vllm.log", (folder / "vllm.log").read_bytes())])
    assert not at.error, [e.value for e in at.error]
    s = entry().report.summary
    assert (s.capture_sizes, s.capture_sizes_source) == ([1, 2, 4, 8, *range(16, 129, 8)], "config")
    assert s.capture_sizes_detail == "vLLM log vllm.log: capture sizes [1, 2, 4, 8, 16, 24, 32, 40, ..., 128]"
    assert not any("disagree with the trace" in w for w in entry().report.warnings)
    assert any(c.value.startswith(md_escape("Capture list from vLLM log vllm.log: capture sizes [1, 2, 4")) for c in
               at.caption)
