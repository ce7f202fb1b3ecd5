"""Regenerate docs/screenshots/*.png: one per dashboard page (Traces, Diagnosis, Compare, Capture plan, Ranks,
Fleet), from the bundled samples.

    .venv/bin/python -m tests.e2e.screenshots [OUT_DIR]

Starts ``launchgap app`` on a free port, drives Debian chromium like the browser tests,
and writes palette-quantised PNGs (small enough to commit) to OUT_DIR (default
docs/screenshots). Not a test: pytest does not collect it.
"""
from __future__ import annotations

import sys
import tempfile
from pathlib import Path

from playwright.sync_api import sync_playwright

from tests.e2e.conftest import CHROMIUM, CHROMIUM_ARGS, REPO, UI_TIMEOUT_MS, running_app
from tests.e2e.test_browser import (DISTRIBUTION_CSV, VIEWPORT, full_page_screenshot, metric_value, open_page,
                                    wait_for_charts)

#: Samples to show besides the default ones, so Compare has eager/graph pairs at several batch sizes.
#: (the same workload as the default h200-1b samples: Compare pools one workload at a time)
EXTRA_SAMPLES = ("h200-1b/1b_bs1_eager.json.gz", "h200-1b/1b_bs1_graph.json.gz", "h200-1b/1b_bs64_graph.json.gz")


#: The two ranks of the bundled tensor-parallel job (the Ranks page).
RANK_SAMPLES = ("h200x2-tp2-1b/tp1b_bs1_eager_rank0.json.gz", "h200x2-tp2-1b/tp1b_bs1_eager_rank1.json.gz")
#: The fleet: every bundled H200 harness trace and the job's ranks, as ``launchgap fleet --out`` writes them.
FLEET_GLOBS = ("h200/*.json.gz", "h200-1b/*.json.gz", "h200x2-tp2-1b/tp1b_bs1_*_rank*.json.gz")


def _fleet_file(tmp: Path) -> Path:
    """A fleet results file (header + one summary per trace), as ``launchgap fleet ... --out`` writes it."""
    import json

    from launchgap.fleet import results_header, summarize_trace
    from launchgap.loaders import DEFAULT_MAX_TRACE_BYTES
    from launchgap.report import AnalysisOptions

    out = tmp / "fleet.jsonl"
    with open(out, "w") as fh:
        fh.write(json.dumps(results_header(AnalysisOptions(), DEFAULT_MAX_TRACE_BYTES)) + "\n")
        for pattern in FLEET_GLOBS:
            for p in sorted((REPO / "traces").glob(pattern)):
                fh.write(json.dumps(summarize_trace(p)) + "\n")
    return out


def _quantise(path: Path) -> None:
    from PIL import Image

    im = Image.open(path).convert("RGB")
    im.quantize(colors=128, method=Image.Quantize.MEDIANCUT, dither=Image.Dither.NONE).save(path, optimize=True)


def main(out: Path) -> int:
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as logs, running_app(Path(logs) / "server.log") as url:
        with sync_playwright() as pw, tempfile.TemporaryDirectory() as tmp:
            browser = pw.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS, headless=True)
            page = browser.new_page(viewport=VIEWPORT)
            page.goto(url, timeout=UI_TIMEOUT_MS)
            page.get_by_text("Loaded traces").wait_for(timeout=UI_TIMEOUT_MS)
            box = page.get_by_test_id("stMultiSelect").first
            for rel in EXTRA_SAMPLES:
                if (REPO / "traces" / rel).is_file():
                    box.locator("input").first.fill(rel)
                    # the option of exactly this sample: Enter would take the first fuzzy match of many
                    page.get_by_role("option", name=rel, exact=True).first.click(timeout=UI_TIMEOUT_MS)
                    page.keyboard.press("Escape")
                    page.wait_for_timeout(1500)
            page.wait_for_timeout(1500)
            full_page_screenshot(page, out / "traces.png")

            open_page(page, "Diagnosis")
            page.get_by_test_id("stSelectbox").first.locator("input").first.fill("h200-1b/1b_bs8_eager")
            page.keyboard.press("Enter")
            metric_value(page, "Predicted CUDA-graph speedup")
            wait_for_charts(page, 3)
            page.wait_for_timeout(1500)
            full_page_screenshot(page, out / "diagnosis.png")

            open_page(page, "Compare")
            wait_for_charts(page, 3)
            page.wait_for_timeout(1500)
            full_page_screenshot(page, out / "compare.png")

            open_page(page, "Capture plan")
            page.get_by_text("harness timings (JSON)").click()
            page.get_by_text("Timings file").wait_for(timeout=UI_TIMEOUT_MS)
            page.get_by_text("a CSV / JSON histogram").click()
            dist = Path(tmp) / "decode_batch_sizes.csv"
            dist.write_text(DISTRIBUTION_CSV)
            page.locator("input[type=file]").set_input_files(str(dist))
            page.get_by_text("Using decode_batch_sizes.csv").wait_for(timeout=UI_TIMEOUT_MS)
            metric_value(page, "Graphs to capture")
            wait_for_charts(page, 2)
            page.wait_for_timeout(1500)
            full_page_screenshot(page, out / "plan.png")

            open_page(page, "Traces")
            box = page.get_by_test_id("stMultiSelect").first
            for rel in RANK_SAMPLES:
                box.locator("input").first.fill(rel)
                page.get_by_role("option", name=rel, exact=True).first.click(timeout=UI_TIMEOUT_MS)
                page.keyboard.press("Escape")
                page.wait_for_timeout(1500)
            open_page(page, "Ranks")
            metric_value(page, "Group CUDA-graph step")
            wait_for_charts(page, 1)
            page.wait_for_timeout(1500)
            full_page_screenshot(page, out / "ranks.png")

            open_page(page, "Fleet")
            page.locator("input[type=file]").set_input_files(str(_fleet_file(Path(tmp))))
            metric_value(page, "Traces")
            wait_for_charts(page, 2)
            page.wait_for_timeout(1500)
            full_page_screenshot(page, out / "fleet.png")
            browser.close()
        for name in ("traces", "diagnosis", "compare", "plan", "ranks", "fleet"):
            _quantise(out / f"{name}.png")
            print(f"{out / name}.png: {(out / f'{name}.png').stat().st_size / 1e3:.0f} kB")
        return 0


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1]) if len(sys.argv) > 1 else REPO / "docs" / "screenshots"))
