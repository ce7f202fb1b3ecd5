"""The CLI's one process-wide setting: numpy's OpenBLAS runs one thread unless the user says otherwise."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
TRACE = REPO / "traces" / "h200-1b" / "1b_bs1_graph.json.gz"

_CODE = """
import contextlib, io, os, sys
import launchgap.cli
assert "numpy" not in sys.modules, "numpy imported before main() could set the default"
with contextlib.redirect_stdout(io.StringIO()):
    rc = launchgap.cli.main(["analyze", sys.argv[1], "--format", "json"])
assert "numpy" in sys.modules and rc in (0, 1), rc
print(os.environ.get("OPENBLAS_NUM_THREADS"))
"""


@pytest.mark.parametrize(("given", "expected"), [(None, "1"), ("4", "4")])
def test_openblas_threads_default_to_one(given: str | None, expected: str) -> None:
    env = {k: v for k, v in os.environ.items() if k != "OPENBLAS_NUM_THREADS"}
    if given is not None:
        env["OPENBLAS_NUM_THREADS"] = given
    out = subprocess.run([sys.executable, "-c", _CODE, str(TRACE)], capture_output=True, text=True, cwd=REPO,
                         env=env, check=True)
    assert out.stdout.strip() == expected
