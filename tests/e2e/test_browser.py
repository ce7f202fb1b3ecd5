"""The dashboard in a real browser: Debian chromium against a real ``launchgap app`` server.

Uploads go through the page's own file input; screenshots of every page land in
test-artifacts/e2e/ (look at them: they should look like a tool you would use).
"""
from __future__ import annotations

import gzip
import shutil
from pathlib import Path

import pytest

from launchgap.loaders import load_trace
from launchgap.report import analyze_trace
from tests.e2e.conftest import REPO, UI_TIMEOUT_MS

pytestmark = pytest.mark.browser

SAMPLE = REPO / "traces" / "h200-1b" / "1b_bs8_eager.json.gz"
TIMINGS = REPO / "traces" / "h200-1b" / "truth.json"
VIEWPORT = {"width": 1400, "height": 1000}
# A decode batch-size mix like a busy server's (batch size, steps).
DISTRIBUTION_CSV = ("batch_size,count\n1,40\n2,55\n4,90\n6,60\n8,140\n12,150\n16,210\n24,240\n32,260\n48,180\n"
                    "64,120\n96,60\n128,30\n192,12\n256,5\n")


def _sample() -> Path:
    return SAMPLE


def full_page_screenshot(page, path: Path) -> None:
    """Streamlit scrolls inside its main block: grow the viewport to the content, then shoot."""
    height = page.evaluate("() => document.querySelector('[data-testid=\"stMainBlockContainer\"]').scrollHeight")
    page.set_viewport_size({"width": VIEWPORT["width"], "height": max(VIEWPORT["height"], int(height) + 40)})
    page.wait_for_timeout(1200)  # let Plotly re-layout to the new size
    page.screenshot(path=str(path))
    page.set_viewport_size(VIEWPORT)


def open_page(page, name: str) -> None:
    page.get_by_test_id("stSidebarNavLink").filter(has_text=name).click()


def metric_value(page, label: str) -> str:
    m = page.get_by_test_id("stMetric").filter(has_text=label)
    m.first.wait_for(timeout=UI_TIMEOUT_MS)
    return m.first.get_by_test_id("stMetricValue").inner_text().strip()


def wait_for_charts(page, n: int) -> None:
    page.locator(".js-plotly-plot").nth(n - 1).wait_for(timeout=UI_TIMEOUT_MS)
    page.locator(".js-plotly-plot .main-svg").first.wait_for(timeout=UI_TIMEOUT_MS)


def test_upload_and_diagnose_in_chromium(app_server, browser, artifacts, tmp_path) -> None:
    sample = _sample()
    upload = tmp_path / "prod_decode_bs8.json.gz"
    shutil.copy(sample, upload)
    expected = analyze_trace(load_trace(sample)).summary

    ctx = browser.new_context(viewport=VIEWPORT)
    page = ctx.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    try:
        page.goto(app_server, timeout=UI_TIMEOUT_MS)
        page.get_by_text("Loaded traces").wait_for(timeout=UI_TIMEOUT_MS)
        page.locator("input[type=file]").set_input_files(str(upload))
        page.get_by_text("Loaded 1 of 1 file(s)").wait_for(timeout=UI_TIMEOUT_MS)
        assert "prod_decode_bs8.json.gz" in page.content()  # the grid keeps its cells' text in the DOM
        full_page_screenshot(page, artifacts / "1-traces.png")

        open_page(page, "Diagnosis")
        assert metric_value(page, "Predicted CUDA-graph speedup") == f"{expected.predicted_speedup:.2f}x"
        assert metric_value(page, "GPU idle") == f"{expected.gpu_idle_fraction:.1%}"
        assert metric_value(page, "Launch-to-kernel ratio") == f"{expected.launch_to_kernel_ratio:.2f}"
        assert metric_value(page, "Steps") == str(expected.steps)
        trace_box = page.get_by_test_id("stSelectbox").first
        shown = trace_box.inner_text() + " ".join(i.input_value() for i in trace_box.locator("input").all())
        assert "prod_decode_bs8.json.gz" in shown  # it opens on the upload
        wait_for_charts(page, 3)  # step timeline, idle by cause, gap histogram
        full_page_screenshot(page, artifacts / "2-diagnosis.png")

        open_page(page, "Compare")
        wait_for_charts(page, 3)
        page.get_by_text("Two traces side by side").wait_for(timeout=UI_TIMEOUT_MS)
        full_page_screenshot(page, artifacts / "3-compare.png")

        open_page(page, "Capture plan")
        page.get_by_text("Budget and policy").wait_for(timeout=UI_TIMEOUT_MS)
        if TIMINGS.is_file():  # unprofiled harness timings, and a production-like distribution
            page.get_by_text("harness timings (JSON)").click()
            page.get_by_text("Timings file").wait_for(timeout=UI_TIMEOUT_MS)
        page.get_by_text("a CSV / JSON histogram").click()
        dist = tmp_path / "decode_batch_sizes.csv"
        dist.write_text(DISTRIBUTION_CSV)
        page.locator("input[type=file]").set_input_files(str(dist))
        page.get_by_text("Using decode_batch_sizes.csv").wait_for(timeout=UI_TIMEOUT_MS)
        graphs = int(metric_value(page, "Graphs to capture"))
        assert graphs >= 1  # no graph limit by default, as the command
        wait_for_charts(page, 2)
        page.get_by_text("Configs to copy").wait_for(timeout=UI_TIMEOUT_MS)
        full_page_screenshot(page, artifacts / "4-plan.png")
        assert not errors, errors
    finally:
        ctx.close()


