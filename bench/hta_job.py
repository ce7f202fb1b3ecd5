"""One HTA run for the benchmark: load one trace, then the analyses launchgap's report covers.

TraceAnalysis load, temporal breakdown, idle-time breakdown and CUDA kernel launch stats,
HTA 0.5.0 defaults (its json backend), no plots.

Run as a script in its own process (``python bench/hta_job.py TRACE``) so its wall
time and peak RSS are measured alone. Prints one JSON line with HTA's own load time.
"""
from __future__ import annotations

import json
import logging
import sys
import time
from pathlib import Path


def main(path: str) -> int:
    t0 = time.perf_counter()
    from hta.trace_analysis import TraceAnalysis

    p = Path(path).resolve()
    t1 = time.perf_counter()
    analysis = TraceAnalysis(trace_files={0: str(p)}, trace_dir=str(p.parent))
    t2 = time.perf_counter()
    try:
        temporal_rows: int | str = len(analysis.get_temporal_breakdown(visualize=False))
    except AssertionError:
        # HTA asserts non_compute_time >= 0, which its integer-rounded kernel times can break
        # by 1 us on long traces; the work is done by then, so it still counts in the time.
        temporal_rows = "AssertionError"
    idle = analysis.get_idle_time_breakdown(visualize=False)
    launch = analysis.get_cuda_kernel_launch_stats(visualize=False)
    t3 = time.perf_counter()
    print(json.dumps({"import_s": t1 - t0, "load_s": t2 - t1, "analyses_s": t3 - t2,
                      "temporal_rows": temporal_rows, "idle_rows": len(idle[0]),
                      "launch_rows": sum(len(v) for v in launch.values())}))
    return 0


if __name__ == "__main__":
    logging.disable(logging.WARNING)  # HTA logs every parse step at WARNING
    sys.exit(main(sys.argv[1]))
