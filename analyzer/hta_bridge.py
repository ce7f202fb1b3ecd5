"""Run Holistic Trace Analysis (HTA) on a trace, and line its numbers up with launchgap's.

HTA (PyPI ``HolisticTraceAnalysis``, import ``hta``) is an optional dependency:
``pip install 'launchgap[hta]'`` (HTA 0.5.0 needs pandas<3; the extra pins both). It is
imported inside the functions that use it, and only here.

Two entry points:

* :func:`run_hta` -> :class:`HtaReport`: HTA's temporal breakdown, kernel-type breakdown,
  per-stream idle-time breakdown and CUDA launch statistics of one trace file, as HTA
  computes them by default (what ``launchgap hta`` prints).
* :func:`compare_with_hta` -> :class:`Comparison`: per metric, launchgap's number, HTA's
  default number, HTA's number with each of its documented deviations switched off
  (``hta_aligned``), and how far each deviation alone moves HTA's number.

HTA's deviations from launchgap's definitions (:class:`HtaSettings`; all on by default):

* ``round_to_us``: HTA moves every event's start up and its end down to a whole
  microsecond (``ceil(ts)``, ``floor(ts + dur)``), so every op loses up to 2 us and a
  sub-microsecond op can get a duration of 0 or -1 us.
* ``stream_events_as_gpu``: the temporal and kernel-type breakdowns count every event
  with a ``stream`` argument as GPU time: kernels, copies and sets, but also ``cuda_sync``
  ranges and, for example, the ``cpu_op`` that Triton launches carry (``stream: 0``).
  launchgap counts kernels, copies and sets only.
* ``step_filter``: with two or more ``ProfilerStep#N`` ranges HTA keeps only the GPU ops
  whose launch call (same correlation id) starts before the last ProfilerStep begins
  (``"drop-last-step"``, HTA's default), or before it ends (``"keep-last-step"``, HTA's
  ``include_last_profiler_step=True``); ops with no launch call in the trace are dropped
  too. ``"off"`` keeps every GPU op, as launchgap does.
* ``launchless_ops_timed_by_event_0``: a GPU op whose launch call is not in the trace gets
  HTA's ``index_correlation`` 0, and the idle-time breakdown joins it to trace event #0,
  taking that event's start as the op's launch time (so its idle interval may land in
  "host wait"). Matters where the step filter keeps such ops: traces with fewer than two
  ProfilerSteps, or ``step_filter="off"``. launchgap leaves such a gap ``unattributed``.

One more difference cannot be switched off in HTA, so it is measured on launchgap's side
(``MetricRow.adjustments``): HTA takes each idle interval on a stream as the next op's
start less the previous op's end, without merging overlaps, so two ops that overlap on one
stream (the profiler reports some back-to-back kernels overlapping by a fraction of a us)
add a negative interval; launchgap counts an overlap as no gap.

Definitions that cannot be switched off, so :func:`compare_with_hta` computes launchgap's
side under HTA's definition instead: idle time per stream (launchgap's is per device);
launch statistics over ``cudaLaunchKernel`` / ``cudaLaunchKernelExC`` only (not
``cuLaunchKernel(Ex)`` nor ``cudaGraphLaunch``), with the delay measured from the *end* of
the launch call and clipped at 0 (launchgap's ``launch_delay_us`` runs from its start);
one rank per file, all its devices merged; a GPU op's stream read from ``args.stream`` only.

This module uses a few internals of HTA 0.5.0 (``Trace.parse_traces``,
``round_down_time_stamps``, ``_align_all_ranks``, ``_filter_irrelevant_gpu_kernels``) to
parse a file once and apply each setting to a copy; the extra pins that version. A test checks that the
default settings reproduce HTA's public ``TraceAnalysis`` numbers exactly.
"""
from __future__ import annotations

import contextlib
import copy
import logging
import os
import warnings
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from .errors import AnalyzerError
from .trace import Kind, Trace

