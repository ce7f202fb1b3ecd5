"""The eager cost per size of a graph-mode trace (issue 26, item 4) against unprofiled truth: the host's cost per
eager launch measured on the trace (``launchgap.predict.host_us_per_launch``) against the prior (7.95 us, the H200
harness host's micro-benchmark), and what the engine traces give.

    python bench/eager_host_eval.py            # one table per check
    python bench/eager_host_eval.py --json out.json

The eager step is estimated as ``max(graph step + 1 us x kernels per step, kernels per step x host us per launch)``
(``costmodel.eager_curve`` without eager steps; the graph step alone before set 5). The host's cost per launch, read several ways:

* ``prior``: 7.95 us (before);
* ``graph steps``: measured on the launches outside the trace's eager steps (the eager steps hidden, as a FULL-graph
  trace without fallbacks would be); with fewer than ``MIN_HOST_INTERVALS`` intervals the prior stands in;
* ``interval median`` (what ships) and ``interval mean``: over every eager launch of the trace
  (``predict.eager_launch_intervals_us``), the eager steps' step times not used (what a trace with eager prefill or
  warm-up steps gives: the model's own ops launched one by one);
* ``op median`` / ``op mean``: the brief's first reading of "the host time of the op that launched it": per eager
  launch the outermost CPU op around the launch call, its duration less the profiler's cost per host event inside it,
  shared by the launches it holds (median over launches; total over total launches).

Set 1, H200 serving traces (FULL-graph decode steps with injected eager fallbacks and uncaptured sizes, recorded by
``launchgap record``): truth is the folder's ``timings_serving.json`` ``kinds`` with mode ``eager`` (CUDA events, no
profiler, 20 repeats per size, each size warm); a trace's error is the median over its truth sizes of
``estimate / truth - 1``. For reference, ``trace eager steps``: the eager curve as ``analyze`` makes it, calibrated on
the eager steps' own profiled times less the profiler's estimated cost.
Set 2, the same-process eager recordings with unprofiled truth (``timings_overhead.json``'s
``profiled_vs_unprofiled``, records that drifted over 5% left out, as ``launchgap.overhead_fit`` does): every launch of
an eager trace is a model launch, so the estimate is checked where the profiler's cost model holds; ``step less
profiler``: the analyzer's own unprofiled-step estimate.
Set 3, engine traces (traces/engines): the host figure each gives, its eager source, and at how many sizes eager and
graph costs tie.
Set 5, the GPU-bound end (``costmodel.EAGER_GAP_OVER_NODE_US``): every committed sweep row with unprofiled eager and
FULL-graph truth whose eager step the GPU bounds (its kernels times the host's cost per launch, read off the same
model's eager step at one row, under 0.7 of the graph step): what the eager step takes past the graph step per kernel,
and the eager estimate's error as the graph step alone (before) and with that gap per kernel.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from launchgap.costmodel import DEFAULT_HOST_US_PER_LAUNCH, EAGER_GAP_OVER_NODE_US  # noqa: E402
from launchgap.loaders import load_trace  # noqa: E402
from launchgap.overhead import detect_profiler_settings, estimate_overhead  # noqa: E402
from launchgap.predict import PythonCost, eager_launch_intervals_us, host_us_per_launch  # noqa: E402
from launchgap.report import TraceReport, analyze_trace  # noqa: E402
from launchgap.steps import assign_rows_to_steps, find_steps  # noqa: E402
from launchgap.timings import DRIFT_LIMIT, load_timings, pvu_drift, pvu_eager_us  # noqa: E402
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


def interval_costs(tr: Trace, rep: TraceReport) -> tuple[float, PythonCost]:
    """The profiler's cost the analysis takes off an interval between eager launches: one host event's
    (``OverheadEstimate.us_per_event_anywhere``: the trace's figure, at most the host-reference rate), and the
    Python calls' past the host events' share (``with_stack``)."""
    rate = estimate_overhead(detect_profiler_settings(tr))  # no step given: the host-reference rate alone
    return min(rep.summary.profiler_overhead_us_per_event, rate.us_per_event), rate.python_us


def variants(tr: Trace, rep: TraceReport, row_step: np.ndarray) -> dict[str, float | None]:
    """Host us per eager launch, each reading (see the module docstring), over every eager launch of the trace."""
    per_event, python_us = interval_costs(tr, rep)
    iv = eager_launch_intervals_us(tr, row_step, per_event, python_us=python_us)
    op_med, op_mean = op_costs(tr, per_event)
    return {"interval median": host_us_per_launch(tr, row_step, per_event, python_us=python_us).us,
            "interval mean": float(iv.mean()) if iv.size else None, "op median": op_med, "op mean": op_mean}


def eager_floor(graph_us: np.ndarray, kernels: float, host_us: float) -> np.ndarray:
    """The eager step ``costmodel.eager_curve`` estimates without eager steps: host-bound (kernels x the host's cost
    per launch) or GPU-bound (the graph step plus ``EAGER_GAP_OVER_NODE_US`` per kernel), whichever is longer."""
    return np.maximum(graph_us + kernels * EAGER_GAP_OVER_NODE_US, kernels * host_us)


def serving_row(name: str, path: Path, truth: dict[int, float]) -> dict:
    tr = load_trace(path)
    rep = analyze_trace(tr)
    row_step = assign_rows_to_steps(tr, find_steps(tr))
    eager_steps = np.array([st.index for st in rep.steps if st.graph_coverage == "eager"])
    graph_kernels = float(np.median([st.kernels for st in rep.steps if st.graph_coverage != "eager"]))
    sizes = np.array(sorted(truth))
    t_us = np.array([truth[b] for b in sizes.tolist()])
    graph = rep.cost_curve.at(sizes)

    def err(h: float | None) -> float | None:
        return None if h is None else float(np.median(eager_floor(graph, graph_kernels, h) / t_us - 1))

    per_event, python_us = interval_costs(tr, rep)
    hidden = host_us_per_launch(tr, row_step, per_event, rows=~np.isin(row_step, eager_steps), python_us=python_us)
    kernels_eager = float(np.median([st.kernels for st in rep.steps if st.graph_coverage == "eager"]))
    errs = {"prior": err(DEFAULT_HOST_US_PER_LAUNCH),
            "graph steps": err(hidden.us if hidden.us is not None else DEFAULT_HOST_US_PER_LAUNCH)}
    us = variants(tr, rep, row_step)
    errs.update({k: err(v) for k, v in us.items()})
    errs["trace eager steps"] = float(np.median(rep.eager_curve.us[sizes - 1] / t_us - 1))
    return {"trace": name, "eager_sizes": sizes.tolist(), "kernels": graph_kernels,
            "truth_us_per_launch": round(float(np.median(t_us)) / kernels_eager, 2),
            "graph_steps_intervals": hidden.intervals, "us_per_launch": us, "err": errs}


def eager_recording_rows() -> list[dict]:
    """Set 2: every eager recording with unprofiled truth (profiled vs unprofiled records)."""
    rows = []
    for tim in sorted(T.glob("h200-*/timings_overhead.json")):
        for rec in load_timings(tim).get("profiled_vs_unprofiled") or []:
            hits = sorted(tim.parent.rglob(Path(rec["trace"]).name)) if rec.get("trace") else []
            if len(hits) != 1 or abs(pvu_drift(rec)) > DRIFT_LIMIT:
                continue
            tr = load_trace(hits[0])
            rep = analyze_trace(tr)
            s = rep.summary
            row_step = assign_rows_to_steps(tr, find_steps(tr))
            kernels = float(np.median([st.kernels for st in rep.steps]))
            truth = pvu_eager_us(rec)

            def err(h: float | None) -> float | None:
                return None if h is None else max(s.gpu_busy_us_median, kernels * h) / truth - 1  # noqa: B023

            us = variants(tr, rep, row_step)
            errs = {"prior": err(DEFAULT_HOST_US_PER_LAUNCH), **{k: err(v) for k, v in us.items()},
                    "step less profiler": s.estimated_unprofiled_step_us_median / truth - 1}
            rows.append({"trace": f"{tim.parent.name}/{rec['model']} bs{rec['batch_size']} {rec['profiler']}",
                         "kernels": kernels, "truth_us_per_launch": round(truth / kernels, 2), "us_per_launch": us,
                         "err": errs})
    return rows


#: Set 4: vLLM 0.24's FULL-graph traces of the 3B (llama-3.2-3b-like) on the H200, and the same server's eager runs.
VLLM = T / "h200-vllm-2026-12-04"
VLLM_GRAPH = ("full-stack/shrinking", "full-nostack/shrinking", "full-nostack/arrivals", "full-stack-v1runner/shrinking",
              "full-stack-v1runner/arrivals", *(f"interleaved/full-stack-{r}/block{b}" for r in ("v2runner", "v1runner")
                                                for b in range(3)))
VLLM_EAGER = ("eager-nostack/engine_steps.json", "eager-stack/engine_steps.json", "eager-stack/engine_steps.rerun.json")


def vllm_eager_truth() -> dict[int, float]:
    """The 3B server's unprofiled eager engine step (us) per batch size: the median over its three eager runs at the
    sizes all of them timed (the H200 host ran at two speeds between them: 13-25 ms a step)."""
    runs = [{int(r["batch_size"]): float(r["engine_step_us"]) for r in json.loads((VLLM / f).read_text())["rows"]}
            for f in VLLM_EAGER]
    common = set.intersection(*(set(r) for r in runs))
    return {b: float(np.median([r[b] for r in runs])) for b in sorted(common)}


def vllm_rows() -> list[dict]:
    truth = vllm_eager_truth()
    sizes = np.array(sorted(truth))
    t_us = np.array([truth[b] for b in sizes.tolist()])
    rows = []
    for name in VLLM_GRAPH:
        tr = load_trace(VLLM / f"{name}.pt.trace.json.gz")
        rep = analyze_trace(tr)
        row_step = assign_rows_to_steps(tr, find_steps(tr))
        kernels = float(np.median([st.kernels for st in rep.steps if st.graph_coverage == "full"]))
        graph = rep.cost_curve.at(sizes)

        def err(h: float | None) -> float | None:
            return None if h is None else float(np.median(eager_floor(graph, kernels, h) / t_us - 1))  # noqa: B023

        us = variants(tr, rep, row_step)
        errs = {"prior": err(DEFAULT_HOST_US_PER_LAUNCH), **{k: err(v) for k, v in us.items()},
                "trace eager curve": float(np.median(rep.eager_curve.us[sizes - 1] / t_us - 1))}
        rows.append({"trace": name, "kernels": kernels, "truth_us_per_launch": round(float(np.median(t_us)) / kernels, 2),
                     "us_per_launch": us, "err": errs})
    return rows


def engine_rows() -> list[dict]:
    rows = []
    for p in sorted(T.glob("engines/*/*.json.gz")):
        tr = load_trace(p)
        rep = analyze_trace(tr)
        if rep.cost_curve is None or rep.eager_curve is None:
            rows.append({"trace": str(p.relative_to(T)), "mode": rep.mode, "eager": None})
            continue
        row_step = assign_rows_to_steps(tr, find_steps(tr))
        per_event, python_us = interval_costs(tr, rep)
        h = host_us_per_launch(tr, row_step, per_event, python_us=python_us)
        g, e = rep.cost_curve.us, rep.eager_curve.us
        rows.append({"trace": str(p.relative_to(T)), "mode": rep.mode, "eager": rep.eager_curve.source,
                     "intervals": h.intervals, "host_us": h.us, "sizes": int(g.size),
                     "tie_sizes": int(np.count_nonzero(e <= g * (1 + 1e-9))), "detail": rep.eager_curve.detail})
    return rows


#: Set 5: a sweep's step counts as GPU-bound where its kernels times the host's cost per launch (read off the same
#: model's eager step at one row, which the host bounds) take under this share of the FULL-graph step.
GPU_BOUND_HOST_SHARE = 0.7


def gpu_bound_rows() -> list[dict]:
    """Set 5: every committed sweep row with an unprofiled eager and FULL-graph step where the eager step is
    GPU-bound: what the eager step takes past the graph step, per kernel (``EAGER_GAP_OVER_NODE_US``'s measure), and
    the eager estimate's error without the gap (the graph step, the floor before) and with it."""
    rows, seen = [], set()
    for tim in sorted(T.glob("**/timings*.json")):
        doc = json.loads(tim.read_text())
        by_model: dict[str, dict[int, dict]] = {}
        for r in doc.get("rows") or []:
            if r.get("eager_us") and r.get("graph_us") and r.get("kernels_per_step"):
                by_model.setdefault(r["model"], {})[int(r["batch_size"])] = r
        for model, sizes in by_model.items():
            if 1 not in sizes:
                continue
            host = sizes[1]["eager_us"] / sizes[1]["kernels_per_step"]
            for b, r in sorted(sizes.items()):
                e, g, k = float(r["eager_us"]), float(r["graph_us"]), float(r["kernels_per_step"])
                key = (doc.get("device"), model, b, round(g))  # a sweep committed twice (a set and its subset)
                if k * host >= GPU_BOUND_HOST_SHARE * g or key in seen:
                    continue
                seen.add(key)
                rows.append({"trace": f"{tim.parent.relative_to(T)}:{model} bs{b}", "device": doc.get("device"),
                             "eager_us": e, "graph_us": g, "kernels": k, "gap_us_per_kernel": (e - g) / k,
                             "err_graph": g / e - 1, "err_floor": (g + k * EAGER_GAP_OVER_NODE_US) / e - 1})
    return rows


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{x:+.1%}"


def _us(x: float | None) -> str:
    return "-" if x is None else f"{x:.2f}"


def _table(title: str, rows: list[dict]) -> None:
    keys = list(rows[0]["err"])
    print(title)
    print(f"{'trace':48s} {'truth':>6s} {'shipped':>7s} " + " ".join(f"{k:>18s}" for k in keys))
    for r in rows:
        shipped = r["us_per_launch"]["interval median"]
        print(f"{r['trace'][:48]:48s} {r['truth_us_per_launch']:6.2f} {_us(shipped):>7s} "
              + " ".join(f"{_pct(r['err'][k]):>18s}" for k in keys))
    for k in keys:
        v = np.array([r["err"][k] for r in rows if r["err"][k] is not None])
        print(f"  {k:20s} median error {np.median(v):+.1%}, median |error| {np.median(np.abs(v)):.1%}, worst "
              f"{np.abs(v).max():.1%} over {v.size}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", type=Path, help="write the rows as JSON here")
    args = ap.parse_args(argv)
    serving = [serving_row(*s) for s in serving_sets()]
    _table("Set 1, H200 serving traces: eager step at the truth sizes against unprofiled truth (us per launch: truth, "
           "shipped = interval median)", serving)
    print("  intervals outside the eager steps: " + ", ".join(str(r["graph_steps_intervals"]) for r in serving))
    eager = eager_recording_rows()
    _table("\nSet 2, same-process eager recordings: eager step against unprofiled truth", eager)
    vllm = vllm_rows()
    _table("\nSet 4, vLLM 0.24 FULL-graph traces of the 3B (H200): eager step at 1, 8, 16, 24, 32 against the same "
           "server's eager runs (unprofiled engine steps, median of three runs)", vllm)
    eng = engine_rows()
    print("\nSet 3, engine traces: the host's cost per launch each gives, the eager source, sizes where eager ties "
          "graph")
    for r in eng:
        if r["eager"] is None:
            print(f"  {r['trace']}: {r['mode']}, no cost curve")
        else:
            print(f"  {r['trace']}: {r['mode']}, eager {r['eager']}, {r['intervals']} intervals, host "
                  f"{_us(r['host_us'])} us; eager = graph at {r['tie_sizes']} of {r['sizes']} sizes")
            print(f"      {r['detail']}")
    bound = gpu_bound_rows()
    print(f"\nSet 5, GPU-bound eager steps of the committed sweeps (kernels x the one-row host cost per launch under "
          f"{GPU_BOUND_HOST_SHARE:g} of the graph step): eager step past the FULL-graph step, per kernel")
    for dev in sorted({r["device"] for r in bound}):
        mine = [r for r in bound if r["device"] == dev]
        gap = np.array([r["gap_us_per_kernel"] for r in mine])
        p10, p90 = np.percentile(gap, [10, 90])
        print(f"  {dev}: {len(mine)} rows of {len({r['trace'].split(' bs')[0] for r in mine})} sweeps: median "
              f"{np.median(gap):.3f} us per kernel (p10-p90 {p10:.3f}-{p90:.3f}, {gap.min():.3f}-{gap.max():.3f})")
        for key, what in (("err_graph", "the graph step (before)"),
                          ("err_floor", f"graph + {EAGER_GAP_OVER_NODE_US:g} us per kernel")):
            v = np.array([r[key] for r in mine])
            print(f"    eager estimated as {what}: median error {np.median(v):+.2%}, worst {v[np.abs(v).argmax()]:+.2%}")
        # the constant held out: each model's rows priced with the median gap of the other models' rows (any device)
        model = [r["trace"].split(":")[1].split(" bs")[0] for r in bound]
        held = []
        for r, m in zip(bound, model):
            if r["device"] == dev:
                others = np.median([q["gap_us_per_kernel"] for q, n in zip(bound, model) if n != m])
                held.append((r["graph_us"] + r["kernels"] * others) / r["eager_us"] - 1)
        v = np.array(held)
        print(f"    each model with the other models' median gap: median |error| {np.median(np.abs(v)):.2%}, worst "
              f"{v[np.abs(v).argmax()]:+.2%}")
    if args.json:
        args.json.write_text(json.dumps({"serving": serving, "eager_recordings": eager, "vllm": vllm, "engines": eng,
                                         "gpu_bound": bound}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
