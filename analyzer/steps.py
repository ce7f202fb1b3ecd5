"""Decode steps and their batch sizes.

A **step** is one decode iteration (one engine iteration in a serving engine's trace), found
from, in order of preference:

1. annotations (record_function / NVTX ranges) whose text matches a user's ``step_regex``;
2. a serving engine's own step markers (:mod:`launchgap.engines`: vLLM's ``execute_...``
   annotations and ``execute_model``, SGLang's ``step[...]`` spans, TensorRT-LLM's
   ``[Executor] _forward_step`` ranges, and the engines' per-iteration Python functions in
   traces taken ``with_stack``). Markers that nest (one engine's range inside another's, an
   annotation inside a Python function) are one step: per group of nested markers the kind of
   marker that says most (phase, requests, tokens) wins, the innermost on a tie, and the others
   fill in what it leaves unknown. These steps carry ``phase``, ``requests`` and ``tokens``;
3. ``ProfilerStep#N`` ranges, unless annotations matching :data:`DEFAULT_STEP_REGEX` are more
   numerous (then each ProfilerStep holds several decode steps and those finer ranges win);
4. annotations matching :data:`DEFAULT_STEP_REGEX`;
5. in graph-replay traces without markers, one ``cudaGraphLaunch`` per step;
6. otherwise the whole trace is one window.

Only outermost matching ranges count (a matching range nested in another is part of it). In the
TensorBoard-plugin-era Kineto schema ``ProfilerStep#N`` is an ``Operator`` event; it counts too.
A GPU op belongs to a step when the start of the call that launched it lies in the step's
CPU range; the step's **GPU window** runs from the first to the last GPU op it launched.

The **batch size** of a step is, for engine steps, the requests the marker names (unless the
user gives ``batch_regex`` or ``batch_op``); else it is read from the step's own text, else from
the first annotation inside it, with :data:`DEFAULT_BATCH_REGEX` (``bs=8``, ``batch_size=8``,
``batch 8``, ``decode_step[bs=8]``) or a user pattern whose first group is the number;
else from the recorded input shapes of a chosen CPU op (``batch_op``; by default the first
of :data:`DEFAULT_BATCH_OPS` found in the step), unless a kernel whose grid follows the sequences ran in the step
(:data:`REQUEST_KERNELS`, the engines' ``REQUEST_KERNELS``: its grid wins, as the token ids' shape counts tokens in
a flattened prefill); else the grid of kernels that follow the tokens (the engines' ``TOKEN_KERNELS``: KV-cache
writes, rotary embedding); else unknown (-1). Tokens are a batch only where each request has one: the step's marker or
annotation says ``decode``, or the attention kernels it ran that run in one phase only
(:data:`launchgap.engines.PHASE_KERNELS`) are decode kernels of one query token per request. Elsewhere a token
kernel's grid and flattened token ids (a one-dimensional ``aten::embedding`` input, :data:`FLAT_TOKEN_IDS`) are
tokens, the batch stays unknown and ``batch_note`` says why in one line. A step's grid is the median over its eagerly launched matches,
else over the ones its graph replays ran (a replayed kernel runs at the captured size: the batch is at most
that, and it gives no token count). An engine step without a sequence kernel takes those launched after it
and before the next step (vLLM samples in ``Worker.sample_tokens``, after the ``execute_model`` its marker
wraps). Each step says where its batch came
from (``batch_source``: :data:`BATCH_SOURCES`) and how sure that is (``batch_confidence``). Where no marker says
the phase and both counts are known, it follows from them: as many tokens as sequences is ``decode``; more
tokens than sequences is ``prefill`` (at least one sequence is in its prompt; the two counts cannot tell a mixed
step apart), or ``mixed`` where a decode-only attention kernel ran too; never a decode step of
the batch distribution; with the tokens' kernel replayed, only a captured size equal to the sequences says
``decode``. A step found by its own annotation (not an engine's marker) whose text names one phase as a word
(``decode_step[bs=8]``, ``prefill_step``: :data:`PHASE_WORDS`) is of that phase where the counts do not say; else
its phase kernels say it: decode-only ones ``decode``, prefill-only ones ``prefill``, both ``mixed``.

Engine markers of several processes (threads) running at once are refused (:class:`~launchgap.errors.InputError`): a
step is one rank's iteration. A file holding several ranks, each a process driving its own GPU, is split per rank
before steps are looked for (:mod:`launchgap.rank_split`); what reaches this check is what splitting cannot resolve
(several threads of one process, or processes sharing their GPUs).
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass

import numpy as np

from .engines import ENGINES, PHASE_KERNELS, STEP_MARKERS, StepInfo
from .errors import InputError
from .trace import Api, Kind, Trace, kernel_base_name

DEFAULT_STEP_REGEX = r"(?i)(decode|model_step|generate_step|forward_step|^step\b|\bstep[\[#_ (]|iteration)"
DEFAULT_BATCH_REGEX = r"(?i)(?:\bbs|\bbatch(?:[_ ]?size)?)\s*[=: ]\s*(\d+)"
_PROFILER_STEP = re.compile(r"^ProfilerStep#\d+$")
#: Where a decode step's batch shows in recorded input shapes when no text names it (needs
#: ``record_shapes=True``): the token ids fed to the embedding (``[batch, 1]`` or, flattened,
#: ``[tokens]``), else the logits the next token is picked from (``argmax`` over ``[batch, vocab]``).
DEFAULT_BATCH_OPS = ("aten::embedding:1:0", "aten::argmax:0:0")
#: The default op whose one-dimensional argument is flattened token ids (vLLM, SGLang): its length is the step's
#: tokens, a batch only where each request has one token (a decode step).
FLAT_TOKEN_IDS = DEFAULT_BATCH_OPS[0]
_MAX_BATCH = 1 << 31
#: Kernels launched with one block per row of the logits, whose grid x is the step's sequences: PyTorch's argmax
#: reduction over the vocabulary (greedy sampling, ``reduce_kernel<..., ArgMaxOps<...>>``; checked on the H200
#: harness traces, HF transformers, SGLang's MI300X traces and vLLM's V1 runner: grid x = the batch in each). Over a
#: short row the reduction packs several rows a block (``block.y``; vLLM V2's argmax over per-tile maxima: grid x 3
#: for 48 rows), and the launch alone cannot tell the two apart: an engine's ``REQUEST_KERNELS`` win where they ran.
REQUEST_KERNELS = re.compile(r"reduce_kernel<.*ArgMaxOps")
#: Where a step's batch size came from (``Steps.batch_source``; ``kernel_grid`` is written
#: ``kernel_grid:<kernel>``) and how sure it is (``Steps.batch_confidence``): ``high`` (the step's marker or
#: annotation names it), ``medium`` (recorded input shapes, or the grid of a kernel that ran eagerly: the
#: tokens or sequences it processed), ``low`` (the grid of a kernel inside a graph replay: the captured size,
#: so the batch is at most that), ``None`` (unknown).
BATCH_SOURCES = ("marker", "input_shapes", "kernel_grid", "none")
#: A phase named as a word in a step's own annotation text (``decode_step[bs=8]``; not ``decoder``).
PHASE_WORDS = re.compile(r"(?i)(?<![a-z])(decode|prefill)(?![a-z])")


@dataclass(frozen=True)
class StepOptions:
    """How to find steps and batch sizes. ``batch_op`` is ``"OP[:ARG[:DIM]]"`` (default ARG 0, DIM 0)."""

    step_regex: str | None = None
    batch_regex: str | None = None
    batch_op: str | None = None


@dataclass(frozen=True, eq=False)
class Steps:
    """Steps as columns (one entry per step, sorted by ``cpu_start_ns``).

    ``source`` says how they were found: ``"user-regex"``, ``"engine"``, ``"profiler-step"``,
    ``"annotation"``, ``"graph-launch"`` or ``"whole-trace"``. ``phase`` (``None`` when
    unknown), ``requests`` and ``tokens`` (-1 when unknown) come from engine markers;
    ``engine`` is the engine whose markers gave most steps (``None`` for other sources). ``batch_note``: one line
    saying why a step that ran a token kernel has no batch (its tokens are not its requests), or why its tokens were
    read as its requests (a decode step: one token per request); ``None`` otherwise.
    """

    source: str
    names: list[str]
    cpu_start_ns: np.ndarray
    cpu_end_ns: np.ndarray
    batch_size: np.ndarray  # int64, -1 when unknown
    phase: list[str | None] | None = None  # None: unknown for every step
    requests: np.ndarray | None = None  # int64, -1 when unknown (None: all unknown)
    tokens: np.ndarray | None = None  # int64, -1 when unknown (None: all unknown)
    engine: str | None = None
    batch_source: list[str] | None = None  # None: "none" for every step
    batch_confidence: list[str | None] | None = None  # None: unknown for every step
    batch_note: list[str | None] | None = None  # None: nothing to say for every step

    def __post_init__(self) -> None:
        n = len(self.names)
        if self.phase is None:
            object.__setattr__(self, "phase", [None] * n)
        if self.batch_note is None:
            object.__setattr__(self, "batch_note", [None] * n)
        if self.batch_source is None:
            object.__setattr__(self, "batch_source", ["none"] * n)
        if self.batch_confidence is None:
            object.__setattr__(self, "batch_confidence", [None] * n)
        for col in ("requests", "tokens"):
            if getattr(self, col) is None:
                object.__setattr__(self, col, np.full(n, -1, dtype=np.int64))

    def __len__(self) -> int:
        return int(self.cpu_start_ns.shape[0])


def _compile(pattern: str, what: str) -> re.Pattern[str]:
    try:
        return re.compile(pattern)
    except re.error as exc:
        raise InputError(f"bad {what} {pattern!r}: {exc}") from None


def _matching_name_ids(trace: Trace, pattern: re.Pattern[str], rows: np.ndarray) -> np.ndarray:
    """Name ids among ``rows`` whose text matches (the regex runs once per unique name)."""
    uniq = np.unique(trace.name_id[rows])
    return np.array([nid for nid in uniq if pattern.search(trace.names[nid])], dtype=np.int32)


def _outermost(rows: np.ndarray, trace: Trace) -> np.ndarray:
    """Drop ranges nested inside an earlier range of the same set (rows sorted by start)."""
    if rows.size <= 1:
        return rows
    ends = trace.end_ns[rows]
    prev_max_end = np.maximum.accumulate(ends)
    nested = np.zeros(rows.size, dtype=bool)
    nested[1:] = prev_max_end[:-1] >= ends[1:]
    return rows[~nested]


def find_steps(trace: Trace, options: StepOptions | None = None) -> Steps:
    """Find decode steps and their batch sizes (see the module docstring for the rules)."""
    opts = options or StepOptions()
    ann = np.flatnonzero(trace.kind == Kind.ANNOTATION)
    rows: np.ndarray | None = None
    source = ""
    marked: _EngineSteps | None = None
    if opts.step_regex:
        pat = _compile(opts.step_regex, "--step-regex")
        ids = _matching_name_ids(trace, pat, ann)
        rows = _outermost(ann[np.isin(trace.name_id[ann], ids)], trace)
        source = "user-regex"
        if rows.size == 0:
            raise InputError(f"--step-regex {opts.step_regex!r} matches no annotation or NVTX range", trace.path)
    else:
        marked = engine_steps(trace)
        if marked is None:
            rows, source = _generic_step_rows(trace, ann)
    n_known = None
    if marked is not None:
        source, starts, ends, names = "engine", marked.start_ns, marked.end_ns, marked.names
        n_known = np.array([-1 if i.requests is None else i.requests for i in marked.info], dtype=np.int64)
    elif rows is not None and rows.size:
        starts, ends = trace.start_ns[rows], trace.end_ns[rows]
        names = [str(s) for s in trace.names[trace.name_id[rows]]]
    else:
        graph_launch = np.flatnonzero(trace.api == Api.GRAPH_LAUNCH)
        eager_launch = np.count_nonzero(trace.api == Api.KERNEL_LAUNCH)
        if graph_launch.size and eager_launch == 0:
            source = "graph-launch"
            starts, ends = trace.start_ns[graph_launch], trace.end_ns[graph_launch]
            names = [f"cudaGraphLaunch#{i}" for i in range(graph_launch.size)]
        else:
            source = "whole-trace"
            starts = np.array([trace.start_ns.min() if len(trace) else 0], dtype=np.int64)
            ends = np.array([trace.end_ns.max() if len(trace) else 0], dtype=np.int64)
            names = ["whole trace"]
    starts, ends = np.asarray(starts, dtype=np.int64), np.asarray(ends, dtype=np.int64)
    batch, src, flat_ids = _batch_sizes(trace, starts, ends, names, opts, n_known)
    n = len(names)
    info = marked.info if marked is not None else [StepInfo()] * n
    phase = [i.phase for i in info]
    requests = np.array([-1 if i.requests is None else i.requests for i in info], dtype=np.int64)
    tokens = np.array([-1 if i.tokens is None else i.tokens for i in info], dtype=np.int64)
    # The launch configuration of kernels whose grid follows the tokens (KV-cache writes, rotary embedding) or the
    # sequences (the argmax over the logits): per engine module, plus PyTorch's own sampling.
    tok, tok_name, tok_graph = _grid_per_step(trace, starts, ends, [e.TOKEN_KERNELS for e in ENGINES
                                                                     if e.TOKEN_KERNELS is not None])
    req, req_name, req_graph = _request_grid_per_step(trace, starts, ends, tail=marked is not None)
    kp = _kernel_phases(trace, starts, ends)
    # The phase the step's own text says: its engine marker's, else one phase word in its annotation
    said = list(phase)
    if marked is None:  # one regex per step name (report rows)
        for i, name in enumerate(names):
            words = {w.lower() for w in PHASE_WORDS.findall(name)}
            said[i] = words.pop() if len(words) == 1 else None
    # Tokens are requests only where each request has one: the text says decode, or the step's only phase
    # kernels are decode ones that run one query token per request.
    one_each = np.array([p == "decode" or (p is None and kp.phase[i] == "decode" and kp.one_token[i])
                         for i, p in enumerate(said)], dtype=bool)
    # The sequences the argmax ran over win over the recorded input shapes (the token ids: tokens, not sequences,
    # in a flattened prefill); the tokens the KV-cache writes ran over come last, and only one per request.
    use_req = (src != "marker") & (req > 0)
    shape_tokens = np.where(flat_ids & (src == "input_shapes") & ~use_req & ~one_each, batch, -1)
    batch[shape_tokens > 0], src[shape_tokens > 0] = -1, "none"
    use_tok = (batch < 0) & ~use_req & (tok > 0) & one_each
    conf = np.where(src == "marker", "high", np.where(src == "input_shapes", "medium", "")).astype(object)
    note: list[str | None] = [None] * n
    for i in np.flatnonzero(use_req | use_tok).tolist():  # steps without a batch from a marker (report rows)
        name, graph = (req_name[i], req_graph[i]) if use_req[i] else (tok_name[i], tok_graph[i])
        batch[i] = req[i] if use_req[i] else tok[i]
        src[i] = f"kernel_grid:{kernel_base_name(name or '')}"
        # inside a graph replay the kernel ran at the captured size: the batch is at most that (the bucket)
        conf[i] = "low" if graph else "medium"
        if use_tok[i]:
            note[i] = "tokens as requests: " + (f"{kp.decode_kernel[i]} runs only in decode, one token per request"
                                                if said[i] is None else "its marker or annotation says decode")
    for i in np.flatnonzero((batch < 0) & ((tok > 0) | (shape_tokens > 0))).tolist():  # tokens, no batch
        note[i] = f"{_not_one_each(said[i], kp, i)}: {_token_count(tok[i], tok_name[i], tok_graph[i], shape_tokens[i])}" \
                  f", not its requests"
    requests = np.where((requests < 0) & (req > 0), req, requests)
    # A token kernel replayed in a graph ran at the captured size: the step's tokens are at most that, not that.
    tokens = np.where((tokens < 0) & (tok > 0) & ~tok_graph, tok, tokens)
    for i in range(n):  # phase where no marker says it: tokens against sequences, the step's words, its kernels
        if phase[i] is None and tok[i] > 0 and req[i] > 0:
            if tok_graph[i]:  # requests <= tokens <= captured size: equal ends say decode, else unknown
                phase[i] = "decode" if tok[i] == req[i] else None
            elif tok[i] == req[i]:
                phase[i] = "decode"
            elif tok[i] > req[i]:  # some request is in its prompt; a decode kernel says others generate
                phase[i] = "mixed" if kp.phase[i] in ("decode", "mixed") else "prefill"
        if phase[i] is None:
            phase[i] = said[i] if said[i] is not None else kp.phase[i]
    return Steps(source=source, names=names, cpu_start_ns=starts, cpu_end_ns=ends, batch_size=batch, phase=phase,
                 requests=requests, tokens=tokens, engine=marked.engine if marked is not None else None,
                 batch_source=[str(x) for x in src], batch_confidence=[str(c) if c else None for c in conf],
                 batch_note=note)


def _generic_step_rows(trace: Trace, ann: np.ndarray) -> tuple[np.ndarray | None, str]:
    """ProfilerStep ranges or annotations matching :data:`DEFAULT_STEP_REGEX` (rules 3 and 4)."""
    # The old Kineto schema records ProfilerStep#N as an Operator (CPU op), not an annotation.
    # masks and per-name tables, not copies of the rows (a 1 GB trace has over a million CPU ops)
    prof_cand = (trace.kind == Kind.ANNOTATION) | (trace.kind == Kind.CPU_OP)
    prof_ids = [i for i in np.flatnonzero(trace.name_counts(prof_cand)).tolist() if _PROFILER_STEP.match(trace.names[i])]
    prof = trace.named(prof_ids)
    prof_rows = _outermost(np.flatnonzero(prof_cand & prof), trace)
    del prof_cand
    non_prof = ann[~prof[ann]]
    del prof
    dflt_ids = _matching_name_ids(trace, re.compile(DEFAULT_STEP_REGEX), non_prof)
    dflt_rows = _outermost(non_prof[np.isin(trace.name_id[non_prof], dflt_ids)], trace)
    if prof_rows.size and prof_rows.size >= dflt_rows.size:
        return prof_rows, "profiler-step"
    if dflt_rows.size:
        return dflt_rows, "annotation"
    return None, ""


# --- serving engines' step markers ---------------------------------------------------------------

@dataclass(frozen=True, eq=False)
class _EngineSteps:
    """Steps from engine markers: CPU ranges, marker texts, what each says, and the main engine."""

    start_ns: np.ndarray
    end_ns: np.ndarray
    names: list[str]
    info: list[StepInfo]
    engine: str


def _marker_matches(names: np.ndarray, ids: np.ndarray, source: str) -> dict[int, tuple[int, StepInfo]]:
    """For each name id (unique names, not events) that is a step marker: (marker index, info)."""
    out: dict[int, tuple[int, StepInfo]] = {}
    for nid in ids.tolist():
        text = names[nid]
        for k, marker in enumerate(STEP_MARKERS):
            if marker.source != source:
                continue
            info = marker.read(text)
            if info is not None:
                out[nid] = (k, info)
                break
    return out


#: Refuse a file when at least this share of its step markers start inside another process's (thread's) marker.
MERGED_RANKS_OVERLAP_SHARE = 0.25


def _one_process(trace: Trace, owner: np.ndarray, start: np.ndarray, end: np.ndarray, what: str) -> None:
    """Refuse a file whose step markers come from several processes (threads) running at once: ranks of a
    tensor-parallel job that :mod:`launchgap.rank_split` could not split apart (threads of one process, processes
    sharing GPUs). A step is one rank's iteration; launches are matched to steps by time alone, so the ranks' steps
    would mix. A marker counts as running at once when it starts inside the longest-reaching earlier marker and
    that one is another owner's; a quarter of the markers doing so (:data:`MERGED_RANKS_OVERLAP_SHARE`) is a merged file, not a stray one."""
    ids = np.unique(owner)
    if ids.size < 2:
        return
    order = np.lexsort((-end, start))
    s, e, o = start[order], end[order], owner[order]
    reach = np.maximum.accumulate(e)
    holder = o[np.maximum.accumulate(np.where(e == reach, np.arange(e.size), 0))]  # owner of the furthest end
    inside = np.zeros(s.size, dtype=bool)
    inside[1:] = (s[1:] < reach[:-1]) & (holder[:-1] != o[1:])
    if np.count_nonzero(inside) >= MERGED_RANKS_OVERLAP_SHARE * s.size:
        shown = ", ".join(str(int(i)) for i in ids[:4]) + (", ..." if ids.size > 4 else "")
        raise InputError(f"its step markers come from {ids.size} {what} {shown}) running at once, as if the ranks "
                         f"of a job were merged into one file, and they could not be split per rank (a rank is a "
                         f"process driving its own GPU); give one trace per rank, as the engine's profiler writes them "
                         f"(vLLM: *-rank-N.*.pt.trace.json.gz)", trace.path)


