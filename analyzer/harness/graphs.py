"""CUDA-graph capture for the harness: FULL and PIECEWISE steps, single sizes or whole lists.

**FULL**: the whole decode step is one graph. **PIECEWISE** (vLLM's default mode): the step
is split at attention: graph piece 0 is the embedding and layer 0 up to attention, piece
``j`` (1..L-1) is layer ``j-1`` after attention plus layer ``j`` up to attention, piece L
is the last layer after attention plus the LM head; between pieces each layer's attention
(K/V cache write and SDPA) runs eagerly and copies its output into a static buffer that
the next piece reads. A step is ``L + 1`` graph replays and ``L`` eager islands.
:class:`PiecewiseStep` holds that split; run directly (no capture) it computes exactly what
``Decoder.step`` computes, which the CPU tests check. A transformers model's step is one
forward, not stages: :class:`SegmentedStep` cuts it at its attention calls while it runs
(:meth:`launchgap.harness.hf.HFDecoder.piecewise_forward`), into the same ``calls + 1``
pieces and eager islands; :func:`piecewise_step` picks the split for a model.

**Lists** (:func:`capture_list`): sizes captured largest first into one shared memory pool,
as servers do. Measured per list and per size (see :func:`capture_list` for the policy):
growth of the caching allocator's reserved bytes, device memory used as the driver sees it
(``torch.cuda.mem_get_info``: includes graph executables, which live outside PyTorch's
allocator), capture seconds and kernel nodes per graph (read from the captured
``cudaGraph_t`` through the driver API, ``cuGraphGetNodes``; ``None`` where the torch build
cannot keep the graph or the driver library is not found).

Only torch and the standard library; every function here needs CUDA except the
direct paths of :class:`PiecewiseStep` and :class:`SegmentedStep` and :func:`count_kernel_nodes` with a
given library.
"""
from __future__ import annotations

import ctypes
import functools
import gc
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from .model import Decoder

MIB = float(1 << 20)
#: Driver API ``CU_GRAPH_NODE_TYPE_KERNEL``.
CU_GRAPH_NODE_TYPE_KERNEL = 0


# --------------------------------------------------------------------------------------------
# piecewise split


def replay_pieces(runners: list[Callable[[], Any]], islands: list[Callable[[], Any]]) -> None:
    """Graph pieces with the eager islands between them: ``runners[0]``, ``islands[0]``, ..., ``runners[-1]``."""
    for j, island in enumerate(islands):
        runners[j]()
        island()
    runners[-1]()


class PiecewiseStep:
    """One decode step of batch ``bs`` as ``layers + 1`` graph pieces with eager attention between.

    ``pieces[j]`` are plain callables over a shared state dict (see ``Decoder.prologue`` etc.);
    after :func:`capture_piecewise`, ``runners[j]`` replays piece ``j``'s graph instead.
    ``run()`` executes the step: runner 0, island 0, runner 1, ..., island L-1, runner L.
    The attention output goes into ``model``'s shared static buffer (one per model: sizes
    never run at the same time), which the next piece reads.
    """

    def __init__(self, model: Decoder, bs: int) -> None:
        model.check_batch(bs)
        self.model = model
        self.bs = bs
        self.state: dict[str, Any] = {}
        self.attn_out = attention_buffer(model)[:bs]
        n = model.cfg.layers
        # partials of bound methods make a reference cycle: CapturedList.release collects it.
        self.pieces: list[Callable[[], Any]] = [functools.partial(self._piece, j) for j in range(n + 1)]
        self.islands: list[Callable[[], Any]] = [functools.partial(self._island, i) for i in range(n)]
        self.runners: list[Callable[[], Any]] = list(self.pieces)

    def _piece(self, j: int) -> Any:
        m, s, bs = self.model, self.state, self.bs
        if j == 0:
            m.prologue(s, bs)
        else:
            m.post_attention(s, j - 1, self.attn_out)
        if j < m.cfg.layers:
            m.pre_attention(s, j, bs)
            return None
        return m.epilogue(s, bs)

    def _island(self, i: int) -> None:
        self.attn_out.copy_(self.model.attention(self.state, i, self.bs))

    def run(self) -> Any:
        """One step: graph pieces (or their direct calls) with eager attention between them."""
        replay_pieces(self.runners, self.islands)
        return self.model.tokens[: self.bs]

    def run_pieces_directly(self) -> None:
        """The graph part only, as direct calls (what a capture records): for kernel counts."""
        for piece in self.pieces:
            piece()


