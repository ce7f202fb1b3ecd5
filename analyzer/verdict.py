"""The one verdict of a trace: what holds its steps back, in one phrase and one paragraph.

:func:`decide` is the only function that writes ``summary.verdict`` / ``verdict_detail``; the CLI, the
dashboard's Diagnosis banner, its Traces table and Compare all read what it wrote, and a measured step
(:func:`launchgap.report.with_observed_step`) calls it again on the same summary, so every page says the
same. It reads the report's :class:`~launchgap.report.Summary` (passed in, never imported: the report
imports this module).

Verdicts of a set of steps (:func:`step_verdict`), first match wins:

* ``already graphed``: trace mode ``graph``;
* ``waiting for peers``: collectives wait for other ranks at least the host-side idle and 15% of the step;
* ``host stall``: host stalls (:mod:`launchgap.host_stalls`) are at least :data:`HOST_STALL_SHARE` of the
  step and at least half the host-side idle: the CPU sat in Python that launched nothing, named by its
  frame, and the detail says whether a FULL graph removes it (inside the captured forward) or keeps it;
* ``launch-bound``: host-side idle (causes host, launch, sync) at least :data:`LAUNCH_BOUND_IDLE_FRACTION`
  of the estimated unprofiled step (the profiled step's host-side idle less the profiler's cost, which slows the
  host: :func:`unprofiled_host_idle_fraction`), or a predicted speedup of at least 1.2x;
* ``GPU-bound`` otherwise (``(partly graphed)`` appended for a mixed trace).

Every verdict says which host time a graph removes and which it keeps (:func:`graph_split_text`). For a
serving engine's steps (``step_source == "engine"``) each (phase, coverage) group gets its own verdict
and the trace's is the first group's (decode first): one blend of prefill and decode says nothing. Eager
fallbacks in a graph-mode trace make ``already graphed`` read ``graphed, with eager fallbacks``.
"""
from __future__ import annotations

from dataclasses import replace

from .engines import LABELS
from .graph_mode import classify_mode

#: A step is called launch-bound when host-side causes leave the GPU idle this share of it.
LAUNCH_BOUND_IDLE_FRACTION = 0.25
#: A step is called host-stalled when host stalls leave the GPU idle this share of it (and they are at least
#: half the host-side idle).
HOST_STALL_SHARE = 0.10
#: Summary fields each step group (``summary.step_groups``) carries: its own verdict is decided on them.
GROUP_FIELDS = (
    "steps", "step_us_median", "gpu_busy_us_median", "gpu_idle_fraction", "idle_fraction_by_cause",
    "kernels_per_step_median", "kernel_launches_per_step_median", "graph_launches_per_step_median",
    "launch_api_us_per_step_median", "launch_to_kernel_ratio", "predicted_graph_step_us_median",
    "estimated_unprofiled_step_us_median", "estimated_unprofiled_step_us_low", "estimated_unprofiled_step_us_high",
    "predicted_speedup", "predicted_speedup_low", "predicted_speedup_high",
    "host_stall_us_per_step", "host_stall_in_graph_us_per_step", "host_stall_frame",
    "graph_removes_host_us_per_step", "graph_keeps_host_us_per_step", "batch_sizes", "decode_batch_size",
    # a serving engine's whole decode step, the headline group's only (report._with_whole_step)
    "whole_step_us_before", "whole_step_us_after",
    # only an eager decode group of a trace that replays graphs carries it ("eager curve"); others take the trace's
    "eager_step_source")


def speedup_text(s) -> str:
    """``10.84x (range 9.95-11.65x)``: the point value and its range."""
    return f"{s.predicted_speedup:.2f}x (range {s.predicted_speedup_low:.2f}-{s.predicted_speedup_high:.2f}x)"


def step_change_text(s, real: float) -> str:
    """What CUDA graphs are predicted to do to the steps ``s`` summarises (``real``: the step, measured or estimated),
    in one clause: ``take the step from 12,316 us to 2,619 us``; for a serving engine's decode steps the engine's whole
    step, the GPU windows beside it: ``take the engine's whole step from 14,308 us to 2,872 us (GPU windows 12,316 ->
    2,619 us; the rest between steps)``."""
    pred = s.predicted_graph_step_us_median
    if s.whole_step_us_before <= 0:
        return f"take the step from {real:,.0f} us to {pred:,.0f} us"
    windows = (f"the graph step's GPU window {pred:,.0f} us" if s.eager_step_source == "measured" else
               f"GPU windows {real:,.0f} -> {pred:,.0f} us")
    return (f"take the engine's whole step from {s.whole_step_us_before:,.0f} us to {s.whole_step_us_after:,.0f} us "
            f"({windows}; the rest between steps)")


