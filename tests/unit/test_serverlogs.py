"""Server-log and /metrics readers: every format version on hand-written lines (exact numbers), the
seeded fixtures against what their generator printed, the diagnosis and its absorbing-state rule."""
from __future__ import annotations

import gzip
import json
from pathlib import Path

import numpy as np
import pytest

from launchgap.errors import InputError
from launchgap.serverlogs import detect, merge_scrapes, read_server_file, split_inputs
from launchgap.serverlogs.prometheus import counter_total
from launchgap.serverlogs.diagnosis import ABSORBING_MIN_LINES, ABSORBING_MIN_SECONDS, diagnose

REPO = Path(__file__).resolve().parents[2]
FIXTURES = REPO / "traces" / "serverlogs"


def _write(tmp_path: Path, name: str, text: str, gz: bool = False) -> Path:
    p = tmp_path / name
    data = text.strip("\n").encode() + b"\n"
    p.write_bytes(gzip.compress(data) if gz else data)
    return p


# --- SGLang, one line per format version (python/sglang/srt/..., docs/serverlogs.md) ------------

SGLANG_DECODE = {
    # 0.4.3.post4 scheduler.py: no cuda graph field, trailing comma
    "0.4.3": ("[2025-02-01 10:00:00] Decode batch. #running-req: 12, #token: 5000, token usage: 0.02, "
              "gen throughput (token/s): 900.50, largest-len: 0, #queue-req: 0, ", 12, -1, 900.5),
    # 0.4.6.post5: cuda graph, no trailing comma
    "0.4.6": ("[2025-05-01 10:00:00 TP0] Decode batch. #running-req: 40, #token: 9000, token usage: 0.05, "
              "cuda graph: False, gen throughput (token/s): 1500.10, #queue-req: 3", 40, 0, 1500.1),
    # 0.5.1 scheduler_metrics_mixin.py: spec accept len, trailing comma
    "0.5.1": ("[2025-08-01 10:00:00 DP1 TP4] Decode batch. #running-req: 7, #token: 700, token usage: 0.01, "
              "accept len: 2.31, cuda graph: True, gen throughput (token/s): 321.00, #queue-req: 0, ", 7, 1, 321.0),
    # 0.5.4: [forward_ct] always
    "0.5.4": ("[2025-10-01 10:00:00] Decode batch [1234], #running-req: 64, #token: 64000, token usage: 0.40, "
              "cuda graph: True, gen throughput (token/s): 4000.00, #queue-req: 0, ", 64, 1, 4000.0),
    # 0.5.9: SWA token fields, cpu graph label, no trailing comma
    "0.5.9": ("[2025-12-01 10:00:00.123 TP0 EP0] Decode batch, #running-req: 3, #full token: 10, full token usage: "
              "0.00, #swa token: 10, swa token usage: 0.00, cpu graph: False, gen throughput (token/s): 12.25, "
              "#queue-req: 0", 3, 0, 12.25),
    # 0.5.23 metrics_reporter.py: extra suffix after #queue-req
    "0.5.23": ("[2026-03-01 10:00:00] Decode batch, #running-req: 67, #token: 1, token usage: 0.01, cuda graph: False, "
               "gen throughput (token/s): 100.00, #queue-req: 5, est. decode TFLOPS/s (per GPU): 12.3", 67, 0, 100.0),
}


@pytest.mark.parametrize("version", sorted(SGLANG_DECODE))
def test_sglang_decode_line_every_version(tmp_path, version):
    line, batch, graph, tok = SGLANG_DECODE[version]
    log = read_server_file(_write(tmp_path, "server.txt", line))
    assert log.engine == "sglang" and log.kind == "log"
    assert log.decode_batch.tolist() == [batch] and log.decode_graph.tolist() == [graph]
    assert log.decode_tok_s.tolist() == pytest.approx([tok], rel=1e-6) and log.skipped_lines == 0  # float32


SGLANG_CAPTURES = {
    # 0.4.3: avail mem before mem usage
    "0.4.3": ("[2025-03-08 12:29:28 TP0] Capture cuda graph end. Time elapsed: 7.23 s. avail mem=0.53 GB. "
              "mem usage=0.93 GB.", 7.23, 952.32, None),
    "0.5.1": ("[2025-08-01 12:29:28] Capture cuda graph end. Time elapsed: 54.61 s. mem usage=1.93 GB. avail mem=8.16 "
              "GB.", 54.61, 1976.32, None),
    # 0.5.14: elapsed=, bs in the begin line
    "0.5.14": ("[2026-01-01 12:00:00] Capture target decode CUDA graph begin. backend=fa3, num_tokens_per_bs=1, "
               "bs=[1, 2, 4, 8, 16], avail mem=20.00 GB\n[2026-01-01 12:00:16] Capture target decode CUDA graph end. "
               "elapsed=16.40 s, mem usage=0.50 GB, avail mem=19.50 GB.", 16.4, 512.0, [1, 2, 4, 8, 16]),
    # 0.5.23: bs in the end line
    "0.5.23": ("[2026-03-01 12:00:16] Capture target decode CUDA graph end. bs=[1, 2, 4, 8, 12, 16, 24, 32], "
               "elapsed=3.10 s, mem usage=0.25 GB, avail mem=19.50 GB.", 3.1, 256.0, [1, 2, 4, 8, 12, 16, 24, 32]),
}


@pytest.mark.parametrize("version", sorted(SGLANG_CAPTURES))
def test_sglang_capture_every_version(tmp_path, version):
    text, seconds, mib, sizes = SGLANG_CAPTURES[version]
    log = read_server_file(_write(tmp_path, "s.log", text))
    assert log.engine == "sglang"
    assert (log.capture_seconds, log.capture_memory_mib, log.capture_sizes) == (seconds, mib, sizes)


