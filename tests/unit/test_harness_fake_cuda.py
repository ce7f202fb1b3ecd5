"""The harness's CUDA-only control flow on the CPU, through a stand-in ``torch.cuda``.

Capturing is what a CPU cannot do: here a "capture" runs the captured function once and a
"replay" runs it again, each capture grows the allocator's reserved memory by 2 MiB and the
driver's used memory by 3 MiB, and every graph has 42 kernel nodes. What is left to check
is the harness's own bookkeeping on the CUDA paths: which sizes are captured in which order
and pool, what each graph-memory entry, sweep row, profiler row and serving entry holds, and
that the file validates. (Replays against eager, weak aliases and node counting have their
own tests; the real thing runs in tests/integration/test_harness_gpu.py.)
"""
from __future__ import annotations

import contextlib
import time
from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch", reason="torch not installed (pip install 'launchgap[record]')")

from launchgap.cli import main  # noqa: E402
from launchgap.timings import load_timings  # noqa: E402

MIB = 1 << 20


class _Event:
    def __init__(self, enable_timing: bool = False) -> None:
        self.t = 0.0

    def record(self, stream: Any = None) -> None:
        self.t = time.perf_counter()

    def elapsed_time(self, other: _Event) -> float:
        return (other.t - self.t) * 1e3


class _Stream:
    def wait_stream(self, other: Any) -> None:
        pass


class _Graph:
    def __init__(self, fn: Any) -> None:
        self.fn = fn

    def replay(self) -> None:
        self.fn()


