"""``python -m launchgap.overhead_fit fit PATH... [--coverage C] [--truth window|trace] [--format text|markdown]``: refit the profiler
overhead table (:mod:`launchgap.overhead`) and print the error table of the predicted speedup.

Each PATH is a timings JSON or a folder holding one (``timings.json``, ``truth.json``), with
the eager traces it names. Two layouts are read:

* **same-process recordings** (the harness's ``profiled_vs_unprofiled`` section, see
  ``analyzer/timings.py``): a list of records, each naming its trace and the unprofiled eager
  step timed in the same process just before and after it::

      {"model": "1b", "batch_size": 8, "profiler": "shapes",    # plain | shapes | stack | full
       "unprofiled_eager_us_before": 12010.5, "unprofiled_eager_us_after": 12102.0,
       "unprofiled_graph_us": 1884.7,                          # optional; else rows[model, batch_size]
       "trace": "1b_bs8_eager_shapes.json.gz"}                 # beside the JSON or in a folder below it

  The file is read through :func:`launchgap.timings.load_timings` (the one schema). The eager
  step is :func:`launchgap.timings.pvu_eager_us` (the pooled median the harness writes, else
  the mean of before and after). Records without a trace are skipped; records whose eager
  step drifted by more than ``--max-drift`` across the trace, or whose trace is not in the
  folder, are left out and listed under the table.
* **a timings file beside traces** (``traces/h200``, ``traces/h200-1b``): every
  ``<model>_bs<N>_eager*.json.gz`` in the folder against the file's ``rows`` (``eager_us``,
  ``graph_us``; ``bs`` or ``batch_size``). These timings were not taken around the trace, so
  the host's speed may have changed between them (see traces/h200/PROVENANCE.md).

The profiler settings of every recording are detected from its trace, as ``analyze`` does;
the label in the record is shown next to the detection, never used. The output: one row per
recording (measured speedup; the analyzer's former constant of 1.8 us per host event; the
shipped table; the table refitted leaving that recording out, or its model; the ratio model
alone and ``ratio+ref``, its point with both models' range), the summary of each (median and
worst absolute error of the speedup, share of measured speedups inside the range), and the
refitted tables as Python to paste into :mod:`launchgap.overhead`.
"""
from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from .errors import AnalyzerError, InputError
from .overhead import (
    DEFAULT_OVERHEAD, Evaluation, OverheadTable, Recording, constant_table, evaluate, evaluate_leave_group_out,
    evaluate_leave_one_out, fit_overhead, table_as_python,
)
from .timings import DRIFT_LIMIT, load_timings, pvu_drift, pvu_eager_us, pvu_window_ratio

_TIMINGS_NAMES = ("timings.json", "truth.json", "timings_overhead.json")
_TRACE_NAME = re.compile(r"^(?P<model>.+?)_bs(?P<bs>\d+)_eager.*\.json(?:\.gz)?$")
FORMER_US_PER_EVENT = 1.8


@dataclass(frozen=True)
class _Source:
    trace: Path
    model: str
    label: str
    profiler: str
    eager_us: float
    graph_us: float | None
    #: unprofiled / profiled eager step of the record's interleaved window (None: not interleaved)
    window_ratio: float | None = None


@dataclass
class Skipped:
    """Records of the timings files that were not used, with the reason (shown under the table)."""

    reasons: list[str] = field(default_factory=list)


def _timings_path(path: Path) -> Path:
    if path.is_dir():
        found = [path / n for n in _TIMINGS_NAMES if (path / n).is_file()]
        if not found:
            raise InputError(f"no {', '.join(_TIMINGS_NAMES)} in this folder", str(path))
        return found[0]
    return path


