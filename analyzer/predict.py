"""Predicting the CUDA-graph step time from an eager trace.

A replayed graph runs the same kernels with the per-launch host cost gone. Model::

    predicted_graph_us = gpu_busy_us + node_us * n_short_kernels + graph_launch_us

``gpu_busy_us`` is the eager step's busy time (union of its GPU ops). Inside a replay the
device still pays a fraction of a microsecond between kernel nodes; a kernel that runs
longer than ``long_kernel_us`` hides that cost behind its own execution, so only kernels
shorter than it are charged ``node_us``. ``graph_launch_us`` is the one launch of the graph.

Defaults were fitted on two H200 data sets (docs/prediction.md): the reference traces
traces/h200-1b (1B-class decoder, batch 1/8/64/256) and the harness's own traces
under traces/h200 (tiny, 1b, 8b, 70b-slice presets). Weighted least squares of (unprofiled
graph_us - eager busy - graph_launch_us) over the short-kernel count gives 0.33-0.35 us per
node for cut-offs of 10-50 us (0.34 with 20 us); per model the residual is 0.25 (tiny) to
0.46 us (8b, 70b-slice at batch 1) per node, so expect a few percent of model-to-model spread.
The graph traces themselves show 0.42-0.47 us median gaps after short kernels and 0.29 us
after long ones.

Profiled eager steps are slower than unprofiled ones because the profiler records every
host event. How much slower depends on the profiler's settings, which :mod:`launchgap.overhead`
reads from the trace: the estimated unprofiled step is the profiled step less the overhead
per recorded CPU op and runtime call of that setting (``overhead``: 1.25 us without shapes;
with ``record_shapes`` 2.8 times the trace's host reference, about 1.8 us on the H200 harness
host; 2.45 us with ``with_stack`` and shapes; each with a low/high range), never below the
GPU busy time. ``profiler_us_per_host_event`` forces one figure instead. A real
measurement (``observed_step_us``) always wins over the estimate.

``python -m launchgap.overhead_fit fit PATH...`` refits the overhead table on recordings with
measured unprofiled steps and prints the error table (see :func:`main`).
"""
from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from .overhead import DEFAULT_OVERHEAD, OverheadTable, unprofiled_step_us
from .trace import Api, Kind, Trace


