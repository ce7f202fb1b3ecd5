"""Dashboard pages for tensor-parallel jobs (Ranks) and fleet results (Fleet), through AppTest.

The Ranks tests use the two bundled rank traces (traces/h200x2-tp2-1b, copied from the
project's reference set); the Fleet tests build a real results file with
:func:`launchgap.fleet.summarize_trace` over the bundled h200-1b traces (no Dask needed).
Expected numbers come from the analyzer itself on the same files: the page must show
exactly what ``launchgap analyze`` computes.
"""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

pytest.importorskip("streamlit")
pytest.importorskip("plotly")

import streamlit as st  # noqa: E402
from streamlit.testing.v1 import AppTest  # noqa: E402

from launchgap.dashboard.text import md_escape  # noqa: E402
from tests.unit.apptest_helpers import TIMEOUT_S, goto, metrics, new_app, upload  # noqa: E402,F401

from launchgap.fleet import load_fleet_results, results_header, summarize_trace  # noqa: E402
from launchgap.loaders import DEFAULT_MAX_TRACE_BYTES, load_trace  # noqa: E402
from launchgap.ranks import analyze_job, analyze_with_collectives  # noqa: E402
from launchgap.report import AnalysisOptions  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
TP_DIR = ROOT / "traces" / "h200x2-tp2-1b"
RANK_FILES = ("tp1b_bs1_eager_rank0.json.gz", "tp1b_bs1_eager_rank1.json.gz")
FLEET_DIR = ROOT / "traces"
#: one workload: a serving trace (the distribution) and two launchgap record sweeps (costs only)
FLEET_FILES = ("h200-session-2026-12-01/serving/1b_serving_serve.json.gz", "h200/1b_bs1_eager.json.gz",
               "h200/1b_bs64_eager.json.gz")


@pytest.fixture(autouse=True)
def fresh_server():
    st.cache_resource.clear()
    yield
    st.cache_resource.clear()


def _samples(tmp_path: Path, monkeypatch, names: tuple[str, ...]) -> Path:
    """A samples folder holding only the given rank files (all of them load when a session starts)."""
    root = tmp_path / "samples"
    (root / TP_DIR.name).mkdir(parents=True)
    for n in names:
        shutil.copy(TP_DIR / n, root / TP_DIR.name / n)
    monkeypatch.setenv("LAUNCHGAP_SAMPLES_DIR", str(root))
    return root


def _empty_samples(tmp_path: Path, monkeypatch) -> None:
    root = tmp_path / "no-samples"
    root.mkdir()
    monkeypatch.setenv("LAUNCHGAP_SAMPLES_DIR", str(root))





def _page_text(at: AppTest) -> str:
    """Everything the page writes that a user reads: text, captions, markdown, tables, select options."""
    parts = [e.value for kind in ("caption", "markdown", "text", "info", "warning") for e in getattr(at, kind)]
    parts += [df.value.to_csv() for df in at.dataframe]
    parts += [o for sb in at.selectbox for o in sb.options]
    return "\n".join(str(p) for p in parts)


# --- Ranks ---------------------------------------------------------------------------------------

def test_ranks_page_shows_the_group_prediction_and_both_ranks(tmp_path, monkeypatch) -> None:
    _samples(tmp_path, monkeypatch, RANK_FILES)
    at = goto(new_app(), "ranks")
    job = analyze_job([load_trace(TP_DIR / n) for n in RANK_FILES], AnalysisOptions())
    m = metrics(at)
    assert m["Group CUDA-graph step"] == f"{job.summary.predicted_graph_step_us_median:,.1f} us"
    assert m["Wait estimate"] == "aligned" == job.summary.wait_estimate
    assert m["Slowest rank"] == str(job.summary.slowest_rank)
    assert any(t.value == job.summary.slowest_rank_reason for t in at.text)
    ranks = at.dataframe[0].value
    assert list(ranks["rank"]) == [0, 1]
    assert list(ranks["trace"]) == [f"{TP_DIR.name}/{n}" for n in RANK_FILES]  # the names loaded, not hashes
    assert ranks["peer idle"].tolist() == [r.peer_idle_fraction for r in job.ranks]
    assert ranks["predicted graph, with peers (us)"].tolist() == [r.predicted_graph_step_us for r in job.ranks]
    steps = at.dataframe[1].value
    assert steps["group prediction (us)"].tolist() == [g.predicted_graph_us for g in job.steps]
    assert len(steps) == job.summary.steps == 4
    spec = json.loads(at.get("plotly_chart")[0].proto.spec)
    assert [t["name"] for t in spec["data"]] == ["GPU busy", "idle: own host", "waiting for peers", "other idle"]
    # the job's workload by its label, the ranks' common part; never a wl- id
    assert "Workload: ~1.1B-class · H200 · TP2 · 568 kernels/step (471 besides GEMM/attention)" in [
        c.value.replace("\\", "") for c in at.caption]
    assert "wl-" not in _page_text(at)
    assert not at.error