class SegmentedStep:
    """A step that is one forward (a transformers model), split at its attention calls as it runs.

    The model's ``piecewise_forward(bs, hook)`` hands each attention call to ``hook(fn, args,
    kwargs)``. Run directly (before capture, :meth:`run`), the hook computes the call and copies its
    output into a static buffer (:func:`segment_buffer`: one per model and output shape, shared by
    every size and layer, as :func:`attention_buffer`), which the rest of the forward reads. Captured
    (:func:`capture_piecewise`), the hook ends the current graph piece, records the call with its
    inputs (queries from the piece just captured, the KV cache's layer, mask, keyword tensors) as an
    island writing into that buffer, runs it once, and begins capturing the next piece; ``run()``
    is then ``runners[0]``, ``islands[0]``, ..., ``runners[-1]``, as :class:`PiecewiseStep`.
    """

    def __init__(self, model: Any, bs: int) -> None:
        model.check_batch(bs)
        self.model = model
        self.bs = bs
        self.outputs: list[Any] = []  # the buffer each attention call of a direct run returned, in call order
        self.islands: list[Callable[[], Any]] = []
        self.runners: list[Callable[[], Any]] = []

    def _direct(self, fn: Callable[..., Any], args: tuple, kwargs: dict[str, Any]) -> Any:
        out = fn(*args, **kwargs)
        buf = segment_buffer(self.model, out)
        buf.copy_(out)
        self.outputs.append(buf)
        return buf

    def run(self) -> Any:
        """One step: the captured pieces with eager attention between them, or the forward directly."""
        if not self.runners:
            self.outputs.clear()
            self.model.piecewise_forward(self.bs, self._direct)
            return self.model.tokens[: self.bs]
        replay_pieces(self.runners, self.islands)
        return self.model.tokens[: self.bs]

    def run_pieces_directly(self) -> None:
        """The graph part only (attention calls skipped, their last outputs read): for kernel counts.
        Needs one :meth:`run` before it."""
        outputs = iter(list(self.outputs))
        self.model.piecewise_forward(self.bs, lambda fn, args, kwargs: next(outputs))


def segment_buffer(model: Any, out: Any):  # -> torch.Tensor
    """The static ``[:bs]`` view, shaped as ``out`` (batch first), of the model's buffer for outputs of its shape."""
    import torch

    bufs = model.__dict__.setdefault("_segment_out", {})
    key = (tuple(out.shape[1:]), out.dtype)
    buf = bufs.get(key)
    if buf is None:
        buf = bufs[key] = torch.empty((model.max_batch_size, *out.shape[1:]), dtype=out.dtype, device=out.device)
    return buf[: out.shape[0]]


def piecewise_step(model: Any, bs: int) -> PiecewiseStep | SegmentedStep:
    """The piecewise split of ``model``'s step: stages (the built-in decoder) or a forward cut at attention."""
    return SegmentedStep(model, bs) if hasattr(model, "piecewise_forward") else PiecewiseStep(model, bs)


def piecewise_buffers(model: Any, bs: int) -> None:
    """Make the model's static attention-output buffers (outside any capture list's memory)."""
    if hasattr(model, "piecewise_forward"):
        SegmentedStep(model, bs).run()
    else:
        attention_buffer(model)


