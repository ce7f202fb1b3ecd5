"""One trace in, one diagnosis out: :func:`analyze_trace` -> :class:`TraceReport`.

Per-step metrics (all times in microseconds):

* ``dur_us``: the step's GPU window on its device, from the first to the last GPU op the
  step launched (see :mod:`launchgap.steps`).
* ``cpu_us``: the step's CPU range (annotation duration).
* ``gpu_busy_us``: union of all GPU ops of that device inside the window.
* ``gpu_idle_us``: ``dur_us - gpu_busy_us``, split by cause in ``idle_us_by_cause``
  (:mod:`launchgap.gaps`); the causes sum to it exactly.
* ``kernels``: kernels the step launched (eager or replayed from a graph).
* ``kernel_launches`` / ``graph_launches``: launch calls of each kind inside the step.
* ``launch_api_us``, ``launch_to_kernel_ratio``, ``launch_delay_us_median``: see
  :mod:`launchgap.launches`.
* ``predicted_graph_us``: the CUDA-graph step predicted by :mod:`launchgap.predict`.
* ``phase`` (``"decode"``, ``"prefill"``, ``"mixed"``, ``None`` when the trace does not say),
  ``requests`` (sequences in the step) and ``tokens`` (tokens it processed): from a serving
  engine's step marker (:mod:`launchgap.steps`, :mod:`launchgap.engines`), never guessed.
* ``graph_coverage``: ``"full"``, ``"piecewise"`` or ``"eager"`` (:mod:`launchgap.graph_mode`).

The ``summary`` takes medians over steps; ``gpu_idle_fraction`` is total idle over total
window of all steps; ``predicted_speedup`` is the real step time (``observed_step_us``
when the user gives it: *measured*; else the profiled step less the estimated profiler
overhead: *estimated*, see :mod:`launchgap.overhead`) over the median predicted graph step.
``predicted_speedup_low``/``_high`` bound it: the overhead's range per host event for the
detected ``profiler_settings`` and the graph step's error band. ``predicted_speedup_rule`` names the rule: that
``"median step"``; ``"whole step"`` for a serving engine's decode steps with time between them (the engine's whole
step before over after, ``whole_step_us_before`` / ``_after``: the time per output token's ratio, :func:`_with_whole_step`);
``"all FULL"`` (1.00x) where every decode step (every step, where no phase is known) already replays
one FULL graph; ``"decode time"`` where a
graph-mode trace's decode steps mix graph replays and eager steps (:func:`_decode_time`: ``decode_us_as_run`` over
``decode_us_full_graph``). The report's ``workload``
(:mod:`launchgap.workload`) names the model, device and rank the trace ran. ``engine`` names the
serving engine that wrote the trace (``None`` for others), ``steps_by_coverage`` counts steps per
graph coverage and ``step_groups`` has one entry per (phase, coverage) with its own medians and
verdict. For engine steps the verdict speaks per group: one blend of prefill and decode steps
says nothing.

A capture trace (trace ``mode`` ``"capture"``, :func:`launchgap.graph_mode.detect_capture`)
gets ``capture`` (graphs, sizes, nodes per graph) and no steps, gaps or speedup. An execution
trace analysed beside the capture trace of the same engine run (:func:`with_capture`) gets
``capture_pairing`` (:class:`launchgap.graph_mode.CapturePairing`): the kernels inside its graph
replays named by the ops that launched them at capture, per graph and per kernel.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields, replace

import numpy as np

from .engines import LABELS, CaptureSettings, capture_sizes_of
from .collectives import collective_rows
from .costmodel import CostCurve, EagerCurve
from .gaps import CAUSES, DeviceBusy, Gaps, compute_gaps
from .engines import engine as engine_module
from .errors import InputError
from .graph_mode import COVERAGES, CaptureReport, StepCoverage, classify_mode, detect_capture, \
    INFERRED_PADDING_REASON, compile_evidence, graph_trees_marker, pair_capture, smallest_size_at_least, step_coverage
from .graph_mode.assembly import StepColumns, assemble_serving
from .heap import HEAP
from .host_gaps import host_activity, host_ahead, whole_steps_us
from .host_stalls import host_stalls
from .launches import kernel_launch_table, launch_delays_ns
from .overhead import OverheadEstimate, ProfilerSettings, detect_profiler_settings, estimate_overhead, \
    OP_MIX_WARNING_START, op_mix_warning, speedup_range
from .planning.costs import table_of_steps
from .planning.planner import compare_capture_list
from .predict import DEFAULT_MODEL, PredictionModel, graph_launch_excess_us, piece_staging_copies, replay_node_us
from .steps import StepOptions, Steps, assign_rows_to_steps, detect_engine, find_steps
from .trace import Api, Kind, Trace
from .verdict import GROUP_FIELDS, SPEEDUP_FIELDS, between_steps_us, decide, group_summary, headline
from .gpus import device_name, device_properties_of
from .workload import Workload, workload_of

SCHEMA = "launchgap.report/1"
GAP_HIST_EDGES_US = (0.0, 1.0, 2.0, 5.0, 10.0, 20.0, 50.0, 100.0, 200.0, 500.0, 1000.0, 5000.0, float("inf"))
#: The cost curve covers at least batch sizes 1..this (more when the trace's batches or capture list go higher).
CURVE_MIN_SIZE = 128


@dataclass(frozen=True)
class AnalysisOptions:
    """Everything that changes the analysis of one trace."""

    steps: StepOptions = field(default_factory=StepOptions)
    model: PredictionModel = DEFAULT_MODEL
    observed_step_us: float | None = None
    top_gaps: int = 10
    top_kernels: int = 15
    #: The capture list the server ran with (``--capture-sizes``); ``None``: from the engine or the trace.
    capture_sizes: tuple[int, ...] | None = None
    #: The server's capture settings from a pasted config (``--capture-sizes`` / ``--server-config`` text, the
    #: dashboard's "server config" field; :func:`launchgap.engines.parse_server_config`); wins over ``capture_sizes``.
    server_config: CaptureSettings | None = None
    #: The capture list a server log states (``launchgap plan --server-log``, a log uploaded on the dashboard:
    #: :func:`launchgap.planning.serverlog.capture_settings_from_log`): the list for a trace of the log's engine where
    #: neither of the two above is given, before the step markers (which show only the sizes that ran) and the
    #: engine's default.
    log_capture: CaptureSettings | None = None
    #: Unprofiled FULL-graph step times by batch size, ``((batch, us), ...)`` (harness timings), for the
    #: padding cost curve; ``None``: the trace's own steps only.
    graph_timings_us: tuple[tuple[int, float], ...] | None = None
    #: A mixture of experts' ``(E, k)`` from the model config (``--model-config``, :func:`launchgap.dims.moe_routing`):
    #: how the cost curve scales the expert kernels; ``None``: read from the trace (:func:`launchgap.costmodel.expert_share`).
    moe_routing: tuple[int, int] | None = None


@dataclass(frozen=True)
class DeviceReport:
    device: int
    name: str
    kernels: int
    gpu_ops: int
    gpu_busy_us: float
    gpu_window_us: float
    gpu_idle_us: float
    idle_us_by_cause: dict[str, float]


@dataclass(frozen=True)
class StepReport:
    index: int
    name: str
    batch_size: int | None
    device: int
    start_us: float
    dur_us: float
    cpu_us: float
    gpu_busy_us: float
    gpu_idle_us: float
    idle_us_by_cause: dict[str, float]
    kernels: int
    kernel_launches: int
    graph_launches: int
    launch_api_us: float
    launched_gpu_us: float
    launch_to_kernel_ratio: float
    launch_delay_us_median: float
    host_events: int
    predicted_graph_us: float
    phase: str | None
    requests: int | None
    tokens: int | None
    graph_coverage: str
    batch_source: str = "none"
    batch_confidence: str | None = None
    batch_note: str | None = None
    # Graph-mode serving (launchgap.graph_mode, launchgap.host_gaps; see the module docstring).
    bucket: int | None = None
    padded_rows: int | None = None
    padding_us: float | None = None
    padding_us_low: float | None = None
    padding_us_high: float | None = None
    fallback: bool = False
    fallback_eager_us: float | None = None
    fallback_lost_us: float | None = None
    fallback_cause: str | None = None
    inter_step_host_us: float | None = None
    # that gap less the profiler's cost of what it recorded there (host events of no step, Python calls), at least the
    # GPU work in it (inter_step_gpu_busy_us: work of no step, such as an engine's sampling after its step marker), us
    inter_step_host_unprofiled_us: float | None = None
    inter_step_gpu_busy_us: float | None = None
    host_phases_us: dict[str, float] = field(default_factory=dict)
    # Host stalls (launchgap.host_stalls): GPU idle while the host sat in a frame that recorded nothing.
    host_stall_us: float = 0.0
    host_stall_in_graph_us: float = 0.0
    host_stall_frame: str | None = None
    # Python calls (python_function events, any thread) recorded in the step's GPU window: with_stack traces only
    python_calls: int = 0

    @property
    def fallback_bucket_graph_us(self) -> float | None:
        """A fallback's FULL-graph cost at its bucket (us): its eager step less its lost time, the cost those two
        are made of (``None`` where either is unknown)."""
        if self.fallback_eager_us is None or self.fallback_lost_us is None:
            return None
        return self.fallback_eager_us - self.fallback_lost_us


@dataclass(frozen=True)
class Summary:
    steps: int
    step_source: str
    step_us_median: float
    cpu_step_us_median: float
    gpu_busy_us_median: float
    gpu_idle_fraction: float
    idle_fraction_by_cause: dict[str, float]
    kernels_per_step_median: float
    kernel_launches_per_step_median: float
    graph_launches_per_step_median: float
    residual_eager_launches_per_step_median: float
    launch_api_us_per_step_median: float
    launch_to_kernel_ratio: float
    launch_delay_us_p50: float
    launch_delay_us_p90: float
    launch_delay_us_p99: float
    predicted_graph_step_us_median: float
    estimated_unprofiled_step_us_median: float
    estimated_profiler_inflation: float
    observed_step_us: float | None
    predicted_speedup: float
    predicted_speedup_profiled: float
    batch_sizes: list[int]
    verdict: str
    verdict_detail: str
    # The profiler's cost (launchgap.overhead): detected settings, us per recorded host event
    # (point and range), the unprofiled step and the speedup as ranges; eager_step_source says
    # whether the eager step in predicted_speedup was "measured" (observed_step_us) or "estimated".
    profiler_settings: dict = field(default_factory=dict)
    profiler_overhead_us_per_event: float = 0.0
    profiler_overhead_us_per_event_low: float = 0.0
    profiler_overhead_us_per_event_high: float = 0.0
    # With Python stacks: the Python calls recorded in the median step's GPU window, and the profiler's cost of each
    # one past OverheadTable.python_calls_per_event per host event (us; point and range; 0 without stacks)
    python_calls_per_step_median: float = 0.0
    profiler_python_call_us: float = 0.0
    profiler_python_call_us_low: float = 0.0
    profiler_python_call_us_high: float = 0.0
    estimated_unprofiled_step_us_low: float = 0.0
    estimated_unprofiled_step_us_high: float = 0.0
    predicted_speedup_low: float = 0.0
    predicted_speedup_high: float = 0.0
    eager_step_source: str = "estimated"
    # Which rule gave predicted_speedup: "median step" (the median step's), "whole step" (a serving engine's decode
    # steps: the engine's whole step, the time between steps included, whole_step_us_before / _after), "all FULL"
    # (1.00x where every step already replays a FULL graph) or "decode time" (a graph-mode trace's decode time as run
    # over its decode time all in FULL graphs: decode_us_as_run / decode_us_full_graph, None under the other rules).
    predicted_speedup_rule: str = "median step"
    # A serving engine's whole decode step (us), as its clients see it, before and after CUDA graphs: the headline
    # group's step with what runs between the steps' GPU windows (_with_whole_step); 0 where not an engine's decode.
    whole_step_us_before: float = 0.0
    whole_step_us_after: float = 0.0
    decode_us_as_run: float | None = None
    decode_us_full_graph: float | None = None
    engine: str | None = None
    steps_by_coverage: dict[str, int] = field(default_factory=lambda: dict.fromkeys(COVERAGES, 0))
    step_groups: list[dict] = field(default_factory=list)
    # Graph-mode serving (see the module docstring).
    capture_sizes: list[int] | None = None
    capture_sizes_source: str | None = None
    capture_sizes_detail: str | None = None
    padding_unknown_reason: str | None = None
    fallback_steps: list[int] = field(default_factory=list)
    uncaptured_steps: list[int] = field(default_factory=list)
    fallback_lost_us_per_step: float = 0.0
    fallback_eager_detail: str | None = None
    padded_rows_fraction: float = 0.0
    padding_us_per_step: float | None = 0.0
    padding_cost_source: str = "none"
    padding_us_per_step_low: float | None = 0.0
    padding_us_per_step_high: float | None = 0.0
    padding_estimated_steps: int = 0
    padding_own_steps: int = 0
    planner_comparison: dict | None = None
    inter_step_host_us_median: float = 0.0
    inter_step_host_us_unprofiled_median: float = 0.0
    inter_step_gpu_busy_us_median: float = 0.0
    host_phases_us_per_step: dict[str, float] = field(default_factory=dict)
    host_phases_source: str = "none"
    async_hidden_us_per_step: float = 0.0
    host_ahead_steps: int = 0
    # Host stalls and the host time a FULL graph removes / keeps (launchgap.host_stalls, launchgap.verdict).
    host_stall_us_per_step: float = 0.0
    host_stall_in_graph_us_per_step: float = 0.0
    host_stall_frame: str | None = None
    host_stall_frames: list[dict] = field(default_factory=list)
    graph_removes_host_us_per_step: float = 0.0
    graph_keeps_host_us_per_step: float = 0.0
    # The per-node replay cost the predicted graph step used and where it came from (launchgap.predict).
    node_us: float = 0.0
    node_us_source: str = "prior"
    # A collective kernel's node cost, measured on the trace's own replays (None: not measured; it costs node_us).
    collective_node_us: float | None = None
    # torch.compile without CUDA graphs: what the trace shows (launchgap.graph_mode.compile_evidence), and
    # which mode it shows: "reduce-overhead" when CUDA graph trees ran but replayed nothing, else "no graphs".
    compile_evidence: list[str] = field(default_factory=list)
    compile_mode: str | None = None
    # Serving units of the headline's decode steps (see the module docstring).
    decode_batch_size: int | None = None
    decode_tpot_ms_before: float | None = None
    decode_tpot_ms_after: float | None = None
    decode_tpot_between_steps_us: float = 0.0
    decode_tokens_per_s_before: float | None = None
    decode_tokens_per_s_after: float | None = None


@dataclass(frozen=True)
class GapRow:
    device: int
    step: int | None
    start_us: float
    dur_us: float
    cause: str
    before: str
    after: str
    #: What the launching thread ran during the gap: innermost host ranges by name, us each (top 5).
    host_activity_us: dict[str, float] = field(default_factory=dict)


@dataclass(frozen=True)
class TraceReport:
    """The diagnosis of one trace. ``to_dict`` gives the JSON contract (schema launchgap.report/1)."""

    path: str
    format: str
    mode: str
    devices: list[DeviceReport]
    summary: Summary
    steps: list[StepReport]
    gap_histogram: dict[str, list[float]]
    top_gaps: list[GapRow]
    top_kernels: list[dict]
    rank: int | None
    world_size: int | None
    warnings: list[str]
    workload: Workload | None = None
    capture: CaptureReport | None = None
    #: :meth:`launchgap.graph_mode.CapturePairing.to_dict` when a capture trace was given beside this one.
    capture_pairing: dict | None = None
    #: The FULL-graph cost curve of the trace's decode steps (:mod:`launchgap.costmodel`) and the eager cost per size
    #: beside it, for the planner and the dashboard; not in the JSON report (``None`` without decode steps).
    cost_curve: CostCurve | None = field(default=None, compare=False)
    eager_curve: EagerCurve | None = field(default=None, compare=False)

    def to_dict(self) -> dict:
        d = asdict(replace(self, cost_curve=None, eager_curve=None))
        d.pop("cost_curve", None)
        d.pop("eager_curve", None)
        d["workload"] = self.workload.to_dict() if self.workload is not None else None
        return d


def _f(x: float) -> float:
    """Round a float for the report (0.001 us = 1 ns resolution) and make NaN/inf JSON-safe."""
    if x is None or not np.isfinite(x):
        return 0.0 if x is None or np.isnan(x) else float(np.sign(x) * 1e18)
    return round(float(x), 3)


def _median(a: np.ndarray) -> float:
    return float(np.median(a)) if a.size else 0.0


def _overhead(settings: ProfilerSettings, opts: AnalysisOptions, lm: _LaunchMetrics, keep: np.ndarray,
              cpu_us: np.ndarray, compiled: bool = False) -> OverheadEstimate:
    """The profiler's cost for a trace (``cpu_us``: the kept steps' CPU ranges). A ratio-model tier
    takes its per-event figure from the eager steps (no graph launch: the profiled host work the
    ratio was measured on): their GPU window, or in a trace with graph replays, where the host runs
    ahead of the GPU, the longer of it and their CPU range (as the graph-serving estimate of an
    eager step does); a trace without eager steps takes the tier's rate."""
    graphs = lm.graph_launches[keep]
    eager = graphs == 0
    step = np.maximum(cpu_us, lm.win_us[keep]) if graphs.any() else lm.win_us[keep]
    return estimate_overhead(settings, opts.model.overhead, opts.model.profiler_us_per_host_event,
                             _median(step[eager]) or None, _median(lm.host_events[keep][eager]) or None,
                             compiled=compiled and not graphs.any(),
                             python_calls=_median(lm.python_calls[keep][eager]) or None)


