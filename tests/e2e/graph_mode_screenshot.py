"""Regenerate docs/screenshots/graph-mode.png: the Diagnosis page's graph-mode serving section on the H200
serving trace (4 injected fallbacks, 3 uncaptured sizes).

    .venv/bin/python -m tests.e2e.graph_mode_screenshot [OUT_PNG]

Starts ``launchgap app`` on a free port, uploads the trace in Debian chromium, opens Diagnosis and shoots
the section from its heading to the step timeline's heading (palette-quantised). Not a test.
"""
from __future__ import annotations

import sys
import tempfile
from pathlib import Path

from playwright.sync_api import sync_playwright

from tests.e2e.conftest import CHROMIUM, CHROMIUM_ARGS, REPO, UI_TIMEOUT_MS, running_app
from tests.e2e.screenshots import _quantise
from tests.e2e.test_browser import VIEWPORT, metric_value, open_page, wait_for_charts

TRACE = REPO / "traces" / "h200-session-2026-12-01" / "serving" / "1b_serving_serve.json.gz"


def main(out: Path) -> int:
    out.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as logs, running_app(Path(logs) / "server.log") as url:
        with sync_playwright() as pw, tempfile.TemporaryDirectory() as tmp:
            browser = pw.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS, headless=True)
            page = browser.new_page(viewport=VIEWPORT)
            page.goto(url, timeout=UI_TIMEOUT_MS)
            page.get_by_text("Loaded traces").wait_for(timeout=UI_TIMEOUT_MS)
            up = Path(tmp) / "1b_serving_serve.json.gz"
            up.write_bytes(TRACE.read_bytes())
            page.locator("input[type=file]").set_input_files(str(up))
            page.get_by_text("Loaded 1 of 1 file(s)").wait_for(timeout=UI_TIMEOUT_MS)
            open_page(page, "Diagnosis")
            metric_value(page, "Eager fallbacks")
            wait_for_charts(page, 5)
            height = page.evaluate("() => document.querySelector('[data-testid=\"stMainBlockContainer\"]')"
                                   ".scrollHeight")
            page.set_viewport_size({"width": VIEWPORT["width"], "height": int(height) + 40})
            page.wait_for_timeout(2500)
            top = page.get_by_text("Graph-mode serving", exact=True).bounding_box()
            bottom = page.get_by_text("One step on the timeline", exact=True).bounding_box()
            page.screenshot(path=str(out), clip={"x": 0, "y": top["y"] - 10, "width": VIEWPORT["width"],
                                                 "height": bottom["y"] - top["y"]})
            browser.close()
        _quantise(out)
        print(f"{out}: {out.stat().st_size / 1e3:.0f} kB")
        return 0


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1]) if len(sys.argv) > 1 else REPO / "docs" / "screenshots" / "graph-mode.png"))
