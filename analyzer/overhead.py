"""The profiler's own cost: which settings a trace was recorded with, and what they cost per host event.

A profiled eager step is slower than the real one because the profiler does work on the host
for every event it records. How much depends on the settings (issue 17's same-process H200
recordings: 1.1-1.4 us per recorded host event without shapes, 1.7-1.8 with
``record_shapes``, 2.1-2.8 with ``with_stack``), so one constant fits only one of them.

:func:`detect_profiler_settings` reads the settings from the trace: torch.profiler's top-level
flags (``record_shapes``, ``with_stack``, ``with_flops``, ``with_modules``, ``profile_memory``),
else their traces in the events (``Input Dims`` on cpu_ops for shapes; ``python_function``
events or ``Call stack`` arguments for Python stacks; ``cpu_instant_event`` rows for memory
profiling) and the event mix (no cpu_ops at all: CUPTI tracing of runtime calls only, as
Nsight Systems or a CUDA-only torch.profiler records). The settings fall into one **tier**:

* ``cupti``: runtime calls only, no framework ops recorded;
* ``plain``: cpu_ops without shapes or stacks;
* ``shapes``: ``record_shapes`` (or ``with_flops``, which needs the shapes);
* ``stack``: ``with_stack`` or ``with_modules`` (the Python tracer runs on every Python call)
  without shapes; ``shapes+stack``: both. The costs add up: on a CPU-only run here (tiny
  decoder, one thread, same process) 0.88 us per op plain, +0.63 for shapes, +0.29 for stacks.

:class:`OverheadTable` holds per tier the overhead per recorded host event (CPU op or runtime
call, as counted in a step's ``host_events``), a point value and a low/high range, and the
relative error band of the predicted graph step. A rate is either in us (``unit="us"``) or in
units of the trace's **host reference** ``host_ref_us`` (``unit="ref"``): the median duration
of its leaf CPU ops (ops with no op or runtime call inside them: views, allocations). The
profiler's bookkeeping is CPU work, so it is slower on a slower host, or in a slow phase of
one; the leaf ops, profiled alike, show that speed. The estimated unprofiled eager step is
``max(profiled step - us_per_event x host_events, GPU busy)`` (the profiler does not slow the
GPU's own work); the speedup range takes the high overhead and the slow end of the graph
band for its low end, the low overhead and the fast end for its high end. A rate can also be a
``share`` of the profiled step (the **ratio model**: unprofiled = (1 - share) x profiled, the
profiler's cost and the unprofiled host work both scaling with the host's speed);
``OverheadTable.shares`` layers it over the rates: its point, both models' range
(:meth:`OverheadTable.per_event_us`; shipped for ``plain``, ``shapes``, ``stack``).

With Python stacks the profiler records every Python call as well, and the ``stack`` tiers' rates hold only as
many as the harness decoder makes (0.24 per host event). A serving engine makes far more (vLLM 0.24: ~3 per host
event in an eager step, ~13 in a FULL-graph step), so each call past ``OverheadTable.python_calls_per_event`` (0.25)
per host event costs ``OverheadTable.python_call`` besides (1.78x the host reference: vLLM's interleaved
recordings, ``bench/python_call_fit.py``), off the step before the tier's model applies
(:attr:`OverheadEstimate.python_call_us`, :func:`python_calls_priced`).

:func:`fit_overhead` refits the table from recordings whose unprofiled eager step was timed
(ideally in the same process, just before and after the profiled steps), and
:func:`evaluate` gives the error table; ``python -m launchgap.overhead_fit fit`` runs both.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, replace

import numpy as np

from .trace import Kind, Trace

TIERS = ("cupti", "plain", "shapes", "stack", "shapes+stack")
#: Share of cpu_ops with recorded ``Input Dims`` from which shapes count as recorded (old traces
#: without the top-level flag; a few ops record no inputs even with shapes on).
SHAPES_SHARE = 0.5


@dataclass(frozen=True)
class ProfilerSettings:
    """The profiler settings a trace shows. A flag is None when the trace cannot tell.

    ``tier`` is one of :data:`TIERS`; ``evidence`` says in words what each conclusion rests on;
    ``cpu_ops`` and ``runtime_calls`` are the event mix of the whole trace; ``host_ref_us`` the
    median duration of its leaf CPU ops (None without any).
    """

    tier: str
    record_shapes: bool | None
    with_stack: bool | None
    with_flops: bool | None
    with_modules: bool | None
    profile_memory: bool | None
    cpu_ops: int
    runtime_calls: int
    host_ref_us: float | None = None
    evidence: tuple[str, ...] = ()

    def to_dict(self) -> dict:
        d = asdict(self)
        d["evidence"] = list(self.evidence)
        return d

    @property
    def short(self) -> str:
        """The settings in a few words: ``record_shapes``, ``with_stack + record_shapes``, ``no shapes``..."""
        on = [k for k in ("with_stack", "with_modules", "record_shapes", "with_flops", "profile_memory")
              if getattr(self, k)]
        if self.tier == "cupti":
            return "runtime calls only (CUPTI)"
        return " + ".join(on) if on else "no shapes, no stacks"


def detect_profiler_settings(trace: Trace) -> ProfilerSettings:
    """The profiler settings of a parsed trace (see the module docstring for the rules)."""
    ps = trace.profiler_settings
    cpu = trace.kind == Kind.CPU_OP
    n_cpu = int(np.count_nonzero(cpu))
    n_rt = int(np.count_nonzero(trace.kind == Kind.RUNTIME))
    ev: list[str] = []
    if trace.format == "nsys":
        ev.append("Nsight Systems export: CUPTI traces runtime calls, no framework ops")

    def flag(key: str) -> bool | None:
        v = ps.get(key)
        if v is not None:
            ev.append(f"{key} {'on' if v else 'off'} (trace metadata)")
        return v

    shapes = flag("record_shapes")
    if shapes is None and n_cpu:
        share = float(np.count_nonzero(trace.dims_id[cpu] >= 0)) / n_cpu
        shapes = share >= SHAPES_SHARE
        ev.append(f"Input Dims on {share:.0%} of {n_cpu:,} cpu_ops")
    stack = flag("with_stack")
    py_ev, stacks = int(ps.get("python_function_events", 0)), int(ps.get("cpu_ops_with_call_stack", 0))
    if stack is None and (py_ev or stacks):
        stack = True
        ev.append(f"{py_ev:,} python_function events" if py_ev else f"'Call stack' on {stacks:,} cpu_ops")
    elif stack is None and n_cpu and ps:
        stack = False
        ev.append("no python_function events or call stacks")
    flops = flag("with_flops")
    modules = flag("with_modules")
    memory = flag("profile_memory")
    inst = int(ps.get("instant_events", 0))
    if memory is None and inst:
        memory = True
        ev.append(f"{inst:,} cpu_instant_event rows (memory profiling)")
    if n_cpu == 0:
        tier = "cupti"
        if trace.format != "nsys":
            ev.append("no cpu_op events: only CUDA activity was recorded")
    elif stack or modules:
        tier = "shapes+stack" if shapes or flops else "stack"
    elif shapes or flops:
        tier = "shapes"
    else:
        tier = "plain"
    ref = host_ref_us(trace)
    return ProfilerSettings(tier=tier, record_shapes=shapes, with_stack=stack, with_flops=flops,
                            with_modules=modules, profile_memory=memory, cpu_ops=n_cpu, runtime_calls=n_rt,
                            host_ref_us=None if ref is None else round(ref, 4), evidence=tuple(ev))


#: Host rows (the first ones, in time order) the host reference is measured on: a median needs no more.
HOST_REF_ROWS = 200_000


def host_ref_us(trace: Trace) -> float | None:
    """Median duration (us) of the trace's leaf CPU ops: cpu_ops inside which no other cpu_op or runtime
    call starts on the same thread. Measured over the first :data:`HOST_REF_ROWS` host rows (a
    contiguous stretch in time, so nesting stays whole). None when there is none."""
    host = np.flatnonzero((trace.kind == Kind.CPU_OP) | (trace.kind == Kind.RUNTIME))[:HOST_REF_ROWS]
    if host.size == 0:
        return None
    h = host[np.lexsort((trace.start_ns[host], trace.tid[host], trace.pid[host]))]
    same = (trace.tid[h][1:] == trace.tid[h][:-1]) & (trace.pid[h][1:] == trace.pid[h][:-1])
    has_child = np.zeros(h.size, dtype=bool)
    has_child[:-1] = same & (trace.start_ns[h][1:] < trace.end_ns[h][:-1])
    leaf = h[~has_child & (trace.kind[h] == Kind.CPU_OP)]
    return float(np.median(trace.dur_ns[leaf])) / 1e3 if leaf.size else None


@dataclass(frozen=True)
class OverheadRate:
    """Profiler overhead per recorded host event for one tier: point value and range, in us
    (``unit="us"``), in multiples of the trace's host reference (``unit="ref"``), or as a share of
    the profiled step (``unit="share"``: the ratio model, unprofiled step = (1 - share) x profiled
    step; per host event that is ``share x profiled step / host events``)."""

    tier: str
    value: float
    low: float
    high: float
    source: str
    unit: str = "us"

    def in_us(self, host_ref: float | None, typical_ref_us: float, step_us: float | None = None,
              host_events: float | None = None) -> tuple[float, float, float]:
        """(point, low, high) in us for a trace with this host reference (the typical one when None); a
        ``share`` rate needs the profiled step and its host events (0 without them)."""
        if self.unit == "us":
            return self.value, self.low, self.high
        if self.unit == "share":
            per = step_us / host_events if step_us and host_events else 0.0
            return self.value * per, self.low * per, self.high * per
        ref = host_ref if host_ref is not None and host_ref > 0 else typical_ref_us
        return self.value * ref, self.low * ref, self.high * ref


@dataclass(frozen=True)
class OverheadTable:
    """Per-tier overhead rates, the graph-step error band, and the memory-profiling allowance.

    ``graph_rel_err``: relative error band of the predicted graph step used in the speedup
    range. ``profile_memory_high_factor``: multiplies a tier's high end when memory profiling
    is on (no recording measured its cost; the point value stays). ``typical_ref_us``: the host
    reference assumed for a ``ref`` rate when a trace has no leaf ops to measure it.
    """

    rates: tuple[OverheadRate, ...]
    graph_rel_err: float = 0.04
    profile_memory_high_factor: float = 1.3
    typical_ref_us: float = 0.65
    #: The ratio model layered over ``rates`` (unit ``share``): for a tier listed here the point
    #: value is the share's, and the range spans both the share's range and the rate's (the two
    #: models' uncertainty together); see :meth:`per_event_us`.
    shares: tuple[OverheadRate, ...] = ()
    #: With Python stacks: the cost of each recorded Python call past ``python_calls_per_event`` per host event
    #: (unit ``ref`` or ``us``; None: not priced). The stack tiers' rates were fitted on steps making that many.
    python_call: OverheadRate | None = None
    python_calls_per_event: float = 0.25
    #: Host events per eager kernel launch of the steps the shares and rates were fitted on (the harness decoder:
    #: 3.96-3.97 in every fit recording). Steps with more events per launch (transformers' eager decode 4.5-4.9,
    #: vLLM 0.24's eager runner 6.6: views and bookkeeping ops that launch nothing, each costing the profiler as
    #: much) lost a larger share of their profiled step to the profiler: :func:`op_mix_warning`.
    fit_events_per_launch: float = 3.97
    #: How far above :attr:`fit_events_per_launch` (a share of it) a trace's eager steps go before the warning.
    events_per_launch_margin: float = 0.1

    def rate(self, tier: str) -> OverheadRate:
        for r in self.rates:
            if r.tier == tier:
                return r
        raise KeyError(tier)

    def share(self, tier: str) -> OverheadRate | None:
        """The ratio-model rate of a tier (None: the tier uses its rate alone)."""
        return next((r for r in self.shares if r.tier == tier), None)

    def python_call_us(self, host_ref: float | None) -> tuple[float, float, float]:
        """(point, low, high) us per Python call past the fitted density, at this host reference (0s: not priced)."""
        if self.python_call is None:
            return 0.0, 0.0, 0.0
        return self.python_call.in_us(host_ref, self.typical_ref_us)

    def with_rate(self, new: OverheadRate) -> OverheadTable:
        return replace(self, rates=tuple(new if r.tier == new.tier else r for r in self.rates))

    def with_share(self, new: OverheadRate) -> OverheadTable:
        return replace(self, shares=tuple(r for r in self.shares if r.tier != new.tier) + (new,))

    def per_event_us(self, tier: str, host_ref: float | None, step_us: float | None = None,
                     host_events: float | None = None, share_tier: str | None = None) -> tuple[float, float, float]:
        """(point, low, high) overhead in us per host event for a trace of this tier, host reference,
        profiled step and host events per step. With a share for the tier: the share's point, the
        range from the lower to the higher of the two models' ends (a share needs a step and its
        host events; without them the rate alone applies). ``share_tier``: the share to use (default ``tier``;
        e.g. ``shapes+compiled`` for a torch.compile'd trace)."""
        point, low, high = self.rate(tier).in_us(host_ref, self.typical_ref_us, step_us, host_events)
        sh = self.share(share_tier or tier)
        if sh is None or not (step_us and host_events):
            return point, low, high
        s_point, s_low, s_high = sh.in_us(host_ref, self.typical_ref_us, step_us, host_events)
        return s_point, min(low, s_low), max(high, s_high)


#: Shipped rates. ``plain``, ``shapes``, ``stack`` (multiples of the trace's host reference):
#: ``python -m launchgap.overhead_fit fit traces/h200-session-2026-12-01b`` on the FIT set, 24
#: same-process H200 recordings by ``launchgap record`` with drift control (tiny, 1b, 3b, 8b x
#: bs 1, 8, 64 x plain/shapes/stack; the 12 of 36 whose unprofiled eager step drifted over 5%
#: across the trace left out): point = median implied overhead, graph band = the 80% quantile of
#: |predicted / measured graph step - 1|. Range = the prediction interval of :func:`_band` over the
#: same 24 (2026-12-03: from their per-recording figures in docs/profiler-overhead.md, 11 of their traces
#: not committed; before, the sample's 10-90% percentiles, which held 78% of the held-out recordings).
#: Held out (never fitted on): two other same-process H200 sessions (see docs/profiler-overhead.md
#: for the error table).
#: ``shapes+stack`` (us per host event): issue 17's same-process recordings (no ``full``
#: recording yet). ``cupti``: assumed (no recording without cpu_ops was timed): CUPTI's
#: callback per runtime call, with a wide range. ``shares`` (the ratio model, point value of
#: ``plain``, ``shapes``, ``stack``): the unprofiled step is (1 - share) x the profiled step; same
#: FIT set, same fit (median share, prediction interval); the range spans the share's and the rate's
#: (``ratio+ref``). Chosen on the 23 interleaved H200 recordings (2026-12-02) scored
#: leave-one-model-out against the trace truth: median 4.9%, worst 10.9%, 83% inside the range
#: (the ref rates alone: 5.8%, 17.3%, 74%). Refit with ``python -m launchgap.overhead_fit fit``
#: (its ``ratio+ref`` table).
DEFAULT_OVERHEAD = OverheadTable(rates=(
    OverheadRate("cupti", 0.8, 0.4, 1.4, "assumed: CUPTI runtime-call tracing, not measured"),
    OverheadRate("plain", 2.2185, 1.9022, 2.6186, "fitted: 5 same-process H200 recordings (2026-12-01b)", "ref"),
    OverheadRate("shapes", 3.2916, 2.183, 4.161, "fitted: 9 same-process H200 recordings (2026-12-01b)", "ref"),
    OverheadRate("stack", 2.7761, 1.2187, 3.1711, "fitted: 10 same-process H200 recordings (2026-12-01b)", "ref"),
    OverheadRate("shapes+stack", 2.45, 2.1, 2.8, "issue 17: same-process H200 recordings"),
), graph_rel_err=0.031, shares=(
    OverheadRate("plain", 0.235, 0.2097, 0.2633, "fitted: 5 same-process H200 recordings (2026-12-01b)", "share"),
    OverheadRate("shapes", 0.3339, 0.2983, 0.5423, "fitted: 9 same-process H200 recordings (2026-12-01b)", "share"),
    OverheadRate("stack", 0.2773, 0.1234, 0.3141, "fitted: 10 same-process H200 recordings (2026-12-01b)", "share"),
    # torch.compile'd eager steps (Inductor kernels launched one by one): the profiler takes a larger share
    OverheadRate("shapes+compiled", 0.4463, 0.4395, 0.4531,
                 "fitted: 2 same-process H200 recordings of a torch.compile'd 1B llama, bs 8 and 64 (2026-12-02)",
                 "share"),
), python_call=OverheadRate("python_call", 1.78, 0.9, 2.31,
                            "fitted: 6 interleaved blocks of vLLM 0.24 on the H200, eager and FULL graphs (2026-12-04)",
                            "ref"))


@dataclass(frozen=True)
class OverheadEstimate:
    """The overhead rate that applies to one trace (us per host event) and where it comes from."""

    tier: str
    us_per_event: float
    low: float
    high: float
    source: str
    notes: tuple[str, ...] = ()
    #: us per recorded Python call past the table's ``python_calls_per_event`` (point, low, high): with Python
    #: stacks only, 0 otherwise; see :func:`python_calls_priced`.
    python_call_us: float = 0.0
    python_call_low: float = 0.0
    python_call_high: float = 0.0
    python_calls_per_event: float = 0.0
    #: The host-reference rate's point, us per host event, where ``us_per_event`` is the ratio model's (else
    #: ``None``): see :attr:`us_per_event_anywhere`.
    event_rate_us: float | None = None

    @property
    def us_per_event_anywhere(self) -> float:
        """The profiler's cost of one recorded host event wherever it falls (between two eager launches,
        :func:`launchgap.predict.host_us_per_launch`), us: :attr:`us_per_event`, at most the host-reference rate. The
        ratio model's figure is a share of the profiled step spread over its host events, right for steps like the
        eager ones it was fitted on; a FULL-graph step's few events over a long step inflate it past any one event's
        cost (vLLM's FULL-graph traces: 4-10 us against the rate's 1-2.3)."""
        return self.us_per_event if self.event_rate_us is None else min(self.us_per_event, self.event_rate_us)

    def python_us(self, python_calls: np.ndarray, host_events: np.ndarray, end: str = "point") -> np.ndarray:
        """Per step the Python tracer's cost (us) at this estimate's ``point``, ``low`` or ``high`` rate."""
        rate = {"point": self.python_call_us, "low": self.python_call_low, "high": self.python_call_high}[end]
        return rate * python_calls_priced(python_calls, host_events, self.python_calls_per_event)


def python_calls_priced(python_calls: np.ndarray | float, host_events: np.ndarray | float,
                        per_event: float) -> np.ndarray:
    """The Python calls of a step (or steps) that a ``with_stack`` trace's per-call rate prices: those past
    ``per_event`` per host event (the stack tiers' rates already hold the calls of the steps they were fitted
    on: the harness decoder makes 0.24 per host event)."""
    return np.maximum(np.asarray(python_calls, dtype=float) - per_event * np.asarray(host_events, dtype=float), 0.0)


def estimate_overhead(settings: ProfilerSettings, table: OverheadTable = DEFAULT_OVERHEAD,
                      override_us: float | None = None, step_us: float | None = None,
                      host_events: float | None = None, compiled: bool = False,
                      python_calls: float | None = None) -> OverheadEstimate:
    """The per-event overhead for a trace's settings; ``override_us`` (a user's figure) replaces it.

    ``step_us`` / ``host_events``: the trace's median profiled step and host events per step, which
    a ratio-model tier (``table.shares``) needs: its per-event figure is the implied one, ``share x
    step_us / host_events``; without them the tier's rate applies. ``compiled``: the steps are torch.compile'd
    without graphs; the table's ``<tier>+compiled`` share applies where it has one.

    With Python stacks (a ``stack`` tier) each recorded Python call past ``table.python_calls_per_event`` per
    host event costs ``table.python_call`` besides (:attr:`OverheadEstimate.python_call_us`); ``python_calls``,
    the median step's Python calls, takes their cost off ``step_us`` before the share is applied (the share is
    of the step the tier's rates were fitted on)."""
    if override_us is not None:
        return OverheadEstimate(settings.tier, override_us, override_us, override_us, "given by the user")
    py = table.python_call_us(settings.host_ref_us) if settings.tier.endswith("stack") else (0.0, 0.0, 0.0)
    est = _estimate_events(settings, table, step_us, host_events, compiled, python_calls, py[0])
    if not py[0]:
        return est
    note = (f"with_stack: each recorded Python call past {table.python_calls_per_event:g} per host event costs "
            f"{py[0]:.3g} us ({py[1]:.3g}-{py[2]:.3g}; {table.python_call.value:g}x the host reference), "
            f"{table.python_call.source}")
    return replace(est, notes=est.notes + (note,), python_call_us=round(py[0], 4), python_call_low=round(py[1], 4),
                   python_call_high=round(py[2], 4), python_calls_per_event=table.python_calls_per_event)


def _estimate_events(settings: ProfilerSettings, table: OverheadTable, step_us: float | None,
                     host_events: float | None, compiled: bool, python_calls: float | None,
                     python_call_us: float) -> OverheadEstimate:
    """:func:`estimate_overhead`'s per-event part (the Python calls' cost off ``step_us`` first)."""
    what = "the profiled step"
    if step_us and host_events and python_calls and python_call_us:
        step_us = max(step_us - python_call_us * float(python_calls_priced(python_calls, host_events,
                                                                           table.python_calls_per_event)), 0.0)
        what = "the profiled step less its Python calls"
    r = table.rate(settings.tier)
    share_tier = f"{settings.tier}+compiled" if compiled and table.share(f"{settings.tier}+compiled") else None
    point, low, high = table.per_event_us(settings.tier, settings.host_ref_us, step_us, host_events, share_tier)
    notes: list[str] = []
    sh = table.share(share_tier or settings.tier)
    if sh is not None and step_us and host_events:
        ref = settings.host_ref_us or table.typical_ref_us
        notes.append(f"ratio model: unprofiled step = {1 - sh.value:.4g} x {what} ({step_us:,.0f} us over "
                     f"{host_events:,.0f} host events: {point:.3g} us per host event); the range spans it and the "
                     f"host-reference model ({r.value:g}x the {ref:.3g} us host reference)")
        high *= table.profile_memory_high_factor if settings.profile_memory else 1.0
        return OverheadEstimate(r.tier, round(point, 4), round(low, 4), round(high, 4),
                                f"ratio model, {sh.source}; range with the host-reference rate, {r.source}",
                                tuple(notes + _memory_note(settings, table)),
                                event_rate_us=round(r.in_us(settings.host_ref_us, table.typical_ref_us)[0], 4))
    if r.unit == "ref":
        ref = settings.host_ref_us
        notes.append(f"{r.value:g}x the host reference ({ref:.3g} us per leaf CPU op)" if ref else
                     f"{r.value:g}x a typical host reference ({table.typical_ref_us:g} us): no leaf CPU ops")
    if settings.profile_memory:
        high *= table.profile_memory_high_factor
    return OverheadEstimate(r.tier, round(point, 4), round(low, 4), round(high, 4), r.source,
                            tuple(notes + _memory_note(settings, table)))


#: How :func:`op_mix_warning`'s line starts: a report with a measured step drops it (:func:`launchgap.report.
#: with_observed_step`), the estimate it doubts no longer in use.
OP_MIX_WARNING_START = "the eager steps record "


def op_mix_warning(table: OverheadTable, host_events: float | None, launches: float | None,
                   compiled: bool = False) -> str | None:
    """One line when the eager steps record more host events per kernel launch (``host_events`` over ``launches``,
    medians per eager step) than the steps the overhead model was fitted on, past its margin
    (:attr:`OverheadTable.fit_events_per_launch`): the profiler then took a larger share of the step than the model
    takes off, so the unprofiled step and the speedup read high (transformers' eager decode, measured: +24..+82% on
    the unprofiled step, docs/profiler-overhead.md). ``None`` otherwise, for compiled steps (their own share), and
    without launches."""
    if compiled or not host_events or not launches:
        return None
    per = host_events / launches
    if per <= table.fit_events_per_launch * (1 + table.events_per_launch_margin):
        return None
    return (f"{OP_MIX_WARNING_START}{per:.2f} host events per kernel launch, the profiler-overhead model was fitted "
            f"on {table.fit_events_per_launch:g} (the harness decoder): where more of a step's events launch nothing "
            f"the profiler takes a larger share of it (measured: transformers' eager decode at 4.5-4.9, its unprofiled "
            f"step +24..+82% high; vLLM 0.24's eager runner at 6.6, +28%), so the estimated unprofiled step and the "
            f"speedup likely read high; a measured step "
            f"(--observed-step-us, a server's inter-token latency) settles it (docs/profiler-overhead.md)")


def _memory_note(settings: ProfilerSettings, table: OverheadTable) -> list[str]:
    return ([f"profile_memory on: its cost was not measured; the range's high end is raised "
             f"{table.profile_memory_high_factor:g}x"] if settings.profile_memory else [])


def unprofiled_step_us(step_us: np.ndarray, host_events: np.ndarray, gpu_busy_us: np.ndarray,
                       us_per_event: float | np.ndarray) -> np.ndarray:
    """Estimated step time without the profiler: the profiled step less ``us_per_event`` per host event.

    Never below the GPU busy time (the profiler does not slow the GPU's own work).
    """
    est = np.asarray(step_us, dtype=float) - np.asarray(us_per_event, dtype=float) * np.asarray(host_events, float)
    return np.maximum(est, np.asarray(gpu_busy_us, dtype=float))


@dataclass(frozen=True)
class SpeedupRange:
    """Eager step (us), graph step (us) and their ratio as a point value and a low/high range."""

    eager_us: float
    eager_us_low: float
    eager_us_high: float
    speedup: float
    speedup_low: float
    speedup_high: float


def speedup_range(eager_us: float, eager_us_low: float, eager_us_high: float, graph_us: float,
                  graph_rel_err: float) -> SpeedupRange:
    """Speedup ``eager / graph`` with its range: the low end pairs the slow-graph end of the band with
    the low eager step, the high end the fast-graph end with the high one."""
    if graph_us <= 0:
        return SpeedupRange(eager_us, eager_us_low, eager_us_high, 0.0, 0.0, 0.0)
    lo_g, hi_g = graph_us * (1 + graph_rel_err), graph_us * max(1 - graph_rel_err, 1e-9)
    return SpeedupRange(eager_us, eager_us_low, eager_us_high, eager_us / graph_us, eager_us_low / lo_g,
                        eager_us_high / hi_g)


# --- fitting ---------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Recording:
    """One eager trace with the unprofiled step measured beside it (times in us, medians per step).

    ``graph_us`` is the measured unprofiled graph step (None when not timed: then only the eager
    estimate is scored, not the speedup). ``host_ref_us``: the trace's host reference.
    ``group``: the workload (model) the recording belongs to, for leave-one-group-out scoring.
    """

    name: str
    tier: str
    settings: str
    profiled_step_us: float
    host_events: float
    busy_us: float
    predicted_graph_us: float
    eager_us: float
    graph_us: float | None = None
    memory: bool = False
    host_ref_us: float | None = None
    group: str = ""

    @property
    def implied_us_per_event(self) -> float:
        """The per-event overhead that would make the estimate hit the measured eager step."""
        return (self.profiled_step_us - self.eager_us) / self.host_events if self.host_events > 0 else float("nan")

    def implied(self, unit: str, typical_ref_us: float) -> float:
        """The implied overhead in ``unit`` (``us``, multiples of the host reference, or ``share`` of the profiled step)."""
        if unit == "us":
            return self.implied_us_per_event
        if unit == "share":
            return (self.profiled_step_us - self.eager_us) / self.profiled_step_us
        ref = self.host_ref_us if self.host_ref_us else typical_ref_us
        return self.implied_us_per_event / ref


def _band(values: np.ndarray, coverage: float) -> tuple[float, float, float]:
    """Median and a range meant to hold ``coverage`` of the *next* recording's values: a distribution-free
    prediction interval, the order statistics ``k`` and ``n + 1 - k`` of the ``n`` values with
    ``k = floor((n + 1)(1 - coverage) / 2)``, which hold a new value with probability ``(n + 1 - 2k) / (n + 1)``.

    Why not the sample's central ``coverage`` (its percentiles): that describes the fitted recordings, not a
    new one; from 5 recordings the 10-90% percentiles hold about half of the next ones. Below 9 values no
    pair of order statistics reaches 80% and the range is the fitted minimum to maximum (``k = 1``), which
    holds ``(n - 1) / (n + 1)`` of new values.
    """
    v = np.sort(np.asarray(values, dtype=float))
    k = max(1, int(np.floor((v.size + 1) * (1.0 - coverage) / 2 + 1e-9)))  # 1 - 0.8 is 0.19999...
    return float(np.median(v)), float(v[k - 1]), float(v[v.size - k])


def fit_overhead(recs: Sequence[Recording], base: OverheadTable = DEFAULT_OVERHEAD, coverage: float = 0.8,
                 unit: str = "us", graph_coverage: float | None = None) -> OverheadTable:
    """Refit the per-tier rates on recordings; tiers without recordings keep ``base``'s rates.

    Per tier: point = median implied overhead per event (in ``unit``: us, multiples of the host
    reference, or ``share`` of the profiled step: the ratio model); range = the prediction interval
    of :func:`_band` (meant to hold ``coverage`` of new recordings). ``unit="ratio+ref"``: the rates in ``ref`` and, over them, the
    shares (:attr:`OverheadTable.shares`: the ratio model's point, both models' range). Only host-bound
    recordings count (measured eager step at least 1.2x the GPU busy time: a GPU-bound step
    hides the profiler's host cost and implies nothing), and only those whose measured step is
    below the profiled one (else the two were not timed alike). ``cupti`` stays in us (no
    leaf ops).
    The graph band is the ``graph_coverage`` (default ``coverage``) quantile of ``|predicted / measured graph step - 1|`` over
    recordings with a measured graph step.
    """
    if unit == "ratio+ref":  # the combination: rates in ref, the ratio model's shares over them
        ref = fit_overhead(recs, base, coverage, "ref", graph_coverage)
        shares = fit_overhead(recs, replace(ref, shares=()), coverage, "share", graph_coverage)
        return replace(ref, shares=tuple(r for r in shares.rates if r.unit == "share" and r.tier != "cupti"))
    table = replace(base, shares=())  # one model alone
    for tier in TIERS:
        u = "us" if tier == "cupti" else unit
        imp = np.array([r.implied(u, base.typical_ref_us) for r in recs
                        if r.tier == tier and r.eager_us >= 1.2 * r.busy_us])
        imp = imp[np.isfinite(imp) & (imp > 0)]
        if imp.size == 0:
            continue
        mid, lo, hi = _band(imp, coverage)
        table = table.with_rate(OverheadRate(tier, round(mid, 4), round(min(lo, mid), 4), round(max(hi, mid), 4),
                                             f"fitted on {imp.size} recording(s)", u))
    g = np.array([abs(r.predicted_graph_us / r.graph_us - 1) for r in recs if r.graph_us])
    if g.size:
        gc = coverage if graph_coverage is None else graph_coverage
        table = replace(table, graph_rel_err=round(float(np.quantile(g, gc)), 4))
    return table


@dataclass(frozen=True)
class Scored:
    """One recording under one table: the estimate, the measurement and the error."""

    rec: Recording
    us_per_event: float
    eager_est_us: float
    eager_err: float
    speedup_pred: float
    speedup_low: float
    speedup_high: float
    speedup_measured: float | None
    speedup_err: float | None
    in_range: bool | None


def score(rec: Recording, table: OverheadTable) -> Scored:
    """The estimate of one recording under ``table`` against its measurements."""
    point, low, high = table.per_event_us(rec.tier, rec.host_ref_us, rec.profiled_step_us, rec.host_events)
    high *= table.profile_memory_high_factor if rec.memory else 1.0
    est, e_lo, e_hi = (float(unprofiled_step_us(rec.profiled_step_us, rec.host_events, rec.busy_us, k))
                       for k in (point, high, low))
    sp = speedup_range(est, e_lo, e_hi, rec.predicted_graph_us, table.graph_rel_err)
    meas = rec.eager_us / rec.graph_us if rec.graph_us else None
    return Scored(rec, point, est, est / rec.eager_us - 1, sp.speedup, sp.speedup_low, sp.speedup_high, meas,
                  None if meas is None else sp.speedup / meas - 1,
                  None if meas is None else bool(sp.speedup_low <= meas <= sp.speedup_high))


@dataclass(frozen=True)
class Evaluation:
    """Scores of every recording under one way of estimating, and their summary.

    ``median_abs_err`` / ``worst_abs_err``: over the speedup errors where a graph step was
    measured, else over the eager-step errors; ``coverage``: share of speedups inside the range.
    """

    name: str
    scored: list[Scored]
    median_abs_err: float
    worst_abs_err: float
    coverage: float | None
    n_speedup: int = 0


def _summarise(name: str, scored: list[Scored]) -> Evaluation:
    sp = np.array([abs(s.speedup_err) for s in scored if s.speedup_err is not None])
    errs = sp if sp.size else np.array([abs(s.eager_err) for s in scored])
    cov = [s.in_range for s in scored if s.in_range is not None]
    return Evaluation(name, scored, float(np.median(errs)) if errs.size else 0.0,
                      float(errs.max()) if errs.size else 0.0, float(np.mean(cov)) if cov else None, int(sp.size))


def evaluate(recs: Sequence[Recording], table: OverheadTable, name: str) -> Evaluation:
    """Every recording scored under one fixed table."""
    return _summarise(name, [score(r, table) for r in recs])


def evaluate_leave_one_out(recs: Sequence[Recording], base: OverheadTable = DEFAULT_OVERHEAD,
                           coverage: float = 0.8, unit: str = "us", name: str | None = None,
                           graph_coverage: float | None = None) -> Evaluation:
    """Every recording scored under a table fitted on the others (its tier falls back to ``base``
    when it is the only recording of its tier): the honest error of refitting."""
    return _summarise(name or f"refit ({unit}), leave-one-out",
                      [score(r, fit_overhead([q for q in recs if q is not r], base, coverage, unit, graph_coverage))
                       for r in recs])


def evaluate_leave_group_out(recs: Sequence[Recording], base: OverheadTable = DEFAULT_OVERHEAD,
                             coverage: float = 0.8, unit: str = "us", name: str | None = None,
                             graph_coverage: float | None = None) -> Evaluation:
    """Every recording scored under a table fitted on the recordings of the other groups (models): the
    error on a workload the table never saw. A tier no other group recorded falls back to ``base``."""
    return _summarise(name or f"refit ({unit}), leave-one-model-out",
                      [score(r, fit_overhead([q for q in recs if q.group != r.group], base, coverage, unit, graph_coverage))
                       for r in recs])


def constant_table(us_per_event: float, graph_rel_err: float = 0.0) -> OverheadTable:
    """One rate for every tier (the analyzer's former model: 1.8 us per host event, no range)."""
    return OverheadTable(rates=tuple(OverheadRate(t, us_per_event, us_per_event, us_per_event, "constant")
                                     for t in TIERS), graph_rel_err=graph_rel_err, profile_memory_high_factor=1.0)


def table_as_python(table: OverheadTable) -> str:
    """The table as Python source to paste over :data:`DEFAULT_OVERHEAD`."""
    lines = ["DEFAULT_OVERHEAD = OverheadTable(rates=("]
    lines += [f"    OverheadRate({r.tier!r}, {r.value:g}, {r.low:g}, {r.high:g}, {r.source!r}, {r.unit!r}),"
              for r in table.rates]
    tail = f"), graph_rel_err={table.graph_rel_err:g}, profile_memory_high_factor=" \
           f"{table.profile_memory_high_factor:g}, typical_ref_us={table.typical_ref_us:g}"
    py = table.python_call
    py_text = ("" if py is None else
               f", python_call=OverheadRate({py.tier!r}, {py.value:g}, {py.low:g}, {py.high:g}, {py.source!r}, "
               f"{py.unit!r})") + f", python_calls_per_event={table.python_calls_per_event:g}"
    if table.shares:
        lines.append(tail + ", shares=(")
        lines += [f"    OverheadRate({r.tier!r}, {r.value:g}, {r.low:g}, {r.high:g}, {r.source!r}, {r.unit!r}),"
                  for r in table.shares]
        lines.append(")" + py_text + ")")
    else:
        lines.append(tail + py_text + ")")
    return "\n".join(lines)