def _sources(path: Path, max_drift: float, skipped: Skipped) -> Iterator[_Source]:
    """The recordings one PATH names (see the module docstring); drifted records and records whose
    trace is not there are left out and noted in ``skipped``."""
    path = _timings_path(path)
    doc = load_timings(path)  # the one schema (analyzer/timings.py); one-line error naming the file
    rows = {(r["model"], r["batch_size"]): r for r in doc["rows"]}
    pvu = doc.get("profiled_vs_unprofiled")
    if pvu:
        for rec in pvu:
            label = f"{rec['model']} bs{rec['batch_size']} {rec['profiler']}"
            if not rec["trace"]:
                continue  # timed, but no trace was kept
            drift = pvu_drift(rec)
            if abs(drift) > max_drift:
                skipped.reasons.append(f"{path.name}: {label}: unprofiled eager step drifted {drift:+.1%} across "
                                       f"the trace (limit {max_drift:.0%})")
                continue
            trace = _find_trace(path.parent, rec["trace"])
            if trace is None:
                skipped.reasons.append(f"{path.name}: {label}: trace {rec['trace']} not in the folder")
                continue
            graph = rec["unprofiled_graph_us"] or rows.get((rec["model"], rec["batch_size"]), {}).get("graph_us")
            yield _Source(trace, rec["model"], f"{rec['model']} bs{rec['batch_size']}", rec["profiler"],
                          pvu_eager_us(rec), graph, pvu_window_ratio(rec))
        return
    for f in sorted(path.parent.iterdir()):  # legacy layout: traces named <model>_bs<N>_eager...
        m = _TRACE_NAME.match(f.name)
        row = rows.get((m.group("model"), int(m.group("bs")))) if m else None
        if row is not None and row.get("eager_us"):
            yield _Source(f, m.group("model"), f"{m.group('model')} bs{m.group('bs')}", "", float(row["eager_us"]),
                          row.get("graph_us"))


def _find_trace(root: Path, name: str) -> Path | None:
    """The trace a record names: beside the timings file, else the one file of that name below it."""
    direct = root / name
    if direct.is_file():
        return direct
    hits = sorted(root.rglob(Path(name).name))
    if len(hits) > 1:
        raise InputError(f"trace {name!r} is in {len(hits)} folders below the timings file; keep one", str(root))
    return hits[0] if hits else None


#: The harness's profiler labels (``analyzer/timings.py``) as :data:`launchgap.overhead.TIERS`.
LABEL_TIER = {"plain": "plain", "shapes": "shapes", "stack": "stack", "full": "shapes+stack"}


#: ``--truth``: ``window``, the measured unprofiled eager step as recorded (blocks around the
#: trace, or the wait-phase median of an interleaved window); ``trace``, for interleaved records,
#: the trace's own profiled step times the window's unprofiled/profiled ratio (the unprofiled step
#: at the host speed of the kept trace's cycle; records without the ratio keep ``window``).
TRUTHS = ("window", "trace")


def load_recordings(paths: list[str], max_drift: float = DRIFT_LIMIT,
                    skipped: Skipped | None = None, truth: str = "window") -> list[Recording]:
    """Recordings (:class:`launchgap.overhead.Recording`) from timings files or folders, each trace analysed.

    Records whose unprofiled eager step drifted by more than ``max_drift`` across the trace, or
    whose trace is not in the folder, are left out (and listed in ``skipped``). ``truth``: see
    :data:`TRUTHS`.
    """
    if truth not in TRUTHS:
        raise InputError(f"unknown truth {truth!r}; choose {' or '.join(TRUTHS)}")
    from .loaders import load_trace
    from .report import analyze_trace

    skipped = skipped if skipped is not None else Skipped()
    recs: list[Recording] = []
    for p in paths:
        for src in _sources(Path(p), max_drift, skipped):
            try:
                rep = analyze_trace(load_trace(src.trace))
            except AnalyzerError as exc:
                if exc.path is None:
                    exc.path = str(src.trace)
                raise
            s = rep.summary
            if rep.mode not in ("eager", "compiled") or not rep.steps:
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
                eager_us=(s.step_us_median * src.window_ratio if truth == "trace" and src.window_ratio is not None
                          else src.eager_us), graph_us=src.graph_us, memory=bool(ps.get("profile_memory")),
                host_ref_us=ps.get("host_ref_us"), group=src.model))
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