def test_sglang_capture_list_sources_and_draft(tmp_path):
    text = """
[2025-03-08 12:28:10] server_args=ServerArgs(tp_size=2, cuda_graph_max_bs=160, cuda_graph_bs=[1, 2, 4, 8], decode_log_interval=20, max_running_requests=48)
[2025-03-08 12:29:21 TP1] Capture cuda graph end. Time elapsed: 7.30 s. mem usage=0.95 GB. avail mem=0.53 GB.
[2025-03-08 12:29:21 TP0] Capture cuda graph bs [1, 2, 4, 8, 16]
[2025-03-08 12:29:28 TP0] Capture draft cuda graph end. Time elapsed: 2.00 s. mem usage=0.10 GB. avail mem=0.43 GB.
[2025-03-08 12:29:28 TP0] Capture cuda graph end. Time elapsed: 7.23 s. mem usage=0.93 GB. avail mem=0.53 GB.
[2025-03-08 12:30:01 TP0] Decode batch. #running-req: 8, #token: 4200, token usage: 0.01, cuda graph: True, gen throughput (token/s): 812.35, #queue-req: 0,
"""
    log = read_server_file(_write(tmp_path, "s.log", text))
    # the logged list wins over server_args; the decode capture of the process that logged decode lines (TP0)
    assert log.capture_sizes == [1, 2, 4, 8, 16] and log.capture_max == 160 and log.max_captured == 16
    assert (log.capture_seconds, log.capture_memory_mib) == (7.23, 952.32)
    assert [c.what for c in log.captures] == ["decode", "draft cuda graph", "decode"]
    assert log.decode_log_interval == 20 and log.max_running_requests == 48


# --- vLLM ------------------------------------------------------------------------------------------

VLLM_STATS = {
    "0.6.4": ("INFO 01-22 18:27:20 metrics.py:449] Avg prompt throughput: 0.0 tokens/s, Avg generation throughput: "
              "355.2 tokens/s, Running: 12 reqs, Swapped: 0 reqs, Pending: 1 reqs, GPU KV cache usage: 1.3%, "
              "CPU KV cache usage: 0.0%.", 12, 355.2, ""),
    "0.8.5": ("INFO 05-01 10:00:00 [loggers.py:111] Engine 000: Avg prompt throughput: 10.0 tokens/s, Avg generation "
              "throughput: 1210.5 tokens/s, Running: 140 reqs, Waiting: 3 reqs, GPU KV cache usage: 13.2%, "
              "Prefix cache hit rate: 0.0%", 140, 1210.5, "Engine 000"),
    "0.34": ("(APIServer pid=42) INFO 11-05 10:02:00 [loggers.py:338] Engine 001: Avg prompt throughput: 0.0 tokens/s, "
             "Avg generation throughput: 99.0 tokens/s, Running: 9 reqs, Waiting: 0 reqs, Deferred: 0 reqs, "
             "Preemptions: 2, GPU KV cache usage: 3.2%, MM cache hit rate: 0.0%", 9, 99.0, "Engine 001"),
}


@pytest.mark.parametrize("version", sorted(VLLM_STATS))
def test_vllm_stats_line_every_version(tmp_path, version):
    line, running, gen, source = VLLM_STATS[version]
    log = read_server_file(_write(tmp_path, "v.out", line))
    assert log.engine == "vllm" and log.decode_batch.tolist() == [running]
    assert log.decode_tok_s.tolist() == pytest.approx([gen], rel=1e-6)
    assert log.sources == [source] and log.decode_graph.tolist() == [-1]


def test_vllm_capture_config_table_and_forward_times(tmp_path):
    text = """
(EngineCore_DP0 pid=43) INFO 11-05 10:00:05 [core.py:93] Initializing a V1 LLM engine (v0.22.0) with config: model='m', enforce_eager=False, compilation_config={'mode': 3, 'cudagraph_mode': <CUDAGraphMode.FULL_AND_PIECEWISE: (2, 1)>, 'cudagraph_capture_sizes': [16, 8, 4, 2, 1], 'max_cudagraph_capture_size': 16}
(Worker_TP0 pid=51) INFO 11-05 10:01:10 [gpu_model_runner.py:6457] Graph capturing finished in 7 secs, took 0.52 GiB
(Worker_TP1 pid=52) INFO 11-05 10:01:10 [gpu_model_runner.py:6457] Graph capturing finished in 8 secs, took 0.53 GiB
(Worker_TP0 pid=51) INFO 11-05 10:01:10 [gpu_worker.py:619] CUDA graph pool memory: 0.52 GiB (actual), 0.61 GiB (estimated), difference: 0.09 GiB (17.3%).
(APIServer pid=42) INFO 11-05 10:02:00 [loggers.py:259] Engine 000: Avg prompt throughput: 0.0 tokens/s, Avg generation throughput: 800.0 tokens/s, Running: 20 reqs, Waiting: 0 reqs, GPU KV cache usage: 3.2%
(APIServer pid=42) INFO 11-05 10:02:00 [cuda_graph.py:124] **CUDAGraph Config Settings:**
(APIServer pid=42) INFO 11-05 10:02:00 [cuda_graph.py:124]
(APIServer pid=42) INFO 11-05 10:02:00 [cuda_graph.py:124] - Mode: CUDAGraphMode.FULL_AND_PIECEWISE
(APIServer pid=42) INFO 11-05 10:02:00 [cuda_graph.py:124] - Capture sizes: [1, 2, 4, 8, 16]
(APIServer pid=42) INFO 11-05 10:02:00 [cuda_graph.py:124]
(APIServer pid=42) INFO 11-05 10:02:00 [cuda_graph.py:124] **CUDAGraph Stats:**
(APIServer pid=42) INFO 11-05 10:02:00 [cuda_graph.py:124]
(APIServer pid=42) INFO 11-05 10:02:00 [cuda_graph.py:124] | Unpadded Tokens | Padded Tokens | Num Paddings | Runtime Mode | Count |
(APIServer pid=42) INFO 11-05 10:02:00 [cuda_graph.py:124] |-----------------|---------------|--------------|--------------|-------|
(APIServer pid=42) INFO 11-05 10:02:00 [cuda_graph.py:124] | 10              | 16            | 6            | FULL         | 100   |
(APIServer pid=42) INFO 11-05 10:02:00 [cuda_graph.py:124] | 20              | 20            | 0            | NONE         | 30    |
(APIServer pid=42) INFO 11-05 10:02:00 [cuda_graph.py:124] | 3               | 4             | 1            | CUDAGraphMode.PIECEWISE | 5 |
(APIServer pid=42) INFO 11-05 10:02:00 [cuda_graph.py:124] | 12              | 12            | 0            | NONE         | 2     |
(EngineCore_DP0 pid=43) INFO 11-05 10:02:10 [forward_context.py:384] Batchsize forward time stats (batchsize, count, median_time(ms)): [(16, 120, 12.5), (8, 30, 6.1)]
(EngineCore_DP0 pid=43) INFO 11-05 10:02:20 [forward_context.py:384] Batchsize forward time stats (batchsize, count, median_time(ms)): [(16, 80, 13.5)]
(EngineCore_DP0 pid=43) INFO 11-05 10:02:21 [core.py:371] Iteration(7): 0 context requests, 0 context tokens, 9 generation requests, 9 generation tokens, iteration elapsed time: 6.25 ms
"""
    log = read_server_file(_write(tmp_path, "engine.log", text, gz=True))
    assert log.engine == "vllm" and log.version == "0.22.0" and log.capture_mode == "FULL_AND_PIECEWISE"
    assert log.capture_sizes == [1, 2, 4, 8, 16] and log.capture_count == 5 and log.max_captured == 16
    assert (log.capture_seconds, log.capture_memory_mib) == (7.0, 532.48)  # Worker_TP0's, GiB x 1024
    assert log.main_capture().estimated_mib == 624.64
    assert (log.graph_passes, log.eager_passes, log.eager_passes_above, log.eager_passes_within) == (105, 32, 30, 2)
    assert log.padding == {"unpadded_tokens": 10 * 100 + 20 * 30 + 3 * 5 + 12 * 2,
                           "padded_tokens": 16 * 100 + 20 * 30 + 4 * 5 + 12 * 2, "paddings": 6 * 100 + 5}
    assert [(f.batch_size, f.count, f.median_ms) for f in log.forward_times] == [(8, 30, 6.1), (16, 200, 12.9)]
    assert log.iter_batch.tolist() == [9] and log.iter_ms.tolist() == [6.25] and log.iter_context.tolist() == [0]
    d = diagnose(log)
    assert (d.counted, d.graph, d.eager, d.eager_above_max, d.eager_within_captured) == ("passes", 105, 32, 30, 2)