SCHEMA = "launchgap.hta/1"
INSTALL_HINT = "pip install 'launchgap[hta]'"
#: HTA's default ``consecutive_kernel_delay``: an idle interval shorter than this (us) whose
#: kernel was launched before the stream went idle is "kernel wait", a longer one "other".
KERNEL_WAIT_THRESHOLD_US = 30.0
#: Two numbers agree when they differ by at most this share of the larger one...
AGREE_REL = 0.01
#: ... or by at most this many microseconds (float error on values near zero).
AGREE_ABS_US = 0.01
#: Launch calls HTA's launch statistics join to GPU work (exact names, HTA 0.5.0).
HTA_LAUNCH_APIS = ("cudaLaunchKernel", "cudaLaunchKernelExC")
#: Event categories that are GPU work for launchgap (HTA's idle breakdown takes these, and MTIA's).
GPU_OP_CATS = ("kernel", "gpu_memcpy", "gpu_memset")
#: Event categories HTA's idle-time breakdown runs over (HTA 0.5.0; MTIA's device ops included).
_HTA_IDLE_CATS = ("kernel", "Kernel", "gpu_memset", "Memset", "gpu_memcpy", "Memcpy", "mtia_ccp_events")
#: HTA's idle categories, as its ``get_idle_time_breakdown`` names them.
IDLE_CATEGORIES = ("host_wait", "kernel_wait", "other")
_STEP_FILTERS = ("drop-last-step", "keep-last-step", "off")
_ROUNDING_ENV = "HTA_DISABLE_NS_ROUNDING"


class HtaError(AnalyzerError):
    """HTA is missing, or could not analyse the trace."""


@dataclass(frozen=True)
class HtaSettings:
    """Which of HTA's deviations from launchgap's definitions are on (default: HTA's behaviour)."""

    round_to_us: bool = True
    stream_events_as_gpu: bool = True
    step_filter: str = "drop-last-step"
    launchless_ops_timed_by_event_0: bool = True

    def __post_init__(self) -> None:
        if self.step_filter not in _STEP_FILTERS:
            raise ValueError(f"step_filter must be one of {_STEP_FILTERS}, not {self.step_filter!r}")

    def to_dict(self) -> dict:
        return asdict(self)


#: HTA with every deviation switched off: its numbers should equal launchgap's.
ALIGNED = HtaSettings(round_to_us=False, stream_events_as_gpu=False, step_filter="off",
                      launchless_ops_timed_by_event_0=False)
#: One HTA behaviour at a time, on top of :data:`ALIGNED`: what each one alone changes.
#: ``last_profiler_step_dropped`` is measured against ``launched_before_last_step_end``.
DEVIATIONS: dict[str, HtaSettings] = {
    "rounding_to_us": replace(ALIGNED, round_to_us=True),
    "stream_events_as_gpu": replace(ALIGNED, stream_events_as_gpu=True),
    "launched_before_last_step_end": replace(ALIGNED, step_filter="keep-last-step"),
    "last_profiler_step_dropped": replace(ALIGNED, step_filter="drop-last-step"),
    "launchless_ops_timed_by_event_0": replace(ALIGNED, launchless_ops_timed_by_event_0=True),
}


@dataclass(frozen=True)
class TemporalBreakdown:
    """HTA's ``get_temporal_breakdown`` of one rank, in us.

    ``window_us`` is HTA's ``kernel_time``: from the first start to the last end of its GPU
    events; ``idle_us`` is the window less the union of those events; ``compute_us`` is the
    union of computation kernels, ``non_compute_us`` the rest of the busy time
    (communication, memory). ``busy_us = window_us - idle_us``.
    """

    window_us: float
    idle_us: float
    compute_us: float
    non_compute_us: float

    @property
    def busy_us(self) -> float:
        return self.window_us - self.idle_us

    def to_dict(self) -> dict:
        return {**asdict(self), "busy_us": self.busy_us}


@dataclass(frozen=True)
class KernelTypeShare:
    """One row of HTA's kernel-type breakdown: GPU time of a kernel type (or an overlap of types)."""

    kernel_type: str
    time_us: float
    percent: float

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class StreamIdle:
    """HTA's idle-time breakdown of one stream, in us.

    Between consecutive GPU ops of the stream: ``host_wait_us`` where the next op's launch
    call started after the stream went idle; otherwise ``kernel_wait_us`` for intervals
    under :data:`KERNEL_WAIT_THRESHOLD_US` and ``other_us`` for longer ones.
    """

    stream: int
    host_wait_us: float
    kernel_wait_us: float
    other_us: float

    @property
    def idle_us(self) -> float:
        return self.host_wait_us + self.kernel_wait_us + self.other_us

    def to_dict(self) -> dict:
        return {**asdict(self), "idle_us": self.idle_us}