def settings_words(ps: dict) -> str:
    """The profiler settings a trace shows, in a few words."""
    if ps.get("tier") == "cupti":
        return "runtime calls only"
    on = [k for k in ("with_stack", "with_modules", "record_shapes", "with_flops", "profile_memory") if ps.get(k)]
    return " + ".join(on) if on else "no shapes, no stacks"


def step_word(mode: str) -> str:
    """What the speedup's "before" step is: ``eager step`` in an eager or compiled trace; in a trace that replays
    graphs (``graph``, ``mixed``) the typical step already replays some, so ``step``."""
    return "eager step" if mode in ("eager", "compiled") else "step"


def graphs_word(mode: str) -> str:
    """How the predicted step reads beside the step it replaces: ``with CUDA graphs`` for an eager or compiled trace;
    ``as one FULL graph`` for a trace already replaying graphs (the prediction is the step captured whole)."""
    return "with CUDA graphs" if mode in ("eager", "compiled") else "as one FULL graph"


def eager_basis(s, mode: str = "eager") -> str:
    """Which part of the predicted speedup is measured and which estimated, in one sentence (``mode``: the steps'
    trace mode, which names the step, :func:`step_word`)."""
    graph = "graph step predicted from the GPU busy time"
    word = step_word(mode)
    if s.eager_step_source == "eager curve":
        return (f"eager step from the eager curve at the steps' batches, {s.estimated_unprofiled_step_us_median:,.0f} "
                f"us (the cost launchgap plan gives an eager step; among graph replays the profiled "
                f"{s.step_us_median:,.0f} us window is no measure of it); {graph}")
    if s.eager_step_source == "measured":
        return f"{word} measured: {s.observed_step_us:,.0f} us observed ({s.step_us_median:,.0f} us profiled); {graph}"
    python = (f" and {s.profiler_python_call_us:.3g} us ({s.profiler_python_call_us_low:.3g}-"
              f"{s.profiler_python_call_us_high:.3g}) per recorded Python call past the host events' share "
              f"({s.python_calls_per_step_median:,.0f} in the median step)"
              if s.profiler_python_call_us and s.python_calls_per_step_median else "")
    return (f"{word} estimated: {s.step_us_median:,.0f} us profiled less {s.profiler_overhead_us_per_event:.3g} us "
            f"({s.profiler_overhead_us_per_event_low:.3g}-{s.profiler_overhead_us_per_event_high:.3g}) per recorded "
            f"host event{python} for the profiler ({settings_words(s.profiler_settings)}); {graph}")


def fallback_basis(s) -> str:
    """Where a fallback's lost time comes from and which part is estimated, in one clause: its eager step
    (``summary.fallback_eager_detail``) less the FULL-graph cost of its bucket, the costs ``launchgap plan`` uses."""
    eager = s.fallback_eager_detail or "its own profiled host time less the profiler's cost per recorded host event"
    return (f"estimated: each fallback's eager step is {eager}, less the FULL-graph cost of its bucket, the costs "
            f"launchgap plan uses; --observed-step-us does not apply to fallbacks")


def padding_basis(s) -> str:
    """Where the padding cost comes from and how sure it is, in a few words."""
    src = s.padding_cost_source
    if src == "none":
        return "no padded graph steps"
    points = src.removesuffix("-estimate").replace("+", " and ")
    # the buckets a batch pads to are the list's: on a list the trace does not state, another list pads otherwise
    assumed = ("; on the assumed capture list (the engine's default, which the trace does not state): another list "
               "pads other batches") if s.capture_sizes_source == "default" else ""
    if not src.endswith("-estimate"):
        if not s.padded_rows_fraction:
            return f"no batch was padded: every graph step ran at its own size{assumed}"
        return f"measured: every padded batch and bucket has its own cost, from {points}{assumed}"
    return (f"estimated: {s.padding_estimated_steps} padded batch{'es' if s.padding_estimated_steps != 1 else ''} "
            f"not measured, costed on the batch-scaling model of the trace's kernels through the sizes measured by "
            f"the {points}{_own_padding(s)}; band {s.padding_us_per_step_low:,.1f}-{s.padding_us_per_step_high:,.1f} us "
            f"per step (the curve's measured error over the distance from batch to bucket){assumed}. Harness FULL-graph timings at "
            f"every size (launchgap record --modes graph --batch-sizes 1..N, then analyze --graph-timings) make it "
            f"exact")