def test_two_browser_sessions_are_isolated(app_server, browser, tmp_path) -> None:
    """What one session uploads (a trace, a bad file) is not listed, selectable or shown in another."""
    secret = tmp_path / "secret_tenant_a.json.gz"
    shutil.copy(_sample(), secret)
    broken = tmp_path / "broken_b.json.gz"
    broken.write_bytes(gzip.compress(b'{"traceEvents": [')[:-8])  # gzip stream cut short
    a = browser.new_context(viewport=VIEWPORT)
    b = browser.new_context(viewport=VIEWPORT)
    try:
        pa = a.new_page()
        pa.goto(app_server, timeout=UI_TIMEOUT_MS)
        pa.get_by_text("Loaded traces").wait_for(timeout=UI_TIMEOUT_MS)
        pa.locator("input[type=file]").set_input_files(str(secret))
        pa.get_by_text("Loaded 1 of 1 file(s)").wait_for(timeout=UI_TIMEOUT_MS)
        assert "secret_tenant_a" in pa.content()

        pb = b.new_page()
        pb.goto(app_server, timeout=UI_TIMEOUT_MS)
        pb.get_by_text("Loaded traces").wait_for(timeout=UI_TIMEOUT_MS)
        assert "secret_tenant_a" not in pb.content()
        # B's bad file: the analyzer's one line next to its name, no traceback; A never sees it.
        pb.locator("input[type=file]").set_input_files(str(broken))
        pb.get_by_text("Loaded 0 of 1 file(s); 1 failed").wait_for(timeout=UI_TIMEOUT_MS)
        alert = pb.get_by_test_id("stAlertContentError").filter(has_text="broken_b.json.gz")
        text = alert.get_by_test_id("stMarkdownContainer").inner_text().strip()
        assert text.startswith("broken_b.json.gz: truncated") and "\n" not in text
        assert "Traceback" not in pb.content()
        open_page(pb, "Diagnosis")
        metric_value(pb, "Steps")
        pb.get_by_test_id("stSelectbox").first.click()
        options = pb.get_by_role("option").all_inner_texts()
        assert options and not any("secret_tenant_a" in o for o in options)

        pa.reload(timeout=UI_TIMEOUT_MS)  # a reload is a new session: A's upload is gone with it
        pa.get_by_text("Loaded traces").wait_for(timeout=UI_TIMEOUT_MS)
        assert "secret_tenant_a" not in pa.content() and "broken_b" not in pa.content()
    finally:
        a.close()
        b.close()


