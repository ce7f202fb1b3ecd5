"""One verdict on every page, decode and prefill apart: the Diagnosis banner and its tiles, the Traces table,
Compare and the CLI all read :func:`launchgap.verdict.decide`'s output, on an engine trace with a prefill and
decode steps (a hand-built vLLM trace with the worker's step ranges) and on the repository's engine traces."""
from __future__ import annotations

import json

import pytest

pytest.importorskip("streamlit")

from launchgap.loaders import load_trace  # noqa: E402
from launchgap.render.trace import render_trace  # noqa: E402
from launchgap.report import analyze_trace  # noqa: E402
from tests.conftest import TRACES  # noqa: E402
from tests.unit.apptest_helpers import goto, metrics, new_app, upload  # noqa: E402
from tests.unit.kineto_tiny import ann, doc, kernel, launch  # noqa: E402

PREFILL = "execute_context_1(512)_generation_0(0)"
DECODE = "execute_context_0(0)_generation_4(4)"
B200 = TRACES / "engines" / "tracelens-b200-eager-llm" / "eager_trace.json.gz"


def _vllm_events() -> list[dict]:
    """A prefill step (three 900 us kernels back to back: GPU-bound) then three decode steps of batch 4 (ten 5 us
    kernels launched 80 us apart: launch-bound)."""
    ev = [ann(PREFILL, 0.0, 3000.0)]
    ev += [launch(10.0 + 100 * i, 5.0, 1 + i) for i in range(3)]
    ev += [kernel(20.0 + 900 * i, 900.0, 1 + i, "gemm") for i in range(3)]
    for j in range(3):
        t0, c0 = 3000.0 + 1000 * j, 100 + 20 * j
        ev.append(ann(DECODE, t0, 900.0))
        ev += [launch(t0 + 10 + 80 * i, 5.0, c0 + i) for i in range(10)]
        ev += [kernel(t0 + 20 + 80 * i, 5.0, c0 + i, "small") for i in range(10)]
    return ev


def _vllm_bytes() -> bytes:
    return json.dumps(doc(_vllm_events())).encode()


@pytest.fixture(scope="module")
def vllm_report(tmp_path_factory):
    p = tmp_path_factory.mktemp("vllm") / "vllm_prefill_decode.json"
    p.write_bytes(_vllm_bytes())
    return analyze_trace(load_trace(p))


def test_the_cli_splits_decode_and_prefill(vllm_report) -> None:
    s = vllm_report.summary
    assert [(g["phase"], g["steps"], g["verdict"]) for g in s.step_groups] == [
        ("decode", 3, "launch-bound"), ("prefill", 1, "GPU-bound")]
    assert s.verdict == "launch-bound"  # the decode group's, not a blend with the prefill step
    text = render_trace(vllm_report)
    assert "Steps by phase and graph coverage" in text and f"Verdict: {s.verdict} — {s.verdict_detail}" in text


def test_diagnosis_banner_tiles_and_groups_split(vllm_report) -> None:
    at = goto(upload(new_app(), [("vllm.json", _vllm_bytes())]), "diagnosis")
    s = vllm_report.summary
    banner = [m.value.replace("\\", "") for m in at.markdown if m.value.startswith("**Verdict:")]
    assert len(banner) == 1 and banner[0].startswith(f"**Verdict: {s.verdict}**")
    decode = s.step_groups[0]
    m = metrics(at)
    # the tiles are the decode group's (as the CLI's decode row), not the trace's pooled figures
    assert m["GPU idle (decode steps)"] == f"{decode['gpu_idle_fraction']:.1%}"
    assert m["Predicted CUDA-graph speedup"] == f"{decode['predicted_speedup']:.2f}x"
    assert m["Steps"] == "3 of 4"
    groups = next(d.value for d in at.dataframe if "verdict" in d.value.columns and "coverage" in d.value.columns)
    assert groups[["phase", "steps", "verdict"]].values.tolist() == [["decode", 3, "launch-bound"],
                                                                     ["prefill", 1, "GPU-bound"]]
    engine = next(d.value for d in at.dataframe if "requests" in d.value.columns)
    assert "None" not in engine.astype(str).values  # "—" where the trace does not say, never "None"


