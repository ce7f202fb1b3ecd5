"""The eager cost per size of a graph-mode trace (issue 26, item 4) against unprofiled truth: the host's cost per
eager launch measured on the trace (``launchgap.predict.host_us_per_launch``) against the prior (7.95 us, the H200
harness host's micro-benchmark), and what the engine traces give.

    python bench/eager_host_eval.py            # one table per check
    python bench/eager_host_eval.py --json out.json

H200 serving traces (FULL-graph decode steps with injected eager fallbacks and uncaptured sizes, recorded by
``launchgap record``): truth is the folder's ``timings_serving.json`` ``kinds`` with mode ``eager`` (CUDA events, no
profiler, 20 repeats per size). The eager estimate at a truth size is ``max(graph step, kernels per step x host us per
launch)`` (``costmodel.eager_curve`` without eager steps); a trace's error is the median over its truth sizes of
``estimate / truth - 1``. Three ways to get the host's cost per launch:

* ``prior``: 7.95 us (before);
* ``graph steps``: measured on the launches outside the trace's eager steps (the eager steps hidden, as a FULL-graph
  trace without fallbacks would be); with fewer than ``MIN_HOST_INTERVALS`` intervals the prior stands in;
* ``eager launches``: measured on every eager launch of the trace, the eager steps' step times not used (what a trace
  with eager prefill or warm-up steps gives: the model's own ops launched one by one).

For comparison, the brief's first reading of "the host time of the op that launched it": per eager launch the
outermost CPU op around the launch call, its duration less the profiler's cost per host event inside it, shared by
the launches it holds; ``op median`` (median over launches) and ``op mean`` (total over total launches), on every eager
launch of the trace. For reference, ``trace eager steps``: the eager curve as ``analyze`` makes it, calibrated on the eager steps' own
profiled times less the profiler's estimated cost. Engine traces (traces/engines): the host figure each gives, its
eager source, and at how many sizes eager and graph costs tie.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from launchgap.costmodel import DEFAULT_HOST_US_PER_LAUNCH  # noqa: E402
from launchgap.loaders import load_trace  # noqa: E402
from launchgap.predict import host_us_per_launch  # noqa: E402
from launchgap.report import analyze_trace  # noqa: E402
from launchgap.steps import assign_rows_to_steps, find_steps  # noqa: E402
from launchgap.trace import Api, Kind, Trace  # noqa: E402

T = REPO / "traces"


def serving_sets() -> list[tuple[str, Path, dict[int, float]]]:
    """(name, trace, eager truth us per batch size) of every H200 serving trace with its timings beside it."""
    out = []
    for tim in sorted(T.glob("h200-*/**/timings_serving.json")):
        for s in json.loads(tim.read_text()).get("serving", []):
            p = tim.parent / "serving" / str(s.get("trace"))
            truth = {int(k["batch_size"]): float(k["us"]) for k in s.get("kinds", []) if k.get("mode") == "eager"}
            if p.is_file() and truth:
                out.append((f"{tim.parent.relative_to(T)}:{s['model']}", p, truth))
    return out


def op_costs(tr: Trace, per_event: float) -> tuple[float, float]:
    """(median, mean) host us per eager launch from the outermost CPU op around each launch call."""
    ran = np.zeros(len(tr), dtype=bool)
    ran[tr.launch_idx[tr.gpu_mask & (tr.launch_idx >= 0)]] = True
    kl = np.flatnonzero((tr.api == Api.KERNEL_LAUNCH) & ran)
    host = np.flatnonzero((tr.kind == Kind.CPU_OP) | (tr.kind == Kind.RUNTIME))
    cpu = np.flatnonzero(tr.kind == Kind.CPU_OP)
    per_op: list[np.ndarray] = []
    counts: list[np.ndarray] = []
    for pid, tid in set(zip(tr.pid[kl].tolist(), tr.tid[kl].tolist())):  # per host thread
        c = cpu[(tr.pid[cpu] == pid) & (tr.tid[cpu] == tid)]
        c = c[np.lexsort((-tr.end_ns[c], tr.start_ns[c]))]
        if c.size == 0:
            continue
        reach = np.maximum.accumulate(tr.end_ns[c])
        top = c[np.r_[True, tr.start_ns[c][1:] >= reach[:-1]]]  # ops no earlier op encloses

        def owner(rows: np.ndarray) -> np.ndarray:
            pos = np.searchsorted(tr.start_ns[top], tr.start_ns[rows], side="right") - 1
            ok = (pos >= 0) & (tr.end_ns[top[np.maximum(pos, 0)]] >= tr.end_ns[rows])
            return np.where(ok, pos, -1)

        k = owner(kl[(tr.pid[kl] == pid) & (tr.tid[kl] == tid)])
        h = owner(host[(tr.pid[host] == pid) & (tr.tid[host] == tid)])
        n_k = np.bincount(k[k >= 0], minlength=top.size)
        n_h = np.bincount(h[h >= 0], minlength=top.size)
        has = n_k > 0
        per_op.append(tr.dur_ns[top][has] / 1e3 - per_event * n_h[has])
        counts.append(n_k[has])
    us, n = np.concatenate(per_op), np.concatenate(counts)
    return float(np.median(np.repeat(us / n, n))), float(us.sum() / n.sum())


def serving_row(name: str, path: Path, truth: dict[int, float]) -> dict:
    tr = load_trace(path)
    rep = analyze_trace(tr)
    row_step = assign_rows_to_steps(tr, find_steps(tr))
    eager_steps = np.array([st.index for st in rep.steps if st.graph_coverage == "eager"])
    graph_kernels = float(np.median([st.kernels for st in rep.steps if st.graph_coverage != "eager"]))
    per_event = rep.summary.profiler_overhead_us_per_event
    sizes = np.array(sorted(truth))
    t_us = np.array([truth[b] for b in sizes.tolist()])
    graph = rep.cost_curve.at(sizes)

    def err(h: float) -> float:
        return float(np.median(np.maximum(graph, graph_kernels * h) / t_us - 1))

    hidden = host_us_per_launch(tr, row_step, per_event, rows=~np.isin(row_step, eager_steps))
    every = host_us_per_launch(tr, row_step, per_event)
    op_med, op_mean = op_costs(tr, per_event)
    kernels_eager = float(np.median([st.kernels for st in rep.steps if st.graph_coverage == "eager"]))
    row = {"trace": name, "eager_sizes": sizes.tolist(), "kernels": graph_kernels,
           "truth_us_per_launch": round(float(np.median(t_us)) / kernels_eager, 2),
           "prior_err": err(DEFAULT_HOST_US_PER_LAUNCH),
           "graph_steps_intervals": hidden.intervals, "graph_steps_us": hidden.us,
           "graph_steps_err": err(hidden.us if hidden.us is not None else DEFAULT_HOST_US_PER_LAUNCH),
           "eager_launches_intervals": every.intervals, "eager_launches_us": every.us,
           "eager_launches_err": err(every.us) if every.us is not None else None,
           "op_median_err": err(op_med), "op_mean_err": err(op_mean),
           "trace_eager_steps_err": float(np.median(rep.eager_curve.us[sizes - 1] / t_us - 1))}
    return row


def engine_rows() -> list[dict]:
    rows = []
    for p in sorted(T.glob("engines/*/*.json.gz")):
        tr = load_trace(p)
        rep = analyze_trace(tr)
        if rep.cost_curve is None or rep.eager_curve is None:
            rows.append({"trace": str(p.relative_to(T)), "mode": rep.mode, "eager": None})
            continue
        row_step = assign_rows_to_steps(tr, find_steps(tr))
        h = host_us_per_launch(tr, row_step, rep.summary.profiler_overhead_us_per_event)
        g, e = rep.cost_curve.us, rep.eager_curve.us
        rows.append({"trace": str(p.relative_to(T)), "mode": rep.mode, "eager": rep.eager_curve.source,
                     "intervals": h.intervals, "host_us": h.us, "sizes": int(g.size),
                     "tie_sizes": int(np.count_nonzero(e <= g * (1 + 1e-9))), "detail": rep.eager_curve.detail})
    return rows


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{x:+.1%}"


def _us(x: float | None) -> str:
    return "-" if x is None else f"{x:.2f}"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", type=Path, help="write the rows as JSON here")
    args = ap.parse_args(argv)
    rows = [serving_row(*s) for s in serving_sets()]
    print("H200 serving traces: eager step at the truth sizes, error vs unprofiled truth (median over sizes)")
    print(f"{'trace':44s} {'truth us/launch':>15s} {'prior 7.95':>10s} {'graph steps (n, us, err)':>26s} "
          f"{'eager launches (n, us, err)':>28s} {'op median':>9s} {'op mean':>8s} {'trace eager steps':>17s}")
    for r in rows:
        print(f"{r['trace']:44s} {r['truth_us_per_launch']:15.2f} {_pct(r['prior_err']):>10s} "
              f"{r['graph_steps_intervals']:>8d} {_us(r['graph_steps_us']):>7s} {_pct(r['graph_steps_err']):>9s} "
              f"{r['eager_launches_intervals']:>8d} {_us(r['eager_launches_us']):>7s} "
              f"{_pct(r['eager_launches_err']):>11s} {_pct(r['op_median_err']):>9s} {_pct(r['op_mean_err']):>8s} "
              f"{_pct(r['trace_eager_steps_err']):>17s}")
    for key in ("prior_err", "graph_steps_err", "eager_launches_err", "op_median_err", "op_mean_err",
                "trace_eager_steps_err"):
        v = np.abs([r[key] for r in rows if r[key] is not None])
        print(f"  {key:24s} median |err| {np.median(v):.1%}, worst {v.max():.1%} over {v.size} traces")
    eng = engine_rows()
    print("\nEngine traces: the host's cost per launch each gives, the eager source, sizes where eager ties graph")
    for r in eng:
        if r["eager"] is None:
            print(f"  {r['trace']}: {r['mode']}, no cost curve")
        else:
            print(f"  {r['trace']}: {r['mode']}, eager {r['eager']}, {r['intervals']} intervals, host "
                  f"{_us(r['host_us'])} us; eager = graph at {r['tie_sizes']} of {r['sizes']} sizes")
            print(f"      {r['detail']}")
    if args.json:
        args.json.write_text(json.dumps({"serving": rows, "engines": eng}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
