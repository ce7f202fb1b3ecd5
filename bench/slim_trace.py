"""Shrink a Kineto trace for the repository without changing what launchgap reads from it.

    python bench/slim_trace.py SRC.json.gz DST.json.gz

Keeps every event; drops the args keys the loaders never read (``launchgap.loaders.kineto``'s ``_Args`` and the C
scan read only correlation, device, stream, graph id, kernel, Input Dims, Call stack, grid, block, registers per
thread, shared memory) and the ``ac2g`` flow events whose correlation id a GPU op's own args already carry (the
loader uses a flow only where the args lack it); writes compact JSON at gzip level 9. Check the result with
``launchgap analyze`` / ``plan --format json`` on both files (the reports must match but for the path).
"""
from __future__ import annotations

import gzip
import json
import sys

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


def main(src: str, dst: str) -> None:
    doc = slim(json.loads(gzip.decompress(open(src, "rb").read())))
    with gzip.open(dst, "wt", compresslevel=9) as f:
        json.dump(doc, f, separators=(",", ":"))


if __name__ == "__main__":
    main(*sys.argv[1:3])