def _own_padding(s) -> str:
    """The clause for padded steps whose bucket's traced steps cost less than a smaller size's (traced under other
    conditions): costed on the bucket's own prediction instead (:class:`launchgap.graph_mode.serving.PaddingCost`)."""
    n = s.padding_own_steps
    if not n:
        return ""
    return (f" ({n} of them on their bucket's own steps' prediction: the trace's steps at the bucket cost more than 2% "
            f"less than at a smaller size, traced under other conditions such as context lengths)")


#: How each ``capture_sizes_source`` reads: a list given, read from the trace, assumed or inferred.
_CAPTURE_SOURCE_WORDS = {"flag": "given", "config": "given",
                         # markers show only the buckets that ran: the server may capture more sizes
                         "markers": "from the trace, the sizes that ran",
                         "default": "assumed, the trace does not state it", "inferred": "inferred, a lower bound"}


def capture_sizes_basis(s) -> str:
    """Where the capture list came from and how far to trust it, with its one-line detail:
    ``"assumed, the trace does not state it: vLLM V1 default, maximum 512"``."""
    words = _CAPTURE_SOURCE_WORDS.get(s.capture_sizes_source or "", s.capture_sizes_source or "unknown")
    return f"{words}: {s.capture_sizes_detail}" if s.capture_sizes_detail else words


#: How a step's ``batch_source`` reads in a sentence (``kernel_grid:<kernel>`` names its kernel).
_BATCH_SOURCE_WORDS = {"marker": "the step's marker or an annotation in it", "input_shapes": "recorded input shapes", "none": "unknown"}


#: Share of a trace's step pairs whose next step's host work began before the previous step's GPU work ended, from
#: which the engine is taken to overlap them already (async scheduling): a loop that waits for each step's results
#: before the next (vLLM without async scheduling copies its sampled tokens to the host first) shows none; vLLM 0.24's
#: default shows 57 of 63 in a trace without Python stacks, 6 of 63 with them (the profiled host slower than the GPU's
#: step; traces/h200-vllm-2026-12-04).
HOST_AHEAD_SHARE = 0.5


def node_cost_text(s) -> str:
    """The replay cost per kernel node the predicted graph step used, and where it came from (a summary ``s``):
    the common node's, and a collective kernel's where the trace's replays measured it apart."""
    text = f"node cost {s.node_us:.3g} us per kernel node, from {s.node_us_source}"
    if s.collective_node_us is not None:
        text += f"; a collective kernel's {s.collective_node_us:.3g} us, from the trace's replays"
    return text


def async_scheduling_text(ahead_steps: int, pairs: int, hidden_us: float) -> str:
    """The host-between-steps what-if in words: where most steps' host work already began before the previous
    step's GPU work ended (``ahead_steps`` of ``pairs``), the engine overlaps them and the gaps left are host work
    longer than a GPU step; otherwise what overlapping would hide (``hidden_us`` per step)."""
    if pairs > 0 and ahead_steps >= HOST_AHEAD_SHARE * pairs:
        return (f"already on: {ahead_steps} of {pairs} steps' host work began before the previous step's GPU work "
                f"ended; the GPU idle left between steps is host work longer than the GPU's step (under the "
                f"profiler's cost), which overlapping cannot hide")
    return f"overlapping the host work with the GPU (async scheduling) would hide up to {hidden_us:,.1f} us per step"


