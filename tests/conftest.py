"""Shared fixtures and settings: the real reference traces bundled under traces/, and hypothesis profiles.

Hypothesis profiles (``LAUNCHGAP_HYPOTHESIS_PROFILE``, default ``ci``):

* ``ci`` (``make test``): derandomized, so every run tries the same examples and a random search
  never decides whether a change lands; no example database (nothing found on one machine is
  replayed on another: a failure worth keeping becomes an ``@example`` or a corpus file); 100
  examples per test; no timing-dependent checks (deadline, too-slow health check).
* ``fuzz`` (``make fuzz``): fresh random seeds every run, 5000 examples per test, failures kept
  in ``.hypothesis/examples`` and retried first next time.

``LAUNCHGAP_HYPOTHESIS_EXAMPLES=N`` sets the examples per test under either profile.
"""
from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings
from hypothesis.database import DirectoryBasedExampleDatabase

REPO = Path(__file__).resolve().parents[1]
TRACES = REPO / "traces"

PROFILE_ENV = "LAUNCHGAP_HYPOTHESIS_PROFILE"
EXAMPLES_ENV = "LAUNCHGAP_HYPOTHESIS_EXAMPLES"
CI_EXAMPLES = 100
FUZZ_EXAMPLES = 5000
_PROFILE_KEY = pytest.StashKey[str]()

# Timing-dependent checks only make a slow or busy machine fail: off in both profiles.
_COMMON = dict(deadline=None, print_blob=True, suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("ci", max_examples=CI_EXAMPLES, derandomize=True, database=None, **_COMMON)
settings.register_profile("fuzz", max_examples=FUZZ_EXAMPLES, derandomize=False,
                          database=DirectoryBasedExampleDatabase(str(REPO / ".hypothesis" / "examples")), **_COMMON)


def _load_hypothesis_profile() -> str:
    """Load the profile named by the environment (``ci`` if unset), with the examples override; its name."""
    name = os.environ.get(PROFILE_ENV, "").strip() or "ci"
    if name not in ("ci", "fuzz"):
        raise pytest.UsageError(f"{PROFILE_ENV}={name!r}: expected 'ci' or 'fuzz'")
    raw = os.environ.get(EXAMPLES_ENV, "").strip()
    if raw:
        if not raw.isdigit() or int(raw) < 1:
            raise pytest.UsageError(f"{EXAMPLES_ENV}={raw!r}: expected a whole number of examples, at least 1")
        settings.register_profile(f"{name}-{raw}", parent=settings.get_profile(name), max_examples=int(raw))
        name = f"{name}-{raw}"
    settings.load_profile(name)
    return name


def pytest_configure(config: pytest.Config) -> None:
    # Runs before any test module is imported, so every settings object the tests build starts
    # from the loaded profile.
    config.stash[_PROFILE_KEY] = _load_hypothesis_profile()


def pytest_report_header(config: pytest.Config) -> str:
    s = settings.default
    return (f"hypothesis profile: {config.stash[_PROFILE_KEY]} (derandomize={s.derandomize}, "
            f"max_examples={s.max_examples}; set with {PROFILE_ENV}, {EXAMPLES_ENV})")


@pytest.fixture(scope="session")
def reference_traces() -> Path:
    """The repository's ``traces/``: real traces, one set per folder, each with its PROVENANCE.md.

    They ship with the repository, so a missing folder is a broken checkout: it fails, never skips.
    """
    assert TRACES.is_dir(), f"reference traces missing: {TRACES} (part of the repository)"
    return TRACES
