"""One plan builder: ``launchgap plan``, the dashboard's Capture plan page and ``fleet`` give the
same plan on the same inputs, with the same budgets (issue 29 item 1)."""
from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("streamlit")

import streamlit as st  # noqa: E402

from launchgap.cli import build_parser, main  # noqa: E402
from launchgap.dashboard.text import md_escape  # noqa: E402
from launchgap.commands.fleet import fleet_request  # noqa: E402
from launchgap.errors import InputError  # noqa: E402
from launchgap.fleet import FleetAccumulator, summarize_trace  # noqa: E402
from launchgap.planning.inputs import TraceSteps  # noqa: E402
from launchgap.planning.planner import PlanOptions  # noqa: E402
from launchgap.render.plan import TIE_CONFIG_NOTE  # noqa: E402
from launchgap.planning.request import (  # noqa: E402
    KINDS,
    InputKind,
    PlanInput,
    PlanRequest,
    build_plan,
    register,
)
from tests.unit.apptest_helpers import goto, metrics, new_app, upload  # noqa: E402
from tests.unit.kineto_tiny import ann, doc, kernel, launch  # noqa: E402

# Dimensions whose memory model gives every figure (tests/unit/test_memory_model.py's tiny model).
DIMS = {"layers": 2, "hidden": 1024, "heads": 8, "kv_heads": 8, "mlp": 1024, "vocab": 260096, "head_dim": 128}


def _eager_step(t0: float, bs: int, c: int) -> list[dict]:
    """An eager step of batch ``bs``: two launches, kernels of 10 + bs and 10 us."""
    return [ann(f"decode_step[bs={bs}]", t0, 200), launch(t0 + 10, 5, c), kernel(t0 + 20, 10 + bs, c, name="k1"),
            launch(t0 + 40, 5, c + 1), kernel(t0 + 60, 10, c + 1, name="k2")]


def _graph_step(t0: float, bs: int, c: int) -> list[dict]:
    # a serving step's marker (one batch size in decode_step[bs=N] alone would be a launchgap record benchmark,
    # which plan takes for costs only and fleet, whose traces are production's, does not)
    return [ann(f"decode_step[bs={bs} graph]", t0, 200), launch(t0 + 10, 5, c, name="cudaGraphLaunch"),
            kernel(t0 + 20, 10 + bs, c, name="k1"), kernel(t0 + 21 + 10 + bs, 10, c, name="k2")]


@pytest.fixture(scope="module")
def traces(tmp_path_factory) -> list[Path]:
    """An eager trace (steps at bs 1, 1, 1, 4, 4, 16) and a graph trace (bs 4, 4): one workload."""
    d = tmp_path_factory.mktemp("paths")
    eager = [e for i, bs in enumerate([1, 1, 1, 4, 4, 16]) for e in _eager_step(1000.0 * i, bs, 10 * i + 1)]
    graph = [e for i, bs in enumerate([4, 4]) for e in _graph_step(1000.0 * i, bs, 10 * i + 5)]
    out = []
    for name, events in (("eager.json", eager), ("graph.json", graph)):
        (d / name).write_text(json.dumps(doc(events)))
        out.append(d / name)
    return out


@pytest.fixture(autouse=True)
def no_samples(tmp_path, monkeypatch):
    """The dashboard with no bundled samples: only the uploads are loaded."""
    root = tmp_path / "samples"
    root.mkdir()
    monkeypatch.setenv("LAUNCHGAP_SAMPLES_DIR", str(root))
    st.cache_resource.clear()
    yield
    st.cache_resource.clear()


def cli_plan(paths: list[Path], extra: list[str], capsys) -> dict:
    assert main(["plan", *map(str, paths), *extra, "--format", "json"]) == 0
    return json.loads(capsys.readouterr().out)


def fleet_plan(paths: list[Path], extra: list[str]) -> dict:
    """The fleet command's plan without Dask: its request from the same flags, each trace summarised."""
    req = fleet_request(build_parser("fleet").parse_args(["fleet", *map(str, paths), *extra]))
    acc = FleetAccumulator()
    for p in paths:  # two traces
        acc.add(summarize_trace(p, req.options, req.max_trace_bytes))
    rep = acc.finish(req.plan, req.top, req.workload)
    assert rep.plan is not None, rep.plan_note
    return {**rep.plan.to_dict(), "inputs": list(rep.plan_inputs)}


