"""Shared fixtures: where the reference traces live, and the bundled samples."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SAMPLES = REPO / "traces"


def _shared_dir() -> Path:
    env = os.environ.get("LAUNCHGAP_SHARED")
    return Path(env) if env else REPO.parent / "shared"


@pytest.fixture(scope="session")
def shared_traces() -> Path:
    """``../shared/traces`` beside the checkout (or $LAUNCHGAP_SHARED/traces); skips when absent."""
    p = _shared_dir() / "traces"
    if not p.is_dir():
        pytest.skip(f"reference traces not found at {p}")
    return p


@pytest.fixture(scope="session")
def samples() -> Path:
    """The small real traces bundled with the project under traces/."""
    return SAMPLES