def batch_basis(steps) -> str:
    """Where the steps' batch sizes came from (``batch_source``) and how sure each is, in a few words: per source,
    most steps first, how many steps of all; a kernel grid inside a graph replay (``low``) is the captured size, so
    the batch is at most that; where steps say why (``batch_note``: tokens that are or are not the requests), the
    most common reason of the group. Empty when no step's batch is known and none says why."""
    if all(st.batch_source == "none" and not st.batch_note for st in steps):
        return ""
    counts: dict[tuple[str, str | None], int] = {}
    notes: dict[tuple[str, str | None], dict[str, int]] = {}
    for st in steps:  # report rows
        key = (st.batch_source, st.batch_confidence)
        counts[key] = counts.get(key, 0) + 1
        if st.batch_note:
            group = notes.setdefault(key, {})
            group[st.batch_note] = group.get(st.batch_note, 0) + 1
    parts = []
    for key, n in sorted(counts.items(), key=lambda kv: -kv[1]):
        src, conf = key
        words = _BATCH_SOURCE_WORDS.get(src) or (f"the grid of {src.split(':', 1)[1]}" if src.startswith(
            "kernel_grid:") else src)
        sure = {"medium": ", the kernel ran eagerly", "low": ", inside a graph replay: at most that"}.get(conf or "", "")
        why = f"; {max(notes[key], key=notes[key].get)}" if key in notes else ""
        parts.append(f"{words} ({n} of {len(steps)}{sure}{why})")
    return ", ".join(parts)


#: How sure a batch read from a kernel's grid is (``batch_confidence``), as a plan's caveat says it.
_GRID_WORDS = {"medium": "the kernel ran eagerly", "low": "inside a graph replay, the captured size: the batch is "
                                                         "at most that"}


def plan_caveats(s, steps, benchmark: bool = False) -> list[str]:
    """What a trace's analysis noted that a capture plan built on its decode steps rests on, one sentence each:
    the padding cost unknown (capture sizes inferred from the buckets that ran), batch sizes read from a kernel's
    grid (not from a marker or recorded shapes), and decode steps with no known batch size. Sentences hold
    neither the trace's name nor counts of its own steps, so that traces of one server that say the same are said
    once in a plan over many (:class:`launchgap.planning.planner.TraceNote`). The analysis' warnings
    (``TraceReport.warnings``) are carried beside them, not repeated here. A ``benchmark`` of one batch size (a
    ``launchgap record`` sweep) pads nothing: its padding is not a caveat."""
    out = [f"padding cost unknown: {s.padding_unknown_reason}"] if s.padding_unknown_reason and not benchmark else []
    planned = [st for st in steps if st.phase in ("decode", None)]  # the steps a plan reads
    grids: dict[tuple[str, str | None], None] = {}
    for st in planned:  # report rows
        if st.batch_source.startswith("kernel_grid:"):
            grids[(st.batch_source.split(":", 1)[1], st.batch_confidence)] = None
    for kernel, conf in grids:
        out.append(f"batch sizes read from the grid of {kernel}" + (f" ({_GRID_WORDS[conf]})" if conf in _GRID_WORDS
                                                                     else ""))
    if any(st.batch_source == "none" for st in planned):
        out.append("decode steps of no known batch size were left out of the costs and the distribution")
    return out


def graph_split_text(s, graphed: bool = False) -> str:
    """Which host time a FULL graph removes and which it keeps, per step, in one clause. ``graphed``: the steps
    already replay FULL graphs, so the real step less the predicted FULL graph is no host time a graph would remove:
    mostly the profiler's cost inside the profiled replays (nine H200 FULL-graph serving traces: the profiled-window
    estimate 0.2-6.6% above the unprofiled truth, 161-710 us per step, where the truth removes nothing)."""
    stall, inside = s.host_stall_us_per_step, s.host_stall_in_graph_us_per_step
    removes = f"a FULL graph removes {s.graph_removes_host_us_per_step:,.0f} us of host time per step"
    if graphed:
        removes = "its FULL-graph steps already replay one graph each: a graph removes no more host time there"
        if s.graph_removes_host_us_per_step >= 0.5:
            removes += (f" (the {s.graph_removes_host_us_per_step:,.0f} us per step between the step and its predicted "
                        f"FULL graph is mostly the profiler's cost inside the replays)")
    elif inside > 0:
        removes += f" (with {inside:,.0f} us of host stall inside the captured forward)"
    keeps = f"keeps {s.graph_keeps_host_us_per_step:,.0f} us"
    what = []
    if stall - inside > 0:
        what.append(f"{stall - inside:,.0f} us of host stall outside the forward")
    if s.steps > 1 and s.inter_step_host_us_unprofiled_median > 0:
        gpu = s.inter_step_gpu_busy_us_median
        # a serving engine's whole step (the predicted one hides the host part behind the replay): said where it counts
        hidden = "; async scheduling hides its host work behind a graph's replay" if s.whole_step_us_before > 0 and \
            not graphed else ""
        what.append(f"{s.inter_step_host_us_unprofiled_median:,.0f} us between steps: scheduling, input preparation, "
                    f"sampling" + (f"; {gpu:,.0f} us of it GPU work of no step" if gpu >= 0.5 else "") + hidden)
    return f"{removes}; {keeps}" + (f" ({' and '.join(what)})" if what else "")


