"""The piecewise -> FULL headline and the FULL-graph step for any model, on the committed H200 recordings.

* Piecewise traces (3b held-out set, 1b session) against timings_piecewise.json: the headline (unprofiled
  piecewise step over the predicted FULL step) within 15% of the measured piecewise / FULL ratio (measured
  here: within 1%), never below 1.0x; the FULL step within 3% (measured: within 0.5%).
* FULL-graph traces of four transformers architectures recorded later (traces/h200-hf-2026-12-02: llama,
  qwen2.5, gemma-2, OLMoE; never used to fit the node cost), their FULL step predicted with the node cost
  fitted on their own replays: within 3% of the unprofiled truth (measured: +0.3% to +2.4%).
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from launchgap.loaders import load_trace
from launchgap.report import analyze_trace

TRACES = Path(__file__).resolve().parents[2] / "traces"
PIECEWISE = [("h200-heldout-3b-2026-12-02", "3b", bs) for bs in (4, 16, 48)] + \
            [("h200-session-2026-12-01", "1b", bs) for bs in (1, 8, 32, 64)]
HF = TRACES / "h200-hf-2026-12-02"


def _row(folder: str, model: str, bs: int) -> dict:
    rows = json.loads((TRACES / folder / "timings_piecewise.json").read_text())["rows"]
    return next(r for r in rows if r["model"] == model and r["batch_size"] == bs)


@pytest.mark.parametrize(("folder", "model", "bs"), PIECEWISE)
def test_piecewise_headline_within_15pct_of_the_measured_ratio(folder: str, model: str, bs: int) -> None:
    r = _row(folder, model, bs)
    s = analyze_trace(load_trace(TRACES / folder / "piecewise" / f"{model}_bs{bs}_piecewise.json.gz")).summary
    measured = r["piecewise_us"] / r["graph_us"]
    assert s.predicted_speedup >= 1.0
    assert abs(s.predicted_speedup / measured - 1) <= 0.15
    assert abs(s.predicted_graph_step_us_median / r["graph_us"] - 1) <= 0.03


@pytest.mark.parametrize("name", sorted(p.name for p in (HF / "traces").glob("*_graph.json.gz")
                                        if "compiled" not in p.name))
def test_full_step_of_other_models_within_3pct(name: str) -> None:
    model, bs = name.rsplit("_bs", 1)[0], int(name.rsplit("_bs", 1)[1].split("_")[0])
    truth = next(r for r in json.loads((HF / "timings.json").read_text())["rows"]
                 if r["model"] == model and r["batch_size"] == bs)
    s = analyze_trace(load_trace(HF / "traces" / name)).summary
    assert s.node_us_source == "trace replays"
    assert abs(s.predicted_graph_step_us_median / truth["graph_us"] - 1) <= 0.03


@pytest.mark.parametrize("folder, model, bs", PIECEWISE, ids=lambda v: str(v))
def test_a_piecewise_step_the_profiler_slowed_reads_gpu_bound(folder: str, model: str, bs: int) -> None:
    """Profiled, these piecewise steps idle 40-56% host-side, most of it the profiler's own cost (each runs ~1.85x its
    unprofiled self); unprofiled the GPU is busy 79-94% and a FULL graph gains 5-9% (measured 1.05-1.08x): the
    verdict reads GPU-bound (it read launch-bound on the profiled idle) and says both busy shares."""
    rep = analyze_trace(load_trace(TRACES / folder / "piecewise" / f"{model}_bs{bs}_piecewise.json.gz"))
    s = rep.summary
    measured = _row(folder, model, bs)
    assert measured["piecewise_us"] / measured["graph_us"] < 1.1
    assert s.verdict == "GPU-bound (partly graphed)"
    assert "of the estimated unprofiled step (" in s.verdict_detail and "% of the profiled one)" in s.verdict_detail
