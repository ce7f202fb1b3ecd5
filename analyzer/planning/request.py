"""One way to build a capture plan: a :class:`PlanRequest` in, :func:`build_plan` out.

The ``plan`` command, the dashboard's Capture plan page and ``fleet`` all describe what they
have as a :class:`PlanRequest` and call :func:`build_plan` (or :func:`plan_workloads`, one plan
per workload), so the same inputs give the same plan wherever it is made.

**Inputs and roles.** A request holds a list of :class:`PlanInput`, each of a *kind* (a file
format or an in-memory source) and tagged with the *roles* it is to fill:

* ``costs``: the step cost per batch size, eager and graph (a :class:`CostTable`);
* ``distribution``: how often production runs each batch size (``{batch_size: count}``);
* ``capture_sizes``: the capture list the server runs now, scored beside the plan;
* ``model_dims``: the model's dimensions (graph memory and capture time from the memory model);
* ``graph_nodes``: kernel nodes per graph (a trace's or the harness's kernels per step): with
  them the capture time is estimated even without the dimensions;
* ``memory_model``: the fitted memory model to use instead of the committed one;
* ``capture_cost``: a server's own capture memory and seconds for its own list
  (:class:`~launchgap.planning.memory.CaptureCalibration`), which calibrate the memory and
  capture-time model for that server (:func:`~launchgap.planning.memory.calibrate`).

:data:`KINDS` says which roles each kind can fill and how it reads each one: analysed
traces (``traces``) give costs and the distribution; harness timings (``timings``) give costs
and model dimensions, never the distribution; a histogram file (``distribution``) the
distribution; a model config (``model_config``) the dimensions; traces and timings also give
kernel nodes per graph; ``capture_sizes`` a list; ``memory_model`` a fitted model; a server log
or ``/metrics`` scrape (``server_log``, :mod:`launchgap.planning.serverlog`) costs, the
distribution, the capture list and the capture cost. When several inputs are tagged with one role, the kind with
the lowest ``rank`` fills it (harness timings' unprofiled costs beat trace costs, a
histogram beats the traces' own steps) and the plan's notes say which won; two inputs of the
same rank for one role are an error. A reader that finds nothing for its role (traces
without a known batch size, timings without a ``models`` section) leaves it to the next.

**Adding an input kind** (server logs and ``/metrics`` scrapes, a trace's own kernels as
costs, a pasted server config's capture sizes): write a reader per role it can fill,
``read(inp: PlanInput) -> value or None`` returning the role's value type above, and
:func:`register` an :class:`InputKind` with them and a rank per role. Callers then pass
``PlanInput(kind=..., name=..., roles=..., path=... or value=...)``; nothing else changes.
A new *role* is a new entry in :data:`ROLES` and a use of it in :func:`build_plan`.

**Which input gave what.** The plan's ``sources`` (``launchgap.plan/1``) name, per role, the
input that filled it (``None``: no input did).
"""
from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from ..dims import ModelDims
from ..engines import LABELS, sizes_text
from ..errors import InputError
from ..files import read_json_file
from .costs import CostTable
from .inputs import (
    TraceSteps,
    costs_from_steps,
    costs_from_timings,
    distribution_from_steps,
    kernels_per_step_from_steps,
    kernels_per_step_from_timings,
    left_out_steps_note,
    mixed_steps_note,
    load_distribution,
    load_model_dims,
    looks_like_timings,
    model_dims_from_timings,
)
from .memory import CaptureCalibration, MemoryModel, calibrate, default_memory_model
from .planner import SOURCE_ROLES, BaselineSpec, Plan, PlanOptions, TraceNote, default_baselines, plan_capture
from .serverlog import (
    calibration_from_log,
    capture_sizes_from_log,
    ceiling_notes,
    costs_from_log,
    distribution_from_log,
    log_of,
)

from ..serverlogs.diagnosis import LogDiagnosis
from ..verdict import between_steps_us, plan_caveats

if TYPE_CHECKING:
    from ..report import TraceReport
    from ..workload import Workload

