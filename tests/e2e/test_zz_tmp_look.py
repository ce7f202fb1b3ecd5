import shutil
from pathlib import Path
from tests.e2e.test_browser import VIEWPORT, full_page_screenshot, open_page, UI_TIMEOUT_MS, DISTRIBUTION_CSV

REPO = Path(__file__).resolve().parents[2]


def test_zz_look(app_server, browser, artifacts, tmp_path):
    src = REPO / "traces/h200-longctx-2026-12-04b/mistral-7b-like-2048/mistral-7b-like_bs8_graph.json.gz"
    up = tmp_path / "mistral_2048_bs8_graph.json.gz"
    shutil.copy(src, up)
    ctx = browser.new_context(viewport=VIEWPORT)
    page = ctx.new_page()
    page.goto(app_server, timeout=UI_TIMEOUT_MS)
    page.get_by_text("Loaded traces").wait_for(timeout=UI_TIMEOUT_MS)
    page.locator("input[type=file]").set_input_files(str(up))
    page.get_by_text("Loaded 1 of 1 file(s)").wait_for(timeout=UI_TIMEOUT_MS)
    open_page(page, "Capture plan")
    page.get_by_text("Budget and policy").wait_for(timeout=UI_TIMEOUT_MS)
    page.get_by_text("a CSV / JSON histogram").click()
    dist = tmp_path / "decode_batch_sizes.csv"
    dist.write_text("batch_size,count\n1,30\n2,20\n4,20\n8,15\n16,10\n32,5\n")
    page.locator("input[type=file]").set_input_files(str(dist))
    page.get_by_text("Using decode_batch_sizes.csv").wait_for(timeout=UI_TIMEOUT_MS)
    page.get_by_text("Configs to copy").wait_for(timeout=UI_TIMEOUT_MS)
    page.wait_for_timeout(2000)
    full_page_screenshot(page, artifacts / "zz-plan.png")
    (artifacts / "zz-plan.txt").write_text(page.inner_text("body"))
    ctx.close()