def attention_buffer(model: Decoder):  # -> torch.Tensor
    """The model's one static attention-output buffer (max batch x heads*head_dim), made on first use."""
    buf = getattr(model, "_attn_out", None)
    if buf is None:
        import torch

        cfg = model.cfg
        buf = torch.empty(model.max_batch_size, cfg.heads * cfg.head_dim, dtype=model.dtype, device=model.device)
        model._attn_out = buf
    return buf


# --------------------------------------------------------------------------------------------
# weak aliases


def weak_alias(torch: Any, t: Any) -> tuple[Any, bool]:
    """A tensor viewing ``t``'s memory without keeping its allocation alive, and whether it is one.

    vLLM keeps graph outputs as such weak references so that later captures in the shared
    pool may reuse the memory; doing the same keeps the piecewise pool comparable. Safe only
    for tensors that are consumed before any later-captured graph of the same step runs
    (see :func:`capture_piecewise`). Falls back to ``t`` itself (a strong reference) where
    this torch lacks the private constructor.
    """
    try:
        st = t.untyped_storage()
        alias_storage = torch._C._construct_storage_from_data_pointer(st.data_ptr(), t.device, st.nbytes())
        alias = torch.empty((0,), dtype=t.dtype, device=t.device)
        alias.set_(alias_storage, t.storage_offset(), t.size(), t.stride())
        return alias, True
    except (AttributeError, RuntimeError, TypeError):
        return t, False


# --------------------------------------------------------------------------------------------
# node counts through the driver API


_LIBCUDA: Any = None


def _libcuda() -> Any:
    """``libcuda.so.1`` with the two graph-introspection functions typed, or ``None``."""
    global _LIBCUDA
    if _LIBCUDA is None:
        try:
            lib = ctypes.CDLL("libcuda.so.1")
            lib.cuGraphGetNodes.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.POINTER(ctypes.c_size_t)]
            lib.cuGraphGetNodes.restype = ctypes.c_int
            lib.cuGraphNodeGetType.argtypes = [ctypes.c_void_p, ctypes.POINTER(ctypes.c_int)]
            lib.cuGraphNodeGetType.restype = ctypes.c_int
            _LIBCUDA = lib
        except (OSError, AttributeError):
            _LIBCUDA = False
    return _LIBCUDA or None


def count_kernel_nodes(raw_graph: int | None, lib: Any = None) -> int | None:
    """Kernel nodes of a ``cudaGraph_t`` (runtime and driver handles are the same), or ``None``.

    ``cuGraphGetNodes(graph, NULL, &n)`` gives the node count, a second call the nodes, and
    ``cuGraphNodeGetType`` each node's type. Any error returns ``None`` (the caller falls back).
    """
    lib = lib if lib is not None else _libcuda()
    if lib is None or not raw_graph:
        return None
    n = ctypes.c_size_t(0)
    if lib.cuGraphGetNodes(raw_graph, None, ctypes.byref(n)) != 0:
        return None
    if n.value == 0:
        return 0
    nodes = (ctypes.c_void_p * n.value)()
    if lib.cuGraphGetNodes(raw_graph, nodes, ctypes.byref(n)) != 0:
        return None
    kind = ctypes.c_int(-1)
    kernels = 0
    for node in nodes[: n.value]:
        if lib.cuGraphNodeGetType(node, ctypes.byref(kind)) != 0:
            return None
        kernels += int(kind.value == CU_GRAPH_NODE_TYPE_KERNEL)
    return kernels


# --------------------------------------------------------------------------------------------
# capture


@dataclass
class Captured:
    """One batch size captured: its graphs, how to run the step, capture seconds, kernel nodes.

    ``run()`` replays the step (FULL: one replay; PIECEWISE: pieces and eager islands).
    ``nodes``: kernel nodes over all of the size's graphs (``None`` when unknown).
    ``logits``: a weak view of the step's logits buffer (valid right after a replay).
    """

    size: int
    mode: str
    graphs: list[Any]
    run: Callable[[], Any]
    capture_s: float
    nodes: int | None
    logits: Any = None
    holder: Any = None
    aliased: bool = False


