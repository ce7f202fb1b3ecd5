"""Diagnosis page on serving-engine traces: engine steps table, and capture traces named as such."""
from __future__ import annotations

import pytest

pytest.importorskip("streamlit")

from launchgap.dashboard.text import md_escape  # noqa: E402
from tests.conftest import TRACES  # noqa: E402
from tests.unit.apptest_helpers import goto, new_app, upload  # noqa: E402

PIECEWISE = TRACES / "engines" / "tracelens-vllm-prefilldecode-piecewise-mi300x" / "graph_execution.json.gz"
CAPTURE = TRACES / "engines" / "tracelens-vllm-decode-fullgraph-mi300x"


def test_engine_steps_table_shows_phase_requests_tokens_coverage() -> None:
    at = goto(upload(new_app(), [("vllm_piecewise.json.gz", PIECEWISE.read_bytes())]), "diagnosis")
    assert [h.value for h in at.subheader if h.value.startswith("Engine steps")] == ["Engine steps (vLLM)"]
    tables = [d.value for d in at.dataframe if "coverage" in d.value.columns]
    assert len(tables) == 1
    row = tables[0].iloc[0].to_dict()
    assert (row["phase"], row["requests"], row["tokens"], row["coverage"], row["graph launches"]) == \
        ("mixed", "46", "8192", "piecewise", 25)
    # where each step's batch came from, in the table and in one line
    assert row["batch from"] == "marker"
    # one step: no serving section, but the capture list it was judged against (here an assumption)
    assert md_escape("Capture sizes (assumed, the trace does not state it: vLLM V1 default, maximum 512): 1, 2, 4, 8, "
                     "16, 24, 32, 40, ") in " ".join(c.value for c in at.caption)
    line = md_escape(" Batch per step from the step's marker or an annotation in it (1 of 1).")
    assert any(c.value.endswith(line) for c in at.caption), [c.value for c in at.caption]


def test_capture_trace_is_labelled_not_diagnosed() -> None:
    cap = next(CAPTURE.glob("capture_traces__*.json.gz"))
    at = goto(upload(new_app(), [("capture.json.gz", cap.read_bytes())]), "diagnosis")
    infos = [i.value.replace("\\", "") for i in at.info]  # shown Markdown-escaped
    assert any(v.startswith("CUDA-graph capture trace (vLLM): 1 graph(s) captured for sizes 32") for v in infos), infos
    assert not [d for d in at.dataframe if "coverage" in d.value.columns]


SERVING = TRACES / "h200-session-2026-12-01" / "serving" / "1b_serving_serve.json.gz"


def test_graph_mode_serving_section() -> None:
    at = goto(upload(new_app(), [("serving.json.gz", SERVING.read_bytes())]), "diagnosis")
    assert "Graph-mode serving" in [h.value for h in at.subheader]
    # the harness's own annotations, no engine: the table is the trace's steps, not an engine's
    assert "Steps" in [h.value for h in at.subheader] and not [h for h in at.subheader if "Engine" in h.value]
    assert any(c.value.startswith(md_escape("Graph coverage per step: 41 full, 7 eager. Phase, requests and tokens "
                                            "come from the step annotations")) for c in at.caption)
    metrics = {m.label: m.value for m in at.metric}
    assert metrics["Eager fallbacks"] == "4 of 48"
    assert metrics["Padded rows"] == "14.7%"
    # per step in the label, the unit in the value (a value with "/step" did not fit its tile at 1,400 px)
    assert metrics["Fallback time lost per step"].endswith(" us") and "/" not in metrics["Fallback time lost per step"]
    assert metrics["Padding cost per step (estimate)"].endswith(" us")
    fb = next(d.value for d in at.dataframe if "time lost (us)" in d.value.columns)
    assert fb["step"].tolist() == [3, 5, 10, 25]
    # the two costs the lost time is made of, as the text report and the plan give them (the eager curve at the
    # batch, the graph curve at the bucket), not the profiled step's window
    assert fb["eager step (us)"].tolist() == [10528.385] * 4
    assert (fb["eager step (us)"] - fb["graph at bucket (us)"]).round(3).tolist() == fb["time lost (us)"].tolist() == [
        7936.636, 7902.835, 7751.174, 7902.835]
    assert metrics["Fallback time lost per step"] == "656 us"
    captions = [c.value.replace("\\", "") for c in at.caption]
    # a trace that already replays graphs: the prediction is its step as one FULL graph, not "with CUDA graphs"
    assert any(c.startswith("As one FULL graph: 2.62 ms per token") for c in captions), captions
    assert any(c.startswith("Time lost = eager step - graph at bucket: estimated: each fallback's eager step is the "
                            "eager curve at its batch (estimated: 739 kernels per step x 14.2 us per launch") for c in
               captions), captions
    pad = next(d.value for d in at.dataframe if "padded_rows" in d.value.columns)
    assert pad["bucket"].tolist() == [8, 16, 24, 32, 40, 48, 56, 64]
    assert int(pad["padded_rows"].sum()) == 189
    assert any("async scheduling" in c.value for c in at.caption)

