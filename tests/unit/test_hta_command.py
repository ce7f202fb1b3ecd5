"""``launchgap hta`` and :mod:`launchgap.hta_bridge` on tiny hand-built Kineto traces.

The numbers below were worked out by hand from HTA 0.5.0's definitions (see the bridge's
docstring) before running it; HTA reproduces them exactly. Times in us.

``_tiny`` (one stream, two ProfilerSteps; launch call -> kernel, all cudaLaunchKernel)::

    L1 [10, 15]   -> K1 [20.4, 30.6]
    L2 [38, 42]   -> K2 [45.3, 45.8]     sub-us: HTA's rounding makes it [46, 45], -1 us
    L3 [43, 44]   -> K3 [62, 82]         launched before K2 ended
    L4 [70, 72]   -> K4 [120, 125]       launched before K3 ended
    L5 [110, 115] -> K5 [130, 140]       in the last ProfilerStep (HTA drops it)
    cudaStreamSynchronize [85, 95] and its cuda_sync "Stream Sync" [84, 86] on stream 7

launchgap: window 20.4..140 = 119.6, busy 45.7, idle 73.9; gaps K1-K2 14.7 (host: L2 starts
after K1 ended), K2-K3 16.2 (gpu, < 30 us: kernel wait), K3-K4 38 (gpu, >= 30: other),
K4-K5 5 (kernel wait). HTA's launch delay (op start - call end): 5.4, 3.3, 18, 48, 15.
"""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from launchgap.cli import main
from launchgap.errors import AnalyzerError
from launchgap.hta_bridge import (
    ALIGNED,
    INSTALL_HINT,
    SCHEMA,
    HtaError,
    HtaSettings,
    agrees,
    compare_with_hta,
    import_hta,
    our_numbers,
    run_hta,
    stream_idle_hta_rule,
    stream_idle_ours,
)
from launchgap.loaders import load_trace
from tests.unit.kineto_tiny import ann, kernel, launch, write

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def needs_hta() -> None:
    try:
        import_hta()
    except HtaError as exc:
        pytest.skip(f"HTA not usable here: {exc}")


def _stream_sync(ts: float, dur: float, corr: int) -> dict:
    return {"ph": "X", "cat": "cuda_sync", "name": "Stream Sync", "pid": 0, "tid": 7, "ts": ts, "dur": dur,
            "args": {"device": 0, "stream": 7, "correlation": corr}}


def _tiny(tmp_path: Path) -> Path:
    events = [
        ann("ProfilerStep#1", 0, 100), ann("ProfilerStep#2", 100, 100),
        launch(10, 5, 1), kernel(20.4, 10.2, 1),
        launch(38, 4, 2), kernel(45.3, 0.5, 2),
        launch(43, 1, 3), kernel(62, 20, 3),
        launch(70, 2, 4), kernel(120, 5, 4),
        launch(110, 5, 5), kernel(130, 10, 5),
        launch(85, 10, 6, name="cudaStreamSynchronize"), _stream_sync(84, 2, 6),
    ]
    return write(tmp_path, events, name="tiny.json")


def _overlap(tmp_path: Path) -> Path:
    """No ProfilerStep (HTA filters nothing). Event #0 is a late annotation (ts 1000).

    K1 [10, 20] and K2 [19.5, 25] overlap by 0.5 us on stream 7 (both launched early);
    K3 [40, 45] launched at 30, after K2 ended: 15 us host wait; K4 [50, 55] has a correlation
    id but no launch call in the trace: launchgap leaves its 5 us gap unattributed (kernel
    wait), HTA times it by event #0 (1000 > 45: host wait).
    """
    events = [
        ann("late", 1000, 1),
        launch(5, 1, 1), kernel(10, 10, 1),
        launch(6, 1, 2), kernel(19.5, 5.5, 2),
        launch(30, 2, 3), kernel(40, 5, 3),
        kernel(50, 5, 99),
    ]
    return write(tmp_path, events, name="overlap.json")