def new_graph(torch: Any, keep: bool) -> tuple[Any, bool]:
    """A ``CUDAGraph``, keeping its ``cudaGraph_t`` (for node counts) when asked and supported."""
    if keep:
        try:
            return torch.cuda.CUDAGraph(keep_graph=True), True
        except TypeError:  # torch before 2.8
            pass
    return torch.cuda.CUDAGraph(), False


def _capture_one(torch: Any, fn: Callable[[], Any], pool: Any, stream: Any,
                 keep: bool) -> tuple[Any, float, int | None]:
    """Capture ``fn`` on ``stream`` into ``pool``; wall seconds include instantiation."""
    g, kept = new_graph(torch, keep)
    t0 = time.perf_counter()
    with torch.cuda.graph(g, pool=pool, stream=stream):
        fn()
    return _finish(torch, (g, kept, t0))


def _segment_begin(torch: Any, pool: Any, keep: bool) -> tuple[Any, bool, float]:
    """Begin capturing a graph on the current stream into ``pool`` (one piece of a :class:`SegmentedStep`),
    after what ``torch.cuda.graph`` does first (synchronize, empty the cache), timed as in :func:`_capture_one`."""
    g, kept = new_graph(torch, keep)
    t0 = time.perf_counter()
    torch.cuda.synchronize()
    torch.cuda.empty_cache()
    g.capture_begin(pool=pool)
    return g, kept, t0


def _segment_end(torch: Any, begun: tuple[Any, bool, float]) -> tuple[Any, float, int | None]:
    """End the capture :func:`_segment_begin` began: as :func:`_capture_one` after its function."""
    begun[0].capture_end()
    return _finish(torch, begun)


def _finish(torch: Any, begun: tuple[Any, bool, float]) -> tuple[Any, float, int | None]:
    g, kept, t0 = begun
    if kept:
        g.instantiate()  # keep_graph=True defers instantiation; count it in capture time as servers pay it
    torch.cuda.synchronize()
    seconds = time.perf_counter() - t0
    nodes = None
    if kept:
        try:
            nodes = count_kernel_nodes(int(g.raw_cuda_graph()))
        except (RuntimeError, AttributeError, TypeError, ValueError):
            nodes = None
    return g, seconds, nodes


def warm_up(torch: Any, fn: Callable[[], Any], stream: Any, n: int) -> None:
    """Run ``fn`` ``n`` times on ``stream`` (lazy cuBLAS handles and workspaces are made outside capture)."""
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        for _ in range(n):
            fn()
    torch.cuda.current_stream().wait_stream(stream)
    torch.cuda.synchronize()


def capture_full(torch: Any, model: Decoder, bs: int, pool: Any, stream: Any, keep: bool = True) -> Captured:
    """Capture one FULL step of batch ``bs`` (warm it up first with :func:`warm_up`)."""
    model.last_logits = None
    g, seconds, nodes = _capture_one(torch, lambda: model.step(bs), pool, stream, keep)
    logits, _ = weak_alias(torch, model.last_logits)
    model.last_logits = None  # servers keep no strong reference to graph outputs either
    return Captured(bs, "full", [g], g.replay, seconds, nodes, logits=logits)


