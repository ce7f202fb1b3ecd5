"""Fuzzing of the trace loaders (hypothesis).

The one property every test here checks: whatever the bytes of a file, loading it
(:func:`launchgap.loaders.load_trace`) and analysing it (:func:`launchgap.report.analyze_trace`)
either gives a report whose JSON serialises without NaN/inf and whose times are possible
(:func:`assert_sane`), or raises an
:class:`~launchgap.errors.AnalyzerError` subclass with a one-line message naming the file;
and ``launchgap analyze FILE --format json`` returns 0 or 2, never a traceback.

Examples per test and their seeds come from the hypothesis profile (tests/conftest.py): ``make test``
runs 100 derandomized examples per test, the same every run; ``make fuzz`` 5000 with fresh seeds.
"""
from __future__ import annotations

import contextlib
import io
import itertools
import json
from pathlib import Path

from hypothesis import HealthCheck, Phase, currently_in_test_context, event, settings

from launchgap.cli import main
from launchgap.errors import AnalyzerError
from launchgap.loaders import DEFAULT_MAX_TRACE_BYTES, load_trace
from launchgap.report import TraceReport, analyze_trace

# The example count, seeds and database come from the loaded profile (tests/conftest.py).
# Files are written under a per-module temporary folder, so a function-scoped fixture is not re-entered.
# No "explain" phase: on a failure it re-runs thousands of variants, minutes on this machine.
SETTINGS = settings(
    phases=(Phase.explicit, Phase.reuse, Phase.generate, Phase.target, Phase.shrink),
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much,
                           HealthCheck.function_scoped_fixture],
)
CORPUS = Path(__file__).resolve().parent / "corpus"

_names = itertools.count()


def fresh_path(folder: Path, suffix: str) -> Path:
    """A new file name in ``folder`` (hypothesis reuses one fixture folder for all examples)."""
    return folder / f"f{next(_names)}{suffix}"


def check_load_analyze(path: Path, max_bytes: int = DEFAULT_MAX_TRACE_BYTES) -> str:
    """Load and analyse ``path``; assert the property; return the outcome (``"ok"`` or the error class).

    Anything but an :class:`AnalyzerError` propagates and fails the test with its traceback.
    """
    try:
        report = analyze_trace(load_trace(path, max_bytes))
    except AnalyzerError as exc:
        text = str(exc)
        assert "\n" not in text, f"error message spans lines: {text!r}"
        assert str(path) in text, f"error message does not name the file: {text!r}"
        return _outcome(type(exc).__name__)
    json.dumps(report.to_dict(), allow_nan=False)
    assert_sane(report)
    return _outcome("ok")


def assert_sane(report: TraceReport) -> None:
    """Numbers no trace can make true: a negative window or idle time, or more busy time than window.

    A loader that lets a timestamp overflow int64 ns gives exactly these, silently.
    """
    for d in report.devices:
        assert 0 <= d.gpu_busy_us <= d.gpu_window_us + 1e-3, d
        assert d.gpu_idle_us >= 0, d
    for s in report.steps:
        assert 0 <= s.gpu_busy_us <= s.dur_us + 1e-3, s
        assert s.gpu_idle_us >= 0 and s.cpu_us >= 0, s


def _outcome(name: str) -> str:
    """Count outcomes in hypothesis' statistics (``--hypothesis-show-statistics``): a fuzzer whose
    inputs are all refused at the first check explores little."""
    if currently_in_test_context():
        event(name)
    return name


def check_cli(path: Path, fmt: str = "json") -> int:
    """``launchgap analyze PATH --format FMT`` in process: exit 0 with a report, or 2 with one error line."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = main(["analyze", str(path), "--format", fmt])
    assert rc in (0, 2), (rc, err.getvalue())
    if rc == 0 and fmt == "json":
        doc = json.loads(out.getvalue())
        assert doc["schema"].startswith("launchgap.report/")
        assert doc["traces"], "exit 0 without a report"
    if rc == 2:
        lines = err.getvalue().strip().splitlines()
        assert lines and all(ln.startswith("launchgap: error: ") for ln in lines), err.getvalue()
        assert "Traceback" not in err.getvalue()
    _outcome(f"exit {rc}")
    return rc
