"""Regenerate docs/screenshots/diagnosis-vllm-engine.png: the Diagnosis page on a vLLM engine trace
(engine, phase and graph coverage per step) paired with the capture trace of the same run.

    .venv/bin/python -m tests.e2e.screenshot_engines [OUT_DIR]

Starts ``launchgap app`` on a free port, selects the bundled TraceLens vLLM PIECEWISE execution trace
and its capture trace as samples, opens Diagnosis on the execution trace (the capture trace is paired
automatically) and writes a palette-quantised PNG. Not a test: pytest does not collect it.
"""
from __future__ import annotations

import sys
import tempfile
from pathlib import Path

from playwright.sync_api import sync_playwright

from tests.e2e.conftest import CHROMIUM, CHROMIUM_ARGS, REPO, UI_TIMEOUT_MS, running_app
from tests.e2e.screenshots import _quantise
from tests.e2e.test_browser import VIEWPORT, full_page_screenshot, metric_value, open_page, wait_for_charts

FOLDER = "engines/tracelens-vllm-prefilldecode-piecewise-mi300x"
EXEC = f"{FOLDER}/graph_execution.json.gz"
CAPTURE = f"{FOLDER}/capture_traces__graph_capture_rank_0.1773709679453551615.pt.trace.json.gz"


def main(out: Path) -> int:
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as logs, running_app(Path(logs) / "server.log") as url:
        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS, headless=True)
            page = browser.new_page(viewport=VIEWPORT)
            page.goto(url, timeout=UI_TIMEOUT_MS)
            page.get_by_text("Loaded traces").wait_for(timeout=UI_TIMEOUT_MS)
            box = page.get_by_test_id("stMultiSelect").first
            for rel in (EXEC, CAPTURE):
                box.locator("input").first.fill(rel)
                page.keyboard.press("Enter")
                page.keyboard.press("Escape")
                page.wait_for_timeout(4000)
            open_page(page, "Diagnosis")
            metric_value(page, "Predicted CUDA-graph speedup")  # the page is drawn
            page.get_by_test_id("stSelectbox").filter(has_text="Trace").first.locator("input").first.fill(EXEC)
            page.keyboard.press("Enter")
            page.get_by_text("Engine steps (vLLM)").wait_for(timeout=UI_TIMEOUT_MS)
            try:
                page.get_by_text("Inside the graph replays").wait_for(timeout=UI_TIMEOUT_MS)
            except Exception:
                page.screenshot(path=str(out / "failed.png"))
                raise
            wait_for_charts(page, 3)
            page.wait_for_timeout(2500)
            path = out / "diagnosis-vllm-engine.png"
            full_page_screenshot(page, path)
            _quantise(path)
            browser.close()
        return 0


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1]) if len(sys.argv) > 1 else REPO / "docs" / "screenshots"))