def capture_piecewise(torch: Any, step: PiecewiseStep, pool: Any, stream: Any, keep: bool = True) -> Captured:
    """Capture the pieces of ``step`` in order into ``pool`` (one per size when ``None``).

    Lifetimes, which decide what the shared pool may reuse: the residual ``x`` is replaced
    (freed) by the piece that consumes it, inside that piece's capture; ``q<i>``/``k<i>``/
    ``v<i>`` are read only by island ``i``, which runs right after piece ``i``, so they become
    weak aliases as soon as piece ``i`` is captured; ``cos``/``sin``/``mask`` are read by
    later pieces and every island, so they stay held until the last piece is captured, then
    the mask (still read by the islands) becomes a weak alias and the rest is dropped.
    """
    if pool is None:
        pool = torch.cuda.graph_pool_handle()
    if isinstance(step, SegmentedStep):
        return _capture_segmented(torch, step, pool, stream, keep)
    model, s = step.model, step.state
    s.clear()  # drop the warm-up's eager tensors: only capture outputs may live in the state
    model.last_logits = None
    graphs, seconds, nodes, aliased = [], 0.0, 0, True
    for j, piece in enumerate(step.pieces):
        g, dt, n = _capture_one(torch, piece, pool, stream, keep)
        graphs.append(g)
        step.runners[j] = g.replay
        seconds += dt
        nodes = None if nodes is None or n is None else nodes + n
        if j < model.cfg.layers:
            for key in (f"q{j}", f"k{j}", f"v{j}"):
                s[key], ok = weak_alias(torch, s[key])
                aliased &= ok
    s["mask"], ok = weak_alias(torch, s["mask"])
    aliased &= ok
    for key in ("x", "cos", "sin"):
        s.pop(key, None)
    logits, _ = weak_alias(torch, model.last_logits)
    model.last_logits = None
    return Captured(step.bs, "piecewise", graphs, step.run, seconds, nodes, logits=logits, holder=step,
                    aliased=aliased)


def _capture_segmented(torch: Any, step: SegmentedStep, pool: Any, stream: Any, keep: bool) -> Captured:
    """Capture a :class:`SegmentedStep`: one forward on ``stream`` whose attention calls end one graph and
    begin the next (each piece's seconds from its begin to its instantiation; the islands run between).

    Lifetimes, as :func:`capture_piecewise`: the forward frees what it no longer reads while the
    capture runs, so the shared pool reuses it as eager code would; an island's recorded inputs are
    weak aliases (the queries are read only by their island, right after their piece; the mask and
    keyword tensors outlive the forward only for the islands, and sizes never run at once)."""
    model = step.model
    model.last_logits = None
    step.runners, step.islands = [], []
    graphs, seconds, nodes, aliased = [], 0.0, 0, True
    outputs = iter(list(step.outputs))  # the buffers, made by the warm-up: none is allocated in the pool
    current: list[Any] = []

    def end() -> None:
        nonlocal seconds, nodes
        g, dt, n = _segment_end(torch, current.pop())
        graphs.append(g)
        step.runners.append(g.replay)
        seconds += dt
        nodes = None if nodes is None or n is None else nodes + n

    def weak(v: Any) -> Any:
        nonlocal aliased
        if not isinstance(v, torch.Tensor):
            return v
        alias, ok = weak_alias(torch, v)
        aliased &= ok
        return alias

    def cut(fn: Callable[..., Any], args: tuple, kwargs: dict[str, Any]) -> Any:
        end()
        out = next(outputs, None)
        if out is None:
            raise RuntimeError(f"the captured forward made more attention calls than its warm-up "
                               f"({len(step.outputs)})")
        island = functools.partial(_island, fn, tuple(weak(a) for a in args), {k: weak(v) for k, v in kwargs.items()},
                                   out)
        step.islands.append(island)
        island()  # eager, on the pieces' stream (nothing is captured here)
        current.append(_segment_begin(torch, pool, keep))
        return out

    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        current.append(_segment_begin(torch, pool, keep))
        try:
            model.piecewise_forward(step.bs, cut)
        except BaseException:
            if current:  # end the open capture (its error, if any, is raised in the context of the first)
                _segment_end(torch, current.pop())
            raise
        end()
    torch.cuda.current_stream().wait_stream(stream)
    logits, _ = weak_alias(torch, model.last_logits)
    model.last_logits = None
    return Captured(step.bs, "piecewise", graphs, step.run, seconds, nodes, logits=logits, holder=step,
                    aliased=aliased)


def _island(fn: Callable[..., Any], args: tuple, kwargs: dict[str, Any], out: Any) -> None:
    out.copy_(fn(*args, **kwargs))