def render(recs: list[Recording], evals: list[Evaluation], fitted: OverheadTable | None, markdown: bool) -> str:
    """The error table (one row per recording, a column per evaluation), summaries and (unless None) the
    fitted table."""
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
    if fitted is None:
        return "\n".join(lines)
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
    f.add_argument("--held-out", action="append", default=[], metavar="PATH",
                   help="recordings scored under the table fitted on PATH... and never fitted on (repeatable)")
    f.add_argument("--coverage", type=float, default=0.8,
                   help="share of the recordings' implied overheads the fitted range spans (default 0.8)")
    f.add_argument("--max-drift", type=float, default=DRIFT_LIMIT,
                   help="leave out records whose unprofiled eager step moved by more than this across the trace "
                        f"(after / before - 1; default {DRIFT_LIMIT})")
    f.add_argument("--truth", choices=TRUTHS, default="window",
                   help="measured unprofiled step: window (as recorded; default) or trace (interleaved records: the "
                        "trace's profiled step times its window's unprofiled/profiled ratio)")
    f.add_argument("--format", choices=("text", "markdown"), default="text")
    args = p.parse_args(argv)
    try:
        if not 0 < args.coverage < 1:
            raise InputError("--coverage must be between 0 and 1")
        if not args.max_drift > 0:
            raise InputError("--max-drift must be positive")
        skipped = Skipped()
        recs = load_recordings(args.paths, args.max_drift, skipped, args.truth)
        held = load_recordings(args.held_out, args.max_drift, skipped, args.truth) if args.held_out else []
        loo = {u: evaluate_leave_one_out(recs, DEFAULT_OVERHEAD, args.coverage, u) for u in ("us", "ref")}
        # The unit whose refit predicts held-out recordings better is the one to ship.
        unit = min(loo, key=lambda u: (loo[u].median_abs_err, loo[u].worst_abs_err))
        fitted = fit_overhead(recs, DEFAULT_OVERHEAD, args.coverage, unit)
        evals = [evaluate(recs, constant_table(FORMER_US_PER_EVENT), f"former {FORMER_US_PER_EVENT} us/event"),
                 evaluate(recs, DEFAULT_OVERHEAD, "shipped table"), loo["us"], loo["ref"]]
        if len({r.group for r in recs}) > 1:
            evals.append(evaluate_leave_group_out(recs, DEFAULT_OVERHEAD, args.coverage, unit))
        evals.append(evaluate(recs, fitted, f"refit ({unit}), in-sample"))
        # The ratio model alone (unit "share": unprofiled = (1 - share) x profiled step; range over the
        # fit set's central --coverage of shares), and the ratio model's point with both models' range.
        multi = len({r.group for r in recs}) > 1
        for u, nm in (("share", "ratio"), ("ratio+ref", "ratio+ref")):
            if multi:
                evals.append(evaluate_leave_group_out(recs, DEFAULT_OVERHEAD, args.coverage, u,
                                                      name=f"{nm}, leave-one-model-out"))
            evals.append(evaluate_leave_one_out(recs, DEFAULT_OVERHEAD, args.coverage, u, name=f"{nm}, leave-one-out"))
        ratio = fit_overhead(recs, DEFAULT_OVERHEAD, args.coverage, "share")
        combined = fit_overhead(recs, DEFAULT_OVERHEAD, args.coverage, "ratio+ref")
        evals += [evaluate(recs, ratio, "ratio, in-sample"), evaluate(recs, combined, "ratio+ref, in-sample")]
    except AnalyzerError as exc:
        print(f"launchgap: error: {exc}", file=sys.stderr)
        return 2
    text = render(recs, evals, fitted, args.format == "markdown")
    text += ("\n\nRatio model's point with both models' range (ratio+ref), fitted on these recordings (shares: "
             "unprofiled = (1 - share) x profiled step):\n\n" + table_as_python(combined))
    if held:
        text += "\n\nHeld-out recordings (never fitted on), scored under the shipped table and the tables fitted on the fit set:\n\n"
        text += render(held, [evaluate(held, DEFAULT_OVERHEAD, "shipped table"),
                              evaluate(held, fitted, f"refit ({unit}) on the fit set"),
                              evaluate(held, ratio, "ratio on the fit set"),
                              evaluate(held, combined, "ratio+ref on the fit set")], None,
                       args.format == "markdown")
    if skipped.reasons:
        text += "\n\nLeft out:\n" + "\n".join(f"- {r}" for r in skipped.reasons)
    sys.stdout.write(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