#: The roles an input can fill (see the module docstring); the plan's ``sources`` keys.
ROLES = SOURCE_ROLES
#: What analysed traces give unless told otherwise.
TRACE_ROLES = ("costs", "distribution", "graph_nodes", "capture_sizes")


@dataclass(frozen=True)
class PlanInput:
    """One input of a plan: its ``kind`` (a key of :data:`KINDS`), the ``name`` the plan gives it
    (a file name, "3 loaded traces"), the ``roles`` it is to fill, and where it is: a ``path``
    to read, or a ``value`` read already (analysed traces as :class:`TraceSteps`, a parsed
    histogram, a capture list). ``model`` picks one model's rows of a timings file or config."""

    kind: str
    name: str
    roles: tuple[str, ...]
    path: str | None = None
    value: object = None
    model: str | None = None

    def __post_init__(self) -> None:
        kind = KINDS.get(self.kind)
        if kind is None:
            raise InputError(f"unknown plan input kind {self.kind!r} (known: {', '.join(KINDS)})")
        bad = [r for r in self.roles if r not in kind.readers]
        if bad:
            raise InputError(f"a {self.kind} input cannot give the {', '.join(bad)} "
                             f"(it gives {', '.join(kind.readers)})")


@dataclass(frozen=True)
class InputKind:
    """How one kind of input fills its roles: ``readers`` (role -> ``read(PlanInput)``, returning
    the role's value or ``None`` when the input holds none) and ``rank`` (role -> precedence
    among inputs tagged with that role: lowest wins)."""

    name: str
    readers: Mapping[str, Callable[[PlanInput], object]]
    rank: Mapping[str, int]


#: The input kinds, by name (:func:`register` adds one).
KINDS: dict[str, InputKind] = {}


def register(kind: InputKind) -> None:
    """Make an input kind known (its readers must fill known :data:`ROLES`)."""
    bad = [r for r in kind.readers if r not in ROLES]
    if bad or set(kind.rank) != set(kind.readers):
        raise ValueError(f"input kind {kind.name}: roles {bad} unknown or ranks missing")
    KINDS[kind.name] = kind


@dataclass(frozen=True)
class PlanRequest:
    """Everything a plan is built from: the role-tagged ``inputs``, the budgets and policy
    (``options``: max graphs, memory MiB, capture seconds, padding, KV bytes per token, ...) and
    ``notes`` on how the inputs were chosen (a timings file found beside the traces), which the
    plan's notes repeat."""

    inputs: tuple[PlanInput, ...] = ()
    options: PlanOptions = field(default_factory=PlanOptions)
    notes: tuple[str, ...] = ()

    def with_traces(self, steps: Sequence[TraceSteps], workload: str) -> PlanRequest:
        """This request with its ``traces`` input holding ``steps`` (one workload's traces, see
        :func:`traces_input`): the roles stay as the request tagged them (:data:`TRACE_ROLES` when it
        has no traces input)."""
        old = [i for i in self.inputs if i.kind == "traces"]
        rest = tuple(i for i in self.inputs if i.kind != "traces")
        if not steps:
            return replace(self, inputs=rest)
        roles = old[0].roles if old else TRACE_ROLES
        return replace(self, inputs=(traces_input(steps, workload, roles),) + rest)

    @property
    def traces(self) -> tuple[TraceSteps, ...]:
        return tuple(s for i in self.inputs if i.kind == "traces" for s in (i.value or ()))


def traces_input(steps: Sequence[TraceSteps], workload: str, roles: tuple[str, ...] = TRACE_ROLES) -> PlanInput:
    """The ``traces`` input of one workload's analysed traces, named as every path names it, by the
    workload's name for people (:func:`launchgap.workload.display_names`: "3 trace(s) of Llama ~8B-class ·
    H200"), so the same traces give the same plan sources everywhere."""
    return PlanInput("traces", f"{len(steps)} trace(s) of {workload}", roles, value=tuple(steps))


# --- the readers ------------------------------------------------------------------------------------

def _steps(inp: PlanInput) -> tuple[TraceSteps, ...]:
    return tuple(inp.value or ())


def _trace_costs(inp: PlanInput) -> CostTable | None:
    return costs_from_steps(_steps(inp)) if _steps(inp) else None


