"""Graph-mode serving: capture sizes, buckets, padded rows and their cost, fallbacks and why they ran eager.

Definitions are in :mod:`launchgap.graph_mode` and docs/graph-mode.md.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from ..costmodel import BAND_AT_TRACE, CostCurve
from ..trace import Kind, Trace
from .coverage import _BEGIN_CAPTURE_RE, _runtime_rows


#: Where a step marker writes the padded size its graph replays (``decode_step[bs=37 bucket=48 graph]``,
#: ``padded_bs=48``, ``graph_bs=48``): group 1 is the size.
BUCKET_REGEX = re.compile(r"(?i)\b(?:bucket|padded_(?:bs|batch(?:_size)?)|graph_bs|cuda_graph_bs)\s*[=:]\s*(\d+)")
#: A step marker that names its step eager (``decode_step[bs=19 eager]``, ``mode=eager``, ``cudagraph=NONE``).
EAGER_MARKER_REGEX = re.compile(r"(?i)(?:\beager\b|cudagraph(?:_mode|_runtime_mode)?\s*[=:]\s*none\b)")
#: Host work that shows a step was slowed by (re)compilation: torch.compile's frame conversion or Inductor's compile.
_COMPILE_RE = re.compile(r"(?:^|/)torch/_(?:dynamo/convert_frame|inductor/compile_fx)\.py\(\d+\)|"
                         r"^(?:TorchDynamo Cache Lookup miss|Torch-Compiled Region: compile)")
#: Sources of a capture list (``summary.capture_sizes_source``).
CAPTURE_SOURCES = ("flag", "config", "markers", "default", "inferred")
#: Why padding is not costed when the capture list is inferred (``summary.padding_unknown_reason``).
INFERRED_PADDING_REASON = ("capture sizes inferred from the buckets the trace ran (a lower bound of the real "
                           "list): a batch's real bucket is unknown; pass --capture-sizes or paste the server config")


def marker_buckets(names: list[str]) -> np.ndarray:
    """Per step name the padded size its marker writes (:data:`BUCKET_REGEX`), -1 where none."""
    out = np.full(len(names), -1, dtype=np.int64)
    cache: dict[str, int] = {}
    for i, n in enumerate(names):  # one regex per step name (a report row), not per event
        if n not in cache:
            m = BUCKET_REGEX.search(n)
            cache[n] = int(m.group(1)) if m else -1
        out[i] = cache[n]
    return out


def resolve_capture_sizes(given: tuple[list[int], str, str] | None, marker_sizes: np.ndarray,
                          default: tuple[list[int], str] | None, graph_batches: np.ndarray
                          ) -> tuple[list[int] | None, str | None, str | None]:
    """The capture list, where it came from (:data:`CAPTURE_SOURCES`) and a one-line detail, first that applies:

    ``given``: ``(sizes, source, detail)`` from the user — ``"flag"`` (``--capture-sizes 1,2,4``) or
    ``"config"`` (a pasted server config, :func:`launchgap.engines.parse_server_config`); else the sizes
    the steps' markers write (``marker_sizes``, -1 for none): ``"markers"``; else ``default``, the trace's
    engine's default list for its version with the settings the trace shows (GPU, memory, TP size):
    ``"default"``; else the batch sizes of the trace's own graph steps (``graph_batches``):
    ``"inferred"``, a lower bound of the real list (only sizes that ran are seen), on which padding
    cannot be costed; else ``(None, None, None)``.
    """
    if given is not None:
        return sorted({int(x) for x in given[0]}), given[1], given[2]
    known = marker_sizes[marker_sizes > 0]
    if known.size:
        return sorted({int(x) for x in known.tolist()}), "markers", "the padded sizes the step markers write"
    if default is not None and default[0]:
        return sorted(default[0]), "default", default[1]
    g = graph_batches[graph_batches > 0]
    if g.size:
        return sorted({int(x) for x in g.tolist()}), "inferred", "the batch sizes the trace's graph steps ran"
    return None, None, None


def capture_list_conflict(sizes: list[int] | None, source: str | None, detail: str | None,
                          replayed: np.ndarray, graph_batches: np.ndarray, mixed_tokens: np.ndarray | None = None,
                          mixed_graphed: np.ndarray | None = None, mixed_on_list: str | None = None) -> str | None:
    """One line when a capture list the trace does not state itself (``source`` ``"flag"``, ``"config"`` or
    ``"default"``) disagrees with what the trace's graph steps show, else ``None``: sizes their markers write
    (``replayed``, -1 for none) that are not in the list, or batches of graph steps (``graph_batches``, -1 for
    unknown) above its largest size (a graph replays no batch above the largest captured size). Where the engine runs
    prefill and mixed steps on the same list (``mixed_on_list``: how, e.g. "vLLM runs them as PIECEWISE graphs ...",
    from its module's ``MIXED_STEPS_ON_LIST``) the trace's prefill and mixed steps that replayed graphs tell too:
    ``mixed_tokens`` (their tokens, -1 for unknown or not such a step) and ``mixed_graphed`` (whether each replayed
    graphs; pass them only for a trace that replays graphs): one that ran eager at or under the largest size says the
    list is shorter (or the server runs another mode), one that replayed graphs above it says it is longer. The list
    is still used as given; the line says the config may be another server's (or the default not this server's)."""
    if source not in ("flag", "config", "default") or not sizes:
        return None
    have = set(sizes)
    off = sorted({int(x) for x in np.asarray(replayed)[np.asarray(replayed) > 0].tolist()} - have)
    top = max(sizes)
    b = np.asarray(graph_batches)
    above = b[b > top]
    eager_under = graphed_over = np.zeros(0, dtype=np.int64)
    if mixed_on_list is not None and mixed_tokens is not None and mixed_graphed is not None:
        t = np.asarray(mixed_tokens)
        g = np.asarray(mixed_graphed, dtype=bool)
        eager_under, graphed_over = t[(t > 0) & ~g & (t <= top)], t[(t > 0) & g & (t > top)]
    if not off and not above.size and not eager_under.size and not graphed_over.size:
        return None
    said = []
    if off:
        shown = ", ".join(str(x) for x in off[:8]) + (", ..." if len(off) > 8 else "")
        said.append(f"its graph steps replayed size(s) {shown} (their step markers write them), not in that list")
    if above.size:
        said.append(f"{above.size} graph step(s) ran a batch above its largest size {top} (up to {int(above.max())}; "
                    f"a graph replays no batch above the largest captured size)")
    if eager_under.size:
        said.append(f"{eager_under.size} prefill or mixed step(s) of {tokens_span(eager_under)} tokens ran eager, at or under "
                    f"its largest size {top} ({mixed_on_list}: its largest size is below "
                    f"{int(eager_under.min()):,}, or the server runs another cudagraph_mode)")
    if graphed_over.size:
        said.append(f"{graphed_over.size} prefill or mixed step(s) of {tokens_span(graphed_over)} tokens replayed graphs, "
                    f"above its largest size {top} ({mixed_on_list}: its largest size is at least "
                    f"{int(graphed_over.max()):,})")
    what = "the engine's default" if source == "default" else "the given list"
    fix = ("pass the server's --capture-sizes or its config" if source == "default"
           else "check that it is this server's list")
    return (f"capture sizes from {detail} ({len(sizes)} size{'s' if len(sizes) != 1 else ''}, largest {top}) disagree with the trace: "
            f"{'; '.join(said)}. Fallbacks and uncaptured sizes follow {what}: {fix}")


def tokens_span(v: np.ndarray) -> str:
    """``lo-hi`` (or one value) of token counts, with thousands separators."""
    lo, hi = int(v.min()), int(v.max())
    return f"{lo:,}" if lo == hi else f"{lo:,}-{hi:,}"


def smallest_size_at_least(batch: np.ndarray, sizes: list[int] | None) -> np.ndarray:
    """Per batch the smallest captured size ``>= batch`` (-1 above the largest, unknown batch or no list)."""
    batch = np.asarray(batch, dtype=np.int64)
    if not sizes:
        return np.full(batch.shape, -1, dtype=np.int64)
    s = np.asarray(sorted(sizes), dtype=np.int64)
    j = np.searchsorted(s, batch, side="left")
    ok = (batch > 0) & (j < s.size)
    return np.where(ok, s[np.minimum(j, s.size - 1)], -1)


@dataclass(frozen=True, eq=False)
class ServingSteps:
    """Per step (arrays of length n_steps) what graph-mode serving made of it.

    * ``bucket``: the captured size a graph step replays — the padded size its marker writes, else
      the smallest captured size ``>= batch``; -1 for eager steps and unknown batches;
    * ``padded_rows``: ``bucket - batch`` for graph steps (-1 where the bucket is unknown);
    * ``fallback``: an eager decode step although a captured size ``>= batch`` exists;
    * ``uncaptured``: an eager decode step whose batch is above every captured size;
    * ``fallback_bucket``: the bucket a fallback step should have replayed (-1 otherwise).
    """

    bucket: np.ndarray
    padded_rows: np.ndarray
    fallback: np.ndarray
    uncaptured: np.ndarray
    fallback_bucket: np.ndarray


def serving_steps(coverage: list[str], batch: np.ndarray, decode: np.ndarray, marker_bucket: np.ndarray,
                  sizes: list[int] | None) -> ServingSteps:
    """Buckets, padded rows and fallbacks of every step (see :class:`ServingSteps`).

    ``coverage``: each step's graph coverage; ``batch``: its batch size (-1 unknown); ``decode``:
    whether it is a decode step (or of unknown phase): prefill and mixed steps are neither padded nor
    fallbacks; ``marker_bucket``: the padded size its marker writes (-1 none); ``sizes``: the capture list.
    """
    cov = np.asarray(coverage, dtype=object)
    graph = (cov == "full") | (cov == "piecewise")
    batch = np.asarray(batch, dtype=np.int64)
    looked_up = smallest_size_at_least(batch, sizes)
    bucket = np.where(graph & decode & (marker_bucket > 0), marker_bucket, np.where(graph & decode, looked_up, -1))
    padded = np.where((bucket > 0) & (batch > 0), bucket - batch, -1)
    eager = (cov == "eager") & decode & (batch > 0) & bool(sizes)
    fallback = eager & (looked_up > 0)
    return ServingSteps(bucket=bucket, padded_rows=padded, fallback=fallback, uncaptured=eager & (looked_up < 0),
                        fallback_bucket=np.where(fallback, looked_up, -1))


@dataclass(frozen=True, eq=False)
class PaddingCost:
    """Per step (arrays of length n_steps, NaN where the step is not padded) the padding cost in us,
    cost(bucket) - cost(batch) on the FULL-graph cost curve (:class:`launchgap.costmodel.CostCurve`, the one
    curve the planner and the dashboard use too):

    * ``us``: on the curve;
    * ``low`` / ``high``: ``us`` less and plus the padding's measured error over the distance from the batch to
      the bucket, :data:`PADDING_BAND_PER_E_FOLD` of the bucket's cost per e-fold (``|ln(bucket/batch)|``): the
      two costs' errors are mostly shared, so the band of a difference is not the difference of the bands;
    * ``measured``: both the batch's and the bucket's cost were measured (harness timings or the trace's own
      steps at those sizes), not modelled;
    * ``own``: the curve falls from the batch to the bucket by more than a traced size's error
      (:data:`launchgap.costmodel.BAND_AT_TRACE` of the bucket's cost): more than a kernel's tile choice moves a step
      (a padded graph can run up to 2% faster than its batch's own, one row past a multiple of 8), so its sizes were
      traced under other conditions (a serving trace's later steps hold longer contexts).
      The cost is then the bucket's own prediction's (:meth:`launchgap.costmodel.CostCurve.own_change`; the bucket is
      a size the trace ran, its padded steps), never below 0.
    """

    us: np.ndarray
    low: np.ndarray
    high: np.ndarray
    measured: np.ndarray
    own: np.ndarray


#: The padding band's half-width per e-fold from batch to bucket, as a share of the bucket's cost: measured on the
#: ten bundled H200 serving traces with FULL-graph truth at every size (bench/costmodel_eval.py's padding sets, the
#: real capture list given): the summed band holds the summed truth on 5 of 10 at 1.5% per e-fold, 7 at 2.5%, 9 at
#: 3%, 10 at 3.5% (the padding from the curve: +1.3%..+10.6% on the nine held out, docs/costmodel.md).
PADDING_BAND_PER_E_FOLD = 0.035


def padding_cost(curve: CostCurve, bucket: np.ndarray, batch: np.ndarray) -> PaddingCost:
    """Padding cost of every step with ``bucket > 0`` and ``batch > 0`` (see :class:`PaddingCost`)."""
    bucket = np.asarray(bucket, dtype=np.int64)
    batch = np.asarray(batch, dtype=np.int64)
    padded = (bucket > 0) & (batch > 0)
    b, k = np.where(padded, batch, 1), np.where(padded, bucket, 1)
    at_k, at_b = curve.at(k), curve.at(b)
    # a fall of more than a traced size's error is no kernel's tile choice (the 1b's truth falls up to 2% one row
    # past a multiple of 8, 17 -> 24 rows; its curve 0.8%): it is the traced sizes' other conditions
    own = padded & (k > b) & (at_b - at_k > BAND_AT_TRACE * at_k)
    est = np.where(own, np.maximum(np.nan_to_num(curve.own_change(k, b), nan=0.0), 0.0), at_k - at_b)
    spread = PADDING_BAND_PER_E_FOLD * np.abs(np.log(k / b)) * at_k
    measured = curve.measured(b) & curve.measured(k) & padded & ~own
    nan = np.full(b.shape, np.nan)
    low = np.where(own, np.maximum(est - spread, 0.0), est - spread)
    return PaddingCost(us=np.where(padded, est, nan), low=np.where(padded, np.where(measured, est, low), nan),
                       high=np.where(padded, np.where(measured, est, est + spread), nan), measured=measured, own=own)


def fallback_causes(trace: Trace, row_step: np.ndarray, names: list[str], fallback: np.ndarray) -> list[str | None]:
    """Per step why it ran eager, where the trace shows it (``None`` elsewhere and for non-fallbacks).

    In order: a stream capture began inside the step (``cudaStreamBeginCapture``: the size was
    captured lazily, on first use); torch.compile (re)compiled inside it (Dynamo's frame conversion
    or Inductor's compile in a ``with_stack`` trace, or a cache-lookup miss range); the step's own
    marker names it eager (the engine chose eager; the marker does not say why).
    """
    n = len(names)
    begins = _runtime_rows(trace, _BEGIN_CAPTURE_RE)
    s = row_step[begins]
    captured = np.bincount(s[s >= 0], minlength=n)[:n] > 0
    compiled = np.zeros(n, dtype=bool)
    ann = np.flatnonzero(trace.kind == Kind.ANNOTATION)
    ids = [i for i in np.unique(trace.name_id[ann]).tolist() if _COMPILE_RE.search(trace.names[i])]
    rows = ann[np.isin(trace.name_id[ann], ids)]
    hit = row_step[rows]
    compiled[hit[hit >= 0]] = True
    pc = trace.python_calls
    py_ids = [i for i, nm in enumerate(pc.names) if _COMPILE_RE.search(nm)]
    if py_ids and len(pc):
        starts = pc.start_ns[np.isin(pc.name_id, py_ids)]
        compiled |= _steps_holding(trace, row_step, starts, n)
    out: list[str | None] = []
    for i in range(n):  # one per step (a report row)
        if not fallback[i]:
            out.append(None)
        elif captured[i]:
            out.append("a graph was captured in this step (size captured lazily, on first use)")
        elif compiled[i]:
            out.append("torch.compile (re)compiled in this step")
        elif EAGER_MARKER_REGEX.search(names[i]):
            out.append(f"the step marker names it eager ({names[i]})")
        else:
            out.append(None)
    return out


def _steps_holding(trace: Trace, row_step: np.ndarray, times_ns: np.ndarray, n: int) -> np.ndarray:
    """Steps whose CPU range (first to last host row of the step) holds any of ``times_ns``."""
    host = np.flatnonzero((row_step >= 0) & ~trace.gpu_mask)
    first = np.full(n, np.iinfo(np.int64).max)
    last = np.full(n, np.iinfo(np.int64).min)
    np.minimum.at(first, row_step[host], trace.start_ns[host])
    np.maximum.at(last, row_step[host], trace.end_ns[host])
    order = np.argsort(first, kind="stable")
    j = np.searchsorted(first[order], times_ns, side="right") - 1
    ok = j >= 0
    ok[ok] = times_ns[ok] <= last[order][j[ok]]
    out = np.zeros(n, dtype=bool)
    out[order[j[ok]]] = True
    return out