def page_plan(paths: list[Path], max_graphs: int = 0):
    at = goto(upload(new_app(), [(p.name, p.read_bytes()) for p in paths]), "plan")
    if max_graphs:
        at.number_input(key="lg_plan_max_graphs").set_value(max_graphs).run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def _page_matches(at, want: dict) -> None:
    """What the page shows is the plan ``want`` (JSON): buckets, figures, per-batch rows, Pareto sets, sources."""
    m = metrics(at)
    assert m["Graphs to capture"] == str(want["n_graphs"])
    assert m["Expected step"] == f"{want['expected_step_us']:,.0f} us"
    assert m["Graph memory"] == f"{want['memory']['predicted_mib']:,.0f} MiB"
    assert at.code[0].value == (", ".join(map(str, want["buckets"])) or "none: run eager") or (
        not want["buckets"] and at.code[0].value.startswith("none: the costs tie"))
    per_batch = next(d.value for d in at.dataframe if "planned_us" in d.value.columns)
    assert per_batch["batch_size"].tolist() == [r["batch_size"] for r in want["per_batch"]]
    assert np.allclose(per_batch["planned_us"], [r["planned_us"] for r in want["per_batch"]], atol=1e-3)
    assert [b if b == b else None for b in per_batch["bucket"].tolist()] == [r["bucket"] for r in want["per_batch"]]
    pareto = next(d.value for d in at.dataframe if "buckets" in d.value.columns and "graphs" in d.value.columns)
    assert pareto["buckets"].tolist() == [", ".join(map(str, p["buckets"])) for p in want["pareto"]]
    sources = "; ".join(f"{r.replace('_', ' ')} from {n}" for r, n in want["sources"].items() if n)
    assert md_escape(f"Sources: {sources}") in [c.value for c in at.caption]


def test_cli_page_and_fleet_give_one_plan(traces, capsys) -> None:
    want = cli_plan(traces, [], capsys)
    assert want["sources"]["costs"] == "2 trace(s) of " + want["workload"]["label"]  # its name, not its id
    assert want["sources"]["distribution"] == want["sources"]["costs"]
    assert want["n_graphs"] >= 1 and want["options"]["max_graphs"] is None
    fleet = fleet_plan(traces, [])
    assert fleet == {k: v for k, v in want.items() if k != "workload"}  # which input gave what included
    _page_matches(page_plan(traces), want)


def test_the_page_scores_the_traces_current_list_as_the_command_does(capsys) -> None:
    serving = Path(__file__).resolve().parents[2] / "traces/h200-heldout-3b-2026-12-02/serving/3b_serving_serve.json.gz"
    want = cli_plan([serving], [], capsys)
    assert want["baselines"]["current"]["buckets"] == [12, 16, 24, 32, 48, 64]  # what the step markers write
    at = page_plan([serving])
    base = next(d.value for d in at.dataframe if "setup" in d.value.columns)
    row = base[base["setup"] == "current list"]
    assert row["graphs"].tolist() == [6] and row["version"].tolist() == ["—"]  # no engine version: the server's own
    assert row["expected step (us)"].tolist() == [pytest.approx(want["baselines"]["current"]["expected_step_us"])]
    sources = "; ".join(f"{r.replace('_', ' ')} from {n}" for r, n in want["sources"].items() if n)
    assert "capture sizes from" in sources and md_escape(f"Sources: {sources}") in [c.value for c in at.caption]


def test_the_page_says_a_tie_is_no_reason_to_turn_graphs_off() -> None:
    # a vLLM FULL-graph trace alone: its eager cost is only estimated, at its floor (the graph step: an MI300X, where
    # the GPU-bound eager step's gap per kernel was not measured)
    full = Path(__file__).resolve().parents[2] / "traces/engines/tracelens-vllm-decode-fullgraph-mi300x/graph_execution.json.gz"
    at = page_plan([full])
    assert at.code[0].value == "none: the costs tie (eager only estimated): measure eager steps first"
    assert md_escape(TIE_CONFIG_NOTE) in [c.value for c in at.caption]
    assert [t.label for t in at.tabs] == ["vLLM", "SGLang", "TensorRT-LLM"]


