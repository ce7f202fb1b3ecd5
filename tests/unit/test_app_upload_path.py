"""The dashboard's upload path: the parse worker (limits, errors), the temporary copy and its
hash, the upload's bytes released, the timeline's merging of dense steps, per-step bar runs.

Traces are the tiny hand-built Kineto files of test_app_pages (arithmetic there).
"""
from __future__ import annotations

import gzip
import hashlib
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

pytest.importorskip("streamlit")
pytest.importorskip("plotly")

import streamlit as st  # noqa: E402

from launchgap.errors import AnalyzerError  # noqa: E402
from launchgap.loaders import load_trace  # noqa: E402
from launchgap.ranks import analyze_with_collectives  # noqa: E402
from launchgap.report import AnalysisOptions  # noqa: E402
from launchgap.dashboard import session, uploads  # noqa: E402
from launchgap.dashboard.cache import BoundedCache  # noqa: E402
from launchgap.dashboard.charts import idle_by_cause_figure, step_runs  # noqa: E402
from launchgap.dashboard.settings import Settings  # noqa: E402
from launchgap.dashboard.timeline import downsample_events  # noqa: E402
from launchgap.dashboard.timing import parse_lines  # noqa: E402
from launchgap.dashboard.worker import Limits, ParseJob, WorkerError, parse_in_worker, tree_rss_bytes  # noqa: E402
from tests.synth import gzip_bomb  # noqa: E402
from tests.unit.apptest_helpers import new_app, upload  # noqa: E402
from tests.unit.kineto_tiny import doc  # noqa: E402
from tests.unit.test_app_pages import BAD, EAGER, eager_events  # noqa: E402

ROOMY = Limits(max_rss_bytes=4 * 1024**3, timeout_s=120)


@pytest.fixture(autouse=True)
def fresh_server(tmp_path, monkeypatch):
    empty = tmp_path / "no-samples"
    empty.mkdir()
    monkeypatch.setenv("LAUNCHGAP_SAMPLES_DIR", str(empty))
    st.cache_resource.clear()
    yield
    st.cache_resource.clear()




# --- the worker --------------------------------------------------------------------------------

def test_worker_result_equals_the_in_process_analysis(tmp_path) -> None:
    p = tmp_path / "eager.json"
    p.write_bytes(EAGER)
    trace, report = parse_in_worker(p, 10**9, AnalysisOptions(), ROOMY, label="upload")
    local = analyze_with_collectives(load_trace(p), AnalysisOptions())
    assert trace.path == "upload" and report.path == "upload"
    assert report.summary == local.summary  # steps 2, GPU idle 0.5, the same speedup to the last bit
    assert report.summary.steps == 2 and report.summary.gpu_idle_fraction == 0.5
    assert np.array_equal(trace.start_ns, load_trace(p).start_ns)
    assert not Path(f"{p}.result").exists()


def test_worker_error_is_the_analyzers_one_line(tmp_path) -> None:
    p = tmp_path / "bad.json"
    p.write_bytes(BAD)
    with pytest.raises(AnalyzerError) as direct:
        load_trace(p)
    with pytest.raises(WorkerError) as exc:
        parse_in_worker(p, 10**9, AnalysisOptions(), ROOMY)
    assert exc.value.message == direct.value.message
    assert "\n" not in exc.value.message and str(p) not in exc.value.message


def test_worker_memory_limit_kills_and_refuses(tmp_path) -> None:
    p = tmp_path / "eager.json"
    p.write_bytes(EAGER)
    # An interpreter with numpy loaded is past 16 MiB before it reads a byte.
    with pytest.raises(WorkerError) as exc:
        parse_in_worker(p, 10**9, AnalysisOptions(), Limits(max_rss_bytes=16 * 1024**2, timeout_s=120))
    assert exc.value.message == ("refused: parsing it took more than 16 MiB of memory (the dashboard's per-upload "
                                 "limit); analyse it with `launchgap analyze`")