# --- without HTA -------------------------------------------------------------------------------


def test_missing_extra_says_how_to_install(tmp_path, monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "hta", None)  # makes `import hta` raise ImportError
    assert main(["hta", str(_tiny(tmp_path))]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0
    assert err.startswith("launchgap: error: Holistic Trace Analysis is not installed")
    assert err.endswith(f"install it with: {INSTALL_HINT}")
    assert INSTALL_HINT == "pip install 'launchgap[hta]'"


def test_missing_extra_in_the_bridge(monkeypatch):
    monkeypatch.setitem(sys.modules, "hta", None)
    with pytest.raises(HtaError, match=r"pip install 'launchgap\[hta\]'"):
        run_hta("unused.json")


def test_pandas_3_is_refused_with_the_pin(monkeypatch):
    pd = pytest.importorskip("pandas")
    pytest.importorskip("hta")
    monkeypatch.setattr(pd, "__version__", "3.0.0")
    with pytest.raises(HtaError, match=r"HTA 0\.5\.0 needs pandas<3, found pandas 3\.0\.0.*launchgap\[hta\]"):
        import_hta()


@pytest.mark.parametrize(("a", "b", "expected"), [
    (100.0, 100.9, True),  # 0.9% of the larger
    (100.0, 101.1, False),  # 1.09%
    (0.0, 0.01, True),  # absolute floor for values near zero
    (0.0, 0.02, False),
    (-5.0, -5.04, True),
])
def test_agrees_is_one_percent_of_the_larger(a, b, expected):
    assert agrees(a, b) is expected


def test_settings_reject_unknown_step_filter():
    with pytest.raises(ValueError, match="step_filter"):
        HtaSettings(step_filter="last")


# --- launchgap's side under HTA's definitions (no HTA needed) ----------------------------------


def test_our_numbers_under_htas_definitions(tmp_path):
    o = our_numbers(load_trace(_tiny(tmp_path)))
    assert (o.kernels, o.gpu_ops) == (5, 5)
    assert o.gpu_window_us == pytest.approx(119.6) and o.gpu_busy_us == pytest.approx(45.7)
    assert o.gpu_idle_us == pytest.approx(73.9)
    np.testing.assert_allclose(np.sort(o.launch_delays_us), [3.3, 5.4, 15.0, 18.0, 48.0], atol=1e-9)
    np.testing.assert_allclose(np.sort(o.launch_cpu_us), [1.0, 2.0, 4.0, 5.0, 5.0], atol=1e-9)
    assert o.launch_calls == 5
    (s,) = o.streams
    assert (s.stream, s.host_wait_us, s.kernel_wait_us, s.other_us) == (7, pytest.approx(14.7),
                                                                        pytest.approx(21.2), pytest.approx(38.0))
    assert s.idle_us == pytest.approx(o.gpu_idle_us)
    assert o.streams_hta_rule == o.streams  # nothing overlaps: HTA's interval rule gives the same


def test_overlap_is_a_negative_interval_only_under_htas_rule(tmp_path):
    tr = load_trace(_overlap(tmp_path))
    (ours,) = stream_idle_ours(tr)
    (rule,) = stream_idle_hta_rule(tr)
    assert (ours.host_wait_us, ours.kernel_wait_us, ours.other_us) == pytest.approx((15.0, 5.0, 0.0))
    assert (rule.host_wait_us, rule.kernel_wait_us, rule.other_us) == pytest.approx((15.0, 4.5, 0.0))


def test_hta_launch_set_excludes_other_launch_apis(tmp_path):
    events = [launch(0, 2, 1), kernel(5, 1, 1),
              launch(10, 2, 2, name="cuLaunchKernel"), kernel(15, 1, 2),
              launch(20, 2, 3, name="cudaLaunchKernelExC"), kernel(21, 1, 3)]
    o = our_numbers(load_trace(write(tmp_path, events)))
    # cuLaunchKernel is one of launchgap's launch calls but not in HTA's set; ExC's kernel
    # starts before its call ends: HTA clips the delay to 0.
    assert o.launch_calls == 3
    np.testing.assert_allclose(np.sort(o.launch_delays_us), [0.0, 3.0])


# --- with HTA -----------------------------------------------------------------------------------


def test_hta_defaults_on_the_tiny_trace(tmp_path, needs_hta):
    r = run_hta(_tiny(tmp_path))
    # Rounded: K1 [21, 30], K2 [46, 45], K3 [62, 82], sync [84, 86], K4 [120, 125]; K5 dropped.
    assert (r.kernels, r.gpu_ops) == (4, 4)
    t = r.temporal
    assert (t.window_us, t.idle_us, t.compute_us, t.non_compute_us) == (104.0, 69.0, 33.0, 2.0)
    assert t.busy_us == 35.0  # 9 - 1 + 20 + 2 + 5: the sync range counts, K2 subtracts a us
    (s,) = r.streams
    assert (s.stream, s.host_wait_us, s.kernel_wait_us, s.other_us) == (7, 16.0, 17.0, 38.0)
    la = r.launch
    assert (la.launches, la.cpu_us_mean, la.launch_delay_us_mean, la.launch_delay_us_p50, la.launch_delay_us_max) == (
        4, 3.0, 19.0, 12.0, 48.0)  # delays 6, 4, 18, 48
    assert [(k.kernel_type, k.time_us, k.percent) for k in r.kernel_types] == [("COMPUTATION", 34.0, 100.0)]
    assert r.failures == {}


def test_hta_aligned_equals_launchgap_on_the_tiny_trace(tmp_path, needs_hta):
    r = run_hta(_tiny(tmp_path), ALIGNED)
    t = r.temporal
    assert (r.kernels, t.window_us, t.busy_us, t.idle_us) == (5, pytest.approx(119.6), pytest.approx(45.7),
                                                               pytest.approx(73.9))
    (s,) = r.streams
    assert (s.host_wait_us, s.kernel_wait_us, s.other_us) == pytest.approx((14.7, 21.2, 38.0))
    assert (r.launch.launches, r.launch.launch_delay_us_mean, r.launch.launch_delay_us_p50) == (
        5, pytest.approx(17.94), pytest.approx(15.0))


def test_comparison_names_each_deviation_with_its_size(tmp_path, needs_hta):
    c = compare_with_hta(_tiny(tmp_path))
    assert all(r.aligned_agree for r in c.rows), [r for r in c.rows if not r.aligned_agree]
    busy = c.row("gpu_busy_us")
    assert (busy.ours, busy.hta, busy.hta_aligned) == (45.7, 35.0, 45.7) and not busy.agree
    # rounding: K1 loses 1.2 us, K2 1.5 us; the sync range adds 2; K5 (10 us) is in the last step
    assert busy.deltas == {"rounding_to_us": -2.7, "stream_events_as_gpu": 2.0, "last_profiler_step_dropped": -10.0}
    assert c.row("kernels").deltas == {"last_profiler_step_dropped": -1.0}
    other = c.row("stream 7 other_us")
    assert (other.ours, other.hta, other.agree, other.deltas) == (38.0, 38.0, True, {})
    assert c.hta.temporal.window_us == 104.0  # the default report rides along


def test_comparison_measures_overlaps_and_launchless_ops(tmp_path, needs_hta):
    c = compare_with_hta(_overlap(tmp_path))
    kw = c.row("stream 7 kernel_wait_us")
    assert (kw.ours, kw.hta_aligned) == (5.0, 4.5)
    assert kw.adjustments == {"overlap_as_negative_idle": -0.5} and kw.aligned_agree
    # HTA's rounding starts K2 at 20, where K1 ends: the overlap (and its -0.5) is gone.
    assert kw.deltas == {"rounding_to_us": 0.5, "launchless_ops_timed_by_event_0": -5.0}
    hw = c.row("stream 7 host_wait_us")
    assert (hw.ours, hw.hta, hw.deltas) == (15.0, 20.0, {"launchless_ops_timed_by_event_0": 5.0})


def test_cli_json(tmp_path, needs_hta, capsys):
    assert main(["hta", str(_tiny(tmp_path)), "--format", "json", "--compare"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["schema"] == SCHEMA == "launchgap.hta/1" and doc["errors"] == []
    (t,) = doc["traces"]
    assert t["temporal"] == {"window_us": 104.0, "idle_us": 69.0, "compute_us": 33.0, "non_compute_us": 2.0,
                             "busy_us": 35.0}
    assert t["settings"] == {"round_to_us": True, "stream_events_as_gpu": True, "step_filter": "drop-last-step",
                             "launchless_ops_timed_by_event_0": True}
    rows = {r["metric"]: r for r in t["comparison"]["rows"]}
    assert rows["gpu_window_us"]["ours"] == 119.6 and rows["gpu_window_us"]["hta"] == 104.0


def test_cli_options_change_htas_settings(tmp_path, needs_hta, capsys):
    assert main(["hta", str(_tiny(tmp_path)), "--format", "json", "--no-round", "--include-last-profiler-step"]) == 0
    (t,) = json.loads(capsys.readouterr().out)["traces"]
    assert t["kernels"] == 5 and t["comparison"] is None
    assert t["temporal"]["window_us"] == pytest.approx(119.6)  # K5 kept, nothing rounded
    assert t["temporal"]["busy_us"] == pytest.approx(47.7)  # launchgap's 45.7 + the 2 us sync range


def test_cli_text(tmp_path, needs_hta, capsys):
    assert main(["hta", str(_tiny(tmp_path)), "--compare"]) == 0
    out = capsys.readouterr().out
    assert "window 104.0   busy 35.0 (33.7%)   idle 69.0 (66.3%)" in out
    assert "last_profiler_step_dropped -10.000" in out
    assert "COMPUTATION" in out and "Launches (cudaLaunchKernel/ExC): 4" in out


def test_cli_refuses_non_kineto_and_keeps_going(tmp_path, needs_hta, capsys):
    db = tmp_path / "x.sqlite"
    db.write_bytes(b"SQLite format 3\x00" + bytes(100))
    assert main(["hta", str(db), str(_tiny(tmp_path)), "--format", "json"]) == 2
    cap = capsys.readouterr()
    doc = json.loads(cap.out)
    assert len(doc["traces"]) == 1
    assert doc["errors"] == [{"path": str(db), "error": "HTA reads Kineto JSON traces only (.json, .json.gz)"}]
    assert cap.err.strip() == f"launchgap: error: {db}: HTA reads Kineto JSON traces only (.json, .json.gz)"


def test_cpu_only_trace_is_a_one_line_error(tmp_path, needs_hta, capsys):
    p = write(tmp_path, [ann("ProfilerStep#1", 0, 10), launch(1, 1, 1)], name="cpu.json")
    assert main(["hta", str(p)]) == 2
    err = capsys.readouterr().err.strip()
    assert err == (f"launchgap: error: {p}: HTA sees no GPU events in it (it takes a GPU op's stream from "
                   "args.stream only; CPU-only traces have none)")


def test_garbage_is_an_analyzer_error(tmp_path, needs_hta):
    p = tmp_path / "junk.json"
    p.write_bytes(b"\x00\x01 not json")
    with pytest.raises(AnalyzerError, match=r"junk\.json: HTA could not parse it \("):
        run_hta(p)


def test_subprocess_smoke(tmp_path, needs_hta):
    out = subprocess.run([sys.executable, "-m", "launchgap", "hta", str(_tiny(tmp_path)), "--format", "json"],
                         capture_output=True, text=True, cwd=REPO, timeout=120)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["traces"][0]["temporal"]["window_us"] == 104.0