@dataclass(frozen=True)
class LaunchStats:
    """HTA's ``get_cuda_kernel_launch_stats`` summarised: one sample per GPU op launched by
    ``cudaLaunchKernel`` / ``cudaLaunchKernelExC``. ``launch_delay`` is the op's start less the
    launch call's end, clipped at 0, in us; ``cpu_us`` the launch call's duration."""

    launches: int
    cpu_us_mean: float
    launch_delay_us_mean: float
    launch_delay_us_p50: float
    launch_delay_us_p90: float
    launch_delay_us_max: float

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class HtaReport:
    """What HTA says about one trace file (one rank), under ``settings``.

    An analysis HTA failed on is ``None`` (``temporal``, ``launch``) or empty, and
    ``failures`` maps its name (``temporal``, ``kernel_types``, ``idle``, ``launch``) to
    HTA's exception.
    """

    path: str
    settings: HtaSettings
    kernels: int
    gpu_ops: int
    temporal: TemporalBreakdown | None
    kernel_types: list[KernelTypeShare]
    streams: list[StreamIdle]
    launch: LaunchStats | None
    failures: dict[str, str] = field(default_factory=dict)

    def to_dict(self) -> dict:
        return {
            "path": self.path,
            "settings": self.settings.to_dict(),
            "kernels": self.kernels,
            "gpu_ops": self.gpu_ops,
            "temporal": self.temporal.to_dict() if self.temporal else None,
            "kernel_types": [k.to_dict() for k in self.kernel_types],
            "streams": [s.to_dict() for s in self.streams],
            "launch": self.launch.to_dict() if self.launch else None,
            "failures": dict(self.failures),
        }


@dataclass(frozen=True)
class MetricRow:
    """One metric of one trace: launchgap's number against HTA's.

    ``ours`` is launchgap's number under the row's definition; ``hta`` HTA's default;
    ``hta_aligned`` HTA with its deviations off (:data:`ALIGNED`); ``deltas`` how far each
    deviation alone moves HTA's number away from ``hta_aligned`` (nonzero ones only; ``None``
    where HTA failed in that setting). ``adjustments``: differences HTA cannot switch off,
    measured on launchgap's side (``overlap_as_negative_idle``: HTA's interval rule less
    launchgap's gaps). ``None`` values: no such number (HTA failed, or the metric does not
    exist on that side). ``agree``: ``ours`` and ``hta`` within :data:`AGREE_REL` (or
    :data:`AGREE_ABS_US`); ``aligned_agree``: ``ours + sum(adjustments)`` and ``hta_aligned``. ``note`` says what differs where no switch
    covers it, and which HTA analyses failed.
    """

    metric: str
    ours: float | None
    hta: float | None
    hta_aligned: float | None
    agree: bool
    aligned_agree: bool
    deltas: dict[str, float | None] = field(default_factory=dict)
    adjustments: dict[str, float] = field(default_factory=dict)
    note: str = ""

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class Comparison:
    """launchgap against HTA on one trace file (see :func:`compare_with_hta`).

    ``hta`` is HTA's report under its default settings (``to_dict`` leaves it out: it is
    the report the comparison sits beside).
    """

    path: str
    rows: list[MetricRow]
    hta: HtaReport

    def row(self, metric: str) -> MetricRow:
        for r in self.rows:
            if r.metric == metric:
                return r
        raise KeyError(metric)

    def to_dict(self) -> dict:
        return {"path": self.path, "rows": [r.to_dict() for r in self.rows]}


# --- HTA import and quiet calls ------------------------------------------------------------


def import_hta() -> Any:
    """The ``hta`` package, or an :class:`HtaError` saying how to install it."""
    try:
        import hta  # noqa: F401
        import pandas as pd
        from hta.common import trace as _  # noqa: F401  (fails early on a broken install)
    except ImportError as exc:
        raise HtaError(
            f"Holistic Trace Analysis is not installed ({exc.name or exc}); install it with: {INSTALL_HINT}"
        ) from None
    if int(pd.__version__.split(".")[0]) >= 3:
        raise HtaError(
            f"HTA 0.5.0 needs pandas<3, found pandas {pd.__version__}; install the pinned extra with: {INSTALL_HINT}"
        )
    return hta


@contextlib.contextmanager
def _quiet_hta(round_to_us: bool | None = None) -> Iterator[None]:
    """Silence HTA's logging and pandas' warnings; set HTA's rounding switch while parsing.

    HTA reads ``HTA_DISABLE_NS_ROUNDING`` from the environment at parse time, so it is set
    only for the duration of the call and restored after.
    """
    hta_log = logging.getLogger("hta")
    old_level = hta_log.level
    old_env = os.environ.get(_ROUNDING_ENV)
    hta_log.setLevel(logging.CRITICAL)
    if round_to_us is not None:
        os.environ[_ROUNDING_ENV] = "0" if round_to_us else "1"
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            yield
    finally:
        hta_log.setLevel(old_level)
        if round_to_us is not None:
            if old_env is None:
                os.environ.pop(_ROUNDING_ENV, None)
            else:
                os.environ[_ROUNDING_ENV] = old_env