def unprofiled_host_idle_fraction(step_us: float, host_side: float, real_us: float | None) -> float:
    """The host-side idle share of the estimated unprofiled step: the profiled step's host-side idle
    (``host_side`` of ``step_us``) less the profiler's cost (``step_us - real_us``: it slows the host, so the GPU
    waits that much longer), over ``real_us``; ``host_side`` itself where no unprofiled estimate is known."""
    if not real_us or real_us <= 0 or step_us <= 0:
        return host_side
    return max(host_side * step_us - max(step_us - real_us, 0.0), 0.0) / real_us


def step_verdict(s, mode: str) -> tuple[str, str]:
    """The verdict and its detail for the steps ``s`` summarises (trace mode ``mode``): see the module docstring."""
    if s.steps == 0:
        return "no steps", "no step launched GPU work"
    causes = s.idle_fraction_by_cause
    host_side = sum(causes[c] for c in ("host", "launch", "sync"))
    peer = causes["peer"]
    resid = s.kernel_launches_per_step_median if mode != "eager" else 0.0
    real = s.observed_step_us if s.eager_step_source == "measured" else s.estimated_unprofiled_step_us_median
    split = graph_split_text(s, graphed=mode == "graph")
    stall_share = s.host_stall_us_per_step / s.step_us_median if s.step_us_median > 0 else 0.0
    part = "" if mode == "eager" else " (partly graphed)"
    if mode == "graph":
        # eager steps among the replays (fallbacks, uncaptured sizes) idle most: the FULL-graph steps' own idle apart
        full = [g for g in s.step_groups if g["graph_coverage"] == "full"]
        own = (f" ({full[0]['gpu_idle_fraction']:.0%} in its {full[0]['steps']} FULL-graph steps)"
               if len(full) == 1 and len(s.step_groups) > 1 else "")
        return "already graphed", (f"{s.graph_launches_per_step_median:g} graph launch(es) per step replay "
                                   f"{s.kernels_per_step_median:g} kernels; {resid:g} eager launches left per step; "
                                   f"GPU idle {s.gpu_idle_fraction:.0%} of the step{own}; {split}")
    if peer >= max(host_side, 0.15):
        return "waiting for peers", (f"collectives wait for other ranks {peer:.0%} of the step; host-side idle "
                                     f"{host_side:.0%}; CUDA graphs on every rank predicted {speedup_text(s)}; "
                                     f"{split}; {eager_basis(s, mode)}")
    if stall_share >= HOST_STALL_SHARE and s.host_stall_us_per_step >= 0.5 * host_side * s.step_us_median:
        inside = s.host_stall_in_graph_us_per_step >= 0.5 * s.host_stall_us_per_step
        where = ("inside the captured forward: a FULL graph replays it without its Python, so the stall goes"
                 if inside else "outside the captured forward: a graph keeps it")
        return "host stall" + part, (
            f"the host thread sits {s.host_stall_us_per_step:,.0f} us per step ({stall_share:.0%} of the step) in "
            f"{s.host_stall_frame or 'a range'} with no op, launch or Python call recorded under it while the GPU "
            f"idles; {where}; CUDA graphs predicted to {step_change_text(s, real)}: {speedup_text(s)}; {split}; "
            f"{eager_basis(s, mode)}")
    # The profiler's own cost slows the host, so it shows as host-side idle of the profiled step: launch-bound is
    # read on what is left of that idle in the estimated unprofiled step (a piecewise 3b step at 46% host-side idle
    # profiled runs 1.85x its unprofiled self, and a FULL graph gains it 6%)
    host_real = unprofiled_host_idle_fraction(s.step_us_median, host_side, real)
    if host_real >= LAUNCH_BOUND_IDLE_FRACTION or s.predicted_speedup >= 1.2:
        return "launch-bound" + part, (
            f"the GPU idles {s.gpu_idle_fraction:.0%} of each step, {host_side:.0%} waiting for the CPU; CUDA graphs "
            f"predicted to {step_change_text(s, real)}: {speedup_text(s)}; {split}; {eager_basis(s, mode)}")
    busy = 1 - s.gpu_idle_fraction
    busy_real = min(busy * s.step_us_median / real, 1.0) if real and real > 0 else busy
    # the profiled step's busy share understates a step the profiler slowed: say the unprofiled one beside it
    busy_text = (f"{busy_real:.0%} of the estimated unprofiled step ({busy:.0%} of the profiled one)"
                 if busy_real - busy >= 0.05 else f"{busy:.0%} of each step")
    per_step = (f"{s.whole_step_us_after:,.0f} us per engine step, {s.predicted_graph_step_us_median:,.0f} us of it the "
                f"graph step's GPU window" if s.whole_step_us_before > 0 else
                f"{s.predicted_graph_step_us_median:,.0f} us per step")
    return "GPU-bound" + part, (f"the GPU is busy {busy_text}; CUDA graphs predicted {speedup_text(s)} ({per_step}); "
                                f"{split}; {eager_basis(s, mode)}")


