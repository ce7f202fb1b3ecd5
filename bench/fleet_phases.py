"""Where the fixed seconds of one ``launchgap fleet`` run go, by phase (not a test).

Run from the project root: ``python bench/fleet_phases.py DIR WORKERS [shutdown]``. It does what
:func:`launchgap.commands.fleet.run_fleet` does, in this order, and prints the wall seconds of
each phase: importing Dask and launchgap, starting the local cluster and checking the workers'
version (``_connect``), the map (streaming every trace's record, the workers' first task
paying their imports), the reduce, and closing the cluster.
"""
from __future__ import annotations

import sys
import time
from pathlib import Path

T0 = time.perf_counter()
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import dask.distributed  # noqa: E402, F401

from launchgap.commands.fleet import _connect, _shutdown, expand_inputs, stream_records  # noqa: E402
from launchgap.fleet import FleetAccumulator, file_identity  # noqa: E402
from launchgap.loaders import DEFAULT_MAX_TRACE_BYTES  # noqa: E402
from launchgap.report import AnalysisOptions  # noqa: E402


def main() -> None:
    folder, workers = sys.argv[1], int(sys.argv[2])
    phases = {"imports": time.perf_counter() - T0}
    t = time.perf_counter()
    files = [str(f) for f in expand_inputs([folder])]
    idents = {p: file_identity(p) for p in files}
    pending = sorted(files, key=lambda p: -idents[p]["size_bytes"])
    phases["expand inputs"] = time.perf_counter() - t
    t = time.perf_counter()
    client, cluster, n = _connect(None, workers, len(pending))
    phases["start cluster + version check"] = time.perf_counter() - t
    t = time.perf_counter()
    acc = FleetAccumulator()
    for rec in stream_records(client, pending, idents, AnalysisOptions(), DEFAULT_MAX_TRACE_BYTES, n):
        acc.add(rec)
    phases["map (stream every record)"] = time.perf_counter() - t
    t = time.perf_counter()
    acc.finish()
    phases["reduce (finish)"] = time.perf_counter() - t
    t = time.perf_counter()
    if len(sys.argv) > 3 and sys.argv[3] == "shutdown":  # one call that stops scheduler and workers together
        client.shutdown()
        phases["client.shutdown()"] = time.perf_counter() - t
    else:
        _shutdown(client, cluster)
        phases["close client + cluster"] = time.perf_counter() - t
    total = time.perf_counter() - T0
    print(f"{len(files)} traces, {workers} workers: " + ", ".join(f"{k} {v:.2f} s" for k, v in phases.items())
          + f"; total {total:.2f} s")


if __name__ == "__main__":
    main()
