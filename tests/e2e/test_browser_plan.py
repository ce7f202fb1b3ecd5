"""In Chromium at 1400 px: the Capture plan page's defaults on an upload (issue 28 item 6), and a plan from an
uploaded serving trace alone (issue 26 item 4).

With the bundled 1B samples loaded and a graph-mode serving trace uploaded (the held-out 3B: FULL graphs with
eager fallbacks, no timings, no histogram), the page opens on the upload's workload; with its defaults untouched
it plans what ``launchgap plan`` plans on the same trace (the same graph count and expected step: costs from the
trace's own kernels, distribution from its decode steps), says no command-line flag, shows the "not monotone"
notes as one line at most, states the graph memory's basis and the capture time (estimated from the trace's
kernels per step) in its text, and the cost model's band on the expected step. Screenshot in test-artifacts/e2e/.
"""
from __future__ import annotations

import json
import shutil

import pytest

from launchgap.cli import main
from launchgap.dashboard.text import band_percent
from launchgap.loaders import load_trace
from launchgap.report import analyze_trace
from tests.e2e.conftest import REPO, UI_TIMEOUT_MS
from tests.e2e.test_browser import VIEWPORT, full_page_screenshot, metric_value, open_page, wait_for_charts

pytestmark = pytest.mark.browser

SERVING = REPO / "traces" / "h200-heldout-3b-2026-12-02" / "serving" / "3b_serving_serve.json.gz"


def test_plan_page_opens_on_the_upload_with_the_commands_defaults(app_server, browser, artifacts, tmp_path,
                                                                  capsys) -> None:
    assert SERVING.is_file(), f"bundled trace {SERVING} missing (part of the repository)"
    upload = tmp_path / "3b_serving_serve.json.gz"
    shutil.copy(SERVING, upload)
    wid = analyze_trace(load_trace(SERVING)).workload.label  # what the picker shows (never the wl- id)
    assert main(["plan", str(upload), "--format", "json"]) == 0
    want = json.loads(capsys.readouterr().out)

    ctx = browser.new_context(viewport=VIEWPORT)
    page = ctx.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    try:
        page.goto(app_server, timeout=UI_TIMEOUT_MS)
        page.get_by_text("Loaded traces").wait_for(timeout=UI_TIMEOUT_MS)
        page.locator("input[type=file]").set_input_files(str(upload))
        page.get_by_text("Loaded 1 of 1 file(s)").wait_for(timeout=UI_TIMEOUT_MS)
        open_page(page, "Capture plan")
        page.get_by_text("Budget and policy").wait_for(timeout=UI_TIMEOUT_MS)
        box = page.get_by_test_id("stSelectbox").filter(has_text="Workload").first
        box.wait_for(timeout=UI_TIMEOUT_MS)
        assert wid in box.inner_text() + " ".join(i.input_value() for i in box.locator("input").all())
        assert page.get_by_role("spinbutton", name="Max graphs (0 = no limit)").input_value() == "0"  # as the command
        assert metric_value(page, "Graphs to capture") == str(want["n_graphs"])
        assert metric_value(page, "Expected step") == f"{want['expected_step_us']:,.0f} us"
        page.get_by_text("Configs to copy").wait_for(timeout=UI_TIMEOUT_MS)
        text = page.inner_text("body")
        assert "--timings" not in text and "--distribution" not in text  # the page's words, not the command's
        assert text.count("not monotone") <= 1
        assert f"Graph memory {want['memory']['predicted_mib']:,.0f} MiB = " in text  # the basis, in the text
        assert "capture time" in text and "s per size" in text
        assert metric_value(page, "Capture time").endswith(" s")  # estimated from the trace's kernels per step
        # costs from the trace's cost curve: the model's band on the expected step, and what it does to the list
        cb, step = want["cost_band"], want["expected_step_us"]
        assert metric_value(page, "Cost-model band") == band_percent(cb["expected_step_us_low"],
                                                                     cb["expected_step_us_high"], step)
        assert f"Cost band: expected step {cb['expected_step_us_low']:,.1f} to" in text
        wait_for_charts(page, 2)
        page.wait_for_timeout(1500)
        full_page_screenshot(page, artifacts / "plan-defaults-upload.png")
        assert not errors, errors
    finally:
        ctx.close()
