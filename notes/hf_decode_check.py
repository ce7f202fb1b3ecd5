"""Held-out style check: HuggingFace transformers' own decode loop (generate), eager and
torch.compile (static cache, reduce-overhead = CUDA graph trees), profiled and unprofiled.

Run on a GPU machine: python3 notes/hf_decode_check.py OUTDIR. Writes one gzipped Kineto
trace per (mode, batch size), the profiler stepped once per generated token by a stopping
criterion (no record_function annotation), plus truth.json with unprofiled per-token times
(difference of two generate lengths, so prefill cancels).
"""
from __future__ import annotations

import gzip
import json
import os
import shutil
import sys
import time

import torch
from torch.profiler import ProfilerActivity, profile, schedule
from transformers import LlamaConfig, LlamaForCausalLM, StoppingCriteria, StoppingCriteriaList

out = sys.argv[1]
os.makedirs(out, exist_ok=True)
torch.manual_seed(0)
cfg = LlamaConfig(hidden_size=1024, intermediate_size=4096, num_hidden_layers=8, num_attention_heads=16,
                  num_key_value_heads=4, vocab_size=32000, max_position_embeddings=2048)
model = LlamaForCausalLM(cfg).to("cuda", torch.bfloat16).eval()
rows = []


class Marker(StoppingCriteria):
    def __init__(self, prof):
        self.prof = prof

    def __call__(self, input_ids, scores, **kw):
        if self.prof is not None:
            self.prof.step()
        return torch.zeros(input_ids.shape[0], dtype=torch.bool, device=input_ids.device)


def gen(bs, n, mode, prof=None):
    ids = torch.randint(0, 32000, (bs, 32), device="cuda")
    kw = dict(max_new_tokens=n, min_new_tokens=n, do_sample=False, pad_token_id=0,
              stopping_criteria=StoppingCriteriaList([Marker(prof)]))
    if mode == "static-compiled":
        kw["cache_implementation"] = "static"
    with torch.no_grad():
        return model.generate(ids, **kw)


def per_token_us(bs, mode):
    for n in (8, 8):
        gen(bs, n, mode)
    t = {}
    for n in (16, 48):
        vals = []
        for _ in range(3):
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            gen(bs, n, mode)
            torch.cuda.synchronize()
            vals.append(time.perf_counter() - t0)
        t[n] = sorted(vals)[1]
    return (t[48] - t[16]) / 32 * 1e6


for mode in ("eager", "static-compiled"):
    for bs in (1, 16):
        t0 = time.time()
        try:
            us = per_token_us(bs, mode)
            name = f"hf_llama_{mode}_bs{bs}"
            path = os.path.join(out, name + ".json")
            # With a schedule, the trace exists only when on_trace_ready fires at the cycle's end.
            with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA], record_shapes=True,
                         schedule=schedule(wait=2, warmup=2, active=5, repeat=1),
                         on_trace_ready=lambda p: p.export_chrome_trace(path)) as prof:
                gen(bs, 14, mode, prof)
            with open(path, "rb") as src, gzip.open(path + ".gz", "wb") as dst:
                shutil.copyfileobj(src, dst)
            os.remove(path)
            rows.append({"mode": mode, "bs": bs, "unprofiled_token_us": round(us, 1), "trace": name + ".json.gz",
                         "wall_s": round(time.time() - t0, 1)})
            print(rows[-1], flush=True)
        except Exception as exc:  # report and go on with the next configuration
            print("FAILED", mode, bs, repr(exc)[:500], flush=True)
json.dump({"torch": torch.__version__, "gpu": torch.cuda.get_device_name(), "rows": rows},
          open(os.path.join(out, "truth.json"), "w"), indent=1)
