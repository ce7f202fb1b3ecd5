"""Dashboard layout helpers with exact expectations: batch-size labels that cannot overlap, a graph step's timeline
window on one time base, what the CPU ran in the hover of a host gap."""
from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("streamlit")

from launchgap.dashboard.charts import log_ticks, share_tickformat  # noqa: E402
from launchgap.dashboard.timeline import step_events, step_index, timeline_gpu_start  # noqa: E402
from launchgap.loaders import load_trace  # noqa: E402
from launchgap.report import AnalysisOptions, analyze_trace  # noqa: E402
from launchgap.steps import StepOptions  # noqa: E402
from tests.unit.test_host_stalls import NO_PROFILER_COST, _trace  # noqa: E402


def test_log_ticks_keep_labels_apart() -> None:
    sizes = [1, 2, 3, 4, 5, 8, 12, 16, 24, 32, 48, 64, 100, 128]
    # log2 span 7 over 9 labels: at least 0.78 octaves between labels, and before the last
    assert log_ticks(sizes) == [1, 2, 4, 8, 16, 32, 64, 128]
    assert log_ticks([8, 64]) == [8, 64]
    assert log_ticks(list(range(1, 129))) == [1, 2, 4, 7, 13, 23, 40, 69, 128]


def test_share_ticks_have_the_decimals_their_spacing_needs() -> None:
    # a distribution over 128 sizes tops out at 1.9%: ticks 0.5% apart need one decimal ("2%, 2%, 1%" before)
    assert [share_tickformat(x) for x in (0.6, 0.05, 0.019, 0.005, 0.004)] == [".0%", ".0%", ".1%", ".1%", ".2%"]


def test_a_queued_graph_step_opens_on_its_gpu_work(tmp_path: Path) -> None:
    rep = analyze_trace(load_trace(_trace(tmp_path, 2400.0)), NO_PROFILER_COST)
    st = rep.steps[0]
    # CPU range 0-5000 us, GPU window from 160 us: overlapping, no lag
    assert timeline_gpu_start(st, 0, 5_000_000) == (160.0, 0.0)
    # the same step issued at -40 ms (CPU range -40,000 to -39,000 us): the GPU began 39,160 us after it ended
    assert timeline_gpu_start(st, -40_000_000, -39_000_000) == (40_160.0, 39_160.0)


def test_the_hover_of_a_host_gap_says_what_the_cpu_ran(tmp_path: Path) -> None:
    trace = load_trace(_trace(tmp_path, 2400.0))
    rep = analyze_trace(trace, AnalysisOptions())
    events, _ = step_events(trace, step_index(trace, StepOptions()), rep.steps[0])
    host = events[events["category"] == "idle: host"]
    # the first gap [210, 1510]: the CPU was in the model's forward but for the 5 us launch call
    assert host["name"].iloc[0] == ("k2 — the CPU ran: vllm/model_executor/models/llama.py: forward 1,295 us; "
                                    "cudaLaunchKernel 5 us")
