"""A file holding several ranks of one job is split per rank (:mod:`launchgap.rank_split`): ``analyze`` gives the
job, ``plan`` reads one rank. Built from a hand-made trace, from a real single-rank SGLang trace merged with a
shifted copy of itself (Kineto), and from the real 2-GPU nsys export cut into its two per-rank files."""
from __future__ import annotations

import gzip
import json
import shutil
import sqlite3
from pathlib import Path

import numpy as np
import pytest

from launchgap.commands.analyze import analyze_paths
from launchgap.loaders import load_trace
from launchgap.rank_split import find_ranks, plan_rank, split_ranks
from launchgap.report import AnalysisOptions
from launchgap.steps import find_steps
from tests.unit.kineto_tiny import HOST_PID, HOST_TID, ann, doc, kernel, launch

REPO = Path(__file__).resolve().parents[2]
SGLANG = REPO / "traces/engines/tracelens-sglang-qwen3-8b-decode-mi300x/sglang_Qwen3-8B_decode.json.gz"
NSYS_2GPU = REPO / "traces/nsys/h100_2gpu_1s.sqlite"


def _rank_events(pid: int, device: int, corr0: int, shift: float) -> list[dict]:
    """Two steps (bs=4, bs=8) of one rank: each step's annotation, two launches, their kernels on ``device``."""
    ev = []
    for i, bs in enumerate((4, 8)):
        t = 100.0 * i + shift
        ev.append(ann(f"decode_step[bs={bs}]", t, 50.0) | {"pid": pid, "tid": pid})
        for j in range(2):
            corr = corr0 + 2 * i + j
            ev.append(launch(t + 5.0 + 10.0 * j, 4.0, corr) | {"pid": pid, "tid": pid})
            ev.append(kernel(t + 12.0 + 10.0 * j, 6.0, corr, device=device))
    return ev


def _tiny(tmp_path: Path, extra: list[dict] = ()) -> Path:
    events = _rank_events(HOST_PID, 0, 1, 0.0) + _rank_events(HOST_PID + 1, 1, 101, 3.0) + list(extra)
    path = tmp_path / "tiny_tp2.json"
    path.write_text(json.dumps(doc(events)))
    return path


def test_tiny_two_ranks_split_with_exact_rows(tmp_path: Path) -> None:
    # a third process (the API server) with host events only is no rank: its rows are left out and counted
    other = [ann("handle_request", 10.0, 5.0) | {"pid": 300, "tid": 300}]
    trace = load_trace(_tiny(tmp_path, other))
    ranks = find_ranks(trace)
    assert [(r.rank, r.pid, r.devices, r.launched) for r in ranks] == [(0, 100, (0,), 4), (1, 101, (1,), 4)]
    split = split_ranks(trace)
    assert split is not None and split.note.endswith(
        "rank 0 = pid 100 on GPU 0; rank 1 = pid 101 on GPU 1; left out 1 host events of 1 other process(es) and "
        "0 GPU events on devices no rank drives")
    for r, part in enumerate(split.traces):
        assert part.path == f"{trace.path}#rank{r}" and (part.rank, part.world_size) == (r, 2)
        assert len(part) == 10  # 2 annotations, 4 launches, 4 kernels
        assert set(part.pid[part.device < 0].tolist()) == {100 + r} and part.devices == [r]
        gpu = np.flatnonzero(part.gpu_mask)
        assert (part.launch_idx[gpu] >= 0).all() and (part.pid[part.launch_idx[gpu]] == 100 + r).all()
        steps = find_steps(part)
        assert steps.batch_size.tolist() == [4, 8]
        assert steps.cpu_start_ns.tolist() == [3000 * r, 100_000 + 3000 * r]
    # unsplit, the two ranks' annotations are four steps of one trace
    assert find_steps(trace).batch_size.tolist() == [4, 4, 8, 8]


def test_one_rank_stays_as_it_is(tmp_path: Path) -> None:
    one = tmp_path / "one.json"
    one.write_text(json.dumps(doc(_rank_events(HOST_PID, 0, 1, 0.0))))
    assert split_ranks(load_trace(one)) is None
    # a second process that launched one kernel on a GPU of its own is below MIN_RANK_SHARE: no rank
    probe = [launch(5.0, 1.0, 900) | {"pid": 400, "tid": 400}, kernel(7.0, 1.0, 900, device=1)]
    few = tmp_path / "probe.json"
    few.write_text(json.dumps(doc(_rank_events(HOST_PID, 0, 1, 0.0) * 10 + probe)))
    assert find_ranks(load_trace(few)) == []


