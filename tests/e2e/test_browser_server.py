"""The Server page in a real browser: a server log and a /metrics scrape uploaded on the Traces page
reach the Server page, which shows the running-batch timeline and the plan in the server's syntax."""
from __future__ import annotations

import gzip
from pathlib import Path

import pytest

from tests.e2e.conftest import UI_TIMEOUT_MS

pytestmark = pytest.mark.browser

LOGS = Path(__file__).resolve().parents[2] / "traces" / "serverlogs"
VIEWPORT = {"width": 1400, "height": 2600}


def test_log_and_scrape_show_timeline_and_plan(app_server, browser, tmp_path, artifacts) -> None:
    log = tmp_path / "sglang-server.log"
    log.write_bytes(gzip.decompress((LOGS / "sglang-0.5.9-tp2-ceiling.log.gz").read_bytes()))
    scrape = tmp_path / "metrics.prom"
    scrape.write_bytes(gzip.decompress((LOGS / "sglang-metrics.prom.gz").read_bytes()))
    ctx = browser.new_context(viewport=VIEWPORT)
    page = ctx.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    try:
        page.goto(app_server, timeout=UI_TIMEOUT_MS)
        page.get_by_text("Loaded traces").wait_for(timeout=UI_TIMEOUT_MS)
        page.locator("input[type=file]").set_input_files([str(scrape), str(log)])
        link = page.get_by_text("open the Server page")
        link.wait_for(timeout=UI_TIMEOUT_MS)
        link.click()
        page.get_by_text("SGLang log: absorbing ceiling state").wait_for(timeout=UI_TIMEOUT_MS)
        chart = page.locator(".js-plotly-plot").first
        chart.wait_for(timeout=UI_TIMEOUT_MS)
        assert chart.locator("text", has_text="largest captured size 32").count() >= 1
        assert chart.locator("text", has_text="absorbing ceiling state").count() >= 1
        code = page.get_by_test_id("stCode").first
        code.wait_for(timeout=UI_TIMEOUT_MS)
        assert code.inner_text().strip().startswith("--cuda-graph-bs ")
        page.get_by_text("Capture plan from the logs").scroll_into_view_if_needed()
        page.screenshot(path=str(artifacts / "server_page.png"), full_page=True)
        assert not errors, errors
    finally:
        ctx.close()