# --- running HTA -----------------------------------------------------------------------------

_RANK = 0  # one file = one rank; the key HTA files it under


def _parse(path: Path) -> Any:
    """HTA's parsed Trace of one file: not rounded, aligned nor filtered yet."""
    import_hta()
    from hta.common.trace import Trace as HtaTrace

    if not path.is_file():
        raise HtaError("no such file", str(path))
    if not path.name.endswith((".json", ".gz")):
        raise HtaError("HTA reads only files named *.json or *.json.gz", str(path))
    with _quiet_hta(round_to_us=False):
        try:
            t = HtaTrace(trace_files={_RANK: str(path.resolve())}, trace_dir=str(path.resolve().parent))
            t.parse_traces(use_multiprocessing=False)
        except Exception as exc:  # HTA raises anything on input it cannot read
            raise HtaError(f"HTA could not parse it ({type(exc).__name__}: {_first_line(exc)})", str(path)) from None
    df = t.traces.get(_RANK)
    if df is None or "cat" not in getattr(df, "columns", ()):
        raise HtaError("HTA found no trace events in it (not a Kineto trace?)", str(path))
    return t


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else "no message"


def _variant(parsed: Any, settings: HtaSettings) -> Any:
    """A loaded HTA Trace under ``settings``, made from a parsed one (left unchanged).

    Mirrors HTA's parse-time rounding and ``hta.common.trace.Trace.load_traces`` (align,
    filter, index by event index). Rounding after parsing gives the same times as rounding
    while parsing: the same ceil/floor of the same float values, before alignment.
    """
    from hta.common.trace_parser import round_down_time_stamps

    t = copy.copy(parsed)
    t.traces = {r: df.copy() for r, df in parsed.traces.items()}
    t.is_parsed = False
    with _quiet_hta(round_to_us=True):
        if settings.round_to_us:
            for df in t.traces.values():
                round_down_time_stamps(df)
    with _quiet_hta():
        t._align_all_ranks()
        if settings.step_filter != "off":
            t._filter_irrelevant_gpu_kernels(include_last_profiler_step=settings.step_filter == "keep-last-step")
    sym = t.symbol_table.get_sym_id_map()
    gpu_cat_ids = [sym[c] for c in GPU_OP_CATS if c in sym]
    for r, df in t.traces.items():
        df = df.set_index("index", drop=False)
        df.index.names = [None]
        if not settings.launchless_ops_timed_by_event_0:
            # -1 joins to nothing: the op then has no launch time, as in launchgap.
            df.loc[df["stream"].ne(-1) & df["index_correlation"].eq(0), "index_correlation"] = -1
        if not settings.stream_events_as_gpu:
            # Only kernels, copies and sets stay on a stream; HTA then treats the rest as CPU events.
            df.loc[df["stream"].ne(-1) & ~df["cat"].isin(gpu_cat_ids), "stream"] = -1
        t.traces[r] = df
    t.is_parsed = True
    return t