def _trace_distribution(inp: PlanInput) -> dict[int, float] | None:
    return distribution_from_steps(_steps(inp)) or None


def _trace_nodes(inp: PlanInput) -> float | None:
    return kernels_per_step_from_steps(_steps(inp))


def _read_memory_model(inp: PlanInput) -> MemoryModel:
    if isinstance(inp.value, MemoryModel):
        return inp.value
    try:
        doc = read_json_file(inp.path, "memory model")
    except InputError as exc:
        raise InputError(f"cannot read the memory model: {exc.message}", inp.path) from None
    if not isinstance(doc, dict):
        raise InputError("memory model file must hold a JSON object", inp.path)
    return MemoryModel.from_dict(doc)


def _capture_sizes(inp: PlanInput) -> tuple[int, ...]:
    """The server's capture list (empty: graphs are off there)."""
    sizes = tuple(sorted({int(x) for x in inp.value or ()}))
    if sizes and sizes[0] < 1:
        raise InputError(f"capture sizes from {inp.name} must be positive integers")
    return sizes


def _trace_capture_sizes(inp: PlanInput) -> tuple[int, ...] | None:
    """The capture list the serving traces ran (the first that says one), never a benchmark's."""
    for t in _steps(inp):
        if t.capture_sizes and not t.benchmark:
            return t.capture_sizes
    return None


register(InputKind("traces", {"costs": _trace_costs, "distribution": _trace_distribution, "graph_nodes": _trace_nodes,
                              "capture_sizes": _trace_capture_sizes},
                   {"costs": 10, "distribution": 10, "graph_nodes": 10, "capture_sizes": 10}))
register(InputKind("timings", {"costs": lambda i: costs_from_timings(i.path, i.model),
                               "model_dims": lambda i: model_dims_from_timings(i.path, i.model),
                               "graph_nodes": lambda i: kernels_per_step_from_timings(i.path, i.model)},
                   {"costs": 0, "model_dims": 10, "graph_nodes": 0}))
register(InputKind("distribution", {"distribution": lambda i: i.value if i.value is not None
                                    else load_distribution(i.path)}, {"distribution": 0}))
register(InputKind("model_config", {"model_dims": lambda i: (i.value if isinstance(i.value, ModelDims)
                                                             else load_model_dims(i.path, i.model))},
                   {"model_dims": 0}))
register(InputKind("capture_sizes", {"capture_sizes": _capture_sizes}, {"capture_sizes": 0}))
register(InputKind("memory_model", {"memory_model": _read_memory_model}, {"memory_model": 0}))
# A server log or /metrics scrape: its own forward/step times rank after harness timings and before
# profiled traces; its production batches before the traces' steps; a pasted config's list before its own.
register(InputKind("server_log", {"costs": lambda i: costs_from_log(log_of(i.value, i.path)),
                                  "distribution": lambda i: distribution_from_log(log_of(i.value, i.path)),
                                  "capture_sizes": lambda i: capture_sizes_from_log(log_of(i.value, i.path)),
                                  "capture_cost": lambda i: calibration_from_log(log_of(i.value, i.path))},
                   {"costs": 5, "distribution": 5, "capture_sizes": 5, "capture_cost": 0}))


# --- building ---------------------------------------------------------------------------------------

@dataclass
class _Filled:
    """Per role: the input that filled it and its value; notes on inputs passed over."""

    value: dict[str, object] = field(default_factory=dict)
    source: dict[str, PlanInput] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)


def _fill(request: PlanRequest, role: str, out: _Filled) -> None:
    """Fill ``role`` from the best-ranked input tagged with it that holds a value."""
    tagged = sorted((i for i in request.inputs if role in i.roles), key=lambda i: KINDS[i.kind].rank[role])
    ranks = [KINDS[i.kind].rank[role] for i in tagged]
    if len(ranks) > 1 and ranks[0] == ranks[1]:
        raise InputError(f"several inputs give the {role.replace('_', ' ')} ({tagged[0].name}, {tagged[1].name}); "
                         f"give one")
    for i, inp in enumerate(tagged):
        value = KINDS[inp.kind].readers[role](inp)
        if value is None:
            continue
        out.value[role], out.source[role] = value, inp
        passed = [x.name for x in tagged[i + 1:]]
        if passed:
            out.notes.append(f"{role.replace('_', ' ')} from {inp.name} (wins over {', '.join(passed)})")
        return


