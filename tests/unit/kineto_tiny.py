"""Hand-built Kineto traces for unit tests: a few events, times in microseconds."""
from __future__ import annotations

import gzip
import json
from pathlib import Path

HOST_PID = 100
HOST_TID = 100


def kernel(ts: float, dur: float, corr: int | None, name: str = "k", stream: int = 7, device: int = 0) -> dict:
    args = {"device": device, "stream": stream}
    if corr is not None:
        args["correlation"] = corr
    return {"ph": "X", "cat": "kernel", "name": name, "pid": device, "tid": stream, "ts": ts, "dur": dur,
            "args": args}


def launch(ts: float, dur: float, corr: int, name: str = "cudaLaunchKernel", tid: int = HOST_TID) -> dict:
    return {"ph": "X", "cat": "cuda_runtime", "name": name, "pid": HOST_PID, "tid": tid, "ts": ts, "dur": dur,
            "args": {"correlation": corr}}


def runtime(ts: float, dur: float, name: str, corr: int = 10_000) -> dict:
    return launch(ts, dur, corr, name=name)


def ann(name: str, ts: float, dur: float, tid: int = HOST_TID) -> dict:
    return {"ph": "X", "cat": "user_annotation", "name": name, "pid": HOST_PID, "tid": tid, "ts": ts, "dur": dur}


def cpu_op(name: str, ts: float, dur: float, dims: list | None = None) -> dict:
    e = {"ph": "X", "cat": "cpu_op", "name": name, "pid": HOST_PID, "tid": HOST_TID, "ts": ts, "dur": dur, "args": {}}
    if dims is not None:
        e["args"]["Input Dims"] = dims
    return e


def doc(events: list[dict], **extra) -> dict:
    return {"schemaVersion": 1, "deviceProperties": [{"id": 0, "name": "Test GPU"}], "traceEvents": events, **extra}


def write(tmp: Path, events: list[dict], name: str = "t.json", gz: bool = False, **extra) -> Path:
    p = tmp / (name + (".gz" if gz and not name.endswith(".gz") else ""))
    data = json.dumps(doc(events, **extra)).encode()
    p.write_bytes(gzip.compress(data) if gz else data)
    return p