def test_vllm_capture_line_without_memory(tmp_path):
    text = ("INFO 10-17 18:40:02 model_runner.py:1335] Graph capturing finished in 17 secs.\n"
            + VLLM_STATS["0.6.4"][0])
    log = read_server_file(_write(tmp_path, "old.log", text))
    assert (log.capture_seconds, log.capture_memory_mib) == (17.0, None)


def test_vllm_enforce_eager_and_old_max_capture_size(tmp_path):
    text = """
INFO 01-22 18:20:00 llm_engine.py:249] Initializing an LLM engine (v0.6.4.post1) with config: model='m', enforce_eager=True, seed=0
INFO 01-22 18:20:10 model_runner.py:1400] Capturing cudagraphs for decoding. To run the model in eager mode, set 'enforce_eager=True' or use '--enforce-eager' in the CLI.
INFO 01-22 18:27:20 metrics.py:449] Avg prompt throughput: 0.0 tokens/s, Avg generation throughput: 1.0 tokens/s, Running: 1 reqs, Swapped: 0 reqs, Pending: 0 reqs
"""
    log = read_server_file(_write(tmp_path, "v0.log", text))
    assert log.capture_mode == "NONE" and log.version == "0.6.4.post1"
    text2 = ('INFO 05-01 10:00:00 [core.py:58] Initializing a V1 LLM engine (v0.8.5) with config: model=\'m\', '
             'enforce_eager=False, compilation_config={"level":3,"cudagraph_capture_sizes":[512,504,8,4,2,1],'
             '"max_capture_size":512}\n' + VLLM_STATS["0.8.5"][0])
    log2 = read_server_file(_write(tmp_path, "v1.log", text2))
    assert log2.capture_mode is None and log2.capture_sizes == [1, 2, 4, 8, 504, 512] and log2.capture_max == 512
    text3 = text2.replace('"max_capture_size":512', '"full_cuda_graph":false,"max_capture_size":512')
    assert read_server_file(_write(tmp_path, "v3.log", text3)).capture_mode == "PIECEWISE"


# --- TensorRT-LLM ------------------------------------------------------------------------------------

TRT_ITER = {
    # early 2025: print(), elapsed_time in seconds
    "2025-early": ("iter = 5, global_rank = 0, rank = 0, currank_total_requests = 4/4, elapsed_time = 0.0125s, "
                   "timestamp = 2025-03-01 10:00:00, num_scheduled_requests: 4, states = {'num_ctx_requests': 0, "
                   "'num_ctx_tokens': 0, 'num_generation_tokens': 4}", 4, 0, 12.5),
    # PR #3914 host/prev device times
    "2025": ("[05/01/2025-10:00:00] [TRT-LLM] [I] iter = 9, global_rank = 0, rank = 0, currank_total_requests = 10/10, "
             "host_step_time = 8.1ms, prev_device_step_time = 7.25ms, timestamp = 2025-05-01 10:00:00, "
             "num_scheduled_requests: 10, states = {'num_ctx_requests': 0, 'num_ctx_tokens': 0, "
             "'num_generation_tokens': 16}", 10, 0, float("nan")),
    # 2026: num_scheduled_requests = N, kv_cache_util before currank_total_requests, extra fields
    "2026": ("[08/04/2026-19:08:13] [TRT-LLM] [I] [_torch][RANK 0] iter = 12, global_rank = 0, rank = 0, "
             "num_scheduled_requests = 6, kv_cache_util = 0.125, currank_total_requests = 6/8, host_step_time = 9.0ms, "
             "prev_device_step_time = N/A, timestamp = 2026-08-04 19:08:13, states = {'num_ctx_requests': 2, "
             "'num_ctx_tokens': 900, 'num_generation_tokens': 4, 'cached_kv_tokens': 63821}, num_active = 8, "
             "num_fetched = 0", 4, 2, float("nan")),
}


