"""Synthesise the server-log and /metrics fixtures of traces/serverlogs/ (seeded: same bytes every run).

Every line is printed with the engine's own format string as cited in PROVENANCE.md (and
docs/serverlogs.md); the numbers come from a small load model: a target concurrency that
varies over hours (daily swell, bursts), a step time that grows with the batch and is longer
eager than graph, and, in the ``ceiling`` logs, the absorbing state of SGLang #33483 (once the
batch passes the largest captured size, eager steps keep requests resident longer and the batch
settles above the ceiling). Each log also gets a few damaged lines (cut mid-line, as a crash or
a log rotation leaves them) and unrelated lines (HTTP access lines, warnings).

Beside each file, ``NAME.expected.json`` holds what the generator printed (decode lines, graph
and eager counts split by the ceiling, capture list, seconds and memory, damaged lines): the
tests compare the readers with it exactly.

    python traces/serverlogs/generate.py            # rewrite every fixture
"""
from __future__ import annotations

import gzip
import json
import math
import random
from datetime import datetime, timedelta, timezone
from pathlib import Path

HERE = Path(__file__).resolve().parent
START = datetime(2026, 11, 3, 8, 0, 0, tzinfo=timezone.utc)


def target_load(t_s: float, rng: random.Random, base: float, swell: float) -> float:
    """Concurrency the traffic asks for at ``t_s`` seconds: a slow swell plus noise and bursts."""
    x = base + swell * (0.5 - 0.5 * math.cos(2 * math.pi * t_s / 7200.0))
    x *= 1.0 + 0.08 * rng.gauss(0, 1)
    return max(1.0, x)


def step_ms(batch: int, graph: bool) -> float:
    """Decode step time (ms): graph replay vs eager launches (a 8B-class model on one GPU)."""
    return (6.0 + 0.045 * batch) if graph else (14.0 + 0.06 * batch)


def bucket(batch: int, sizes: list[int]) -> int:
    return next(s for s in sizes if s >= batch)


def _write(name: str, lines: list[str], expected: dict) -> None:
    data = ("\n".join(lines) + "\n").encode()
    with gzip.GzipFile(HERE / name, "wb", mtime=0, compresslevel=9) as fh:
        fh.write(data)
    expected["file"] = name
    expected["lines"] = data.replace(b"\r", b"\n").count(b"\n")  # a carriage return (tqdm) ends a line too
    (HERE / (name.removesuffix(".gz") + ".expected.json")).write_text(json.dumps(expected, indent=1) + "\n")