def test_traces_table_has_one_row_per_phase(vllm_report) -> None:
    at = upload(new_app(), [("vllm.json", _vllm_bytes())])
    table = next(d.value for d in at.dataframe if "verdict" in d.value.columns)
    rows = table[table["trace"] == "vllm.json"]
    assert rows[["phase", "verdict", "steps"]].values.tolist() == [["decode (eager)", "launch-bound", 3],
                                                                   ["prefill (eager)", "GPU-bound", 1]]


def test_compare_speaks_for_the_decode_steps(vllm_report) -> None:
    at = goto(upload(new_app(), [("vllm.json", _vllm_bytes()), ("b200.json.gz", B200.read_bytes())]), "compare")
    [a] = [s for s in at.selectbox if s.label == "Trace A"]
    a.select_index(next(i for i, o in enumerate(a.options) if "vllm.json" in o)).run()
    caption = next(c.value for c in at.caption if c.value.replace("\\", "").startswith("A = "))
    assert "launch-bound, decode steps" in caption.replace("\\", "")
    side = next(d.value for d in at.dataframe if "B / A" in d.value.columns)
    facts = dict(zip(side["metric"], side["A"]))
    decode = vllm_report.summary.step_groups[0]
    assert facts["steps"] == 3
    assert facts["GPU idle (fraction)"] == pytest.approx(decode["gpu_idle_fraction"])


def test_real_engine_trace_one_verdict_everywhere() -> None:
    rep = analyze_trace(load_trace(B200))
    at = upload(new_app(), [("b200.json.gz", B200.read_bytes())])
    table = next(d.value for d in at.dataframe if "verdict" in d.value.columns)
    assert table[table["trace"] == "b200.json.gz"]["verdict"].tolist() == [rep.summary.verdict]
    goto(at, "diagnosis")
    banner = next(m.value.replace("\\", "") for m in at.markdown if m.value.startswith("**Verdict:"))
    assert banner.startswith(f"**Verdict: {rep.summary.verdict}** (compiled trace)")
    assert f"Verdict: {rep.summary.verdict} — " in render_trace(rep)


def test_engine_table_mixes_known_and_unknown_without_none() -> None:
    # one step whose marker says nothing (execute_model): its phase, batch, requests and tokens are unknown
    ev = _vllm_events() + [ann("execute_model", 7000.0, 500.0), launch(7010.0, 5.0, 900), kernel(7020.0, 5.0, 900)]
    at = goto(upload(new_app(), [("mixed_known.json", json.dumps(doc(ev)).encode())]), "diagnosis")
    engine = next(d.value for d in at.dataframe if "requests" in d.value.columns)
    cells = engine[["phase", "batch", "requests", "tokens"]].astype(str).values.tolist()
    assert ["—", "—", "—", "—"] in cells and "None" not in str(cells)


def test_serving_tiles_show_no_arrow_where_graphs_change_nothing() -> None:
    """A FULL-graph vLLM trace (MI300X): TPOT and tokens/s with graphs equal the trace's own, so the tiles carry no
    delta (a red '+0.00 ms' arrow read as a regression); an eager trace keeps its arrows."""
    graphed = (TRACES / "engines" / "tracelens-vllm-decode-fullgraph-mi300x" / "graph_execution.json.gz").read_bytes()
    at = goto(upload(new_app(), [("graphed.json.gz", graphed)]), "diagnosis")
    tiles = {m.label: m for m in at.metric}
    assert tiles["Time per output token"].value == "10.58 ms"
    assert not tiles["Time per output token"].delta and not tiles["Tokens/s at batch 32"].delta
    assert "A FULL graph predicts no change to these decode steps." in [c.value.replace("\\", "") for c in at.caption]
    eager = (TRACES / "h200-1b" / "1b_bs8_eager.json.gz").read_bytes()
    at = goto(upload(new_app(), [("eager.json.gz", eager)]), "diagnosis")
    tiles = {m.label: m for m in at.metric}
    assert tiles["Time per output token"].delta == "-14.53 ms with CUDA graphs"
    assert tiles["Tokens/s at batch 8"].delta == "+3,836 with CUDA graphs"