@pytest.mark.parametrize("version", sorted(TRT_ITER))
def test_tensorrt_llm_iteration_every_version(tmp_path, version):
    line, gen, ctx, ms = TRT_ITER[version]
    log = read_server_file(_write(tmp_path, "trt.log", "[TensorRT-LLM][INFO] TensorRT-LLM version: 1.2.0\n" + line))
    assert log.engine == "tensorrt_llm" and log.version == "1.2.0"
    assert (log.iter_batch.tolist(), log.iter_context.tolist()) == ([gen], [ctx])
    assert np.array_equal(log.iter_ms, [ms], equal_nan=True)
    assert len(log.decode_batch) == (ctx == 0) and len(log.prefill_time_s) == (ctx > 0)


def test_tensorrt_llm_device_time_goes_to_the_previous_iteration(tmp_path):
    line = ("[05/01/2025-10:00:00] [TRT-LLM] [I] iter = {i}, global_rank = 0, rank = 0, currank_total_requests = 1/1, "
            "host_step_time = 9.0ms, prev_device_step_time = {prev}, timestamp = 2025-05-01 10:00:00, "
            "num_scheduled_requests: {n}, states = {{'num_ctx_requests': 0, 'num_ctx_tokens': 0, "
            "'num_generation_tokens': {n}}}")
    text = "\n".join(line.format(i=i, prev=p, n=n) for i, p, n in ((1, "N/A", 4), (2, "7.5ms", 8), (3, "11.25ms", 16)))
    log = read_server_file(_write(tmp_path, "trt.log", text))
    assert log.iter_batch.tolist() == [4, 8, 16]
    assert np.array_equal(log.iter_ms, [7.5, 11.25, np.nan], equal_nan=True)


def test_tensorrt_llm_capture_sizes(tmp_path):
    text = """
[11/05/2025-10:00:00] [TRT-LLM] [I] Creating CUDA graph instances for 3 batch sizes.
[11/05/2025-10:00:00] [TRT-LLM] [I] Run generation only CUDA graph warmup for batch size=64, draft_len=0
[11/05/2025-10:00:00] [TRT-LLM] [I] Run generation only CUDA graph warmup for batch size=8
[11/05/2025-10:00:01] [TRT-LLM] [I] Run warmup for batch size=1
"""
    log = read_server_file(_write(tmp_path, "trt.log", text))
    assert log.capture_sizes == [1, 8, 64] and log.capture_count == 3 and log.capture_seconds is None


# --- Prometheus ----------------------------------------------------------------------------------------

SCRAPE = """# HELP sglang:num_running_reqs The number of running requests.
# TYPE sglang:num_running_reqs gauge
sglang:num_running_reqs{{model_name="m",tp_rank="0"}} {run}
sglang:num_running_reqs{{model_name="m",tp_rank="1"}} 1.0
# HELP sglang:cuda_graph_passes_total Total number of forward passes categorized by CUDA graph.
# TYPE sglang:cuda_graph_passes_total counter
sglang:cuda_graph_passes_total{{mode="decode_cuda_graph",model_name="m"}} {g}
sglang:cuda_graph_passes_total{{mode="decode_none",model_name="m"}} {e}
# HELP sglang:itl ITL
# TYPE sglang:itl histogram
sglang:itl_bucket{{le="0.01",model_name="m"}} {b1}
sglang:itl_bucket{{le="+Inf",model_name="m"}} {b2}
sglang:itl_sum{{model_name="m"}} 0.5
sglang:itl_count{{model_name="m"}} {b2}
"""


def test_prometheus_scrapes_over_time(tmp_path):
    text = ("2026-11-03 08:00:00\n" + SCRAPE.format(run=66.0, g=100.0, e=300.0, b1=5, b2=9)
            + "not a metric line at all\n2026-11-03 08:00:15\n" + SCRAPE.format(run=19.0, g=150.0, e=310.0, b1=8, b2=20))
    log = read_server_file(_write(tmp_path, "metrics.txt", text, gz=True))
    assert (log.engine, log.kind) == ("sglang", "metrics")
    assert log.decode_batch.tolist() == [67, 20]  # summed over tp ranks
    assert log.scrape_time_s.tolist() == [1793692800.0, 1793692815.0]
    assert (log.graph_passes, log.eager_passes) == (150, 310) and log.skipped_lines == 1
    assert log.histograms[0]["sglang:itl"] == [(0.01, 5.0), (float("inf"), 9.0)]
    assert log.histograms[1]["sglang:itl"] == [(0.01, 8.0), (float("inf"), 20.0)]
    d = diagnose(log).to_dict()
    assert d["metrics"]["sglang:cuda_graph_passes_total"] == 460.0 and d["metrics"]["sglang:itl_count"] == 20.0
    assert d["decode"]["counted"] == "passes" and d["decode"]["lines"] is None


def _scrape(stamp: str, run: float, g: float, e: float, b1: int, b2: int) -> str:
    return f"{stamp}\n" + SCRAPE.format(run=run, g=g, e=e, b1=b1, b2=b2)


