"""A plan from several traces carries what each trace's own analysis warned about and noted (issue 26): the
``plan`` command (text and JSON), ``fleet`` (its plan, from summaries) and the dashboard's Capture plan and Fleet
pages, each line once with the traces that said it.

Four tiny traces of one workload: ``a`` and ``b`` each hold a step that launched no GPU work (the same warning),
``c`` is graph-mode with no capture list (padding unknown), ``x`` has a decode step of no known batch size.
"""
from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from launchgap.cli import build_parser, main
from launchgap.commands.plan import build_plans
from launchgap.fleet import FleetAccumulator, load_fleet_results, results_header, summarize_trace
from launchgap.loaders import DEFAULT_MAX_TRACE_BYTES
from launchgap.planning.inputs import TraceSteps
from launchgap.planning.planner import TraceNote
from launchgap.planning.request import PlanRequest, trace_notes
from launchgap.render import render_fleet
from launchgap.render.plan import TRACE_NOTES_SHOWN, render_plan, trace_note_line
from launchgap.report import AnalysisOptions
from launchgap.verdict import plan_caveats
from tests.integration.test_json_contract import CONTRACT, Checker
from tests.unit.kineto_tiny import ann, kernel, launch, write

EMPTY = "1 of 4 steps launched no GPU work and were left out"
PADDING = ("padding cost unknown: capture sizes inferred from the buckets the trace ran (a lower bound of the real "
           "list): a batch's real bucket is unknown; pass --capture-sizes or paste the server config")
NO_BATCH = "decode steps of no known batch size were left out of the costs and the distribution"


def _eager_step(t0: float, bs: int | None, c: int) -> list[dict]:
    """An eager step (two launches, kernels of 10 + bs and 10 us); ``bs`` None: its marker names no batch."""
    name = "decode_step" if bs is None else f"decode_step[bs={bs}]"
    return [ann(name, t0, 200), launch(t0 + 10, 5, c), kernel(t0 + 20, 10 + (bs or 4), c, name="k1"),
            launch(t0 + 40, 5, c + 1), kernel(t0 + 60, 10, c + 1, name="k2")]


def _graph_step(t0: float, bs: int, c: int) -> list[dict]:
    return [ann(f"decode_step[bs={bs} graph]", t0, 200), launch(t0 + 10, 5, c, name="cudaGraphLaunch"),
            kernel(t0 + 20, 10 + bs, c, name="k1"), kernel(t0 + 21 + 10 + bs, 10, c, name="k2")]


@pytest.fixture
def traces(tmp_path) -> list[Path]:
    empty = [ann("decode_step[bs=4]", 3000.0, 200)]  # a step with no GPU work in it: left out, with a warning
    a = [e for i, bs in enumerate([1, 1, 4]) for e in _eager_step(1000.0 * i, bs, 10 * i + 1)] + empty
    b = [e for i, bs in enumerate([1, 4, 4]) for e in _eager_step(1000.0 * i, bs, 10 * i + 1)] + empty
    c = [e for i, bs in enumerate([4, 4]) for e in _graph_step(1000.0 * i, bs, 10 * i + 5)]
    x = [e for i, bs in enumerate([1, 4, None]) for e in _eager_step(1000.0 * i, bs, 10 * i + 1)]
    return [write(tmp_path, ev, f"{n}.json") for n, ev in (("a", a), ("b", b), ("c", c), ("x", x))]


def _want(names: list[str]) -> list[dict]:
    """The trace notes of a plan over the four traces, named as ``names`` (a, b, c, x)."""
    a, b, c, x = names
    return [{"kind": "warning", "text": EMPTY, "traces": [a, b]},
            {"kind": "note", "text": PADDING, "traces": [c]},
            {"kind": "note", "text": NO_BATCH, "traces": [x]}]


# --- the analysis' notes and their grouping ---------------------------------------------------------

def _step(source: str, confidence: str | None = None, phase: str | None = "decode") -> SimpleNamespace:
    return SimpleNamespace(batch_source=source, batch_confidence=confidence, phase=phase)


def test_plan_caveats_say_padding_unknown_kernel_grids_and_unknown_batches() -> None:
    s = SimpleNamespace(padding_unknown_reason="capture sizes inferred")
    steps = [_step("marker", "high"), _step("kernel_grid:reshape_and_cache", "medium"),
             _step("kernel_grid:reshape_and_cache", "medium"), _step("kernel_grid:argmax", "low", None),
             _step("none"), _step("kernel_grid:prefill_only", "medium", "prefill"), _step("none", phase="prefill")]
    assert plan_caveats(s, steps) == [
        "padding cost unknown: capture sizes inferred",
        "batch sizes read from the grid of reshape_and_cache (the kernel ran eagerly)",
        "batch sizes read from the grid of argmax (inside a graph replay, the captured size: the batch is at most "
        "that)",
        NO_BATCH]
    # a benchmark of one size pads nothing; a trace whose decode steps all came from markers has nothing to say
    assert plan_caveats(s, steps[:1], benchmark=True) == []
    assert plan_caveats(SimpleNamespace(padding_unknown_reason=None), steps[:1] + steps[-2:]) == []