def test_two_processes_on_one_gpu_are_not_split(tmp_path: Path) -> None:
    """Two processes launching as much on one GPU (same device): which drives it is unknown, no split."""
    same = tmp_path / "same_gpu.json"
    same.write_text(json.dumps(doc(_rank_events(HOST_PID, 0, 1, 0.0) + _rank_events(HOST_PID + 1, 0, 101, 3.0))))
    assert split_ranks(load_trace(same)) is None


def test_correlation_ids_shared_by_the_ranks(tmp_path: Path) -> None:
    """Kineto GPU events name no process: a kernel is the rank's whose calls used its correlation id. Ids shared in
    part (3 and 4 used by both ranks) still leave each GPU to the process that launched most of its work, and each
    rank's launches are joined again within it; ids all shared tell nothing, and the file is not split."""
    part = tmp_path / "part.json"
    part.write_text(json.dumps(doc(_rank_events(HOST_PID, 0, 1, 0.0) + _rank_events(HOST_PID + 1, 1, 3, 3.0))))
    trace = load_trace(part)
    assert [(r.pid, r.devices, r.launched) for r in find_ranks(trace)] == [(100, (0,), 4), (101, (1,), 4)]
    for r, rank in enumerate(split_ranks(trace).traces):
        gpu = np.flatnonzero(rank.gpu_mask)
        assert (rank.pid[rank.launch_idx[gpu]] == 100 + r).all()
        assert find_steps(rank).batch_size.tolist() == [4, 8]
    same = tmp_path / "same.json"
    same.write_text(json.dumps(doc(_rank_events(HOST_PID, 0, 1, 0.0) + _rank_events(HOST_PID + 1, 1, 1, 3.0))))
    assert split_ranks(load_trace(same)) is None


def _merged_sglang(tmp_path: Path) -> Path:
    """The real single-rank SGLang trace and a copy of it as a second rank: host pid and tid +1, device 9 -> 10,
    correlation and external ids + 10,000,000, 3 us later."""
    body = json.loads(gzip.decompress(SGLANG.read_bytes()))
    copy = []
    for e in body["traceEvents"]:
        e = json.loads(json.dumps(e))
        e["ts"] = e["ts"] + 3.0 if "ts" in e else e.get("ts")
        if e.get("pid") == 251:
            e["pid"], e["tid"] = 252, 252
        elif e.get("pid") == 9:
            e["pid"] = 10
        args = e.get("args", {})
        if args.get("device") == 9:
            args["device"] = 10
        for k in ("correlation", "External id"):
            if k in args:
                args[k] += 10_000_000
        if "id" in e:
            e["id"] += 10_000_000
        copy.append(e)
    body["traceEvents"] += copy
    body["deviceProperties"] = body["deviceProperties"] + [dict(body["deviceProperties"][0], id=10)]
    path = tmp_path / "sglang_tp2_merged.json.gz"
    path.write_bytes(gzip.compress(json.dumps(body).encode()))
    return path


def test_merged_real_kineto_ranks_match_the_single_rank(tmp_path: Path) -> None:
    merged = _merged_sglang(tmp_path)
    single, = analyze_paths([str(SGLANG)], AnalysisOptions(), 1 << 30)[0]
    reports, jobs, errors = analyze_paths([str(merged)], AnalysisOptions(), 1 << 30)
    assert not errors and len(jobs) == 1 and [r.path for r in reports] == [f"{merged}#rank0", f"{merged}#rank1"]
    assert jobs[0].split.startswith(f"{merged} held 2 ranks") and jobs[0].summary.ranks == [0, 1]
    assert "rank 0 = pid 251 on GPU 9; rank 1 = pid 252 on GPU 10" in jobs[0].split
    want = single.to_dict()["steps"]
    assert [(s["name"], s["batch_size"], s["dur_us"], s["gpu_busy_us"], s["kernels"]) for s in want] == [
        ("step[DECODE bs=32]", 32, 10366.887, 9694.013, 550)]
    for rank, rep in enumerate(reports):  # each rank: the single-rank trace's steps; rank 1 on GPU 10, 3 us later
        got = rep.to_dict()["steps"]
        assert [s["start_us"] for s in got] == pytest.approx([s["start_us"] + 3.0 * rank for s in want], abs=1e-3)
        assert [s["device"] for s in got] == [9 + rank]
        drop = ("start_us", "device")
        assert [{k: v for k, v in s.items() if k not in drop} for s in got] == [
            {k: v for k, v in s.items() if k not in drop} for s in want]
        assert rep.summary.gpu_busy_us_median == single.summary.gpu_busy_us_median == 9694.013


