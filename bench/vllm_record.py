"""Record a real vLLM V1 engine on the GPU: the torch-profiler traces vLLM itself writes (its own profiler
config, its own step annotations), the engine's log, and unprofiled engine-step times per batch size.

    python bench/vllm_record.py --model-config traces/.../configs/llama-3.2-3b-like.json --out OUT

The model's weights are vLLM's dummy weights (``load_format="dummy"``: the kernels and their shapes are the
model's; the values are random) and prompts are token ids (``skip_tokenizer_init``): the machine that records has
no network. Three parts, all with vLLM's defaults otherwise (V1 engine, chunked prefill, FULL_AND_PIECEWISE
CUDA graphs at its default capture sizes):

1. ``truth``: per batch size, requests of the same prompt and output length run alone, each engine step's wall
   time measured unprofiled (``time.perf_counter`` around ``LLMEngine.step``); the median decode step per size.
2. ``shrinking``: 48 requests at once (``--requests``), outputs of 4-64 tokens (``--max-out``): the decode batch shrinks as they finish; vLLM's
   torch profiler over the whole run (``LLM.start_profile`` / ``stop_profile``).
3. ``arrivals``: 16 requests, then 4 more every 6 steps: chunked prefills ride in the decode steps (mixed steps).
4. ``interleaved`` (``--interleaved BS``; ``--only-interleaved`` skips parts 1-3): BS requests decode at a constant
   batch while unprofiled and profiled steps alternate: per block ``--unprofiled`` steps timed with the profiler off,
   then ``--profiled`` steps inside ``start_profile`` / ``stop_profile`` (one trace per block), and the next
   block's unprofiled steps after the trace is written. Each profiled step has the unprofiled steps just before
   and after it as its truth (the host's speed can change between runs and within one: measured where it is
   profiled). Writes ``interleaved_<block>_0.pt.trace.json.gz`` and ``interleaved.json``.

Writes into OUT: ``<part>.pt.trace.json.gz`` (the profiler's files, renamed), ``truth.json``, ``vllm.log`` is
the caller's (stdout and stderr of this script).
"""
from __future__ import annotations