LOAD_TRACES = ("h200/1b_bs1_eager.json.gz", "h200/1b_bs64_eager.json.gz", "h200/8b_bs1_eager.json.gz",
               "h200/70b-slice_bs1_eager.json.gz", "h200/70b-slice_bs64_eager.json.gz", "h200/tiny_bs1_eager.json.gz")
#: Stated bound for the load test: the Streamlit server process's resident memory stays under this.
LOAD_MAX_RSS_BYTES = 2 * 1024**3
#: ... and its health endpoint answers within this while every session parses and renders.
LOAD_MAX_HEALTH_S = 5.0


@pytest.mark.slow
def test_concurrent_sessions_each_get_their_own_result(app_server, browser, artifacts, tmp_path) -> None:
    """Six browser sessions upload six different traces at once; each sees its own numbers, the server stays up."""
    import json
    import threading
    import time
    import urllib.request

    psutil = pytest.importorskip("psutil")
    files = [REPO / "traces" / rel for rel in LOAD_TRACES]
    expected = {f.name: f"{analyze_trace(load_trace(f)).summary.predicted_speedup:.2f}x" for f in files}
    server = [p for p in psutil.process_iter(["cmdline"])
              if p.info["cmdline"] and "--server.port" in p.info["cmdline"]
              and app_server.rstrip("/").rsplit(":", 1)[1] in p.info["cmdline"]]
    assert len(server) == 1, "cannot find the Streamlit server process"
    proc = server[0]

    samples = {"rss": [], "health_s": []}
    stop = threading.Event()

    def watch() -> None:  # runs beside the browser: memory and responsiveness every 0.2 s
        while not stop.is_set():
            samples["rss"].append(proc.memory_info().rss)
            t = time.monotonic()
            try:
                urllib.request.urlopen(app_server + "_stcore/health", timeout=LOAD_MAX_HEALTH_S * 2).read()
                samples["health_s"].append(time.monotonic() - t)
            except OSError:
                samples["health_s"].append(float("inf"))
            stop.wait(0.2)

    contexts = [browser.new_context(viewport=VIEWPORT) for _ in files]
    watcher = threading.Thread(target=watch, daemon=True)
    try:
        pages = [c.new_page() for c in contexts]
        for p in pages:
            p.goto(app_server, timeout=UI_TIMEOUT_MS)
        for p in pages:
            p.get_by_text("Loaded traces").wait_for(timeout=UI_TIMEOUT_MS)
        watcher.start()
        t0 = time.monotonic()
        for p, f in zip(pages, files):  # all uploads start before any result is awaited
            p.locator("input[type=file]").set_input_files(str(f))
        got = {}
        for p, f in zip(pages, files):
            p.get_by_text("Loaded 1 of 1 file(s)").wait_for(timeout=UI_TIMEOUT_MS)
            open_page(p, "Diagnosis")
            got[f.name] = metric_value(p, "Predicted CUDA-graph speedup")
            box = p.get_by_test_id("stSelectbox").first
            shown = box.inner_text() + " ".join(i.input_value() for i in box.locator("input").all())
            assert f.name in shown
            wait_for_charts(p, 3)
        wall_s = time.monotonic() - t0
    finally:
        stop.set()
        if watcher.is_alive():
            watcher.join(timeout=10)
        for c in contexts:
            c.close()
    assert got == expected
    numbers = {"sessions": len(files), "wall_s": round(wall_s, 2),
               "peak_rss_mib": round(max(samples["rss"]) / 2**20, 1),
               "health_p50_ms": round(1e3 * sorted(samples["health_s"])[len(samples["health_s"]) // 2], 1),
               "health_max_ms": round(1e3 * max(samples["health_s"]), 1), "health_samples": len(samples["health_s"])}
    (artifacts / "load.json").write_text(json.dumps(numbers, indent=1) + "\n")
    assert max(samples["rss"]) < LOAD_MAX_RSS_BYTES, numbers
    assert max(samples["health_s"]) < LOAD_MAX_HEALTH_S, numbers
