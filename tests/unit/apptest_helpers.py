"""Driving the dashboard in Streamlit's AppTest: shared by the page tests."""
from __future__ import annotations

from streamlit.testing.v1 import AppTest

from launchgap.dashboard import MAIN_SCRIPT

TIMEOUT_S = 60


def new_app() -> AppTest:
    at = AppTest.from_file(str(MAIN_SCRIPT), default_timeout=TIMEOUT_S)
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def upload(at: AppTest, files: list[tuple[str, bytes]]) -> AppTest:
    at.file_uploader(key="lg_uploader").set_value([(n, b, "application/octet-stream") for n, b in files])
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def goto(at: AppTest, page: str) -> AppTest:
    at.switch_page(f"views/{page}.py").run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def metrics(at: AppTest) -> dict[str, str]:
    return {m.label: m.value for m in at.metric}
