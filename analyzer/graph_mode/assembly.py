"""Graph-mode serving of one analysed trace, assembled from its steps: the capture list and where it came from,
each step's bucket, padded rows and their cost, fallbacks with the time they lose and why, and the host time
between steps (definitions: :mod:`launchgap.graph_mode` and docs/graph-mode.md).

:func:`assemble_serving` works on the kept steps' columns and returns columns
(:class:`ServingAssembly`); :mod:`launchgap.report` only turns them into report rows and summary fields, and
adds the planner's comparison (a planning function).
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Sequence

import numpy as np

from ..costmodel import SHORT_KERNEL_US, CostCurve, EagerCurve, eager_curve, fit_cost_curve, graph_kernel_excess, \
    trace_samples
from ..engines import NAMES as ENGINE_NAMES
from ..engines import engine as engine_module
from ..gaps import DeviceBusy
from ..gpus import device_properties_of, name_from_properties
from ..host_gaps import HostGaps, host_gaps
from ..overhead import OverheadEstimate
from ..predict import PredictionModel, host_us_per_launch
from ..trace import Trace
from .serving import PaddingCost, ServingSteps, capture_list_conflict, fallback_causes, marker_buckets, padding_cost, resolve_capture_sizes, \
    serving_steps


@dataclass(frozen=True, eq=False)
class StepColumns:
    """The kept steps of a report, as columns (one entry per kept step, in order).

    ``step``: each one's index among all steps; ``coverage`` / ``batch`` (-1 unknown) / ``decode`` (decode or
    unknown phase) / ``name`` / ``device``; ``cpu_us``, ``win_us``, ``busy_us``, ``host_events``,
    ``graph_us`` (predicted FULL-graph step), ``kernels``, ``w0_ns`` / ``w1_ns`` (GPU window on its device),
    ``gl_excess_us`` (the profiler's part of its graph launch calls: ``launchgap.predict.graph_launch_excess_us``),
    ``kx_us`` (the profiler's lengthening of its graph replays' kernels), ``python_calls`` (the Python calls a
    ``with_stack`` trace recorded in its GPU window).
    """

    step: np.ndarray
    coverage: list[str]
    batch: np.ndarray
    decode: np.ndarray
    name: list[str]
    device: np.ndarray
    cpu_us: np.ndarray
    win_us: np.ndarray
    busy_us: np.ndarray
    host_events: np.ndarray
    graph_us: np.ndarray
    kernels: np.ndarray
    w0_ns: np.ndarray
    w1_ns: np.ndarray
    gl_excess_us: np.ndarray
    kx_us: np.ndarray
    python_calls: np.ndarray
    #: Tokens each step processed (-1 where the trace does not say).
    tokens: np.ndarray


@dataclass(frozen=True, eq=False)
class ServingAssembly:
    """What :func:`assemble_serving` made of the kept steps.

    ``sizes`` / ``source`` / ``detail``: the capture list and where it came from; ``unknown``: the list was
    inferred, so a batch's bucket and padding are unknown; ``ss``: buckets, padded rows, fallbacks;
    ``padded``: steps whose padding is costed; ``pad``: its cost; ``fallback_eager_us``: per fallback the eager
    step at its batch on the eager curve ``eager`` (the cost the planner gives an eager step of that size; the
    step's own cost where there is no curve), NaN elsewhere; ``lost_us``: that less the graph cost of its bucket
    (NaN elsewhere); ``fallback_eager_detail``: how that eager cost was estimated, in one line (``None`` without
    fallbacks); ``unprof_us``: each step's own cost (its issue time less the profiler's cost, at least its busy
    time); ``causes``: why each fallback ran eager (per step of
    the whole trace); ``hg``: host time between steps; ``curve``: the FULL-graph cost curve; ``eager``: the
    eager cost per size beside it (``None`` where the curve is not finite); ``is_graph``; ``conflict``: one line
    when a capture list the trace does not state itself disagrees with its graph steps
    (:func:`~launchgap.graph_mode.serving.capture_list_conflict`), else ``None``.
    """

    sizes: list[int] | None
    source: str | None
    detail: str | None
    unknown: bool
    ss: ServingSteps
    padded: np.ndarray
    pad: PaddingCost
    fallback_eager_us: np.ndarray
    lost_us: np.ndarray
    fallback_eager_detail: str | None
    unprof_us: np.ndarray
    causes: list[str | None]
    hg: HostGaps
    curve: CostCurve
    eager: EagerCurve | None
    is_graph: np.ndarray
    conflict: str | None = None


def assemble_serving(trace: Trace, row_step: np.ndarray, all_step_names: list[str], cpu_start_ns: np.ndarray,
                     cols: StepColumns, model: PredictionModel, overhead: OverheadEstimate,
                     given: tuple[list[int], str, str] | None, engine_default: tuple[list[int], str] | None,
                     engine: str | None, timings: dict[int, float] | None, min_size: int,
                     experts: tuple[int, int] | None = None, kernel_scale: float = 1.0,
                     node_us: float = 0.0, gpu: Sequence[DeviceBusy] = (),
                     work_start_ns: np.ndarray | None = None) -> ServingAssembly:
    """Graph-mode serving of the kept steps ``cols`` (see :class:`ServingAssembly`). ``given``: the capture list
    the user gave (sizes, source, detail); ``overhead``: the profiler's cost estimate (per host event and per Python
    call of a ``with_stack`` trace), taken off the eager steps' host time and off the intervals between eager launches
    that the host's cost per launch is measured on (:func:`launchgap.predict.host_us_per_launch`, at
    :attr:`~launchgap.overhead.OverheadEstimate.us_per_event_anywhere`); ``engine_default``: the engine's default for
    the trace's GPU and TP;
    ``timings``: harness FULL-graph timings by batch (they win in the cost curve); ``min_size``: the curve
    spans at least ``1..min_size``; ``experts``: a mixture of experts' ``(E, k)`` from the model config;
    ``kernel_scale``, ``node_us``: how the steps' ``graph_us`` were built from their kernels (the trace's unprofiled
    share of kernel time and node cost: :meth:`launchgap.predict.PredictionModel.predict_graph_us`); ``gpu``: the
    trace's merged GPU busy intervals per device, for the GPU work between steps (:func:`launchgap.host_gaps.host_gaps`);
    ``work_start_ns``: each row's start once its collective's wait for peers is over (:mod:`launchgap.collectives`;
    ``None``: no waits), so the cost curve scales a collective's work, not its wait."""
    batch, decode = cols.batch, cols.decode
    mk = marker_buckets(cols.name)
    is_graph = np.isin(np.array(cols.coverage, dtype=object), ("full", "piecewise"))
    sizes, source, detail = resolve_capture_sizes(given, mk, engine_default,
                                                  np.where(is_graph & decode, np.where(mk > 0, mk, batch), -1))
    # an engine that runs prefill and mixed steps on the same list (vLLM V1): their tokens and graphs tell the list too
    mod = engine_module(engine) if engine in ENGINE_NAMES else None
    on_list = f"{mod.LABEL} runs them {mod.MIXED_STEPS_ON_LIST}" if mod and mod.MIXED_STEPS_ON_LIST else None
    mixed = np.where(~decode & (cols.tokens > 0), cols.tokens, -1) if is_graph.any() else None  # no graph: an eager server
    conflict = capture_list_conflict(sizes, source, detail, np.where(is_graph & decode, mk, -1),
                                     np.where(is_graph & decode, batch, -1), mixed, is_graph, on_list)
    # a trace that replays no graph (enforce-eager) has no fallbacks: its eager steps are the engine's mode,
    # unless the user says which sizes the server captured (flag or pasted config)
    ss = serving_steps(cols.coverage, batch, decode, mk, sizes if is_graph.any() or source in ("flag", "config")
                       else None)
    # an eager step's own cost: the host's issue time (its CPU range) less the profiler's cost per host
    # event, at least its GPU busy time; in a graph sequence its GPU window is no measure of it (the
    # host starts it ahead, while the GPU still replays earlier steps)
    unprof = model.unprofiled_step_us(np.maximum(cols.cpu_us, cols.win_us), cols.host_events, cols.busy_us,
                                      overhead.us_per_event, cols.gl_excess_us, cols.kx_us,
                                      overhead.python_us(cols.python_calls, cols.host_events))
    size = np.where(is_graph, ss.bucket, np.where(decode, batch, -1))
    # An eager step's short kernels run faster than the same kernels replayed in a graph: lifted by the trace's own
    # excess so that an eager fallback and a graph replay are samples of one FULL-graph curve
    eager_decode = ~is_graph & decode
    excess = graph_kernel_excess(trace, row_step, cols.step[decode]) \
        if (is_graph & decode).any() and eager_decode.any() else None
    samples = trace_samples(trace, row_step, cols.step, cols.device, size, cols.graph_us,
                            np.where(eager_decode, excess.us, 0.0) if excess else None,
                            kernel_scale=kernel_scale, node_us=node_us, short_us=model.long_kernel_us,
                            work_start_ns=work_start_ns)
    top = max([*(sizes or []), int(batch.max()) if batch.size else 1, min_size, *(timings or {})])
    props = device_properties_of(trace, int(cols.device[0])) if cols.device.size else {}
    curve = fit_cost_curve(samples, top, timings, props, experts=experts)
    if excess:
        curve = replace(curve, notes=curve.notes + (
            f"the eager steps' kernels under {SHORT_KERNEL_US:g} us are taken {excess.us:+.3f} us longer each, as the same "
            f"kernels run in this trace's graph replays ({excess.kernels:,} kernels of {excess.configs} launch "
            f"configurations run in both)",))
    eager_steps = ~is_graph & decode & (batch > 0)
    kernels = float(np.median(cols.kernels[decode])) if decode.any() else float(np.median(cols.kernels))
    # the host's own cost per eager launch where the trace holds enough eager launches (else the prior)
    eager = None
    if np.isfinite(curve.us).all():
        host = host_us_per_launch(trace, row_step, overhead.us_per_event_anywhere, python_us=overhead.python_us)
        eager = eager_curve(curve, kernels, batch[eager_steps], unprof[eager_steps], host,
                            among_graphs=bool(is_graph.any()), device_name=name_from_properties(props))
    unknown = source == "inferred"  # a batch's real bucket is unknown: padding is not costed
    padded = (ss.padded_rows >= 0) & (not unknown)
    pad = padding_cost(curve, np.where(padded, ss.bucket, -1), np.where(padded, batch, -1))
    # A fallback's eager cost is the eager curve's at its batch, as the planner prices an eager step, not the step's
    # own profiled time: among graph replays a profiled eager step runs 1.8-3.3x its unprofiled time, more than the
    # profiler's estimated cost takes off (nine H200 serving traces, lost per step against the harness's eager step
    # less the bucket's replay: own time +29..+167%, median |err| 57.7%; eager curve median |err| 12.8%)
    if eager is not None:
        eager_at = eager.at(batch)
        eager_detail = f"the eager curve at its batch ({eager.detail})"
    else:
        eager_at = unprof
        eager_detail = "its own profiled host time less the profiler's cost per recorded host event"
    fb_eager = np.where(ss.fallback, eager_at, np.nan)
    lost = np.where(ss.fallback, fb_eager - curve.at(np.where(ss.fallback, ss.fallback_bucket, 1)), np.nan)
    causes = fallback_causes(trace, row_step, all_step_names,
                             np.isin(np.arange(len(all_step_names)), cols.step[ss.fallback]))
    hg = host_gaps(trace, row_step, cpu_start_ns, cols.w0_ns, cols.w1_ns, cols.busy_us, engine, cols.device, gpu)
    return ServingAssembly(sizes=sizes, source=source, detail=detail, unknown=unknown, ss=ss, padded=padded, pad=pad,
                           fallback_eager_us=fb_eager, lost_us=lost,
                           fallback_eager_detail=eager_detail if ss.fallback.any() else None, unprof_us=unprof,
                           causes=causes, hg=hg, curve=curve, eager=eager, is_graph=is_graph, conflict=conflict)
