"""Browser end-to-end fixtures: a real ``launchgap app`` server and Debian's chromium via Playwright.

Never ``playwright install``: the tests drive /usr/bin/chromium and skip, saying why, when it
is missing. Every wait is bounded; the server is always stopped (its whole process group,
which this fixture created).
"""
from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

CHROMIUM = Path(os.environ.get("LAUNCHGAP_CHROMIUM", "/usr/bin/chromium"))
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]
REPO = Path(__file__).resolve().parents[2]
ARTIFACTS = REPO / "test-artifacts" / "e2e"
SERVER_START_TIMEOUT_S = 90
UI_TIMEOUT_MS = 60_000


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _healthy(url: str) -> bool:
    try:
        with urllib.request.urlopen(url + "_stcore/health", timeout=2) as r:
            return r.status == 200 and r.read().strip() == b"ok"
    except OSError:
        return False


@pytest.fixture(scope="module")
def app_server(tmp_path_factory) -> Iterator[str]:
    """``launchgap app --port <free port>`` on 127.0.0.1 (bundled samples as shipped); yields its URL."""
    pytest.importorskip("streamlit")
    port = free_port()
    log = tmp_path_factory.mktemp("server") / "server.log"
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    with open(log, "wb") as out:
        proc = subprocess.Popen([sys.executable, "-m", "launchgap", "app", "--port", str(port)], cwd=REPO,
                                stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True)
    url = f"http://127.0.0.1:{port}/"
    try:
        deadline = time.monotonic() + SERVER_START_TIMEOUT_S
        while not _healthy(url):
            if proc.poll() is not None:
                pytest.fail(f"launchgap app exited with {proc.returncode}:\n{log.read_text(errors='replace')}")
            if time.monotonic() > deadline:
                pytest.fail(f"launchgap app not healthy after {SERVER_START_TIMEOUT_S}s:\n"
                            f"{log.read_text(errors='replace')}")
            time.sleep(0.3)
        yield url
    finally:
        # The launcher runs Streamlit as a child; stop the whole group this fixture started.
        try:
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=15)
        except ProcessLookupError:
            pass


@pytest.fixture(scope="module")
def browser():
    """Debian chromium, headless, through Playwright's sync API."""
    if not CHROMIUM.exists():
        pytest.skip(f"{CHROMIUM} not found: install Debian's chromium (make browser-deps) to run browser tests")
    sync_api = pytest.importorskip("playwright.sync_api")
    with sync_api.sync_playwright() as pw:
        b = pw.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS, headless=True,
                               timeout=UI_TIMEOUT_MS)
        try:
            yield b
        finally:
            b.close()


@pytest.fixture(scope="session")
def artifacts() -> Path:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    return ARTIFACTS
