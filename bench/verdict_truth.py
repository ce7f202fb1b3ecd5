"""What `launchgap analyze` says of the H200 serving traces against their unprofiled truth (issue 26's standard: a
serving engineer must trust every verdict at a glance).

    python bench/verdict_truth.py

Every folder under traces/ with a ``timings_serving.json``, a ``serving/*_serving_serve.json.gz`` trace and a
``timings_fullrange.json`` (nine: 1b, 3b, 8b, qwen2.5-0.5b, smollm2, stablelm, granite-3.1-2b, phi-2, qwen2.5-1.5b),
analysed with the real capture list (``--capture-sizes``, from the truth file). Truth: ``timings_serving.json``
``kinds`` (each eager size and each bucket's replay, CUDA events, no profiler, 20 repeats) and
``timings_fullrange.json`` (the unprofiled FULL-graph step at every size). Per trace, error = launchgap / truth - 1:

* ``lost``: ``summary.fallback_lost_us_per_step`` against Σ over the fallbacks of (eager step of that batch less the
  replay of its bucket) / steps; ``own`` the same from each fallback's own profiled step less the profiler's cost
  (the figure before the eager curve), for reference;
* ``padding``: ``summary.padding_us_per_step`` against Σ fullrange(bucket) - fullrange(batch) over the padded steps
  with truth at both / steps, and whether the band holds it;
* ``eager grp``: the eager decode group's step (``step_groups[].estimated_unprofiled_step_us_median``) against the
  median eager truth of its batches;
* ``step``: ``summary.estimated_unprofiled_step_us_median`` and ``predicted_graph_step_us_median`` against the
  median truth over all steps (graph steps: their bucket's replay; eager steps: their batch's eager step);
* ``headline``: ``summary.predicted_speedup`` (rule ``decode time`` on these mixed traces) against the truth
  Σ as run / Σ all FULL over the serving run's decode steps (``timings_serving.json`` ``steps``): as run, a graph
  step is its bucket's replay and an eager step its batch's eager step; all FULL, a graph step is the same replay,
  a fallback the replay of the bucket it missed (its lost time's truth) and an uncaptured step the FULL graph at its
  batch (``timings_fullrange.json``; above its largest timed size, a line through its top 16 timed sizes, whose
  share of the all-FULL sum is ``ext``). The rows' median |err| is printed last.
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from launchgap.loaders import load_trace
from launchgap.report import AnalysisOptions, analyze_trace

REPO = Path(__file__).resolve().parents[1]


def _folders() -> list[Path]:
    found = sorted({p.parent for p in REPO.glob("traces/**/timings_serving.json")})
    return [d for d in found if (d / "timings_fullrange.json").is_file() and list(d.glob("serving/*_serving_serve.json.gz"))]


def _err(x: float, t: float) -> str:
    return f"{x / t - 1:+.1%}" if t else "-"


def main() -> None:
    rows, h_errs = [], []
    for d in _folders():
        trace = next(d.glob("serving/*_serving_serve.json.gz"))
        truth = next(s for s in json.loads((d / "timings_serving.json").read_text())["serving"]
                     if s["trace"] == trace.name)
        fr = {r["batch_size"]: r["graph_us"] for r in json.loads((d / "timings_fullrange.json").read_text())["rows"]
              if r["model"] == truth["model"] and r["graph_us"]}
        graph = {k["bucket"]: k["us"] for k in truth["kinds"] if k["mode"] == "graph"}
        eager = {k["batch_size"]: k["us"] for k in truth["kinds"] if k["mode"] == "eager"}
        sizes = truth["capture_sizes"]
        rep = analyze_trace(load_trace(trace), AnalysisOptions(capture_sizes=tuple(sizes)))
        s, n = rep.summary, len(rep.steps)
        fb = [st for st in rep.steps if st.fallback]
        t_lost = sum(eager[st.batch_size] - graph[min(x for x in sizes if x >= st.batch_size)] for st in fb) / n
        unprof = {i: u for i, u in enumerate(_own_eager(rep))}
        own = sum(unprof[i] - (st.fallback_eager_us - st.fallback_lost_us) for i, st in enumerate(rep.steps)
                  if st.fallback) / n
        pad = [st for st in rep.steps if st.padding_us is not None and st.bucket in fr and st.batch_size in fr]
        t_pad = sum(fr[st.bucket] - fr[st.batch_size] for st in pad)
        got_pad = sum(st.padding_us for st in pad)
        band = sum(st.padding_us_low for st in pad) <= t_pad <= sum(st.padding_us_high for st in pad)
        grp = next((g for g in s.step_groups if g["graph_coverage"] == "eager"), None)
        t_grp = float(np.median([eager[st.batch_size] for st in rep.steps if st.graph_coverage == "eager"]))
        t_step = float(np.median([graph[t["bucket"]] if t["mode"] == "graph" else eager[t["batch_size"]]
                                  for t in truth["steps"]]))
        h_true, ext = _headline_truth(truth["steps"], graph, eager, fr)
        h_errs.append(s.predicted_speedup / h_true - 1)
        rows.append((truth["model"], f"{s.fallback_lost_us_per_step:,.0f}", f"{t_lost:,.0f}",
                     _err(s.fallback_lost_us_per_step, t_lost), _err(own, t_lost),
                     f"{got_pad / n:,.1f}", f"{t_pad / n:,.1f}", _err(got_pad, t_pad), "yes" if band else "no",
                     _err(grp["estimated_unprofiled_step_us_median"], t_grp) if grp else "-",
                     _err(s.estimated_unprofiled_step_us_median, t_step), _err(s.predicted_graph_step_us_median, t_step),
                     f"{s.predicted_speedup:.3f}x", s.predicted_speedup_rule, f"{h_true:.3f}x",
                     _err(s.predicted_speedup, h_true), f"{ext:.0%}",
                     "yes" if s.predicted_speedup_low <= h_true <= s.predicted_speedup_high else "no"))
    head = ("model", "lost us", "truth", "err", "own err", "padding us", "truth", "err", "in band", "eager grp",
            "step est", "pred graph", "headline", "rule", "truth", "err", "ext", "in range")
    w = [max(len(str(r[i])) for r in [head, *rows]) for i in range(len(head))]
    for r in [head, *rows]:
        print("  ".join(str(v).rjust(w[i]) for i, v in enumerate(r)))
    print(f"headline: median |err| {np.median(np.abs(h_errs)):.1%}, median err {np.median(h_errs):+.1%} "
          f"({len(h_errs)} traces)")


def _headline_truth(steps: list[dict], graph: dict, eager: dict, fr: dict) -> tuple[float, float]:
    """The decode-time headline's truth (see the module docstring) and the share of its all-FULL sum extrapolated
    above the FULL-graph timings' largest size."""
    top = sorted(fr)[-16:]
    line = np.polyfit(top, [fr[b] for b in top], 1)
    run = sum(graph[t["bucket"]] if t["mode"] == "graph" else eager[t["batch_size"]] for t in steps)
    full = ext = 0.0
    for t in steps:  # the run's decode steps
        if t["mode"] == "graph":
            full += graph[t["bucket"]]
        elif t["fallback"]:
            full += graph[t["bucket"]] if t.get("bucket") in graph else fr[t["bucket"]]
        elif t["batch_size"] in fr:
            full += fr[t["batch_size"]]
        else:
            x = float(np.polyval(line, t["batch_size"]))
            full, ext = full + x, ext + x
    return run / full, ext / full


def _own_eager(rep) -> list[float]:
    """Each step's own unprofiled estimate as the fallback figure used it before the eager curve: its issue time (the
    CPU range, or its GPU window if longer) less the profiler's cost per recorded host event, at least its busy time."""
    per = rep.summary.profiler_overhead_us_per_event
    return [max(max(st.cpu_us, st.dur_us) - per * st.host_events, st.gpu_busy_us) for st in rep.steps]


if __name__ == "__main__":
    main()
