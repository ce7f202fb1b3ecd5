"""The dashboard, page by page, through Streamlit's AppTest (no browser), plus its building blocks.

Traces are tiny hand-built Kineto files (times in us; arithmetic in comments). Every test
starts a server-side cache from scratch and points the bundled samples at an empty folder,
so only what a test uploads is loaded.
"""
from __future__ import annotations

import gzip
import json
import re

import numpy as np
import pytest

pytest.importorskip("streamlit")
pytest.importorskip("plotly")

import streamlit as st  # noqa: E402
from streamlit.testing.v1 import AppTest  # noqa: E402

from tests.unit.apptest_helpers import TIMEOUT_S, goto, metrics, new_app, upload  # noqa: E402,F401

from launchgap.cli import main as cli_main  # noqa: E402
from launchgap.commands import app as app_cmd  # noqa: E402
from launchgap.errors import AnalyzerError  # noqa: E402
from launchgap.loaders import load_trace  # noqa: E402
from launchgap.overhead import DEFAULT_OVERHEAD  # noqa: E402
from launchgap.predict import DEFAULT_MODEL  # noqa: E402
from launchgap.report import analyze_trace  # noqa: E402
from launchgap.dashboard import MAIN_SCRIPT  # noqa: E402
from launchgap.dashboard.cache import BoundedCache  # noqa: E402
from launchgap.dashboard.pairing import crossover_batch_size, pair_by_batch_size  # noqa: E402
from launchgap.dashboard.settings import default_samples, discover_samples  # noqa: E402
from launchgap.dashboard.text import band_percent, hover_escape, json_safe, md_escape, page_words  # noqa: E402
from tests.unit.kineto_tiny import ann, doc, kernel, launch  # noqa: E402

NASTY = "<script>alert(1)</script> **bold** [x](http://e.invalid) $x$ :red[y]"


def eager_events(t0: float, bs: int = 4, k2_name: str = "k2") -> list[dict]:
    """One eager step at t0: step [t0, t0+100]; k1 [20, 30], k2 [50, 60] (relative to t0).

    GPU window [20, 60] = 40 us, busy 20, idle 20 (gap [30, 50]: launch 2 began at 40, after the
    device went idle at 30 -> host 10, launch 10). Launch calls 5 + 5 = 10 us over 20 us of
    kernels: ratio 0.5. Host events 2 (the launch calls).
    """
    c = int(t0) + 1
    return [ann(f"decode_step[bs={bs}]", t0, 100), launch(t0 + 10, 5, c), kernel(t0 + 20, 10, c, name="k1"),
            launch(t0 + 40, 5, c + 1), kernel(t0 + 50, 10, c + 1, name=k2_name)]


def graph_events(t0: float, bs: int = 4) -> list[dict]:
    """One graph step at t0: a cudaGraphLaunch [10, 15] replays k1 [20, 30] and k2 [31, 41].

    GPU window [20, 41] = 21 us, busy 20; one host event: the unprofiled estimate is
    max(21 - profiler cost of one host event, busy 20) = GRAPH_US.
    """
    c = int(t0) + 900
    return [ann(f"decode_step[bs={bs}]", t0, 100), launch(t0 + 10, 5, c, name="cudaGraphLaunch"),
            kernel(t0 + 20, 10, c, name="k1"), kernel(t0 + 31, 10, c, name="k2")]


def trace_bytes(events: list[dict], gz: bool = False, **extra) -> bytes:
    data = json.dumps(doc(events, **extra)).encode()
    return gzip.compress(data) if gz else data


EAGER = trace_bytes(eager_events(0) + eager_events(1000))  # two identical steps
GRAPH = trace_bytes(graph_events(0) + graph_events(1000), gz=True)
BAD = b"\x00\x01 this is not a trace"

# By hand (see eager_events), with the prediction model's constants (launchgap.predict):
# Runtime calls only, no cpu_ops: the profiler-overhead tier is "cupti" (launchgap.overhead).
UNPROF_US = 40 - DEFAULT_OVERHEAD.rate("cupti").value * 2  # profiled step less 2 host events
PRED_US = 20 + DEFAULT_MODEL.node_us * 2 + DEFAULT_MODEL.graph_launch_us  # busy + 2 short kernels + 1 launch
SPEEDUP = UNPROF_US / PRED_US
GRAPH_US = max(21 - DEFAULT_OVERHEAD.rate("cupti").value, 20.0)  # graph step: 21 us less one host event, >= busy


