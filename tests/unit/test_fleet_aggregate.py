"""Fleet summaries and their reduction: exact numbers on tiny inputs (no Dask here)."""
from __future__ import annotations

import json

import pytest

from launchgap.errors import InputError
from launchgap.fleet import (
    RUN_SCHEMA, TRACE_SCHEMA, Distribution, FleetAccumulator, is_done, latest_records, load_fleet_results,
    results_header, summarize_trace,
)
from launchgap.gaps import CAUSES
from launchgap.planning.planner import PlanOptions
from launchgap.planning.request import PlanRequest
from launchgap.predict import PredictionModel
from launchgap.render import render_fleet
from launchgap.report import AnalysisOptions
from tests.unit.kineto_tiny import write
from tests.unit.test_report_tiny import EVENTS

#: Model constants pinned here so the exact numbers below do not move when the defaults are refitted.
MODEL = PredictionModel(node_us=0.39, long_kernel_us=20.0, graph_launch_us=5.0, profiler_us_per_host_event=1.5)
OPTS = AnalysisOptions(model=MODEL)


def test_summary_of_tiny_trace(tmp_path) -> None:
    # The one-step trace of test_report_tiny: window [10, 95], busy 50, 5 host events.
    p = write(tmp_path, EVENTS)
    s = summarize_trace(p, OPTS)
    assert s["schema"] == TRACE_SCHEMA and s["error"] is None and s["error_kind"] is None
    assert s["path"] == str(p) and s["size_bytes"] == p.stat().st_size and s["mtime_ns"] == p.stat().st_mtime_ns
    assert s["mode"] == "eager" and s["format"] == "kineto" and s["rank"] is None
    st = s["steps"]
    assert st["batch_size"] == [2] and st["dur_us"] == [85.0] and st["gpu_busy_us"] == [50.0]
    assert st["gpu_idle_us"] == [35.0] and st["kernels"] == [4] and st["host_events"] == [5]
    assert st["predicted_graph_us"] == [pytest.approx(56.17)]  # busy 50 + 0.39 x 3 short kernels + 5
    assert {c: v[0] for c, v in st["idle_us_by_cause"].items()} == {
        "host": 13.0, "launch": 15.0, "sync": 2.0, "gpu": 5.0, "unattributed": 0.0, "peer": 0.0}
    assert s["batch_histogram"] == {"2": 1}
    # cost = profiled 85 us x (unprofiled 77.5 / profiled 85) = 77.5 us (85 - 1.5 us x 5 host events)
    assert s["per_batch"] == [{"batch_size": 2, "steps": 1, "step_us_median": 85.0, "cost_us_median": 77.5,
                               "predicted_graph_us_median": 56.17, "gpu_busy_us_median": 50.0}]
    assert s["summary"]["verdict"] == "launch-bound"
    assert s["devices"][0]["gpu_busy_us"] == 50.0
    json.dumps(s, allow_nan=False)  # JSON-safe as it is


def test_summary_follows_options(tmp_path) -> None:
    p = write(tmp_path, EVENTS)
    s = summarize_trace(p, AnalysisOptions(model=MODEL, observed_step_us=70.0))
    assert s["summary"]["observed_step_us"] == 70.0
    assert s["summary"]["predicted_speedup"] == pytest.approx(70.0 / 56.17, abs=1e-3)


def test_bad_files_become_error_summaries(tmp_path, monkeypatch) -> None:
    bad = tmp_path / "bad.json.gz"
    bad.write_bytes(b"\x00garbage")
    s = summarize_trace(bad)
    assert s["error_kind"] == "input" and "not a trace" in s["error"] and s["size_bytes"] == 8
    assert "steps" not in s
    missing = summarize_trace(tmp_path / "gone.json")
    assert missing["error_kind"] == "input" and "no such file" in missing["error"]

    def boom(*a, **k):
        raise RuntimeError("bug")

    monkeypatch.setattr("launchgap.fleet.analyze_file", boom)
    s = summarize_trace(write(tmp_path, EVENTS))
    assert s["error_kind"] == "internal" and s["error"] == "internal error: RuntimeError: bug"


