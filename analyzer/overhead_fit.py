"""``python -m launchgap.overhead_fit fit PATH... [--coverage C] [--format text|markdown]``: refit the profiler
overhead table (:mod:`analyzer.overhead`) and print the error table of the predicted speedup.

Each PATH is a timings JSON or a folder holding one (``timings.json``, ``truth.json``), with
the eager traces it names. Two layouts are read:

* **same-process recordings** (the harness's ``profiled_vs_unprofiled`` section, see
  ``analyzer/timings.py``): a list of records, each naming its trace and the unprofiled eager
  step timed in the same process just before and after it::

      {"model": "1b", "batch_size": 8, "profiler": "shapes",    # plain | shapes | stack | full
       "unprofiled_eager_us_before": 12010.5, "unprofiled_eager_us_after": 12102.0,
       "unprofiled_graph_us": 1884.7,                          # optional; else rows[model, batch_size]
       "trace": "1b_bs8_eager_shapes.json.gz"}                 # beside the JSON or in a folder below it

  The eager step is the mean of the before and after timings. Records without a trace are
  skipped. (Also read: ``unprofiled_us``/``eager_us`` for one timing, ``graph_us``,
  ``file``/``path`` for the trace.)
* **a timings file beside traces** (``traces/h200``, ``traces/h200-1b``): every
  ``<model>_bs<N>_eager*.json.gz`` in the folder against the file's ``rows`` (``eager_us``,
  ``graph_us``; ``bs`` or ``batch_size``). These timings were not taken around the trace, so
  the host's speed may have changed between them (see traces/h200/PROVENANCE.md).

The profiler settings of every recording are detected from its trace, as ``analyze`` does;
the label in the record is shown next to the detection, never used. The output: one row per
recording (measured speedup; the analyzer's former constant of 1.8 us per host event; the
shipped table; the table refitted leaving that recording out), the summary of each (median
and worst absolute error of the speedup, share of measured speedups inside the range), and the
refitted table as Python to paste into :mod:`analyzer.overhead`.
"""
from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .errors import AnalyzerError, InputError
from .overhead import (
    DEFAULT_OVERHEAD, Evaluation, OverheadTable, Recording, constant_table, evaluate, evaluate_leave_one_out,
    fit_overhead, table_as_python,
)

_TIMINGS_NAMES = ("timings.json", "truth.json")
_TRACE_NAME = re.compile(r"^(?P<model>.+?)_bs(?P<bs>\d+)_eager.*\.json(?:\.gz)?$")
FORMER_US_PER_EVENT = 1.8


@dataclass(frozen=True)
class _Source:
    trace: Path
    label: str
    profiler: str
    eager_us: float
    graph_us: float | None


def _num(rec: dict, *keys: str) -> float | None:
    for k in keys:
        v = rec.get(k)
        if isinstance(v, (int, float)) and not isinstance(v, bool) and np.isfinite(v) and v > 0:
            return float(v)
    return None


def _rows_by_key(doc: dict) -> dict[tuple[str, int], dict]:
    out = {}
    for r in doc.get("rows") or []:
        if isinstance(r, dict) and r.get("model") is not None:
            bs = r.get("batch_size", r.get("bs"))
            if isinstance(bs, int):
                out[(str(r["model"]), bs)] = r
    return out