def _analyse(t: Any, path: str, settings: HtaSettings, kernel_types: bool = True) -> HtaReport:
    """Run HTA's analyses on a loaded HTA Trace (the kernel-type breakdown only if asked)."""
    from hta.analyzers.breakdown_analysis import BreakdownAnalysis
    from hta.analyzers.cuda_kernel_analysis import CudaKernelAnalysis

    df = t.get_trace(_RANK)
    sym = t.symbol_table.get_sym_id_map()
    cat = df["cat"].to_numpy()
    on_stream = df["stream"].to_numpy() != -1
    kernel_id = sym.get("kernel", -1000)
    gpu_cat_ids = [sym[c] for c in GPU_OP_CATS if c in sym]
    if not on_stream.any():
        raise HtaError(
            "HTA sees no GPU events in it (it takes a GPU op's stream from args.stream only; "
            "CPU-only traces have none)",
            path,
        )
    failures: dict[str, str] = {}

    def attempt(name: str, fn: Any) -> Any:
        # HTA asserts on some inputs (e.g. negative durations after its rounding); one failed
        # analysis should not hide the others.
        with _quiet_hta():
            try:
                return fn()
            except Exception as exc:
                failures[name] = f"{type(exc).__name__}: {_first_line(exc)}"
                return None

    tb = attempt("temporal", lambda: BreakdownAnalysis.get_temporal_breakdown(t, visualize=False).iloc[0])
    kt = attempt("kernel_types", lambda: BreakdownAnalysis.get_gpu_kernel_breakdown(
        t, visualize=False, duration_ratio=0.8, num_kernels=10, include_memory_kernels=True, image_renderer="",
    )[0]) if kernel_types else None
    idle_cat_ids = [sym[c] for c in _HTA_IDLE_CATS if c in sym]
    has_idle_ops = bool((on_stream & np.isin(cat, idle_cat_ids)).any())  # else HTA raises on an empty concat
    idle = attempt("idle", lambda: BreakdownAnalysis.get_idle_time_breakdown(
        t, int(KERNEL_WAIT_THRESHOLD_US), rank=_RANK, streams=None, visualize=False, visualize_pctg=False,
        show_idle_interval_stats=False,
    )[0]) if has_idle_ops else None
    ls = attempt("launch", lambda: CudaKernelAnalysis.cuda_kernel_launch_stats(
        t, [_RANK], runtime_cutoff=50, launch_delay_cutoff=100, include_memory_events=False, visualize=False,
    )[_RANK])
    temporal = None if tb is None else TemporalBreakdown(
        window_us=float(tb["kernel_time(us)"]), idle_us=float(tb["idle_time(us)"]),
        compute_us=float(tb["compute_time(us)"]), non_compute_us=float(tb["non_compute_time(us)"]),
    )
    kernel_types = [] if kt is None else [
        KernelTypeShare(kernel_type=str(r.kernel_type), time_us=float(r.sum), percent=float(r.percentage))
        for r in kt.itertuples(index=False)  # one row per kernel type, not per event
    ]
    streams: list[StreamIdle] = []
    if idle is not None:
        piv = idle.pivot_table(index="stream", columns="idle_category", values="idle_time", aggfunc="sum",
                               fill_value=0.0)
        for s in sorted(piv.index.tolist()):  # one row per stream
            got = {c: float(piv.loc[s, c]) if c in piv.columns else 0.0 for c in IDLE_CATEGORIES}
            streams.append(StreamIdle(stream=int(s), host_wait_us=got["host_wait"],
                                      kernel_wait_us=got["kernel_wait"], other_us=got["other"]))
    negative = int(np.count_nonzero(on_stream & (df["dur"].to_numpy() < 0)))
    if negative and settings.round_to_us:
        # HTA's temporal breakdown asserts non-compute time >= 0; negative durations break its interval union.
        for name in failures:
            failures[name] += (f" ({negative} GPU events have a negative duration after HTA's rounding to whole us; "
                               f"run without it: launchgap hta --no-round)")
    launch = None
    if ls is not None:
        delay = ls["launch_delay"].to_numpy(dtype=float)
        launch = LaunchStats(
            launches=int(delay.size),
            cpu_us_mean=float(ls["cpu_duration"].mean()) if delay.size else 0.0,
            launch_delay_us_mean=float(delay.mean()) if delay.size else 0.0,
            launch_delay_us_p50=float(np.percentile(delay, 50)) if delay.size else 0.0,
            launch_delay_us_p90=float(np.percentile(delay, 90)) if delay.size else 0.0,
            launch_delay_us_max=float(delay.max()) if delay.size else 0.0,
        )
    return HtaReport(
        path=path, settings=settings,
        kernels=int(np.count_nonzero(on_stream & (cat == kernel_id))),
        gpu_ops=int(np.count_nonzero(on_stream & np.isin(cat, gpu_cat_ids))),
        temporal=temporal, kernel_types=kernel_types, streams=streams, launch=launch, failures=failures,
    )


def run_hta(path: str | Path, settings: HtaSettings | None = None) -> HtaReport:
    """HTA's breakdowns of one Kineto trace file (``settings`` default: HTA's own defaults)."""
    s = settings or HtaSettings()
    p = Path(path)
    return _analyse(_variant(_parse(p), s), str(p), s)


# --- launchgap's side, under HTA's definitions ------------------------------------------------