def analyze_trace(trace: Trace, options: AnalysisOptions | None = None,
                  wait_ns: np.ndarray | None = None, collective: np.ndarray | None = None) -> TraceReport:
    """Diagnose one parsed trace. Pure: the trace is not modified.

    ``wait_ns`` (per row) marks time collectives spent waiting for peers
    (:mod:`launchgap.collectives`); it is counted as idle with cause ``peer``. ``collective``: the rows of the
    trace's communication kernels where the caller found them already (the wait estimate does), else found here
    (:func:`launchgap.collectives.collective_rows`): their replay nodes are priced apart.

    The stages, each a helper below: steps and their rows; per-(step, device) GPU windows;
    idle causes per window; launch metrics per step; then one report row per step and the
    summary. A new diagnosis is one more stage call here.
    """
    opts = options or AnalysisOptions()
    warnings = list(trace.warnings)
    capture = detect_capture(trace)
    if capture is not None:
        return _capture_trace_report(trace, capture, opts, warnings)
    # The heap is trimmed after the stages that free table-long temporaries: glibc keeps freed blocks resident
    # until then, and a 1 GB trace's stages each free tens of MiB (docs/performance.md, issue 30).
    gaps, busy = compute_gaps(trace, wait_ns)
    HEAP.trim()
    steps = find_steps(trace, opts.steps)
    row_step = assign_rows_to_steps(trace, steps)
    HEAP.trim()
    # (read only: without collectives' waits it is the start column itself, not a copy of it)
    eff_start = trace.start_ns + np.minimum(wait_ns, trace.dur_ns) if wait_ns is not None else trace.start_ns

    win = _step_windows(trace, len(steps), row_step, busy, eff_start)
    if win.n_steps and not win.step_ok.all():
        warnings.append(f"{int((~win.step_ok).sum())} of {win.n_steps} steps launched no GPU work and were left out")
    idle = _window_idle_causes(gaps, win)
    coll = collective_rows(trace) if collective is None else collective
    node_us, node_source, coll_node_us = replay_node_us(trace, opts.model, coll)
    lm = _launch_metrics(trace, row_step, win, eff_start, opts.model, node_us,
                         opts.model.kernel_scale(node_source), coll, coll_node_us)
    HEAP.trim()
    if (staged := win.step_ok & (lm.staging_count > 0)).any():
        warnings.append(f"{int(np.median(lm.staging_count[staged])):,} device-to-device copies a step between graph "
                        f"pieces ({float(np.median(lm.staging_us[staged])):,.1f} us, median; {int(staged.sum()):,} of "
                        f"{int(win.step_ok.sum()):,} steps) left out of their predicted FULL-graph step: a piecewise "
                        f"runner's staging of each piece's inputs, which a FULL graph does not run (docs/prediction.md, "
                        f"Piecewise steps)")
    cov = step_coverage(trace, row_step, len(steps))
    stalls = _step_stalls(trace, row_step, gaps, idle, win)
    HEAP.trim()

    keep = np.flatnonzero(win.step_ok)
    settings = detect_profiler_settings(trace)
    cpu_us = (steps.cpu_end_ns[keep] - steps.cpu_start_ns[keep]) / 1e3
    evidence = compile_evidence(trace)
    oh = _overhead(settings, opts, lm, keep, cpu_us, compiled=bool(evidence))
    eager = lm.graph_launches[keep] == 0
    if opts.model.profiler_us_per_host_event is None and opts.observed_step_us is None and (
            mix := op_mix_warning(opts.model.overhead, _median(lm.host_events[keep][eager]),
                                  _median(lm.kernel_launches[keep][eager]), compiled=bool(evidence))):
        warnings.append(mix)  # the model's own estimate of the unprofiled step, outside the steps it was fitted on
    lm = _bounded_prediction(lm, cov, stalls, opts.model, oh)
    step_reports = _step_reports(steps, win, idle, lm, cov, stalls)
    # FULL replays whose host work began before the previous kept step's GPU work on the same device ended
    ahead = host_ahead(steps.cpu_start_ns[keep], win.w1_ns[win.pkey[keep]], win.prim[keep])
    overlapped = ahead & np.array([r.graph_coverage == "full" for r in step_reports], dtype=bool)
    inputs = _SummaryInputs(
        source=steps.source, steps=step_reports, win_us=lm.win_us[keep], busy_us=lm.busy_us[keep],
        pred_us=lm.pred_us[keep], host_events=lm.host_events[keep], delays_ns=lm.delays_ns,
        launch_api_ns=lm.launch_api_ns[keep], launched_gpu_ns=lm.launched_gpu_ns[keep], settings=settings,
        overhead=oh, floor_us=lm.floor_us[keep], gl_excess_us=lm.gl_excess_us[keep], kx_us=lm.kx_us[keep],
        overlapped=overlapped, python_calls=lm.python_calls[keep])
    summary = replace(_summary(inputs, opts), node_us=_f(node_us), node_us_source=node_source,
                      collective_node_us=None if coll_node_us is None else _f(coll_node_us),
                      host_stall_frames=stalls.frames_table(), host_ahead_steps=int(ahead.sum()))
    mode = classify_mode(summary.kernel_launches_per_step_median, summary.graph_launches_per_step_median,
                         summary.kernels_per_step_median,
                         2 * sum(r.graph_coverage == "piecewise" for r in step_reports) > len(step_reports))
    if mode == "eager" and evidence:
        mode = "compiled"
        summary = replace(summary, compile_evidence=evidence,
                          compile_mode="reduce-overhead" if graph_trees_marker(trace) else "no graphs")
    engine = detect_engine(trace, steps)
    summary = _with_step_groups(summary, inputs, opts, engine)
    HEAP.trim()
    step_reports, summary, curves = _with_graph_serving(trace, row_step, steps, win, lm, keep, step_reports, summary,
                                                        inputs.overhead, opts, engine, warnings, busy,
                                                        eff_start if wait_ns is not None else None)
    HEAP.trim()
    summary = _with_serving_units(decide(_with_whole_step(_with_kept_host(summary), opts.model.overhead.graph_rel_err),
                                         mode))
    return TraceReport(
        path=trace.path, format=trace.format, mode=mode,
        devices=_device_reports(trace, gaps, busy, eff_start), summary=summary, steps=step_reports,
        gap_histogram=_gap_histogram(gaps, idle.gap_key),
        top_gaps=_top_gaps(trace, row_step, gaps, idle.gap_key, win.n_dev, opts.top_gaps),
        top_kernels=[r.to_dict() for r in kernel_launch_table(trace, opts.top_kernels)],
        rank=trace.rank, world_size=trace.world_size, warnings=warnings, workload=workload_of(trace, row_step),
        cost_curve=curves[0], eager_curve=curves[1],
    )


