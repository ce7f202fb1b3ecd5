"""In Chromium: the bundled 1B traces plus an uploaded 8B trace are two workloads, never one table.

The situation of issue 17: with the bundled 1B samples loaded and an 8B trace uploaded, the
Compare and Capture plan pages must not pool them. Screenshots land in test-artifacts/e2e/.
"""
from __future__ import annotations

import shutil

import pytest

from launchgap.loaders import load_trace
from launchgap.report import analyze_trace
from tests.e2e.conftest import REPO, UI_TIMEOUT_MS
from tests.e2e.test_browser import VIEWPORT, full_page_screenshot, open_page, wait_for_charts

pytestmark = pytest.mark.browser

EIGHT_B = REPO / "traces" / "h200" / "8b_bs1_eager.json.gz"


def box_text(box) -> str:
    """A selectbox's label and shown choice (the choice sits in its input's value)."""
    return box.inner_text() + " " + " ".join(i.input_value() for i in box.locator("input").all())


def test_compare_and_plan_keep_1b_and_8b_apart(app_server, browser, artifacts, tmp_path) -> None:
    assert EIGHT_B.is_file(), f"bundled trace {EIGHT_B} missing (part of the repository)"
    upload = tmp_path / "8b_bs1_eager.json.gz"
    shutil.copy(EIGHT_B, upload)
    wid = analyze_trace(load_trace(EIGHT_B)).workload.label  # what the picker shows (never the wl- id)

    ctx = browser.new_context(viewport=VIEWPORT)
    page = ctx.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    try:
        page.goto(app_server, timeout=UI_TIMEOUT_MS)
        page.get_by_text("Loaded traces").wait_for(timeout=UI_TIMEOUT_MS)
        page.locator("input[type=file]").set_input_files(str(upload))
        page.get_by_text("Loaded 1 of 1 file(s)").wait_for(timeout=UI_TIMEOUT_MS)

        open_page(page, "Compare")
        page.get_by_text("2 different workloads").wait_for(timeout=UI_TIMEOUT_MS)
        box = page.get_by_test_id("stSelectbox").filter(has_text="Workload").first
        box.wait_for(timeout=UI_TIMEOUT_MS)
        assert "1b_bs" in box_text(box)  # the bundled 1B samples come first
        page.get_by_text("Two traces side by side").wait_for(timeout=UI_TIMEOUT_MS)
        full_page_screenshot(page, artifacts / "workloads-1-compare-1b.png")
        box.click()
        page.get_by_role("option").filter(has_text=wid).click()
        page.wait_for_function("([t, w]) => [...document.querySelectorAll('[data-testid=stSelectbox] input')]"
                               ".some(i => i.value.includes(w))", arg=["", wid], timeout=UI_TIMEOUT_MS)
        page.wait_for_timeout(1500)  # the table re-renders for the 8B workload
        assert wid in box_text(box)
        assert "8b_bs1_eager.json.gz" in page.content()
        full_page_screenshot(page, artifacts / "workloads-2-compare-8b.png")

        open_page(page, "Capture plan")
        page.get_by_text("2 different workloads").wait_for(timeout=UI_TIMEOUT_MS)
        page.get_by_test_id("stSelectbox").filter(has_text="Workload").first.wait_for(timeout=UI_TIMEOUT_MS)
        page.get_by_text("Budget and policy").wait_for(timeout=UI_TIMEOUT_MS)
        # This page opens on the workload of the latest upload (the 8B trace, bs 1), not the bundled 1B samples'.
        assert wid in box_text(page.get_by_test_id("stSelectbox").filter(has_text="Workload").first)
        # launchgap record sweeps are benchmarks (costs only): the page says so and takes a histogram
        page.get_by_text("benchmarks of one batch size each").wait_for(timeout=UI_TIMEOUT_MS)
        page.get_by_text("a CSV / JSON histogram").click()
        dist = tmp_path / "dist.csv"
        dist.write_text("batch_size,count\n1,10\n")
        page.locator("input[type=file]").last.set_input_files(str(dist))
        page.get_by_text("Distribution: bs 1").wait_for(timeout=UI_TIMEOUT_MS)
        page.get_by_text("Configs to copy").wait_for(timeout=UI_TIMEOUT_MS)
        wait_for_charts(page, 2)
        page.wait_for_timeout(1500)  # let the last elements of the run settle before the screenshot
        full_page_screenshot(page, artifacts / "workloads-3-plan.png")
        assert not errors, errors
    finally:
        ctx.close()