def prepare(torch: Any, model: Decoder, bs: int, mode: str, stream: Any,
            warmup: int) -> PiecewiseStep | SegmentedStep | None:
    """Warm up batch ``bs`` for ``mode`` on ``stream``; the piecewise step to capture, if piecewise."""
    if mode == "full":
        warm_up(torch, lambda: model.step(bs), stream, warmup)
        model.last_logits = None
        return None
    step = piecewise_step(model, bs)
    warm_up(torch, step.run, stream, warmup)
    if isinstance(step, PiecewiseStep):
        step.state.clear()
    model.last_logits = None
    return step


def capture(torch: Any, model: Decoder, bs: int, mode: str, pool: Any, stream: Any, warmup: int = 2,
            keep: bool = True) -> Captured:
    """Warm up and capture one size (``pool`` ``None``: its own pool)."""
    step = prepare(torch, model, bs, mode, stream, warmup)
    if step is None:
        return capture_full(torch, model, bs, pool, stream, keep)
    return capture_piecewise(torch, step, pool, stream, keep)


def replay_error(torch: Any, model: Decoder, cap: Captured) -> float:
    """How far a replay's logits stray from the eager step's beyond the eager step's own
    run-to-run spread, relative to the largest eager logit (0: within it).

    The eager step runs twice from the same state (its floor: at batch 64 and 128 the H200's bf16
    kernels are not bitwise repeatable, 2-3.6% of the largest logit on transformers' models, as
    much as a replay differs: traces/h200-hf-2026-12-02/PROVENANCE.md), then the replay; the
    result is the replay's largest difference from the first eager step less that floor. A wrong
    capture or state (a stale input, a missed write) differs by tens of percent.

    The step reads the tokens, the position and the cache at positions up to the current one,
    and writes only the tokens, the position and the cache at the current position (before
    reading it), so restoring tokens and position is enough to run it again from one state.
    """
    tokens, pos = model.tokens.clone(), model.pos.clone()

    def restore() -> None:
        model.last_logits = None
        model.tokens.copy_(tokens)
        model.pos.copy_(pos)

    model.step(cap.size)
    want = model.last_logits.float()
    restore()
    model.step(cap.size)
    again = model.last_logits.float()
    restore()
    cap.run()
    got = cap.logits.float()
    scale = want.abs().max().clamp_min(1e-6)
    floor = float(((again - want).abs().max() / scale).item())
    return max(0.0, float(((got - want).abs().max() / scale).item()) - floor)


#: A replay whose logits differ from the eager step's by more than this (relative) is reported.
REPLAY_TOLERANCE = 0.02


# --------------------------------------------------------------------------------------------
# capture lists and their memory


def settle(torch: Any, collect: bool = False) -> None:
    """Finish queued work and hand cached, unused allocator blocks back to the driver."""
    if collect:
        gc.collect()
    torch.cuda.synchronize()
    torch.cuda.empty_cache()


def device_used(torch: Any) -> int:
    """Device memory in use as the driver sees it (``total - free`` from ``cudaMemGetInfo``)."""
    free, total = torch.cuda.mem_get_info()
    return int(total - free)


@dataclass
class CapturedList:
    """A capture list in one shared pool: the ``graph_memory`` entry and the live captures by size."""

    entry: dict[str, Any]
    captures: dict[int, Captured] = field(default_factory=dict)
    aliased: bool = True

    def release(self, torch: Any) -> None:
        self.captures.clear()
        settle(torch, collect=True)