import argparse
import glob
import json
import os
import random
import shutil
import statistics
import sys
import time


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model-config", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--sizes", default="1,2,4,8,16,24,32,48,64")
    ap.add_argument("--max-model-len", type=int, default=4096)
    ap.add_argument("--tp", type=int, default=1)
    ap.add_argument("--enforce-eager", action="store_true", help="vLLM's --enforce-eager: no CUDA graphs, no compile")
    ap.add_argument("--no-stack", action="store_true", help="the profiler without Python stacks (with_stack off)")
    ap.add_argument("--tag", default="", help="a prefix for the files this run writes")
    ap.add_argument("--requests", type=int, default=48, help="shrinking: requests at once")
    ap.add_argument("--max-out", type=int, default=64, help="shrinking: the longest output (tokens)")
    ap.add_argument("--no-arrivals", action="store_true", help="skip part 3")
    ap.add_argument("--interleaved", type=int, default=0, metavar="BS", help="part 4 at this batch size")
    ap.add_argument("--only-interleaved", action="store_true", help="part 4 alone")
    ap.add_argument("--blocks", type=int, default=3, help="part 4: profiled blocks")
    ap.add_argument("--unprofiled", type=int, default=16, help="part 4: unprofiled steps around each block")
    ap.add_argument("--profiled", type=int, default=6, help="part 4: profiled steps per block")
    args = ap.parse_args()
    tag = f"{args.tag}_" if args.tag else ""

    from vllm import LLM, SamplingParams  # noqa: PLC0415 (the recording machine's vLLM)
    from vllm.inputs import TokensPrompt  # noqa: PLC0415
    import vllm  # noqa: PLC0415

    os.makedirs(args.out, exist_ok=True)
    model_dir = os.path.join(args.out, "model")
    os.makedirs(model_dir, exist_ok=True)
    shutil.copy(args.model_config, os.path.join(model_dir, "config.json"))
    prof_dir = os.path.abspath(os.path.join(args.out, f"{tag}profiles"))
    llm = LLM(model=model_dir, load_format="dummy", skip_tokenizer_init=True, dtype="bfloat16",
              max_model_len=args.max_model_len, gpu_memory_utilization=0.6, max_num_seqs=64, seed=0,
              tensor_parallel_size=args.tp, enforce_eager=args.enforce_eager,
              profiler_config={"profiler": "torch", "torch_profiler_dir": prof_dir,
                               "torch_profiler_with_stack": not args.no_stack})
    engine = llm.llm_engine
    rng = random.Random(0)
    vocab = 32000

    def prompt(n: int) -> TokensPrompt:
        return TokensPrompt(prompt_token_ids=[rng.randrange(10, vocab) for _ in range(n)])

    def params(n: int) -> SamplingParams:
        return SamplingParams(max_tokens=n, ignore_eos=True, temperature=0.0, detokenize=False)

    llm.generate([prompt(64) for _ in range(8)], params(8), use_tqdm=False)  # warm-up

    # 1. unprofiled engine steps per batch size
    rows = []
    counter = 0
    for bs in [] if args.only_interleaved else [int(s) for s in args.sizes.split(",")]:
        for _ in range(bs):
            engine.add_request(f"t{counter}", prompt(128), params(40))
            counter += 1
        times = []
        while engine.has_unfinished_requests():
            t = time.perf_counter()
            engine.step()
            times.append((time.perf_counter() - t) * 1e6)
        decode = times[3:-2]  # past the prefill steps and the last (finishing) ones
        rows.append({"batch_size": bs, "engine_step_us": statistics.median(decode), "steps": len(decode),
                     "all_step_us": [round(x, 1) for x in times]})
        print(f"truth bs {bs}: median engine step {statistics.median(decode):.1f} us over {len(decode)} steps",
              flush=True)
    with open(os.path.join(args.out, f"{tag}truth.json"), "w") as f:
        json.dump({"vllm": vllm.__version__, "model_config": os.path.basename(args.model_config),
                   "enforce_eager": args.enforce_eager, "with_stack": not args.no_stack,
                   "prompt_tokens": 128, "output_tokens": 40, "rows": rows}, f, indent=1)

    def collect(name: str) -> None:
        def found():
            return sorted(glob.glob(os.path.join(prof_dir, "**", "*.pt.trace.json*"), recursive=True),
                          key=os.path.getmtime)
        sizes, deadline = None, time.time() + 180  # the worker writes its file after stop: wait until it settles
        while time.time() < deadline:
            now = [os.path.getsize(p) for p in found()]
            if now and now == sizes:
                break
            sizes = now
            time.sleep(3)
        files = found()
        for i, p in enumerate(files):
            dst = os.path.join(args.out, f"{tag}{name}_{i}.pt.trace.json.gz" if p.endswith(".gz")
                               else f"{tag}{name}_{i}.json")
            shutil.move(p, dst)
            print(f"{name}: {p} -> {dst} ({os.path.getsize(dst)} bytes)", flush=True)

    if args.interleaved:
        interleaved(args, llm, engine, prompt, params, collect, tag)
    if args.only_interleaved:
        return 0
    # 2. one batch shrinking as its requests finish
    llm.start_profile()
    lens = [rng.randrange(32, 1024) for _ in range(args.requests)]
    outs = [rng.randrange(4, args.max_out) for _ in range(args.requests)]
    for i, (p, o) in enumerate(zip(lens, outs)):
        engine.add_request(f"s{i}", prompt(p), params(o))
    n = 0
    while engine.has_unfinished_requests():
        engine.step()
        n += 1
    llm.stop_profile()
    print(f"shrinking: {n} engine steps; outputs {sorted(outs)}", flush=True)
    collect("shrinking")

    if args.no_arrivals:
        return 0
    # 3. arrivals during decode: chunked prefills in decode steps
    llm.start_profile()
    for i in range(16):
        engine.add_request(f"a{i}", prompt(rng.randrange(64, 512)), params(48))
    n, added = 0, 16
    while engine.has_unfinished_requests():
        if n and n % 6 == 0 and added < 40:
            for _ in range(4):
                engine.add_request(f"a{added}", prompt(rng.randrange(256, 2048)), params(24))
                added += 1
        engine.step()
        n += 1
    llm.stop_profile()
    print(f"arrivals: {n} engine steps, {added} requests", flush=True)
    collect("arrivals")
    return 0


def interleaved(args, llm, engine, prompt, params, collect, tag: str) -> None:  # noqa: PLR0913
    """Part 4: a constant batch, unprofiled and profiled steps alternating (see the module docstring)."""
    bs, blocks, u, p = args.interleaved, args.blocks, args.unprofiled, args.profiled
    for i in range(bs):
        engine.add_request(f"i{i}", prompt(128), params(8 + (blocks + 1) * (u + p + 2) + 16))

    def timed(n: int) -> list[float]:
        out = []
        for _ in range(n):
            t = time.perf_counter()
            engine.step()
            out.append(round((time.perf_counter() - t) * 1e6, 1))
        return out

    timed(4)  # the prefill and the first decode steps
    record = {"batch_size": bs, "with_stack": not args.no_stack, "enforce_eager": args.enforce_eager, "blocks": []}
    before = timed(u)
    for b in range(blocks):
        llm.start_profile()
        prof = timed(p)
        llm.stop_profile()
        timed(2)  # the trace being written: not a step of either kind
        after = timed(u)
        record["blocks"].append({"unprofiled_before_us": before, "profiled_us": prof, "unprofiled_after_us": after,
                                 "trace": f"{tag}interleaved_{b}.pt.trace.json.gz"})
        print(f"interleaved block {b}: unprofiled {statistics.median(before):.0f} / {statistics.median(after):.0f} us "
              f"around profiled {statistics.median(prof):.0f} us", flush=True)
        before = after
    while engine.has_unfinished_requests():
        engine.step()
    # the traces only now: V1's engine core decodes in its own process, so waiting for a file mid-run would let the
    # requests finish unstepped; one file per block, in time order
    collect("interleaved")
    with open(os.path.join(args.out, f"{tag}interleaved.json"), "w") as f:
        json.dump(record, f, indent=1)


if __name__ == "__main__":
    sys.exit(main())