def _sources(path: Path) -> Iterator[_Source]:
    """The recordings one PATH names (see the module docstring)."""
    if path.is_dir():
        found = [path / n for n in _TIMINGS_NAMES if (path / n).is_file()]
        if not found:
            raise InputError("no timings.json or truth.json in this folder", str(path))
        path = found[0]
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise InputError(f"cannot read the timings: {exc}", str(path)) from None
    if not isinstance(doc, dict):
        raise InputError("not a timings JSON object", str(path))
    rows = _rows_by_key(doc)
    pvu = doc.get("profiled_vs_unprofiled")
    if isinstance(pvu, dict):  # {"records": [...]} or {label: record}
        pvu = pvu.get("records", list(pvu.values()))
    if isinstance(pvu, list):
        for i, rec in enumerate(pvu):
            if not isinstance(rec, dict):
                raise InputError(f"profiled_vs_unprofiled[{i}] is not an object", str(path))
            name = rec.get("trace") or rec.get("file") or rec.get("path")
            if not name:
                continue  # timed, but no trace was kept
            before = _num(rec, "unprofiled_eager_us_before", "unprofiled_before_us", "before_us")
            after = _num(rec, "unprofiled_eager_us_after", "unprofiled_after_us", "after_us")
            eager = _num(rec, "unprofiled_us", "eager_us", "unprofiled_eager_us")
            if eager is None and (before or after):
                eager = float(np.mean([x for x in (before, after) if x]))
            if eager is None:
                raise InputError(f"profiled_vs_unprofiled[{i}] has no unprofiled eager step", str(path))
            row = rows.get((str(rec.get("model")), rec.get("batch_size", rec.get("bs"))), {})
            label = f"{rec.get('model', '?')} bs{rec.get('batch_size', rec.get('bs', '?'))}"
            yield _Source(_find_trace(path.parent, str(name)), label, str(rec.get("profiler", rec.get("settings", ""))),
                          eager, _num(rec, "unprofiled_graph_us", "graph_us") or _num(row, "graph_us"))
        return
    for f in sorted(path.parent.iterdir()):  # legacy layout: traces named <model>_bs<N>_eager...
        m = _TRACE_NAME.match(f.name)
        row = rows.get((m.group("model"), int(m.group("bs")))) if m else None
        if row is not None and _num(row, "eager_us"):
            yield _Source(f, f"{m.group('model')} bs{m.group('bs')}", "", float(row["eager_us"]), _num(row, "graph_us"))


def _find_trace(root: Path, name: str) -> Path:
    """The trace a record names: beside the timings file, else the one file of that name below it."""
    direct = root / name
    if direct.is_file():
        return direct
    hits = sorted(root.rglob(Path(name).name))
    if len(hits) == 1:
        return hits[0]
    raise InputError(f"trace {name!r} not found beside the timings file or, once, in a folder below it", str(root))


#: The harness's profiler labels (``analyzer/timings.py``) as :data:`analyzer.overhead.TIERS`.
LABEL_TIER = {"plain": "plain", "shapes": "shapes", "stack": "stack", "full": "shapes+stack"}


def load_recordings(paths: list[str]) -> list[Recording]:
    """Recordings (:class:`analyzer.overhead.Recording`) from timings files or folders, each trace analysed."""
    from .loaders import load_trace
    from .report import analyze_trace

    recs: list[Recording] = []
    for p in paths:
        for src in _sources(Path(p)):
            try:
                rep = analyze_trace(load_trace(src.trace))
            except AnalyzerError as exc:
                if exc.path is None:
                    exc.path = str(src.trace)
                raise
            s = rep.summary
            if rep.mode != "eager" or not rep.steps:
                raise InputError(f"not an eager trace with steps ({rep.mode}, {len(rep.steps)} steps)", str(src.trace))
            ps = s.profiler_settings
            # The label is shown next to what the trace shows; "!" marks a disagreement.
            agree = LABEL_TIER.get(src.profiler, src.profiler) == ps["tier"]
            detected = ps["tier"] + (f" [{src.profiler}{'' if agree else ' !'}]" if src.profiler else "")
            recs.append(Recording(
                name=f"{Path(p).name}/{src.label}", tier=ps["tier"], settings=detected,
                profiled_step_us=s.step_us_median,
                host_events=float(np.median([st.host_events for st in rep.steps])),
                busy_us=s.gpu_busy_us_median, predicted_graph_us=s.predicted_graph_step_us_median,
                eager_us=src.eager_us, graph_us=src.graph_us, memory=bool(ps.get("profile_memory")),
                host_ref_us=ps.get("host_ref_us")))
    if not recs:
        raise InputError("no recordings found: give timings files or folders with eager traces beside them")
    return recs


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{0.0 if abs(x) < 5e-4 else x:+.1%}"