def trace_notes(traces: Sequence[TraceSteps]) -> tuple[TraceNote, ...]:
    """What the traces' analyses warned about and noted (:attr:`TraceSteps.warnings`, :attr:`TraceSteps.notes`),
    each text once with the traces that said it, warnings first, in the order the traces and their lines come."""
    said: dict[tuple[str, str], dict[str, None]] = {}
    for kind in ("warning", "note"):
        for t in traces:  # a few lines per trace
            for text in t.warnings if kind == "warning" else t.notes:
                said.setdefault((kind, text), {})[t.name] = None
    return tuple(TraceNote(kind, text, tuple(names)) for (kind, text), names in said.items())


def _input_notes(request: PlanRequest, filled: _Filled) -> tuple[list[str], list[str]]:
    """Notes and warnings on the inputs. Notes: which input gave the capture list scored as the server's current one
    (a trace's: how the trace gave it, and when that is only its engine's default) and the inputs that gave this
    plan nothing (the traces' own warnings and notes are the plan's ``trace_notes``: :func:`trace_notes`). Warnings
    (inputs that contradict each other, shown where the plan's warnings are): a line per other input whose capture
    list differs from it, a log or scrape of another engine or model."""
    notes: list[str] = []
    warns: list[str] = []
    src = filled.source.get("capture_sizes")
    if src is not None:
        sizes = tuple(filled.value["capture_sizes"])  # type: ignore[arg-type]
        if src.kind == "traces":
            detail = next((t.capture_sizes_detail for t in _steps(src) if t.capture_sizes and not t.benchmark), None)
            line = f"current list {sizes_text(sizes)} from {src.name}" + (f" ({detail})" if detail else "")
            if detail and detail.startswith("default:"):
                line += ("; an assumption, the trace does not state its list: pass --capture-sizes or the server's "
                         "config")
            notes.append(line)
        for inp in request.inputs:
            if inp is src or "capture_sizes" not in inp.roles:
                continue
            other = KINDS[inp.kind].readers["capture_sizes"](inp)
            if _assumed_list(inp):
                continue  # an engine's default the traces assumed is no statement of the server's list
            if other and tuple(sorted(other)) != tuple(sorted(sizes)):  # type: ignore[arg-type]
                warns.append(f"the capture lists differ: {src.name} gives {sizes_text(sizes)}, {inp.name} "
                             f"{sizes_text(sorted(other))}; the plan scores {src.name}'s as the current list")  # type: ignore[arg-type]
    engines = {t.engine for t in request.traces if t.engine}
    for inp in request.inputs:  # a log of another engine than the traces' is another server's
        log = inp.value.log if isinstance(inp.value, LogDiagnosis) else None
        if log is not None and engines and log.engine not in engines:
            theirs = ", ".join(sorted(LABELS.get(e, e) for e in engines))
            warns.append(f"{inp.name} is a {LABELS.get(log.engine, log.engine)} server's, the traces are {theirs}'s: "
                         f"not the same server; check that they belong together")
    named = [(inp.name, inp.value.log.models) for inp in request.inputs
             if isinstance(inp.value, LogDiagnosis) and inp.value.log.models]
    for name, models in named[1:]:  # a log or scrape of another model is another server's
        if not set(models) & set(named[0][1]):
            warns.append(f"{name} names the model {', '.join(models)}, {named[0][0]} {', '.join(named[0][1])}: "
                         f"not the same server; check that they belong together")
    for inp in request.inputs:
        if inp.kind != "traces" and not any(filled.source.get(r) is inp for r in ROLES):
            gave = "; ".join(f"{r.replace('_', ' ')} from {filled.source[r].name}" for r in KINDS[inp.kind].readers
                             if r in filled.source)
            notes.append(f"{inp.name} gave nothing to this plan" + (f" ({gave})" if gave else ""))
    return notes, warns