@dataclass(frozen=True)
class OurNumbers:
    """launchgap's numbers for one trace file, under the definitions HTA uses where they differ.

    ``gpu_*_us`` and ``kernels`` come from :func:`launchgap.report.analyze_trace` (summed over
    devices; HTA merges the devices of a file). ``streams``: launchgap's gaps computed per
    stream instead of per device, each gap put in HTA's category by launchgap's cause:
    ``host``, ``launch`` and ``sync`` -> host wait; ``gpu`` and ``unattributed`` -> kernel wait
    when shorter than :data:`KERNEL_WAIT_THRESHOLD_US`, else other; ``streams_hta_rule`` the
    same by HTA's interval rule (:func:`stream_idle_hta_rule`). ``launch_delays_us``: per
    GPU op launched by ``cudaLaunchKernel(ExC)``, op start less launch call end, clipped at 0.
    ``launch_calls``: every launch call launchgap counts (all kernel-launch APIs, graph launches).
    """

    devices: int
    kernels: int
    gpu_ops: int
    gpu_window_us: float
    gpu_busy_us: float
    gpu_idle_us: float
    streams: list[StreamIdle]
    streams_hta_rule: list[StreamIdle]
    launch_delays_us: np.ndarray
    launch_cpu_us: np.ndarray
    launch_calls: int


def _lanes(trace: Trace) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(GPU op rows, their dense (device, stream) lane index, lanes as ``[[device, stream], ...]``)."""
    gpu = np.flatnonzero(trace.gpu_mask)
    pairs = np.stack([trace.device[gpu], trace.stream[gpu]], axis=1)
    if gpu.size == 0:
        return gpu, np.zeros(0, dtype=np.int64), np.zeros((0, 2), dtype=np.int64)
    uniq, inv = np.unique(pairs, axis=0, return_inverse=True)
    return gpu, inv.reshape(-1), uniq


def _binned(lane: np.ndarray, n: int, uniq: np.ndarray, host_ns: np.ndarray, rest_ns: np.ndarray,
            short: np.ndarray) -> list[StreamIdle]:
    host = np.bincount(lane, weights=host_ns, minlength=n) / 1e3
    kw = np.bincount(lane, weights=np.where(short, rest_ns, 0), minlength=n) / 1e3
    other = np.bincount(lane, weights=np.where(short, 0, rest_ns), minlength=n) / 1e3
    return [StreamIdle(stream=int(uniq[i, 1]), host_wait_us=float(host[i]), kernel_wait_us=float(kw[i]),
                       other_us=float(other[i]))
            for i in range(n)]  # one row per stream


def stream_idle_ours(trace: Trace) -> list[StreamIdle]:
    """launchgap's gaps per (device, stream), binned into HTA's idle categories (see :class:`OurNumbers`)."""
    from .gaps import compute_gaps

    gpu, inv, uniq = _lanes(trace)
    lane = np.full(len(trace), -1, dtype=np.int32)
    lane[gpu] = inv
    # Each (device, stream) becomes its own "device", so the per-device gap code runs per stream.
    gaps, _ = compute_gaps(replace(trace, device=lane))
    host = gaps.host_ns + gaps.launch_ns + gaps.sync_ns
    rest = gaps.gpu_ns + gaps.unattributed_ns + gaps.peer_ns
    short = gaps.dur_ns < KERNEL_WAIT_THRESHOLD_US * 1e3
    return _binned(gaps.device.astype(np.int64), uniq.shape[0], uniq, host, rest, short)


def stream_idle_hta_rule(trace: Trace) -> list[StreamIdle]:
    """Idle per stream by HTA's rule, on launchgap's parsed trace: every op but a stream's
    first adds ``start - previous op's end`` (negative where the two overlap), binned as in
    :func:`stream_idle_ours`. Differs from :func:`stream_idle_ours` only where ops overlap."""
    gpu, inv, uniq = _lanes(trace)
    if gpu.size == 0:
        return []
    order = np.lexsort((trace.start_ns[gpu], inv))
    rows, lane = gpu[order], inv[order]
    prev_end = np.empty_like(rows)
    prev_end[1:] = trace.end_ns[rows[:-1]]
    has_prev = np.ones(rows.size, dtype=bool)
    has_prev[0] = False
    has_prev[1:] = lane[1:] == lane[:-1]
    rows, lane, prev_end = rows[has_prev], lane[has_prev], prev_end[has_prev]
    interval = trace.start_ns[rows] - prev_end
    li = trace.launch_idx[rows]
    host = (li >= 0) & (trace.start_ns[np.maximum(li, 0)] > prev_end)
    return _binned(lane, uniq.shape[0], uniq, np.where(host, interval, 0), np.where(host, 0, interval),
                   interval < KERNEL_WAIT_THRESHOLD_US * 1e3)


def our_numbers(trace: Trace) -> OurNumbers:
    """launchgap's side of the comparison (see :class:`OurNumbers`)."""
    from .launches import launch_delays_ns
    from .report import analyze_trace
    from .trace import Api

    report = analyze_trace(trace)
    hta_api_ids = np.flatnonzero(np.isin(trace.names, HTA_LAUNCH_APIS))
    ops, from_start_ns = launch_delays_ns(trace)
    li = trace.launch_idx[ops]
    by_hta_api = (trace.kind[li] == Kind.RUNTIME) & np.isin(trace.name_id[li], hta_api_ids)
    li = li[by_hta_api]
    # launchgap's delay runs from the launch call's start; HTA's from its end, clipped at 0.
    delay_ns = np.maximum(from_start_ns[by_hta_api] - trace.dur_ns[li], 0)
    calls = int(np.count_nonzero(np.isin(trace.api, (Api.KERNEL_LAUNCH, Api.GRAPH_LAUNCH))))
    return OurNumbers(
        devices=len(report.devices),
        kernels=sum(d.kernels for d in report.devices),
        gpu_ops=sum(d.gpu_ops for d in report.devices),
        gpu_window_us=sum(d.gpu_window_us for d in report.devices),
        gpu_busy_us=sum(d.gpu_busy_us for d in report.devices),
        gpu_idle_us=sum(d.gpu_idle_us for d in report.devices),
        streams=stream_idle_ours(trace),
        streams_hta_rule=stream_idle_hta_rule(trace),
        launch_delays_us=delay_ns / 1e3,
        launch_cpu_us=trace.dur_ns[li] / 1e3,
        launch_calls=calls,
    )


