"""In Debian chromium at 1400 px: one verdict on the Traces table and the Diagnosis banner with decode and
prefill apart (#28 item 1), workloads named (item 5), the Traces table's verdict/step/size columns in view, a
status line that never shows a green check beside "failed", Compare's batch-size labels apart (item 7)."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from launchgap.loaders import load_trace
from launchgap.report import analyze_trace
from tests.e2e.conftest import REPO, UI_TIMEOUT_MS
from tests.e2e.test_browser import VIEWPORT, full_page_screenshot, open_page, wait_for_charts
from tests.unit.kineto_tiny import doc
from tests.unit.test_app_verdicts import _vllm_events

pytestmark = pytest.mark.browser

MI300X = REPO / "traces" / "engines" / "tracelens-vllm-decode-fullgraph-mi300x" / "graph_execution.json.gz"


def _files(tmp_path: Path) -> list[Path]:
    vllm = tmp_path / "vllm_prefill_decode.json"
    vllm.write_text(json.dumps(doc(_vllm_events())), encoding="utf-8")
    mi = tmp_path / "vllm_mi300x.json.gz"
    mi.write_bytes(MI300X.read_bytes())
    bad = tmp_path / "broken.json"
    bad.write_text('{"traceEvents": [', encoding="utf-8")
    return [vllm, mi, bad]


def _headers(page) -> list[str]:
    """Column headers the Traces table's grid shows (the grid lists only the columns in view)."""
    grid = page.get_by_test_id("stDataFrame").first
    grid.locator("[role=columnheader]").first.wait_for(state="attached", timeout=UI_TIMEOUT_MS)
    return [(h.text_content() or "").strip() for h in grid.locator("[role=columnheader]").all()]


def test_verdicts_names_and_layout_at_1400px(app_server, browser, artifacts, tmp_path) -> None:
    vllm, mi, bad = _files(tmp_path)
    rep = analyze_trace(load_trace(vllm))
    page = browser.new_page(viewport=VIEWPORT)
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    try:
        page.goto(app_server, timeout=UI_TIMEOUT_MS)
        page.get_by_text("Loaded traces").wait_for(timeout=UI_TIMEOUT_MS)
        page.locator("input[type=file]").set_input_files([str(vllm), str(mi), str(bad)])
        page.get_by_text("Loaded 2 of 3 file(s); 1 failed").wait_for(timeout=UI_TIMEOUT_MS)
        # a failure is never shown with a green check
        assert page.get_by_test_id("stExpanderIconCheck").count() == 0
        assert page.get_by_test_id("stExpanderIconError").count() >= 1
        heads = _headers(page)
        for col in ("trace", "verdict", "step (us, median)", "size", "phase"):
            assert col in heads, heads  # in view at 1400 px, not cut off
        full_page_screenshot(page, artifacts / "verdicts-1-traces.png")

        open_page(page, "Diagnosis")
        page.get_by_text("Verdict:").first.wait_for(timeout=UI_TIMEOUT_MS)
        box = page.get_by_test_id("stSelectbox").filter(has_text="Trace").first
        box.click()
        page.get_by_role("option").filter(has_text="vllm_prefill_decode.json").click()
        page.get_by_text("GPU idle (decode steps)").wait_for(timeout=UI_TIMEOUT_MS)
        banner = page.get_by_test_id("stMarkdown").filter(has_text="Verdict:").first.inner_text()
        assert banner.startswith(f"Verdict: {rep.summary.verdict} (eager trace)")
        assert "1 prefill step, eager" in banner and "3 decode steps, eager" in banner
        full_page_screenshot(page, artifacts / "verdicts-2-diagnosis-split.png")

        box = page.get_by_test_id("stSelectbox").filter(has_text="Trace").first
        box.click()
        page.get_by_role("option").filter(has_text="vllm_mi300x.json.gz").click()
        page.get_by_text("MI300X").first.wait_for(timeout=UI_TIMEOUT_MS)  # named from its device properties
        assert "Workload: GptOss MoE · MI300X" in page.content()
        assert "wl-" not in page.content() and "rank 0 of 1" not in page.content()  # a name, not a hash
        full_page_screenshot(page, artifacts / "verdicts-3-diagnosis-mi300x.png")

        open_page(page, "Compare")
        page.get_by_text("Eager vs CUDA graph by batch size").wait_for(timeout=UI_TIMEOUT_MS)
        wait_for_charts(page, 1)
        page.wait_for_timeout(1500)
        boxes = page.locator(".js-plotly-plot").first.locator(".xtick text").evaluate_all(
            "els => els.map(e => { const r = e.getBoundingClientRect(); return [r.left, r.right]; })")
        boxes = sorted(b for b in boxes if b[1] > b[0])
        assert all(a[1] <= b[0] for a, b in zip(boxes, boxes[1:])), boxes  # batch-size labels do not overlap
        full_page_screenshot(page, artifacts / "verdicts-4-compare.png")
        assert not errors, errors
    finally:
        page.close()