def _assumed_list(inp: PlanInput) -> bool:
    """Whether the capture list ``inp`` gives is only an engine's default its traces assumed (they do not state it)."""
    return inp.kind == "traces" and all((t.capture_sizes_detail or "").startswith("default:")
                                        for t in _steps(inp) if t.capture_sizes and not t.benchmark)


def _baselines(request: PlanRequest, filled: _Filled) -> list[BaselineSpec]:
    """The servers' default lists, and the server's current list when an input gives it."""
    opts = request.options
    specs = default_baselines(opts.max_batch_size, opts.padding)
    sizes = filled.value.get("capture_sizes")
    if sizes is not None:
        specs.append(BaselineSpec("current", None, tuple(sizes),
                                  f"the capture list the server runs now (from {filled.source['capture_sizes'].name})"))
    return specs


def server_log_input(diagnosis: LogDiagnosis, name: str, roles: Sequence[str], path: str | None = None) -> PlanInput:
    """A server log or ``/metrics`` scrape as a plan input, named as messages name it (``vLLM log vllm.log``)."""
    log = diagnosis.log
    return PlanInput("server_log", f"{LABELS.get(log.engine, log.engine)} {log.kind} {name}", tuple(roles),
                     path=path, value=diagnosis)


def _request_capped_by_the_log(request: PlanRequest) -> tuple[PlanRequest, str | None]:
    """The request with ``max_batch_size`` from a server log's request cap (vLLM ``max_num_seqs``, SGLang
    ``max_running_requests``, TensorRT-LLM ``max_batch_size``: no decode batch runs above it, so no bucket, default
    list or crossover above it counts) where the user set none; the note saying so, else ``None``."""
    if request.options.max_batch_size is not None:
        return request, None
    caps = [(i.value.log.max_running_requests, i.name) for i in request.inputs
            if i.kind == "server_log" and isinstance(i.value, LogDiagnosis) and i.value.log.max_running_requests]
    if not caps:
        return request, None
    cap, name = min(caps)
    return (replace(request, options=replace(request.options, max_batch_size=int(cap))),
            f"largest batch {cap} from {name} (the server's cap on running requests: no decode batch runs above it; "
            f"--max-batch-size sets another)")