def test_worker_time_limit_kills_and_refuses(tmp_path) -> None:
    bomb = gzip_bomb(tmp_path / "bomb.json.gz", 1024 * 1024**2)  # 1 GiB of spaces: seconds to inflate
    job = ParseJob(bomb, 2 * 1024**3, AnalysisOptions())
    with pytest.raises(WorkerError) as exc:
        job.result(Limits(max_rss_bytes=4 * 1024**3, timeout_s=0.3))
    assert exc.value.message == ("refused: parsing it took longer than 0.3 s (the dashboard's per-upload limit); "
                                 "analyse it with `launchgap analyze`")
    with pytest.raises(ProcessLookupError):  # the child's process group is gone
        for _ in range(100):
            import os
            import time

            os.killpg(job.pid, 0)
            time.sleep(0.05)


def test_bomb_past_the_trace_cap_is_one_line(tmp_path) -> None:
    bomb = gzip_bomb(tmp_path / "bomb.json.gz", 96 * 1024**2)
    with pytest.raises(AnalyzerError) as direct:
        load_trace(bomb, 32 * 1024**2)
    with pytest.raises(WorkerError) as exc:
        parse_in_worker(bomb, 32 * 1024**2, AnalysisOptions(), ROOMY)
    assert exc.value.message == direct.value.message and "\n" not in exc.value.message


def test_tree_rss_counts_this_process() -> None:
    import os

    rss = tree_rss_bytes(os.getpid())
    assert 10 * 1024**2 < rss < 64 * 1024**3
    assert tree_rss_bytes(2**22 + 12345) == 0  # no such process


# --- the session's upload path -----------------------------------------------------------------

def test_stage_upload_writes_the_bytes_and_hashes_them() -> None:
    data = EAGER * 3
    tmp, pending = session.stage_upload(data, "x.json")
    try:
        assert tmp.read_bytes() == data and tmp.name.endswith(".json")
        assert pending.result() == hashlib.sha256(data).hexdigest()
    finally:
        tmp.unlink()


def test_add_upload_in_worker_and_in_process_agree(tmp_path) -> None:
    cache = BoundedCache(8, 1024**3, 3600)
    worker, local = {}, {}
    a = session.add_upload(worker, "e.json", EAGER, Settings(samples_dir=tmp_path), cache)
    b = session.add_upload(local, "e.json", EAGER, Settings(samples_dir=tmp_path, parse_in_worker=False),
                           BoundedCache(8, 1024**3, 3600))
    assert a.ok and b.ok and a.key == b.key and a.digest == hashlib.sha256(EAGER).hexdigest()
    assert a.report.summary == b.report.summary
    assert a.trace.path == b.trace.path == f"sha256:{a.digest[:16]}" == a.report.path
    # A second session presenting the same bytes gets the cached parse (no second child).
    c = session.add_upload({}, "other-name.json", EAGER, Settings(samples_dir=tmp_path), cache)
    assert c.trace is a.trace and c.report is a.report
    assert not [p for p in Path(uploads.staging_dir(len(EAGER)) or "/tmp").glob("launchgap-upload-*")]


def test_staged_upload_is_parsed_in_place_and_deleted(tmp_path) -> None:
    """A file the server already holds whole (app.uploads) is parsed where it lies, under the hash
    it arrived with, and deleted after; the result equals the in-memory upload's."""
    staged = tmp_path / "launchgap-upload-x"
    staged.write_bytes(EAGER)
    digest = hashlib.sha256(EAGER).hexdigest()
    cache = BoundedCache(8, 1024**3, 3600)
    a = session.add_staged_upload({}, "e.json", staged, len(EAGER), digest, Settings(samples_dir=tmp_path), cache)
    b = session.add_upload({}, "e.json", EAGER, Settings(samples_dir=tmp_path), BoundedCache(8, 1024**3, 3600))
    assert a.ok and a.key == b.key and a.digest == digest and a.size_bytes == len(EAGER)
    assert a.report.summary == b.report.summary and a.trace.path == f"sha256:{digest[:16]}"
    assert not staged.exists() and not list(tmp_path.glob("launchgap-upload-x*"))


def test_staged_upload_already_parsed_starts_no_child(tmp_path, monkeypatch) -> None:
    """A staged upload's hash is known before the parse: bytes the server's cache already holds
    (another session's upload) or the session already has are not parsed again."""
    cache = BoundedCache(8, 1024**3, 3600)
    digest = hashlib.sha256(EAGER).hexdigest()
    first = tmp_path / "first"
    first.write_bytes(EAGER)
    a = session.add_staged_upload({}, "e.json", first, len(EAGER), digest, Settings(samples_dir=tmp_path), cache)

    def no_child(*args, **kwargs):
        raise AssertionError("a parse child was started for bytes already parsed")

    monkeypatch.setattr(session, "ParseJob", no_child)
    state: dict = {}
    for _ in range(2):  # the server's cache, then the session's own entry
        again = tmp_path / "again"
        again.write_bytes(EAGER)
        b = session.add_staged_upload(state, "e.json", again, len(EAGER), digest, Settings(samples_dir=tmp_path),
                                      cache)
        assert b.ok and b.trace is a.trace and b.report is a.report and not again.exists()


