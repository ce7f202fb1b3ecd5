"""The hypothesis profiles of tests/conftest.py: ``make test`` tries the same examples every run,
``make fuzz`` fresh ones.

Each case runs pytest in a subprocess on a one-test file that records the examples it was given,
with tests/conftest.py loaded as a plugin (``-p tests.conftest``) as it is for the suite.
"""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PROBE = '''
import os
from hypothesis import given, settings, strategies as st

@settings(deadline=None)  # a settings object of its own, as the suite's tests build them
@given(st.binary(min_size=8, max_size=8))
def test_probe(b):
    with open(os.environ["PROBE_OUT"], "a") as fh:
        fh.write(b.hex() + "\\n")
'''


def _run(tmp_path: Path, name: str, **env: str) -> tuple[subprocess.CompletedProcess, list[str]]:
    """pytest on the probe with ``env`` (the LAUNCHGAP_HYPOTHESIS_* variables of this process dropped)."""
    probe = tmp_path / "test_probe.py"
    probe.write_text(PROBE)
    out = tmp_path / f"{name}.txt"
    base = {k: v for k, v in os.environ.items() if not k.startswith("LAUNCHGAP_HYPOTHESIS_")}
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "tests.conftest", "-p", "no:cacheprovider", "--rootdir", str(tmp_path),
         str(probe)],
        cwd=tmp_path, capture_output=True, text=True, timeout=120,
        env={**base, **env, "PYTHONPATH": str(REPO), "PROBE_OUT": str(out)})
    return proc, out.read_text().split() if out.exists() else []


def test_default_profile_is_derandomized_and_repeats(tmp_path: Path) -> None:
    first, a = _run(tmp_path, "a")
    second, b = _run(tmp_path, "b")
    assert first.returncode == second.returncode == 0, first.stdout + first.stderr
    assert "hypothesis profile: ci (derandomize=True, max_examples=100" in first.stdout
    assert len(a) == 100 and a == b  # the same 100 examples, in the same order
    assert not (tmp_path / ".hypothesis" / "examples").exists()  # no database in CI


def test_fuzz_profile_explores_with_fresh_seeds(tmp_path: Path) -> None:
    first, a = _run(tmp_path, "a", LAUNCHGAP_HYPOTHESIS_PROFILE="fuzz", LAUNCHGAP_HYPOTHESIS_EXAMPLES="40")
    second, b = _run(tmp_path, "b", LAUNCHGAP_HYPOTHESIS_PROFILE="fuzz", LAUNCHGAP_HYPOTHESIS_EXAMPLES="40")
    assert first.returncode == second.returncode == 0, first.stdout + first.stderr
    assert "hypothesis profile: fuzz-40 (derandomize=False, max_examples=40" in first.stdout
    # 40 random 8-byte strings per run: two runs sharing most of them would mean a fixed seed.
    assert len(a) == len(b) == 40 and len(set(a) & set(b)) < 10


def test_examples_override_applies_to_ci_profile(tmp_path: Path) -> None:
    proc, a = _run(tmp_path, "a", LAUNCHGAP_HYPOTHESIS_EXAMPLES="7")
    assert proc.returncode == 0 and len(a) == 7, proc.stdout + proc.stderr
    assert "hypothesis profile: ci-7 (derandomize=True, max_examples=7" in proc.stdout


def test_unknown_profile_or_count_is_a_usage_error(tmp_path: Path) -> None:
    bad, _ = _run(tmp_path, "a", LAUNCHGAP_HYPOTHESIS_PROFILE="nightly")
    assert bad.returncode == 4 and "LAUNCHGAP_HYPOTHESIS_PROFILE='nightly': expected 'ci' or 'fuzz'" in bad.stderr
    bad, _ = _run(tmp_path, "b", LAUNCHGAP_HYPOTHESIS_EXAMPLES="lots")
    assert bad.returncode == 4 and "LAUNCHGAP_HYPOTHESIS_EXAMPLES='lots'" in bad.stderr