def test_prometheus_scrape_files_merge_into_one_series(tmp_path, capsys):
    """Scrapes over time in several files (given out of order, one scrape in two files, a restart
    that resets the counters) read as one series: in time order, per scrape gauges, counters and
    histograms; the pass counts over the restart; one logs[] entry naming every file."""
    a = _write(tmp_path, "a.prom", _scrape("2026-11-03 08:00:30", 40.0, 200.0, 320.0, 9, 25)
               + _scrape("2026-11-03 08:00:45", 30.0, 5.0, 2.0, 1, 2))  # restarted: counters from zero
    b = _write(tmp_path, "b.prom", _scrape("2026-11-03 08:00:00", 66.0, 100.0, 300.0, 5, 9)
               + _scrape("2026-11-03 08:00:15", 19.0, 150.0, 310.0, 8, 20)
               + _scrape("2026-11-03 08:00:30", 40.0, 200.0, 320.0, 9, 25))  # also in a.prom
    vllm = _write(tmp_path, "v.prom", "# TYPE vllm:num_requests_running gauge\nvllm:num_requests_running 3.0\n")
    rc, out, _ = _cli(capsys, ["analyze", str(a), str(b), str(vllm), "--format", "json"])
    logs = json.loads(out)["logs"]
    assert rc == 0 and [lg["engine"] for lg in logs] == ["sglang", "vllm"]  # one entry per engine
    sg = logs[0]
    assert sg["file"] == str(a) and sg["files"] == [str(a), str(b)] and logs[1]["files"] == [str(vllm)]
    assert sg["decode"]["batch"] == [67, 20, 41, 31]  # 08:00:00, :15, :30 (once), :45
    assert sg["decode"]["counted"] == "passes"
    assert (sg["decode"]["graph"], sg["decode"]["eager"]) == (200 + 5, 320 + 2)  # before the restart + after
    assert sg["metrics"]["sglang:itl_count"] == 2.0  # the last scrape's
    merged = merge_scrapes([read_server_file(a), read_server_file(b)])[0]
    assert merged.scrape_time_s.tolist() == [1793692800.0 + 15 * k for k in range(4)]
    assert [h["sglang:itl"][-1][1] for h in merged.histograms] == [9.0, 20.0, 25.0, 2.0]
    assert any("held by two files were kept once" in n for n in merged.notes)


VLLM_ITL = """# HELP vllm:num_requests_running Number of requests in model execution batches.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{{engine="0",model_name="m"}} {run}
# HELP vllm:{name} Histogram of inter-token latency in seconds.
# TYPE vllm:{name} histogram
vllm:{name}_bucket{{engine="0",le="0.01",model_name="m"}} {b1}
vllm:{name}_bucket{{engine="0",le="0.025",model_name="m"}} {b2}
vllm:{name}_bucket{{engine="0",le="+Inf",model_name="m"}} {b3}
vllm:{name}_sum{{engine="0",model_name="m"}} {s}
vllm:{name}_count{{engine="0",model_name="m"}} {b3}
"""


def _itl(stamp: str, run: int, b1: int, b2: int, b3: int, s: float,
         name: str = "inter_token_latency_seconds") -> str:
    return f"{stamp}\n" + VLLM_ITL.format(run=run, b1=b1, b2=b2, b3=b3, s=s, name=name)


def test_inter_token_latency_between_scrapes(tmp_path, capsys):
    # two scrapes a minute apart: 2,000 tokens between them, 36 s of inter-token time: 18 ms each; the window's
    # buckets hold 50, 2,000, 2,000 tokens (cumulative): the median token lies in the 10-25 ms bucket
    f = _write(tmp_path, "m.prom", _itl("2026-11-03 08:00:00", 16, 100, 900, 1000, 17.0)
               + _itl("2026-11-03 08:01:00", 20, 150, 2900, 3000, 53.0))
    d = diagnose(read_server_file(f))
    assert d.inter_token.to_dict() == {"metric": "vllm:inter_token_latency_seconds", "mean_ms": 18.0, "tokens": 2000,
                                       "window": "between the first and the last scrape", "p50_ms_low": 10.0,
                                       "p50_ms_high": 25.0,
                                       # the one interval, under the 20 running requests its later scrape read
                                       "by_batch": [{"batch": 20, "mean_ms": 18.0, "tokens": 2000, "intervals": 1}]}
    assert d.to_dict()["inter_token_latency"]["mean_ms"] == 18.0
    # beside a trace at another batch: the mean over the window, and what to do where the batch matches; at the
    # scrapes' batch: its own mean, the measured step to give
    from launchgap.serverlogs.diagnosis import beside_tpot_text, measured_step_us
    other = beside_tpot_text(d, "m.prom", 9.5, 8)
    assert other.endswith("This trace's TPOT is 9.50 ms at batch 8; where the server's running batch matches it, give "
                          "its mean as the measured step (--observed-step-us, or the Diagnosis page's field).")
    assert (measured_step_us(d, 8), measured_step_us(d, 20)) == (18_000.0, 18_000.0)
    # on the seeded vLLM scrapes (480, batches 4-62): at batch 4 its own 6.18 ms step, at a batch no interval ran the
    # window's mean (8.068 ms)
    fx = diagnose(read_server_file(FIXTURES / "vllm-metrics.prom.gz"))
    assert (measured_step_us(fx, 4), measured_step_us(fx, 1000)) == (6_180.0, 8_067.8)
    # the text's table: the 16 batches with most tokens, ascending; batch 38 is the generator's 6 + 0.045 x 38 ms
    rc, out, _ = _cli(capsys, ["analyze", str(FIXTURES / "vllm-metrics.prom.gz")])
    table = out[out.index("Inter-token latency by running batch"):].splitlines()
    assert rc == 0 and table[1].split() == ["batch", "mean", "ms", "tokens", "intervals"]
    assert table[3].split() == ["38", "7.71", "665,532", "9"] and len([r for r in table[3:] if r.strip()]) == 16
    assert "; at batch 20, 18.0 ms mean over 2,000 tokens in 1 interval" in beside_tpot_text(d, "m.prom", 9.5, 20)
    rc, out, _ = _cli(capsys, ["analyze", str(f)])
    assert rc == 0 and ("inter-token latency  18.0 ms mean over 2,000 tokens between the first and the last scrape "
                        "(vllm:inter_token_latency_seconds; the median token in its 10-25 ms bucket), at a median 20 "
                        "running requests: the server's time per output token, the prefill steps its decode steps wait "
                        "behind included") in out, out