def build_plan(request: PlanRequest) -> tuple[Plan, list[str]]:
    """The plan of ``request`` and notes on its inputs (which input gave what; the first two
    notes say where the costs and the distribution came from).

    Raises :class:`InputError` when no input gives the costs or the distribution, or an input
    is bad (naming the file and the reason).
    """
    if not any("costs" in i.roles for i in request.inputs):
        if any(i.kind == "server_log" for i in request.inputs):  # a scrape alone: no step cost in it
            raise InputError("nothing to plan from: a /metrics scrape gives the batch-size distribution only; add "
                             "traces, a server log or --timings FILE for the step costs")
        raise InputError("nothing to plan from: give traces, --timings FILE, or both")
    request, cap_note = _request_capped_by_the_log(request)
    filled = _Filled()
    for role in ROLES:  # costs first: their errors are the most telling
        _fill(request, role, filled)
    traces = request.traces
    if "costs" not in filled.value:
        raise InputError("no input gives the step costs: give traces with steps or --timings FILE")
    costs: CostTable = filled.value["costs"]  # type: ignore[assignment]
    dist = filled.value.get("distribution")
    bench = [t for t in traces if t.benchmark]
    if not dist:
        if bench and len(bench) == len(traces):
            raise InputError("no batch-size distribution: benchmark traces (recorded by launchgap record, or passed "
                             "with --costs) give costs only; pass --distribution FILE or a serving trace")
        raise InputError("no batch-size distribution: the traces hold no steps with a known batch size; "
                         "pass --distribution FILE")
    src = filled.source
    notes = [f"costs from {costs.origin}"]
    if src["distribution"].kind == "traces":
        notes.append(f"distribution from {int(sum(dist.values()))} decode steps in {len(traces) - len(bench)} "
                     f"serving trace(s)")
    else:
        notes.append(f"distribution from {src['distribution'].name}")
    if (left_out := left_out_steps_note(traces)) is not None:
        notes.append(left_out)
    if bench:
        notes.append(f"{len(bench)} benchmark trace(s) (recorded by launchgap record, or --costs) give costs only, "
                     f"never the distribution: {', '.join(t.name for t in bench[:4])}{', ...' if len(bench) > 4 else ''}")
    input_notes, input_warnings = _input_notes(request, filled)
    notes += list(request.notes) + filled.notes + input_notes + ([cap_note] if cap_note else [])
    dims = filled.value.get("model_dims")
    nodes = filled.value.get("graph_nodes")
    if dims is not None:
        notes.append(f"model dimensions of {dims.name} from {src['model_dims'].name}: graph memory and capture "
                     f"time from the memory model")
    list_cost = None
    cal: CaptureCalibration | None = filled.value.get("capture_cost")  # type: ignore[assignment]
    if cal is not None and request.options.graph_memory_mib is None:
        prior = None
        if dims is not None:
            prior = (filled.value.get("memory_model") or default_memory_model()).list_cost(dims, "full",
                                                                                          nodes_per_size=nodes)
        if prior is not None or cal.memory_mib is not None:
            list_cost = calibrate(prior, cal)
            notes.append(f"graph memory and capture time: {list_cost.source}")
    plan = plan_capture(costs, dist, request.options, dims=dims, memory_model=filled.value.get("memory_model"),
                        nodes_per_size=nodes, baselines=_baselines(request, filled), list_cost=list_cost)
    cur_src = filled.source.get("capture_sizes")
    cur_from = None if cur_src is None else \
        ("the engine's default, assumed" if _assumed_list(cur_src) else f"from {cur_src.name}")
    if (mixed := mixed_steps_note(traces, plan.buckets, filled.value.get("capture_sizes"), cur_from)) is not None:
        notes.append(mixed)
    for inp in request.inputs:  # what the plan does to the ceiling a server log shows
        if inp.kind == "server_log" and isinstance(inp.value, LogDiagnosis):
            notes += ceiling_notes(inp.value, plan.buckets)
    return replace(plan, sources={r: (src[r].name if r in src else None) for r in ROLES},
                   warnings=tuple(input_warnings) + plan.warnings, trace_notes=trace_notes(traces)), notes


def plan_workloads(request: PlanRequest, groups: Sequence[tuple[Workload | None, Sequence[TraceSteps]]],
                   wanted: str | None = None) -> list[tuple[Workload | None, Plan, list[str]]]:
    """One plan per workload (the ``plan`` command): ``groups`` are each workload's traces (as
    :class:`TraceSteps`), ``wanted`` an id (or unambiguous prefix) picks one. Traces of different
    workloads are never pooled. With no groups the request is planned as it is (timings and a
    histogram alone). A workload that cannot be planned is left out with a note on the others;
    none plannable raises :class:`InputError`.
    """
    from ..workload import WorkloadGroup, display_names, pick_workload

    wgroups = [WorkloadGroup(w, list(s)) for w, s in groups]
    names = display_names(g.workload for g in wgroups)
    if wanted:
        if not wgroups:
            raise InputError("--workload picks among the traces' workloads; no trace was given")
        wgroups = [pick_workload(wgroups, wanted)]
    if not wgroups:
        return [(None, *build_plan(request))]
    if len(wgroups) == 1:
        g = wgroups[0]
        plan, notes = build_plan(request.with_traces(g.items, names[g.id]))
        if wanted:
            notes.append(f"workload {names[g.id]} ({g.id}): {len(g.items)} of {sum(len(s) for _, s in groups)} "
                         "trace(s)")
        return [(g.workload, plan, notes)]
    out: list[tuple[Workload | None, Plan, list[str]]] = []
    failed: list[str] = []
    for g in wgroups:  # one plan per workload: costs and batch sizes of different models never mix
        try:
            plan, notes = build_plan(request.with_traces(g.items, names[g.id]))
        except InputError as exc:
            failed.append(f"{names[g.id]} ({g.id}): {exc.message}")
            continue
        notes.append(f"workload {names[g.id]}: {len(g.items)} of {sum(len(s) for _, s in groups)} trace(s); "
                     f"the traces hold {len(wgroups)} workloads, one plan each (--workload {g.id} for this one)")
        out.append((g.workload, plan, notes))
    if not out:
        raise InputError("no workload could be planned: " + "; ".join(failed))
    for _, _, notes in out:
        notes += [f"no plan for workload {f}" for f in failed]
    return out