@dataclass(frozen=True)
class PredictionModel:
    """Constants of the graph-step model (all in microseconds) and of the profiler's overhead.

    ``profiler_us_per_host_event``: None (default) takes the overhead per host event from the
    trace's detected profiler settings and ``overhead``; a number forces it for every trace.
    """

    node_us: float = 0.34
    long_kernel_us: float = 20.0
    graph_launch_us: float = 3.0
    profiler_us_per_host_event: float | None = None
    overhead: OverheadTable = DEFAULT_OVERHEAD
    #: ``True``: ``node_us`` is used as given (``--node-us``); ``False``: fitted from the trace's own graph
    #: replays where it has enough of them (:func:`replay_node_us`), ``node_us`` otherwise.
    node_us_fixed: bool = False
    #: Unprofiled replay node cost over the profiled trace's mean gap after a short kernel inside a replay (gaps up
    #: to ``replay_gap_cap_us``).
    node_per_replay_gap: float = 0.79
    #: Longest gap inside a replay counted as node cost, us: a longer one is a dependency (an event wait, a copy or
    #: memset node), not the cost of starting the next kernel.
    replay_gap_cap_us: float = 2.0
    #: Longest gap before a collective kernel inside a replay counted as its node's cost, us
    #: (:func:`replay_node_us`): NCCL's kernel nodes start 2.1-2.4 us after the kernel before them.
    collective_gap_cap_us: float = 8.0
    #: Unprofiled over profiled GPU time of a trace that replays graphs: the profiler lengthens the replays' kernels.
    replay_kernel_scale: float = 0.987
    #: Host time per eager launch between graph pieces that a piecewise step's GPU waits for, us.
    piecewise_launch_us: float = 1.9

    def kernel_scale(self, node_source: str) -> float:
        """The unprofiled share of profiled kernel time a trace's graph step is priced at: ``replay_kernel_scale``
        where the node cost was fitted on the trace's own replays (``node_source`` ``"trace replays"``), else 1 (the
        prior was fitted on profiled eager busy time)."""
        return self.replay_kernel_scale if node_source == "trace replays" else 1.0

    def predict_graph_us(self, gpu_busy_us: np.ndarray, n_short_kernels: np.ndarray,
                         kernel_scale: float = 1.0, n_short_collectives: np.ndarray | float = 0.0,
                         collective_node_us: float | None = None) -> np.ndarray:
        """Predicted graph-replay step time for each step (same shapes in, us out). ``kernel_scale``: the unprofiled
        share of the profiled busy time (``replay_kernel_scale`` where the node cost was fitted on the trace's own
        replays, 1 with the prior, which was fitted on profiled eager busy time). ``n_short_collectives`` of the short
        kernels are collectives, whose nodes cost ``collective_node_us`` each where the trace's replays measured it
        (:func:`replay_node_us`; ``None``: ``node_us`` like any other)."""
        extra = 0.0 if collective_node_us is None else \
            (collective_node_us - self.node_us) * np.asarray(n_short_collectives, dtype=float)
        return kernel_scale * np.asarray(gpu_busy_us, dtype=float) \
            + self.node_us * np.asarray(n_short_kernels, dtype=float) + extra + self.graph_launch_us

    def unprofiled_step_us(self, step_us: np.ndarray, host_events: np.ndarray, gpu_busy_us: np.ndarray,
                           us_per_event: float | np.ndarray | None = None,
                           graph_launch_excess_us: np.ndarray | float = 0.0,
                           replay_kernel_excess_us: np.ndarray | float = 0.0,
                           python_us: np.ndarray | float = 0.0) -> np.ndarray:
        """Estimated step time without the profiler: profiled step less the per-event overhead, less the
        profiler's part of its graph launch calls (``graph_launch_excess_us``, :func:`graph_launch_excess_us`),
        less its lengthening of the graph replays' kernels (``replay_kernel_excess_us``: ``(1 - replay_kernel_scale)``
        of the busy time of a step that replays graphs, where the trace's replays gave the node cost) and less the
        Python tracer's cost of its calls (``python_us``: :meth:`launchgap.overhead.OverheadEstimate.python_us`).

        ``us_per_event`` (e.g. a report's ``profiler_overhead_us_per_event``) wins; else the
        forced ``profiler_us_per_host_event``; else the ``shapes`` tier (torch.profiler with
        ``record_shapes``, the most common setting): its ratio model (each step x (1 - share))
        where the table has one, else its rate. Never below the GPU busy time.
        """
        # the profiler's GPU-side excess off first, whichever tier prices its host events: its lengthening of the
        # replays' kernels comes off the busy floor too (the unprofiled GPU work is that much shorter)
        kx = np.asarray(replay_kernel_excess_us, dtype=float)
        step = (np.asarray(step_us, dtype=float) - np.asarray(graph_launch_excess_us, dtype=float) - kx
                - np.asarray(python_us, dtype=float))
        busy = np.asarray(gpu_busy_us, dtype=float) - kx
        if us_per_event is None and self.profiler_us_per_host_event is not None:
            us_per_event = self.profiler_us_per_host_event
        elif us_per_event is None:
            sh = self.overhead.share("shapes")
            if sh is not None:
                return np.maximum((1 - sh.value) * step, busy)
            us_per_event = self.overhead.rate("shapes").in_us(None, self.overhead.typical_ref_us)[0]
        return unprofiled_step_us(step, host_events, busy, us_per_event)


DEFAULT_MODEL = PredictionModel()


def graph_launch_excess_us(trace: Trace, row_step: np.ndarray, n_steps: int, model: PredictionModel) -> np.ndarray:
    """Per step, its graph launch calls' time beyond ``model.graph_launch_us`` each, us: the profiler's part of them.

    Under the profiler a graph launch call records every node of the graph: 43-182 us (median per trace) per launch
    of the 17-90 node pieces of the H200 piecewise traces, where the same launch takes a few us unprofiled. A piecewise step's GPU waits for each later piece's launch, so that time
    inflates its profiled step; it is no host work of the model's. The step's first graph launch is not counted: it
    ends before the step's graph work starts, outside the GPU window the estimate starts from (a step of one
    compiled forward and eager sampling, transformers' static cache: its one 340-400 us launch). Steps with fewer
    than two graph launches: 0."""
    gl = np.flatnonzero((trace.api == Api.GRAPH_LAUNCH) & (row_step >= 0))
    gl = gl[np.lexsort((trace.start_ns[gl], row_step[gl]))]
    step = row_step[gl]
    later = gl[1:][step[1:] == step[:-1]]  # all but each step's first
    over = np.maximum(trace.dur_ns[later] / 1e3 - model.graph_launch_us, 0.0)
    return np.bincount(row_step[later], weights=over, minlength=n_steps)[:n_steps]