def test_inter_token_latency_one_scrape_old_name_and_restart(tmp_path):
    # one scrape of vLLM's older name: since the server started, 900 tokens in 10.8 s = 12 ms
    one = diagnose(read_server_file(_write(tmp_path, "one.prom", _itl("2026-11-03 08:00:00", 4, 300, 900, 900, 10.8,
                                                                      "time_per_output_token_seconds"))))
    assert (one.inter_token.metric, one.inter_token.mean_ms, one.inter_token.tokens, one.inter_token.window) == \
        ("vllm:time_per_output_token_seconds", 12.0, 900, "since the server started")
    assert (one.inter_token.p50_ms_low, one.inter_token.p50_ms_high) == (10.0, 25.0)
    # a restart between scrapes: the counters add up over it (1,000 -> 1,200, restart, 500): between the first and
    # the last scrape 1,200 + 500 - 1,000 = 700 tokens in 16 + 6 - 12 = 10 s, 14.286 ms; the buckets cannot be
    # differenced across the restart: no median bucket
    text = (_itl("2026-11-03 08:00:00", 8, 100, 900, 1000, 12.0) + _itl("2026-11-03 08:01:00", 8, 120, 1100, 1200, 16.0)
            + _itl("2026-11-03 08:02:00", 8, 50, 450, 500, 6.0))
    rs = diagnose(read_server_file(_write(tmp_path, "restart.prom", text))).inter_token
    assert (rs.tokens, rs.mean_ms, rs.p50_ms_low, rs.p50_ms_high) == (700, pytest.approx(1e4 / 700), None, None)
    # per batch: the interval before the restart only (200 tokens in 4 s: 20 ms); the one across it is left out
    assert rs.by_batch == ((8, pytest.approx(20.0), 200, 1),)
    # no histogram of the engine's: none
    none = diagnose(read_server_file(_write(tmp_path, "none.prom", "# TYPE vllm:num_requests_running gauge\n"
                                                                   "vllm:num_requests_running 3.0\n")))
    assert none.inter_token is None and none.to_dict()["inter_token_latency"] is None


def test_counter_total_over_restarts():
    assert counter_total([]) == 0.0 and counter_total([5.0]) == 5.0
    assert counter_total([1.0, 4.0, 9.0]) == 9.0
    assert counter_total([1.0, 4.0, 2.0, 3.0, 0.0, 7.0]) == 4.0 + 3.0 + 7.0


# --- the absorbing ceiling state: both sides of the definition ------------------------------------------

def _sglang_run(tmp_path: Path, above: int, dt_s: float) -> dict:
    lines = ["[2026-01-01 00:00:00] Capture cuda graph bs [1, 2, 4, 8, 16, 32]"]
    batches = [20] * 5 + [40] * above + [30] * 5
    for i, b in enumerate(batches):
        t = int(i * dt_s)
        lines.append(f"[2026-01-01 {t // 3600:02d}:{t // 60 % 60:02d}:{t % 60:02d}] Decode batch, #running-req: {b}, "
                     f"#token: 1, token usage: 0.01, cuda graph: {b <= 32}, gen throughput (token/s): 100.00, "
                     f"#queue-req: 0")
    return diagnose(read_server_file(_write(tmp_path, f"run{above}_{dt_s}.log", "\n".join(lines)))).to_dict()


def test_absorbing_needs_the_lines(tmp_path):
    dt = ABSORBING_MIN_SECONDS  # every line a minute apart: the seconds rule is met
    short = _sglang_run(tmp_path, ABSORBING_MIN_LINES - 1, dt)
    long = _sglang_run(tmp_path, ABSORBING_MIN_LINES, dt)
    assert short["ceiling"] == {"max_captured": 32, "absorbing": False, "lines_above_max": ABSORBING_MIN_LINES - 1,
                                "absorbing_from_line": None}
    assert long["ceiling"] == {"max_captured": 32, "absorbing": True, "lines_above_max": ABSORBING_MIN_LINES,
                               "absorbing_from_line": 5}
    assert long["decode"]["eager_above_max"] == ABSORBING_MIN_LINES and long["decode"]["eager_within_captured"] == 0


def test_absorbing_needs_the_seconds(tmp_path):
    n = ABSORBING_MIN_LINES
    just = ABSORBING_MIN_SECONDS / (n - 1)  # the run spans (n - 1) gaps
    assert _sglang_run(tmp_path, n, just)["ceiling"]["absorbing"] is True
    assert _sglang_run(tmp_path, n, just - 0.5)["ceiling"]["absorbing"] is False


def test_absorbing_unknown_without_a_capture_list(tmp_path):
    log = read_server_file(_write(tmp_path, "s.log", SGLANG_DECODE["0.5.9"][0]))
    assert diagnose(log).to_dict()["ceiling"]["absorbing"] is None


# --- the seeded fixtures against what their generator printed -------------------------------------------

FILES = sorted(FIXTURES.glob("*.gz"))


@pytest.mark.parametrize("path", FILES, ids=[p.name for p in FILES])
def test_fixture_reads_exactly(path):
    exp = json.loads((FIXTURES / (path.name.removesuffix(".gz") + ".expected.json")).read_text())
    log = read_server_file(path)
    d = diagnose(log).to_dict()
    assert log.engine == exp["engine"] and d["decode"]["batch"] == exp["batch"]
    assert log.lines == exp["lines"]
    if exp.get("kind") == "metrics":
        assert log.kind == "metrics" and len(log.scrapes) == exp["scrapes"]
        assert (d["decode"]["graph"], d["decode"]["eager"]) == (exp["graph"], exp["eager"])
        # the inter-token latency between the first and the last scrape, as the generator summed it
        itl = d["inter_token_latency"]
        assert (itl["tokens"], itl["window"]) == (exp["inter_token_tokens"], "between the first and the last scrape")
        assert itl["mean_ms"] == pytest.approx(exp["inter_token_mean_ms"], abs=1e-3)
        # per running batch: every interval's tokens waited one step of the batch its scrape read
        assert {str(e["batch"]): e["mean_ms"] for e in itl["by_batch"]} == pytest.approx(
            exp["inter_token_ms_by_batch"], abs=1e-3)
        return
    for key in ("graph", "eager", "eager_above_max", "eager_within_captured"):
        if key in exp:
            assert d["decode"][key] == exp[key], key
    assert d["decode"]["lines"] == exp["decode_lines"] and d["skipped_lines"] == exp["skipped_lines"]
    assert d["capture"]["sizes"] == exp["capture_sizes"] and d["version"] == exp["version"]
    assert (d["capture"]["seconds"], d["capture"]["memory_mib"]) == (exp["capture_seconds"], exp["capture_memory_mib"])
    assert d["ceiling"]["max_captured"] == exp["max_captured"] and d["ceiling"]["absorbing"] is exp["absorbing"]
    # >= 99% of the decode and stats lines read (here: all but the damaged ones)
    assert d["decode"]["lines"] >= 0.99 * (exp["decode_lines"] + exp["skipped_lines"])