@dataclass(frozen=True)
class _StepWindows:
    """GPU windows per (step, device), flattened as ``key = step * n_dev + device position``.

    ``w0_ns``/``w1_ns``: first start / last end of the step's GPU ops on that device (0 when
    it has none, ``has`` False); ``busy_ns``: busy time inside the window. The step's primary
    device ``prim`` is the one it kept busiest; ``pkey`` its key; ``step_ok`` whether the step
    launched any GPU work. ``g_rows``/``g_key``: GPU rows inside steps and their keys.
    """

    n_steps: int
    n_dev: int
    devices: np.ndarray
    g_rows: np.ndarray
    g_key: np.ndarray
    w0_ns: np.ndarray
    w1_ns: np.ndarray
    has: np.ndarray
    busy_ns: np.ndarray
    prim: np.ndarray
    pkey: np.ndarray
    step_ok: np.ndarray


def _step_windows(trace: Trace, n_steps: int, row_step: np.ndarray, busy: list[DeviceBusy],
                  eff_start: np.ndarray) -> _StepWindows:
    devices = np.array([b.device for b in busy], dtype=np.int64)
    n_dev = max(len(devices), 1)
    # positions and keys int32 below 2^31 (kept through the analysis: 325 k GPU ops on a 1 GB trace)
    g_rows = np.flatnonzero(trace.gpu_mask & (row_step >= 0)).astype(np.int32 if len(trace) < 2**31 else np.int64)
    dpos = np.searchsorted(devices, trace.device[g_rows]) if devices.size else np.zeros(0, int)
    n_keys = n_steps * n_dev
    key = (row_step[g_rows] * n_dev + dpos).astype(_key_type(n_keys))
    w0 = np.full(n_keys, np.iinfo(np.int64).max, dtype=np.int64)
    w1 = np.full(n_keys, np.iinfo(np.int64).min, dtype=np.int64)
    np.minimum.at(w0, key, eff_start[g_rows])
    np.maximum.at(w1, key, trace.end_ns[g_rows])
    has = np.bincount(key, minlength=n_keys) > 0
    w0 = np.where(has, w0, 0)
    w1 = np.where(has, w1, 0)
    busy_key = np.zeros(n_keys, dtype=np.int64)
    for i, b in enumerate(busy):  # loop over devices
        sel = np.arange(n_steps) * n_dev + i
        busy_key[sel] = np.where(has[sel], b.busy_between(w0[sel], w1[sel]), 0)
    busy_mat = busy_key.reshape(n_steps, n_dev)
    prim = (np.argmax(np.where(has.reshape(n_steps, n_dev), busy_mat, -1), axis=1) if n_steps
            else np.zeros(0, int))
    pkey = np.arange(n_steps) * n_dev + prim
    step_ok = has[pkey] if n_steps else np.zeros(0, bool)
    return _StepWindows(n_steps=n_steps, n_dev=n_dev, devices=devices, g_rows=g_rows, g_key=key, w0_ns=w0,
                        w1_ns=w1, has=has, busy_ns=busy_key, prim=prim, pkey=pkey, step_ok=step_ok)


def _key_type(n_keys: int) -> type:
    """Window keys' integer type: int32 below 2^31 keys."""
    return np.int32 if n_keys < 2**31 else np.int64


@dataclass(frozen=True)
class _WindowIdle:
    """Idle ns per cause per window key, and for each gap the key of its first window (-1: none)."""

    cause_ns: dict[str, np.ndarray]
    gap_key: np.ndarray


def _window_idle_causes(gaps: Gaps, win: _StepWindows) -> _WindowIdle:
    # Windows are bounded by op starts/ends, so a gap is either inside a window or outside it.
    # Cause totals per window come from prefix sums over the device's sorted gaps, which stays
    # exact even when two steps' windows overlap; gap_key labels each gap with its first step.
    n_keys = win.n_steps * win.n_dev
    cause_key = {c: np.zeros(n_keys) for c in CAUSES}
    gap_key = np.full(len(gaps), -1, dtype=_key_type(n_keys))
    for i, d in enumerate(win.devices.tolist()):  # loop over devices
        sel_g = np.flatnonzero(gaps.device == d)
        keys_d = np.arange(win.n_steps) * win.n_dev + i
        valid = keys_d[win.has[keys_d]]
        if valid.size == 0 or sel_g.size == 0:
            continue
        g_s, g_e = gaps.start_ns[sel_g], gaps.end_ns[sel_g]
        lo = np.searchsorted(g_s, win.w0_ns[valid], side="left")
        hi = np.searchsorted(g_e, win.w1_ns[valid], side="right")
        hi = np.maximum(hi, lo)
        for c in CAUSES:
            cum = np.concatenate([[0], np.cumsum(gaps.cause_ns(c)[sel_g])])
            cause_key[c][valid] = cum[hi] - cum[lo]
        order = np.argsort(win.w0_ns[valid], kind="stable")
        vs, ve = win.w0_ns[valid][order], win.w1_ns[valid][order]
        j = np.searchsorted(vs, g_s, side="right") - 1
        inside = j >= 0
        inside[inside] = g_e[inside] <= ve[j[inside]]
        gap_key[sel_g[inside]] = valid[order][j[inside]]
    return _WindowIdle(cause_ns=cause_key, gap_key=gap_key)


@dataclass(frozen=True)
class _LaunchMetrics:
    """Per-step launch counts and times (arrays of length n_steps; see :class:`StepReport`)."""

    kernel_launches: np.ndarray
    graph_launches: np.ndarray
    launch_api_ns: np.ndarray
    host_events: np.ndarray
    kernels: np.ndarray
    launched_gpu_ns: np.ndarray
    delay_median_ns: np.ndarray
    delays_ns: np.ndarray
    win_us: np.ndarray
    busy_us: np.ndarray
    pred_us: np.ndarray
    #: Per step the least its unprofiled time can be (0: no bound; see :func:`_bounded_prediction`).
    floor_us: np.ndarray
    #: Per step the profiler's part of its graph launch calls, us (:func:`launchgap.predict.graph_launch_excess_us`).
    gl_excess_us: np.ndarray
    #: Per step the profiler's lengthening of its graph replays' kernels, us: ``(1 - kernel_scale)`` of its busy time in
    #: a step with graph launches (0 elsewhere, and where the node cost is the prior's).
    kx_us: np.ndarray
    #: Per step the Python calls a ``with_stack`` trace recorded in its GPU window (any thread; 0 without stacks).
    python_calls: np.ndarray
    #: Per step the piecewise runner's staging copies between its graph pieces (count, us): not in the FULL step
    #: (:func:`launchgap.predict.piece_staging_copies`).
    staging_count: np.ndarray
    staging_us: np.ndarray