PIECEWISE_CAPTURE = next(PIECEWISE.parent.glob("capture_traces__*.json.gz"))


def test_execution_and_capture_uploads_pair_automatically() -> None:
    """Upload a vLLM execution trace and its capture trace: the capture is picked for the execution trace
    and names the kernels inside the 25 piecewise replays."""
    at = goto(upload(new_app(), [("vllm_piecewise.json.gz", PIECEWISE.read_bytes()),
                                 ("vllm_piecewise_capture.json.gz", PIECEWISE_CAPTURE.read_bytes())]), "diagnosis")
    [trace] = [s for s in at.selectbox if s.label == "Trace"]
    trace.select_index(trace.options.index("vllm_piecewise.json.gz")).run()
    [pick] = [s for s in at.selectbox if s.label == "Capture trace of this engine run"]
    assert pick.value != "none" and "vllm_piecewise_capture" in pick.value
    assert "Inside the graph replays" in [h.value for h in at.subheader]
    captions = [c.value.replace("\\", "") for c in at.caption]
    assert any("25 of 25 replays matched a captured graph (kernel names); 361 of 361 replay kernels named, "
               "100.0% of 149,920 us" in c for c in captions), captions
    kernels = [d.value for d in at.dataframe if "op" in d.value.columns]
    assert len(kernels) == 1
    top = kernels[0].iloc[0].to_dict()
    assert (top["op"], top["count"], top["kernel_us"]) == ("vllm::moe_forward", 24, 83288.347)
    graphs = [d.value for d in at.dataframe if "nodes" in d.value.columns]
    assert len(graphs) == 1 and graphs[0]["replays"].tolist() == [1] * 25
    # "none" turns the pairing off
    pick.set_value("none").run()
    assert "Inside the graph replays" not in [h.value for h in at.subheader]


def test_timeline_names_replayed_kernels_by_op() -> None:
    import numpy as np

    from launchgap.graph_mode import pair_capture
    from launchgap.loaders import load_trace
    from launchgap.report import analyze_trace
    from launchgap.steps import StepOptions
    from launchgap.dashboard.timeline import step_events, step_index

    ex, cap = load_trace(PIECEWISE), load_trace(PIECEWISE_CAPTURE)
    index = step_index(ex, StepOptions())
    p = pair_capture(ex, cap, index.row_step)
    [step] = analyze_trace(ex).steps
    plain, _ = step_events(ex, index, step)
    named, _ = step_events(ex, index, step, labels=(p.rows, p.op))
    kern = named["category"] == "kernel"
    changed = (plain["name"] != named["name"]).to_numpy()
    assert int(changed.sum()) == 361 and bool(np.all(kern.to_numpy()[changed]))
    assert int(named["name"].str.startswith("vllm::moe_forward: _matmul_ogs_").sum()) == 48