def test_ranks_page_without_a_job_says_how_to_get_one(tmp_path, monkeypatch) -> None:
    _samples(tmp_path, monkeypatch, RANK_FILES[1:])  # one rank alone is no job
    at = goto(new_app(), "ranks")
    assert any("Upload all ranks' trace files of one job" in i.value for i in at.info)
    assert not at.metric and not at.error


def test_lone_rank_diagnosis_reports_peer_wait_not_gpu_bound(tmp_path, monkeypatch) -> None:
    _samples(tmp_path, monkeypatch, RANK_FILES[1:])
    at = goto(new_app(), "diagnosis")
    rep = analyze_with_collectives(load_trace(TP_DIR / RANK_FILES[1]), AnalysisOptions())
    peer = rep.summary.idle_fraction_by_cause["peer"]
    assert peer > 0.5  # rank 1's NCCL kernels spin waiting for rank 0's host
    verdict = next(m.value for m in at.markdown if m.value.startswith("**Verdict"))
    assert "GPU\\-bound" not in verdict and "GPU-bound" not in verdict
    assert rep.summary.verdict == "waiting for peers" and "waiting for peers" in verdict
    assert metrics(at)["GPU idle"] == f"{rep.summary.gpu_idle_fraction:.1%}"
    bars = json.loads(at.get("plotly_chart")[1].proto.spec)  # idle by cause per step
    peer_bars = [t for t in bars["data"] if t["name"] == "idle: waiting for peers"]
    assert len(peer_bars) == 1 and min(peer_bars[0]["y"]) > 0


# --- Fleet ---------------------------------------------------------------------------------------

@pytest.fixture
def fleet_file(tmp_path) -> Path:
    """A real results file: header + one summary per trace of FLEET_FILES (as ``launchgap fleet --out``)."""
    traces = [FLEET_DIR / n for n in FLEET_FILES]
    out = tmp_path / "f.jsonl"
    with open(out, "w") as fh:
        fh.write(json.dumps(results_header(AnalysisOptions(), DEFAULT_MAX_TRACE_BYTES)) + "\n")
        for p in traces:
            fh.write(json.dumps(summarize_trace(p)) + "\n")
    return out