def _ts(name: str, warnings: tuple[str, ...] = (), notes: tuple[str, ...] = ()) -> TraceSteps:
    one = np.array([1], dtype=np.int64)
    return TraceSteps(name=name, mode="eager", unprofiled_scale=1.0, batch_size=one, dur_us=np.array([80.0]),
                      predicted_graph_us=np.array([20.0]), phase=(None,), warnings=warnings, notes=notes)


def test_trace_notes_say_each_line_once_with_the_traces_that_said_it() -> None:
    got = trace_notes([_ts("t1", ("w1",), ("n1", "n2")), _ts("t2", ("w2", "w1"), ("n1",)), _ts("t3", (), ("n1",)),
                       _ts("t4", ("w1", "w1"))])
    assert got == (TraceNote("warning", "w1", ("t1", "t2", "t4")), TraceNote("warning", "w2", ("t2",)),
                   TraceNote("note", "n1", ("t1", "t2", "t3")), TraceNote("note", "n2", ("t1",)))
    assert trace_notes([_ts("t1")]) == ()
    # the text names at most three traces and counts them all
    assert trace_note_line(TraceNote("note", "n1", ("a", "b", "c", "d", "e"))) == "note (5 traces: a, b, c and 2 more): n1"
    assert trace_note_line(TraceNote("warning", "w", ("a",))) == "warning (1 trace: a): w"


# --- the plan command, fleet and the JSON contract ----------------------------------------------------