def rank_note(workloads: Sequence[Workload | None]) -> str | None:
    """What planning a tensor-parallel job's ranks together did (the workloads of its traces), ``None`` when they
    hold one rank or none."""
    ranks = sorted({w.rank for w in workloads if w is not None and w.rank is not None})
    if len(ranks) < 2:
        return None
    world = next((w.world_size for w in workloads if w is not None and w.world_size), None)
    return (f"ranks {', '.join(str(r) for r in ranks)} of {world} planned together (a tensor-parallel server "
            f"captures one list on every rank): graph costs per size the median of the ranks' curves, eager costs "
            f"likewise, the distribution from every rank's decode steps (each rank runs the same batches: the "
            f"shares are one rank's, the step count one per rank)")


def trace_steps(report: TraceReport, name: str | None = None, benchmark: bool = False) -> TraceSteps:
    """The planning view of an analysed trace (``name``: how messages name it; default its path). ``benchmark``:
    the trace gives costs only (``--costs``); a ``launchgap record`` sweep is recognised by its step markers."""
    s = report.summary
    steps = report.steps
    benchmark = benchmark or is_benchmark(report)
    return TraceSteps(
        name=name if name is not None else str(report.path), mode=report.mode,
        unprofiled_scale=TraceSteps.scale_of(s.step_us_median, s.estimated_unprofiled_step_us_median),
        batch_size=np.array([-1 if st.batch_size is None else st.batch_size for st in steps], dtype=np.int64),
        dur_us=np.array([st.dur_us for st in steps], dtype=float),
        predicted_graph_us=np.array([st.predicted_graph_us for st in steps], dtype=float),
        phase=tuple(st.phase for st in steps),
        kernels_per_step=report.workload.kernels_per_step if report.workload is not None else 0.0,
        graph_curve=report.cost_curve, eager=report.eager_curve,
        benchmark=benchmark,
        capture_sizes=tuple(s.capture_sizes) if s.capture_sizes and s.capture_sizes_source != "inferred" else None,
        capture_sizes_detail=f"{s.capture_sizes_source}: {s.capture_sizes_detail}" if s.capture_sizes else None,
        warnings=tuple(report.warnings), notes=tuple(plan_caveats(s, steps, benchmark)),
        engine=s.engine, tokens=np.array([-1 if st.tokens is None else st.tokens for st in steps], dtype=np.int64),
        **dict(zip(("gpu_between_us", "host_between_us"), between_steps_us(s))))


#: The step markers of a ``launchgap record`` sweep: ``decode_step[bs=8]`` (nothing else in it), or the
#: ``ProfilerStep#N`` ranges around them when those win the step search.
RECORD_STEP = re.compile(r"^(?:decode_step\[bs=\d+\]|ProfilerStep#\d+)$")


def is_benchmark(report: TraceReport) -> bool:
    """Whether ``report`` is a benchmark of one batch size, as ``launchgap record`` writes them: no serving
    engine, every step named by the sweep's markers and of one batch size read from them. Production traffic
    varies the batch step to step (the harness's serving runs too: ``decode_step[bs=37 bucket=48 graph]``)."""
    steps = report.steps
    if not steps or report.summary.engine is not None:
        return False
    sizes = {st.batch_size for st in steps}
    return (len(sizes) == 1 and None not in sizes and all(st.batch_source == "marker" for st in steps)
            and all(RECORD_STEP.match(st.name) for st in steps))


def timings_among(paths: Sequence[str]) -> list[Path]:
    """Timings files among the given paths and in the given folders (``plan DIR`` picks up a
    ``truth.json`` lying beside the traces)."""
    found: list[Path] = []
    for raw in paths:  # the paths the user gave
        p = Path(raw)
        if p.is_dir():
            found += sorted(f for f in p.rglob("*.json") if f.is_file() and looks_like_timings(f))
        elif looks_like_timings(p):
            found.append(p)
    return found