#: A device-to-device copy's name: Kineto's ``Memcpy DtoD (Device -> Device)``, Nsight's export ``Memcpy DtoD``.
_DTOD = re.compile(r"DtoD|Device -> Device")


@dataclass(frozen=True)
class StagingCopies:
    """Per step the device-to-device copies launched eagerly between two of its graph replays
    (:func:`piece_staging_copies`): ``count``, their time ``us``, and how many are short (under ``long_kernel_us``:
    each was charged a node's cost)."""

    count: np.ndarray
    us: np.ndarray
    short: np.ndarray


def piece_staging_copies(trace: Trace, rows: np.ndarray, step: np.ndarray, graph_launches: np.ndarray,
                         model: PredictionModel) -> StagingCopies:
    """The copies a piecewise runner makes to stage each graph piece's inputs, which a FULL graph of the step
    does not run: per step of two or more graph launches, the device-to-device copies (by name) not launched by a
    graph launch that start after the step's first graph-launched GPU op and before its last, among ``rows`` (GPU
    rows; ``step``: each one's step; ``graph_launches``: the graph launch calls of each step).

    A graph replays from fixed addresses, so a runner that captures a step in pieces copies the eager part's output
    into the next piece's static input: one copy a layer in the harness decoder's and the transformers models'
    piecewise steps (``Memcpy DtoD``, 0.9 us each on the H200), none in their FULL graphs (no copy node). Priced in
    the FULL step, they put it +0.5..+0.9% higher on the transformers models (0.5-0.75% of their step; the worst
    of 33 piecewise traces 3.39 -> 2.60% off the truth, docs/prediction.md).
    vLLM's piecewise runner writes attention's output in place: its steps copy only before the first piece. A copy
    that model code makes between pieces stays in a FULL graph as a copy node; leaving it out puts the step
    about its time low."""
    n_steps = graph_launches.size
    launched_by = np.where(trace.launch_idx[rows] >= 0, trace.api[np.maximum(trace.launch_idx[rows], 0)], -1)
    t = trace.start_ns[rows]
    gl = launched_by == Api.GRAPH_LAUNCH
    big, small = np.iinfo(np.int64).max, np.iinfo(np.int64).min
    first, last = np.full(n_steps, big), np.full(n_steps, small)
    np.minimum.at(first, step[gl], t[gl])
    np.maximum.at(last, step[gl], t[gl])
    cp = (trace.kind[rows] == Kind.MEMCPY) & ~gl
    dtod = np.zeros(len(trace.names), dtype=bool)
    for i in np.unique(trace.name_id[rows[cp]]).tolist():  # over distinct copy names, not rows
        dtod[i] = bool(_DTOD.search(trace.names[i]))
    # pieces: two or more graph launches in the step (a FULL step's one replay has no copy between pieces)
    cp &= dtod[trace.name_id[rows]] & (t > first[step]) & (t < last[step]) & (graph_launches[step] >= 2)
    dur = trace.dur_ns[rows]
    short = cp & (dur < model.long_kernel_us * 1e3)
    return StagingCopies(count=np.bincount(step[cp], minlength=n_steps)[:n_steps],
                         us=np.bincount(step[cp], weights=dur[cp], minlength=n_steps)[:n_steps] / 1e3,
                         short=np.bincount(step[short], minlength=n_steps)[:n_steps])


#: Fewest node gaps inside graph replays that :func:`replay_node_us` fits the node cost on.
MIN_REPLAY_GAPS = 100
#: Fewest gaps before a collective kernel inside graph replays that :func:`replay_node_us` prices it on
#: (two all-reduces a layer: one step of a small model holds 30 or more).
MIN_COLLECTIVE_REPLAY_GAPS = 16


