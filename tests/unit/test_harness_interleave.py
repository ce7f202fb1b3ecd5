"""Interleaved truth of the harness (``--interleave N``): wait-phase steps of the trace's own profiler
schedule run with the profiler idle and are timed as the unprofiled step; the record's fields; the
schema's new keys; and the fit's ``--truth trace`` (the trace's step times the window's ratio)."""
from __future__ import annotations

import contextlib
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from launchgap.errors import InputError
from launchgap.harness import profiling, sweep
from launchgap.harness.sweep import context, profiled, tasks
from launchgap.harness.clock import Timed
from launchgap.harness.profiling import Interleaved
from launchgap.timings import DRIFT_LIMIT, pvu_drift, pvu_eager_us, pvu_window_ratio, validate_timings


def test_wait_phase_steps_run_with_the_profiler_idle(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    torch = pytest.importorskip("torch")

    clock = [0.0]
    # A step "takes" 100 us when the profiler records it and 10 us when it is idle.
    monkeypatch.setattr(profiling, "time", SimpleNamespace(perf_counter=lambda: clock[0]))

    def body() -> None:
        clock[0] += (100e-6 if torch.autograd.profiler._is_profiler_enabled else 10e-6)
        torch.ones(4).sum()

    got = profiling.record_interleaved(torch, body, tmp_path / "t.json.gz", False, active=3, cycles=4,
                                       setting="plain", wait=3)
    # 4 cycles of wait 3 (the first of each dropped), warmup 1, active 3.
    assert got.cycles == 4
    assert got.unprofiled_us == pytest.approx([10.0] * 8)
    assert got.profiled_us == pytest.approx([100.0] * 12)
    assert (tmp_path / "t.json.gz").read_bytes()[:2] == b"\x1f\x8b"


def test_interleaved_profiling_refuses_a_schedule_without_counted_wait_steps(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="interleaved profiling needs wait > 1"):
        profiling.record_interleaved(None, lambda: None, tmp_path / "t.json.gz", False, active=3, cycles=2, wait=1)


def _run_interleaved(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, windows: list[Interleaved],
                     retries: int) -> tuple[list[dict[str, Any]], list[str]]:
    blocks = iter([100.0, 200.0, 300.0, 400.0])
    current: dict[str, float] = {}

    def time_steps(torch_: Any, fn: Any, n: int, warmup: int, on_cuda: bool) -> Timed:
        if "half" not in current:
            current["v"], current["half"] = next(blocks), 1
        else:
            del current["half"]
        return Timed(device_us=[current["v"]] * n, host_us=[current["v"]] * n)

    script = iter(windows)
    calls: list[str] = []

    def record_interleaved(torch_: Any, body: Any, dst: Path, on_cuda: bool, *, active: int, cycles: int,
                           setting: str) -> Interleaved:
        calls.append(f"interleaved {setting} active={active} cycles={cycles}")
        dst.write_bytes(b"{}")
        return next(script)

    monkeypatch.setattr(profiled, "time_steps", time_steps)
    monkeypatch.setattr(profiled, "record_interleaved", record_interleaved)
    monkeypatch.setattr(profiled, "WARM_S", 0.0)
    opts = SimpleNamespace(repeats=4, warmup=0, steps=3, max_drift=DRIFT_LIMIT, drift_retries=retries, interleave=4)
    result = sweep.SweepResult(timings_path=tmp_path / "timings.json")
    items: list[dict[str, Any]] = []
    doc = SimpleNamespace(put_profiled=items.append, save=lambda: validate_timings(
        {"rows": [{"model": "m", "batch_size": 2, "eager_us": 1.0}], "profiled_vs_unprofiled": items}))
    said: list[str] = []
    ctx = context.Ctx(SimpleNamespace(), opts, False, ("eager",), tmp_path, doc, result,
                     lambda *a, **k: None, lambda msg: contextlib.nullcontext(), said.append)
    model = SimpleNamespace(cfg=SimpleNamespace(name="m"), step=lambda bs: None)
    profiled.record_profiled(ctx, model, [tasks.Task("m", 2, "profiled shapes")])
    return items, calls + said


def test_interleaved_record_takes_its_truth_from_the_window(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    # First window drifts (second half 120 / first half 100 = +20%): recorded again; the second holds.
    drifted = Interleaved([100.0, 100.0, 120.0, 120.0], [150.0] * 12, 4)
    steady = Interleaved([80.0, 82.0, 81.0, 83.0], [120.0] * 11 + [125.0], 4)
    items, log = _run_interleaved(monkeypatch, tmp_path, [drifted, steady], retries=2)
    assert log == ["interleaved shapes active=3 cycles=4", "interleaved shapes active=3 cycles=4",
                   "m bs=2 shapes: unprofiled eager step drifted +20.0% across the trace (limit 5%); recording it again"]
    (rec,) = items
    assert rec == {"model": "m", "batch_size": 2, "profiler": "shapes", "unprofiled_eager_us_before": 81.0,
                   "unprofiled_eager_us_after": 82.0, "unprofiled_eager_us": 81.5, "unprofiled_graph_us": None,
                   "unprofiled_graph_us_before": None, "unprofiled_graph_us_after": None, "drift": 0.0123,
                   "drift_limit": 0.05, "attempts": 2, "trace": "m_bs2_eager_shapes.json.gz", "repeats": 4,
                   "profiled_steps": 3, "truth": "interleaved", "interleaved_cycles": 4, "profiled_eager_us": 120.0,
                   "unprofiled_steps_us": [80.0, 82.0, 81.0, 83.0], "profiled_steps_us": [120.0] * 11 + [125.0],
                   "block_eager_us_before": 200.0, "block_eager_us_after": 300.0}
    assert pvu_eager_us(rec) == 81.5 and pvu_drift(rec) == pytest.approx(82 / 81 - 1)
    assert pvu_window_ratio(rec) == pytest.approx(81.5 / 120.0)


def test_schema_checks_the_interleaved_keys() -> None:
    base = {"model": "m", "batch_size": 1, "profiler": "plain", "unprofiled_eager_us_before": 10.0,
            "unprofiled_eager_us_after": 10.0, "unprofiled_graph_us": None, "trace": None}
    rows = [{"model": "m", "batch_size": 1, "eager_us": 1.0}]
    validate_timings({"rows": rows, "profiled_vs_unprofiled": [{**base, "truth": "interleaved",
                                                                "interleaved_cycles": 8, "profiled_eager_us": 14.0}]})
    assert pvu_window_ratio(base) is None
    with pytest.raises(InputError, match=r"profiled_vs_unprofiled\[0\]\.truth is 'guess', expected one of "
                                         r"blocks, interleaved"):
        validate_timings({"rows": rows, "profiled_vs_unprofiled": [{**base, "truth": "guess"}]}, "t.json")
    with pytest.raises(InputError, match=r"profiled_vs_unprofiled\[0\]\.profiled_eager_us"):
        validate_timings({"rows": rows, "profiled_vs_unprofiled": [{**base, "profiled_eager_us": -1.0}]}, "t.json")
    with pytest.raises(InputError, match=r"profiled_vs_unprofiled\[0\]\.profiled_steps_us\[1\]"):
        validate_timings({"rows": rows, "profiled_vs_unprofiled": [{**base, "profiled_steps_us": [1.0, "x"]}]},
                         "t.json")
    with pytest.raises(InputError, match=r"profiled_vs_unprofiled\[0\]\.interleaved_cycles"):
        validate_timings({"rows": rows, "profiled_vs_unprofiled": [{**base, "interleaved_cycles": 0}]}, "t.json")


def test_interleave_option_is_checked(tmp_path: Path) -> None:
    from launchgap.harness.model import resolve_config

    opts = sweep.SweepOptions(models=(resolve_config("tiny", None),), batch_sizes=(1,), out_dir=tmp_path,
                              interleave=-1)
    with pytest.raises(InputError, match="--interleave must be at least 0"):
        opts.validate()


def test_dry_run_says_where_the_truth_is_timed(capsys: pytest.CaptureFixture[str]) -> None:
    from launchgap.harness.__main__ import main

    base = ["--model", "tiny", "--batch-sizes", "1,8", "--profiler-settings", "plain,shapes", "--out", "/nonexistent",
            "--repeats", "16", "--dry-run"]
    assert main([*base, "--interleave", "8"]) == 0
    assert ("profiled vs unprofiled: plain, shapes at [1, 8]; the unprofiled step timed inside each trace's window "
            "(8 profiler cycles of unprofiled and 3 profiled steps), graph replays in blocks of 16 around it; a trace "
            "recorded again when the eager step drifts over 5% across its window (at most 2 times)"
            ) in capsys.readouterr().out
    assert main(base) == 0
    assert ("profiled vs unprofiled: plain, shapes at [1, 8]; unprofiled blocks of 16 steps between the traces; a "
            "trace recorded again when the eager step drifts over 5% across it (at most 2 times)"
            ) in capsys.readouterr().out
