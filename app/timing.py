"""Optional stage timings of the dashboard, for the upload benchmark (``bench/dashboard_upload.py``).

With ``LAUNCHGAP_APP_TIMING=1`` in the server's environment, each :func:`stage` writes one
line to stderr when it ends::

    launchgap-timing {"stage": "upload.parse", "s": 1.234, "file": "x.json"}

Off (the default) a stage costs one dictionary lookup. Nothing here changes what the
dashboard computes.
"""
from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager

ENV_TIMING = "LAUNCHGAP_APP_TIMING"
PREFIX = "launchgap-timing "


def enabled() -> bool:
    return os.environ.get(ENV_TIMING, "").strip() not in ("", "0")


def emit(stage_name: str, seconds: float, **fields: object) -> None:
    """Write one timing line (only when enabled)."""
    if not enabled():
        return
    rec = {"stage": stage_name, "s": round(seconds, 4), "t": round(time.time(), 4), **fields}
    sys.stderr.write(PREFIX + json.dumps(rec, default=str) + "\n")
    sys.stderr.flush()


@contextmanager
def stage(stage_name: str, **fields: object) -> Iterator[None]:
    """Time the block as ``stage_name`` (written when the block ends, also when it raises)."""
    if not enabled():
        yield
        return
    t0 = time.perf_counter()
    try:
        yield
    finally:
        emit(stage_name, time.perf_counter() - t0, **fields)


def parse_lines(text: str) -> list[dict]:
    """The timing records in a server log (other lines ignored)."""
    out = []
    for line in text.splitlines():
        i = line.find(PREFIX)
        if i >= 0:
            try:
                out.append(json.loads(line[i + len(PREFIX):]))
            except ValueError:
                continue
    return out
