"""``launchgap fleet`` on a Dask LocalCluster of 2 worker processes, over copies of the bundled samples.

Bounded: 6 small real traces (3 bundled samples in two "server" folders) and a bad file per
run; one subprocess run over 10 copies that is interrupted and resumed.
"""
from __future__ import annotations


import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from launchgap.cli import main
from launchgap.commands.fleet import local_cluster
from launchgap.fleet import STEP_COLUMNS, load_fleet_results
from launchgap.gaps import CAUSES
from launchgap.loaders import load_trace
from launchgap.planning.inputs import costs_from_steps, distribution_from_steps
from launchgap.planning.request import PlanInput, PlanRequest, build_plan, trace_steps
from launchgap.planning.planner import plan_capture
from launchgap.ranks import analyze_with_collectives

pytest.importorskip("dask.distributed", reason="the fleet command needs dask[distributed]")

REPO = Path(__file__).resolve().parents[2]
#: Three of traces/h200-1b (the dashboard's default samples): an eager/graph pair and a second batch size.
SAMPLE_FILES = ("1b_bs64_eager.json.gz", "1b_bs8_eager.json.gz", "1b_bs8_graph.json.gz")


@pytest.fixture(scope="module")
def scheduler() -> str:
    """Address of a LocalCluster with 2 worker processes, one thread each (shared by this module)."""
    with local_cluster(2) as cluster:
        yield cluster.scheduler_address


@pytest.fixture()
def fleet_dir(tmp_path: Path, reference_traces: Path) -> Path:
    """Two server folders with the bundled sample traces, and one file that is not a trace."""
    root = tmp_path / "fleet"
    for srv in ("srv-a", "srv-b"):
        (root / srv).mkdir(parents=True)
        for name in SAMPLE_FILES:
            shutil.copy(reference_traces / "h200-1b" / name, root / srv / name)
    (root / "srv-b" / "broken.json.gz").write_bytes(b"this is not a trace")
    return root


def _lines(path: Path) -> list[dict]:
    return [json.loads(x) for x in path.read_text().splitlines()[1:]]


def test_fleet_matches_analyze_trace_by_trace(fleet_dir: Path, tmp_path: Path, scheduler: str, capsys) -> None:
    out = tmp_path / "results.jsonl"
    dist = tmp_path / "hist.csv"  # the sample traces are launchgap record sweeps: costs only, the traffic from here
    dist.write_text("8,3\n64,1\n")
    rc = main(["fleet", str(fleet_dir), "--scheduler", scheduler, "--out", str(out), "--format", "json",
               "--distribution", str(dist)])
    assert rc == 2  # one trace failed; the others were analysed
    cap = capsys.readouterr()
    rep = json.loads(cap.out)
    assert rep["schema"] == "launchgap.fleet/1" and rep["traces"] == 6 and rep["failed"] == 1
    broken = str((fleet_dir / "srv-b" / "broken.json.gz").resolve())
    assert rep["errors"] == [{"path": broken, "error": rep["errors"][0]["error"], "kind": "input"}]
    assert "not a trace" in rep["errors"][0]["error"]
    assert f"fleet: FAILED {broken}: not a trace" in cap.err
    assert "fleet: [7/7] 100%" in cap.err

    recs = _lines(out)
    assert len(recs) == 7 and len({r["path"] for r in recs}) == 7
    good = [r for r in recs if not r["error"]]
    reports = []
    for r in good:  # the same numbers as `launchgap analyze`, trace by trace
        ref = analyze_with_collectives(load_trace(r["path"]))  # what `analyze` runs on a lone trace
        reports.append(ref)
        d = ref.to_dict()
        assert r["summary"] == d["summary"]
        assert r["devices"] == d["devices"]
        assert r["mode"] == d["mode"] and r["warnings"] == d["warnings"]
        for c in STEP_COLUMNS:
            assert r["steps"][c] == [s[c] for s in d["steps"]], c
        for c in CAUSES:
            assert r["steps"]["idle_us_by_cause"][c] == [s["idle_us_by_cause"][c] for s in d["steps"]]
        st = os.stat(r["path"])
        assert (r["size_bytes"], r["mtime_ns"]) == (st.st_size, st.st_mtime_ns)

    # Fleet aggregates against the per-trace reports.
    assert rep["steps"] == sum(len(x.steps) for x in reports)
    # launchgap record sweeps give costs, never the distribution: in a fleet as in launchgap plan
    steps = [trace_steps(r) for r in reports]
    assert all(s.benchmark for s in steps) and distribution_from_steps(steps) == {}
    assert rep["batch_histogram"] == {} and rep["benchmark_traces"] == 6
    assert rep["modes"] == {"eager": 4, "graph": 2}
    medians = sorted(x.summary.step_us_median for x in reports)
    assert rep["distributions"]["step_us"]["max"] == medians[-1]
    # The fleet plan is what the one plan builder makes of the same traces and histogram (launchgap plan's rules).
    hist = PlanInput("distribution", str(dist), ("distribution",), path=str(dist))
    ref_plan = build_plan(PlanRequest(inputs=(hist,)).with_traces(steps, reports[0].workload.label))[0].to_dict()
    assert rep["plan"] == ref_plan
    assert [(p["batch_size"], p["weight"]) for p in rep["plan"]["per_batch"]] == [(8, 0.75), (64, 0.25)]
    assert rep["plan"]["costs"] == plan_capture(costs_from_steps(steps), {8: 3, 64: 1}).to_dict()["costs"]
    assert rep["plan"]["buckets"]

    # The dashboard's entry point reads the same report back from the results file.
    assert load_fleet_results(out, PlanRequest(inputs=(hist,))).to_dict() == rep