def test_plan_of_a_merged_file_reads_one_rank(tmp_path: Path, capsys) -> None:
    from launchgap.cli import main

    merged = _merged_sglang(tmp_path)
    assert main(["plan", str(merged), "--format", "json"]) == 0
    doc_ = json.loads(capsys.readouterr().out)
    assert [(b["batch_size"], b["weight"]) for b in doc_["per_batch"]] == [(32, 1.0)]
    assert "distribution from 1 decode steps in 1 serving trace(s)" in doc_["inputs"]
    # the rank's analysis warning is the plan's trace note, named by the rank it read
    assert [n for n in doc_["trace_notes"] if "ranks of one job" in n["text"]] == [
        {"kind": "warning", "traces": [f"{merged}#rank0"],
         "text": "the file holds 2 ranks of one job; the plan reads rank 0 = pid 251 on GPU 9 only, the rank with the "
                 "most steps of a known batch size (1 of 1 steps; ranks 1: 1): every rank runs the same batches, so "
                 "pooling them would count each step 2 times"}]
    split = split_ranks(load_trace(merged))
    assert plan_rank(split)[0] is split.traces[0]


def _keep_process(src: Path, dst: Path, pid: int) -> None:
    """A copy of an nsys export holding one process's rows only (as nsys would have written it for that process)."""
    shutil.copy(src, dst)
    con = sqlite3.connect(dst)
    for table, col in (("CUPTI_ACTIVITY_KIND_KERNEL", "globalPid"), ("CUPTI_ACTIVITY_KIND_MEMCPY", "globalPid"),
                       ("CUPTI_ACTIVITY_KIND_MEMSET", "globalPid"), ("CUPTI_ACTIVITY_KIND_RUNTIME", "globalTid"),
                       ("NVTX_EVENTS", "globalTid")):
        con.execute(f"DELETE FROM {table} WHERE (({col} >> 24) & 16777215) != ?", (pid,))
    con.commit()
    con.close()


def test_nsys_export_of_two_processes_is_the_job_of_its_per_rank_files(tmp_path: Path) -> None:
    """The real 2-GPU export (pid 111 on GPU 0, pid 112 on GPU 1) analyses as the job its two per-rank files give."""
    for rank, pid in ((0, 111), (1, 112)):
        _keep_process(NSYS_2GPU, tmp_path / f"h100_rank{rank}.sqlite", pid)
    opts = AnalysisOptions()
    per_file, jobs_f, err_f = analyze_paths([str(tmp_path / "h100_rank0.sqlite"), str(tmp_path / "h100_rank1.sqlite")],
                                            opts, 1 << 30)
    merged, jobs_m, err_m = analyze_paths([str(NSYS_2GPU)], opts, 1 << 30)
    assert not err_f and not err_m and len(jobs_f) == len(jobs_m) == 1
    assert jobs_m[0].split.endswith("rank 0 = pid 111 on GPU 0; rank 1 = pid 112 on GPU 1")
    for a, b in zip(per_file, merged):
        sa, sb = a.to_dict()["summary"], b.to_dict()["summary"]
        assert a.to_dict()["steps"] == b.to_dict()["steps"]
        assert {k: v for k, v in sa.items() if k != "workload"} == {k: v for k, v in sb.items() if k != "workload"}
    assert [len(r.steps) for r in merged] == [1, 1] and merged[0].steps[0].kernels == 816
    ja, jb = jobs_f[0].to_dict()["summary"], jobs_m[0].to_dict()["summary"]
    assert {k: v for k, v in ja.items() if k != "world_size"} == {k: v for k, v in jb.items() if k != "world_size"}


def test_overlapping_markers_of_one_process_are_still_refused(tmp_path: Path) -> None:
    """vLLM's step markers (Python function ranges of a with_stack trace) from two threads of ONE process running
    at once cannot be split per rank: refused with one line naming the file."""
    from launchgap.errors import InputError

    runner = "vllm/v1/worker/gpu_model_runner.py(3410): execute_model"
    events = []
    for i in range(4):
        for k, tid in enumerate((HOST_TID, HOST_TID + 1)):
            corr = 10 * i + k + 1
            events += [{"ph": "X", "cat": "python_function", "name": runner, "pid": HOST_PID, "tid": tid,
                        "ts": 100.0 * i + k, "dur": 60.0, "args": {"Python id": 1}},
                       launch(100.0 * i + 5.0 + k, 1.0, corr, tid=tid), kernel(100.0 * i + 8.0 + 2 * k, 1.0, corr)]
    path = tmp_path / "threads.json"
    path.write_text(json.dumps(doc(events)))
    trace = load_trace(path)
    assert split_ranks(trace) is None  # one process
    with pytest.raises(InputError, match=r"step markers come from 2 threads \(tids 100, 101\) running at once"):
        find_steps(trace)