def test_a_step_without_batch_says_why(tmp_path) -> None:
    """The PIECEWISE trace with its step annotation taken out: no sampler, attention of every phase; the 8,192 tokens
    are no batch, and the table and the caption say why."""
    from tests.unit.test_batch_from_kernels import _without_markers

    bare = _without_markers(PIECEWISE, tmp_path / "bare.json")
    at = goto(upload(new_app(), [("vllm_bare.json", bare.read_bytes())]), "diagnosis")
    row = next(d.value for d in at.dataframe if "coverage" in d.value.columns).iloc[0].to_dict()
    why = ("no sampler kernel and no attention kernel that runs in one phase only: the grid of "
           "vllm::reshape_and_cache_flash_kernel counts its 8,192 tokens, not its requests")
    assert (row["phase"], row["batch"], row["tokens"], row["batch from"]) == ("—", "—", "8192", why)
    line = md_escape(f" Batch per step from unknown (1 of 1; {why}).")
    assert any(c.value.endswith(line) for c in at.caption), [c.value for c in at.caption]


def test_an_eager_engine_traces_tpot_says_its_whole_step() -> None:
    # vLLM 0.24 eager, no Python stacks (an interleaved block): the time per output token is the engine's whole step,
    # the host work between steps included, and the headline speedup is its ratio (rule "whole step"): the two tiles
    # beside it are those whole steps, 16,483 / 2,878 = 5.73x, and the caption does not say a second ratio
    path = TRACES / "h200-vllm-2026-12-04" / "interleaved" / "eager-nostack" / "block1.pt.trace.json.gz"
    at = goto(upload(new_app(), [("eager.pt.trace.json.gz", path.read_bytes())]), "diagnosis")
    metrics = {m.label: m.value for m in at.metric}
    assert (metrics["Predicted CUDA-graph speedup"], metrics["Time per output token"]) == ("5.73x", "16.48 ms")
    assert (metrics["Engine step, unprofiled estimate"], metrics["Predicted engine step, graphs"]) == \
        ("16,483 us", "2,878 us")
    captions = [c.value.replace("\\", "") for c in at.caption]
    assert "With CUDA graphs: 2.88 ms per token, 5,560 tokens/s." in captions, captions
    # a measured step (the server's inter-token latency) is the whole step: its ratio to the same graph step
    at.number_input[0].set_value(17_064.0).run()
    metrics = {m.label: m.value for m in at.metric}
    assert (metrics["Predicted CUDA-graph speedup"], metrics["Step, measured"],
            metrics["Predicted engine step, graphs"]) == (f"{17_064 / 2_877.939:.2f}x", "17,064 us", "2,878 us")


def test_the_servers_inter_token_latency_beside_the_traces_tpot() -> None:
    # a vLLM /metrics scrape uploaded with the vLLM trace: the Server page says the server's own inter-token latency,
    # and the trace's Diagnosis page says it beside its TPOT (2,000 tokens in 36 s between the scrapes: 18 ms)
    def scrape(stamp: str, run: int, b1: int, b3: int, s: float) -> str:
        lab = 'engine="0",model_name="m"'
        return (f"{stamp}\n# TYPE vllm:num_requests_running gauge\nvllm:num_requests_running{{{lab}}} {run}\n"
                f"# TYPE vllm:inter_token_latency_seconds histogram\n"
                f'vllm:inter_token_latency_seconds_bucket{{{lab},le="0.025"}} {b1}\n'
                f'vllm:inter_token_latency_seconds_bucket{{{lab},le="+Inf"}} {b3}\n'
                f"vllm:inter_token_latency_seconds_sum{{{lab}}} {s}\nvllm:inter_token_latency_seconds_count{{{lab}}} {b3}\n")
    prom = (scrape("2026-11-03 08:00:00", 16, 900, 1000, 17.0) + scrape("2026-11-03 08:01:00", 16, 2900, 3000, 53.0))
    path = TRACES / "h200-vllm-2026-12-04" / "interleaved" / "eager-nostack" / "block1.pt.trace.json.gz"
    at = upload(new_app(), [("eager.pt.trace.json.gz", path.read_bytes()), ("vllm.prom", prom.encode())])
    said = ("18.0 ms mean over 2,000 tokens between the first and the last scrape (vllm:inter_token_latency_seconds; "
            "the median token in its 0-25 ms bucket), at a median 16 running requests")
    at = goto(at, "diagnosis")
    captions = [c.value.replace("\\", "") for c in at.caption]
    assert any(c.startswith(f"The server's /metrics (vllm.prom): inter-token latency {said}") and
               "; at batch 16, 18.0 ms mean over 2,000 tokens in 1 interval between scrapes that read 16 running "
               "requests. This trace's TPOT is 16.48 ms at batch 16: give that mean as the measured step "
               "(--observed-step-us, or the Diagnosis page's field)." in c for c in captions), captions
    # one click gives the scrape's mean as the measured step: the whole step, 18,000 / 2,878 us
    next(b for b in at.button if b.label == "Use 18,000 us as the measured step").click().run()
    assert not at.exception, [e.value for e in at.exception]
    m = {x.label: x.value for x in at.metric}
    assert (m["Step, measured"], m["Predicted CUDA-graph speedup"]) == ("18,000 us", f"{18_000 / 2_877.939:.2f}x")
    assert at.number_input[0].value == 18_000.0 and not at.warning  # no warning about the field's state either
    # the caption still gives the trace's own TPOT beside the server's, not the one the measured step set
    assert any("This trace's TPOT is 16.48 ms at batch 16" in c.value.replace("\\", "") for c in at.caption)
    at = goto(at, "server")
    assert any(c.value.replace("\\", "").startswith(f"Inter-token latency: {said}") for c in at.caption)