def test_fixture_throughput_and_distribution():
    d = diagnose(read_server_file(FIXTURES / "sglang-0.5.9-tp2-ceiling.log.gz"))
    assert d.eager_tok_s_per_req_near_max < 0.6 * d.graph_tok_s_per_req_near_max  # eager steps are slower
    assert sum(d.distribution.values()) == len(d.log.decode_batch)
    assert d.prefill_lines == json.loads((FIXTURES / "sglang-0.5.9-tp2-ceiling.log.expected.json").read_text())[
        "prefill_lines"]
    assert "decode_log_interval=40" in d.distribution_basis


# --- detection by content, and what is refused ------------------------------------------------------------

def test_detected_by_content_not_name(tmp_path):
    p = _write(tmp_path, "trace.json", SGLANG_DECODE["0.5.9"][0])
    assert detect(p) == ("sglang", "log")
    server, found, rest = split_inputs([str(p), str(REPO / "traces" / "h200-1b" / "1b_bs8_eager.json.gz")])
    assert server == [p] and found == [] and len(rest) == 1
    late = _write(tmp_path, "late.txt", "INFO: starting\n" * 200_000 + VLLM_STATS["0.8.5"][0])  # cue past the first MiB
    assert detect(late) == ("vllm", "log")


def test_refused_inputs(tmp_path):
    none = _write(tmp_path, "notes.txt", "hello\nworld")
    with pytest.raises(InputError, match="no vLLM, SGLang or TensorRT-LLM log line or metric"):
        read_server_file(none)
    binary = tmp_path / "blob.log"
    binary.write_bytes(bytes(range(256)) * 100)
    with pytest.raises(InputError, match="binary content"):
        read_server_file(binary)


def test_garbage_lines_counted_not_fatal(tmp_path):
    good = SGLANG_DECODE["0.5.9"][0]
    text = "\n".join([good, "[2025-12-01 10:00:01] Decode batch, #running-req: oops", "\xff\xfe garbage",
                      good.replace("#running-req: 3", "#running-req: 5")])
    p = tmp_path / "mixed.log"
    p.write_bytes(text.encode("utf-8").replace("\xff\xfe".encode("utf-8"), b"\xff\xfe"))
    log = read_server_file(p)
    assert log.decode_batch.tolist() == [3, 5] and log.skipped_lines == 2


def test_timestamps_and_sources(tmp_path):
    text = "\n".join([SGLANG_DECODE["0.5.9"][0], SGLANG_DECODE["0.5.1"][0]])
    log = read_server_file(_write(tmp_path, "s.log", text))
    assert log.sources == ["TP0 EP0", "DP1 TP4"] and log.decode_source.tolist() == [0, 1]
    assert log.decode_time_s[0] == 1764583200.123
    v = read_server_file(_write(tmp_path, "v.log", VLLM_STATS["0.34"][0]))
    assert np.isfinite(v.decode_time_s).all()  # vLLM's month-day stamps, a fixed year


def test_tensorrt_llm_block_path_equals_the_line_path(tmp_path):
    """Iteration lines read block-wide (all in the device-time layouts) equal the same lines read one by
    one (a damaged line in the block sends the whole block down the line path)."""
    old = ("[05/01/2025-10:00:{s:02d}] [TRT-LLM] [I] iter = {i}, global_rank = 0, rank = 0, currank_total_requests = "
           "{n}/{n}, host_step_time = 9.0ms, prev_device_step_time = {prev}, timestamp = 2025-05-01 10:00:{s:02d}, "
           "num_scheduled_requests: {n}, states = {{'num_ctx_requests': {c}, 'num_ctx_tokens': 0, "
           "'num_generation_tokens': {n}}}")
    new = ("[05/01/2025-10:00:{s:02d}] [TRT-LLM] [I] [_torch][RANK 0] iter = {i}, global_rank = 0, rank = 0, "
           "num_scheduled_requests = {n}, kv_cache_util = 0.125, currank_total_requests = {n}/{n}, host_step_time = "
           "9.0ms, prev_device_step_time = {prev}, timestamp = 2025-05-01 10:00:{s:02d}, states = {{"
           "'num_ctx_requests': {c}, 'num_ctx_tokens': 0, 'num_generation_tokens': {n}}}, num_active = 3")
    rows = [(i, "N/A" if i == 0 else f"{5 + i * 0.25:.2f}ms", 4 + i % 7, 1 if i % 9 == 4 else 0) for i in range(40)]
    lines = [(old if i < 20 else new).format(s=i, i=i, prev=p, n=n, c=c) for i, p, n, c in rows]
    fast = read_server_file(_write(tmp_path, "fast.log", "\n".join(lines)))
    slow = read_server_file(_write(tmp_path, "slow.log", "\n".join(lines + ["iter = 99, global_rank = 0, damaged"])))
    assert slow.skipped_lines == 1 and fast.skipped_lines == 0
    for col in ("iter_batch", "iter_context", "decode_batch", "prefill_time_s"):
        assert np.array_equal(getattr(fast, col), getattr(slow, col)), col
    assert np.array_equal(fast.iter_ms, slow.iter_ms, equal_nan=True)
    assert np.array_equal(fast.decode_time_s, slow.decode_time_s)
    assert fast.iter_batch.tolist() == [n - c for _, _, n, c in rows]
    assert np.array_equal(fast.iter_ms, [5 + i * 0.25 for i in range(1, 40)] + [np.nan], equal_nan=True)


