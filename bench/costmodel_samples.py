"""CPU seconds of the cost curve's per-size samples (:func:`launchgap.costmodel.trace_samples`) inside one
analysis of a big trace (not a test).

Run from the project root: ``python bench/costmodel_samples.py [FILE] [REPEAT]`` (default: the 200 MB synthetic
trace of ``make bench``, built by :mod:`tests.synth` into ``bench-out/``, 3 repeats). It loads the trace once,
then analyses it REPEAT times (:func:`launchgap.report.analyze_trace`) with ``trace_samples`` wrapped in a timer,
and prints the median CPU seconds (``time.process_time``) of ``trace_samples`` and of the whole analysis, and a
digest of the samples (per size: batch, graph cost, kernels, their summed time) to check a change keeps them.
"""
from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from launchgap import costmodel  # noqa: E402
from launchgap.graph_mode import assembly  # noqa: E402
from launchgap.loaders import load_trace  # noqa: E402
from launchgap.report import AnalysisOptions, analyze_trace  # noqa: E402
from tests.synth import scaled_trace  # noqa: E402


def main() -> int:
    path = Path(sys.argv[1]) if len(sys.argv) > 1 else scaled_trace(200, REPO / "bench-out")
    repeat = int(sys.argv[2]) if len(sys.argv) > 2 else 3
    trace = load_trace(path)
    spent: list[float] = []
    got: list[list] = []

    def timed(*args, **kwargs):
        t0 = time.process_time()
        out = costmodel.trace_samples(*args, **kwargs)
        spent.append(time.process_time() - t0)
        got.append(out)
        return out

    assembly.trace_samples = timed
    total = []
    for _ in range(repeat):  # the same trace, analysed again
        t0 = time.process_time()
        analyze_trace(trace, AnalysisOptions())
        total.append(time.process_time() - t0)
    print(f"{path.name}: {trace.kind.size:,} events; median of {repeat}: trace_samples "
          f"{statistics.median(spent):.3f} s CPU of {statistics.median(total):.3f} s analysis "
          f"({len(spent) // repeat} call(s) per analysis)")
    for x in got[-1]:
        print(f"  bs {x.batch}: graph {x.graph_us:.3f} us, {x.kernel_us.size} kernels, {x.kernel_us.sum():.3f} us, "
              f"classes {x.kernel_class.tolist().count(0)}/{x.kernel_class.tolist().count(1)}/"
              f"{x.kernel_class.tolist().count(4)}, blocks sum {int(x.blocks.sum())}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
