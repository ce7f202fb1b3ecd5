"""Held-out check of ``record --hf-config``: transformers' own decode step timed by a plain loop, no harness code.

Run on a GPU machine: ``python3 notes/hf_independent_check.py OUT.json CONFIG.json [CONFIG.json ...]
[--sizes 1,8,64,128] [--compiled-sizes 8,64] [--compiled-configs NAME,...]``.

Per config and batch size, the way a transformers user decodes with a static cache: a fresh
``StaticCache(config, max_cache_len=512)`` at that batch, a prefill of 128 random tokens, then
one token per row per forward (``model(input_ids=next, past_key_values=cache)``, greedy next token
from the logits). Timed with CUDA events around each step, steps issued back to back:

* ``eager_us``: median of 40 eager steps after 5 untimed ones;
* ``graph_us``: the same forward + argmax captured once with ``torch.cuda.graph`` (the cache's own
  device-side position counter advances inside the graph), median of 40 replays;
* ``compiled_graph_us`` (``--compiled-sizes``): ``torch.compile(model)`` (default mode), then the
  same capture of the compiled forward.

Nothing from ``analyzer/`` is imported: the cache is transformers' own at each batch size (not the
harness's views of one max-batch cache), positions advance by transformers' own counter (no wrap),
the prompt is a real prefill (not random cache values). Writes ``OUT.json`` and prints a table.
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import time

import torch
import transformers

CONTEXT, PREFILL, WARM, STEPS = 512, 128, 5, 40


def build(path: str):
    cfg = json.load(open(path))
    config = transformers.AutoConfig.for_model(cfg["model_type"], **{k: v for k, v in cfg.items()
                                                                     if k != "model_type"})
    torch.manual_seed(0)
    with torch.device("cuda"):
        model = transformers.AutoModelForCausalLM.from_config(config, dtype=torch.bfloat16,
                                                              attn_implementation="sdpa")
    return model.requires_grad_(False).eval()


def timed(fn, n: int) -> float:
    ev = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(n)]
    torch.cuda.synchronize()
    for a, b in ev:
        a.record()
        fn()
        b.record()
    torch.cuda.synchronize()
    return statistics.median(a.elapsed_time(b) * 1e3 for a, b in ev)


def measure(model, forward, bs: int, graph: bool) -> float:
    cache = transformers.StaticCache(config=model.config, max_cache_len=CONTEXT)
    vocab = model.config.get_text_config().vocab_size
    ids = torch.randint(0, vocab, (bs, PREFILL), device="cuda")
    with torch.no_grad():
        out = model(input_ids=ids, past_key_values=cache, use_cache=True)
    nxt = out.logits[:, -1:].argmax(-1)

    def step():
        o = forward(input_ids=nxt, past_key_values=cache, use_cache=True)
        nxt.copy_(o.logits[:, -1:].argmax(-1))

    for _ in range(WARM):
        step()
    if not graph:
        return timed(step, STEPS)
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        step()
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        step()
    for _ in range(WARM):
        g.replay()
    us = timed(g.replay, STEPS)
    del g
    return us


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("configs", nargs="+")
    ap.add_argument("--sizes", default="1,8,64,128")
    ap.add_argument("--compiled-sizes", default="")
    ap.add_argument("--compiled-configs", default="", help="config names (file stems) to compile; default all")
    a = ap.parse_args()
    sizes = [int(x) for x in a.sizes.split(",")]
    csizes = [int(x) for x in a.compiled_sizes.split(",") if x]
    cnames = {x for x in a.compiled_configs.split(",") if x}
    rows = []
    for path in a.configs:
        name = path.rsplit("/", 1)[-1].removesuffix(".json")
        model = build(path)
        for bs in sizes:
            for mode in ("eager", "graph"):
                try:
                    us = measure(model, model, bs, mode == "graph")
                except Exception as exc:  # report and go on
                    print(f"{name} bs={bs} {mode}: FAILED {type(exc).__name__}: {str(exc)[:200]}", flush=True)
                    continue
                rows.append({"config": name, "batch_size": bs, "mode": mode, "us": round(us, 1)})
                print(rows[-1], flush=True)
        if csizes and (not cnames or name in cnames):
            compiled = torch.compile(model)
            for bs in csizes:
                t0 = time.perf_counter()
                try:
                    us = measure(model, compiled, bs, True)
                except Exception as exc:
                    print(f"{name} bs={bs} compiled graph: FAILED {type(exc).__name__}: {str(exc)[:200]}", flush=True)
                    continue
                rows.append({"config": name, "batch_size": bs, "mode": "compiled_graph", "us": round(us, 1),
                             "wall_s": round(time.perf_counter() - t0, 1)})
                print(rows[-1], flush=True)
        del model
        torch.cuda.empty_cache()
    json.dump({"torch": torch.__version__, "transformers": transformers.__version__,
               "gpu": torch.cuda.get_device_name(), "context": CONTEXT, "prefill": PREFILL, "steps": STEPS,
               "rows": rows}, open(a.out, "w"), indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