def test_plan_command_carries_each_traces_warnings_and_notes(traces, capsys) -> None:
    assert main(["plan", *map(str, traces), "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["trace_notes"] == _want([str(p) for p in traces])
    assert not [n for n in doc["inputs"] if "no GPU work" in n]  # said once, as a trace note
    checker = Checker(CONTRACT)  # the one JSON contract (docs/json.md) and its checker
    checker.document(doc, "launchgap.plan/1", "plan of four traces")
    assert not checker.problems, checker.summary()
    assert "trace_notes" in checker.seen["launchgap.plan/1"] and checker.seen["trace-note"] == {"kind", "text",
                                                                                                "traces"}
    assert main(["plan", *map(str, traces)]) == 0
    text = capsys.readouterr().out
    a, b, c, x = map(str, traces)
    assert ("\nWhat the traces' analyses warned about and noted (1 warning, 2 notes)\n"
            f"  warning (2 traces: {a}, {b}): {EMPTY}\n"
            f"  note (1 trace: {c}): {PADDING}\n"
            f"  note (1 trace: {x}): {NO_BATCH}\n\nAgainst the servers' default lists\n") in text


def test_one_trace_plan_carries_its_own(traces, capsys) -> None:
    assert main(["plan", str(traces[0]), "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["trace_notes"] == [
        {"kind": "warning", "text": EMPTY, "traces": [str(traces[0])]}]


def _results(traces: list[Path], out: Path) -> Path:
    with open(out, "w") as fh:  # as launchgap fleet --out writes it
        fh.write(json.dumps(results_header(AnalysisOptions(), DEFAULT_MAX_TRACE_BYTES)) + "\n")
        for p in traces:
            fh.write(json.dumps(summarize_trace(p)) + "\n")
    return out


def test_fleet_plan_carries_them_as_the_plan_command_does(traces, tmp_path) -> None:
    summaries = [summarize_trace(p) for p in traces]
    assert [s["notes"] for s in summaries] == [[], [], [PADDING], [NO_BATCH]]
    assert [s["warnings"] for s in summaries] == [[EMPTY], [EMPTY], [], []]
    acc = FleetAccumulator()
    for s in summaries:  # as the fleet command folds them in
        acc.add(s)
    assert [n.to_dict() for n in acc.finish(PlanRequest()).plan.trace_notes] == _want([str(p) for p in traces])
    results = _results(traces, tmp_path / "f.jsonl")
    rep = load_fleet_results(results)  # and from its results file
    assert [n.to_dict() for n in rep.plan.trace_notes] == _want([str(p) for p in traces])
    doc = rep.to_dict()
    checker = Checker(CONTRACT)
    checker.document(doc, "launchgap.fleet/1", "fleet of four traces")
    assert not checker.problems, checker.summary()
    assert doc["plan"]["trace_notes"] == doc["workloads"][0]["plan"]["trace_notes"] == \
        doc["workloads"][0]["trace_notes"] == _want([str(p) for p in traces])
    text = render_fleet(rep)
    assert f"    warning (2 traces: {traces[0]}, {traces[1]}): {EMPTY}\n" in text
    assert f"    note (1 trace: {traces[3]}): {NO_BATCH}\n" in text
    # a results file written before notes were recorded: the warnings still come through, the notes are absent
    old = tmp_path / "old.jsonl"
    lines = results.read_text().splitlines()
    old.write_text("\n".join([lines[0]] + [json.dumps({k: v for k, v in json.loads(ln).items() if k != "notes"})
                                           for ln in lines[1:]]) + "\n")
    assert [n.to_dict() for n in load_fleet_results(old).plan.trace_notes] == _want([str(p) for p in traces])[:1]


def _no_batch(tmp_path: Path) -> Path:
    """Three eager steps whose markers name no batch size and a step with no GPU work: no plan can be made."""
    ev = [e for i in range(3) for e in _eager_step(1000.0 * i, None, 10 * i + 1)] + [ann("decode_step", 3000.0, 200)]
    return write(tmp_path, ev, "y.json")


def test_a_fleet_workload_with_no_plan_still_says_them(tmp_path) -> None:
    y = _no_batch(tmp_path)
    rep = load_fleet_results(_results([y], tmp_path / "y.jsonl"))
    assert rep.plan is None and rep.plan_note.startswith("no step with a known batch size")
    said = [{"kind": "warning", "text": EMPTY, "traces": [str(y)]}, {"kind": "note", "text": NO_BATCH, "traces": [str(y)]}]
    assert rep.to_dict()["workloads"][0]["trace_notes"] == said
    assert (f"Capture plan for the fleet\n  none: {rep.plan_note}\n\n"
            f"  What the traces' analyses warned about and noted (1 warning, 1 note)\n"
            f"    warning (1 trace: {y}): {EMPTY}\n    note (1 trace: {y}): {NO_BATCH}") in render_fleet(rep)


def test_many_trace_notes_are_cut_in_the_text_not_in_the_json(traces) -> None:
    (_, plan, notes), = build_plans(build_parser("plan").parse_args(["plan", str(traces[0])]))
    many = replace(plan, trace_notes=tuple(TraceNote("note", f"n{i}", ("t",)) for i in range(TRACE_NOTES_SHOWN + 3)))
    text = render_plan(many, notes=notes)
    assert f"  note (1 trace: t): n{TRACE_NOTES_SHOWN - 1}\n  ... 3 more (use --format json for all)\n" in text
    assert f"n{TRACE_NOTES_SHOWN}\n" not in text
    assert len(many.to_dict()["trace_notes"]) == TRACE_NOTES_SHOWN + 3
    md = render_plan(many, markdown=True, notes=notes)
    assert f"## What the traces' analyses warned about and noted ({TRACE_NOTES_SHOWN + 3} notes)" in md


# --- the dashboard -----------------------------------------------------------------------------------

def _page_text(elements) -> list[str]:
    return [e.value.replace("\\", "") for e in elements]  # md_escape's backslashes


def test_dashboard_plan_and_fleet_pages_show_them(traces, tmp_path, monkeypatch) -> None:
    pytest.importorskip("streamlit")
    import streamlit as st

    from tests.unit.apptest_helpers import goto, new_app, upload

    samples = tmp_path / "samples"
    samples.mkdir()
    monkeypatch.setenv("LAUNCHGAP_SAMPLES_DIR", str(samples))  # no bundled samples: the uploads alone
    st.cache_resource.clear()
    at = goto(upload(new_app(), [(p.name, p.read_bytes()) for p in traces]), "plan")
    assert not at.error, [e.value for e in at.error]
    # the page names the uploaded files
    assert "**What the traces' analyses warned about and noted (1 warning, 2 notes)**" in _page_text(at.markdown)
    assert _page_text(at.warning)[0] == f"warning (2 traces: a.json, b.json): {EMPTY}"
    assert f"- note (1 trace: c.json): {PADDING}\n- note (1 trace: x.json): {NO_BATCH}" in _page_text(at.info)
    # the Fleet page: a results file of the same traces, named by their paths
    fleet = _results(traces, tmp_path / "f.jsonl")
    at = goto(new_app(), "fleet")
    at.file_uploader(key="lg_fleet_widget").set_value(("f.jsonl", fleet.read_bytes(), "application/octet-stream"))
    at.run()
    assert not at.exception and not at.error
    a, b, c, x = map(str, traces)
    assert f"warning (2 traces: {a}, {b}): {EMPTY}" in _page_text(at.warning)
    assert f"- note (1 trace: {c}): {PADDING}\n- note (1 trace: {x}): {NO_BATCH}" in _page_text(at.info)
    # a fleet with no plan: the page says why, and what the traces' analyses said
    y = _no_batch(tmp_path)
    at.file_uploader(key="lg_fleet_widget").set_value(("y.jsonl", _results([y], tmp_path / "y.jsonl").read_bytes(),
                                                       "application/octet-stream"))
    at.run()
    assert not at.exception and not at.error
    info = _page_text(at.info)
    assert any(i.startswith("No plan: no step with a known batch size") for i in info)
    assert f"warning (1 trace: {y}): {EMPTY}" in _page_text(at.warning) and f"- note (1 trace: {y}): {NO_BATCH}" in info
