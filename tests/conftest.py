"""Shared fixtures: the real reference traces bundled under traces/."""
from __future__ import annotations

from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
TRACES = REPO / "traces"


@pytest.fixture(scope="session")
def reference_traces() -> Path:
    """The repository's ``traces/``: real traces, one set per folder, each with its PROVENANCE.md.

    They ship with the repository, so a missing folder is a broken checkout: it fails, never skips.
    """
    assert TRACES.is_dir(), f"reference traces missing: {TRACES} (part of the repository)"
    return TRACES