def batches(rng: random.Random, n: int, dt_s: float, base: float, swell: float, top: int | None,
            absorbing: bool, spikes: int) -> list[int]:
    """The running decode batch per logged line; ``absorbing``: once above ``top`` it stays above."""
    out: list[int] = []
    stuck = False
    spike_at = set(rng.sample(range(n // 10, n - 30), spikes)) if spikes else set()
    spike_left = 0
    for i in range(n):
        want = target_load(i * dt_s, rng, base, swell)
        if i in spike_at:
            spike_left = rng.randint(2, 6)
        if spike_left:
            spike_left -= 1
            want = top * 1.15 + rng.randint(1, 6) if top else want * 1.5
        elif top is not None and not stuck and not absorbing:
            want = min(want, top * 0.97)
        b = max(1, int(round(want)))
        if absorbing and top is not None and (stuck or b > top):
            stuck = True  # eager steps keep requests resident: the batch settles above the ceiling
            b = max(top + 1 + rng.randint(0, max(1, top // 4)), int(round(want * 2.1)))
        out.append(b)
    return out


# --- SGLang ---------------------------------------------------------------------------------------

def sglang(name: str, version: str, seed: int, n: int, sizes: list[int], absorbing: bool, spikes: int,
           tp: int) -> None:
    rng = random.Random(seed)
    top = max(sizes)
    tag = (lambda r: f" TP{r}") if tp > 1 else (lambda r: "")
    t = START
    out: list[str] = []
    exp = {"engine": "sglang", "version": None, "capture_sizes": sizes, "graph": 0, "eager": 0, "eager_above_max": 0,
           "eager_within_captured": 0, "decode_lines": 0, "prefill_lines": 0, "skipped_lines": 0,
           "absorbing": absorbing, "max_captured": top}

    def stamp(r: int = 0) -> str:
        return f"[{t:%Y-%m-%d %H:%M:%S}{tag(r)}]"

    out.append(f"[{t:%Y-%m-%d %H:%M:%S}] server_args=ServerArgs(model_path='meta-llama/Llama-3.1-8B-Instruct', "
               f"tokenizer_path='meta-llama/Llama-3.1-8B-Instruct', host='0.0.0.0', port=30000, tp_size={tp}, "
               f"mem_fraction_static=0.88, max_running_requests=None, chunked_prefill_size=8192, "
               f"cuda_graph_max_bs={top}, cuda_graph_bs=None, disable_cuda_graph=False, disable_cuda_graph_padding=False, "
               f"enable_metrics=True, decode_log_interval=40, log_level='info')")
    for r in range(tp):
        out.append(f"{stamp(r)} Load weight end. type=LlamaForCausalLM, dtype=torch.bfloat16, avail mem=62.08 GB, "
                   f"mem usage=15.06 GB.")
    for r in range(tp):
        out.append(f"{stamp(r)} KV Cache is allocated. #tokens: 402117, K size: 24.54 GB, V size: 24.54 GB")
    seconds = round(rng.uniform(5, 30), 2)
    mem = round(rng.uniform(0.4, 2.5), 2)
    new_order = version >= "0.4.6"
    for r in range(tp):
        out.append(f"{stamp(r)} Capture cuda graph begin. This can take up to several minutes. avail mem=11.46 GB")
    out.append(f"{stamp(0)} Capture cuda graph bs {sizes}")
    bar = "".join(f"\rCapturing batches (bs={b} avail_mem=11.{i:02d} GB): {100 * (i + 1) // len(sizes)}%|"
                  for i, b in enumerate(reversed(sizes)))
    out.append(bar.lstrip("\r"))
    t += timedelta(seconds=seconds)
    for r in range(tp):
        s = seconds if r == 0 else round(seconds + 0.01 * r, 2)
        tail = (f"mem usage={mem:.2f} GB. avail mem={11.46 - mem:.2f} GB." if new_order
                else f"avail mem={11.46 - mem:.2f} GB. mem usage={mem:.2f} GB.")
        out.append(f"{stamp(r)} Capture cuda graph end. Time elapsed: {s:.2f} s. {tail}")
    exp["capture_seconds"] = seconds
    exp["capture_memory_mib"] = round(mem * 1024, 6)
    out.append(f"{stamp(0)} max_total_num_tokens=402117, chunked_prefill_size=8192, max_prefill_tokens=16384, "
               f"max_running_requests=4097, context_len=131072")
    out.append(f"[{t:%Y-%m-%d %H:%M:%S}] INFO:     Started server process [61]")
    out.append(f"[{t:%Y-%m-%d %H:%M:%S}] The server is fired up and ready to roll!")
    exp["max_running_requests"] = 4097
    bs = batches(rng, n, 1.5, 6, top * 0.9, top, absorbing, spikes)
    exp["batch"] = bs
    q = 0
    for i, b in enumerate(bs):
        fallback = b <= top and rng.random() < 0.02  # e.g. a batch the graph cannot take (spec/dp conditions)
        graph = b <= top and not fallback
        ms = step_ms(b, graph)
        t += timedelta(milliseconds=40 * ms + rng.uniform(0, 300))
        if rng.random() < 0.15:
            new = rng.randint(1, 4)
            out.append(f"{stamp(0)} Prefill batch. #new-seq: {new}, #new-token: {new * rng.randint(200, 2000)}, "
                       f"#cached-token: {rng.randint(0, 400)}, token usage: {b / 400:.2f}, #running-req: {b}, "
                       f"#queue-req: {q}, ")
            exp["prefill_lines"] += 1
        if rng.random() < 0.1:
            out.append(f'[{t:%Y-%m-%d %H:%M:%S}] INFO:     10.0.{rng.randint(0, 9)}.{rng.randint(1, 250)}:'
                       f'{rng.randint(30000, 60000)} - "POST /v1/chat/completions HTTP/1.1" 200 OK')
        q = max(0, q + rng.randint(-2, 2)) if b > top else 0
        tok = b * 1000.0 / ms * rng.uniform(0.95, 1.02)
        usage = min(0.99, b * 900 / 402117)
        if version >= "0.5.9":
            line = (f"{stamp(0)} Decode batch, #running-req: {b}, #token: {int(b * 900)}, token usage: {usage:.2f}, "
                    f"cuda graph: {graph}, gen throughput (token/s): {tok:.2f}, #queue-req: {q}")
        else:
            line = (f"{stamp(0)} Decode batch. #running-req: {b}, #token: {int(b * 900)}, token usage: {usage:.2f}, "
                    f"cuda graph: {graph}, gen throughput (token/s): {tok:.2f}, #queue-req: {q}")
        if i in (n // 3, 2 * n // 3):  # a damaged line: cut before its throughput, as a crash leaves it
            out.append(line[: line.index("cuda graph")])
            exp["skipped_lines"] += 1
            exp["batch"][i] = None
            continue
        out.append(line)
        exp["decode_lines"] += 1
        exp["graph" if graph else "eager"] += 1
        if not graph:
            exp["eager_above_max" if b > top else "eager_within_captured"] += 1
    exp["batch"] = [b for b in exp["batch"] if b is not None]
    _write(name, out, exp)


# --- vLLM -----------------------------------------------------------------------------------------

def vllm_v1(name: str, seed: int, n: int, sizes: list[int], absorbing: bool) -> None:
    """vLLM 0.22-style V1 log: APIServer / EngineCore tags, stats every 10 s, --cudagraph-metrics tables and
    VLLM_LOG_BATCHSIZE_INTERVAL forward times."""
    rng = random.Random(seed)
    top = max(sizes)
    t = START
    api, core = "(APIServer pid=4242)", "(EngineCore_DP0 pid=4377)"
    out: list[str] = []

    def p(tag: str, where: str) -> str:
        return f"{tag} INFO {t:%m-%d %H:%M:%S} [{where}]"

    exp = {"engine": "vllm", "version": "0.22.0", "capture_sizes": sizes, "max_captured": top, "graph": 0, "eager": 0,
           "eager_above_max": 0, "eager_within_captured": 0, "decode_lines": 0, "skipped_lines": 0,
           "absorbing": absorbing, "max_running_requests": 128}
    out.append(f"{p(api, 'api_server.py:1885')} vLLM API server version 0.22.0")
    out.append(f"{p(api, 'utils.py:253')} non-default args: {{'model_tag': 'Qwen/Qwen3-8B', 'model': 'Qwen/Qwen3-8B', "
               f"'max_num_seqs': 128, 'cudagraph_metrics': True}}")
    out.append(f"{p(core, 'core.py:93')} Initializing a V1 LLM engine (v0.22.0) with config: model='Qwen/Qwen3-8B', "
               f"speculative_config=None, tokenizer='Qwen/Qwen3-8B', dtype=torch.bfloat16, max_seq_len=40960, "
               f"tensor_parallel_size=1, enforce_eager=False, compilation_config={{'level': None, 'mode': 3, "
               f"'cudagraph_mode': <CUDAGraphMode.FULL_AND_PIECEWISE: (2, 1)>, 'cudagraph_num_of_warmups': 1, "
               f"'cudagraph_capture_sizes': {sorted(sizes, reverse=True)}, 'cudagraph_copy_inputs': False, "
               f"'max_cudagraph_capture_size': {top}, 'local_cache_dir': None}}")
    out.append(f"{p(core, 'gpu_model_runner.py:6279')} Profiling CUDA graph memory: PIECEWISE={len(sizes)} "
               f"(largest={top}), FULL={len(sizes)} (largest={top})")
    est = round(rng.uniform(0.3, 1.2), 2)
    out.append(f"{p(core, 'gpu_model_runner.py:6366')} Estimated CUDA graph memory: {est:.2f} GiB total")
    out.append(f"Capturing CUDA graphs (mixed prefill-decode, PIECEWISE): 100%|██████████| {len(sizes)}/{len(sizes)} "
               f"[00:03<00:00, 12.1it/s]")
    out.append(f"Capturing CUDA graphs (decode, FULL): 100%|██████████| {len(sizes)}/{len(sizes)} [00:02<00:00, 19.6it/s]")
    secs = rng.randint(4, 40)
    took = round(rng.uniform(0.3, 1.5), 2)
    t += timedelta(seconds=secs)
    out.append(f"{p(core, 'gpu_model_runner.py:6457')} Graph capturing finished in {secs} secs, took {took:.2f} GiB")
    out.append(f"{p(core, 'gpu_worker.py:619')} CUDA graph pool memory: {took:.2f} GiB (actual), {est:.2f} GiB "
               f"(estimated), difference: {abs(took - est):.2f} GiB ({100 * abs(took - est) / est:.1f}%).")
    exp["capture_seconds"] = float(secs)
    exp["capture_memory_mib"] = round(took * 1024, 6)
    exp["capture_mode"] = "FULL_AND_PIECEWISE"
    out.append(f"{p(api, 'launcher.py:44')} Route: /v1/chat/completions, Methods: POST")
    bs = batches(rng, n, 10.0, 4, top * 0.85, top, absorbing, 4)
    exp["batch"] = []
    fwd: dict[int, list[float]] = {}
    for i, b in enumerate(bs):
        t += timedelta(seconds=10)
        graph = b <= top
        ms = step_ms(b, graph)
        passes = int(10000 / ms)
        prompt = rng.choice([0.0, 0.0, round(rng.uniform(200, 4000), 1)])
        gen = b * 1000.0 / ms
        line = (f"{p(api, 'loggers.py:259')} Engine 000: Avg prompt throughput: {prompt:.1f} tokens/s, "
                f"Avg generation throughput: {gen:.1f} tokens/s, Running: {b} reqs, Waiting: {max(0, b - top) // 3} "
                f"reqs, GPU KV cache usage: {min(99.0, b * 0.6):.1f}%, Prefix cache hit rate: {rng.uniform(0, 60):.1f}%")
        if i == n // 2:
            out.append(line[: line.index("Running")])
            exp["skipped_lines"] += 1
            continue
        out.append(line)
        exp["batch"].append(b)
        exp["decode_lines"] += 1
        rows = []
        if graph:
            rows.append((b, bucket(b, sizes), bucket(b, sizes) - b, "FULL", passes))
            exp["graph"] += passes
        else:
            rows.append((b, b, 0, "NONE", passes))
            exp["eager"] += passes
            exp["eager_above_max"] += passes
        if prompt:
            rows.append((2048, 2048, 0, "NONE", 3))
            exp["eager"] += 3
            exp["eager_above_max"] += 3
        cells = [[str(x) for x in r] for r in rows]
        heads = ["Unpadded Tokens", "Padded Tokens", "Num Paddings", "Runtime Mode", "Count"]
        w = [max(len(h), *(len(c[j]) for c in cells)) for j, h in enumerate(heads)]
        table = ["**CUDAGraph Config Settings:**", "", "- Mode: CUDAGraphMode.FULL_AND_PIECEWISE",
                 f"- Capture sizes: {sorted(sizes)}", "", "**CUDAGraph Stats:**", "",
                 "| " + " | ".join(h.ljust(x) for h, x in zip(heads, w)) + " |",
                 "|" + "|".join("-" * (x + 2) for x in w) + "|"]
        table += ["| " + " | ".join(c.ljust(x) for c, x in zip(r, w)) + " |" for r in cells]
        out += [f"{p(api, 'cuda_graph.py:124')} {row}" for row in table]
        fwd.setdefault(b, []).append(ms)
        if i % 6 == 5:
            stats = sorted(((k, len(v), round(sorted(v)[len(v) // 2], 2)) for k, v in fwd.items() if len(v) > 1),
                           key=lambda x: x[1], reverse=True)
            if stats:
                out.append(f"{p(core, 'forward_context.py:384')} Batchsize forward time stats "
                           f"(batchsize, count, median_time(ms)): {stats}")
            fwd = {}
        if rng.random() < 0.2:
            out.append(f'{api} INFO:     127.0.0.1:{rng.randint(30000, 60000)} - "POST /v1/chat/completions HTTP/1.1" 200 OK')
    exp["eager_within_captured"] = exp["eager"] - exp["eager_above_max"]
    _write(name, out, exp)


def vllm_v0(name: str, seed: int, n: int) -> None:
    """vLLM 0.6.4 (V0): no brackets around file:line, stats every 5 s, no capture list in the log."""
    rng = random.Random(seed)
    t = START
    out: list[str] = []
    exp = {"engine": "vllm", "version": "0.6.4.post1", "capture_sizes": None, "max_captured": None, "graph": None,
           "eager": None, "decode_lines": 0, "skipped_lines": 0, "absorbing": None}
    out.append(f"INFO {t:%m-%d %H:%M:%S} api_server.py:585] vLLM API server version 0.6.4.post1")
    out.append(f"INFO {t:%m-%d %H:%M:%S} llm_engine.py:249] Initializing an LLM engine (v0.6.4.post1) with config: "
               f"model='meta-llama/Llama-3.1-8B-Instruct', speculative_config=None, tokenizer='meta-llama/Llama-3.1-8B-"
               f"Instruct', skip_tokenizer_init=False, tokenizer_mode=auto, revision=None, override_neuron_config=None, "
               f"tokenizer_revision=None, trust_remote_code=False, dtype=torch.bfloat16, max_seq_len=8192, "
               f"download_dir=None, load_format=LoadFormat.AUTO, tensor_parallel_size=1, pipeline_parallel_size=1, "
               f"disable_custom_all_reduce=False, quantization=None, enforce_eager=False, kv_cache_dtype=auto, "
               f"seed=0, served_model_name=meta-llama/Llama-3.1-8B-Instruct, num_scheduler_steps=1, "
               f"chunked_prefill_enabled=False multi_step_stream_outputs=True, enable_prefix_caching=False, "
               f"use_async_output_proc=True, use_cached_outputs=True, mm_processor_kwargs=None, pooler_config=None)")
    out.append(f"INFO {t:%m-%d %H:%M:%S} model_runner.py:1400] Capturing cudagraphs for decoding. This may lead to "
               f"unexpected consequences if the model is not static. To run the model in eager mode, set "
               f"'enforce_eager=True' or use '--enforce-eager' in the CLI.")
    secs, took = rng.randint(5, 20), round(rng.uniform(0.2, 0.9), 2)
    t += timedelta(seconds=secs)
    out.append(f"INFO {t:%m-%d %H:%M:%S} model_runner.py:1523] Graph capturing finished in {secs} secs, took "
               f"{took:.2f} GiB")
    exp["capture_seconds"], exp["capture_memory_mib"] = float(secs), round(took * 1024, 6)
    exp["batch"] = []
    for i, b in enumerate(batches(rng, n, 5.0, 3, 50, None, False, 0)):
        t += timedelta(seconds=5)
        ms = step_ms(b, True)
        line = (f"INFO {t:%m-%d %H:%M:%S} metrics.py:449] Avg prompt throughput: "
                f"{rng.choice([0.0, rng.uniform(100, 3000)]):.1f} tokens/s, Avg generation throughput: "
                f"{b * 1000 / ms:.1f} tokens/s, Running: {b} reqs, Swapped: 0 reqs, Pending: 0 reqs, "
                f"GPU KV cache usage: {b * 0.4:.1f}%, CPU KV cache usage: 0.0%.")
        out.append(line)
        exp["batch"].append(b)
        exp["decode_lines"] += 1
        if rng.random() < 0.3:
            out.append(f'INFO:     127.0.0.1:{rng.randint(30000, 60000)} - "POST /v1/completions HTTP/1.1" 200 OK')
    _write(name, out, exp)


# --- TensorRT-LLM ---------------------------------------------------------------------------------

def trtllm(name: str, seed: int, n: int, sizes: list[int]) -> None:
    """TensorRT-LLM PyTorch backend with print_iter_log: one line per iteration, graph warm-up per size."""
    rng = random.Random(seed)
    top = max(sizes)
    t = START
    out: list[str] = ["[TensorRT-LLM] TensorRT-LLM version: 1.0.0"]

    def p() -> str:
        return f"[{t:%m/%d/%Y-%H:%M:%S}] [TRT-LLM] [I]"

    out.append(f"{p()} cuda_graph_config=CudaGraphConfig(batch_sizes=None, max_batch_size={top}, enable_padding=True)")
    out.append(f"{p()} Creating CUDA graph instances for {len(sizes)} batch sizes.")
    for b in sorted(sizes, reverse=True):
        out.append(f"{p()} Run generation only CUDA graph warmup for batch size={b}, draft_len=0")
    exp = {"engine": "tensorrt_llm", "version": "1.0.0", "capture_sizes": sizes, "max_captured": top, "graph": None,
           "eager": None, "decode_lines": 0, "prefill_lines": 0, "skipped_lines": 0, "absorbing": False,
           "capture_seconds": None, "capture_memory_mib": None}
    exp["batch"] = []
    bs = batches(rng, n, 0.03, 8, top * 0.8, top, False, 6)
    prev = "N/A"
    for i, b in enumerate(bs):
        ctx = 1 if rng.random() < 0.05 else 0
        ms = step_ms(b, b <= top)
        t += timedelta(milliseconds=ms + 1.0)
        sched = b + ctx
        gen_tokens = bucket(b, sizes) if b <= top else b
        stamp = f"{t:%Y-%m-%d %H:%M:%S}"
        line = (f"{p()} iter = {i}, global_rank = 0, rank = 0, currank_total_requests = {sched}/{sched}, "
                f"host_step_time = {ms + rng.uniform(0.5, 2):.3f}ms, prev_device_step_time = {prev}, "
                f"timestamp = {stamp}, num_scheduled_requests: {sched}, states = {{'num_ctx_requests': {ctx}, "
                f"'num_ctx_tokens': {ctx * rng.randint(100, 3000)}, 'num_generation_tokens': {gen_tokens}}}")
        prev = f"{ms:.3f}ms"
        if i == n // 2:
            out.append(line[: line.index("num_scheduled")])
            exp["skipped_lines"] += 1
            continue
        out.append(line)
        if ctx:
            exp["prefill_lines"] += 1
        else:
            exp["decode_lines"] += 1
            exp["batch"].append(b)
    _write(name, out, exp)


# --- /metrics scrapes ----------------------------------------------------------------------------

def sglang_metrics(name: str, seed: int, n: int, top: int) -> None:
    rng = random.Random(seed)
    g = e = 0.0
    out: list[str] = []
    bs = batches(rng, n, 15.0, 6, top * 0.9, top, True, 0)
    hist_buckets = [0.002, 0.004, 0.006, 0.008, 0.01, 0.015, 0.02, 0.025, 0.03, 0.035, 0.04, 0.06, 0.08, 0.1]
    itl = [0.0] * (len(hist_buckets) + 1)
    itl_sum, first = 0.0, None  # seconds between tokens, summed; the first scrape's (sum, count)
    t = START
    for b in bs:
        t += timedelta(seconds=15)
        graph = b <= top
        steps = 15000 / step_ms(b, graph)
        if graph:
            g += round(steps)
        else:
            e += round(steps)
        ms = step_ms(b, graph) / 1000
        k = next((j for j, x in enumerate(hist_buckets) if ms <= x), len(hist_buckets))
        for j in range(k, len(itl)):
            itl[j] += round(steps) * b
        itl_sum += round(steps) * b * ms  # each of the step's b tokens waited one step
        first = first or (itl_sum, itl[-1])
        lab = 'engine_type="unified",model_name="meta-llama/Llama-3.1-8B-Instruct",pp_rank="0",tp_rank="0"'
        out.append(f"# scraped at {t:%Y-%m-%dT%H:%M:%SZ}")
        out += ["# HELP sglang:num_running_reqs The number of running requests.",
                "# TYPE sglang:num_running_reqs gauge", f"sglang:num_running_reqs{{{lab}}} {float(b)}",
                "# HELP sglang:num_queue_reqs The number of requests in the waiting queue.",
                "# TYPE sglang:num_queue_reqs gauge", f"sglang:num_queue_reqs{{{lab}}} {float(max(0, b - top) // 4)}",
                "# HELP sglang:is_cuda_graph Whether the batch is using CUDA graph.",
                "# TYPE sglang:is_cuda_graph gauge", f"sglang:is_cuda_graph{{{lab}}} {1.0 if graph else 0.0}",
                "# HELP sglang:cuda_graph_passes_total Total number of forward passes categorized by CUDA graph.",
                "# TYPE sglang:cuda_graph_passes_total counter",
                f'sglang:cuda_graph_passes_total{{{lab},mode="decode_cuda_graph"}} {g}',
                f'sglang:cuda_graph_passes_total{{{lab},mode="decode_none"}} {e}',
                "# HELP sglang:inter_token_latency_seconds Histogram of inter-token latency in seconds.",
                "# TYPE sglang:inter_token_latency_seconds histogram"]
        out += [f'sglang:inter_token_latency_seconds_bucket{{{lab},le="{x}"}} {itl[j]}'
                for j, x in enumerate(hist_buckets)]
        out += [f'sglang:inter_token_latency_seconds_bucket{{{lab},le="+Inf"}} {itl[-1]}',
                f"sglang:inter_token_latency_seconds_sum{{{lab}}} {itl_sum!r}",
                f"sglang:inter_token_latency_seconds_count{{{lab}}} {itl[-1]}"]
    exp = {"engine": "sglang", "kind": "metrics", "scrapes": n, "graph": int(g), "eager": int(e), "batch": bs,
           "last_running": float(bs[-1]),
           "inter_token_mean_ms": 1e3 * (itl_sum - first[0]) / (itl[-1] - first[1]),
           "inter_token_tokens": int(itl[-1] - first[1]),
           # each interval's tokens waited one step at its scrape's batch
           "inter_token_ms_by_batch": {str(b): step_ms(b, b <= top) for b in sorted(set(bs[1:]))}}
    _write(name, out, exp)


def vllm_metrics(name: str, seed: int, n: int) -> None:
    rng = random.Random(seed)
    buckets = [1, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384]
    counts = [0.0] * (len(buckets) + 1)
    itl_buckets = [0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0,
                   80.0]  # vllm/v1/metrics/buckets.py
    itl = [0.0] * (len(itl_buckets) + 1)
    gen = itl_sum = 0.0
    first = None  # the first scrape's (sum, count) of the inter-token histogram
    out: list[str] = []
    bs = batches(rng, n, 15.0, 4, 60, None, False, 0)
    for b in bs:
        steps = round(15000 / step_ms(b, True))
        gen += steps * b
        k = next(j for j, x in enumerate(buckets) if b <= x)
        for j in range(k, len(counts)):
            counts[j] += steps
        sec = step_ms(b, True) / 1000  # each of the step's b tokens waited one step
        k = next((j for j, x in enumerate(itl_buckets) if sec <= x), len(itl_buckets))
        for j in range(k, len(itl)):
            itl[j] += steps * b
        itl_sum += steps * b * sec
        first = first or (itl_sum, itl[-1])
        lab = 'engine="0",model_name="Qwen/Qwen3-8B"'
        out += ["# HELP vllm:num_requests_running Number of requests in model execution batches.",
                "# TYPE vllm:num_requests_running gauge", f"vllm:num_requests_running{{{lab}}} {float(b)}",
                "# HELP vllm:generation_tokens_total Number of generation tokens processed.",
                "# TYPE vllm:generation_tokens_total counter", f"vllm:generation_tokens_total{{{lab}}} {gen}",
                "# HELP vllm:iteration_tokens_total Histogram of number of tokens per engine_step.",
                "# TYPE vllm:iteration_tokens_total histogram"]
        out += [f'vllm:iteration_tokens_total_bucket{{{lab},le="{float(x)}"}} {counts[j]}' for j, x in enumerate(buckets)]
        out += [f'vllm:iteration_tokens_total_bucket{{{lab},le="+Inf"}} {counts[-1]}',
                f"vllm:iteration_tokens_total_count{{{lab}}} {counts[-1]}",
                f"vllm:iteration_tokens_total_sum{{{lab}}} {gen}",
                "# HELP vllm:inter_token_latency_seconds Histogram of inter-token latency in seconds.",
                "# TYPE vllm:inter_token_latency_seconds histogram"]
        out += [f'vllm:inter_token_latency_seconds_bucket{{{lab},le="{x}"}} {itl[j]}' for j, x in enumerate(itl_buckets)]
        out += [f'vllm:inter_token_latency_seconds_bucket{{{lab},le="+Inf"}} {itl[-1]}',
                f"vllm:inter_token_latency_seconds_count{{{lab}}} {itl[-1]}",
                f"vllm:inter_token_latency_seconds_sum{{{lab}}} {itl_sum!r}"]
    _write(name, out, {"engine": "vllm", "kind": "metrics", "scrapes": n, "graph": None, "eager": None, "batch": bs,
                       "last_running": float(bs[-1]),
                       "inter_token_mean_ms": 1e3 * (itl_sum - first[0]) / (itl[-1] - first[1]),
                       "inter_token_tokens": int(itl[-1] - first[1]),
                       "inter_token_ms_by_batch": {str(b): step_ms(b, True) for b in sorted(set(bs[1:]))}})


def main() -> None:
    sglang_sizes = [1, 2, 4, 8, 12, 16, 24, 32]
    sglang("sglang-0.5.9-tp2-ceiling.log.gz", "0.5.9", 1, 6000, sglang_sizes, True, 0, 2)
    sglang("sglang-0.4.6-healthy.log.gz", "0.4.6", 2, 5000, [1, 2, 4, 8, 16, 24, 32, 40, 48, 56, 64], False, 8, 1)
    vllm_v1("vllm-0.22-ceiling.log.gz", 3, 1500, [1, 2, 4, 8, 16, 24, 32, 40, 48, 56, 64], True)
    vllm_v0("vllm-0.6.4-healthy.log.gz", 4, 2000)
    trtllm("tensorrt_llm-1.0-healthy.log.gz", 5, 20000, [1, 2, 4, 8, 16, 32, 64, 128])
    sglang_metrics("sglang-metrics.prom.gz", 6, 480, 32)
    vllm_metrics("vllm-metrics.prom.gz", 7, 480)


if __name__ == "__main__":
    main()