def test_add_upload_error_names_the_reason_in_one_line(tmp_path) -> None:
    state: dict = {}
    e = session.add_upload(state, "bad.json", BAD, Settings(samples_dir=tmp_path), BoundedCache(8, 1024**3, 3600))
    p = tmp_path / "bad.json"
    p.write_bytes(BAD)
    with pytest.raises(AnalyzerError) as direct:
        load_trace(p)
    assert not e.ok and e.error == direct.value.message and e.name == "bad.json"


def test_upload_bytes_are_released_after_parsing() -> None:
    """Streamlit's own copy of an upload is dropped once the trace is parsed (it would otherwise stay
    in the server's memory for the session's life)."""
    import gc

    from streamlit.runtime.memory_uploaded_file_manager import MemoryUploadedFileManager

    at = upload(new_app(), [("released.json", EAGER)])
    assert list(at.dataframe[0].value["trace"]) == ["released.json"]
    managers = [o for o in gc.get_objects() if isinstance(o, MemoryUploadedFileManager)]
    assert managers, "the upload manager was not found"
    held = [rec.name for m in managers for files in m.file_storage.values() for rec in files.values()]
    assert "released.json" not in held
    at.run()  # a rerun: the table keeps the trace, nothing is parsed again
    assert list(at.dataframe[0].value["trace"]) == ["released.json"]


def test_settings_from_env(monkeypatch) -> None:
    monkeypatch.setenv("LAUNCHGAP_PARSE_IN_WORKER", "0")
    monkeypatch.setenv("LAUNCHGAP_WORKER_MAX_RSS_BYTES", "123456789")
    monkeypatch.setenv("LAUNCHGAP_WORKER_TIMEOUT_S", "7")
    s = Settings.from_env()
    assert (s.parse_in_worker, s.worker_max_rss_bytes, s.worker_timeout_s) == (False, 123456789, 7)
    monkeypatch.delenv("LAUNCHGAP_PARSE_IN_WORKER")
    assert Settings.from_env().parse_in_worker is True


def test_timing_lines_parse() -> None:
    text = 'x\nlaunchgap-timing {"stage": "a", "s": 1.5}\nnoise launchgap-timing {"stage": "b", "s": 2}\nbad {'
    assert parse_lines(text) == [{"stage": "a", "s": 1.5}, {"stage": "b", "s": 2}]


# --- drawing dense steps -------------------------------------------------------------------------

def _events(rows: list[tuple[str, str, float, float, str]]) -> pd.DataFrame:
    lane, cat, s, e, name = zip(*rows)
    s, e = np.array(s), np.array(e)
    return pd.DataFrame({"lane": lane, "category": cat, "start_us": s, "end_us": e, "dur_us": e - s, "name": name})


def test_downsample_keeps_small_steps_as_they_are() -> None:
    ev = _events([("A", "kernel", 0.0, 1.0, "k1"), ("A", "kernel", 1.5, 2.0, "k2")])
    out, res = downsample_events(ev, max_events=2)
    assert res == 0.0 and out is ev


def test_downsample_merges_close_bars_per_lane_exactly() -> None:
    # Span 0..11 us, limit 3 rows: resolution 11/3 = 3.667 us. Lane A: k1 [0, 1] and k2 [1.5, 2] are
    # 0.5 us apart -> one bar [0, 2], busy 1.0 + 0.5 = 1.5 us; k3 [10, 11] starts 8 us after -> its own.
    # Lane B: one kernel. 3 rows.
    ev = _events([("A", "kernel", 10.0, 11.0, "k3"), ("A", "kernel", 0.0, 1.0, "k1"),
                  ("B", "kernel", 0.0, 5.0, "kb"), ("A", "kernel", 1.5, 2.0, "k2")])
    out, res = downsample_events(ev, max_events=3)
    assert res == pytest.approx(11 / 3)
    rows = sorted(zip(out["lane"], out["start_us"], out["end_us"], out["dur_us"], out["name"]))
    assert rows == [("A", 0.0, 2.0, 1.5, "2 ops merged, first: k1"), ("A", 10.0, 11.0, 1.0, "k3"),
                    ("B", 0.0, 5.0, 5.0, "kb")]