def replay_node_us(trace: Trace, model: PredictionModel,
                   collective: np.ndarray | None = None) -> tuple[float, str, float | None]:
    """The per-node replay cost to predict a FULL-graph step with, where it came from, and a collective kernel's own
    node cost (``None``: not measured; its node costs what any node does). One pass over the replays' gaps.

    ``"trace replays"``: the trace replays graphs (FULL, piecewise) with at least :data:`MIN_REPLAY_GAPS`
    gaps after a short kernel (shorter than ``long_kernel_us``) between two kernels of one replay; the
    node cost is ``node_per_replay_gap`` times their mean, over the gaps up to ``replay_gap_cap_us``: the profiler
    lengthens a replay's gaps. Not the median: the GPU's timestamps tick in 32 ns, and the median gap was 0.416-0.417 us
    on 121 of 126 H200 FULL-graph traces of 41 models; their mean (0.43-0.51 us) tells them apart
    (``bench/node_cost_fit.py``, docs/prediction.md). ``"prior"``: ``node_us`` (fitted on the harness decoders;
    0.25-0.46 us per model); ``"flag"``: ``node_us`` as the user gave it (and no collective figure).

    The gaps before a collective kernel (``collective``: the rows of the trace's communication kernels,
    :func:`launchgap.collectives.collective_rows`) are left out of that mean and priced apart where there are at least
    :data:`MIN_COLLECTIVE_REPLAY_GAPS` of them: ``node_per_replay_gap`` times their mean, up to
    ``collective_gap_cap_us``. An NCCL kernel node starts 2.1-2.4 us after the kernel before it where other nodes
    start 0.4 us after (two H200s, ``traces/h200x2-tp2-1b``: 32-34 all-reduces a step, each with 4 KiB of kernel
    arguments, ``ncclDevKernelArgsStorage<4096ul>``); priced at the common node cost, the graph step of that trace
    came out 4-5% under its unprofiled replay. An eager trace has no replay: no collective figure.
    """
    if model.node_us_fixed:
        return model.node_us, "flag", None
    g = np.flatnonzero(trace.gpu_mask & (trace.kind == Kind.KERNEL) & (trace.launch_idx >= 0))
    g = g[trace.api[trace.launch_idx[g]] == Api.GRAPH_LAUNCH]
    if g.size < 2:
        return model.node_us, "prior", None
    li = trace.launch_idx[g]
    o = np.lexsort((trace.start_ns[g], li))
    g, li = g[o], li[o]
    short = (li[1:] == li[:-1]) & ((trace.end_ns[g] - trace.start_ns[g])[:-1] < model.long_kernel_us * 1e3)
    gap_us = (trace.start_ns[g][1:] - trace.end_ns[g][:-1])[short] / 1e3
    to_coll = np.isin(g[1:][short], collective) if collective is not None and collective.size else \
        np.zeros(gap_us.size, dtype=bool)
    coll = gap_us[to_coll & (gap_us <= model.collective_gap_cap_us)]
    coll_us = float(model.node_per_replay_gap * max(float(np.mean(coll)), 0.0)) \
        if coll.size >= MIN_COLLECTIVE_REPLAY_GAPS else None
    plain = gap_us[~to_coll & (gap_us <= model.replay_gap_cap_us)]
    if plain.size < MIN_REPLAY_GAPS:
        return model.node_us, "prior", coll_us
    return float(model.node_per_replay_gap * max(float(np.mean(plain)), 0.0)), "trace replays", coll_us


#: The Python tracer's cost (us) of so many recorded Python calls beside so many host events (both arrays):
#: :meth:`launchgap.overhead.OverheadEstimate.python_us`.
PythonCost = Callable[[np.ndarray, np.ndarray], np.ndarray]

#: Fewest intervals between eager kernel launches that :func:`host_us_per_launch` measures the host's cost per
#: launch on; with fewer the eager estimate keeps its prior (``costmodel.DEFAULT_HOST_US_PER_LAUNCH``). vLLM's V1
#: runner's FULL-graph steps hold 13 intervals a step between the eager launches around the replay: six steps give
#: 78, whose medians put the eager step +8, +74 and +51% off the server's own (three blocks), where the prior (a bare
#: op's launch) puts it 87% low (bench/eager_host_eval.py, set 4).
MIN_HOST_INTERVALS = 50


