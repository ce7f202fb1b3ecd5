"""Readers of the planner's inputs: harness timings, batch-size distributions, analysed traces.

Where the costs come from, best first:

1. :func:`costs_from_timings`: the recording harness's ``timings.json`` (unprofiled CUDA-event
   timings; also ``truth.json``'s layout). Preferred: no profiler inflation.
2. :func:`costs_from_steps`: traces (their :class:`TraceSteps`). A profiled step is slower than the real one, so every
   step's ``dur_us`` is scaled by its trace's ``estimated_unprofiled_step_us_median /
   step_us_median``. Eager traces give eager costs and predicted graph costs, graph traces
   measured graph costs; where both exist at a size, both are measured.

The distribution comes from :func:`load_distribution` (CSV or JSON histogram) or from the
steps of analysed traces (:func:`distribution_from_steps`). Every reader returns the cost
model's :class:`~launchgap.planning.costs.CostTable` or a plain ``{batch_size: count}``; bad
files raise :class:`~launchgap.errors.InputError` naming the file and the reason.
"""
from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from ..distribution import load_distribution  # noqa: F401 (the one reader, re-exported for the planner's callers)
from ..errors import InputError
from ..files import MAX_SMALL_FILE_BYTES, read_json_file
from ..timings import load_timings
from ..costmodel import CostCurve, EagerCurve
from ..host_gaps import whole_steps_us
from ..engines import engine
from ..graph_mode.serving import tokens_span
from .costs import CostSeries, CostTable, size_span, table_from_series
from ..dims import ModelDims
from .memory import dims_section

#: Step phases the planner takes costs and batch sizes from (None: a trace that does not say).
_DECODE_OR_UNKNOWN = ("decode", None)


# --- from traces ---------------------------------------------------------------------------------

@dataclass(frozen=True)
class TraceSteps:
    """What planning reads of one analysed trace: its decode steps as columns (one entry per step).

    ``name``: the trace, as messages name it. ``mode``: ``eager``, ``graph``, ``mixed`` or
    ``capture`` (:mod:`launchgap.graph_mode`). ``unprofiled_scale``: the trace's estimated
    unprofiled over profiled median step (``summary.estimated_unprofiled_step_us_median /
    summary.step_us_median``; 1 when either is 0). Per step: ``batch_size`` (-1: unknown),
    ``dur_us`` (profiled), ``predicted_graph_us`` and ``phase`` (``decode``, ``prefill``,
    ``mixed``, or ``None`` when the trace does not say). ``kernels_per_step``: the median kernels
    per step (:attr:`launchgap.workload.Workload.kernels_per_step`; 0 when not known): the nodes of
    one size's FULL graph, which size its capture time.

    Built from an analysed trace by :func:`launchgap.planning.request.trace_steps` and from a
    fleet summary by :func:`launchgap.fleet.summary_steps`: planning never reads a report itself.
    """

    name: str
    mode: str
    unprofiled_scale: float
    batch_size: np.ndarray
    dur_us: np.ndarray
    predicted_graph_us: np.ndarray
    phase: tuple[str | None, ...]
    kernels_per_step: float = 0.0
    #: The trace's FULL-graph cost curve and eager cost per size (:mod:`launchgap.costmodel`; ``None`` when not
    #: known, e.g. a fleet summary): with them a graph-only trace gives costs at every size.
    graph_curve: CostCurve | None = None
    eager: EagerCurve | None = None
    #: A benchmark trace (recorded by ``launchgap record``, or passed with ``--costs``): it gives costs, never the
    #: batch-size distribution.
    benchmark: bool = False
    #: The capture list the trace's server ran (``summary.capture_sizes`` from its markers, a pasted config or the
    #: engine's default; ``None`` when unknown or only inferred from its buckets) and where it came from.
    capture_sizes: tuple[int, ...] | None = None
    capture_sizes_detail: str | None = None
    #: What the analysis warned about the trace (``TraceReport.warnings``: a capture list it contradicts, steps
    #: left out): the plan's notes repeat them, as the plan rests on the same steps.
    warnings: tuple[str, ...] = ()
    #: What the analysis noted that a plan built on the trace rests on (:func:`launchgap.verdict.plan_caveats`:
    #: padding unknown, batch sizes read from kernel grids or unknown): the plan carries them with the warnings.
    notes: tuple[str, ...] = ()
    #: What a serving engine's steps hold between their GPU windows (:func:`launchgap.verdict.between_steps_us`): GPU
    #: work of no step, and an eager trace's whole gap unprofiled, us per step; the costs are the engine's whole steps
    #: with them (:meth:`whole`). 0 for a trace not of an engine.
    gpu_between_us: float = 0.0
    host_between_us: float = 0.0
    #: The serving engine whose markers the trace holds (``summary.engine``; ``None`` when none or not known).
    engine: str | None = None
    #: Tokens each step processed (prompt tokens plus generated ones; -1 where the trace does not say), one entry per
    #: step as ``batch_size``; ``None`` where not known at all (a fleet summary).
    tokens: np.ndarray | None = None

    def whole(self, eager_us, graph_us) -> tuple:
        """Eager and graph costs (us) as the engine's whole steps, the time between steps included
        (:func:`launchgap.host_gaps.whole_steps_us`). The graph costs are not floored at an eager trace's host gap (as
        its TPOT with graphs is): one host measurement would make every size cost the same where it binds, and padding
        look free (a vLLM eager trace on a slow host, its gap 3.8 ms against FULL steps of 3.0: a list 12.7% slower on
        the engine's own steps)."""
        return whole_steps_us(eager_us, graph_us, self.gpu_between_us, self.host_between_us, host_floor=False)

    @staticmethod
    def scale_of(step_us_median: float, unprofiled_step_us_median: float) -> float:
        """The profiled -> unprofiled factor of a trace (see the class docstring)."""
        return (unprofiled_step_us_median / step_us_median
                if step_us_median > 0 and unprofiled_step_us_median > 0 else 1.0)

    @property
    def planned(self) -> np.ndarray:
        """Steps that count for costs and the distribution: decode (or unknown phase) steps."""
        return np.array([ph in _DECODE_OR_UNKNOWN for ph in self.phase], dtype=bool)