#: Indices into :data:`STEP_MARKERS` of the markers that delimit only a part of an iteration (``StepMarker.fallback``).
_FALLBACK_MARKERS = frozenset(k for k, m in enumerate(STEP_MARKERS) if m.fallback)


def engine_steps(trace: Trace) -> _EngineSteps | None:
    """Steps from serving engines' markers (rule 2 of the module docstring), ``None`` when there are none."""
    ann = np.flatnonzero(trace.kind == Kind.ANNOTATION)
    a_hits = _marker_matches(trace.names, np.unique(trace.name_id[ann]), "annotation")
    a_rows = ann[np.isin(trace.name_id[ann], list(a_hits))]
    pc = trace.python_calls
    p_hits = _marker_matches(pc.names, np.unique(pc.name_id), "python")
    p_rows = np.flatnonzero(np.isin(pc.name_id, list(p_hits)))
    if a_rows.size == 0 and p_rows.size == 0:
        return None
    # A fallback marker (a part of the iteration) makes the steps only where no other marker is in the trace.
    if any(k not in _FALLBACK_MARKERS for k, _ in [*a_hits.values(), *p_hits.values()]):
        a_hits = {n: h for n, h in a_hits.items() if h[0] not in _FALLBACK_MARKERS}
        p_hits = {n: h for n, h in p_hits.items() if h[0] not in _FALLBACK_MARKERS}
        a_rows = a_rows[np.isin(trace.name_id[a_rows], list(a_hits))]
        p_rows = p_rows[np.isin(pc.name_id[p_rows], list(p_hits))]
    _one_process(trace, trace.pid[a_rows], trace.start_ns[a_rows], trace.end_ns[a_rows], "processes (pids")
    _one_process(trace, pc.tid[p_rows], pc.start_ns[p_rows], pc.end_ns[p_rows], "threads (tids")
    start = np.concatenate([trace.start_ns[a_rows], pc.start_ns[p_rows]])
    end = np.concatenate([trace.end_ns[a_rows], pc.end_ns[p_rows]])
    texts = [str(t) for t in trace.names[trace.name_id[a_rows]]] + [str(t) for t in pc.names[pc.name_id[p_rows]]]
    hits = [a_hits[int(n)] for n in trace.name_id[a_rows]] + [p_hits[int(n)] for n in pc.name_id[p_rows]]
    kind = np.array([k for k, _ in hits], dtype=np.int64)
    known = np.array([i.fields_known for _, i in hits], dtype=np.int64)
    # Groups of nested markers: sorted by start (the longer first on a tie), a marker starting
    # before the ones so far have all ended belongs to their group.
    order = np.lexsort((-(end - start), start))
    start, end, kind, known = start[order], end[order], kind[order], known[order]
    texts = [texts[i] for i in order.tolist()]
    infos = [hits[i][1] for i in order.tolist()]
    prev_end = np.maximum.accumulate(end)
    new_group = np.ones(start.size, dtype=bool)
    new_group[1:] = start[1:] >= prev_end[:-1]
    group = np.cumsum(new_group) - 1
    # Per group, the marker kind that says most; on a tie the shortest (innermost) marker's kind.
    best = np.lexsort((end - start, -known, group))
    first = np.ones(best.size, dtype=bool)
    first[1:] = group[best][1:] != group[best][:-1]
    best_kind = np.empty(group.max() + 1, dtype=np.int64)
    best_kind[group[best][first]] = kind[best][first]
    chosen = np.flatnonzero(kind == best_kind[group])
    # Outermost among the chosen kind (a marker of that kind nested in another of it is part of it).
    ends_c = end[chosen]
    nested = np.zeros(chosen.size, dtype=bool)
    nested[1:] = np.maximum.accumulate(ends_c)[:-1] >= ends_c[1:]
    chosen = chosen[~nested]
    step_group = group[chosen]
    info = [infos[i] for i in chosen.tolist()]
    # A group that is one step: its other markers fill in what the chosen one does not say.
    # Groups are runs of the start-sorted markers: group g is [bounds[g], bounds[g + 1]).
    per_group = np.bincount(step_group, minlength=group.max() + 1)
    bounds = np.concatenate([np.flatnonzero(new_group), [start.size]])
    for j, c in enumerate(chosen.tolist()):  # one iteration per step (report rows, not events)
        g = step_group[j]
        lo, hi = bounds[g], bounds[g + 1]
        if per_group[g] != 1 or hi - lo == 1 or info[j].fields_known == 3:
            continue
        for i in (lo + np.argsort(-known[lo:hi], kind="stable")).tolist():  # most informative first
            if i != c:
                info[j] = info[j].filled_from(infos[i])
    engines = [STEP_MARKERS[k].engine for k in kind[chosen].tolist()]
    main = max(dict.fromkeys(engines), key=engines.count)
    return _EngineSteps(start_ns=start[chosen], end_ns=end[chosen], names=[texts[i] for i in chosen.tolist()],
                        info=info, engine=main)