def test_the_configs_open_on_the_traces_own_engine() -> None:
    sglang = Path(__file__).resolve().parents[2] / "traces/engines/tracelens-sglang-qwen3-8b-decode-mi300x/sglang_Qwen3-8B_decode.json.gz"
    at = page_plan([sglang])
    assert [t.label for t in at.tabs] == ["SGLang", "vLLM", "TensorRT-LLM"]
    # an MI300X trace ties (no graph): SGLang's own words for it under its own tab
    assert [c.value for c in at.tabs[0].code] == ['{"cuda_graph_bs": []}', "--disable-cuda-graph"]


def test_the_same_budgets_on_every_path(traces, capsys) -> None:
    """A graph limit: the page's widget and both commands' flag give one plan."""
    want = cli_plan(traces, ["--max-graphs", "1"], capsys)
    assert want["n_graphs"] == 1 and want["options"]["max_graphs"] == 1
    assert fleet_plan(traces, ["--max-graphs", "1"]) == {k: v for k, v in want.items() if k != "workload"}
    _page_matches(page_plan(traces, max_graphs=1), want)


def test_fleet_honours_plan_budgets_and_model_dims(traces, tmp_path, capsys) -> None:
    """What fleet used to drop (capture budget, KV bytes, model dimensions, memory model): now as for plan."""
    cfg = tmp_path / "config.json"
    cfg.write_text(json.dumps(DIMS))
    model = tmp_path / "memory_model.json"
    model.write_text(json.dumps({"base_mib": 100.0, "pool_per_act": 2.0, "graph_mib": 10.0, "node_kib": 0.0,
                                 "capture_base_s": 0.5, "capture_graph_s": 0.1, "capture_node_ms": 0.0}))
    extra = ["--model-config", str(cfg), "--memory-model", str(model), "--capture-seconds", "0.65",
             "--kv-bytes-per-token", "1048576", "--memory-mib", "500", "--capture-sizes", "1,2,4,8"]
    want = cli_plan(traces, extra, capsys)
    # 0.5 s per list + 0.1 s per size under 0.65 s: one graph.
    assert want["n_graphs"] == 1 and want["memory"]["predicted_capture_s"] == 0.6
    assert want["memory"]["kv_bytes_per_token"] == 1048576.0 and want["memory"]["model"] is not None
    assert want["sources"]["model_dims"] == str(cfg) and want["sources"]["memory_model"] == str(model)
    assert want["sources"]["capture_sizes"] == "--capture-sizes"
    assert want["baselines"]["current"]["buckets"] == [1, 2, 4, 8]
    assert want["baselines"]["current"]["within_budget"] is False  # 4 sizes: 0.9 s of capture
    assert fleet_plan(traces, extra) == {k: v for k, v in want.items() if k != "workload"}


# --- the request itself ---------------------------------------------------------------------------

def _steps(mode: str, sizes: list[int], us: list[float]) -> TraceSteps:
    n = len(sizes)
    return TraceSteps("t", mode, 1.0, np.array(sizes, dtype=np.int64), np.array(us, dtype=float),
                      np.array(us, dtype=float) / 2, (None,) * n)


def test_roles_pick_the_best_input_and_say_so(tmp_path) -> None:
    timings = tmp_path / "timings.json"
    timings.write_text(json.dumps({"schema": "launchgap.timings/1", "rows": [
        {"model": "m", "batch_size": b, "eager_us": e, "graph_us": g} for b, e, g in [(1, 100.0, 20.0),
                                                                                    (4, 100.0, 50.0)]]}))
    traces = PlanInput("traces", "1 trace(s) of wl-x", ("costs", "distribution"),
                       value=(_steps("eager", [1, 1, 4], [80.0, 80.0, 90.0]),))
    tim = PlanInput("timings", "timings.json", ("costs", "model_dims"), path=str(timings))
    plan, notes = build_plan(PlanRequest((traces, tim)))
    # Costs from the timings (rank 0 beats the traces), the distribution from the traces' steps.
    assert plan.sources["costs"] == "timings.json" and plan.sources["distribution"] == "1 trace(s) of wl-x"
    assert plan.sources["model_dims"] is None  # the timings have no models section: nobody gave dimensions
    assert notes[:2] == ["costs from timings.json, model m", "distribution from 3 decode steps in 1 serving trace(s)"]
    assert "costs from timings.json (wins over 1 trace(s) of wl-x)" in notes
    # bs 1: 2 of 3 steps at 20 us, bs 4: 1 at 50 us.
    assert plan.buckets == (1, 4) and plan.expected_step_us == pytest.approx(30.0)
    # The same traces with the distribution role only: costs must come from elsewhere.
    only = PlanInput("traces", "1 trace(s) of wl-x", ("distribution",), value=traces.value)
    with pytest.raises(InputError, match="nothing to plan from"):
        build_plan(PlanRequest((only,)))
    two = PlanInput("distribution", "a.csv", ("distribution",), value={1: 1.0})
    with pytest.raises(InputError, match=r"several inputs give the distribution \(a.csv, b.csv\)"):
        build_plan(PlanRequest((tim, two, PlanInput("distribution", "b.csv", ("distribution",), value={4: 1.0}))))
    with pytest.raises(InputError, match="a timings input cannot give the distribution"):
        PlanInput("timings", "t", ("distribution",), path=str(timings))


