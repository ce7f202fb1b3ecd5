"""Compare and Capture plan with a 1b and an 8b model loaded (AppTest); Diagnosis's measured step field."""
from __future__ import annotations

import re

import pytest

pytest.importorskip("streamlit")
import streamlit as st  # noqa: E402

from launchgap.loaders import load_trace  # noqa: E402
from launchgap.report import analyze_trace  # noqa: E402
from tests.conftest import TRACES  # noqa: E402
from tests.unit.apptest_helpers import goto, metrics, new_app, upload  # noqa: E402

H200 = TRACES / "h200"
ONE_B = ["1b_bs1_eager.json.gz", "1b_bs64_eager.json.gz", "1b_bs1_graph.json.gz"]
EIGHT_B = ["8b_bs1_eager.json.gz"]
SERVING_1B = TRACES / "h200-session-2026-12-01" / "serving" / "1b_serving_serve.json.gz"


@pytest.fixture(autouse=True)
def fresh_server(tmp_path, monkeypatch):
    """No bundled samples, and server-wide caches rebuilt for each test."""
    assert all((H200 / f).is_file() for f in ONE_B + EIGHT_B), f"bundled traces missing under {H200}"
    empty = tmp_path / "no-samples"
    empty.mkdir()
    monkeypatch.setenv("LAUNCHGAP_SAMPLES_DIR", str(empty))
    st.cache_resource.clear()
    yield
    st.cache_resource.clear()


@pytest.fixture(scope="module")
def workload_ids() -> dict[str, str]:
    return {f: analyze_trace(load_trace(H200 / f)).workload.id for f in ONE_B + EIGHT_B}


def loaded(files: list[str]):
    return upload(new_app(), [(f, (H200 / f).read_bytes()) for f in files])


def shown(elements) -> str:
    """The text of Markdown-rendered elements as a reader sees it (md_escape's backslashes dropped)."""
    return " ".join(re.sub(r"\\(.)", r"\1", str(e.value)) for e in elements)


def workload_box(at):
    return next(s for s in at.selectbox if s.label == "Workload")


def test_compare_pairs_within_one_workload(workload_ids) -> None:
    at = goto(loaded(ONE_B + EIGHT_B), "compare")
    assert "2 different workloads" in shown(at.warning)
    box = workload_box(at)
    one_b, eight_b = workload_ids[ONE_B[0]], workload_ids[EIGHT_B[0]]
    assert len(box.options) == 2 and box.value == one_b  # the first loaded workload first
    table = at.dataframe[0].value
    assert list(table["batch_size"]) == [1, 64]
    assert set(table["eager_traces"]) == {"1b_bs1_eager.json.gz", "1b_bs64_eager.json.gz"}
    assert table["graph_traces"].iloc[0] == "1b_bs1_graph.json.gz"  # the 1b graph trace pairs with 1b at bs 1
    box.select(eight_b).run()
    table = at.dataframe[0].value
    assert list(table["batch_size"]) == [1] and list(table["eager_traces"]) == ["8b_bs1_eager.json.gz"]
    assert table["graph_traces"].isna().all()  # no 8b graph trace: nothing measured, only predicted
    assert not at.exception


def test_compare_with_one_workload_has_no_picker() -> None:
    at = goto(loaded(ONE_B), "compare")
    assert not [s for s in at.selectbox if s.label == "Workload"]
    assert "workloads" not in shown(at.warning)


def test_capture_plan_costs_and_distribution_of_one_workload(workload_ids) -> None:
    at = goto(loaded(ONE_B + EIGHT_B), "plan")
    assert "2 different workloads" in shown(at.warning)
    # The page opens on the workload of the latest upload (8b), not the first loaded one.
    assert workload_box(at).value == workload_ids[EIGHT_B[0]]
    # launchgap record sweeps (one batch size each) are benchmarks: costs, never the distribution
    assert "benchmarks of one batch size each" in shown(at.info) and not metrics(at)
    # with a histogram: each workload's plan from its own traces' costs
    at.radio(key="lg_plan_dsrc").set_value("a CSV / JSON histogram").run()
    at.file_uploader(key="lg_plan_dist_widget").set_value(("d.csv", b"batch_size,count\n1,3\n", "text/csv"))
    at.run()
    assert "Distribution: bs 1: 3" in shown(at.caption)
    m8 = metrics(at)
    workload_box(at).select(workload_ids[ONE_B[0]]).run()
    assert metrics(at)["Expected step"] != m8["Expected step"]  # the 1b step, not a 1b/8b average
    assert not at.exception


def test_diagnosis_measured_step_replaces_the_estimate() -> None:
    at = goto(loaded(["1b_bs64_eager.json.gz"]), "diagnosis")
    s = analyze_trace(load_trace(H200 / "1b_bs64_eager.json.gz")).summary
    m = metrics(at)
    assert m["Predicted CUDA-graph speedup"] == f"{s.predicted_speedup:.2f}x"
    assert "Step, unprofiled estimate" in m
    at.number_input(key=next(n.key for n in at.number_input if n.label == "Measured step time (us)")) \
        .set_value(11688.0).run()  # the harness's unprofiled eager median for 1b at bs 64
    m = metrics(at)
    assert m["Predicted CUDA-graph speedup"] == f"{11688.0 / s.predicted_graph_step_us_median:.2f}x"
    assert m["Step, measured"] == "11,688 us"
    assert "eager step measured: 11,688 us observed" in shown(at.markdown)
    assert not at.exception


def test_fleet_page_shows_one_plan_per_workload(tmp_path) -> None:
    import json

    from launchgap.fleet import load_fleet_results, results_header, summarize_trace
    from launchgap.report import AnalysisOptions

    # 1b: a serving trace (its traffic) and two launchgap record sweeps (costs only); 8b: one sweep alone
    files = [SERVING_1B] + [H200 / f for f in ONE_B[:2] + EIGHT_B]
    lines = [results_header(AnalysisOptions(), 1 << 31)] + [summarize_trace(f) for f in files]
    results = tmp_path / "fleet.jsonl"
    results.write_text("".join(json.dumps(x) + "\n" for x in lines))
    want = load_fleet_results(results)
    assert want.plan is None and len(want.workloads) == 2 and want.benchmark_traces == 3
    assert [w.traces for w in want.workloads] == [3, 1] and want.workloads[1].plan is None
    at = goto(new_app(), "fleet")
    at.file_uploader(key="lg_fleet_widget").set_value(("fleet.jsonl", results.read_bytes(), "text/plain")).run()
    assert "2 workloads" in shown(at.warning)
    assert metrics(at)["Expected step"] == f"{want.workloads[0].plan.expected_step_us:,.0f} us"  # 1b: three traces
    at.selectbox(key="lg_fleet_workload").select(want.workloads[1].id).run()
    assert "Expected step" not in metrics(at)  # 8b: a sweep's costs, no traffic to plan for
    assert "No plan: no batch-size distribution: benchmark traces" in shown(at.info)
    assert not at.exception