def detect_engine(trace: Trace, steps: Steps | None = None) -> str | None:
    """The serving engine that wrote ``trace`` (an engine name), or ``None``.

    Evidence, strongest first; the first kind of evidence that names an engine decides (the
    engine with most of it, registry order on a tie): the engine's per-iteration Python function
    (``with_stack`` traces), its step or capture ranges, its Python files, its custom op
    namespaces. (The TraceLens SGLang traces carry a vLLM-style range around SGLang's own span;
    SGLang's model runner in the Python stack says whose trace it is.)
    """
    pc = trace.python_calls
    py_names = [str(n) for n in pc.names[np.unique(pc.name_id)]] if len(pc) else []
    py_markers = [m for m in STEP_MARKERS if m.source == "python"]
    counts = [{e.NAME: 0 for e in ENGINES} for _ in range(4)]
    for n in py_names:  # unique Python function names
        for m in py_markers:
            if m.pattern.search(n):
                counts[0][m.engine] += 1
        for e in ENGINES:
            if e.PYTHON_CUE.search(n):
                counts[2][e.NAME] += 1
    for nid in np.flatnonzero(trace.name_counts(trace.kind == Kind.ANNOTATION)).tolist():  # unique annotation texts
        text = trace.names[nid]
        for m in STEP_MARKERS:
            if m.source == "annotation" and m.pattern.search(text):
                counts[1][m.engine] += 1
        for e in ENGINES:
            if e.CAPTURE_ANNOTATION is not None and e.CAPTURE_ANNOTATION.match(text):
                counts[1][e.NAME] += 1
    for nid in np.flatnonzero(trace.name_counts(trace.kind == Kind.CPU_OP)).tolist():  # unique op names
        for e in ENGINES:
            if e.OP_CUE.match(trace.names[nid]):
                counts[3][e.NAME] += 1
    for level in counts:
        if any(level.values()):
            return max(level, key=level.get)
    return steps.engine if steps is not None else None