def test_notes_say_where_the_current_list_came_from_and_where_inputs_disagree() -> None:
    base = _steps("eager", [1, 1, 4], [80.0, 80.0, 90.0])
    assumed = replace(base, capture_sizes=(1, 2, 4), capture_sizes_detail="default: vLLM V1 default, maximum 4",
                      warnings=("3 of 9 steps launched no GPU work and were left out",))
    roles = ("costs", "distribution", "capture_sizes")
    plan, notes = build_plan(PlanRequest((PlanInput("traces", "1 trace(s) of wl-x", roles, value=(assumed,)),)))
    assert ("current list [1, 2, 4] from 1 trace(s) of wl-x (default: vLLM V1 default, maximum 4); an assumption, "
            "the trace does not state its list: pass --capture-sizes or the server's config") in notes
    # the analysis' warnings are the plan's trace notes, named by their trace, not among the input notes
    assert [n.to_dict() for n in plan.trace_notes] == [
        {"kind": "warning", "text": "3 of 9 steps launched no GPU work and were left out", "traces": ["t"]}]
    assert not [n for n in notes if "no GPU work" in n]
    # a given list wins; it differs from what the trace's markers write (not from an assumed default)
    flag = PlanInput("capture_sizes", "--capture-sizes", ("capture_sizes",), value=(1, 8))
    marked = replace(assumed, capture_sizes_detail="markers: the padded sizes the step markers write", warnings=())
    plan, _ = build_plan(PlanRequest((PlanInput("traces", "1 trace(s) of wl-x", roles, value=(marked,)), flag)))
    assert [n for n in plan.warnings if "differ" in n] == [
        "the capture lists differ: --capture-sizes gives [1, 8], 1 trace(s) of wl-x [1, 2, 4]; the plan scores "
        "--capture-sizes's as the current list"]
    plan, notes = build_plan(PlanRequest((PlanInput("traces", "1 trace(s) of wl-x", roles, value=(assumed,)), flag)))
    assert not [n for n in [*notes, *plan.warnings] if "differ" in n or "current list [" in n]
    # an input that fills no role is named, with what filled the roles it could have
    extra = PlanInput("distribution", "b.csv", (), value={4: 1.0})
    _, notes = build_plan(PlanRequest((PlanInput("traces", "1 trace(s) of wl-x", roles, value=(base,)), extra)))
    assert "b.csv gave nothing to this plan (distribution from 1 trace(s) of wl-x)" in notes


def test_a_new_input_kind_plugs_in(monkeypatch) -> None:
    """A kind registered with a reader per role (as server logs will be) fills its role; rank decides."""
    monkeypatch.setattr("launchgap.planning.request.KINDS", dict(KINDS))
    register(InputKind("server_log", {"distribution": lambda i: {4: 3.0}}, {"distribution": 5}))
    traces = PlanInput("traces", "1 trace(s) of wl-x", ("costs", "distribution"),
                       value=(_steps("eager", [1, 4], [80.0, 90.0]),))
    log = PlanInput("server_log", "server.log", ("distribution",))
    plan, notes = build_plan(PlanRequest((traces, log), PlanOptions(max_graphs=1)))
    assert plan.sources["distribution"] == "server.log" and plan.sources["costs"] == "1 trace(s) of wl-x"
    assert [r.batch_size for r in plan.per_batch] == [4] and notes[1] == "distribution from server.log"
    with pytest.raises(ValueError, match="roles"):
        register(InputKind("odd", {"weather": lambda i: None}, {"weather": 0}))