# --- the command line on bad server files: one line naming the file, exit 2 (test_bad_input.py's style) ----

def _cli(capsys, argv: list[str]) -> tuple[int, str, str]:
    from launchgap.cli import main

    rc = main(argv)
    out, err = capsys.readouterr()
    return rc, out, err


@pytest.mark.parametrize("name, data, reason", [
    ("notes.log", b"hello\nworld\n", "no vLLM, SGLang or TensorRT-LLM log line or metric in it"),
    ("empty.log", b"", "empty file"),
    # a scrape cut short after three lines: one of them a sample, so not a scrape, and no log line either
    ("cut.prom", b'# HELP vllm:x\nvllm:num_requests_running{model_name="m"} 3\nvllm:foo{', "neither a vLLM log line nor a"
     " /metrics scrape it could read"),
    ("blob.log", bytes(range(256)) * 64, "binary content"),
    ("cut.log.gz", gzip.compress(SGLANG_DECODE["0.5.9"][0].encode() * 2000)[:300], "truncated gzip"),
])
def test_cli_refuses_a_bad_server_file_in_one_line(tmp_path, capsys, name, data, reason):
    p = tmp_path / name
    p.write_bytes(data)
    rc, out, err = _cli(capsys, ["analyze", str(p)])
    lines = err.strip().splitlines()
    assert rc == 2 and len(lines) == 1 and str(p) in lines[0] and reason in lines[0], err
    assert "Traceback" not in err and out == ""


def test_cli_garbage_inside_a_good_log_is_counted_beside_a_bad_file(tmp_path, capsys):
    good = _write(tmp_path, "server.log", "\n".join([SGLANG_DECODE["0.5.9"][0], "\x00\x01 not text",
                                                      "[2025-12-01 10:00:01] Decode batch, #running-req: x",
                                                      SGLANG_DECODE["0.4.6"][0]]))
    bad = _write(tmp_path, "other.log", "nothing here")
    rc, out, err = _cli(capsys, ["analyze", str(good), str(bad), "--format", "json"])
    doc = json.loads(out)
    assert rc == 2 and [e["path"] for e in doc["errors"]] == [str(bad)]
    (entry,) = doc["logs"]
    assert entry["decode"]["batch"] == [3, 40] and entry["skipped_lines"] == 2
    assert (entry["decode"]["graph"], entry["decode"]["eager"]) == (0, 2)


def test_a_directory_of_traces_and_logs(tmp_path, capsys):
    """A folder holding a trace and a server log: each read by its own reader, nothing read twice."""
    import shutil

    shutil.copy(FIXTURES / "vllm-0.22-ceiling.log.gz", tmp_path)
    shutil.copy(REPO / "traces" / "h200-1b" / "1b_bs8_eager.json.gz", tmp_path)
    (tmp_path / "README.txt").write_text("Decode batch, #running-req: quoted in a note, not a log\n")
    rc, out, err = _cli(capsys, ["analyze", str(tmp_path), "--format", "json"])
    doc = json.loads(out)
    assert rc == 0 and doc["errors"] == [], err
    assert [t["path"] for t in doc["traces"]] == [str(tmp_path / "1b_bs8_eager.json.gz")]
    assert [lg["file"] for lg in doc["logs"]] == [str(tmp_path / "vllm-0.22-ceiling.log.gz")]


def test_models_named_by_logs_and_scrapes(tmp_path, capsys):
    """The model each file names: vLLM's engine config, SGLang's server_args, a scrape's model_name label; scrapes
    of two models are two servers, never one series; a plan on a log and a scrape of other models warns."""
    named = {p.name: read_server_file(p).models for p in FILES}
    llama, qwen = ["meta-llama/Llama-3.1-8B-Instruct"], ["Qwen/Qwen3-8B"]
    assert named == {"sglang-0.4.6-healthy.log.gz": llama, "sglang-0.5.9-tp2-ceiling.log.gz": llama,
                     "sglang-metrics.prom.gz": llama, "tensorrt_llm-1.0-healthy.log.gz": [],
                     "vllm-0.22-ceiling.log.gz": qwen, "vllm-0.6.4-healthy.log.gz": llama, "vllm-metrics.prom.gz": qwen}
    a = _write(tmp_path, "a.prom", '# TYPE vllm:num_requests_running gauge\nvllm:num_requests_running{model_name="m1"} 3\n')
    b = _write(tmp_path, "b.prom", '# TYPE vllm:num_requests_running gauge\nvllm:num_requests_running{model_name="m2"} 5\n')
    c = _write(tmp_path, "c.prom", '# TYPE vllm:num_requests_running gauge\nvllm:num_requests_running{model_name="m1"} 4\n')
    assert [lg.files for lg in merge_scrapes([read_server_file(p) for p in (a, b, c)])] == [[str(a), str(c)], [str(b)]]
    rc, out, _ = _cli(capsys, ["analyze", str(FIXTURES / "vllm-metrics.prom.gz")])
    assert rc == 0 and ["model", "Qwen/Qwen3-8B"] in [ln.split() for ln in out.splitlines()]
    # a scrape is not a log: what to give beside it
    assert ("Verdict: capture list unknown — a /metrics scrape names no capture list: give the server's log or config "
            "beside it (docs/serverlogs.md)\n") in out
    rc, out, _ = _cli(capsys, ["plan", "--server-log", str(FIXTURES / "vllm-0.6.4-healthy.log.gz"), "--metrics",
                               str(FIXTURES / "vllm-metrics.prom.gz"), "--format", "json"])
    assert rc == 0 and json.loads(out)["warnings"][0] == (
        "vLLM metrics vllm-metrics.prom.gz names the model Qwen/Qwen3-8B, vLLM log vllm-0.6.4-healthy.log.gz "
        "meta-llama/Llama-3.1-8B-Instruct: not the same server; check that they belong together")