@pytest.fixture
def fake_cuda(monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    from launchgap.harness import graphs, profiling, serving
    from launchgap.harness.sweep import run
    from launchgap.harness.model import Decoder

    state: dict[str, Any] = {"reserved": 0, "used": 10 * 1024 * MIB, "captures": [], "pools": set()}

    def capture_one(torch_: Any, fn: Any, pool: Any, stream: Any, keep: bool) -> tuple[Any, float, int | None]:
        fn()
        state["reserved"] += 2 * MIB
        state["used"] += 3 * MIB
        state["captures"].append(pool)
        state["pools"].add(id(pool))
        return _Graph(fn), 0.01, 42 if keep else None

    class CpuDecoder(Decoder):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            kwargs["device"] = "cpu"
            super().__init__(*args, **kwargs)

    real_record_steps = profiling.record_steps

    def record_steps_cpu(torch_: Any, body: Any, dst: Path, on_cuda: bool, **kw: Any) -> None:
        real_record_steps(torch_, body, dst, False, **kw)

    c = torch.cuda
    for name, value in {
        "is_available": lambda: True, "get_device_name": lambda i=0: "Fake GPU", "synchronize": lambda: None,
        "empty_cache": lambda: None, "memory_reserved": lambda: state["reserved"],
        "mem_get_info": lambda: (80 * 1024 * MIB - state["used"], 80 * 1024 * MIB),
        "graph_pool_handle": lambda: object(), "Stream": _Stream, "current_stream": lambda: _Stream(),
        "stream": lambda s: contextlib.nullcontext(), "Event": _Event,
    }.items():
        monkeypatch.setattr(c, name, value)
    monkeypatch.setattr(graphs, "_capture_one", capture_one)
    monkeypatch.setattr(graphs, "replay_error", lambda torch_, model, cap: 0.0)
    monkeypatch.setattr(run, "Decoder", CpuDecoder)
    monkeypatch.setattr(run, "nvtx_range_factory", lambda torch_, on_cuda: lambda msg: contextlib.nullcontext())
    monkeypatch.setattr(profiling, "record_steps", record_steps_cpu)
    monkeypatch.setattr(serving, "record_steps", record_steps_cpu)
    return state


SMALL = ["--model", "tiny", "--layers", "2", "--context-len", "32", "--start-pos", "4", "--repeats", "2",
         "--warmup", "1", "--steps", "1", "--no-micro", "--no-kernel-count"]


def test_sweep_profiler_rows_and_graph_memory(tmp_path: Path, fake_cuda: dict[str, Any]) -> None:
    out = tmp_path / "o"
    rc = main(["record", *SMALL, "--batch-sizes", "1,2", "--modes", "eager,graph,piecewise", "--no-trace",
               "--trace-batch-sizes", "2", "--profiler-settings", "plain", "--capture-lists", "pow2-4,single-4",
               "--out", str(out)])
    assert rc == 0
    doc = load_timings(out / "timings.json")
    assert doc["device"] == "Fake GPU"
    rows = {r["batch_size"]: r for r in doc["rows"]}
    for r in rows.values():
        assert r["eager_us"] > 0 and r["graph_us"] > 0 and r["piecewise_us"] > 0
        assert (r["graph_nodes"], r["piecewise_nodes"], r["piecewise_graphs"]) == (42, 3 * 42, 3)
        assert (r["graph_pool_bytes"], r["piecewise_pool_bytes"]) == (2 * MIB, 3 * 2 * MIB)
        assert r["capture_s"] == 0.01 and r["piecewise_capture_s"] == 0.03
        assert r["graph_replay_ok"] is True and r["piecewise_replay_ok"] is True
    (pvu,) = doc["profiled_vs_unprofiled"]
    assert (pvu["batch_size"], pvu["profiler"], pvu["repeats"]) == (2, "plain", 2)
    # The graph step is timed in the blocks around the trace (a capture of its own), not taken from the sweep.
    g_before, g_after = pvu["unprofiled_graph_us_before"], pvu["unprofiled_graph_us_after"]
    assert min(g_before, g_after) <= pvu["unprofiled_graph_us"] <= max(g_before, g_after)
    assert 1 <= pvu["attempts"] <= 3 and pvu["drift_limit"] == 0.05
    # drift is rounded from the unrounded steps: against the stored (rounded) steps it agrees to its last digit
    assert pvu["drift"] == pytest.approx(pvu["unprofiled_eager_us_after"] / pvu["unprofiled_eager_us_before"] - 1,
                                         abs=1e-4)
    assert (out / pvu["trace"]).exists()
    mem = {(g["mode"], g["list_name"]): g for g in doc["graph_memory"]}
    full, pw = mem[("full", "pow2-4")], mem[("piecewise", "pow2-4")]
    assert full["capture_sizes"] == [1, 2, 4] and [p["size"] for p in full["per_size"]] == [4, 2, 1]
    assert (full["graphs"], full["reserved_mib"], full["device_used_mib"]) == (3, 6.0, 9.0)
    assert full["nodes_per_graph"] == {"1": 42, "2": 42, "4": 42} and full["capture_s"] == 0.03
    assert (pw["graphs"], pw["reserved_mib"], pw["device_used_mib"]) == (9, 18.0, 27.0)
    assert pw["nodes_per_graph"] == {"1": 126, "2": 126, "4": 126}
    assert pw["per_size"][0] == {"size": 4, "reserved_mib": 6.0, "device_used_mib": 9.0, "capture_s": 0.03,
                                 "nodes": 126}
    assert mem[("full", "single-4")]["graphs"] == 1 and mem[("piecewise", "single-4")]["graphs"] == 3
    assert "weak aliases" in doc["graph_memory_method"]["piecewise_outputs"]
    # Sweep graphs: one pool per size (and per mode); the profiled size's graph: one; each list: one pool
    # for all its captures.
    assert len(fake_cuda["pools"]) == 2 * 2 + 1 + 4
    # A rerun finds the rows, profiler rows and lists done.
    n = len(fake_cuda["captures"])
    assert main(["record", *SMALL, "--batch-sizes", "1,2", "--modes", "eager,graph,piecewise", "--no-trace",
                 "--trace-batch-sizes", "2", "--profiler-settings", "plain", "--capture-lists", "pow2-4,single-4",
                 "--out", str(out)]) == 0
    assert len(fake_cuda["captures"]) == n


def test_serving_on_the_cuda_path(tmp_path: Path, fake_cuda: dict[str, Any]) -> None:
    out = tmp_path / "s"
    rc = main(["record", *SMALL, "--capture-sizes", "1,2,4", "--capture-sizes", "p=4", "--serving-steps", "6",
               "--sampler", "2,0.9,6", "--inject-fallbacks", "1", "--serving-rounds", "2",
               "--serving-graphs", "piecewise", "--out", str(out)])
    assert rc == 0
    small, big = load_timings(out / "timings.json")["serving"]
    assert (small["graphs"], small["capture_s"], small["reserved_mib"], small["device_used_mib"]) == (9, 0.09, 18.0,
                                                                                                      27.0)
    assert (big["graphs"], big["capture_s"]) == (3, 0.03)
    for e in (small, big):
        assert len(e["steps"]) == 6 and len(e["fallback_steps"]) == 1 and (out / e["trace"]).exists()
        assert all(s["annotation"].endswith("piecewise]") for s in e["steps"] if s["mode"] == "graph")


def test_a_step_that_cannot_be_captured_keeps_its_eager_rows_with_a_reason(
        tmp_path: Path, fake_cuda: dict[str, Any], monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    from launchgap.harness import graphs

    def capture_fails(torch_: Any, fn: Any, pool: Any, stream: Any, keep: bool) -> Any:
        try:
            raise RuntimeError("CUDA error: operation not permitted when stream is capturing")
        except RuntimeError:  # capture_end's own error, raised while handling the first, as torch does
            raise RuntimeError("CUDA error: operation failed due to a previous error during capture") from None

    monkeypatch.setattr(graphs, "_capture_one", capture_fails)
    out = tmp_path / "o"
    rc = main(["record", *SMALL, "--batch-sizes", "1,2", "--modes", "eager,graph", "--trace-batch-sizes", "2",
               "--capture-lists", "single-2", "--out", str(out)])
    io = capsys.readouterr()
    said = io.out + io.err  # the log's stream is whatever sys.stderr was when the CLI module was imported
    assert rc == 0
    doc = load_timings(out / "timings.json")
    assert [(r["batch_size"], r["graph_us"]) for r in doc["rows"]] == [(1, None), (2, None)]
    assert all(r["eager_us"] > 0 for r in doc["rows"])
    cap = doc["models"]["tiny-layers2"]["capture"]
    assert cap["ok"] is False
    assert cap["reason"] == ("the step asks the host for a value while capturing (a CPU sync: .item(), nonzero, "
                             "data-dependent shapes): RuntimeError: CUDA error: operation not permitted when "
                             "stream is capturing")
    assert "cannot capture the step as a CUDA graph" in said and "2 profiled/memory/serving items skipped" in said
    assert "graph_memory" not in doc
    assert sorted(p.name for p in out.glob("*.json.gz")) == ["tiny-layers2_bs2_eager.json.gz"]
