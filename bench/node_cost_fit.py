"""The unprofiled FULL-graph step from a profiled FULL-graph replay: fit of ``predict.PredictionModel``'s
``node_per_replay_gap`` and ``replay_kernel_scale`` on every H200 FULL-graph trace with unprofiled truth.

    python bench/node_cost_fit.py              # the fit, its leave-one-model-out error, and the shipped constants'
    python bench/node_cost_fit.py --json out.json

Per trace (``traces/**/M_bsB_graph.json.gz`` beside a ``timings*.json`` with ``graph_us`` for model M at batch B; the
tiny preset is left out: its 200-kernel step is 340 us, where the 3 us graph launch alone is 1%): over its full
replays (graph launches with at least 90% of the most kernels), the median of

* ``kernel_us``: the kernels' summed time;
* ``n_short``: kernels shorter than ``long_kernel_us`` (20 us) followed by another kernel of the replay;
* ``gap_us``: the mean gap after those kernels, gaps up to ``replay_gap_cap_us`` (2 us).

The model: ``truth = scale * kernel_us + ratio * gap_us * n_short + graph_launch_us``, fitted by least squares on the
relative error. Leave-one-model-out: each model's traces predicted with the constants fitted on the other models.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

from launchgap.loaders import load_trace
from launchgap.predict import DEFAULT_MODEL
from launchgap.trace import Api, Kind

T = Path(__file__).resolve().parents[1] / "traces"


def replay_figures(path: Path) -> tuple[float, float, float] | None:
    """(kernel_us, n_short, gap_us) of the trace's median full replay; ``None`` without replays."""
    tr = load_trace(path)
    g = np.flatnonzero(tr.gpu_mask & (tr.kind == Kind.KERNEL) & (tr.launch_idx >= 0))
    g = g[tr.api[tr.launch_idx[g]] == Api.GRAPH_LAUNCH]
    if g.size < 2:
        return None
    li = tr.launch_idx[g]
    o = np.lexsort((tr.start_ns[g], li))
    g, li = g[o], li[o]
    _, first, count = np.unique(li, return_index=True, return_counts=True)
    rows = []
    for f, c in zip(first, count):  # one row per replay, not per event
        if c < 0.9 * count.max():
            continue
        s, e = tr.start_ns[g[f:f + c]], tr.end_ns[g[f:f + c]]
        dur, gap = (e - s) / 1e3, (s[1:] - e[:-1]) / 1e3
        short = dur[:-1] < DEFAULT_MODEL.long_kernel_us
        gs = gap[short]
        gs = gs[gs <= DEFAULT_MODEL.replay_gap_cap_us]
        rows.append((dur.sum(), short.sum(), gs.mean() if gs.size else 0.0))
    return tuple(float(x) for x in np.median(np.array(rows), axis=0)) if rows else None


def cases() -> list[dict]:
    out = []
    for tf in sorted(T.glob("**/timings*.json")):
        try:
            doc = json.loads(tf.read_text())
        except (OSError, ValueError):
            continue
        truth: dict[tuple[str, int], list[float]] = {}
        for r in doc.get("rows", []):
            if r.get("graph_us"):
                truth.setdefault((str(r.get("model")), int(r.get("batch_size", r.get("bs")))), []).append(r["graph_us"])
        for (model, bs), v in sorted(truth.items()):
            if model == "tiny":
                continue
            for p in sorted(tf.parent.glob(f"**/{model}_bs{bs}_graph.json.gz")):
                fig = replay_figures(p)
                if fig is not None:
                    out.append(dict(path=str(p.relative_to(T)), model=model, bs=bs, truth_us=float(np.median(v)),
                                    kernel_us=fig[0], n_short=fig[1], gap_us=fig[2]))
    # one entry per trace file (several timings files may name it)
    return list({c["path"]: c for c in out}.values())


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    cs = cases()
    truth = np.array([c["truth_us"] for c in cs])
    a = np.c_[[c["kernel_us"] for c in cs], [c["gap_us"] * c["n_short"] for c in cs]]
    y, w = truth - DEFAULT_MODEL.graph_launch_us, 1 / truth
    model = np.array([c["model"] for c in cs])

    def fit(keep: np.ndarray) -> np.ndarray:
        return np.linalg.lstsq(a[keep] * w[keep, None], y[keep] * w[keep], rcond=None)[0]

    def line(name: str, pred: np.ndarray) -> dict:
        e = pred / truth - 1
        r = dict(name=name, median_abs=float(np.median(np.abs(e))), p90_abs=float(np.percentile(np.abs(e), 90)),
                 worst_abs=float(np.abs(e).max()), mean=float(e.mean()))
        print(f"{name:<52} median |error| {r['median_abs']:.2%}  p90 {r['p90_abs']:.2%}  worst {r['worst_abs']:.2%}  "
              f"mean {r['mean']:+.2%}")
        return r

    coef = fit(np.ones(len(cs), bool))
    lomo = np.zeros(len(cs))
    for m in set(model.tolist()):
        lomo[model == m] = (a @ fit(model != m))[model == m] + DEFAULT_MODEL.graph_launch_us
    shipped = np.array([DEFAULT_MODEL.replay_kernel_scale, DEFAULT_MODEL.node_per_replay_gap])
    print(f"{len(cs)} FULL-graph traces of {len(set(model.tolist()))} models; fit: scale {coef[0]:.4f}, "
          f"ratio {coef[1]:.4f}")
    rows = [line("fit on all", a @ coef + DEFAULT_MODEL.graph_launch_us),
            line("fit leaving each model out", lomo),
            line(f"shipped (scale {shipped[0]}, ratio {shipped[1]})", a @ shipped + DEFAULT_MODEL.graph_launch_us),
            line("scale 1, ratio 0.78 of the median gap 0.416 (before)",
                 a[:, 0] + 0.78 * 0.416 * np.array([c["n_short"] for c in cs]) + DEFAULT_MODEL.graph_launch_us)]
    if args.json:
        args.json.write_text(json.dumps(dict(cases=cs, fit=coef.tolist(), rows=rows), indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