def _upload_fleet(at: AppTest, name: str, data: bytes) -> AppTest:
    at.file_uploader(key="lg_fleet_widget").set_value((name, data, "application/octet-stream"))
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def test_fleet_page_shows_distributions_and_plan(tmp_path, monkeypatch, fleet_file) -> None:
    _empty_samples(tmp_path, monkeypatch)
    at = goto(new_app(), "fleet")
    assert any("launchgap fleet" in i.value for i in at.info)  # nothing uploaded yet: how to get a file
    at = _upload_fleet(at, "fleet.jsonl", fleet_file.read_bytes())
    want = load_fleet_results(fleet_file)
    assert not at.error
    m = metrics(at)
    assert m["Traces"] == str(want.traces) == "3" and m["Failed"] == "0"
    assert m["Expected step"] == f"{want.plan.expected_step_us:,.0f} us"
    # costs from the traces' cost curves: the model's band on the plan, said as on the Capture plan page
    assert want.plan.cost_band is not None
    band = want.plan.cost_band
    assert (f"Cost band: expected step {band['expected_step_us_low']:,.1f} to {band['expected_step_us_high']:,.1f} us"
            in "\n".join(c.value.replace("\\", "") for c in at.caption))
    dist = at.dataframe[0].value
    assert list(dist["p50"]) == [d.p50 for d in want.distributions.values()]
    assert list(dist["max"]) == [d.max for d in want.distributions.values()]
    assert "predicted CUDA-graph speedup" in list(dist["metric"])
    assert at.code[0].value == ", ".join(str(b) for b in want.plan.buckets)
    baselines = at.dataframe[3].value
    # the serving trace's own capture list (its markers) is scored beside the engines' defaults
    assert list(baselines["setup"]) == ["vLLM", "SGLang", "TensorRT-LLM", "current list", "all eager"]
    assert baselines["expected step (us)"].iloc[-1] == want.plan.all_eager_expected_step_us
    names = [json.loads(c.proto.spec)["layout"]["title"]["text"] for c in at.get("plotly_chart")]
    assert names[:2] == ["Fleet idle by cause", "Batch sizes over the fleet"]
    assert str(tmp_path) not in json.dumps([w.value for w in at.warning])  # no temp path leaks
    # outliers name each trace's workload by its label; a rank the trace does not say is a dash, never None
    slowest = at.dataframe[1].value
    assert set(slowest["workload"]) == {want.workloads[0].workload.label}
    assert set(slowest["rank"]) == {"—"}
    # each trace below the fleet's common folder (said once above the tables), the figures before the names
    assert set(slowest["path"]) <= set(FLEET_FILES) and f"Traces under {FLEET_DIR}" in [
        c.value.replace("\\", "") for c in at.caption]
    assert list(slowest.columns[:3]) == ["path", "mode", "main_batch_size"]
    assert "wl-" not in _page_text(at) and "None" not in slowest.to_csv()
    # which input gave what, as the command prints it under the plan
    (inputs,) = [e for e in at.expander if e.label == "Inputs: which input gave what"]
    assert want.plan_inputs and inputs.markdown[0].value == "\n".join(f"- {md_escape(n)}" for n in want.plan_inputs)


def test_fleet_of_two_workloads_names_them_by_label(tmp_path, monkeypatch) -> None:
    _empty_samples(tmp_path, monkeypatch)
    out = tmp_path / "two.jsonl"
    with open(out, "w") as fh:
        fh.write(json.dumps(results_header(AnalysisOptions(), DEFAULT_MAX_TRACE_BYTES)) + "\n")
        for p in (FLEET_DIR / FLEET_FILES[0], TP_DIR / RANK_FILES[0]):
            fh.write(json.dumps(summarize_trace(p)) + "\n")
    at = _upload_fleet(goto(new_app(), "fleet"), "two.jsonl", out.read_bytes())
    want = load_fleet_results(out)
    labels = [w.workload.label for w in want.workloads]
    assert at.selectbox(key="lg_fleet_workload").options == [f"{lab} — 1 trace(s)" for lab in labels]
    assert "wl-" not in _page_text(at)


def test_fleet_page_bad_file_shows_one_line_error(tmp_path, monkeypatch) -> None:
    _empty_samples(tmp_path, monkeypatch)
    at = _upload_fleet(goto(new_app(), "fleet"), "bad.jsonl", b'{"schema": "nope"}\n{"x": 1}\n')
    assert len(at.error) == 1
    msg = at.error[0].value
    assert "\n" not in msg and "bad\\.jsonl" in msg and "not a launchgap fleet results file" in msg
    assert "launchgap-aux" not in msg and not at.metric


def test_ranks_page_groups_uploads_by_name_and_shows_a_bad_job_in_one_line(tmp_path, monkeypatch) -> None:
    """Two uploads named ``job_rank0/1.json`` form a job; if both say distributedInfo rank 0, the
    analyzer refuses the job (rank 0 twice) and the page shows that one line, no traceback."""
    from tests.unit.kineto_tiny import ann, doc, kernel, launch

    _empty_samples(tmp_path, monkeypatch)
    events = [ann("decode_step[bs=4]", 0, 100), launch(10, 5, 1), kernel(20, 10, 1, name="k1")]
    data = json.dumps(doc(events, distributedInfo={"rank": 0, "world_size": 2})).encode()
    at = new_app()
    at.file_uploader(key="lg_uploader").set_value([("job_rank0.json", data, "application/json"),
                                                   ("job_rank1.json", data, "application/json")])
    at.run()
    at = goto(at, "ranks")
    assert len(at.error) == 1
    msg = at.error[0].value
    assert "\n" not in msg and "rank 0 appears twice in one job" in msg and not at.metric
    assert "job\\_rank0\\.json" in msg and "sha256" not in msg  # the name it was uploaded under
