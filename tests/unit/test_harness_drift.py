"""Drift control of the harness's profiled-vs-unprofiled records, on scripted step timings (no GPU,
no torch needed): blocks interleaved with the traces, re-recording a trace whose unprofiled eager
step drifted beyond the limit, the record's fields, and the schema's readers of old and new records."""
from __future__ import annotations

import contextlib
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from launchgap.errors import InputError
from launchgap.harness import sweep
from launchgap.harness.sweep import context, profiled, tasks
from launchgap.harness.clock import Timed
from launchgap.timings import DRIFT_LIMIT, pvu_drift, pvu_eager_us, validate_timings


class _Doc:
    def __init__(self) -> None:
        self.items: list[dict[str, Any]] = []

    def put_profiled(self, item: dict[str, Any]) -> None:
        self.items.append(item)

    def save(self) -> None:
        validate_timings({"rows": [{"model": "m", "batch_size": 2, "eager_us": 1.0}],
                          "profiled_vs_unprofiled": self.items})


def _run(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, block_us: list[float], settings: list[str],
         retries: int) -> tuple[list[dict[str, Any]], list[str], list[str]]:
    """``_profiled`` on the CPU path with every block's eager steps scripted (one value per block)."""
    script = iter(block_us)
    calls: list[str] = []
    current: dict[str, float] = {}

    def time_steps(torch_: Any, fn: Any, n: int, warmup: int, on_cuda: bool) -> Timed:
        # A block is two halves (repeats 4: 2 + 2); the first half draws the block's value.
        if "half" not in current:
            current["v"] = next(script)
            current["half"] = 1
        else:
            del current["half"]
        calls.append("time")
        return Timed(device_us=[current["v"]] * n, host_us=[current["v"]] * n)

    def record_trace(torch_: Any, fn: Any, label: str, dst: Path, active: int, on_cuda: bool, nvtx: Any,
                     setting: str) -> None:
        calls.append(f"trace {setting}")
        dst.write_bytes(b"{}")

    monkeypatch.setattr(profiled, "time_steps", time_steps)
    monkeypatch.setattr(profiled, "record_trace", record_trace)
    monkeypatch.setattr(profiled, "WARM_S", 0.0)
    opts = SimpleNamespace(repeats=4, warmup=0, steps=3, max_drift=DRIFT_LIMIT, drift_retries=retries, interleave=0)
    result = sweep.SweepResult(timings_path=tmp_path / "timings.json")
    said: list[str] = []
    doc = _Doc()
    ctx = context.Ctx(SimpleNamespace(), opts, False, ("eager",), tmp_path, doc, result,
                     lambda *a, **k: None, lambda msg: contextlib.nullcontext(), said.append)
    model = SimpleNamespace(cfg=SimpleNamespace(name="m"), step=lambda bs: None)
    profiled.record_profiled(ctx, model, [tasks.Task("m", 2, f"profiled {s}") for s in settings])
    assert next(script, None) is None, "every scripted block was used"
    return doc.items, calls, said + result.warnings


def test_blocks_interleave_with_traces_and_a_drifted_trace_is_recorded_again(monkeypatch: pytest.MonkeyPatch,
                                                                             tmp_path: Path) -> None:
    # U0 100 | plain | U1 130 (+30%: again) | plain | U2 131 (+0.8%) | shapes | U3 131 (0%)
    items, calls, said = _run(monkeypatch, tmp_path, [100.0, 130.0, 131.0, 131.0], ["plain", "shapes"], retries=2)
    assert calls == ["time"] * 2 + ["trace plain"] + ["time"] * 2 + ["trace plain"] + ["time"] * 2 \
        + ["trace shapes"] + ["time"] * 2
    plain, shapes = items
    assert plain == {"model": "m", "batch_size": 2, "profiler": "plain", "unprofiled_eager_us_before": 130.0,
                     "unprofiled_eager_us_after": 131.0, "unprofiled_eager_us": 130.5, "unprofiled_graph_us": None,
                     "unprofiled_graph_us_before": None, "unprofiled_graph_us_after": None, "drift": 0.0077,
                     "drift_limit": 0.05, "attempts": 2, "trace": "m_bs2_eager_plain.json.gz", "repeats": 4,
                     "profiled_steps": 3}
    assert (shapes["unprofiled_eager_us_before"], shapes["unprofiled_eager_us_after"], shapes["drift"],
            shapes["attempts"]) == (131.0, 131.0, 0.0, 1)
    assert said == ["m bs=2 plain: unprofiled eager step drifted +30.0% across the trace (limit 5%); "
                    "recording it again"]


def test_drift_beyond_the_retries_is_kept_and_warned(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    # U0 100 | stack | U1 200 (+100%: again) | stack | U2 120 (-40%: retries spent, kept)
    items, calls, said = _run(monkeypatch, tmp_path, [100.0, 200.0, 120.0], ["stack"], retries=1)
    (rec,) = items
    assert (rec["unprofiled_eager_us_before"], rec["unprofiled_eager_us_after"], rec["unprofiled_eager_us"],
            rec["drift"], rec["attempts"]) == (200.0, 120.0, 160.0, -0.4, 2)
    assert calls.count("trace stack") == 2
    assert said[-1] == "m bs=2 stack: drift -40.0% after 2 attempts (limit 5%)"


def test_schema_reads_old_and_new_records() -> None:
    old = {"unprofiled_eager_us_before": 100.0, "unprofiled_eager_us_after": 110.0}
    assert pvu_eager_us(old) == 105.0 and pvu_drift(old) == pytest.approx(0.1)
    new = {**old, "unprofiled_eager_us": 101.5}
    assert pvu_eager_us(new) == 101.5
    rec = {"model": "m", "batch_size": 1, "profiler": "plain", "unprofiled_graph_us": None, "trace": None, **new,
           "drift": -0.02, "attempts": 0}
    with pytest.raises(InputError, match=r"profiled_vs_unprofiled\[0\]\.attempts is 0, expected a positive integer"):
        validate_timings({"rows": [{"model": "m", "batch_size": 1, "eager_us": 1.0}],
                          "profiled_vs_unprofiled": [rec]}, "t.json")


def test_drift_options_are_checked(tmp_path: Path) -> None:
    from launchgap.harness.model import resolve_config

    opts = sweep.SweepOptions(models=(resolve_config("tiny", None),), batch_sizes=(1,), out_dir=tmp_path,
                              max_drift=1.5)
    with pytest.raises(InputError, match="--max-drift must lie in"):
        opts.validate()
