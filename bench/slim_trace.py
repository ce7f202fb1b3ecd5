"""Shrink a Kineto trace for the repository without changing what launchgap reads from it.

    python bench/slim_trace.py SRC.json.gz DST.json.gz [--steps N --marker PREFIX]

Keeps every event; drops the args keys the loaders never read (``launchgap.loaders.kineto``'s ``_Args`` and the C
scan read only correlation, device, stream, graph id, kernel, Input Dims, Call stack, grid, block, registers per
thread, shared memory) and the ``ac2g`` flow events whose correlation id a GPU op's own args already carry (the
loader uses a flow only where the args lack it); writes compact JSON at gzip level 9. Check the result with
``launchgap analyze`` / ``plan --format json`` on both files (the reports must match but for the path).

``--steps N --marker PREFIX`` also keeps only the trace's first N steps (steps begin at the host annotations named
PREFIX...: vLLM's ``execute_``): host events from the (N+1)-th step's start on go, and with them the GPU ops (and
their flows) those host events launched, and the GPU-side annotations of the steps dropped. A trace too large for
the repository loses its last steps; those it keeps read as before.
"""
from __future__ import annotations

import argparse
import gzip
import json

#: The args keys the Kineto loaders read (schema.py ``_Args``; _scan.c's KEY_IS list).
READ_ARGS = frozenset({"correlation", "device", "stream", "graph id", "kernel", "Input Dims", "Call stack", "grid",
                       "block", "registers per thread", "shared memory"})


def slim(doc: dict) -> dict:
    events = doc["traceEvents"]
    said = {e["args"]["correlation"] for e in events
            if e.get("cat") not in ("ac2g", "cuda_runtime", "cuda_driver") and isinstance(e.get("args"), dict)
            and "correlation" in e["args"]}
    out = []
    for e in events:
        if e.get("cat") == "ac2g" and e.get("id") in said:
            continue
        if e.get("ph") == "X" and isinstance(e.get("args"), dict):
            e["args"] = {k: v for k, v in e["args"].items() if k in READ_ARGS}
        out.append(e)
    return {**doc, "traceEvents": out}


GPU_OPS = frozenset({"kernel", "gpu_memcpy", "gpu_memset"})


def first_steps(doc: dict, n: int, prefix: str) -> dict:
    """``doc`` with its first ``n`` steps only (see the module docstring)."""
    events = doc["traceEvents"]

    def marks(cat: str) -> list[float]:
        return sorted(e["ts"] for e in events if e.get("cat") == cat and str(e.get("name", "")).startswith(prefix))

    host, gpu = marks("user_annotation"), marks("gpu_user_annotation")
    if len(host) <= n:
        return doc
    cut, gpu_cut = host[n], gpu[n] if len(gpu) > n else float("inf")
    launched = {e["args"]["correlation"] for e in events
                if e.get("cat") in ("cuda_runtime", "cuda_driver") and e["ts"] < cut
                and isinstance(e.get("args"), dict) and "correlation" in e["args"]}

    def kept(e: dict) -> bool:
        cat = e.get("cat")
        if cat in GPU_OPS:
            return (e.get("args") or {}).get("correlation") in launched
        if cat == "ac2g":
            return e.get("id") in launched
        if cat == "gpu_user_annotation":
            return e["ts"] < gpu_cut
        return e.get("ph") == "M" or "ts" not in e or e["ts"] < cut

    return {**doc, "traceEvents": [e for e in events if kept(e)]}


def main(src: str, dst: str, steps: int | None = None, marker: str = "execute_") -> None:
    doc = slim(json.loads(gzip.decompress(open(src, "rb").read())))
    if steps is not None:
        doc = first_steps(doc, steps, marker)
    with gzip.open(dst, "wt", compresslevel=9) as f:
        json.dump(doc, f, separators=(",", ":"))


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("src")
    ap.add_argument("dst")
    ap.add_argument("--steps", type=int, help="keep the first N steps only")
    ap.add_argument("--marker", default="execute_", help="the steps' host annotations begin with this")
    a = ap.parse_args()
    main(a.src, a.dst, a.steps, a.marker)