# --- the comparison ------------------------------------------------------------------------


def agrees(a: float, b: float, rel: float = AGREE_REL, abs_tol: float = AGREE_ABS_US) -> bool:
    """True when ``a`` and ``b`` differ by at most ``rel`` of the larger magnitude, or ``abs_tol``."""
    return abs(a - b) <= max(rel * max(abs(a), abs(b)), abs_tol)


def _metrics_of(rep: HtaReport) -> dict[str, float]:
    """HTA's numbers of one report, keyed like the comparison rows (absent where HTA failed)."""
    m = {"kernels": float(rep.kernels), "gpu_ops": float(rep.gpu_ops)}
    if rep.temporal is not None:
        m.update(gpu_window_us=rep.temporal.window_us, gpu_busy_us=rep.temporal.busy_us,
                 gpu_idle_us=rep.temporal.idle_us)
    if rep.launch is not None:
        m.update({"launches (cudaLaunchKernel/ExC)": float(rep.launch.launches),
                  "launch_delay_us_mean": rep.launch.launch_delay_us_mean,
                  "launch_delay_us_p50": rep.launch.launch_delay_us_p50,
                  "launch_cpu_us_mean": rep.launch.cpu_us_mean})
    for s in rep.streams:
        for c in IDLE_CATEGORIES:
            m[f"stream {s.stream} {c}_us"] = getattr(s, f"{c}_us")
    return m


def _our_metrics(o: OurNumbers) -> dict[str, float]:
    d = o.launch_delays_us
    m = {
        "kernels": float(o.kernels),
        "gpu_ops": float(o.gpu_ops),
        "gpu_window_us": o.gpu_window_us,
        "gpu_busy_us": o.gpu_busy_us,
        "gpu_idle_us": o.gpu_idle_us,
        "launches (cudaLaunchKernel/ExC)": float(d.size),
        "launch_delay_us_mean": float(d.mean()) if d.size else 0.0,
        "launch_delay_us_p50": float(np.percentile(d, 50)) if d.size else 0.0,
        "launch_cpu_us_mean": float(o.launch_cpu_us.mean()) if d.size else 0.0,
    }
    for s in o.streams:
        for c in IDLE_CATEGORIES:
            m[f"stream {s.stream} {c}_us"] = getattr(s, f"{c}_us")
    return m


def _r(x: float | None) -> float | None:
    return None if x is None else round(float(x), 3)


def _analysis_of(metric: str) -> str:
    """Which HTA analysis a comparison row comes from."""
    if metric in ("gpu_window_us", "gpu_busy_us", "gpu_idle_us"):
        return "temporal"
    if metric.startswith("stream "):
        return "idle"
    if metric.startswith("launch"):
        return "launch"
    return ""