def test_rerun_skips_done_traces(fleet_dir: Path, tmp_path: Path, scheduler: str, capsys) -> None:
    out = tmp_path / "results.jsonl"
    assert main(["fleet", str(fleet_dir / "srv-a"), "--scheduler", scheduler, "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert text.startswith("Fleet: 3 traces analysed, 0 failed, 18 steps\n")
    # launchgap record sweeps only: costs, no traffic to plan for (as launchgap plan says)
    assert ("Capture plan for the fleet\n  none: no batch-size distribution: benchmark traces (recorded by launchgap "
            "record, or passed with --costs) give costs only; pass --distribution FILE or a serving trace") in text
    assert "unknown; 3 launchgap record sweep(s) give costs only)" in text
    assert len(_lines(out)) == 3
    # Now the whole fleet: srv-a is already there and only srv-b is analysed.
    assert main(["fleet", str(fleet_dir), "--scheduler", scheduler, "--out", str(out), "--format", "json"]) == 2
    cap = capsys.readouterr()
    assert "fleet: 3 of 7 traces already in" in cap.err and "analysing 4" in cap.err
    assert "fleet: [4/4] 100%" in cap.err
    recs = _lines(out)
    assert len(recs) == 7 and len({r["path"] for r in recs}) == 7
    full = json.loads(cap.out)
    assert full["traces"] == 6 and full["failed"] == 1
    # Everything done (the bad file stays bad while unchanged): no worker is even contacted.
    rc = main(["fleet", str(fleet_dir), "--scheduler", "tcp://127.0.0.1:1", "--out", str(out), "--format", "json"])
    cap = capsys.readouterr()
    assert rc == 2 and "fleet: 7 of 7 traces already in" in cap.err and "analysing 0" in cap.err
    assert json.loads(cap.out) == full
    # A changed file is analysed again; its new record supersedes the old one.
    changed = fleet_dir / "srv-a" / "1b_bs8_graph.json.gz"
    os.utime(changed, ns=(time.time_ns(), time.time_ns()))
    main(["fleet", str(fleet_dir), "--scheduler", scheduler, "--out", str(out)])
    assert "fleet: 6 of 7 traces already in" in capsys.readouterr().err
    assert len(_lines(out)) == 8
    assert load_fleet_results(out).traces == 6
    # Only the given paths are reported; with no paths, the whole file is.
    main(["fleet", str(fleet_dir / "srv-a"), "--scheduler", "tcp://127.0.0.1:1", "--out", str(out), "--format",
          "json"])
    assert json.loads(capsys.readouterr().out)["traces"] == 3
    assert main(["fleet", "--out", str(out), "--format", "json"]) == 2
    assert json.loads(capsys.readouterr().out)["traces"] == 6


def test_line_cut_by_an_interruption_is_redone(fleet_dir: Path, tmp_path: Path, scheduler: str, capsys) -> None:
    out = tmp_path / "results.jsonl"
    main(["fleet", str(fleet_dir), "--scheduler", scheduler, "--out", str(out)])
    capsys.readouterr()
    text = out.read_text()
    last = text.splitlines()[-1]
    cut_path = json.loads(last)["path"]
    out.write_text(text[: len(text) - len(last) // 2 - 1])  # the last record loses its second half
    main(["fleet", str(fleet_dir), "--scheduler", scheduler, "--out", str(out), "--format", "json"])
    cap = capsys.readouterr()
    assert "fleet: 6 of 7 traces already in" in cap.err and "[1/1] 100%" in cap.err
    rep = json.loads(cap.out)
    assert rep["traces"] + rep["failed"] == 7
    assert any("skipped 1 unreadable line(s)" in w for w in rep["warnings"])
    assert cut_path in {r["path"] for r in rep["rows"]} | {e["path"] for e in rep["errors"]}


def test_interrupted_run_resumes(tmp_path: Path, reference_traces: Path, scheduler: str, capsys) -> None:
    """A real interruption: SIGINT to a running `launchgap fleet` (its own 2-process LocalCluster)."""
    src = reference_traces / "h200-1b" / "1b_bs8_eager.json.gz"
    d = tmp_path / "many"
    d.mkdir()
    n = 40  # enough that the run is still going once two results are in
    for i in range(n):
        shutil.copy(src, d / f"rank{i:02d}.json.gz")
    out = tmp_path / "results.jsonl"
    proc = subprocess.Popen([sys.executable, "-m", "launchgap", "fleet", str(d), "--workers", "2", "--out", str(out)],
                            cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            # a suite started in the background (`make test &`) ignores SIGINT, and the child
                            # would inherit that: Python then installs no KeyboardInterrupt handler
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and proc.poll() is None:
        if out.exists() and len(out.read_text().splitlines()) >= 3:  # header + 2 results
            break
        time.sleep(0.02)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err.decode()
    assert b"launchgap: interrupted" in err
    done = len(_lines(out))
    assert 2 <= done < n, f"the run finished ({done} results) before it could be interrupted"

    assert main(["fleet", str(d), "--scheduler", scheduler, "--out", str(out), "--format", "json"]) == 0
    cap = capsys.readouterr()
    assert f"fleet: {done} of {n} traces already in" in cap.err and f"analysing {n - done}" in cap.err
    recs = _lines(out)
    assert len(recs) == n and len({r["path"] for r in recs}) == n
    assert json.loads(cap.out)["traces"] == n


def test_other_options_refuse_the_results_file(fleet_dir: Path, tmp_path: Path, scheduler: str, capsys) -> None:
    out = tmp_path / "results.jsonl"
    main(["fleet", str(fleet_dir / "srv-a"), "--scheduler", scheduler, "--out", str(out)])
    capsys.readouterr()
    rc = main(["fleet", str(fleet_dir / "srv-a"), "--scheduler", scheduler, "--out", str(out), "--node-us", "1"])
    assert rc == 2
    assert "was written with other analysis_options" in capsys.readouterr().err


def test_clear_errors_without_dask_or_scheduler(fleet_dir: Path, monkeypatch, capsys) -> None:
    import dask

    with dask.config.set({"distributed.comm.timeouts.connect": "1s"}):
        rc = main(["fleet", str(fleet_dir / "srv-a"), "--scheduler", "tcp://127.0.0.1:1"])
    assert rc == 2
    err = capsys.readouterr().err
    assert err.startswith("launchgap: error: cannot reach the Dask scheduler at tcp://127.0.0.1:1")
    monkeypatch.setitem(sys.modules, "dask.distributed", None)
    assert main(["fleet", str(fleet_dir / "srv-a")]) == 2
    assert "pip install 'launchgap[fleet]'" in capsys.readouterr().err
    assert main(["fleet", str(fleet_dir / "nowhere*.json")]) == 2
    assert "no files match this pattern" in capsys.readouterr().err
    assert main(["fleet", str(fleet_dir), "--workers", "2", "--scheduler", "tcp://127.0.0.1:1"]) == 2
    assert "--workers sets up local workers" in capsys.readouterr().err
    assert main(["fleet"]) == 2
    assert "give trace files, directories or globs, or --out" in capsys.readouterr().err