def no_costs_reason(traces: Sequence[TraceSteps]) -> str:
    """Why the traces give no cost at any batch size, one line naming what each trace holds instead: no steps (a
    graph-capture trace, or no step found), only prefill or mixed steps, or decode steps without a known batch."""
    held = []
    for t in traces:  # a handful of traces, each summarised from its step columns
        n = len(t.phase)
        planned = t.planned
        other = n - int(planned.sum())
        unknown = int((planned & (t.batch_size < 0)).sum())
        if n == 0:
            held.append(f"{t.name}: " + ("graph captures, no replayed step (pass it with --capture beside the run's "
                                         "trace)" if t.mode == "capture" else "no step found"))
        elif other == n:
            phases = sorted({str(ph) for ph in t.phase})
            held.append(f"{t.name}: {n} {'/'.join(phases)} step{'s' if n != 1 else ''}, no decode step")
        elif unknown:
            held.append(f"{t.name}: {unknown} step{'s' if unknown != 1 else ''} without a known batch size")
    return ("no decode steps with a known batch size in the traces: cannot tell what a step costs at which batch size"
            + (f" ({'; '.join(held)})" if held else "")
            + ". Profile a few decode steps, annotate steps with bs=N, use --batch-regex/--batch-op, or pass --timings")


def _medians(keys: np.ndarray, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Distinct keys (ascending) and the median of the values of each."""
    sizes, inv = np.unique(keys, return_inverse=True)
    return sizes, np.array([np.median(values[inv == j]) for j in range(sizes.size)])  # per distinct size


def costs_from_steps(traces: Sequence[TraceSteps]) -> CostTable:
    """Costs per batch size from analysed traces' steps.

    Per step, the cost is ``dur_us`` times the trace's ``unprofiled_scale``; per batch size,
    the median over all steps of that size. Eager traces give the eager cost (measured) and
    the graph cost (predicted, the steps' ``predicted_graph_us``); graph traces give the graph
    cost (measured), and win over predictions at the same size. Mixed traces (graph launches
    plus eager launches) count as graph measurements with a warning. Only decode steps count:
    a serving engine's prefill or mixed step (``phase``) is not a decode bucket (the plan says how many were left
    out: :func:`left_out_steps_note`); steps of unknown phase count.
    """
    if any(t.graph_curve is not None for t in traces):
        return costs_from_curves(traces)
    cols: dict[str, list[np.ndarray]] = {"eb": [], "eu": [], "pu": [], "gb": [], "gu": []}
    notes: list[str] = []
    no_bs = n_eager = n_graph = 0
    for t in traces:  # one trace at a time; the steps are columns
        planned = t.planned
        known = planned & (t.batch_size >= 0)
        no_bs += int((planned & (t.batch_size < 0)).sum())
        if t.mode == "mixed":
            notes.append(f"{t.name}: mixed eager/graph steps are taken as graph measurements "
                         f"(what capture achieved in that setup)")
        if not known.any():
            continue
        cost = t.dur_us[known] * t.unprofiled_scale
        if t.mode in ("eager", "compiled"):
            n_eager += 1
            eager, graph = t.whole(cost, t.predicted_graph_us[known])
            cols["eb"].append(t.batch_size[known])
            cols["eu"].append(eager)
            cols["pu"].append(graph)
        else:
            n_graph += 1
            cols["gb"].append(t.batch_size[known])
            cols["gu"].append(t.whole(0.0, cost)[1])
    if no_bs:
        notes.append(f"{no_bs} steps without a known batch size were left out of the costs "
                     f"(name it in the step annotation, e.g. bs=8, or use --batch-regex/--batch-op)")
    if not cols["eb"] and not cols["gb"]:
        raise InputError(no_costs_reason(traces))
    if not cols["eb"]:
        raise InputError("only graph-mode traces: they give no eager cost to compare with; add eager traces "
                         "of the same model or pass --timings")
    cat = {k: np.concatenate(v) if v else np.zeros(0) for k, v in cols.items()}
    e_sizes, e_us = _medians(cat["eb"].astype(np.int64), cat["eu"])
    p_sizes, p_us = _medians(cat["eb"].astype(np.int64), cat["pu"])
    m_sizes, m_us = _medians(cat["gb"].astype(np.int64), cat["gu"])
    g_sizes = np.union1d(m_sizes, p_sizes)
    measured = np.isin(g_sizes, m_sizes)
    g_us = np.where(measured, m_us[np.searchsorted(m_sizes, g_sizes).clip(0, max(m_sizes.size - 1, 0))]
                    if m_sizes.size else 0.0,
                    p_us[np.searchsorted(p_sizes, g_sizes).clip(0, max(p_sizes.size - 1, 0))])
    g_srcs = tuple("measured" if m else "predicted" for m in measured.tolist())
    if not measured.all():
        notes.append(f"graph costs at bs {size_span(g_sizes[~measured].tolist())} are predicted from eager traces "
                     f"(no graph trace there)")
    notes += _between_notes(traces)
    notes.append("trace costs are profiled step times scaled to estimated unprofiled ones; harness timings "
                 "(launchgap record) are more accurate")
    origin = f"{n_eager} eager and {n_graph} graph trace(s)"
    return table_from_series(CostSeries("eager", e_sizes, e_us, tuple("measured" for _ in e_sizes)),
                             CostSeries("graph", g_sizes, g_us.astype(float), g_srcs), origin, notes)


def _between_notes(traces: Sequence[TraceSteps]) -> list[str]:
    """One line per trace whose costs hold time between the engine's steps (:attr:`TraceSteps.gpu_between_us`)."""
    out = []
    for t in traces:
        parts = []
        if t.gpu_between_us > 0:
            parts.append(f"{t.gpu_between_us:,.0f} us of GPU work between its steps (work of no step, such as sampling "
                         f"after the step marker) in every size's cost")
        if t.host_between_us > 0:
            parts.append(f"an eager step waits through the whole {t.host_between_us:,.0f} us between steps (its host "
                         f"work, unprofiled{', with that GPU work' if t.gpu_between_us > 0 else ''}), which a graph step "
                         f"hides behind its replay (async scheduling)")
        if parts:
            out.append(f"costs are the engine's whole steps ({t.name}): " + "; ".join(parts))
    return out


def kernels_per_step_from_steps(traces: Sequence[TraceSteps]) -> float | None:
    """Median kernels per step over the traces that counted them (``None``: none did)."""
    counted = [t.kernels_per_step for t in traces if t.kernels_per_step > 0]
    return float(np.median(counted)) if counted else None


def _eager_beyond_steps(e_sizes: np.ndarray, e_us: np.ndarray, e_src: tuple[str, ...], eager_traces: Sequence[TraceSteps],
                        b: np.ndarray, notes: list[str]) -> tuple[np.ndarray, np.ndarray, tuple[str, ...]]:
    """The eager traces' measured eager costs (``e_sizes``, ``e_us``, ascending) carried to the sizes ``b`` outside
    them by the traces' eager curves (kernels per step times the host's cost per launch, at least the graph step,
    scaled to their own steps: :func:`launchgap.costmodel.eager_curve`), each side scaled again to meet the nearest
    traced size, so the series stays continuous there (source ``predicted``; linear between traced sizes as before).
    Without an eager curve the series is returned as it is: the plan then covers the traced sizes only."""
    shaped = [t for t in eager_traces if t.eager is not None and t.eager.us.size]
    lo, hi = int(e_sizes[0]), int(e_sizes[-1])
    below, above = b[b < lo], b[b > hi]
    if not shaped or not (below.size or above.size):
        return e_sizes, e_us, e_src
    curve = np.median(np.array([t.whole(t.eager.at(b), 0.0)[0] for t in shaped]), axis=0)  # b is 1..top
    if hi > b.size or not (np.isfinite(curve).all() and curve[lo - 1] > 0 and curve[hi - 1] > 0):
        return e_sizes, e_us, e_src
    ext_lo = curve[below - 1] * (e_us[0] / curve[lo - 1])
    ext_hi = curve[above - 1] * (e_us[-1] / curve[hi - 1])
    what = shaped[0].eager.detail if len(shaped) == 1 else f"the median of {len(shaped)} eager traces' curves"
    notes.append(f"eager costs at the other sizes, bs {size_span([*below.tolist(), *above.tolist()])}, follow the "
                 f"eager traces' eager curve scaled to meet the nearest traced size ({what})")
    return (np.concatenate([below, e_sizes, above]).astype(np.int64), np.concatenate([ext_lo, e_us, ext_hi]),
            ("predicted",) * below.size + tuple(e_src) + ("predicted",) * above.size)


def costs_from_curves(traces: Sequence[TraceSteps]) -> CostTable:
    """Costs at every batch size 1..max from the traces' cost curves (:mod:`launchgap.costmodel`).

    Graph: per size, the median of the traces that measured it (their own steps ran that size), else of the
    curves' batch-scaling model (source ``predicted``). Eager: the eager traces' own decode steps where they ran
    (profiled step times scaled to unprofiled ones, ``measured``; linear between them), else the traces' eager
    curves (their own eager steps, or kernels per step times the host's per-launch cost: ``predicted``, an
    estimate the notes name).
    """
    with_curve = [t for t in traces if t.graph_curve is not None and np.isfinite(t.graph_curve.us).all()]
    if not with_curve:
        raise InputError(no_costs_reason(traces))
    top = max(t.graph_curve.max_size for t in with_curve)
    b = np.arange(1, top + 1)
    curves = np.array([t.whole(0.0, t.graph_curve.at(b))[1] for t in with_curve])  # the engine's whole steps
    # a size an eager trace ran is a predicted FULL graph (its step's GPU work plus replay cost), not a measured one
    meas = np.array([t.graph_curve.measured(b) & (t.mode not in ("eager", "compiled")) for t in with_curve])
    any_meas = meas.any(axis=0)
    g = np.median(curves, axis=0)
    if any_meas.any():  # where a trace measured the size, the measuring traces' median
        g[any_meas] = np.nanmedian(np.where(meas, curves, np.nan)[:, any_meas], axis=0)
    g_src = tuple("measured" if m else "predicted" for m in any_meas.tolist())
    notes = [f"graph costs at {int(any_meas.sum())} size(s) from the traces' own graph steps, at the others from the "
             f"batch-scaling model of their kernels (launchgap.costmodel; GPU peaks: {with_curve[0].graph_curve.peaks})"]
    notes += sorted({n for t in with_curve for n in t.graph_curve.notes})  # what the model assumed (experts' k/E)
    eager_traces = [t for t in traces if t.mode in ("eager", "compiled")]
    eb, eu = [], []
    for t in eager_traces:  # measured eager steps
        known = t.planned & (t.batch_size > 0)
        eb.append(t.batch_size[known])
        eu.append(t.whole(t.dur_us[known] * t.unprofiled_scale, 0.0)[0])
    ebs = np.concatenate(eb) if eb else np.zeros(0, dtype=np.int64)
    if ebs.size:
        e_sizes, e_us = _medians(ebs.astype(np.int64), np.concatenate(eu))
        e_src = tuple("measured" for _ in e_sizes)
        notes.append(f"eager costs from the eager traces' steps at bs {size_span(e_sizes.tolist())}")
        e_sizes, e_us, e_src = _eager_beyond_steps(e_sizes, e_us, e_src, eager_traces, b, notes)
    else:
        eag = [t for t in with_curve if t.eager is not None]
        if not eag:
            raise InputError("only graph-mode traces and no eager cost per size: add eager traces of the same model "
                             "or pass --timings")
        e_sizes = b
        e_us = np.median(np.array([t.whole(t.eager.at(b), 0.0)[0] for t in eag]), axis=0)
        e_src = tuple("predicted" for _ in e_sizes)
        if len(eag) == 1:
            notes.append(f"eager costs {eag[0].eager.detail} ({eag[0].name}): an uncaptured size runs eager")
        else:  # each trace's own estimate, named: the median of them is the plan's
            notes.append(f"eager costs: the median over {len(eag)} traces' eager curves (an uncaptured size runs "
                         f"eager): " + "; ".join(f"{t.name}: {t.eager.detail}" for t in eag))
    notes += _between_notes(traces)
    notes.append("trace costs are profiled steps' kernels and step times, scaled to estimated unprofiled ones; "
                 "harness timings (launchgap record) are more accurate")
    n_graph = sum(t.mode not in ("eager", "compiled") for t in traces)
    origin = f"{len(traces) - n_graph} eager and {n_graph} graph trace(s), cost curve of their kernels"
    table = table_from_series(CostSeries("eager", np.asarray(e_sizes, dtype=np.int64), np.asarray(e_us, dtype=float),
                                         e_src),
                              CostSeries("graph", b.astype(np.int64), g.astype(float), g_src), origin, notes)
    # the curves' band as a share of their cost per size (the median over the traces), carried by the graph costs; the
    # time between steps is measured, not modelled: it is in both ends
    low = np.median(np.array([t.whole(0.0, t.graph_curve.low(b))[1] / c for t, c in zip(with_curve, curves)]), axis=0)
    high = np.median(np.array([t.whole(0.0, t.graph_curve.high(b))[1] / c for t, c in zip(with_curve, curves)]), axis=0)
    table = table.with_graph_band(dict(zip(b.tolist(), low.tolist())), dict(zip(b.tolist(), high.tolist())))
    # eager costs from the curves alone, each at the prior's cost per launch: a floor (every graph win a lower bound)
    floor = not ebs.size and all(t.eager.floor for t in with_curve if t.eager is not None)
    return replace(table, eager_floor=True) if floor else table


def left_out_steps_note(traces: Sequence[TraceSteps]) -> str | None:
    """One line on the steps of the serving traces (not benchmarks) that a plan does not read: prefill and mixed
    steps (:attr:`TraceSteps.planned` false), how many and which, their share of the traces' steps and of their
    profiled step time (``dur_us``); ``None`` where there are none. A plan is for decode batches: a mixed step (prompt
    tokens beside the decode rows) runs no decode bucket's graph, so its time is what the plan cannot change."""
    serving = [t for t in traces if not t.benchmark and len(t.phase)]
    if not serving:
        return None
    out = np.concatenate([~t.planned for t in serving])
    if not out.any():
        return None
    dur = np.concatenate([t.dur_us for t in serving])
    phases = sorted({str(ph) for t in serving for ph, p in zip(t.phase, t.planned) if not p})
    n = int(out.sum())
    share_us = float(dur[out].sum() / dur.sum()) if dur.sum() > 0 else 0.0
    return (f"{n} {' or '.join(phases)} step{'s' if n != 1 else ''} of the serving trace(s) left out of the "
            f"plan ({n / out.size:.0%} of their steps, {share_us:.0%} of their profiled step time): it is for decode "
            f"batches, and that time is what it does not change")


def mixed_steps_note(traces: Sequence[TraceSteps], buckets: Sequence[int], current: Sequence[int] | None = None,
                     current_from: str | None = None) -> str | None:
    """One line on what a plan's list does to the serving traces' prefill and mixed steps where their engine runs
    such steps on the same capture list (``MIXED_STEPS_ON_LIST`` of its module: vLLM's default dispatches them to
    PIECEWISE graphs of the list, their tokens padded up, eager above its largest size): how many of them, of which
    token counts, fit the plan's list and the server's current one (``current``, as the plan scores it;
    ``current_from`` says where it came from, e.g. "from vLLM log vllm.log"); ``None`` where no trace's engine does
    so or no such step's tokens are known. The plan prices decode steps only: this says what else the list changes."""
    per_engine: dict[str, list[np.ndarray]] = {}
    for t in traces:
        if t.benchmark or t.engine is None or t.tokens is None or engine(t.engine).MIXED_STEPS_ON_LIST is None:
            continue
        other = np.array([ph in ("prefill", "mixed") for ph in t.phase], dtype=bool) & (t.tokens > 0)
        if other.any():
            per_engine.setdefault(t.engine, []).append(t.tokens[other])
    if len(per_engine) != 1:  # none, or traces of two engines: no one list to speak of
        return None
    (name, found), = per_engine.items()
    tokens = np.concatenate(found)
    top = max(buckets) if buckets else 0
    server = ""
    if current:
        now = max(current)
        server = f" and {int((tokens <= now).sum())} the current one (largest {now:,}" + \
            (f", {current_from})" if current_from else ")")
    eng = engine(name)
    return (f"{eng.LABEL} runs prefill and mixed steps {eng.MIXED_STEPS_ON_LIST}: of the serving trace(s)' "
            f"{tokens.size} such step{'s' if tokens.size != 1 else ''} ({tokens_span(tokens)} "
            f"tokens), {int((tokens <= top).sum())} fit this plan's list (largest {top:,}){server}; the plan prices "
            f"decode steps only")


def distribution_from_steps(traces: Sequence[TraceSteps]) -> dict[int, float]:
    """Decode steps per batch size over all traces (steps without a known batch size, a serving
    engine's prefill or mixed steps, and benchmark traces' steps are not counted)."""
    known = [t.batch_size[t.planned & (t.batch_size >= 0)] for t in traces if not t.benchmark]
    if not known or not sum(k.size for k in known):
        return {}
    sizes, counts = np.unique(np.concatenate(known), return_counts=True)
    return {int(b): float(n) for b, n in zip(sizes.tolist(), counts.tolist())}


# --- from files ---------------------------------------------------------------------------------

def looks_like_timings(path: str | Path) -> bool:
    """True for a small JSON object with a ``rows`` list and no ``traceEvents`` (timings, truth.json).

    Lets ``launchgap plan DIR`` pick up a timings file lying beside the traces.
    """
    p = Path(path)
    try:
        if not p.is_file() or p.stat().st_size > MAX_SMALL_FILE_BYTES:
            return False
        with open(p, "rb") as fh:
            head = fh.read(1 << 16)
        if not head.lstrip().startswith(b"{") or b'"traceEvents"' in head:
            return False
        doc = json.loads(p.read_bytes().decode("utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return False
    return isinstance(doc, dict) and isinstance(doc.get("rows"), list) and "traceEvents" not in doc


def costs_from_timings(path: str | Path, model: str | None = None) -> CostTable:
    """Costs from the harness's ``timings.json`` (:mod:`launchgap.timings`, read and checked by its
    :func:`~launchgap.timings.load_timings`) or truth.json's layout.

    Rows: ``model``, ``batch_size`` (or ``bs``), ``eager_us``, ``graph_us`` (null when not
    measured), optional ``graph_pool_bytes``. With several models in the file ``model``
    picks one. Repeated sizes take the median. All costs are measured (unprofiled).
    """
    p = str(path)
    doc = load_timings(path)
    rows = doc["rows"]
    if not rows:
        raise InputError("timings file has no rows", p)
    models = sorted({str(r["model"]) for r in rows})
    if model is None:
        if len(models) > 1:
            raise InputError(f"timings file holds several models ({', '.join(models)}): choose one with --model", p)
        model = models[0]
    elif model not in models:
        raise InputError(f"model {model!r} not in timings file (it has {', '.join(models)})", p)
    mine = [(i, r) for i, r in enumerate(rows) if str(r["model"]) == model]
    no_eager = [i for i, r in mine if r.get("eager_us") is None]
    if no_eager:
        raise InputError(f"rows[{no_eager[0]}] has no 'eager_us': the plan compares graphs with the eager step"
                         + ("; these are graph-only timings (launchgap record --modes graph): record eager too "
                            "(--modes eager,graph), or give them to analyze --graph-timings for the padding cost"
                            if len(no_eager) == len(mine) else ""), p)
    bs = np.array([r["batch_size"] for _, r in mine], dtype=np.int64)
    eager = np.array([r["eager_us"] for _, r in mine], dtype=float)
    graph = np.array([np.nan if r.get("graph_us") is None else r["graph_us"] for _, r in mine], dtype=float)
    if np.isnan(graph).all():
        raise InputError(f"no graph_us for model {model!r}: these timings were recorded without CUDA graphs "
                         f"(graph mode needs a GPU)", p)
    pools: dict[int, int] = {}
    for _, r in mine:  # rows of a small JSON file
        if r.get("graph_pool_bytes") is not None:
            b, pool = int(r["batch_size"]), int(r["graph_pool_bytes"])
            pools[b] = max(pools.get(b, pool), pool)
    info = doc.get("info")
    device = doc.get("device") or (info.get("gpu") if isinstance(info, dict) else None)
    origin = f"{Path(p).name}" + (f", model {model}" if model else "") + (f", {device}" if device else "")
    e_sizes, e_us = _medians(bs, eager)
    g_sizes, g_us = _medians(bs[~np.isnan(graph)], graph[~np.isnan(graph)])
    return table_from_series(CostSeries("eager", e_sizes, e_us, tuple("measured" for _ in e_sizes)),
                             CostSeries("graph", g_sizes, g_us, tuple("measured" for _ in g_sizes)), origin, [], pools)


# --- model dimensions -------------------------------------------------------------------------------

def model_dims_from_timings(path: str | Path, model: str | None) -> ModelDims | None:
    """The dimensions of ``model`` in a timings file's ``models`` section (``None`` when absent)."""
    p = str(path)
    dims = dims_section(load_timings(path), p)
    if model is None:
        return next(iter(dims.values())) if len(dims) == 1 else None
    return dims.get(model)


def kernels_per_step_from_timings(path: str | Path, model: str | None) -> float | None:
    """Median ``kernels_per_step`` of a model's rows: the nodes of its full graph (the same kernels)."""
    doc = load_timings(path)
    vals = [r.get("kernels_per_step") for r in doc.get("rows") or [] if isinstance(r, dict)
            and (model is None or str(r.get("model", "")) == model)]
    vals = [float(v) for v in vals if isinstance(v, (int, float)) and not isinstance(v, bool) and v > 0]
    return float(np.median(vals)) if vals else None


def load_model_dims(path: str | Path, model: str | None = None) -> ModelDims:
    """Model dimensions from a JSON file: a Hugging Face ``config.json``, the harness's layout
    (``layers``, ``hidden``, ...), or a timings file's ``models`` section (``model`` picks one)."""
    p = str(path)
    doc = read_json_file(path, "model config")
    if not isinstance(doc, dict):
        raise InputError("model config must be a JSON object", p)
    if isinstance(doc.get("models"), dict):
        dims = dims_section(doc, p)
        if model is None and len(dims) == 1:
            return next(iter(dims.values()))
        if model not in dims:
            raise InputError(f"model {model!r} not in the file's models ({', '.join(sorted(dims))})", p)
        return dims[model]
    try:
        name = model or doc.get("name") or doc.get("_name_or_path") or doc.get("model_type") or Path(p).parent.name
        return ModelDims.from_mapping(doc, str(name))
    except InputError as exc:
        raise InputError(exc.message, p) from None