@pytest.fixture(autouse=True)
def fresh_server(tmp_path, monkeypatch):
    """No bundled samples, and server-wide caches (settings, trace cache) rebuilt for each test."""
    empty = tmp_path / "no-samples"
    empty.mkdir()
    monkeypatch.setenv("LAUNCHGAP_SAMPLES_DIR", str(empty))
    st.cache_resource.clear()
    yield
    st.cache_resource.clear()






def analyzer_message(tmp_path, name: str, data: bytes) -> str:
    p = tmp_path / name
    p.write_bytes(data)
    with pytest.raises(AnalyzerError) as exc:
        load_trace(p)
    return exc.value.message


def html_escaped(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def rendered_text(at: AppTest) -> list[str]:
    """Every Markdown-rendered string on the page (markdown, captions, alerts, code is excluded)."""
    out = []
    for kind in ("markdown", "caption", "error", "warning", "info", "success", "title", "header", "subheader"):
        out += [str(e.value) for e in getattr(at, kind)]
    return out


# --- Traces page -------------------------------------------------------------------------------

def test_traces_page_upload_fills_the_table() -> None:
    at = upload(new_app(), [("eager_bs4.json", EAGER), ("graph_bs4.json.gz", GRAPH)])
    df = at.dataframe[0].value
    assert list(df["trace"]) == ["eager_bs4.json", "graph_bs4.json.gz"]
    assert list(df["format"]) == ["kineto", "kineto"]
    assert list(df["mode"]) == ["eager", "graph"]
    assert list(df["steps"]) == [2, 2]
    assert list(df["kernels / step"]) == [2.0, 2.0]
    assert list(df["batch sizes"]) == ["4", "4"]
    assert list(df["device"]) == ["0: Test GPU", "0: Test GPU"]
    assert df["GPU idle"].iloc[0] == pytest.approx(0.5)
    assert not at.error


def test_bad_file_shows_one_line_error_and_the_good_one_still_loads(tmp_path) -> None:
    at = upload(new_app(), [("bad.json", BAD), ("good.json", EAGER)])
    msg = analyzer_message(tmp_path, "bad.json", BAD)
    assert [e.value for e in at.error] == [md_escape(f"bad.json: {msg}")]
    assert "\n" not in at.error[0].value and "Traceback" not in at.error[0].value
    assert list(at.dataframe[0].value["trace"]) == ["good.json"]
    # The error stays next to the file name on the other pages too; the good trace is diagnosed.
    goto(at, "diagnosis")
    assert [e.value for e in at.error] == [md_escape(f"bad.json: {msg}")]
    assert metrics(at)["Steps"] == "2"


def test_same_file_uploaded_twice_is_loaded_once() -> None:
    at = upload(new_app(), [("a.json", EAGER)])
    upload(at, [("a.json", EAGER)])  # a new upload of the same bytes and name
    assert list(at.dataframe[0].value["trace"]) == ["a.json"]


def test_session_trace_limit_is_enforced(monkeypatch) -> None:
    monkeypatch.setenv("LAUNCHGAP_SESSION_TRACES", "1")
    at = upload(new_app(), [("a.json", EAGER), ("b.json.gz", GRAPH)])
    assert list(at.dataframe[0].value["trace"]) == ["a.json"]
    assert len(at.error) == 1 and at.error[0].value.startswith(md_escape("b.json.gz: this session already holds 1"))


# --- Diagnosis page ----------------------------------------------------------------------------

def test_diagnosis_metrics_exact() -> None:
    at = goto(upload(new_app(), [("eager_bs4.json", EAGER)]), "diagnosis")
    m = metrics(at)
    assert m["GPU idle"] == "50.0%"  # 20 of 40 us
    assert m["Launch-to-kernel ratio"] == "0.50"  # 10 us of launch calls / 20 us of kernels
    assert m["Predicted CUDA-graph speedup"] == f"{SPEEDUP:.2f}x"
    assert m["Steps"] == "2"
    assert m["Step, profiled (median)"] == "40 us"
    assert m["Predicted graph step"] == f"{PRED_US:,.0f} us"
    verdict = [v for v in rendered_text(at) if v.startswith("**Verdict:")]
    assert len(verdict) == 1 and "launch\\-bound" in verdict[0]
    charts = at.get("plotly_chart")
    assert len(charts) == 3  # timeline, idle by cause, gap histogram
    timeline = json.loads(charts[0].proto.spec)
    lanes = timeline["layout"]["yaxis"]["ticktext"]
    assert lanes == ["CPU step", "CPU thread 100", "GPU 0 stream 7", "GPU 0 idle"]
    names = {t["name"] for t in timeline["data"]}
    assert {"kernel", "launch call", "idle: host (CPU late)", "idle: launch call"} <= names
    top = at.dataframe[0].value
    assert list(top["name"]) == ["k1", "k2"] and list(top["count"]) == [2, 2]


def test_diagnosis_says_what_the_profiler_cost_it_took_off() -> None:
    at = goto(upload(new_app(), [("eager_bs4.json", EAGER)]), "diagnosis")
    caption = next(c for c in rendered_text(at) if c.startswith("Speedup range"))
    assert md_escape("its cost taken off the step: 0.8 us per host event.") in caption and "Python call" not in caption
    # with Python stacks: the 12 calls in the step's window, 10.5 of them past 0.25 per host event, at 3.56 us
    from tests.unit.test_overhead import events, python_function

    stack = trace_bytes(events(dims=None) + [python_function(30 + 5 * i, 1) for i in range(12)])
    at = goto(upload(new_app(), [("stack.json", stack)]), "diagnosis")
    caption = next(c for c in rendered_text(at) if c.startswith("Speedup range"))
    assert md_escape("its cost taken off the step: 5.21 us per host event and 3.56 us per recorded Python call past "
                     "the host events' share (12 calls per step).") in caption


def test_diagnosis_opens_on_the_latest_upload() -> None:
    at = upload(new_app(), [("graph.json.gz", GRAPH)])
    upload(at, [("eager.json", EAGER)])
    goto(at, "diagnosis")
    assert at.selectbox(key="lg_diag_widget").value.endswith(":eager.json")
    assert metrics(at)["GPU idle"] == "50.0%"


def test_trace_text_is_shown_literally(tmp_path) -> None:
    """A kernel name and a file name full of HTML/Markdown come out as text, never as markup."""
    events = eager_events(0, k2_name=NASTY) + eager_events(1000, k2_name=NASTY)
    nasty_file = "<img src=x onerror=alert(1)>**f**.json"
    at = upload(new_app(), [(nasty_file, trace_bytes(events)), ("<b>bad</b>.json", BAD)])
    assert NASTY.split("<")[0] == ""  # the name starts with markup
    msg = analyzer_message(tmp_path, "bad.json", BAD)
    assert [e.value for e in at.error] == [md_escape(f"<b>bad</b>.json: {msg}")]
    assert list(at.dataframe[0].value["trace"]) == [nasty_file]  # dataframes show text as is
    goto(at, "diagnosis")
    assert NASTY in list(at.dataframe[0].value["name"])  # top kernels: the exact name
    for text in rendered_text(at):  # no unescaped markup reaches Markdown
        assert not re.search(r"(?<!\\)<(?:script|img|b)\b", text), text
    for chart in at.get("plotly_chart"):  # Plotly hover/tick text: HTML-escaped
        spec = chart.proto.spec
        assert "<script>" not in spec and "<img" not in spec
    timeline = json.loads(at.get("plotly_chart")[0].proto.spec)
    hover = [row[0] for t in timeline["data"] if t.get("customdata") for row in t["customdata"]]
    assert html_escaped(NASTY) in hover
    assert all(not a.value for a in at.exception)


def test_md_escape_and_hover_escape() -> None:
    assert md_escape("a*b_c <x> $1 [l](u)") == r"a\*b\_c \<x\> \$1 \[l\]\(u\)"
    assert md_escape("two\nlines") == "two lines"
    assert list(hover_escape(["<b>k</b>", "k" * 200], max_chars=10)) == ["&lt;b&gt;k&lt;/b&gt;", "k" * 9 + "…"]
    assert json.dumps(json_safe({"a": [float("inf"), 1.5, float("nan")]}), allow_nan=False) == '{"a": [null, 1.5, null]}'


# --- Compare page ------------------------------------------------------------------------------

def test_compare_pairs_eager_and_graph_by_batch_size() -> None:
    at = goto(upload(new_app(), [("eager.json", EAGER), ("graph.json.gz", GRAPH)]), "compare")
    table = at.dataframe[0].value
    assert list(table["batch_size"]) == [4]
    row = table.iloc[0]
    assert row["eager_step_us"] == pytest.approx(UNPROF_US)
    assert row["graph_step_us"] == pytest.approx(GRAPH_US)  # max(21 - one host event's cost, busy 20)
    assert row["measured_speedup"] == pytest.approx(UNPROF_US / GRAPH_US)
    assert row["predicted_speedup"] == pytest.approx(UNPROF_US / PRED_US)
    assert row["eager_idle_fraction"] == pytest.approx(0.5)
    assert len(at.get("plotly_chart")) == 3  # speedup, step time, side by side
    side = at.dataframe[1].value.set_index("metric")
    assert side.loc["steps", "A"] == 2 and side.loc["steps", "B"] == 2
    assert side.loc["GPU idle (fraction)", "A"] == pytest.approx(0.5)
    assert "engine's whole step (us)" not in side.index  # neither is a serving engine's trace


def test_pairing_and_crossover_exact() -> None:
    # speedup 3.0 at bs 8, 1.01 at bs 32: under 1.05 between them, interpolated in log2(bs):
    # log2 8 = 3, log2 32 = 5; (3.0 - 1.05) / (3.0 - 1.01) = 0.9799 of the way -> 2 ** 4.9598 = 31.1
    assert crossover_batch_size(np.array([8.0, 32.0]), np.array([3.0, 1.01]), 0.05) == 31.1
    assert crossover_batch_size(np.array([8.0, 32.0]), np.array([3.0, 2.0]), 0.05) is None
    assert crossover_batch_size(np.array([8.0, 32.0]), np.array([1.0, 0.9]), 0.05) == 8.0
    reps = [("e", analyze_trace(_load(EAGER, "e.json")))]
    table = pair_by_batch_size(reps, DEFAULT_MODEL)
    assert table["eager_steps"].tolist() == [2] and np.isnan(table["graph_step_us"].iloc[0])


_TMP_COUNTER = iter(range(10**6))


def _load(data: bytes, name: str):
    import tempfile
    from pathlib import Path

    d = Path(tempfile.mkdtemp(prefix="lg-test-"))
    p = d / f"{next(_TMP_COUNTER)}-{name}"
    p.write_bytes(data)
    return load_trace(p)


# --- Capture plan page -------------------------------------------------------------------------

def test_plan_from_loaded_traces() -> None:
    at = goto(upload(new_app(), [("eager.json", EAGER), ("graph.json.gz", GRAPH)]), "plan")
    # one batch size each, decode_step[bs=4]: launchgap record's sweeps, benchmarks: costs, never the distribution
    assert [i.value for i in at.info] == [
        "The loaded traces are benchmarks of one batch size each (launchgap record sweeps): they give the step costs, "
        "never production's batch sizes. Load a serving trace, or upload a histogram."]
    assert not metrics(at)
    # with a serving trace beside them (the harness's serving marker): its decode steps are the distribution
    serving = [dict(e, name="decode_step[bs=4 bucket=4 graph]") if e["name"] == "decode_step[bs=4]" else e
               for e in graph_events(0) + graph_events(1000)]
    at = goto(upload(new_app(), [("eager.json", EAGER), ("graph.json.gz", GRAPH),
                                 ("serving.json", trace_bytes(serving))]), "plan")
    m = metrics(at)
    assert m["Graphs to capture"] == "1"
    # One batch size (4), measured both ways: the plan replays the graph (20 us) instead of eager.
    assert m["Expected step"] == "20 us"
    assert m["Speedup vs all eager"] == f"{UNPROF_US / GRAPH_US:.2f}x"
    assert [c.value for c in at.code][0] == "4"
    assert '{"cudagraph_capture_sizes": [4]}' in [c.value for c in at.code]
    assert len(at.get("download_button")) == 2


def test_plan_with_uploaded_distribution_and_a_bad_one() -> None:
    at = goto(upload(new_app(), [("eager.json", EAGER), ("graph.json.gz", GRAPH)]), "plan")
    at.radio(key="lg_plan_dsrc").set_value("a CSV / JSON histogram").run()
    at.file_uploader(key="lg_plan_dist_widget").set_value(("dist.csv", b"batch_size,count\n4,10\n", "text/csv"))
    at.run()
    assert not at.exception and metrics(at)["Graphs to capture"] == "1"
    at.file_uploader(key="lg_plan_dist_widget").set_value(("dist2.csv", b"batch_size,count\nfour,10\n", "text/csv"))
    at.run()
    assert not at.exception
    errs = [e.value for e in at.error]
    assert len(errs) == 1 and errs[0].startswith(md_escape("dist2.csv: line 2")), errs
    assert not at.metric  # no plan from a distribution that did not parse


# --- Sessions and the cache --------------------------------------------------------------------

def test_sessions_do_not_see_each_other() -> None:
    a = upload(new_app(), [("secret_a.json", EAGER)])
    b = new_app()  # a second browser session on the same server (same process, same cache)
    assert not b.dataframe  # nothing loaded there
    assert [i.value for i in b.info] == ["Nothing loaded yet: upload a trace or pick a bundled sample."]
    goto(b, "diagnosis")
    assert not b.metric
    assert list(a.dataframe[0].value["trace"]) == ["secret_a.json"]


def test_bounded_cache_evicts_by_entries_bytes_and_age() -> None:
    now = [0.0]
    c = BoundedCache(max_entries=2, max_bytes=100, ttl_s=10, clock=lambda: now[0])
    c.put("a", 1, nbytes=40)
    c.put("b", 2, nbytes=40)
    c.get("a")  # a is now the most recently used
    c.put("c", 3, nbytes=40)  # over 2 entries and 100 bytes: b goes
    assert c.get("b") is None and c.get("a") == 1 and c.get("c") == 3
    assert len(c) == 2 and c.nbytes == 80
    c.put("big", 4, nbytes=101)  # larger than the whole cache: returned, not kept
    assert c.get("big") is None and len(c) == 2
    now[0] = 10.5  # a and c were last used at 0: expired
    assert c.get("a") is None and len(c) == 0 and c.nbytes == 0
    assert c.get_or_compute("d", lambda: 5) == 5 and c.get("d") == 5


def test_samples_discovery_and_defaults(tmp_path) -> None:
    (tmp_path / "h200-1b").mkdir()
    (tmp_path / "other").mkdir()
    for rel in ("h200-1b/b.json.gz", "h200-1b/a.json.gz", "h200-1b/truth.json", "other/x.sqlite", "other/y.json.gz"):
        (tmp_path / rel).write_bytes(b"x")
    found = [p.relative_to(tmp_path).as_posix() for p in discover_samples(tmp_path)]
    assert found == ["h200-1b/a.json.gz", "h200-1b/b.json.gz", "other/x.sqlite", "other/y.json.gz"]
    assert [p.name for p in default_samples(tmp_path, discover_samples(tmp_path))] == ["a.json.gz", "b.json.gz"]
    assert discover_samples(tmp_path / "missing") == []
    # The named defaults win over the folder's first few once they are there.
    for rel in ("h200-1b/1b_bs1_eager.json.gz", "h200-1b/1b_bs8_graph.json.gz", "h200-1b/1b_bs64_eager.json.gz"):
        (tmp_path / rel).write_bytes(b"x")
    assert [p.name for p in default_samples(tmp_path, discover_samples(tmp_path))] == [
        "1b_bs64_eager.json.gz", "1b_bs8_graph.json.gz"]


def test_bundled_samples_load_by_default(monkeypatch, reference_traces) -> None:
    samples = reference_traces
    monkeypatch.setenv("LAUNCHGAP_SAMPLES_DIR", str(samples))
    st.cache_resource.clear()
    at = new_app()
    loaded = list(at.dataframe[0].value["trace"])
    expected = [p.relative_to(samples).as_posix() for p in default_samples(samples, discover_samples(samples))]
    assert expected == ["h200-1b/1b_bs64_eager.json.gz", "h200-1b/1b_bs8_eager.json.gz", "h200-1b/1b_bs8_graph.json.gz"]
    assert loaded == expected and not at.error


# --- launchgap app -----------------------------------------------------------------------------

@pytest.mark.parametrize("host, loopback", [("127.0.0.1", True), ("127.3.4.5", True), ("::1", True),
                                            ("[::1]", True), ("localhost", True), ("0.0.0.0", False),
                                            ("::", False), ("192.0.2.1", False)])
def test_is_loopback(host: str, loopback: bool) -> None:
    assert app_cmd.is_loopback(host) is loopback


def test_app_refuses_non_loopback_without_flag(capsys) -> None:
    assert cli_main(["app", "--host", "0.0.0.0", "--port", "8600"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0
    assert err.startswith("launchgap: error: refusing to bind to 0.0.0.0")
    assert "--allow-remote" in err and "no login" in err


def test_app_rejects_bad_port(capsys) -> None:
    assert cli_main(["app", "--port", "70000"]) == 2
    assert "--port must be between 1 and 65535" in capsys.readouterr().err


def test_streamlit_command_settings() -> None:
    args = app_cmd_args(["--port", "8601"])
    cmd = app_cmd.streamlit_command(args)
    flags = dict(zip(cmd[5::2], cmd[6::2]))
    # The st.App beside the page script (uploads streamed to a file: app.uploads) is what runs.
    assert cmd[1:5] == ["-m", "streamlit", "run", str(MAIN_SCRIPT.with_name("server.py"))]
    assert flags["--server.address"] == "127.0.0.1" and flags["--server.port"] == "8601"
    assert int(flags["--server.maxUploadSize"]) >= 1024
    assert flags["--browser.gatherUsageStats"] == "false"
    assert flags["--server.headless"] == "true"


def app_cmd_args(argv: list[str]):
    import argparse

    p = argparse.ArgumentParser()
    app_cmd.prepare_parser(p)
    return p.parse_args(argv)


def test_config_toml_matches_launcher() -> None:
    import tomllib

    cfg = tomllib.loads((MAIN_SCRIPT.parent / ".streamlit" / "config.toml").read_text())
    assert cfg["server"]["address"] == "127.0.0.1"
    assert cfg["server"]["maxUploadSize"] >= 1024
    assert cfg["browser"]["gatherUsageStats"] is False


# --- Step timeline table -----------------------------------------------------------------------

def test_step_events_exact() -> None:
    from launchgap.steps import StepOptions
    from launchgap.dashboard.charts import first_ops_end_us
    from launchgap.dashboard.timeline import step_events, step_index

    trace = _load(EAGER, "e.json")
    rep = analyze_trace(trace)
    events, lanes = step_events(trace, step_index(trace, StepOptions()), rep.steps[1])  # the step at t0 = 1000 us
    assert lanes == ["CPU step", "CPU thread 100", "GPU 0 stream 7", "GPU 0 idle"]
    rows = {(r.category, r.start_us, r.end_us) for r in events.itertuples()}
    # Times from the step's start (its CPU range begins at 1000 us, before the GPU window at 1020 us).
    assert rows == {("step range", 0.0, 100.0), ("launch call", 10.0, 15.0), ("launch call", 40.0, 45.0),
                    ("kernel", 20.0, 30.0), ("kernel", 50.0, 60.0),
                    ("idle: host", 30.0, 40.0), ("idle: launch", 40.0, 50.0)}  # gap [30, 50]: host 10, launch 10
    assert first_ops_end_us(events, 1) == 30.0 and first_ops_end_us(events, 2) is None


def test_parsed_trace_does_not_outlive_its_session_beyond_the_cache(monkeypatch) -> None:
    """With a cache too small to keep anything, a session's trace is freed when the session goes."""
    import gc
    import weakref

    monkeypatch.setenv("LAUNCHGAP_CACHE_BYTES", "1")
    st.cache_resource.clear()
    at = upload(new_app(), [("a.json", EAGER)])
    entry = next(iter(at.session_state["lg_traces"].values()))
    ref = weakref.ref(entry.trace)
    del entry
    del at
    gc.collect()
    assert ref() is None


def test_zero_length_kernel_does_not_break_the_page() -> None:
    """A 0 us kernel gives an infinite launch-to-kernel ratio in the top-kernels table: shown blank, JSON stays valid."""
    events = [ann("decode_step[bs=1]", 0, 100), launch(10, 5, 1), kernel(20, 0, 1, name="zero"),
              launch(30, 5, 2), kernel(40, 10, 2, name="k")]
    at = goto(upload(new_app(), [("zero.json", trace_bytes(events))]), "diagnosis")
    top = at.dataframe[0].value.set_index("name")
    assert np.isnan(top.loc["zero", "launch_to_kernel_ratio"]) and top.loc["k", "launch_to_kernel_ratio"] == 0.5
    assert len(at.get("download_button")) == 1


def test_plan_page_says_the_no_costs_reason_without_command_line_flags() -> None:
    from launchgap.planning.inputs import TraceSteps, no_costs_reason
    cap = TraceSteps("cap.json", "capture", 1.0, np.zeros(0, dtype=np.int64), np.zeros(0), np.zeros(0), ())
    pre = TraceSteps("pre.json", "eager", 1.0, np.array([1]), np.array([9.0]), np.array([9.0]), ("prefill",))
    words = page_words(no_costs_reason([cap, pre]))
    assert words == ("no decode steps with a known batch size in the traces: cannot tell what a step costs at which "
                     "batch size (cap.json: graph captures, no replayed step (load it beside the run's trace: the "
                     "Diagnosis page pairs it); pre.json: 1 prefill step, no decode step). Profile a few decode steps, "
                     "annotate steps with bs=N, set the batch-size regex (Traces page, Analysis options), or choose "
                     "harness timings")
    assert "--" not in words


def test_band_percent() -> None:
    assert band_percent(5745.451, 6050.201, 5869.291) == "-2.1/+3.1%"
    assert band_percent(100.0, 100.0, 100.0) == "+0.0/+0.0%"
    assert band_percent(1.0, 2.0, 0.0) == "none"
    assert band_percent(87.9, 111.5, 100.0) == "-12/+12%"  # whole percents from 10% on: the metric box holds them
    assert band_percent(90.06, 109.94, 100.0) == "-9.9/+9.9%"


def test_plan_extrapolation_band_fits_its_metric() -> None:
    # costs at bs 1..128 from the traces' curves (the eager trace's eager curve carries its bs-4 steps to every size);
    # a histogram reaching 300 needs the extrapolation above 128: its band as shares of the expected step
    at = goto(upload(new_app(), [("eager.json", EAGER), ("graph.json.gz", GRAPH)]), "plan")
    at.radio(key="lg_plan_dsrc").set_value("a CSV / JSON histogram").run()
    at.file_uploader(key="lg_plan_dist_widget").set_value(("d.csv", b"batch_size,count\n4,10\n300,10\n", "text/csv"))
    at.run()
    assert not at.exception
    m = metrics(at)
    assert m["Extrapolation band"] == "-1.3/+2.5%" and m["Graphs to capture"] == "2"
    # within the curves' sizes nothing is extrapolated: the metric is the cost model's band instead
    at.file_uploader(key="lg_plan_dist_widget").set_value(("e.csv", b"batch_size,count\n4,10\n16,10\n", "text/csv"))
    at.run()
    assert "Extrapolation band" not in metrics(at) and "Cost-model band" in metrics(at)


def test_plan_page_plans_a_tensor_parallel_jobs_ranks_together() -> None:
    """Two ranks of one TP2 server (the same serving trace with distributedInfo rank 0 and 1): the Capture plan page
    shows one workload (no picker, no 'different workloads' warning), the plan of both, and says the ranks were
    planned together."""
    serving = [dict(e, name="decode_step[bs=4 bucket=4 graph]") if e["name"] == "decode_step[bs=4]" else e
               for e in graph_events(0) + graph_events(1000)]
    ranks = [(f"{kind}_rank{r}.json", trace_bytes(events, distributedInfo={"rank": r, "world_size": 2}))
             for r in (0, 1) for kind, events in (("serving", serving), ("eager", eager_events(0) + eager_events(1000)))]
    at = goto(upload(new_app(), ranks), "plan")
    assert not at.warning or all("different workloads" not in w.value for w in at.warning)
    assert not [s for s in at.selectbox if s.label == "Workload"]
    assert metrics(at)["Graphs to capture"] == "1"
    notes = [m.value for m in at.markdown if "planned together" in m.value]
    assert notes and "ranks 0, 1 of 2 planned together" in notes[0]


def test_plan_page_plans_past_the_estimated_floor() -> None:
    """A long-context FULL-graph trace alone (mistral-7b-like, 2,048 positions, bs 8) with a histogram of 1..32: the
    eager estimate (its kernels x the 7.95 us prior) falls under the graph step from bs 5 up, where a GPU-bound eager
    step still runs 1 us a kernel past it (costmodel.EAGER_GAP_OVER_NODE_US): every size is captured (the harness
    measured eager 33.5 ms against graph 18.6 ms at bs 8), where 8, 16 and 32 once stayed eager on a tie."""
    from pathlib import Path

    trace = (Path(__file__).resolve().parents[2] / "traces" / "h200-longctx-2026-12-04b" / "mistral-7b-like-2048"
             / "mistral-7b-like_bs8_graph.json.gz")
    at = goto(upload(new_app(), [("mistral_2048_bs8_graph.json.gz", trace.read_bytes())]), "plan")
    at.radio(key="lg_plan_dsrc").set_value("a CSV / JSON histogram").run()
    at.file_uploader(key="lg_plan_dist_widget").set_value(
        ("dist.csv", b"batch_size,count\n1,30\n2,20\n4,20\n8,15\n16,10\n32,5\n", "text/csv"))
    at.run()
    assert not at.exception and metrics(at)["Graphs to capture"] == "6"
    assert [c.value for c in at.code][0] == "1, 2, 4, 8, 16, 32"
    assert not [w.value for w in at.warning if "estimated tie" in w.value]
    # the eager costs are that prior and the floor: the speedup a lower bound
    assert metrics(at)["Speedup vs all eager"] == "≥ 1.20x"  # launchgap plan --costs TRACE --distribution: 1.20x


def test_plan_page_warns_of_sizes_left_eager_on_an_estimated_tie() -> None:
    """Sizes a plan leaves eager only on a tie (bs 4 and 8: eager cost = graph cost, an estimate at its floor) are
    named in a warning beside the list to capture, as the text's headline does."""
    from streamlit.testing.v1 import AppTest

    def page() -> None:
        from launchgap.dashboard.ui import show_buckets_and_charts
        from launchgap.planning.costs import CostPoint, CostTable
        from launchgap.planning.planner import plan_capture

        part = CostTable((CostPoint(1, 100.0, 20.0, "measured", None), CostPoint(4, 100.0, 100.0, "predicted", None),
                          CostPoint(8, 120.0, 120.0, "predicted", None)), "t")
        show_buckets_and_charts(plan_capture(part, {1: 5, 4: 3, 8: 2}), "t")

    at = AppTest.from_function(page).run()
    assert not at.exception, [e.value for e in at.exception]
    assert [c.value for c in at.code] == ["1"]
    assert [w.value for w in at.warning] == [md_escape(
        "bs [4, 8] stay eager on an estimated tie (eager cost at its floor): measure eager steps before leaving them "
        "uncaptured.")]


def test_plan_page_takes_the_servers_log_beside_its_trace() -> None:
    """A real vLLM 0.24 trace and its log uploaded together: the Capture plan page plans from the trace (costs and
    its 61 decode steps) with the log's capture list, graph memory and request cap, as `launchgap plan TRACE
    --server-log LOG` does, and says which file gave what."""
    from pathlib import Path

    folder = Path(__file__).resolve().parents[2] / "traces" / "h200-vllm-2026-12-04" / "full-nostack"
    at = goto(upload(new_app(), [("vllm_shrinking.pt.trace.json.gz",
                                  (folder / "shrinking.pt.trace.json.gz").read_bytes()),
                                 ("vllm.log", (folder / "vllm.log").read_bytes())]), "plan")
    assert not at.exception
    captions = [c.value for c in at.caption]
    assert md_escape("Server log vllm.log: the capture list, the server's own graph memory and capture time, and its "
                     "cap on running requests, where it states them.") in captions
    assert any(md_escape("capture sizes from vLLM log vllm.log") in c and md_escape("capture cost from vLLM log "
               "vllm.log") in c for c in captions)  # the page's Sources line
    assert metrics(at)["Crossover batch size"] == "none"
    assert metrics(at)["Graph memory"] == "366 MiB"  # the server's own 205 MiB for its 19 sizes, per size x 34


def test_diagnosis_page_keeps_an_already_graphed_vllm_trace_at_1x() -> None:
    """vLLM 0.24's FULL-graph decode steps beside its eager prefill and mixed steps: the page's tile says 1.00x, as
    the CLI does (it recomputed the headline from the estimate and read 1.22x)."""
    from pathlib import Path

    trace = (Path(__file__).resolve().parents[2] / "traces" / "h200-vllm-2026-12-04" / "full-nostack"
             / "shrinking.pt.trace.json.gz")
    at = goto(upload(new_app(), [("vllm_shrinking.pt.trace.json.gz", trace.read_bytes())]), "diagnosis")
    assert not at.exception
    assert metrics(at)["Predicted CUDA-graph speedup"] == "1.00x" and metrics(at)["Steps"] == "61 of 64"
