"""The one table helper (:mod:`launchgap.render.table`) and the HTA text built on it, exact text (no HTA needed)."""
from __future__ import annotations

import pytest

from launchgap.hta_bridge import (
    Comparison,
    HtaReport,
    HtaSettings,
    KernelTypeShare,
    LaunchStats,
    MetricRow,
    StreamIdle,
    TemporalBreakdown,
)
from launchgap.render import render_hta
from launchgap.render.table import md_escape, table


def test_text_default_alignment_first_left_rest_right() -> None:
    assert table(["name", "us"], [["a", "1.5"], ["long name", "10.0"]], False, indent="  ") == [
        "  name         us",
        "  ---------  ----",
        "  a           1.5",
        "  long name  10.0"]


def test_text_free_last_column_is_not_padded() -> None:
    assert table(["id", "ok", "why"], [[7, "yes", ""], [12, "no", "a; b"]], False, align="rll") == [
        "id  ok   why",
        "--  ---  ---",
        " 7  yes",
        "12  no   a; b"]


def test_align_must_name_every_column() -> None:
    with pytest.raises(ValueError, match="one 'l' or 'r' per column"):
        table(["a", "b"], [], False, align="l")
    with pytest.raises(ValueError, match="one 'l' or 'r' per column"):
        table(["a", "b"], [], False, align="lc")


def test_markdown_escapes_pipes_and_newlines_and_ignores_align() -> None:
    assert md_escape("a|b\nc") == "a\\|b c"
    assert table(["k", "v"], [["x|y", "1\n2"]], True, align="rr") == ["| k | v |", "|---|---|", "| x\\|y | 1 2 |"]


def test_hta_text_of_a_hand_built_report() -> None:
    rep = HtaReport(path="t.json", settings=HtaSettings(), kernels=1234, gpu_ops=1240,
                    temporal=TemporalBreakdown(window_us=200.0, idle_us=50.0, compute_us=120.0, non_compute_us=30.0),
                    kernel_types=[KernelTypeShare("COMPUTATION", 120.0, 80.0), KernelTypeShare("MEMORY", 30.0, 20.0)],
                    streams=[StreamIdle(7, 10.0, 15.0, 25.0)],
                    launch=LaunchStats(1000, 3.25, 4.5, 4.0, 9.0, 12.0))
    cmp = Comparison(path="t.json", hta=rep, rows=[
        MetricRow("gpu_busy_us", 152.5, 150.0, 152.5, agree=False, aligned_agree=True,
                  deltas={"rounding_to_us": -2.5}),
        MetricRow("kernels", 1234.0, 1234.0, 1234.0, agree=True, aligned_agree=True),
        MetricRow("stream 7 other_us", 25.0, 24.0, 20.0, agree=False, aligned_agree=False,
                  deltas={"rounding_to_us": None}, adjustments={"overlap_as_negative_idle": -1.0})])
    assert render_hta(rep, cmp, "0.5.0").splitlines() == [
        "== t.json",
        "HTA 0.5.0 (times rounded to whole us, last ProfilerStep dropped): 1,234 kernels, 1,240 GPU ops kept",
        "",
        "Temporal breakdown (us)",
        "  window 200.0   busy 150.0 (75.0%)   idle 50.0 (25.0%)   compute 120.0   non-compute 30.0",
        "",
        "Kernel types",
        "  type         time_us  share",
        "  -----------  -------  -----",
        "  COMPUTATION    120.0  80.0%",
        "  MEMORY          30.0  20.0%",
        "",
        "Idle time per stream (us; kernel wait: intervals under 30 us)",
        "  stream  host_wait  kernel_wait  other",
        "  ------  ---------  -----------  -----",
        "       7       10.0         15.0   25.0",
        "",
        "Launches (cudaLaunchKernel/ExC): 1,000; launch call mean 3.25 us; launch delay (op start - call end, >= 0) "
        "mean 4.50 us, p50 4.00, p90 9.00, max 12.00",
        "",
        "launchgap vs HTA (aligned: HTA with rounding, step filter, stream events and event-#0 launch times "
        "switched off)",
        "  metric             launchgap        HTA  HTA aligned  agree  why they differ",
        "  -----------------  ---------  ---------  -----------  -----  ---------------",
        "  gpu_busy_us          152.500    150.000      152.500  no     rounding_to_us -2.500",
        "  kernels            1,234.000  1,234.000    1,234.000  yes",
        "  stream 7 other_us     25.000     24.000       20.000  NO*    rounding_to_us (HTA failed); "
        "overlap_as_negative_idle -1.000",
        "  NO*: differs even with HTA's deviations off; see the notes in --format json"]
    assert "Temporal" not in render_hta(HtaReport("t", HtaSettings(round_to_us=False, step_filter="off"), 0, 0,
                                                   None, [], [], None, {"temporal": "boom"}))