def group_summary(s, group: dict):
    """The summary ``s`` narrowed to one step group's own figures (:data:`GROUP_FIELDS`)."""
    return replace(s, **{k: group[k] for k in GROUP_FIELDS if k in group}, step_groups=[], fallback_steps=[])


def group_mode(group: dict) -> str:
    """A step group's trace mode from its own launch medians."""
    return classify_mode(group["kernel_launches_per_step_median"], group["graph_launches_per_step_median"],
                         group["kernels_per_step_median"], group.get("graph_coverage") == "piecewise")


#: The headline speedup and its range: the trace's own under the ``decode time`` rule (``predicted_speedup_rule``:
#: its decode time as run over the same steps all in FULL graphs), whichever group leads or step is measured.
SPEEDUP_FIELDS = ("predicted_speedup", "predicted_speedup_low", "predicted_speedup_high")


def between_steps_us(s) -> tuple[float, float]:
    """What a serving engine's decode steps hold between the steps' GPU windows (:func:`launchgap.host_gaps.
    whole_steps_us`): (GPU work of no step, an eager step's whole gap unprofiled) per step, us; the second 0 where
    the headline's steps replay graphs (their engine hides its host work), both 0 for a trace not of an engine or
    whose headline is not decode."""
    if not (s.step_source == "engine" and s.step_groups and s.step_groups[0]["phase"] == "decode"):
        return 0.0, 0.0
    eager = s.step_groups[0].get("graph_coverage") == "eager"
    return s.inter_step_gpu_busy_us_median, s.inter_step_host_us_unprofiled_median if eager else 0.0


def headline(s):
    """The summary the trace's headline speaks for: an engine trace's first group (decode first), else ``s``; under
    the ``decode time`` rule the speedup is the trace's, over all its decode steps, whichever group leads."""
    if s.step_source == "engine" and s.step_groups:
        h = group_summary(s, s.step_groups[0])
        return replace(h, **{k: getattr(s, k) for k in SPEEDUP_FIELDS}) if s.predicted_speedup_rule == \
            "decode time" else h
    return s


def decode_time_text(s) -> str:
    """Under the ``decode time`` rule, the headline in one clause: ``"capturing the 6 uncaptured steps' sizes and
    replaying the 4 fallbacks' captured graphs would make decode 1.86x faster over this trace's 40 decode steps
    (range 1.51-2.26x): 710.5 ms as run, 381.8 ms with every step one FULL graph"``; empty under the other rules."""
    if s.predicted_speedup_rule != "decode time":
        return ""
    nu, nf = len(s.uncaptured_steps), len(s.fallback_steps)
    what = [f"capturing the {nu} uncaptured steps' sizes" if nu != 1 else "capturing the uncaptured step's size"] \
        if nu else []
    if nf:
        what.append(f"replaying the {nf} fallbacks' captured graphs" if nf != 1 else
                    "replaying the fallback's captured graph")
    if s.steps_by_coverage.get("piecewise"):
        what.append("capturing the piecewise steps whole")
    n = (s.steps_by_coverage.get("full", 0) + s.steps_by_coverage.get("piecewise", 0) + nu + nf
         if s.step_source != "engine" else None)
    over = f"this trace's {n} decode steps" if n and n == s.steps else "this trace's decode steps"
    said = f"{', '.join(what[:-1])} and {what[-1]}" if len(what) > 1 else what[0]
    return (f"{said} would make decode {s.predicted_speedup:.2f}x faster over {over} (range "
            f"{s.predicted_speedup_low:.2f}-{s.predicted_speedup_high:.2f}x): "
            f"{time_text(s.decode_us_as_run)} as run (eager steps on the eager curve), "
            f"{time_text(s.decode_us_full_graph)} with every step one FULL graph")