@dataclass(frozen=True)
class HostLaunchCost:
    """The host's time per eager kernel launch as one trace shows it (:func:`host_us_per_launch`).

    ``us``: the median interval, us (``None``: fewer than :data:`MIN_HOST_INTERVALS` intervals, or a median not
    above 0 once the profiler's cost is taken off); ``intervals``: how many intervals were measured."""

    us: float | None
    intervals: int


def eager_launch_intervals_us(trace: Trace, row_step: np.ndarray, us_per_event: float,
                              rows: np.ndarray | None = None, python_us: PythonCost | None = None) -> np.ndarray:
    """The host's time from each eager kernel launch to the next, us (see :func:`host_us_per_launch`).

    An eager launch is a kernel-launch call whose correlation id ran a GPU op (a launch recorded into a graph
    during capture runs nothing). Per host thread, in time order, an interval runs from one eager launch to the
    next one in the same step (``row_step``; outside every step counts as one), with no graph launch between them:
    its length less ``us_per_event`` times the host events (CPU ops, runtime calls) that start in it, and less
    ``python_us(calls, events)`` for the Python calls a ``with_stack`` trace recorded in it (any thread; the
    tracer's cost, :meth:`launchgap.overhead.OverheadEstimate.python_us`), so the framework op around the call,
    its dispatch and the Python between ops count, the profiler's own cost does not. ``rows`` (bool per row): only
    launches where it is true count."""
    ran = np.zeros(len(trace), dtype=bool)
    ran[trace.launch_idx[trace.gpu_mask & (trace.launch_idx >= 0)]] = True
    eager = (trace.api == Api.KERNEL_LAUNCH) & ran
    if rows is not None:
        eager &= rows
    seq = np.flatnonzero(eager | (trace.api == Api.GRAPH_LAUNCH))
    seq = seq[np.lexsort((trace.start_ns[seq], trace.tid[seq], trace.pid[seq]))]
    a, b = seq[:-1], seq[1:]
    ok = eager[a] & eager[b] & (trace.pid[a] == trace.pid[b]) & (trace.tid[a] == trace.tid[b]) \
        & (row_step[a] == row_step[b])
    a, b = a[ok], b[ok]
    host = np.flatnonzero((trace.kind == Kind.CPU_OP) | (trace.kind == Kind.RUNTIME))
    events = np.zeros(a.size, dtype=np.int64)
    for pid, tid in set(zip(trace.pid[a].tolist(), trace.tid[a].tolist())):  # per host thread, not per event
        h = np.sort(trace.start_ns[host[(trace.pid[host] == pid) & (trace.tid[host] == tid)]])
        q = (trace.pid[a] == pid) & (trace.tid[a] == tid)
        events[q] = np.searchsorted(h, trace.start_ns[b[q]], side="left") - \
            np.searchsorted(h, trace.start_ns[a[q]], side="left")
    iv = (trace.start_ns[b] - trace.start_ns[a]) / 1e3 - us_per_event * events
    calls = trace.python_calls.start_ns
    if python_us is not None and calls.size:
        n_calls = np.searchsorted(calls, trace.start_ns[b], side="left") - \
            np.searchsorted(calls, trace.start_ns[a], side="left")
        iv = iv - python_us(n_calls, events)
    return iv


def host_us_per_launch(trace: Trace, row_step: np.ndarray, us_per_event: float,
                       rows: np.ndarray | None = None, min_intervals: int = MIN_HOST_INTERVALS,
                       python_us: PythonCost | None = None) -> HostLaunchCost:
    """The host's time per eager kernel launch, measured on the trace's own eager launches (those a graph-mode
    trace still holds: input preparation, sampling, prefill, warm-up, fallback steps): the median of
    :func:`eager_launch_intervals_us` over at least ``min_intervals`` of them (a synchronisation that waits for
    the GPU, a scheduler pause are the outliers it passes over). ``rows`` (bool per row): only launches where it
    is true count; ``python_us``: the Python tracer's cost of a with_stack trace's calls, as
    :func:`eager_launch_intervals_us` takes it off."""
    iv = eager_launch_intervals_us(trace, row_step, us_per_event, rows, python_us)
    if iv.size < min_intervals:
        return HostLaunchCost(None, int(iv.size))
    us = float(np.median(iv))
    return HostLaunchCost(us if us > 0 else None, int(iv.size))