def test_downsample_doubles_the_resolution_until_it_fits() -> None:
    # 1000 kernels of 1 us every 10 us (gaps 9 us) on one lane, limit 10 rows. Span 9991 us:
    # resolution 999.1, which merges all 1000 into one bar (gaps 9 < 999.1): 1 row, busy 1000 us.
    starts = np.arange(1000) * 10.0
    ev = pd.DataFrame({"lane": "A", "category": "kernel", "start_us": starts, "end_us": starts + 1,
                       "dur_us": 1.0, "name": "k"})
    out, res = downsample_events(ev, max_events=10)
    assert len(out) == 1 and out["dur_us"].iloc[0] == 1000.0 and out["end_us"].iloc[0] == 9991.0
    # Two categories that interleave stay apart (one bar each).
    ev2 = pd.concat([ev, ev.assign(category="launch call", start_us=starts + 2, end_us=starts + 3)])
    out2, _ = downsample_events(ev2, max_events=10)
    assert sorted(out2["category"]) == ["kernel", "launch call"] and list(out2["dur_us"]) == [1000.0, 1000.0]


def test_step_runs_and_binned_bars(tmp_path) -> None:
    assert step_runs(5, max_bars=400).tolist() == [0, 1, 2, 3, 4]
    assert step_runs(1000, max_bars=400).tolist() == list(range(0, 1000, 3))  # ceil(1000/400) = 3 per bar
    # Three identical eager steps (busy 20 us, idle 20 us: host 10, launch 10), two bars at most:
    # runs of 2 -> bars "0–1" (mean of steps 0, 1) and "2–2".
    p = tmp_path / "three.json"
    p.write_text(json.dumps(doc(eager_events(0) + eager_events(1000) + eager_events(2000))))
    rep = analyze_with_collectives(load_trace(p), AnalysisOptions())
    fig = idle_by_cause_figure(rep, max_bars=2)
    busy = fig.data[0]
    assert list(busy.x) == ["0–1", "2–2"] and list(busy.y) == [20.0, 20.0]
    assert {t.name: list(t.y) for t in fig.data[1:]} == {"idle: host (CPU late)": [10.0, 10.0],
                                                         "idle: launch call": [10.0, 10.0]}


def test_gzip_helper_is_a_valid_empty_trace_document(tmp_path) -> None:
    p = gzip_bomb(tmp_path / "small.json.gz", 8 * 1024**2)
    text = gzip.decompress(p.read_bytes())
    assert json.loads(text) == {"traceEvents": []} and len(text) == 17 + 8 * 1024**2 + 2


def test_pareto_figure_capture_scale_starts_at_zero_and_labels_take_turns() -> None:
    """A plan of no graph (costs tie: every Pareto point captures in 0 s) keeps the capture colour scale at 0 s and
    up, not centred on 0 with negative seconds; the server lists' labels go above and below in turn along the memory
    axis, so two lists of about the same memory do not print one label over the other."""
    from launchgap.dashboard.charts import pareto_figure
    from launchgap.planning.costs import CostPoint, CostTable
    from launchgap.planning.planner import PlanOptions, plan_capture

    tie = CostTable(tuple(CostPoint(b, 100.0 + b, 100.0 + b, "measured", None) for b in (1, 2, 4, 8)), "tie")
    plan = plan_capture(tie, {1: 1, 4: 1}, PlanOptions(), nodes_per_size=500.0)
    assert plan.buckets == ()
    fig = pareto_figure(plan, {})
    marker = fig.data[0].marker
    assert marker.cmin == 0.0 and marker.cmax == 0.1
    servers = fig.data[2]
    assert list(servers.x) == sorted(servers.x)
    assert list(servers.textposition) == ["top center", "bottom center", "top center", "bottom center"][:len(servers.x)]
    lo, hi = fig.layout.xaxis.range  # the no-graph plan at 0 MiB is not cut in half at the axis
    assert lo < 0 < max(servers.x) < hi