def test_compare_gives_the_engines_whole_steps_beside_the_speedup() -> None:
    # an eager vLLM block against the FULL-graph block of the same requests: the rows behind each speedup, the whole
    # steps, and the FULL trace's 1.00x on its own whole step before and after
    from launchgap.loaders import load_trace
    from launchgap.report import analyze_trace
    base = TRACES / "h200-vllm-2026-12-04" / "interleaved"
    eager, full = base / "eager-nostack" / "block1.pt.trace.json.gz", base / "full-stack-v2runner" / "block1.pt.trace.json.gz"
    at = goto(upload(new_app(), [("eager.pt.trace.json.gz", eager.read_bytes()),
                                 ("full.pt.trace.json.gz", full.read_bytes())]), "compare")
    for box, name in (("lg_cmp_a_widget", "eager.pt.trace.json.gz"), ("lg_cmp_b_widget", "full.pt.trace.json.gz")):
        sb = at.selectbox(key=box)
        sb.select_index(list(sb.options).index(name)).run()
    assert not at.exception, [e.value for e in at.exception]
    side = next(d.value for d in at.dataframe if "metric" in d.value.columns).set_index("metric")
    want = {k: analyze_trace(load_trace(p)).summary for k, p in (("A", eager), ("B", full))}
    for col, s in want.items():
        assert side.loc["engine's whole step (us)", col] == pytest.approx(s.whole_step_us_before)
        assert side.loc["engine's whole step with graphs (us)", col] == pytest.approx(s.whole_step_us_after)
        assert side.loc["predicted CUDA-graph speedup", col] == pytest.approx(s.predicted_speedup)
    assert side.loc["engine's whole step (us)", "A"] / side.loc["engine's whole step with graphs (us)", "A"] == \
        pytest.approx(side.loc["predicted CUDA-graph speedup", "A"], abs=2e-3)
    assert side.loc["predicted CUDA-graph speedup", "B"] == 1.0
    assert side.loc["engine's whole step (us)", "B"] == side.loc["engine's whole step with graphs (us)", "B"]


def test_traces_table_names_the_phase_of_an_engine_trace_of_one_phase() -> None:
    """The Traces page's table: an engine trace whose steps are one (phase, coverage) group says it on its row, one
    with several gets a row per group; a trace without an engine says nothing of phase."""
    at = upload(new_app(), [("vllm_piecewise.json.gz", PIECEWISE.read_bytes()), ("serving.json.gz", SERVING.read_bytes())])
    table = next(d.value for d in at.dataframe if "phase" in d.value.columns)
    rows = {r["trace"]: r["phase"] for r in table.to_dict("records") if r["trace"] in ("vllm_piecewise.json.gz",
                                                                                      "serving.json.gz")}
    assert rows == {"vllm_piecewise.json.gz": "mixed (piecewise)", "serving.json.gz": "—"}