def time_text(us: float) -> str:
    """A sum of steps: ``710.5 ms``, or ``120 us`` under 10 ms."""
    return f"{us / 1e3:,.1f} ms" if us >= 1e4 else f"{us:,.0f} us"


def decide(s, mode: str):
    """``s`` with its verdict, its detail, its groups' verdicts and ``residual_eager_launches_per_step_median``."""
    resid = s.kernel_launches_per_step_median if mode not in ("eager", "compiled") else 0.0
    groups = [{**g, **dict(zip(("verdict", "verdict_detail"), step_verdict(group_summary(s, g), group_mode(g))))}
              for g in s.step_groups]
    if s.step_source == "engine" and groups and s.steps:
        label = LABELS.get(s.engine, "") if s.engine else ""
        verdict = groups[0]["verdict"]
        # one group: its verdict is the trace's, said once; several: each group's own after its description
        detail = (f"{label} trace: " if label else "") + (
            f"{groups[0]['description']}; {groups[0]['verdict_detail']}" if len(groups) == 1 else " | ".join(
                f"{g['description']} — {g['verdict']}: {g['verdict_detail']}" for g in groups))
        if mode == "compiled":  # the engine compiled its model (vLLM's Inductor) and ran it without graphs
            verdict = f"{verdict} ({_COMPILED_WORDS[s.compile_mode == 'reduce-overhead']})"
            detail += f" | torch.compile ran ({'; '.join(s.compile_evidence)}); no CUDA graph was replayed"
    else:
        verdict, detail = step_verdict(s, "eager" if mode == "compiled" else mode)
        if mode == "compiled":
            verdict, detail = _compiled(verdict, detail, s.compile_mode == "reduce-overhead")
    if s.fallback_steps:
        nf = len(s.fallback_steps)
        words = (f"{nf} of {s.steps} decode steps fell back to eager although a captured size fits them "
                 f"(steps {', '.join(map(str, s.fallback_steps[:12]))}{', ...' if nf > 12 else ''}; capture sizes "
                 f"{_CAPTURE_SOURCE_WORDS.get(s.capture_sizes_source or '', s.capture_sizes_source)}): "
                 f"{s.fallback_lost_us_per_step:,.0f} us lost per step of the trace")
        verdict = "graphed, with eager fallbacks" if verdict == "already graphed" else verdict
        detail = f"{words}; {detail}"
    if s.predicted_speedup_rule == "decode time":
        detail = f"{decode_time_text(s)}; {detail}"
    return replace(s, verdict=verdict, verdict_detail=detail, step_groups=groups,
                   residual_eager_launches_per_step_median=resid)


#: How a compiled trace's verdict names it, by whether CUDA graph trees ran (and replayed nothing).
_COMPILED_WORDS = {False: "torch.compile, no CUDA graphs", True: "compiled, reduce-overhead: no graph replayed"}


def _compiled(verdict: str, detail: str, graph_trees: bool) -> tuple[str, str]:
    """A torch.compile'd trace without graph replays: its kernels are fused, its launches still eager.
    ``graph_trees``: CUDA graph trees ran (``mode="reduce-overhead"``) and replayed nothing in the trace."""
    if graph_trees:
        return (f"{verdict} ({_COMPILED_WORDS[True]})",
                "torch.compile ran with mode=\"reduce-overhead\" (CUDA graph trees in the trace) but no graph was "
                "replayed: every step launched Inductor's kernels one by one. Graph trees run a shape eagerly on its "
                "first calls (warm-up) before recording it, and run it eagerly for good when it is outside "
                "cudagraph_capture_sizes, mutates an input they do not manage or passed the re-record limit "
                "(TORCH_LOGS=cudagraphs names the reason); profile after a few steps of each size; " + detail)
    return (f"{verdict} ({_COMPILED_WORDS[False]})",
            "torch.compile ran (Inductor kernels) but no CUDA graph was replayed (mode=\"reduce-overhead\" or "
            "\"max-autotune\" would capture them); " + detail)