def _batch_from_text(names: list[str] | np.ndarray, pattern: re.Pattern[str]) -> np.ndarray:
    out = np.full(len(names), -1, dtype=np.int64)
    for i, text in enumerate(names):
        m = pattern.search(text)
        if m:
            try:
                value = int(m.group(1) if m.groups() else m.group(0))
            except (ValueError, IndexError, TypeError):
                continue
            if 0 < value < _MAX_BATCH:  # anything else is not a batch size
                out[i] = value
    return out


def _contained(trace: Trace, rows: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """For rows sorted by start: the step each lies in (or -1), by searchsorted over step starts."""
    idx = np.searchsorted(starts, trace.start_ns[rows], side="right") - 1
    ok = idx >= 0
    ok[ok] = trace.end_ns[rows[ok]] <= ends[idx[ok]]
    return np.where(ok, idx, -1), rows


def _batch_sizes(trace: Trace, starts: np.ndarray, ends: np.ndarray, names: list[str], opts: StepOptions,
                 engine_requests: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per step the batch size from the texts and recorded input shapes, where each came from (``marker`` /
    ``input_shapes`` / ``none``), and whether it is the length of flattened token ids (a token count, not a batch,
    unless each request has one token: :data:`FLAT_TOKEN_IDS`)."""
    pat = _compile(opts.batch_regex or DEFAULT_BATCH_REGEX, "--batch-regex")
    batch = _batch_from_text(names, pat)
    if engine_requests is not None:
        # The engine's own count wins over the default pattern, a user's pattern over it.
        user = opts.batch_regex is not None or opts.batch_op is not None
        ok = (engine_requests > 0) & (engine_requests < _MAX_BATCH)
        take = ok & (batch < 0) if user else ok
        batch = np.where(take, engine_requests, batch)
    ann = np.flatnonzero(trace.kind == Kind.ANNOTATION)
    if (batch < 0).any() and ann.size:
        uniq = np.unique(trace.name_id[ann])
        uniq_bs = _batch_from_text([trace.names[i] for i in uniq], pat)
        with_bs = uniq[uniq_bs >= 0]
        if with_bs.size:
            lookup = dict(zip(uniq.tolist(), uniq_bs.tolist()))
            cand = ann[np.isin(trace.name_id[ann], with_bs)]
            step_of, cand = _contained(trace, cand, starts, ends)
            inside = step_of >= 0
            steps_hit, first = np.unique(step_of[inside], return_index=True)
            values = np.array([lookup[int(n)] for n in trace.name_id[cand[inside][first]]], dtype=np.int64)
            fill = batch[steps_hit] < 0
            batch[steps_hit[fill]] = values[fill]
    src = np.where(batch > 0, "marker", "none").astype(object)
    flat = np.zeros(batch.size, dtype=bool)
    for spec in ([opts.batch_op] if opts.batch_op else DEFAULT_BATCH_OPS):
        if not (batch < 0).any():
            break
        before = batch < 0
        batch, one_dim = _batch_from_op(trace, starts, ends, batch, spec)
        if spec == FLAT_TOKEN_IDS and not opts.batch_op:  # a user's --batch-op is taken as given
            flat |= before & one_dim
    src[(src == "none") & (batch > 0)] = "input_shapes"
    return batch, src, flat


def _grid_per_step(trace: Trace, starts: np.ndarray, ends: np.ndarray, patterns: list[re.Pattern[str]],
                   extras: list[int] | None = None) -> tuple[np.ndarray, list[str | None], np.ndarray]:
    """Per step the grid size (x) of the kernels matching ``patterns`` it launched, less the matched pattern's entry of
    ``extras`` (blocks a kernel launches beyond its count; 0 where not given), the first such kernel's name, and
    whether that grid is a graph replay's; -1 / ``None`` where none.

    The grid is the median over the step's eagerly launched matches (one per layer) when it has any, else over the
    ones its graph replays ran: a replayed kernel runs at the captured size, an eager one at the step's own count
    (vLLM's PIECEWISE mode runs the KV-cache write eagerly and the rotary embedding inside the pieces)."""
    n = starts.size
    value, graph = np.full(n, -1, dtype=np.int64), np.zeros(n, dtype=bool)
    names: list[str | None] = [None] * n
    gx = getattr(trace, "grid_x", None)
    k = np.flatnonzero((trace.kind == Kind.KERNEL) & (trace.launch_idx >= 0))
    if gx is None or k.size == 0 or not patterns or n == 0:
        return value, names, graph
    k = k[gx[k] > 0]
    extra_of: dict[int, int] = {}  # kernel name id -> its pattern's extra blocks (the first pattern that matches)
    for i in np.unique(trace.name_id[k]).tolist():  # distinct kernel names, not events
        hit = next((j for j, p in enumerate(patterns) if p.search(trace.names[i])), None)
        if hit is not None:
            extra_of[i] = extras[hit] if extras else 0
    k = k[np.isin(trace.name_id[k], list(extra_of))]
    if k.size == 0:
        return value, names, graph
    launch = trace.launch_idx[k]
    t = trace.start_ns[launch]
    step = np.searchsorted(starts, t, side="right") - 1
    ok = step >= 0
    ok[ok] = t[ok] <= ends[step[ok]]
    k, step, launch = k[ok], step[ok], launch[ok]
    replayed = trace.api[launch] == Api.GRAPH_LAUNCH
    has_eager = np.zeros(n, dtype=bool)
    has_eager[step[~replayed]] = True
    keep = ~replayed | ~has_eager[step]  # a step's replayed matches count only where it launched none eagerly
    k, step, launch, replayed = k[keep], step[keep], launch[keep], replayed[keep]
    order = np.lexsort((trace.start_ns[k], step))
    k, step, replayed = k[order], step[order], replayed[order]
    hit, first, count = np.unique(step, return_index=True, return_counts=True)
    lookup = np.zeros(int(trace.name_id[k].max()) + 1, dtype=np.int64)
    lookup[list(extra_of)] = list(extra_of.values())
    grid = gx[k].astype(np.int64) - lookup[trace.name_id[k]]
    for h, f, c in zip(hit.tolist(), first.tolist(), count.tolist()):  # one per step (a report row)
        value[h] = int(np.median(grid[f:f + c]))
        names[h] = str(trace.names[trace.name_id[k[f]]])
        graph[h] = bool(replayed[f])
    return value, names, graph


def _request_grid_per_step(trace: Trace, starts: np.ndarray, ends: np.ndarray, tail: bool
                           ) -> tuple[np.ndarray, list[str | None], np.ndarray]:
    """:func:`_grid_per_step` for the kernels that follow the sequences: the engines' ``REQUEST_KERNELS`` where the
    step ran one, else PyTorch's argmax (:data:`REQUEST_KERNELS`), whose grid is the rows only when it reduces a
    long row (the vocabulary), not when it reduces a few columns (vLLM V2's per-tile maxima: 16 rows a block)."""
    rules = [k for e in ENGINES if e.REQUEST_KERNELS is not None for k in e.REQUEST_KERNELS]
    own = _sequence_grid_per_step(trace, starts, ends, [k.pattern for k in rules], [k.extra for k in rules], tail)
    argmax = _sequence_grid_per_step(trace, starts, ends, [REQUEST_KERNELS], None, tail)
    pick = own[0] > 0
    return (np.where(pick, own[0], argmax[0]), [a if p else b for p, a, b in zip(pick.tolist(), own[1], argmax[1])],
            np.where(pick, own[2], argmax[2]))


def _sequence_grid_per_step(trace: Trace, starts: np.ndarray, ends: np.ndarray, patterns: list[re.Pattern[str]],
                            extras: list[int] | None, tail: bool) -> tuple[np.ndarray, list[str | None], np.ndarray]:
    """:func:`_grid_per_step`; with ``tail`` (engine steps) a step without a match takes those launched after it
    ended and before the next step started: vLLM samples in ``Worker.sample_tokens``, a call of its own after the
    ``execute_model`` its step annotation wraps."""
    n = starts.size
    if not tail or n == 0:
        return _grid_per_step(trace, starts, ends, patterns, extras)
    # One pass over interleaved windows: each step, then the gap after it up to the next step's start (sorted: a gap
    # starts after every earlier step's end, at the latest where the next step starts; one that ends before it
    # starts holds nothing)
    nxt = np.append(starts[1:], np.iinfo(np.int64).max)
    w_start, w_end = np.empty(2 * n, dtype=np.int64), np.empty(2 * n, dtype=np.int64)
    w_start[0::2], w_end[0::2] = starts, ends
    w_start[1::2], w_end[1::2] = np.minimum(np.maximum.accumulate(ends) + 1, nxt), nxt - 1
    value, names, replayed = _grid_per_step(trace, w_start, w_end, patterns, extras)
    own, after = value[0::2], value[1::2]
    fill = (own <= 0) & (after > 0)
    pick = 2 * np.arange(n) + fill  # the step's window, else the gap after it
    return value[pick], [names[i] for i in pick.tolist()], replayed[pick]


@dataclass(frozen=True, eq=False)
class _KernelPhases:
    """Per step what its phase kernels (:data:`launchgap.engines.PHASE_KERNELS`) say: ``phase`` (``None`` where it
    ran none), ``one_token`` (every decode kernel it ran runs one query token per request), and the first decode /
    prefill kernel's short name."""

    phase: list[str | None]
    one_token: np.ndarray
    decode_kernel: list[str | None]
    prefill_kernel: list[str | None]


def _kernel_phases(trace: Trace, starts: np.ndarray, ends: np.ndarray) -> _KernelPhases:
    """The phase each step's attention kernels say: a step that launched (eagerly or in a graph replay) a kernel that
    runs only in decode holds generating requests, one that runs only in prefill holds requests in their prompt;
    both: mixed."""
    n = starts.size
    out = _KernelPhases([None] * n, np.zeros(n, dtype=bool), [None] * n, [None] * n)
    k = np.flatnonzero((trace.kind == Kind.KERNEL) & (trace.launch_idx >= 0))
    if k.size == 0 or n == 0:
        return out
    ids, inv = np.unique(trace.name_id[k], return_inverse=True)
    which = np.full(ids.size, -1, dtype=np.int64)  # index into PHASE_KERNELS per distinct kernel name
    for j, nid in enumerate(ids.tolist()):  # distinct kernel names, not events
        own = kernel_base_name(str(trace.names[nid]))
        which[j] = next((x for x, pk in enumerate(PHASE_KERNELS) if pk.pattern.search(own)), -1)
    hit = which[inv.reshape(-1)] >= 0
    k, kind = k[hit], which[inv.reshape(-1)][hit]
    if k.size == 0:
        return out
    t = trace.start_ns[trace.launch_idx[k]]
    step = np.searchsorted(starts, t, side="right") - 1
    ok = step >= 0
    ok[ok] = t[ok] <= ends[step[ok]]
    order = np.lexsort((trace.start_ns[k[ok]], step[ok]))
    k, kind, step = k[ok][order], kind[ok][order], step[ok][order]
    decode = np.array([pk.phase == "decode" for pk in PHASE_KERNELS])[kind]
    multi = np.array([pk.phase == "decode" and not pk.one_token for pk in PHASE_KERNELS])[kind]
    has_dec, has_pre, has_multi = (np.bincount(step[m], minlength=n) > 0 for m in (decode, ~decode, multi))
    for mask, names in ((decode, out.decode_kernel), (~decode, out.prefill_kernel)):
        hit_steps, first = np.unique(step[mask], return_index=True)
        for s, f in zip(hit_steps.tolist(), first.tolist()):  # one per step (report rows)
            names[s] = kernel_base_name(str(trace.names[trace.name_id[k[mask][f]]]))
    for i in np.flatnonzero(has_dec | has_pre).tolist():
        out.phase[i] = "mixed" if has_dec[i] and has_pre[i] else "decode" if has_dec[i] else "prefill"
    out.one_token[:] = has_dec & ~has_pre & ~has_multi
    return out


def _not_one_each(said: str | None, kp: _KernelPhases, i: int) -> str:
    """Why a step's tokens are not one per request, in a few words."""
    if said in ("prefill", "mixed"):
        return f"a {said} step (its marker says so)"
    if kp.phase[i] == "prefill":
        return f"a prefill step ({kp.prefill_kernel[i]} runs only in prefill)"
    if kp.phase[i] == "mixed":
        return (f"a mixed step ({kp.decode_kernel[i]} runs only in decode, {kp.prefill_kernel[i]} only in "
                f"prefill)")
    if kp.phase[i] == "decode":
        return (f"a decode step whose {kp.decode_kernel[i]} may run several tokens per request (speculative "
                f"decoding's draft tokens, beam search's beams)")
    return "no sampler kernel and no attention kernel that runs in one phase only"


def _token_count(tok: int, tok_name: str | None, graph: bool, shape_tokens: int) -> str:
    """What counted the step's tokens, and how many."""
    if tok > 0:
        kernel = kernel_base_name(tok_name or "")
        return (f"the grid of {kernel} in a graph replay is the captured size {tok:,}" if graph else
                f"the grid of {kernel} counts its {tok:,} tokens")
    return f"the token ids' shape counts its {shape_tokens:,} tokens"


def _batch_from_op(trace: Trace, starts: np.ndarray, ends: np.ndarray, batch: np.ndarray, spec: str
                   ) -> tuple[np.ndarray, np.ndarray]:
    """``batch`` with its unknown steps filled from dimension DIM of argument ARG of the first ``OP`` in each step,
    and per step whether that argument was one-dimensional."""
    # Op names contain colons (aten::embedding): ARG and DIM are the trailing integer parts.
    m = re.fullmatch(r"(.+?)(?::(\d+))?(?::(\d+))?", spec)
    if not m or m.group(1).endswith(":") or (m.group(1).count(":") % 2 == 1):
        raise InputError(f"--batch-op {spec!r}: expected OP[:ARG[:DIM]] with integer ARG and DIM")
    op = m.group(1)
    arg = int(m.group(2)) if m.group(2) else 0
    dim = int(m.group(3)) if m.group(3) else 0
    op_ids = [i for i, n in enumerate(trace.names) if n == op]
    rows = np.flatnonzero((trace.kind == Kind.CPU_OP) & np.isin(trace.name_id, op_ids) & (trace.dims_id >= 0))
    one_dim = np.zeros(batch.size, dtype=bool)
    if rows.size == 0:
        return batch, one_dim
    step_of, rows = _contained(trace, rows, starts, ends)
    inside = step_of >= 0
    steps_hit, first = np.unique(step_of[inside], return_index=True)
    out = batch.copy()
    for s, r in zip(steps_hit.tolist(), rows[inside][first].tolist()):
        if out[s] >= 0:
            continue
        try:
            dims = json.loads(trace.names[trace.dims_id[r]])
            value = int(dims[arg][dim])
        except (ValueError, IndexError, TypeError, KeyError, RecursionError):
            continue
        if 0 < value < _MAX_BATCH:
            out[s] = value
            one_dim[s] = len(dims[arg]) == 1
    return out, one_dim


def assign_rows_to_steps(trace: Trace, steps: Steps) -> np.ndarray:
    """Step index of every row (-1 if none), int32 (int64 past 2^31 - 1 steps).

    GPU ops go to the step in whose CPU range their launch call started (GPU ops without a
    matched launch call get -1); host rows go to the step in whose range they started.
    """
    n = int(trace.start_ns.shape[0])
    out = np.empty(n, dtype=np.int32 if len(steps) < 2**31 - 1 else np.int64)
    li = trace.launch_idx
    for lo in range(0, n, _ROW_BLOCK):  # in blocks: no int64 temporaries as long as the table
        hi = min(lo + _ROW_BLOCK, n)
        t = trace.start_ns[lo:hi].copy()
        gpu = trace.kind[lo:hi] <= Kind.GRAPH  # (trace.gpu_mask, one block of it)
        lg = li[lo:hi][gpu]
        t[gpu] = np.where(lg >= 0, trace.start_ns[np.maximum(lg, 0)], -1)
        idx = np.searchsorted(steps.cpu_start_ns, t, side="right")
        idx -= 1
        ok = idx >= 0
        ok[ok] = t[ok] <= steps.cpu_end_ns[idx[ok]]
        ok[gpu] &= lg >= 0
        idx[~ok] = -1
        out[lo:hi] = idx
    return out


#: Rows per block where a per-row temporary is int64 (a 1 GB trace has millions of rows).
_ROW_BLOCK = 1 << 18