def _serving_rank(pid: int, device: int, corr0: int, shift: float) -> list[dict]:
    """Three graph steps of one rank as the harness's serving runs mark them (bs 4, 4, 8), each a cudaGraphLaunch
    replaying two kernels on ``device``."""
    ev = []
    for i, bs in enumerate((4, 4, 8)):
        t, corr = 100.0 * i + shift, corr0 + i
        ev += [ann(f"decode_step[bs={bs} bucket={bs} graph]", t, 60.0) | {"pid": pid, "tid": pid},
               launch(t + 5.0, 5.0, corr, name="cudaGraphLaunch") | {"pid": pid, "tid": pid},
               kernel(t + 12.0, 10.0, corr, name="k1", device=device),
               kernel(t + 23.0, 10.0, corr, name="k2", device=device)]
    return ev


def test_dashboard_plan_page_reads_one_rank_of_an_uploaded_merged_file(tmp_path: Path, monkeypatch) -> None:
    pytest.importorskip("streamlit")
    import streamlit as st

    from tests.unit.apptest_helpers import goto, new_app, upload

    monkeypatch.setenv("LAUNCHGAP_SAMPLES_DIR", str(tmp_path))  # no bundled samples: the upload alone
    st.cache_resource.clear()  # settings and the trace cache rebuilt with it

    body = json.dumps(doc(_serving_rank(HOST_PID, 0, 1, 0.0) + _serving_rank(HOST_PID + 1, 1, 101, 2.0))).encode()
    at = goto(upload(new_app(), [("tp2.json", body)]), "plan")
    notes = "\n".join(m.value for m in at.markdown).replace("\\", "")  # md_escape's backslashes
    assert "distribution from 3 decode steps in 1 serving trace(s)" in notes  # one rank's, not 6
    warned = "\n".join(w.value for w in at.warning).replace("\\", "")  # the trace notes, under the plan's figures
    assert ("warning (1 trace: tp2.json): the file holds 2 ranks of one job; the plan reads rank 0 = pid 100 on GPU 0 "
            "only, the rank with the most steps of a known batch size (3 of 3 steps; ranks 1: 3)") in warned


def test_process_names_that_say_the_rank_number_the_ranks(tmp_path: Path) -> None:
    """nsys' PROCESSES names (vLLM's VLLM::Worker_TP<N>) win over the device order when each says a different rank."""
    path = tmp_path / "named.sqlite"
    shutil.copy(NSYS_2GPU, path)
    con = sqlite3.connect(path)
    con.execute("UPDATE PROCESSES SET name = 'VLLM::Worker_TP1' WHERE pid = 111")
    con.execute("UPDATE PROCESSES SET name = 'VLLM::Worker_TP0' WHERE pid = 112")
    con.commit()
    con.close()
    trace = load_trace(path)
    assert [(r.rank, r.pid, r.devices) for r in find_ranks(trace)] == [(0, 112, (1,)), (1, 111, (0,))]
    con = sqlite3.connect(path)
    con.execute("UPDATE PROCESSES SET name = 'VLLM::Worker_TP0' WHERE pid = 111")  # both say 0: device order
    con.commit()
    con.close()
    assert [(r.rank, r.pid) for r in find_ranks(load_trace(path))] == [(0, 111), (1, 112)]


def test_dashboard_ranks_page_shows_an_uploaded_multi_rank_export_as_a_job(tmp_path: Path, monkeypatch) -> None:
    pytest.importorskip("streamlit")
    import streamlit as st

    from launchgap.ranks import analyze_job
    from tests.unit.apptest_helpers import goto, new_app, upload

    monkeypatch.setenv("LAUNCHGAP_SAMPLES_DIR", str(tmp_path))
    st.cache_resource.clear()
    at = goto(upload(new_app(), [("tp2.sqlite", NSYS_2GPU.read_bytes())]), "ranks")
    split = split_ranks(load_trace(NSYS_2GPU))
    job = analyze_job(list(split.traces), AnalysisOptions())
    ranks = at.dataframe[0].value
    assert list(ranks["rank"]) == [0, 1] and list(ranks["trace"]) == ["tp2.sqlite#rank0", "tp2.sqlite#rank1"]
    assert ranks["step (us)"].tolist() == [r.step_us_median for r in job.ranks]
    assert [i.value.replace("\\", "") for i in at.info][0].startswith("tp2.sqlite held 2 ranks")
    assert not at.error
