"""The GPU session scripts parse and plan on any machine (``--dry-run``: no torch, nothing recorded)."""
from __future__ import annotations

import gzip
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.skipif(shutil.which("bash") is None or shutil.which("timeout") is None,
                                reason="needs bash and coreutils timeout")


def _bash(args: list[str], tmp_path: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHON": sys.executable, "TMPDIR": str(tmp_path)}
    return subprocess.run(["bash", *args], cwd=REPO, env=env, capture_output=True, text=True, timeout=300)


def test_scripts_are_valid_bash() -> None:
    for script in ("bench/gpu_session.sh", "bench/gpu_e2e.sh"):
        assert subprocess.run(["bash", "-n", script], cwd=REPO).returncode == 0, script


def test_session_dry_run_plans_every_part(tmp_path: Path) -> None:
    out = tmp_path / "out"
    res = _bash(["bench/gpu_session.sh", str(out), "--dry-run"], tmp_path)
    assert res.returncode == 0, res.stderr
    log = (out / "session.log").read_text()
    parts = ["gpu-tests", "overhead", "piecewise", "serving", "fullrange", "memory-1b", "memory-8b", "memory-3b-full",
             "memory-3b-piecewise", "piecewise-3b", "serving-3b"]
    for name in parts:
        assert f"=== {name}: exit 0" in log, name
    assert "profiled vs unprofiled: plain, shapes, stack at [1, 8, 64]" in log
    assert "sweep: graph at 64 sizes [1, 2, 3, 4, 5, 6, ..., 64]" in log
    assert "sweep: eager, graph, piecewise at 4 sizes [1, 8, 32, 64]" in log
    assert "graph memory full+piecewise all-1-128: 128 sizes" in log
    assert "serving full serve ([1, 2, 4, 8, 16, 24, 32, 40, 48, 56, 64]): 48 steps" in log
    assert "fallbacks at [3, 5, 10, 25], uncaptured at [17, 22, 40]" in log  # seeded: the same on the GPU
    assert log.rstrip().splitlines()[-1].startswith("session: ")
    assert "no timings recorded" in res.stdout
    assert sorted(p.name for p in out.iterdir()) == ["session.log"]


@pytest.mark.parametrize("plan, sizes", [
    ('{"schema": "launchgap.plan/1", "buckets": [64, 8, 16]}', "8,16,64"),
    ('{"cudagraph_capture_sizes": [1, 2, 4]}', "1,2,4"),
    ("[4, 2]", "2,4"),
    ("1, 2 4\n8", "1,2,4,8"),
])
def test_e2e_reads_the_plan_and_plans_both_lists(tmp_path: Path, plan: str, sizes: str) -> None:
    p = tmp_path / "plan.txt"
    p.write_text(plan)
    res = _bash(["bench/gpu_e2e.sh", str(tmp_path / "o"), "--capture-sizes", str(p), "--steps", "20",
                 "--dry-run"], tmp_path)
    assert res.returncode == 0, res.stderr
    assert f"planned list: {sizes}" in res.stdout
    assert f"serving full planned ({json.loads('[' + sizes + ']')}): 20 steps" in res.stdout
    assert "serving full vllm-default ([1, 2, 4, 8, 16, 24, ..., 256]): 20 steps" in res.stdout


def test_e2e_refuses_a_file_without_a_list(tmp_path: Path) -> None:
    p = tmp_path / "plan.json"
    p.write_text('{"schema": "launchgap.plan/1"}')
    res = _bash(["bench/gpu_e2e.sh", str(tmp_path / "o"), "--capture-sizes", str(p), "--dry-run"], tmp_path)
    assert res.returncode == 2 and "no capture list found" in res.stderr
    res = _bash(["bench/gpu_e2e.sh", str(tmp_path / "o")], tmp_path)
    assert res.returncode == 2 and "--capture-sizes PLAN is required" in res.stderr


def test_slim_trace_keeps_the_first_steps_and_what_they_launched() -> None:
    sys.path.insert(0, str(REPO / "bench"))
    from slim_trace import first_steps

    def ev(cat, name, ts, **args):
        return {"ph": "X", "cat": cat, "name": name, "ts": ts, "dur": 1.0, "args": args}

    doc = {"traceEvents": [
        {"ph": "M", "name": "process_name", "pid": 1, "args": {"name": "p"}},
        ev("user_annotation", "execute_context_0(0)_generation_2(2)", 0.0),
        ev("cuda_runtime", "cudaLaunchKernel", 1.0, correlation=1),
        ev("user_annotation", "execute_context_0(0)_generation_1(1)", 10.0),
        ev("cuda_runtime", "cudaLaunchKernel", 11.0, correlation=2),
        ev("kernel", "k", 12.0, correlation=1),  # launched by step 1, run after step 2 began on the host: kept
        ev("kernel", "k", 13.0, correlation=2),
        ev("gpu_user_annotation", "execute_context_0(0)_generation_2(2)", 5.0),
        ev("gpu_user_annotation", "execute_context_0(0)_generation_1(1)", 12.5),
        {"ph": "f", "cat": "ac2g", "id": 2, "ts": 13.0}, {"ph": "f", "cat": "ac2g", "id": 1, "ts": 12.0}]}
    out = first_steps(doc, 1, "execute_")["traceEvents"]
    assert [(e.get("cat"), e.get("ts")) for e in out] == [
        (None, None), ("user_annotation", 0.0), ("cuda_runtime", 1.0), ("kernel", 12.0), ("gpu_user_annotation", 5.0),
        ("ac2g", 12.0)]
    assert first_steps(doc, 2, "execute_") is doc  # no step past the second: the trace as it is


def test_pytracer_record_calls_each_op_through_its_depth_of_python_frames(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    out = tmp_path / "pyt"
    env = {**os.environ, "PYTHONPATH": str(tmp_path / "pkg")}
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "launchgap").symlink_to(REPO / "analyzer")  # the package as the GPU machine imports it
    r = subprocess.run([sys.executable, str(REPO / "bench" / "pytracer_record.py"), "--out", str(out), "--depths",
                        "0,3", "--ops", "5", "--cycles", "1", "--rounds", "1"], cwd=REPO, env=env, capture_output=True,
                       text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    recs = json.loads((out / "timings_overhead.json").read_text())["profiled_vs_unprofiled"]
    assert [(x["model"], x["profiler"], x["python_calls_per_op"]) for x in recs] == [
        ("py0", "plain", 1), ("py0", "stack", 1), ("py3", "plain", 4), ("py3", "stack", 4)]
    assert all((out / x["trace"]).is_file() and x["unprofiled_eager_us"] > 0 for x in recs)
    def frames(name: str) -> dict[str, int]:
        events = json.loads(gzip.open(out / name).read())["traceEvents"]
        calls = [e["name"] for e in events if e.get("cat") == "python_function"]
        return {f: sum(n.endswith(f": {f}") for n in calls) for f in ("op", "wrap")}

    # one profiled step (active=3 keeps three): 5 ops, each through its op frame and its 3 wrappers
    assert frames("py3_bs1_eager_stack.json.gz") == {"op": 15, "wrap": 45}
    assert frames("py0_bs1_eager_stack.json.gz") == {"op": 15, "wrap": 0}
    assert frames("py3_bs1_eager_plain.json.gz") == {"op": 0, "wrap": 0}  # no stacks: no Python calls recorded