def _cell(s) -> str:
    """One recording under one evaluation: predicted speedup, its error, its range and whether that holds
    the measured speedup (the eager-step error when no graph step was measured)."""
    err = _pct(s.speedup_err if s.speedup_err is not None else s.eager_err)
    held = "" if s.in_range is None else (", in" if s.in_range else ", out")
    return f"{s.speedup_pred:.2f}x ({err}; {s.speedup_low:.2f}-{s.speedup_high:.2f}x{held})"


def render(recs: list[Recording], evals: list[Evaluation], fitted: OverheadTable, markdown: bool) -> str:
    """The error table (one row per recording, a column per evaluation), summaries and the fitted table."""
    head = ["recording", "settings", "host events", "host ref us", "profiled us", "measured eager us",
            "implied us/event", "measured speedup"] + [ev.name for ev in evals]
    rows = []
    for i, r in enumerate(recs):  # one row per recording
        rows.append([r.name, r.settings, f"{r.host_events:,.0f}", f"{r.host_ref_us:.3f}" if r.host_ref_us else "-",
                     f"{r.profiled_step_us:,.0f}", f"{r.eager_us:,.0f}", f"{r.implied_us_per_event:.2f}",
                     f"{r.eager_us / r.graph_us:.2f}x" if r.graph_us else "-"] + [_cell(ev.scored[i]) for ev in evals])
    if markdown:
        lines = ["| " + " | ".join(head) + " |", "|" + "|".join("---" for _ in head) + "|"]
        lines += ["| " + " | ".join(r) + " |" for r in rows]
    else:
        w = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(head)]
        lines = ["  ".join(h.ljust(w[i]) for i, h in enumerate(head)), "  ".join("-" * x for x in w)]
        lines += ["  ".join(c.ljust(w[i]) for i, c in enumerate(r)) for r in rows]
    lines.append("")
    for ev in evals:
        what = "speedup" if ev.n_speedup else "eager step"
        cov = f"; range holds the measured speedup for {ev.coverage:.0%}" if ev.coverage is not None else ""
        lines.append(f"{'- ' if markdown else ''}{ev.name}: {what} error median {ev.median_abs_err:.1%}, worst "
                     f"{ev.worst_abs_err:.1%} over {len(ev.scored)} recording(s){cov}")
    units = sorted({r.unit for r in fitted.rates if r.source.startswith("fitted")}) or ["none fitted"]
    lines += ["", f"Refitted table (fitted rates in {', '.join(units)}: the unit with the smaller leave-one-out "
                  f"error; paste into analyzer/overhead.py):", "", table_as_python(fitted)]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m launchgap.overhead_fit",
                                description="refit the profiler-overhead table and print the speedup error table")
    sub = p.add_subparsers(dest="cmd", required=True)
    f = sub.add_parser("fit", help="fit on recordings with measured unprofiled steps")
    f.add_argument("paths", nargs="+", metavar="PATH", help="timings JSON files or folders holding one, with traces")
    f.add_argument("--coverage", type=float, default=0.8,
                   help="share of the recordings' implied overheads the fitted range spans (default 0.8)")
    f.add_argument("--format", choices=("text", "markdown"), default="text")
    args = p.parse_args(argv)
    try:
        if not 0 < args.coverage < 1:
            raise InputError("--coverage must be between 0 and 1")
        recs = load_recordings(args.paths)
        loo = {u: evaluate_leave_one_out(recs, DEFAULT_OVERHEAD, args.coverage, u) for u in ("us", "ref")}
        # The unit whose refit predicts held-out recordings better is the one to ship.
        unit = min(loo, key=lambda u: (loo[u].median_abs_err, loo[u].worst_abs_err))
        fitted = fit_overhead(recs, DEFAULT_OVERHEAD, args.coverage, unit)
        evals = [evaluate(recs, constant_table(FORMER_US_PER_EVENT), f"former {FORMER_US_PER_EVENT} us/event"),
                 evaluate(recs, DEFAULT_OVERHEAD, "shipped table"), loo["us"], loo["ref"],
                 evaluate(recs, fitted, f"refit ({unit}), in-sample")]
    except AnalyzerError as exc:
        print(f"launchgap: error: {exc}", file=sys.stderr)
        return 2
    sys.stdout.write(render(recs, evals, fitted, args.format == "markdown") + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