def capture_list(torch: Any, model: Decoder, sizes: Sequence[int], mode: str, list_name: str, stream: Any,
                 warmup: int = 2, keep: bool = True,
                 progress: Callable[[str], None] | None = None) -> CapturedList:
    """Capture ``sizes`` largest first into one new shared pool and measure what it costs.

    Policy (so that only graph memory is counted): before the list, one step of the largest
    size warms up ``stream`` (its cuBLAS workspace is allocated outside the graphs), then
    ``gc.collect()``, ``synchronize()`` and ``empty_cache()`` give back every cached block
    and the baseline is read (``memory_reserved()``, ``mem_get_info()``). Per size: warm-up
    steps on ``stream``, ``synchronize()`` + ``empty_cache()`` (the warm-up's activations
    leave), read, capture (``torch.cuda.graph`` on ``stream`` into the shared pool, then
    instantiate), ``synchronize()`` + ``empty_cache()``, read again: the difference is the
    size's increment. The list's totals are the last reading minus the baseline;
    ``capture_s`` sums the captures (instantiation included, warm-ups excluded).
    """
    order = sorted(set(sizes), reverse=True)
    if mode == "piecewise":
        piecewise_buffers(model, order[0])  # one per model, shared by every size: not part of any list
    warm_up(torch, lambda: model.step(order[0]), stream, 1)
    model.last_logits = None
    settle(torch, collect=True)
    reserved0, used0 = torch.cuda.memory_reserved(), device_used(torch)
    pool = torch.cuda.graph_pool_handle()
    out = CapturedList(entry={})
    per_size: list[dict[str, Any]] = []
    for size in order:
        step = prepare(torch, model, size, mode, stream, warmup)
        settle(torch)
        r_before, u_before = torch.cuda.memory_reserved(), device_used(torch)
        cap = (capture_full(torch, model, size, pool, stream, keep) if step is None
               else capture_piecewise(torch, step, pool, stream, keep))
        settle(torch)
        r_after, u_after = torch.cuda.memory_reserved(), device_used(torch)
        out.captures[size] = cap
        out.aliased &= cap.aliased or mode == "full"
        per_size.append({"size": size, "reserved_mib": round((r_after - r_before) / MIB, 3),
                         "device_used_mib": round((u_after - u_before) / MIB, 3),
                         "capture_s": round(cap.capture_s, 4), "nodes": cap.nodes})
        if progress is not None:
            progress(f"{model.cfg.name} {mode} {list_name}: size {size} captured in {cap.capture_s:.3f} s")
    settle(torch)
    reserved1, used1 = torch.cuda.memory_reserved(), device_used(torch)
    out.entry = {
        "model": model.cfg.name, "mode": mode, "list_name": list_name, "capture_sizes": sorted(order),
        "graphs": sum(len(c.graphs) for c in out.captures.values()),
        "nodes_per_graph": {str(p["size"]): p["nodes"] for p in sorted(per_size, key=lambda p: p["size"])},
        "reserved_mib": round((reserved1 - reserved0) / MIB, 3),
        "device_used_mib": round((used1 - used0) / MIB, 3),
        "capture_s": round(sum(p["capture_s"] for p in per_size), 4),
        "per_size": per_size,
    }
    return out


def fill_missing_nodes(torch: Any, model: Decoder, entry: dict[str, Any], mode: str,
                       count: Callable[[Callable[[], Any]], int], cache: dict[tuple[str, int], int],
                       max_sizes: int = 40) -> bool:
    """Fallback node counts: kernels of one direct run of what the size's graphs capture.

    ``count(fn)`` counts the kernels ``fn`` launches (a CUDA-only profile). Done for lists of
    at most ``max_sizes`` sizes (each count is a profile); results are cached per (mode, size).
    Run after the list's memory was read. Returns whether any count was filled in.
    """
    missing = [p for p in entry["per_size"] if p["nodes"] is None]
    if not missing or len(entry["per_size"]) > max_sizes:
        return False
    for p in missing:
        key = (mode, p["size"])
        if key not in cache:
            if mode == "full":
                size = p["size"]
                cache[key] = count(lambda size=size: model.step(size))
            else:
                step = piecewise_step(model, p["size"])
                step.run()  # fill the state the pieces read
                cache[key] = count(step.run_pieces_directly)
        p["nodes"] = cache[key]
        entry["nodes_per_graph"][str(p["size"])] = cache[key]
    model.last_logits = None
    return True
