"""Plans from server logs: costs from a log's own times, the capture-cost calibration, the CLI on each engine."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from launchgap.cli import main
from launchgap.planning.memory import CaptureCalibration, ListCost, calibrate
from launchgap.planning.serverlog import LAUNCH_US_PER_KERNEL, capture_settings_from_log, costs_from_log
from launchgap.serverlogs import read_server_file
from launchgap.serverlogs.diagnosis import diagnose

REPO = Path(__file__).resolve().parents[2]
LOGS = REPO / "traces" / "serverlogs"


def test_calibration_without_a_prior_is_the_servers_average():
    lc = calibrate(None, CaptureCalibration((1, 2, 4, 8), 400.0, 8.0, "log"))
    assert (lc.fixed_mib, lc.pool_mib_per_row, lc.per_size_mib, lc.fixed_s, lc.per_size_s) == (0.0, 0.0, 100.0, 0.0, 2.0)
    assert lc.of([16, 32]) == (200.0, 4.0)


def test_calibration_scales_the_prior_to_the_servers_own_list():
    prior = ListCost(fixed_mib=10.0, pool_mib_per_row=0.5, per_size_mib=20.0, fixed_s=1.0, per_size_s=0.5)
    sizes = (1, 2, 4, 8)
    assert prior.of(sizes) == (10.0 + 0.5 * 8 + 20.0 * 4, 1.0 + 0.5 * 4)  # 94 MiB, 3 s
    lc = calibrate(prior, CaptureCalibration(sizes, 282.0, 12.0, "log"))  # 3x the memory, 4x the time
    assert lc.of(sizes) == pytest.approx((282.0, 12.0))
    assert (lc.fixed_mib, lc.pool_mib_per_row, lc.per_size_mib) == pytest.approx((30.0, 1.5, 60.0))
    assert (lc.fixed_s, lc.per_size_s) == pytest.approx((4.0, 2.0))
    assert "memory x3.00, capture time x4.00" in lc.source


def _log(tmp_path: Path, lines: list[tuple[int, bool, float]], top: int = 32) -> Path:
    text = [f"[2026-01-01 00:00:00] Capture cuda graph bs {[1, 2, 4, 8, 16, top]}"]
    for i, (b, g, tok) in enumerate(lines):
        text.append(f"[2026-01-01 00:00:{i % 60:02d}] Decode batch, #running-req: {b}, #token: 1, token usage: 0.01, "
                    f"cuda graph: {g}, gen throughput (token/s): {tok:.2f}, #queue-req: 0")
    p = tmp_path / "s.log"
    p.write_text("\n".join(text) + "\n")
    return p


def test_costs_from_throughput_lines_exact(tmp_path):
    # graph at 8: 8 / 1000 tok/s = 8 ms; graph at 16: 16 / 1600 = 10 ms; eager at 40: 40 / 2000 = 20 ms
    d = diagnose(read_server_file(_log(tmp_path, [(8, True, 1000.0), (8, True, 1000.0), (16, True, 1600.0),
                                                  (40, False, 2000.0)])))
    t = costs_from_log(d)
    pts = {p.batch_size: p for p in t.points}
    assert set(pts) == {8, 16, 40}
    assert (pts[8].graph_us, pts[16].graph_us, pts[40].eager_us) == pytest.approx((8000.0, 10000.0, 20000.0))
    # graph line through (8, 8000) and (16, 10000): 6000 + 250 b; at 40: 16000; overhead 20000 - 16000
    assert pts[40].graph_us == pytest.approx(16000.0)
    assert (pts[8].eager_us, pts[16].eager_us) == pytest.approx((12000.0, 14000.0))
    assert pts[8].source == "predicted" and "constant launch overhead" in " ".join(t.warnings)


def test_costs_without_an_eager_line_use_the_stated_prior(tmp_path):
    d = diagnose(read_server_file(_log(tmp_path, [(8, True, 1000.0), (16, True, 1600.0)])))
    t = costs_from_log(d, kernels_per_step=100.0)
    assert t.points[0].eager_us - t.points[0].graph_us == pytest.approx(100 * LAUNCH_US_PER_KERNEL)
    assert any("no eager step" in w for w in t.warnings)


def test_forward_time_stats_are_the_costs(tmp_path):
    text = ("(EngineCore_DP0 pid=1) INFO 11-05 10:00:05 [core.py:93] Initializing a V1 LLM engine (v0.22.0) with "
            "config: compilation_config={'cudagraph_capture_sizes': [1, 2, 4, 8, 16], 'max_cudagraph_capture_size': 16}\n"
            "(APIServer pid=2) INFO 11-05 10:02:00 [loggers.py:259] Engine 000: Avg prompt throughput: 0.0 tokens/s, "
            "Avg generation throughput: 800.0 tokens/s, Running: 20 reqs, Waiting: 0 reqs\n"
            "(EngineCore_DP0 pid=1) INFO 11-05 10:02:10 [forward_context.py:384] Batchsize forward time stats "
            "(batchsize, count, median_time(ms)): [(16, 120, 10.0), (8, 30, 8.0), (24, 9, 30.0)]\n")
    p = tmp_path / "v.log"
    p.write_text(text)
    t = costs_from_log(diagnose(read_server_file(p)))
    pts = {q.batch_size: q for q in t.points}
    assert (pts[8].graph_us, pts[16].graph_us, pts[24].eager_us) == pytest.approx((8000.0, 10000.0, 30000.0))
    assert "Batchsize forward time stats" in t.origin


@pytest.mark.parametrize("name, syntax", [("sglang-0.5.9-tp2-ceiling.log.gz", "--cuda-graph-bs"),
                                          ("vllm-0.22-ceiling.log.gz", "cudagraph_capture_sizes"),
                                          ("tensorrt_llm-1.0-healthy.log.gz", "batch_sizes"),
                                          ("vllm-0.6.4-healthy.log.gz", "cudagraph_capture_sizes")])
def test_plan_on_a_log_alone(name, syntax, capsys):
    assert main(["plan", "--server-log", str(LOGS / name), "--max-graphs", "6"]) == 0
    out = capsys.readouterr().out
    at = out.find(f"({LOGS / name}): ")  # the plan in the log's engine's own syntax, among the notes
    assert at > 0 and syntax in out[at:at + 400], out[-3000:]


def test_plan_json_names_the_log_for_each_role(capsys):
    log = str(LOGS / "sglang-0.5.9-tp2-ceiling.log.gz")
    assert main(["plan", log, "--max-graphs", "4", "--format", "json"]) == 0  # recognised among the paths
    doc = json.loads(capsys.readouterr().out)
    src = doc["sources"]
    assert src["costs"] == src["distribution"] == src["capture_sizes"] == src["capture_cost"] == \
        "SGLang log sglang-0.5.9-tp2-ceiling.log.gz"
    # the server's own 8.36 s and 2,232.32 MiB for its 8 sizes: the same per size
    assert doc["memory"]["list_cost"]["per_size_mib"] == pytest.approx(2232.32 / 8, abs=1e-3)
    assert any("ceiling: the server captures up to 32" in n for n in doc["inputs"])


def test_plan_with_traces_takes_the_logs_distribution(capsys):
    traces = sorted(map(str, (REPO / "traces" / "h200-1b").glob("*.json.gz")))
    log = str(LOGS / "sglang-0.4.6-healthy.log.gz")
    assert main(["plan", *traces, "--server-log", log, "--max-graphs", "4", "--format", "json"]) == 0
    src = json.loads(capsys.readouterr().out)["sources"]
    assert src["distribution"] == "SGLang log sglang-0.4.6-healthy.log.gz"
    assert src["costs"].endswith(")") or "trace" in src["costs"]  # the traces' costs: the log has no forward times


def test_plan_with_a_log_and_a_scrape(capsys):
    log, scrape = str(LOGS / "sglang-0.5.9-tp2-ceiling.log.gz"), str(LOGS / "sglang-metrics.prom.gz")
    assert main(["plan", "--server-log", log, "--metrics", scrape, "--max-graphs", "4", "--format", "json"]) == 0
    src = json.loads(capsys.readouterr().out)["sources"]
    assert src["distribution"] == src["costs"] == "SGLang log sglang-0.5.9-tp2-ceiling.log.gz"


def test_a_scrape_that_fills_nothing_and_a_log_of_another_engine_are_named(capsys):
    log, scrape = str(LOGS / "sglang-0.5.9-tp2-ceiling.log.gz"), str(LOGS / "sglang-metrics.prom.gz")
    assert main(["plan", "--server-log", log, "--metrics", scrape, "--max-graphs", "4", "--format", "json"]) == 0
    notes = json.loads(capsys.readouterr().out)["inputs"]
    assert ("SGLang metrics sglang-metrics.prom.gz gave nothing to this plan (costs from SGLang log "
            "sglang-0.5.9-tp2-ceiling.log.gz; distribution from SGLang log sglang-0.5.9-tp2-ceiling.log.gz; capture "
            "sizes from SGLang log sglang-0.5.9-tp2-ceiling.log.gz; capture cost from SGLang log "
            "sglang-0.5.9-tp2-ceiling.log.gz)") in notes
    trace = REPO / "traces/engines/tracelens-sglang-qwen3-8b-decode-mi300x/sglang_Qwen3-8B_decode.json.gz"
    vllm = str(LOGS / "vllm-0.22-ceiling.log.gz")
    assert main(["plan", str(trace), "--server-log", vllm, "--max-graphs", "4", "--format", "json"]) == 0
    notes = json.loads(capsys.readouterr().out)["warnings"]
    assert ("vLLM log vllm-0.22-ceiling.log.gz is a vLLM server's, the traces are SGLang's: not the same server; "
            "check that they belong together") in notes


def test_a_scrape_alone_says_what_it_lacks(capsys):
    assert main(["plan", str(LOGS / "vllm-metrics.prom.gz")]) == 2
    assert capsys.readouterr().err.strip() == (
        "launchgap: error: nothing to plan from: a /metrics scrape gives the batch-size distribution only; add traces, "
        "a server log or --timings FILE for the step costs")


def test_a_log_without_a_list_takes_its_versions_default(capsys):
    assert main(["plan", "--server-log", str(LOGS / "vllm-0.6.4-healthy.log.gz"), "--format", "json"]) == 0
    notes = json.loads(capsys.readouterr().out)["warnings"]
    assert ("the log names no capture list: the vLLM default's largest size 256 (V0 engine (up to 0.10); the log's "
            "version 0.6.4.post1) is taken as the ceiling (batches above it ran eager)") in notes


def test_extrapolation_only_the_server_lists_need_says_so(capsys):
    # the SGLang TP2 log's batches reach 89; vLLM's default list buckets 89 at 96, above the log's costs: the plan's
    # own expected step does not use 96, so its band is a point and the text says why instead of "7,925.8 to 7,925.8"
    assert main(["plan", "--server-log", str(LOGS / "sglang-0.5.9-tp2-ceiling.log.gz")]) == 0
    out = capsys.readouterr().out
    assert ("  above the costs    bs [96] extrapolated from bs 89: the plan's expected step does not depend on them "
            "(only the server lists' buckets above the largest batch reach there)") in out
    assert main(["plan", "--server-log", str(LOGS / "sglang-0.5.9-tp2-ceiling.log.gz"), "--format", "json"]) == 0
    x = json.loads(capsys.readouterr().out)["extrapolation"]
    assert (x["batch_sizes"], x["expected_step_us_low"], x["expected_step_us_high"]) == ([96], 7925.774, 7925.774)


@pytest.mark.parametrize("name, engine, sizes", [
    ("sglang-0.5.9-tp2-ceiling.log.gz", "sglang", (1, 2, 4, 8, 12, 16, 24, 32)),
    ("tensorrt_llm-1.0-healthy.log.gz", "tensorrt_llm", (1, 2, 4, 8, 16, 32, 64, 128)),
    ("vllm-0.22-ceiling.log.gz", "vllm", (1, 2, 4, 8, 16, 24, 32, 40, 48, 56, 64)),
    ("vllm-0.6.4-healthy.log.gz", None, None),  # its log prints no list
    ("vllm-metrics.prom.gz", None, None),  # a scrape states none
])
def test_the_list_a_log_states_for_its_engines_traces(name, engine, sizes):
    got = capture_settings_from_log(diagnose(read_server_file(LOGS / name)))
    assert (got.engine, got.sizes, got.max_size) == (engine, sizes, max(sizes)) if sizes else got is None
    if name.startswith("vllm-0.22"):
        assert got.describe() == ("vLLM log vllm-0.22-ceiling.log.gz: capture sizes [1, 2, 4, 8, 16, 24, 32, 40, 48, "
                                  "56, 64]")


def test_a_log_of_another_engine_leaves_the_traces_list(tmp_path):
    """An SGLang trace with a vLLM log: the trace keeps SGLang's own list (the plan warns they are not one server)."""
    trace = REPO / "traces/engines/tracelens-sglang-qwen3-8b-decode-mi300x/sglang_Qwen3-8B_decode.json.gz"
    out = tmp_path / "a.json"
    assert main(["analyze", str(trace), str(LOGS / "vllm-0.22-ceiling.log.gz"), "--format", "json", "-o",
                 str(out)]) == 0
    alone = tmp_path / "b.json"
    assert main(["analyze", str(trace), "--format", "json", "-o", str(alone)]) == 0
    s, s0 = (json.loads(p.read_text())["traces"][0]["summary"] for p in (out, alone))
    assert (s["capture_sizes"], s["capture_sizes_source"]) == (s0["capture_sizes"], s0["capture_sizes_source"])
    assert s["capture_sizes_source"] != "config"