def _summary(path: str, mode: str, bs: list, dur: list[float], *, busy: list[float] | None = None,
             pred: list[float] | None = None, idle: dict[str, list[float]] | None = None,
             step_us: float | None = None, unprof_us: float | None = None, speedup: float = 1.0,
             idle_fraction: float = 0.0, rank: int | None = None) -> dict:
    """A hand-built fleet summary (only what the reducer reads)."""
    n = len(dur)
    busy = busy if busy is not None else [d / 2 for d in dur]
    idle = {c: (idle or {}).get(c, [0.0] * n) for c in CAUSES}
    med = step_us if step_us is not None else sorted(dur)[(n - 1) // 2]
    return {"schema": TRACE_SCHEMA, "path": path, "size_bytes": 1, "mtime_ns": 1, "error": None, "error_kind": None,
            "mode": mode, "rank": rank, "world_size": None,
            "summary": {"step_us_median": med, "estimated_unprofiled_step_us_median": unprof_us or med,
                        "gpu_idle_fraction": idle_fraction, "predicted_speedup": speedup,
                        "verdict": "launch-bound" if mode == "eager" else "already graphed"},
            "steps": {"batch_size": bs, "dur_us": dur, "gpu_busy_us": busy, "predicted_graph_us": pred or busy,
                      "idle_us_by_cause": idle}}


def test_distributions_outliers_and_idle() -> None:
    acc = FleetAccumulator()
    # steps of 100 us: host-side idle (host+launch+sync) 10+5+0 and 30+5+10 -> 60 / 200 = 0.3
    acc.add(_summary("a", "eager", [8, 8], [100.0, 100.0], busy=[50.0, 50.0], step_us=100.0, speedup=2.0,
                     idle={"host": [10.0, 30.0], "launch": [5.0, 5.0], "sync": [0.0, 10.0], "gpu": [35.0, 5.0]},
                     idle_fraction=0.5, rank=0))
    acc.add(_summary("b", "eager", [8], [300.0], busy=[300.0], speedup=1.0, rank=1))
    acc.add(_summary("c", "eager", [8, None], [200.0, 200.0], busy=[100.0, 100.0], speedup=4.0,
                     idle={"host": [100.0, 100.0]}, idle_fraction=0.5, rank=2))
    acc.add(_summary("d", "graph", [8], [400.0], busy=[400.0], speedup=1.0, rank=3))
    acc.add({"schema": TRACE_SCHEMA, "path": "e", "error": "not a trace", "error_kind": "input"})
    rep = acc.finish(top=2)
    assert rep.traces == 4 and rep.failed == 1 and rep.steps == 6
    assert rep.errors[0].path == "e" and rep.errors[0].kind == "input"
    # step medians 100, 300, 200, 400: numpy's linear percentiles -> p10 130, p50 250, p90 370
    assert rep.distributions["step_us"] == Distribution(4, 130.0, 250.0, 370.0, 400.0)
    assert rep.distributions["predicted_speedup"] == Distribution(4, 1.0, 1.5, 3.4, 4.0)
    # host idle fractions 0.3, 0, 200/400 = 0.5, 0
    assert rep.distributions["host_idle_fraction"] == Distribution(4, 0.0, 0.15, 0.44, 0.5)
    # eager bs 8 peers: medians 100, 300, 200 -> group median 200; the graph trace is alone in its group
    ratio = {r.path: r.step_vs_peers for r in rep.rows}
    assert ratio == {"a": 0.5, "b": 1.5, "c": 1.0, "d": 1.0}
    assert [r.path for r in rep.slowest] == ["b", "d"]  # 1.5x, then 1.0x at 400 us before c's 200 us
    assert [r.path for r in rep.most_launch_bound] == ["c", "a"]
    # windows 200 + 300 + 400 + 400 = 1300 us; busy 100 + 300 + 200 + 400 = 1000 us
    assert rep.gpu_idle_fraction == pytest.approx(300 / 1300, abs=1e-4)
    assert rep.idle_fraction_by_cause["host"] == pytest.approx(240 / 1300, abs=1e-4)
    assert rep.idle_fraction_by_cause["sync"] == pytest.approx(10 / 1300, abs=1e-4)
    assert rep.batch_histogram == {8: 5} and rep.unknown_batch_steps == 1
    assert rep.modes == {"eager": 3, "graph": 1}
    assert rep.verdicts == {"launch-bound": 3, "already graphed": 1}
    d = rep.to_dict()
    assert d["schema"] == "launchgap.fleet/1" and d["batch_histogram"] == {"8": 5}
    json.dumps(d, allow_nan=False)
    text = render_fleet(rep).splitlines()
    assert text[0] == "Fleet: 4 traces analysed, 1 failed, 6 steps"
    assert any(ln.split() == ["b", "1", "eager", "-", "8", "300.0", "1.50x", "launch-bound"] for ln in text)
    assert "  8: 5 (100%)" in text
    assert "Failed traces (1)" in text and "  e: not a trace" in text


def test_fleet_plan_from_merged_costs() -> None:
    acc = FleetAccumulator()
    # eager bs 1: durations x (55 / 110) -> 50, 60, 55 -> median 55; predicted graph median 21
    acc.add(_summary("a", "eager", [1, 1, 1], [100.0, 120.0, 110.0], pred=[20.0, 22.0, 21.0], unprof_us=55.0))
    # eager bs 4: 200 x 150/200 = 150; predicted 40 (a graph trace at bs 4 wins over it)
    acc.add(_summary("b", "eager", [4, 4], [200.0, 200.0], pred=[40.0, 40.0], unprof_us=150.0))
    acc.add(_summary("c", "graph", [4, 4], [50.0, 54.0], step_us=52.0))
    rep = acc.finish()
    plan = rep.plan
    assert [(p.batch_size, p.eager_us, p.graph_us, p.source) for p in plan.costs.points] == [
        (1, 55.0, 21.0, "predicted"), (4, 150.0, 52.0, "measured")]
    assert plan.buckets == (1, 4)
    # distribution 3 steps at bs 1, 4 at bs 4: (3 x 21 + 4 x 52) / 7
    assert plan.expected_step_us == pytest.approx(271 / 7)
    assert plan.all_eager_expected_step_us == pytest.approx((3 * 55 + 4 * 150) / 7)
    one = acc.finish(PlanRequest(options=PlanOptions(max_graphs=1))).plan
    assert one.buckets == (4,) and one.expected_step_us == pytest.approx(52.0)


def test_no_plan_without_batch_sizes_or_eager_costs() -> None:
    acc = FleetAccumulator()
    acc.add(_summary("a", "eager", [None], [100.0]))
    rep = acc.finish()
    assert rep.plan is None and "no step with a known batch size" in rep.plan_note
    acc2 = FleetAccumulator()
    acc2.add(_summary("g", "graph", [4], [50.0]))
    rep2 = acc2.finish()
    assert rep2.plan is None and "only graph-mode traces" in rep2.plan_note
    assert rep2.traces == 1  # the report stands without a plan


def _results_file(tmp_path, records: list[dict], tail: str = "") -> str:
    p = tmp_path / "r.jsonl"
    lines = [json.dumps(results_header(AnalysisOptions(), 1000))] + [json.dumps(r) for r in records]
    p.write_text("\n".join(lines) + "\n" + tail, encoding="utf-8")
    return str(p)


def test_results_file_latest_record_wins_and_cut_lines_are_skipped(tmp_path) -> None:
    old = _summary("a", "eager", [8], [999.0])
    new = _summary("a", "eager", [8], [100.0])
    new["mtime_ns"] = 2
    b = _summary("b", "eager", [8], [300.0])
    path = _results_file(tmp_path, [old, b, new], tail='{"schema": "launchgap.fleet-tr')
    latest, warnings = latest_records(path)
    assert latest["a"]["line"] == 4 and latest["a"]["mtime_ns"] == 2 and latest["b"]["line"] == 3
    assert len(warnings) == 1 and "1 unreadable line(s) (5)" in warnings[0]
    rep = load_fleet_results(path)
    assert rep.traces == 2 and sorted(r.step_us_median for r in rep.rows) == [100.0, 300.0]
    assert rep.warnings == warnings
    assert rep.analysis_options == json.loads(json.dumps(results_header(AnalysisOptions(), 1000)))["analysis_options"]


def test_damaged_record_is_named_not_raised(tmp_path) -> None:
    broken = _summary("a", "eager", [8, 8], [100.0])  # two batch sizes, one duration
    path = _results_file(tmp_path, [broken, _summary("b", "eager", [8], [300.0])])
    rep = load_fleet_results(path)
    assert rep.traces == 1 and rep.rows[0].path == "b"
    assert "line 2 is not a valid launchgap.fleet-trace/1 record" in rep.warnings[0]


def test_not_a_results_file(tmp_path) -> None:
    p = tmp_path / "x.jsonl"
    p.write_text('{"schema": "launchgap.report/1"}\n')
    with pytest.raises(InputError, match=f"not a launchgap fleet results file.*{RUN_SCHEMA}"):
        load_fleet_results(p)
    with pytest.raises(InputError, match="no such results file"):
        load_fleet_results(tmp_path / "nope.jsonl")


def test_is_done() -> None:
    ident = {"path": "a", "size_bytes": 10, "mtime_ns": 5}
    assert is_done({"size_bytes": 10, "mtime_ns": 5, "error_kind": None, "line": 2}, ident)
    assert is_done({"size_bytes": 10, "mtime_ns": 5, "error_kind": "input", "line": 2}, ident)  # bad file stays bad
    assert not is_done({"size_bytes": 10, "mtime_ns": 5, "error_kind": "worker", "line": 2}, ident)  # retried
    assert not is_done({"size_bytes": 10, "mtime_ns": 6, "error_kind": None, "line": 2}, ident)  # file changed
    assert not is_done({"size_bytes": 11, "mtime_ns": 5, "error_kind": None, "line": 2}, ident)
    assert not is_done(None, ident)


def test_plan_batches_groups_small_traces_and_keeps_large_ones_alone() -> None:
    from launchgap.fleet import BATCH_MAX_BYTES, plan_batches

    # 10 traces, 2 workers: 10 // (2 workers x 4 tasks each) = 1 per task (small fleets are unchanged).
    assert plan_batches([100] * 10, 2) == [[i] for i in range(10)]
    # 40 traces, 2 workers: 5 per task, 8 tasks.
    assert plan_batches([100] * 40, 2) == [list(range(i, i + 5)) for i in range(0, 40, 5)]
    # 1000 traces, 1 worker: capped at 8 per task.
    b = plan_batches([1] * 1000, 1)
    assert len(b) == 125 and {len(x) for x in b} == {8}
    # A batch closes before it passes BATCH_MAX_BYTES: a large trace is a task alone, the small ones after it batch.
    big = BATCH_MAX_BYTES
    assert plan_batches([big, big // 2, big // 2, 1, 1] + [1] * 35, 1) == \
        [[0], [1, 2], [3, 4, 5, 6, 7, 8, 9, 10]] + [list(range(i, min(i + 8, 40))) for i in range(11, 40, 8)]
    assert plan_batches([], 4) == []


def test_summarize_traces_is_summarize_trace_in_order(tmp_path) -> None:
    from launchgap.fleet import summarize_traces

    p = write(tmp_path, EVENTS)
    bad = tmp_path / "bad.json"
    bad.write_bytes(b"{")
    recs = summarize_traces([p, bad, p], OPTS)
    assert [r["path"] for r in recs] == [str(p), str(bad), str(p)]
    assert [r["error_kind"] for r in recs] == [None, "input", None]
    assert recs[0]["steps"] == summarize_trace(p, OPTS)["steps"]


def _shifted(events: list[dict], dt: float, dc: int, bs: int) -> list[dict]:
    """EVENTS moved ``dt`` us later, correlation ids ``dc`` higher, the step marker at batch ``bs``."""
    out = []
    for e in events:
        e = json.loads(json.dumps(e))
        e["ts"] += dt
        if "correlation" in e.get("args", {}):
            e["args"]["correlation"] += dc
        if e["name"].startswith("decode_step"):
            e["name"] = f"decode_step[bs={bs}]"
        out.append(e)
    return out


def test_fleet_sweep_gives_costs_only_as_in_plan(tmp_path) -> None:
    from launchgap.loaders import load_trace
    from launchgap.planning.request import build_plan, trace_steps
    from launchgap.report import analyze_trace
    from tests.unit.kineto_tiny import write

    # a launchgap record sweep: one step, decode_step[bs=2]; a served trace: steps at bs 2 and 5
    sweep = write(tmp_path, EVENTS, name="sweep.json")
    served = write(tmp_path, EVENTS + _shifted(EVENTS, 200.0, 100, 5), name="served.json")
    recs = [summarize_trace(p, OPTS) for p in (sweep, served)]
    assert [r["benchmark"] for r in recs] == [True, False]
    assert [r["batch_histogram"] for r in recs] == [{"2": 1}, {"2": 1, "5": 1}]  # each trace's own steps
    acc = FleetAccumulator()
    for r in recs:
        acc.add(r)
    rep = acc.finish()
    # the fleet's histogram is the served trace's two steps; the sweep's bs-2 step is a cost, not traffic
    assert rep.batch_histogram == {2: 1, 5: 1} and rep.benchmark_traces == 1 and rep.unknown_batch_steps == 0
    reports = [analyze_trace(load_trace(p), OPTS) for p in (sweep, served)]
    ref, notes = build_plan(PlanRequest().with_traces([trace_steps(r) for r in reports], rep.workloads[0].workload.label))
    assert rep.plan.to_dict() == ref.to_dict()
    assert [(p["batch_size"], p["weight"]) for p in ref.to_dict()["per_batch"]] == [(2, 0.5), (5, 0.5)]
    assert "1 benchmark trace(s) (recorded by launchgap record, or --costs) give costs only" in " ".join(notes)
    assert "(2 steps with a known size, 0 unknown; 1 launchgap record sweep(s) give costs only)" in render_fleet(rep)