def _launch_metrics(trace: Trace, row_step: np.ndarray, win: _StepWindows, eff_start: np.ndarray,
                    model: PredictionModel, node_us: float, kernel_scale: float, collective: np.ndarray,
                    collective_node_us: float | None) -> _LaunchMetrics:
    n_steps, g_rows = win.n_steps, win.g_rows
    # Masks over the whole table (a byte a row), not copies of the rows in steps: memory of a large trace.
    in_step = row_step >= 0
    is_kl = (trace.api == Api.KERNEL_LAUNCH) & in_step
    is_gl = (trace.api == Api.GRAPH_LAUNCH) & in_step
    kernel_launches = _per_step(row_step, is_kl, n_steps)
    graph_launches = _per_step(row_step, is_gl, n_steps)
    is_launch = is_kl | is_gl
    del is_kl, is_gl
    launch_api_ns = _per_step(row_step, is_launch, n_steps, trace.dur_ns)
    del is_launch
    host_ev = ((trace.kind == Kind.CPU_OP) | (trace.kind == Kind.RUNTIME)) & in_step
    host_events = _per_step(row_step, host_ev, n_steps)
    del host_ev, in_step
    g_step = row_step[g_rows]
    kern = trace.kind[g_rows] == Kind.KERNEL
    kernels = np.bincount(g_step[kern], minlength=n_steps)
    launched_by = trace.api[trace.launch_idx[g_rows]]
    by_launch = np.isin(launched_by, (Api.KERNEL_LAUNCH, Api.GRAPH_LAUNCH))
    launched_gpu_ns = np.bincount(g_step[by_launch], weights=trace.dur_ns[g_rows][by_launch], minlength=n_steps)
    on_prim = win.g_key == win.pkey[g_step] if n_steps else np.zeros(0, bool)
    # A collective's wait for peers is not work: it neither hides a node's cost nor counts as long.
    work_ns = trace.end_ns[g_rows] - eff_start[g_rows]
    short = on_prim & (trace.kind[g_rows] != Kind.GRAPH) & (work_ns < model.long_kernel_us * 1e3)
    n_short = np.bincount(g_step[short], minlength=n_steps)
    n_short_coll = np.bincount(g_step[short & np.isin(g_rows, collective)], minlength=n_steps) \
        if collective_node_us is not None else np.zeros(n_steps)
    d_ops, d_ns = launch_delays_ns(trace)
    d_step = row_step[d_ops]
    delay_med = np.zeros(n_steps)
    if d_ops.size:
        ok = d_step >= 0
        order = np.lexsort((d_ns[ok], d_step[ok]))
        cnt = np.bincount(d_step[ok], minlength=n_steps)
        first = np.concatenate([[0], np.cumsum(cnt)[:-1]])
        has_d = cnt > 0
        delay_med[has_d] = d_ns[ok][order][first[has_d] + (cnt[has_d] - 1) // 2]
    pkey = win.pkey
    win_us = (win.w1_ns[pkey] - win.w0_ns[pkey]) / 1e3 if n_steps else np.zeros(0)
    busy_us = win.busy_ns[pkey] / 1e3 if n_steps else np.zeros(0)
    staging = piece_staging_copies(trace, g_rows[on_prim], g_step[on_prim], graph_launches, model)
    return _LaunchMetrics(
        kernel_launches=kernel_launches, graph_launches=graph_launches, launch_api_ns=launch_api_ns,
        host_events=host_events, kernels=kernels, launched_gpu_ns=launched_gpu_ns, delay_median_ns=delay_med,
        delays_ns=d_ns, win_us=win_us, busy_us=busy_us,
        pred_us=replace(model, node_us=node_us).predict_graph_us(busy_us - staging.us, n_short - staging.short,
                                                                 kernel_scale, n_short_coll, collective_node_us),
        floor_us=np.zeros(n_steps),
        gl_excess_us=graph_launch_excess_us(trace, row_step, n_steps, model),
        kx_us=np.where(graph_launches > 0, (1.0 - kernel_scale) * busy_us, 0.0),
        python_calls=_python_calls_per_step(trace, win), staging_count=staging.count, staging_us=staging.us)


def _python_calls_per_step(trace: Trace, win: _StepWindows) -> np.ndarray:
    """Python calls (``python_function`` events, any thread) that begin inside each step's GPU window on its
    primary device: the host work the window waited for (an engine prepares a graph replay's inputs after the
    step's first copies, outside its annotated range)."""
    start = trace.python_calls.start_ns
    if start.size == 0 or win.n_steps == 0:
        return np.zeros(win.n_steps)
    w0, w1 = win.w0_ns[win.pkey], win.w1_ns[win.pkey]
    return np.where(win.step_ok, np.searchsorted(start, w1) - np.searchsorted(start, w0), 0).astype(float)


def _per_step(row_step: np.ndarray, mask: np.ndarray, n_steps: int, weights: np.ndarray | None = None) -> np.ndarray:
    """``np.bincount(row_step[mask], weights[mask], minlength=n_steps)`` in blocks of rows: no copy of the step
    of every such row (1.6 M host events on a 1 GB trace), nor bincount's int64 cast of it. Weights are whole ns,
    so the float sums are exact in any order."""
    out = np.zeros(n_steps, dtype=np.int64 if weights is None else float)
    for lo in range(0, row_step.shape[0], _ROW_BLOCK):
        m = mask[lo:lo + _ROW_BLOCK]
        w = None if weights is None else weights[lo:lo + _ROW_BLOCK][m]
        out += np.bincount(row_step[lo:lo + _ROW_BLOCK][m], weights=w, minlength=n_steps)[:n_steps]
    return out


#: Rows per block in :func:`_per_step`.
_ROW_BLOCK = 1 << 18


@dataclass(frozen=True, eq=False)
class _Stalls:
    """Host stalls per step (all steps; :mod:`launchgap.host_stalls`) and per frame over the trace."""

    us: np.ndarray
    in_graph_us: np.ndarray
    frame: list[str | None]
    frames: list[tuple[str, float, float]]

    def frames_table(self, top: int = 8) -> list[dict]:
        return [{"frame": f, "us": _f(us), "in_graph_us": _f(ins)} for f, us, ins in self.frames[:top]]


def _step_stalls(trace: Trace, row_step: np.ndarray, gaps: Gaps, idle: _WindowIdle, win: _StepWindows) -> _Stalls:
    """Host stalls inside each step's GPU window on its primary device."""
    n = win.n_steps
    on_prim = idle.gap_key >= 0
    on_prim[on_prim] = idle.gap_key[on_prim] == win.pkey[idle.gap_key[on_prim] // win.n_dev]
    sel = np.flatnonzero(on_prim & ((gaps.host_ns + gaps.sync_ns) > 0))
    # the CPU is late from a gap's start for its host and sync parts (the launch part is the call's own)
    waited_end = gaps.start_ns[sel] + gaps.host_ns[sel] + gaps.sync_ns[sel]
    hs = host_stalls(trace, row_step, n, gaps.start_ns[sel], waited_end, idle.gap_key[sel] // win.n_dev)
    return _Stalls(us=hs.stall_us, in_graph_us=hs.in_graph_us, frame=hs.frame, frames=hs.frames)


def _bounded_prediction(lm: _LaunchMetrics, cov: StepCoverage, stalls: _Stalls, model: PredictionModel,
                        oh: OverheadEstimate) -> _LaunchMetrics:
    """The predicted FULL-graph step with what a graph cannot remove, and never above the step it replaces.

    * A host stall outside the captured forward stays in the graphed step: it is added.
    * A piecewise step's unprofiled time is at least its FULL-graph step plus the host time of its eager
      launches between the graph pieces (``model.piecewise_launch_us`` each): ``floor_us``. The profiler's part
      of its graph launch calls is not in it (``gl_excess_us``, kept for piecewise steps only: a FULL step's GPU
      does not wait for its launches).
    * A graph removes launches and never adds GPU work: a step that replays graphs (FULL, piecewise) is
      predicted at most at its unprofiled estimate (the profiled step less the profiler's cost, at least
      ``floor_us``). An eager step's estimate can fall to its busy time (the host ran ahead of the GPU in a
      graph sequence): it bounds nothing there, and the summary bounds the headline instead.
    * Pricing a ``with_stack`` trace's Python calls takes host time off: it takes a FULL step down to its predicted
      replay at most, not below (where the estimate without them is above the replay: ``floor_us``). An engine that
      prepares the next step while the GPU runs makes calls the GPU never waited for (vLLM's V2 runner: its FULL
      steps fell to their busy time without the floor).
    """
    pred = lm.pred_us + (stalls.us - stalls.in_graph_us)
    cov_arr = np.array(cov.coverage, dtype=object)
    piecewise = cov_arr == "piecewise"
    floor = np.where(piecewise, pred + model.piecewise_launch_us * lm.kernel_launches, 0.0)
    # Only a piecewise step's GPU waits for its later graph launches (each piece's, with eager work between them);
    # a FULL step's graphs run back to back, launched ahead of the GPU
    gl_excess = np.where(piecewise, lm.gl_excess_us, 0.0)
    if oh.python_call_us > 0:
        without = model.unprofiled_step_us(lm.win_us, lm.host_events, lm.busy_us, oh.us_per_event, gl_excess, lm.kx_us)
        floor = np.where(cov_arr == "full", np.minimum(pred, without), floor)
    unprof = np.maximum(model.unprofiled_step_us(lm.win_us, lm.host_events, lm.busy_us, oh.us_per_event, gl_excess,
                                                 lm.kx_us, oh.python_us(lm.python_calls, lm.host_events)), floor)
    return replace(lm, pred_us=np.where(cov_arr != "eager", np.minimum(pred, unprof), pred), floor_us=floor,
                   gl_excess_us=gl_excess)


def _step_reports(steps: Steps, win: _StepWindows, idle: _WindowIdle, lm: _LaunchMetrics,
                  cov: StepCoverage, stalls: _Stalls) -> list[StepReport]:
    out: list[StepReport] = []
    for s in np.flatnonzero(win.step_ok).tolist():  # one row per step (a report row, not an event)
        k = int(win.pkey[s])
        bs = int(steps.batch_size[s])
        la, lg = lm.launch_api_ns[s], lm.launched_gpu_ns[s]
        out.append(StepReport(
            index=s, name=steps.names[s], batch_size=bs if bs >= 0 else None, device=int(win.devices[win.prim[s]]),
            start_us=_f(win.w0_ns[k] / 1e3), dur_us=_f(lm.win_us[s]),
            cpu_us=_f((steps.cpu_end_ns[s] - steps.cpu_start_ns[s]) / 1e3),
            gpu_busy_us=_f(lm.busy_us[s]), gpu_idle_us=_f(lm.win_us[s] - lm.busy_us[s]),
            idle_us_by_cause={c: _f(idle.cause_ns[c][k] / 1e3) for c in CAUSES},
            kernels=int(lm.kernels[s]), kernel_launches=int(lm.kernel_launches[s]),
            graph_launches=int(lm.graph_launches[s]), launch_api_us=_f(la / 1e3), launched_gpu_us=_f(lg / 1e3),
            launch_to_kernel_ratio=_f(la / lg) if lg > 0 else 0.0,
            launch_delay_us_median=_f(lm.delay_median_ns[s] / 1e3), host_events=int(lm.host_events[s]),
            predicted_graph_us=_f(lm.pred_us[s]), phase=steps.phase[s],
            requests=int(steps.requests[s]) if steps.requests[s] >= 0 else None,
            tokens=int(steps.tokens[s]) if steps.tokens[s] >= 0 else None, graph_coverage=cov.coverage[s],
            host_stall_us=_f(stalls.us[s]), host_stall_in_graph_us=_f(stalls.in_graph_us[s]),
            host_stall_frame=stalls.frame[s], python_calls=int(lm.python_calls[s]),
            batch_source=steps.batch_source[s] if bs >= 0 else "none",
            batch_confidence=steps.batch_confidence[s] if bs >= 0 else None, batch_note=steps.batch_note[s],
        ))
    return out


def _device_reports(trace: Trace, gaps: Gaps, busy: list[DeviceBusy], eff_start: np.ndarray) -> list[DeviceReport]:
    out = []
    for b in busy:
        ops = b.ops
        window = int(trace.end_ns[ops].max() - eff_start[ops].min()) if ops.size else 0
        sel = gaps.device == b.device
        causes = {c: _f(gaps.cause_ns(c)[sel].sum() / 1e3) for c in CAUSES}
        out.append(DeviceReport(
            device=b.device, name=trace.device_names.get(b.device, ""),
            kernels=int(np.count_nonzero(trace.kind[ops] == Kind.KERNEL)), gpu_ops=int(ops.size),
            gpu_busy_us=_f(b.busy_ns / 1e3), gpu_window_us=_f(window / 1e3),
            gpu_idle_us=_f((window - b.busy_ns) / 1e3), idle_us_by_cause=causes,
        ))
    return out


@dataclass(frozen=True)
class _SummaryInputs:
    """Per-step arrays of the kept steps (same order as ``steps``) that the summary reduces."""

    source: str
    steps: list[StepReport]
    win_us: np.ndarray
    busy_us: np.ndarray
    pred_us: np.ndarray
    host_events: np.ndarray
    delays_ns: np.ndarray
    launch_api_ns: np.ndarray
    launched_gpu_ns: np.ndarray
    settings: ProfilerSettings
    overhead: OverheadEstimate
    #: Per step the least its unprofiled time can be (piecewise steps; 0 elsewhere).
    floor_us: np.ndarray
    #: Per step the profiler's part of its graph launch calls, and its lengthening of the replays' kernels, us.
    gl_excess_us: np.ndarray
    kx_us: np.ndarray
    #: Per step: a FULL-graph replay whose host work began before the previous step's GPU work ended (the engine
    #: prepared it while that step ran: async scheduling); ``None``: none known.
    overlapped: np.ndarray | None = None
    #: Per step the Python calls recorded in its GPU window (``with_stack``; 0 otherwise).
    python_calls: np.ndarray | None = None


def _unprofiled_range(model: PredictionModel, oh: OverheadEstimate, win_us: np.ndarray, host_events: np.ndarray,
                      busy_us: np.ndarray, floor_us: np.ndarray, gl_excess_us: np.ndarray,
                      kx_us: np.ndarray, python_calls: np.ndarray | None = None
                      ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per step its unprofiled estimate, at least ``floor_us``, and its range: at the profiler's estimated cost per
    host event and per Python call, their high costs (the low estimate) and their low costs (the high estimate); the
    profiler's part of the step's graph launch calls (``gl_excess_us``) and its lengthening of the replays' kernels
    (``kx_us``) are off all three."""
    calls = np.zeros_like(win_us) if python_calls is None else python_calls
    return tuple(np.maximum(model.unprofiled_step_us(win_us, host_events, busy_us, k, gl_excess_us, kx_us,
                                                     oh.python_us(calls, host_events, end)), floor_us)
                 for k, end in ((oh.us_per_event, "point"), (oh.high, "high"), (oh.low, "low")))


def _summary(si: _SummaryInputs, opts: AnalysisOptions) -> Summary:
    steps, source = si.steps, si.source
    win, bus, pred = si.win_us, si.busy_us, si.pred_us
    total_win = float(win.sum())
    idle_by = {c: sum(s.idle_us_by_cause[c] for s in steps) for c in CAUSES}
    step_med = _median(win)
    oh = si.overhead
    unprof = _unprofiled_range(opts.model, oh, win, si.host_events, bus, si.floor_us, si.gl_excess_us, si.kx_us,
                               si.python_calls)
    if si.overlapped is not None and si.overlapped.any():
        # A FULL replay the engine prepared while the previous step ran: its real step is the replay; the GPU idle
        # the trace shows around it is the profiler slowing that host work past the GPU's step (vLLM 0.24 on the
        # H200 without stacks: 3.64 ms estimated from the windows, 2.98 ms predicted replays, ~3.0 ms measured)
        err = opts.model.overhead.graph_rel_err
        unprof = tuple(np.where(si.overlapped, pred * f, u) for u, f in zip(unprof, (1.0, 1.0 - err, 1.0 + err)))
    unprof_med, unprof_lo, unprof_hi = (_median(u) for u in unprof)
    # the headline's graph step is never above the step it replaces (a graph adds no GPU work)
    pred_med = min(_median(pred), unprof_med) if unprof_med > 0 else _median(pred)
    real = opts.observed_step_us if opts.observed_step_us else unprof_med
    sp = (speedup_range(real, real, real, pred_med, opts.model.overhead.graph_rel_err) if opts.observed_step_us
          else speedup_range(unprof_med, unprof_lo, unprof_hi, pred_med, opts.model.overhead.graph_rel_err))
    # Steps that already replay one FULL graph gain nothing from one: their real step less its predicted FULL graph
    # is the profiler's cost inside the replays (+0.2..+6.6% on the H200 FULL-graph serving traces), no gain. An
    # engine's prefill and mixed steps run eager beside them (above its capture sizes) and have their own groups: the
    # decode steps (or steps of no known phase) decide (vLLM 0.24 on the H200: 61 FULL decode steps beside 3 eager
    # prefill and mixed ones read 1.22x, their host gaps taken for a graph's gain)
    decode = [x for x in steps if x.phase in (None, "decode")]
    full = bool(decode) and all(x.graph_coverage == "full" for x in decode)
    if full:
        sp = replace(sp, speedup=1.0, speedup_low=1.0, speedup_high=1.0)
    if opts.observed_step_us and step_med > 0:
        inflation = step_med / opts.observed_step_us
    else:
        inflation = step_med / unprof_med if unprof_med > 0 else 1.0
    d = si.delays_ns / 1e3
    la, lg = si.launch_api_ns.sum(), si.launched_gpu_ns.sum()
    n = max(len(steps), 1)
    stall = sum(x.host_stall_us for x in steps) / n
    stall_in = sum(x.host_stall_in_graph_us for x in steps) / n
    by_frame: dict[str, float] = {}
    for x in steps:  # report rows
        if x.host_stall_frame:
            by_frame[x.host_stall_frame] = by_frame.get(x.host_stall_frame, 0.0) + x.host_stall_us
    batches = [x.batch_size for x in steps if x.batch_size is not None]
    return Summary(
        steps=len(steps), step_source=source, step_us_median=_f(step_med),
        cpu_step_us_median=_f(_median(np.array([s.cpu_us for s in steps]))),
        gpu_busy_us_median=_f(_median(bus)),
        gpu_idle_fraction=_f((total_win - bus.sum()) / total_win) if total_win > 0 else 0.0,
        idle_fraction_by_cause={c: _f(v / total_win) if total_win > 0 else 0.0 for c, v in idle_by.items()},
        kernels_per_step_median=_median(np.array([s.kernels for s in steps], float)),
        kernel_launches_per_step_median=_median(np.array([s.kernel_launches for s in steps], float)),
        graph_launches_per_step_median=_median(np.array([s.graph_launches for s in steps], float)),
        residual_eager_launches_per_step_median=0.0,
        launch_api_us_per_step_median=_f(_median(np.array([s.launch_api_us for s in steps]))),
        launch_to_kernel_ratio=_f(la / lg) if lg > 0 else 0.0,
        launch_delay_us_p50=_f(np.percentile(d, 50)) if d.size else 0.0,
        launch_delay_us_p90=_f(np.percentile(d, 90)) if d.size else 0.0,
        launch_delay_us_p99=_f(np.percentile(d, 99)) if d.size else 0.0,
        predicted_graph_step_us_median=_f(pred_med), estimated_unprofiled_step_us_median=_f(unprof_med),
        estimated_profiler_inflation=_f(inflation), observed_step_us=opts.observed_step_us,
        predicted_speedup=_f(sp.speedup),
        predicted_speedup_profiled=_f(step_med / pred_med) if pred_med > 0 else 0.0,
        batch_sizes=sorted({s.batch_size for s in steps if s.batch_size is not None}),
        verdict="", verdict_detail="",
        profiler_settings={**si.settings.to_dict(), "overhead_source": oh.source, "notes": list(oh.notes)},
        profiler_overhead_us_per_event=_f(oh.us_per_event), profiler_overhead_us_per_event_low=_f(oh.low),
        profiler_overhead_us_per_event_high=_f(oh.high),
        python_calls_per_step_median=_median(si.python_calls) if si.python_calls is not None else 0.0,
        profiler_python_call_us=_f(oh.python_call_us), profiler_python_call_us_low=_f(oh.python_call_low),
        profiler_python_call_us_high=_f(oh.python_call_high), estimated_unprofiled_step_us_low=_f(unprof_lo),
        estimated_unprofiled_step_us_high=_f(unprof_hi), predicted_speedup_low=_f(sp.speedup_low),
        predicted_speedup_high=_f(sp.speedup_high), predicted_speedup_rule="all FULL" if full else "median step",
        eager_step_source="measured" if opts.observed_step_us else "estimated",
        host_stall_us_per_step=_f(stall), host_stall_in_graph_us_per_step=_f(stall_in),
        host_stall_frame=max(by_frame, key=by_frame.get) if by_frame else None,
        graph_removes_host_us_per_step=_f(max(unprof_med - pred_med, 0.0)),
        graph_keeps_host_us_per_step=_f(stall - stall_in),
        decode_batch_size=int(np.median(batches)) if batches else None,
    )


#: Order in which step groups are listed (and the first present one sets an engine trace's verdict).
_PHASE_ORDER = ("decode", "mixed", "prefill", None)


def _group_text(n: int, phase: str | None, coverage: str, s: Summary) -> str:
    """``"9 decode steps, piecewise: 25 graph launches each, 52 eager launches between them"``."""
    what = f"{n} {phase + ' ' if phase else ''}step{'s' if n != 1 else ''}" + ("" if phase else " (phase unknown)")
    gl, el = s.graph_launches_per_step_median, s.kernel_launches_per_step_median
    each = " each" if n != 1 else ""
    if coverage == "eager":
        launches = f"{el:g} eager launches{each}"
    elif coverage == "full":
        launches = (f"{gl:g} graph launch{'es' if gl != 1 else ''}{each} and {el:g} eager launches left for "
                    f"{s.kernels_per_step_median:g} kernels")
    else:
        launches = f"{gl:g} graph launches{each}, {el:g} eager launches between them"
    return f"{what}, {coverage}: {launches}"


def _with_step_groups(s: Summary, si: _SummaryInputs, opts: AnalysisOptions, engine: str | None) -> Summary:
    """Add the engine, steps per coverage and per-(phase, coverage) groups, each with its own figures
    (:data:`launchgap.verdict.GROUP_FIELDS`); :func:`launchgap.verdict.decide` gives each its verdict."""

    steps = si.steps
    by_cov = {c: sum(st.graph_coverage == c for st in steps) for c in COVERAGES}
    groups: list[dict] = []
    for phase in _PHASE_ORDER:
        for cov in COVERAGES:
            idx = np.array([i for i, st in enumerate(steps) if st.phase == phase and st.graph_coverage == cov],
                           dtype=np.int64)
            if idx.size == 0:
                continue
            sub = _summary(_SummaryInputs(
                source=si.source, steps=[steps[i] for i in idx.tolist()], win_us=si.win_us[idx],
                busy_us=si.busy_us[idx], pred_us=si.pred_us[idx], host_events=si.host_events[idx],
                delays_ns=np.zeros(0), launch_api_ns=si.launch_api_ns[idx],
                launched_gpu_ns=si.launched_gpu_ns[idx], settings=si.settings, overhead=si.overhead,
                floor_us=si.floor_us[idx], gl_excess_us=si.gl_excess_us[idx], kx_us=si.kx_us[idx],
                overlapped=None if si.overlapped is None else si.overlapped[idx],
                python_calls=None if si.python_calls is None else si.python_calls[idx]), opts)
            groups.append({"phase": phase, "graph_coverage": cov, "steps": int(idx.size),
                           "description": _group_text(int(idx.size), phase, cov, sub),
                           "eager_launches_per_step_median": sub.kernel_launches_per_step_median,
                           # eager_step_source: the trace's, unless the group's step is taken elsewhere
                           **{k: getattr(sub, k) for k in GROUP_FIELDS if k != "eager_step_source"},
                           "verdict": "", "verdict_detail": ""})
    return replace(s, engine=engine, steps_by_coverage=by_cov, step_groups=groups)


def _with_kept_host(s: Summary) -> Summary:
    """Host work between steps is host time a graph keeps: added to ``graph_keeps_host_us_per_step`` of the
    summary and of each group (the trace's median gap between steps, unprofiled: as the time a graph removes, the
    real step less the graph step, is)."""
    between = s.inter_step_host_us_unprofiled_median if s.steps > 1 else 0.0
    if between <= 0:
        return s
    groups = [{**g, "graph_keeps_host_us_per_step": _f(g["graph_keeps_host_us_per_step"] + between)}
              for g in s.step_groups]
    return replace(s, graph_keeps_host_us_per_step=_f(s.graph_keeps_host_us_per_step + between), step_groups=groups)


def _with_whole_step(s: Summary, graph_rel_err: float) -> Summary:
    """A serving engine's decode steps, priced as the engine's whole step (``whole_step_us_before`` / ``_after``, on the
    headline group and the summary; :func:`launchgap.host_gaps.whole_steps_us`): the step (measured, else the
    unprofiled estimate) and the predicted FULL-graph step, each with what runs between the steps' GPU windows
    (:func:`launchgap.verdict.between_steps_us`). A measured step is the whole step already: nothing is added to it,
    and the graph step is no longer. The headline's speedup and its range become the whole steps' ratio (rule
    ``"whole step"``): it is the time per output token's, and a server's measured inter-token latency compares with
    it (the steps' own ratio left the GPU work between steps out of the graph step: 4.70x where the engine's step
    reads 4.98x, vLLM 0.24 eager, batch 16, traces/h200-vllm-2026-12-04). Steps that already replay one FULL graph
    keep 1.00x (before = after); under the ``decode time`` rule the headline keeps its own sums and the whole steps
    (the summary's only) are the time per output token's. Unchanged where nothing lies between the steps or the
    headline is not an engine's decode steps."""
    gpu_b, host_b = between_steps_us(s)
    if not (gpu_b > 0 or host_b > 0):
        return s
    g0 = s.step_groups[0]
    h = group_summary(s, g0)
    obs = h.observed_step_us if h.eager_step_source == "measured" else None
    if s.predicted_speedup_rule == "decode time":  # its headline sums the trace's steps: the whole step is the TPOT's
        before, after = _whole_step_range(h, obs, graph_rel_err, (gpu_b, host_b))
        return replace(s, whole_step_us_before=_f(before[0]), whole_step_us_after=_f(after[0]))
    if g0["graph_coverage"] == "full" or s.predicted_speedup_rule == "all FULL":
        # its own FULL-graph step already: the GPU work between steps on both sides, no gain
        whole = _f((obs or h.estimated_unprofiled_step_us_median) + (0.0 if obs else gpu_b))
        fields_ = {"whole_step_us_before": whole, "whole_step_us_after": whole}
        rule = s.predicted_speedup_rule
    else:
        fields_ = _speedup_fields(h, obs, graph_rel_err, (gpu_b, host_b))
        rule = "whole step"
    groups = [{**g0, **fields_}, *s.step_groups[1:]]
    top = {k: fields_[k] for k in (*SPEEDUP_FIELDS, "whole_step_us_before", "whole_step_us_after",
                                   "graph_removes_host_us_per_step") if k in fields_}
    return replace(s, **top, predicted_speedup_rule=rule, step_groups=groups)


def _with_serving_units(s: Summary) -> Summary:
    """Time per output token and tokens/s of the headline's decode steps, before and after CUDA graphs.

    A decode step gives every sequence in the batch one token, so the time per output token (TPOT, ms) is
    the step time and tokens/s is the batch over it: *before* from the real step (measured, else the
    unprofiled estimate), *after* from the predicted FULL-graph step (the real step itself where every step already
    replays one FULL graph, which it predicts; never above *before*); ``None`` where no step is known or the headline's
    steps are not decode steps (an engine trace of prefill steps only). Each sequence's TPOT is the step's whatever
    the batch; tokens/s at ``decode_batch_size`` (the median batch of the headline's steps; ``None``, and tokens/s
    with it, where no batch size is known).

    A serving engine's decode steps are priced as the engine's whole step (:func:`_with_whole_step`:
    ``whole_step_us_before`` / ``_after``): ``decode_tpot_between_steps_us`` says what *before* holds past the step
    (nothing where the step was measured: the whole step already).
    """
    h = headline(s)
    phase = s.step_groups[0]["phase"] if s.step_source == "engine" and s.step_groups else None
    if s.steps == 0 or phase not in (None, "decode"):
        return s
    before = h.observed_step_us if h.eager_step_source == "measured" else h.estimated_unprofiled_step_us_median
    after = min(h.predicted_graph_step_us_median, before) if before else h.predicted_graph_step_us_median
    # steps that already replay one FULL graph are their own FULL-graph step: the predicted one differs from their
    # estimate only by the profiler's cost inside the replays, which is no gain (the 1.00x headline's rule)
    if h.predicted_speedup_rule == "all FULL" and before:
        after = before
    between = 0.0
    if s.whole_step_us_before > 0 and before:  # an engine's decode steps: the engine's whole step
        between, before, after = s.whole_step_us_before - before, s.whole_step_us_before, s.whole_step_us_after
    b = h.decode_batch_size
    return replace(
        s, decode_batch_size=b, decode_tpot_between_steps_us=_f(between),
        decode_tpot_ms_before=_f(before / 1e3) if before else None,
        decode_tpot_ms_after=_f(after / 1e3) if after else None,
        decode_tokens_per_s_before=_f(b * 1e6 / before) if b and before else None,
        decode_tokens_per_s_after=_f(b * 1e6 / after) if b and after else None)


def _no_gaps() -> Gaps:
    return Gaps(**{f.name: np.zeros(0, dtype=np.int64) for f in fields(Gaps)})


def _capture_trace_report(trace: Trace, capture: CaptureReport, opts: AnalysisOptions,
                          warnings: list[str]) -> TraceReport:
    """A capture trace: what was captured, no steps, gaps or speedup (nothing of interest ran)."""

    empty = np.zeros(0)
    settings = detect_profiler_settings(trace)
    summary = _summary(_SummaryInputs(
        source="capture", steps=[], win_us=empty, busy_us=empty, pred_us=empty, host_events=empty, delays_ns=empty,
        launch_api_ns=empty, launched_gpu_ns=empty, settings=settings,
        overhead=estimate_overhead(settings, opts.model.overhead, opts.model.profiler_us_per_host_event),
        floor_us=empty, gl_excess_us=empty, kx_us=empty), opts)
    sizes = sorted({x for x in capture.sizes if x is not None})
    modes = sorted({x for x in capture.modes if x is not None})
    nodes = capture.nodes_per_graph
    what = f"{capture.graphs} graph{'s' if capture.graphs != 1 else ''} captured"
    if sizes:
        what += f" for size{'s' if len(sizes) != 1 else ''} {', '.join(map(str, sizes))}"
    if modes:
        what += f" ({', '.join(modes)})"
    if nodes:
        per = f"{nodes[0]}" if len(set(nodes)) == 1 else f"{min(nodes)}-{max(nodes)}"
        what += f", {per} kernel launches recorded per graph"
    detail = (f"CUDA-graph capture trace: {what}; {capture.launches_recorded} launches recorded into graphs ran "
              f"nothing, {capture.kernels_run} kernels ran. No gap diagnosis or speedup for a capture trace: "
              f"analyse a trace of the graphs' replays")
    engine = detect_engine(trace)
    summary = replace(summary, verdict="capture trace", verdict_detail=detail, engine=engine)
    return TraceReport(path=trace.path, format=trace.format, mode="capture", devices=[], summary=summary, steps=[],
                       gap_histogram=_gap_histogram(_no_gaps(), np.zeros(0, dtype=np.int64)), top_gaps=[],
                       top_kernels=[], rank=trace.rank, world_size=trace.world_size, warnings=warnings,
                       capture=capture)


def with_capture(report: TraceReport, trace: Trace, capture: Trace, options: AnalysisOptions | None = None,
                 ) -> TraceReport:
    """``report`` (of ``trace``) with ``capture_pairing`` from the capture trace ``capture``.

    A capture trace's own report is returned unchanged (it has no replays); a pairing that names no
    replay adds a warning.
    """
    if report.mode == "capture":
        return report
    opts = options or AnalysisOptions()
    row_step = assign_rows_to_steps(trace, find_steps(trace, opts.steps))
    pairing = pair_capture(trace, capture, row_step)
    warnings = list(report.warnings)
    if pairing.replays and not pairing.replays_matched:
        warnings.append(f"capture trace {capture.path}: none of the {pairing.replays} graph replays matched a "
                        f"captured graph (another engine run, or other sizes?)")
    return replace(report, capture_pairing=pairing.to_dict(opts.top_kernels), warnings=warnings)


def with_observed_step(report: TraceReport, observed_step_us: float | None,
                       graph_rel_err: float = DEFAULT_MODEL.overhead.graph_rel_err) -> TraceReport:
    """The report with a measured eager step (e.g. a server's inter-token latency, us) in place of the
    estimate: speedup, its range, inflation, serving units and verdict recomputed from the summary, nothing
    re-analysed. ``None`` or 0 gives the estimate back. ``graph_rel_err`` is the graph step's error band.
    For a serving engine's steps the measured step is the headline group's (decode first): its speedup is
    recomputed too, and :func:`launchgap.verdict.decide` decides every verdict again, as at analysis; under the
    ``whole step`` rule the measured step is the engine's whole step (:func:`_with_whole_step`). Under the
    ``decode time`` rule (:func:`_decode_time`) the trace's headline speedup is kept: it sums the trace's own
    steps, graph replays and eager steps apart, which one measured step cannot split; under ``all FULL`` (and for a
    FULL group) it stays 1.00x: the steps already replay one FULL graph."""

    if report.mode == "capture":  # nothing to calibrate: a capture trace makes no speedup claim
        return report
    s = report.summary
    obs = observed_step_us if observed_step_us and observed_step_us > 0 else None
    # the decode-time headline stands on the trace's own steps: one measured step cannot say which ran eager; steps
    # that already replay one FULL graph gain nothing from one, measured or estimated (the all-FULL rule)
    keep = SPEEDUP_FIELDS if s.predicted_speedup_rule in ("decode time", "all FULL") else ()
    new = replace(s, **{k: v for k, v in _speedup_fields(s, obs, graph_rel_err).items() if k not in keep})
    infl = (s.step_us_median / (obs or s.estimated_unprofiled_step_us_median)
            if (obs or s.estimated_unprofiled_step_us_median) > 0 and s.step_us_median > 0 else 1.0)
    new = replace(new, observed_step_us=obs, eager_step_source="measured" if obs else "estimated",
                  estimated_profiler_inflation=_f(infl))
    if s.step_source == "engine" and s.step_groups:
        g0 = s.step_groups[0]
        first = {**g0, **({} if g0.get("graph_coverage") == "full" else _speedup_fields(headline(s), obs, graph_rel_err))}
        if obs:  # a measured step replaces an eager-curve estimate too: the group says "measured", as the trace
            first.pop("eager_step_source", None)
        new = replace(new, step_groups=[first, *s.step_groups[1:]])
    # a measured step: the doubt on the estimate (op_mix_warning) no longer applies
    warnings = [w for w in report.warnings if not w.startswith(OP_MIX_WARNING_START)] if obs else report.warnings
    return replace(report, summary=_with_serving_units(decide(_with_whole_step(new, graph_rel_err), report.mode)),
                   warnings=warnings)


def _speedup_fields(s, obs: float | None, graph_rel_err: float, between: tuple[float, float] = (0.0, 0.0)) -> dict:
    """``predicted_speedup`` and its range for the steps ``s`` summarises, from a measured step ``obs``
    (``None``: the unprofiled estimate and its range). ``between``: a serving engine's (GPU work, host gap) between
    its steps (:func:`launchgap.verdict.between_steps_us`); where either is non-zero the ratio is the engine's whole
    steps' (:func:`launchgap.host_gaps.whole_steps_us`; a measured step is the whole step, the graph step no longer),
    returned as ``whole_step_us_before`` / ``_after`` too. The low end pairs the slow eager end with the slow graph
    end (``graph_rel_err`` above the prediction), the high end the fast ones."""
    pred = s.predicted_graph_step_us_median
    # the host time a graph removes is the step's, not what lies between steps (the time a graph keeps): a measured
    # whole step less the time between steps
    real = obs - max(between) if obs else s.estimated_unprofiled_step_us_median
    removes = {"graph_removes_host_us_per_step": _f(max(real - pred, 0.0))}
    if not (between[0] > 0 or between[1] > 0):
        sp = (speedup_range(obs, obs, obs, pred, graph_rel_err) if obs else
              speedup_range(s.estimated_unprofiled_step_us_median, s.estimated_unprofiled_step_us_low,
                            s.estimated_unprofiled_step_us_high, pred, graph_rel_err))
        return {"predicted_speedup": _f(sp.speedup), "predicted_speedup_low": _f(sp.speedup_low),
                "predicted_speedup_high": _f(sp.speedup_high), **removes}
    before, after = _whole_step_range(s, obs, graph_rel_err, between)
    ratio = np.divide(before, after, out=np.zeros(3), where=after > 0)
    return {"predicted_speedup": _f(ratio[0]), "predicted_speedup_low": _f(min(ratio[1], ratio[0])),
            "predicted_speedup_high": _f(max(ratio[2], ratio[0])), **removes,
            "whole_step_us_before": _f(before[0]), "whole_step_us_after": _f(after[0])}


def _whole_step_range(s, obs: float | None, graph_rel_err: float, between: tuple[float, float]
                      ) -> tuple[np.ndarray, np.ndarray]:
    """The engine's whole step before and after CUDA graphs (us), each [point, slow end, fast end], for the steps ``s``
    summarises with ``between`` (:func:`launchgap.host_gaps.whole_steps_us`): a measured step ``obs`` is the whole step
    already (nothing added to it), and the graph step is no longer than it."""
    eager = np.array([obs] * 3 if obs else [s.estimated_unprofiled_step_us_median, s.estimated_unprofiled_step_us_low,
                                            s.estimated_unprofiled_step_us_high], dtype=float)
    graph = s.predicted_graph_step_us_median * np.array([1.0, 1.0 + graph_rel_err, max(1.0 - graph_rel_err, 1e-9)])
    before, after = whole_steps_us(eager, graph, *between)
    return (eager, np.minimum(after, obs)) if obs else (before, after)


def _gap_histogram(gaps: Gaps, gap_key: np.ndarray) -> dict[str, list[float]]:
    """Counts and total idle of in-step gaps by duration bin (edges in us)."""
    sel = gap_key >= 0
    dur_us = gaps.dur_ns[sel] / 1e3
    edges = np.array(GAP_HIST_EDGES_US)
    idx = np.clip(np.searchsorted(edges, dur_us, side="right") - 1, 0, len(edges) - 2)
    counts = np.bincount(idx, minlength=len(edges) - 1)
    total = np.bincount(idx, weights=dur_us, minlength=len(edges) - 1)
    return {"edges_us": [e if np.isfinite(e) else -1.0 for e in edges.tolist()],
            "count": counts.astype(float).tolist(), "idle_us": [round(v, 3) for v in total.tolist()]}


#: The shortest gap listed among the longest (``top_gaps``): 50 ns, under which it prints as 0.0 us.
TOP_GAP_MIN_NS = 50


def _top_gaps(trace: Trace, row_step: np.ndarray, gaps: Gaps, gap_key: np.ndarray, n_dev: int,
              top: int) -> list[GapRow]:
    if len(gaps) == 0:
        return []
    idx = np.argsort(-gaps.dur_ns, kind="stable")[:top]
    idx = idx[gaps.dur_ns[idx] >= TOP_GAP_MIN_NS]  # back-to-back copies' few ns read "0.0 us": no gap worth listing
    cause_mat = np.stack([gaps.cause_ns(c)[idx] for c in CAUSES])
    main = np.argmax(cause_mat, axis=0)
    activity = host_activity(trace, row_step, gaps.start_ns[idx], gaps.end_ns[idx])
    return [GapRow(device=int(gaps.device[i]), step=int(gap_key[i] // n_dev) if gap_key[i] >= 0 else None,
                   start_us=_f(gaps.start_ns[i] / 1e3), dur_us=_f(gaps.dur_ns[i] / 1e3), cause=CAUSES[int(m)],
                   before=str(trace.names[trace.name_id[gaps.prev_row[i]]]),
                   after=str(trace.names[trace.name_id[gaps.next_row[i]]]),
                   host_activity_us=dict(sorted(act.items(), key=lambda kv: -kv[1])[:5]))
            for i, m, act in zip(idx.tolist(), main.tolist(), activity)]


_DECODE_OR_UNKNOWN = ("decode", None)


def _with_graph_serving(trace: Trace, row_step: np.ndarray, steps: Steps, win: _StepWindows, lm: _LaunchMetrics,
                        keep: np.ndarray, reports: list[StepReport], s: Summary, oh: OverheadEstimate,
                        opts: AnalysisOptions, engine: str | None, warnings: list[str], busy: list[DeviceBusy],
                        work_start_ns: np.ndarray | None = None
                        ) -> tuple[list[StepReport], Summary, tuple[CostCurve | None, EagerCurve | None]]:
    """Graph-mode serving per step and in the summary (:func:`launchgap.graph_mode.assembly.assemble_serving`):
    capture sizes, fallbacks and the time they lose, buckets, padded rows and their cost, host time between
    steps; here only turned into report rows and summary fields, with the planner's comparison; and the trace's
    FULL-graph cost curve with the eager cost per size beside it (for the planner). A capture list given or assumed
    that the trace's graph steps contradict is added to ``warnings``."""
    n = len(reports)
    if n == 0:
        return reports, s, (None, None)
    cols = StepColumns(
        step=np.flatnonzero(win.step_ok), coverage=[r.graph_coverage for r in reports],
        batch=np.array([r.batch_size if r.batch_size is not None else -1 for r in reports], dtype=np.int64),
        decode=np.array([r.phase in _DECODE_OR_UNKNOWN for r in reports], dtype=bool), name=[r.name for r in reports],
        device=np.array([r.device for r in reports], dtype=np.int64), cpu_us=np.array([r.cpu_us for r in reports]),
        win_us=lm.win_us[keep], busy_us=lm.busy_us[keep], host_events=lm.host_events[keep], graph_us=lm.pred_us[keep],
        gl_excess_us=lm.gl_excess_us[keep], kx_us=lm.kx_us[keep], python_calls=lm.python_calls[keep],
        kernels=np.array([r.kernels for r in reports], dtype=float),
        w0_ns=win.w0_ns[win.pkey[keep]], w1_ns=win.w1_ns[win.pkey[keep]],
        tokens=np.array([-1 if r.tokens is None else r.tokens for r in reports], dtype=np.int64))
    a = assemble_serving(trace, row_step, [steps.names[i] for i in range(len(steps))], steps.cpu_start_ns, cols,
                         opts.model, oh, _given_sizes(opts, engine), _engine_default(trace, engine), engine,
                         dict(opts.graph_timings_us) if opts.graph_timings_us else None, CURVE_MIN_SIZE,
                         experts=opts.moe_routing, node_us=s.node_us,
                         kernel_scale=opts.model.kernel_scale(s.node_us_source), gpu=busy,
                         work_start_ns=work_start_ns)
    ss, pc, padded, lost, hg = a.ss, a.pad, a.padded, a.lost_us, a.hg
    # the time between steps without the profiler, as a step's: less its cost of the host events and Python calls it
    # recorded there (a step's own events are priced in the step's estimate), never below the GPU work in it
    gap_unprof = opts.model.unprofiled_step_us(hg.gap_us, hg.host_events, hg.gpu_busy_us, oh.us_per_event,
                                               python_us=oh.python_us(hg.python_calls, hg.host_events))
    if a.conflict:
        warnings.append(a.conflict)
    out = []
    for i, r in enumerate(reports):  # one per step (a report row)
        out.append(replace(
            r, bucket=int(ss.bucket[i]) if ss.bucket[i] > 0 else None,
            padded_rows=int(ss.padded_rows[i]) if padded[i] else None,
            padding_us=_f(pc.us[i]) if padded[i] and np.isfinite(pc.us[i]) else None,
            padding_us_low=_f(pc.low[i]) if padded[i] and np.isfinite(pc.low[i]) else None,
            padding_us_high=_f(pc.high[i]) if padded[i] and np.isfinite(pc.high[i]) else None,
            fallback=bool(ss.fallback[i]),
            fallback_eager_us=_f(a.fallback_eager_us[i]) if ss.fallback[i] and np.isfinite(a.fallback_eager_us[i])
            else None,
            fallback_lost_us=_f(lost[i]) if ss.fallback[i] and np.isfinite(lost[i]) else None,
            fallback_cause=a.causes[int(cols.step[i])],
            inter_step_host_us=_f(hg.gap_us[i]) if hg.gap_us[i] >= 0 else None,
            inter_step_host_unprofiled_us=_f(gap_unprof[i]) if hg.gap_us[i] >= 0 else None,
            inter_step_gpu_busy_us=_f(hg.gpu_busy_us[i]) if hg.gap_us[i] >= 0 else None,
            host_phases_us=hg.phases_us[i]))
    rows = int(ss.bucket[padded].sum())
    gaps = hg.gap_us[1:]
    phase_tot: dict[str, float] = {}
    for ph in hg.phases_us:  # per step dicts of a few names
        for k, v in ph.items():
            phase_tot[k] = phase_tot.get(k, 0.0) + v
    n_gaps = max(n - 1, 1)
    estimated = padded & ~pc.measured
    unknown, decode, is_graph = a.unknown, cols.decode, a.is_graph
    s = replace(
        s, capture_sizes=a.sizes, capture_sizes_source=a.source, capture_sizes_detail=a.detail,
        padding_unknown_reason=INFERRED_PADDING_REASON if unknown else None,
        fallback_steps=[reports[i].index for i in np.flatnonzero(ss.fallback).tolist()],
        uncaptured_steps=[reports[i].index for i in np.flatnonzero(ss.uncaptured).tolist()],
        fallback_lost_us_per_step=_f(np.nansum(lost) / n) if ss.fallback.any() else 0.0,
        fallback_eager_detail=a.fallback_eager_detail,
        padded_rows_fraction=_f(ss.padded_rows[padded].sum() / rows) if rows > 0 else 0.0,
        padding_us_per_step=None if unknown else _f(np.nansum(pc.us) / n) if padded.any() else 0.0,
        padding_us_per_step_low=None if unknown else _f(np.nansum(pc.low) / n) if padded.any() else 0.0,
        padding_us_per_step_high=None if unknown else _f(np.nansum(pc.high) / n) if padded.any() else 0.0,
        padding_estimated_steps=int(estimated.sum()),
        padding_own_steps=int(pc.own.sum()) if not unknown else 0,
        padding_cost_source="unknown" if unknown else
        (a.curve.origin + ("-estimate" if estimated.any() else "")) if padded.any() else "none",
        inter_step_host_us_median=_f(_median(gaps)) if gaps.size else 0.0,
        inter_step_host_us_unprofiled_median=_f(_median(gap_unprof[1:])) if gaps.size else 0.0,
        inter_step_gpu_busy_us_median=_f(_median(hg.gpu_busy_us[1:])) if gaps.size else 0.0,
        host_phases_us_per_step={k: _f(v / n_gaps) for k, v in sorted(phase_tot.items(), key=lambda kv: -kv[1])},
        host_phases_source=hg.source,
        async_hidden_us_per_step=_f(hg.hidden_us[1:].sum() / n_gaps) if n > 1 else 0.0)
    # on launchgap plan's costs: the engine's whole steps, the time between them included
    s = replace(s, planner_comparison=_planner_comparison(
        cols.batch[decode], *_eager_costs(a, decode & ~is_graph, cols.batch), a.curve, a.sizes, between_steps_us(s)))
    if a.eager is not None and is_graph.any():
        s = replace(s, step_groups=_eager_groups_on_the_curve(s, out, a.eager, opts.model.overhead.graph_rel_err))
    dt = _decode_time(a, cols, lm.floor_us[keep], oh, opts.model)
    if dt is not None:
        s = replace(s, **dt)
    return out, s, (a.curve, a.eager)


#: The decode-time headline's band on its eager steps' cost (the eager curve, which has none of its own), as a share:
#: on the ten H200 serving traces (bench/verdict_truth.py) the eager curve's step is -21%..+56% from the unprofiled
#: eager truth (within ±30% on 8 of 10), and with ±30% the headline's range holds its truth on 9 of 10.
DECODE_TIME_EAGER_BAND = 0.3


def _decode_time(a, cols: StepColumns, floor_us: np.ndarray, oh: OverheadEstimate, model: PredictionModel
                 ) -> dict | None:
    """The headline of a graph-mode trace whose decode steps (or steps of unknown phase) mix graph replays with eager
    steps (fallbacks, sizes above or outside the capture list): its decode time as run over the same steps each
    replaying one FULL graph, ``Σ real / Σ FULL`` (``predicted_speedup_rule`` ``"decode time"``). The median step
    there is a graph replay's, 1.00x or near it, however long the eager steps run. Per step:

    * FULL replay: real = FULL = its predicted FULL-graph step (it gains nothing);
    * piecewise replay: real = its unprofiled estimate (at least its floor), FULL = its predicted FULL-graph step;
    * eager step: real = the eager curve at its batch (the cost ``launchgap plan`` gives an eager step, as a
      fallback's lost time is costed), FULL = the cost curve at its batch (an uncaptured size, captured) or, for a
      fallback, at the captured bucket it missed (its lost time is that difference: ``fallback_lost_us``).

    Range: FULL steps are exact on both sides; the low end pairs the piecewise steps' low unprofiled estimate (the
    profiler's high cost) and their FULL step +``graph_rel_err``, the eager steps' cost less
    :data:`DECODE_TIME_EAGER_BAND` and their FULL cost at the cost curve's high band; the high end the opposite ends. ``None`` (the median rule
    stays) where the decode steps do not mix, an eager step's batch is unknown or there is no eager curve."""
    cov = np.array(cols.coverage, dtype=object)
    dec = cols.decode
    eager = dec & (cov == "eager")
    graph = dec & (cov != "eager")
    priced = a.ss.fallback | a.ss.uncaptured
    if a.eager is None or not graph.any() or not eager.any() or not priced[eager].all():
        return None
    err = model.overhead.graph_rel_err
    full, pw = graph & (cov == "full"), graph & (cov == "piecewise")
    f_us = float(cols.graph_us[full].sum())
    pw_real, pw_lo, pw_hi = (float(u.sum()) for u in _unprofiled_range(model, oh, cols.win_us[pw],
                                                                        cols.host_events[pw], cols.busy_us[pw],
                                                                        floor_us[pw], cols.gl_excess_us[pw],
                                                                        cols.kx_us[pw], cols.python_calls[pw]))
    pw_graph = float(cols.graph_us[pw].sum())
    size = np.where(a.ss.fallback, a.ss.fallback_bucket, cols.batch)[eager]
    e_real = float(a.eager.at(cols.batch[eager]).sum())
    e_full, e_full_lo, e_full_hi = (float(x(size).sum()) for x in (a.curve.at, a.curve.low, a.curve.high))
    real, ful = f_us + pw_real + e_real, f_us + pw_graph + e_full
    if ful <= 0:
        return None
    band = DECODE_TIME_EAGER_BAND
    low = (f_us + pw_lo + e_real * (1 - band)) / (f_us + pw_graph * (1 + err) + e_full_hi)
    high = (f_us + pw_hi + e_real * (1 + band)) / (f_us + pw_graph * max(1 - err, 1e-9) + e_full_lo)
    return {"predicted_speedup": _f(real / ful), "predicted_speedup_low": _f(min(low, real / ful)),
            "predicted_speedup_high": _f(max(high, real / ful)), "predicted_speedup_rule": "decode time",
            "decode_us_as_run": _f(real), "decode_us_full_graph": _f(ful)}


def _eager_groups_on_the_curve(s: Summary, reports: list[StepReport], eager: EagerCurve,
                               graph_rel_err: float) -> list[dict]:
    """The step groups, each eager decode group (or of unknown phase) of a trace that replays graphs with its step
    taken from the eager curve at its steps' batches (``eager_step_source`` ``"eager curve"``; the curve has no
    band, so its range is the graph step's band alone), its speedup recomputed from it. Among graph replays an
    eager step's profiled window is no measure of it (the host starts it while the GPU still replays earlier
    steps: nine H200 serving traces, against the median unprofiled eager truth of the group's batches, the windows'
    estimate -62%..+76% (median |err| 31%), the curve, the cost ``launchgap plan`` gives an eager step, -21%..+56%
    (median |err| 10%))."""
    out = []
    for g in s.step_groups:
        b = np.array([r.batch_size for r in reports if r.phase == g["phase"] and r.graph_coverage == "eager"
                      and r.batch_size], dtype=np.int64)
        if g["graph_coverage"] == "eager" and g["phase"] in _DECODE_OR_UNKNOWN and b.size:
            est = _f(float(np.median(eager.at(b))))
            g = {**g, "estimated_unprofiled_step_us_median": est, "estimated_unprofiled_step_us_low": est,
                 "estimated_unprofiled_step_us_high": est, "eager_step_source": "eager curve"}
            g = {**g, **_speedup_fields(group_summary(s, g), None, graph_rel_err)}
        out.append(g)
    return out


def _given_sizes(opts: AnalysisOptions, engine: str | None) -> tuple[list[int], str, str] | None:
    """The capture list the user gave: a pasted server config (``"config"``; plain sizes count as
    ``"flag"``), else ``--capture-sizes`` (``"flag"``), else the list a server log of the trace's own engine
    states (``"config"``: the server's config as its log prints it); ``None`` when none."""
    cfg = opts.server_config
    if cfg is not None:
        label = LABELS.get(cfg.engine, "")
        return capture_sizes_of(cfg), "config" if cfg.engine else "flag", \
            (f"{label} server config: " if label else "") + cfg.describe()
    if opts.capture_sizes:
        return list(opts.capture_sizes), "flag", "--capture-sizes"
    log = opts.log_capture
    if log is not None and log.sizes and engine == log.engine:  # another engine's log is another server's
        return list(log.sizes), "config", log.describe()
    return None


def _engine_default(trace: Trace, engine: str | None) -> tuple[list[int], str] | None:
    """The engine's default capture list for the trace's GPU (name, memory) and TP size; ``None`` without an engine."""
    if not engine:
        return None
    dev = trace.devices[0] if trace.devices else None
    name = device_name(trace, dev) if dev is not None else None
    mem = device_properties_of(trace, dev).get("total_memory_bytes") if dev is not None else None
    return engine_module(engine).trace_default(name, mem / 2**30 if mem else None, trace.world_size)


def _eager_costs(a, eager_steps: np.ndarray, batch: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The eager costs the planner comparison prices an uncaptured size at, and their sizes: where the trace has
    eager decode steps (``eager_steps``; none: no comparison), the eager curve (as ``launchgap plan`` prices an eager
    step and a fallback's lost time is costed), else without a curve those steps' own costs."""
    if a.eager is not None and eager_steps.any():
        return a.eager.us, np.arange(1, a.eager.us.size + 1)
    return a.unprof_us[eager_steps], batch[eager_steps]


def _planner_comparison(batches: np.ndarray, eager_us: np.ndarray, eager_bs: np.ndarray, curve: CostCurve,
                        sizes: list[int] | None, between: tuple[float, float] = (0.0, 0.0)) -> dict | None:
    """The planner on the same decode steps (:func:`launchgap.planning.planner.compare_capture_list`):
    this trace's costs (eager: :func:`_eager_costs`; graph: the cost curve), as the engine's whole steps with
    ``between`` (:func:`between_steps_us`), and batch sizes, against the capture list up to the bucket of the largest
    batch. ``None`` without capture sizes, batches or costs."""
    b = batches[batches > 0]
    curve_sizes = np.arange(1, curve.max_size + 1) if np.isfinite(curve.us).all() else np.zeros(0, dtype=np.int64)
    eager_us, graph_us = whole_steps_us(eager_us, curve.us[:curve_sizes.size], *between, host_floor=False)
    try:
        costs = table_of_steps(eager_bs, eager_us, curve_sizes, graph_us, "this trace's steps") if b.size else None
    except InputError:  # eager and graph costs share no batch-size range
        return None
    if not sizes or costs is None:
        return None
    top = smallest_size_at_least(np.array([b.max()]), sizes)[0]
    dist = {int(k): float(v) for k, v in zip(*np.unique(b, return_counts=True))}
    return compare_capture_list(costs, dist, [x for x in sizes if x <= (top if top > 0 else max(sizes))])