# --- the page's defaults and texts (issue 28 item 6) -----------------------------------------------

def _dipping_step(t0: float, bs: int, k1_us: float, c: int) -> list[dict]:
    """An eager step whose GPU window is k1_us + 20 us: k1, then k2 (10 us) 10 us after it."""
    return [ann(f"decode_step[bs={bs}]", t0, 300), launch(t0 + 10, 5, c), kernel(t0 + 20, k1_us, c, name="k1"),
            launch(t0 + 15 + k1_us, 5, c + 1), kernel(t0 + 30 + k1_us, 10, c + 1, name="k2")]


def test_page_notes_basis_and_capture_time(tmp_path) -> None:
    """Eager costs that dip at two sizes give one "not monotone" line; the memory basis and an estimated
    capture time (the traces' kernels per step, no dimensions) are in the page's text."""
    k1 = {1: 30.0, 2: 20.0, 4: 40.0, 8: 50.0, 16: 44.0}
    eager = [e for i, (bs, d) in enumerate(k1.items()) for e in _dipping_step(1000.0 * i, bs, d, 10 * i + 1)]
    graph = [e for i in range(2) for e in _graph_step(1000.0 * i, 4, 10 * i + 5)]
    paths = []
    for name, events in (("dips.json", eager), ("graph.json", graph)):
        (tmp_path / name).write_text(json.dumps(doc(events)))
        paths.append(tmp_path / name)
    at = page_plan(paths)
    warnings = [w.value for w in at.warning if "not monotone" in w.value]
    # one line for all of them: the eager dips at bs 2 and 16 and the graph predictions' dips
    assert len(warnings) == 1 and "at 4 places" in warnings[0] and "eager at bs 1, 2" in warnings[0], warnings
    basis = next(c.value for c in at.caption if c.value.startswith("Graph memory"))
    assert "MiB per graph x" in basis and "capture time" in basis and "kernel nodes per graph from" in basis
    assert metrics(at)["Capture time"].endswith(" s") and metrics(at)["Capture time"] != "unknown"
    assert at.number_input(key="lg_plan_max_graphs").value == 0  # no graph limit, as the command


def test_page_and_cli_on_harness_timings_and_a_histogram(tmp_path, monkeypatch, capsys) -> None:
    """The page's other inputs (bundled harness timings with the model's dimensions, an uploaded
    histogram) give the command's plan on the same files, dimensions and kernel counts included."""
    root = tmp_path / "samples"
    root.mkdir(exist_ok=True)
    timings = {"schema": "launchgap.timings/1", "device": "test", "models": {"m": DIMS}, "rows": [
        {"model": "m", "batch_size": b, "eager_us": e, "graph_us": g, "kernels_per_step": 100}
        for b, e, g in [(1, 100.0, 20.0), (4, 100.0, 50.0), (8, 120.0, 80.0)]]}
    (root / "timings.json").write_text(json.dumps(timings))
    hist = b"batch_size,count\n1,5\n2,3\n4,2\n8,1\n"
    (root / "d.csv").write_bytes(hist)
    monkeypatch.setenv("LAUNCHGAP_SAMPLES_DIR", str(root))
    monkeypatch.chdir(root)  # the command names its inputs as given: the page's names
    st.cache_resource.clear()
    want = cli_plan([], ["--timings", "timings.json", "--distribution", "d.csv"], capsys)
    assert want["sources"] == {"costs": "timings.json", "distribution": "d.csv", "capture_sizes": None,
                               "model_dims": "timings.json", "graph_nodes": "timings.json", "memory_model": None,
                               "capture_cost": None}
    at = goto(new_app(), "plan")
    at.radio(key="lg_plan_src").set_value("harness timings (JSON)").run()
    at.radio(key="lg_plan_dsrc").set_value("a CSV / JSON histogram").run()
    at.file_uploader(key="lg_plan_dist_widget").set_value(("d.csv", hist, "text/csv"))
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    _page_matches(at, want)
    shown_s = float(metrics(at)["Capture time"].removesuffix(" s"))
    assert shown_s == pytest.approx(want["memory"]["predicted_capture_s"], abs=5e-4)  # JSON rounds to 1 ms