def _note(metric: str, o: OurNumbers) -> str:
    if o.devices > 1 and metric.startswith(("gpu_", "stream ")):
        return f"HTA merges the {o.devices} devices of the file; launchgap's figure is the sum over devices"
    if metric.startswith("launch"):
        return (f"HTA's definition (cudaLaunchKernel/ExC only, delay from the call's end); launchgap counts "
                f"{o.launch_calls} launch calls of all kinds and measures its delay from the call's start")
    if metric.startswith("stream "):
        return "per stream, HTA's definition; launchgap reports idle per device"
    return ""


#: Deviations that are one HtaSettings switch; where HTA fails with one alone on top of
#: ALIGNED, its effect is measured against HTA's defaults instead (default less default without it).
_SWITCHES = {
    "rounding_to_us": "round_to_us",
    "stream_events_as_gpu": "stream_events_as_gpu",
    "launchless_ops_timed_by_event_0": "launchless_ops_timed_by_event_0",
}
#: The reference each deviation is measured against (default: ALIGNED).
_DELTA_BASE = {"last_profiler_step_dropped": "launched_before_last_step_end"}


def compare_with_hta(path: str | Path, trace: Trace | None = None) -> Comparison:
    """launchgap against HTA on one trace file, metric by metric (see :class:`MetricRow`).

    Parses the file with HTA once and runs its analyses under HTA's defaults,
    :data:`ALIGNED` and each of :data:`DEVIATIONS`. ``trace`` (launchgap's parse of the
    same file) is loaded from ``path`` when not given.
    """
    from .loaders import load_trace

    p = Path(path)
    tr = trace if trace is not None else load_trace(p)
    on = our_numbers(tr)
    ours = _our_metrics(on)
    hta_rule = {f"stream {st.stream} {c}_us": getattr(st, f"{c}_us") for st in on.streams_hta_rule
                for c in IDLE_CATEGORIES}
    parsed = _parse(p)

    def run(settings: HtaSettings, kernel_types: bool = False) -> HtaReport:
        return _analyse(_variant(parsed, settings), str(p), settings, kernel_types)

    reports = {"hta": run(HtaSettings(), kernel_types=True), "aligned": run(ALIGNED)}
    reports.update({name: run(settings) for name, settings in DEVIATIONS.items()})
    for name, attr in _SWITCHES.items():
        if reports[name].failures:
            reports[f"{name} (from default)"] = run(replace(HtaSettings(), **{attr: False}))
    mets = {k: _metrics_of(r) for k, r in reports.items()}
    stream_prefixes = tuple({f"stream {st.stream} " for r in reports.values() for st in r.streams}
                            | {f"stream {st.stream} " for st in on.streams})

    def value(name: str, key: str) -> float | None:
        if name not in reports:
            return None
        got = mets[name].get(key)
        if got is None and key.startswith(stream_prefixes) and "idle" not in reports[name].failures:
            return 0.0  # HTA lists no such stream or category: nothing idle there
        return got

    rows = []
    for key in dict.fromkeys([*ours, *mets["hta"], *mets["aligned"]]):  # one row per metric
        our = ours.get(key, 0.0 if key.startswith(stream_prefixes) else None)
        hta, aligned = value("hta", key), value("aligned", key)
        deltas: dict[str, float | None] = {}
        notes = [_note(key, on)]
        for dev in DEVIATIONS:
            v, ref = value(dev, key), value(_DELTA_BASE.get(dev, "aligned"), key)
            if v is None or ref is None:
                v, ref = hta, value(f"{dev} (from default)", key)
                if v is not None and ref is not None:
                    notes.append(f"{dev} measured as HTA's default less its default without it "
                                 f"(HTA fails with it alone: {'; '.join(reports[dev].failures.values())})")
            if v is None or ref is None:
                deltas[dev] = None
            elif not agrees(v - ref, 0.0):
                deltas[dev] = round(v - ref, 3)
        adjustments = {}
        if key in hta_rule and our is not None and not agrees(hta_rule[key], our):
            adjustments["overlap_as_negative_idle"] = round(hta_rule[key] - our, 3)
        expected = None if our is None else our + sum(adjustments.values())
        if hta is None:
            notes.append(f"HTA failed: {reports['hta'].failures.get(_analysis_of(key), 'no value')}")
        rows.append(MetricRow(
            metric=key, ours=_r(our), hta=_r(hta), hta_aligned=_r(aligned),
            agree=our is not None and hta is not None and agrees(our, hta),
            aligned_agree=expected is not None and aligned is not None and agrees(expected, aligned),
            deltas=deltas, adjustments=adjustments, note="; ".join(n for n in notes if n),
        ))
    return Comparison(path=str(p), rows=rows, hta=reports["hta"])
