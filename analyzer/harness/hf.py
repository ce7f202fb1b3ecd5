"""The user's own model: a Hugging Face ``config.json`` built by transformers with random weights.

``launchgap record --hf-config PATH`` (a ``config.json``, or a folder holding one) times the
decode step of the causal LM that transformers builds from that config: the model's own
attention variant, MLP, norms, vocabulary and tied embeddings, with random weights (bf16 on
CUDA, float32 on the CPU) initialised on the device, and nothing downloaded (the config is
read from disk; no tokenizer, no weights).

**The decode step** (:class:`HFDecoder`): the model's ``forward`` at one token per row over a
transformers ``StaticCache`` (``max_cache_len = --context-len``), then the greedy next token
written back into the token buffer on the device, as the built-in decoder does. To make every
batch size run against one cache, as a server's block table does, the cache is created once
at the largest batch size (its layers filled by one forward) and each size's step swaps views
``[:bs]`` of those buffers into the cache's layers (views of one storage share its address,
so graphs captured at every size write the same memory). Each cache layer's position counter
(``cumulative_length``, which transformers advances on the device in every update) becomes a
view into one position tensor, and one masked fill after the forward wraps it back to
``--start-pos`` before it leaves the cache: any number of steps or replays stays in bounds.
Sliding-window layers also keep a Python count of seen tokens, which a captured graph would
freeze: it is set to ``--start-pos`` before every step (so their branch is the static one) and
their sequence length reads the device counter instead (exact, because a window shorter than
``--context-len``, which would roll the cache with host-side state, is refused).

What this relies on in transformers: ``StaticCache(config=..., max_cache_len=...)`` whose
layers hold ``keys``, ``values`` and ``cumulative_length`` after their first update (5.x; checked
here, with a one-line error naming the version otherwise). transformers is imported only here,
inside the functions that need it: the rest of the harness runs with torch alone.

**Piecewise** (:meth:`HFDecoder.piecewise_forward`, captured by
:class:`launchgap.harness.graphs.SegmentedStep`): the step's forward runs with the model's entry of
transformers' ``AttentionInterface`` (``"sdpa"``, or :data:`EAGER_ATTENTION`) replaced, for that forward only, by a
router that hands each attention call (the attention module's function call after its KV-cache update:
query, the cache layer's keys and values, mask and keyword arguments) to a hook. The capture's
hook ends the current graph piece at each call, so a step is ``calls + 1`` pieces (``layers +
1`` for a decoder with one attention per layer) with the attention function run eagerly
between them; the KV-cache write (``StaticCache.update``, inside the attention module before
the function) lands in the graph piece before it, where vLLM's piecewise mode runs it eagerly
with the attention (two copy kernels per layer on the graph side of the line).

**Eager attention** (``record --attention-backend eager``): the model's own ``eager_attention_forward`` (matmul,
softmax in float32, matmul: transformers' ``attn_implementation="eager"``), registered in ``AttentionInterface`` as
:data:`EAGER_ATTENTION` with a mask function of its own: transformers' ``eager_mask`` makes its 0 as
``torch.tensor(0.0, device=...)``, a host-to-device copy that CUDA graph capture refuses (transformers 5.17), where
this one fills on the device. Called through the interface, it is also where piecewise mode cuts the step.

**Capture.** Whether the forward captures as a CUDA graph is the model's business: an
architecture whose step asks the host for a value (an MoE layer that loops over the experts
it hit, ``.item()``, data-dependent shapes) cannot be captured; the sweep then records the
reason in one line and keeps its eager timings (:func:`capture_failure_reason`).
"""
from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from ..dims import ModelDims, moe_routing, text_config
from ..errors import InputError
from . import import_torch

#: Largest config.json read (real ones are a few KiB).
MAX_CONFIG_BYTES = 1 << 20
TRANSFORMERS_MISSING = "--hf-config needs transformers: pip install 'launchgap[record]' (or pip install transformers)"
#: The transformers attention function the piecewise router stands in for (the one the model is built with).
ATTENTION_IMPLEMENTATION = "sdpa"
#: The name eager attention is registered under in transformers' AttentionInterface (module docstring).
EAGER_ATTENTION = "launchgap_eager"


def _model_eager_attention(module: Any, *args: Any, **kwargs: Any) -> Any:
    """The attention module's own model file's ``eager_attention_forward`` (softcapping, sinks and the like kept)."""
    import sys

    fn = getattr(sys.modules.get(type(module).__module__), "eager_attention_forward", None)
    if fn is None:
        raise InputError(f"eager attention: {type(module).__module__} has no eager_attention_forward")
    return fn(module, *args, **kwargs)


def _graph_safe_eager_mask(*args: Any, **kwargs: Any) -> Any:
    """transformers' ``eager_mask`` (its SDPA boolean mask as 0 / the dtype's minimum) made on the device alone."""
    torch = import_torch()
    from transformers import masking_utils

    dtype = kwargs.pop("dtype", torch.float32)
    kwargs.pop("allow_is_causal_skip", None)
    mask = masking_utils.sdpa_mask(*args, allow_is_causal_skip=False, **kwargs)
    if mask is None:
        return None
    return torch.zeros(mask.shape, dtype=dtype, device=mask.device).masked_fill_(~mask, torch.finfo(dtype).min)


def register_eager_attention() -> None:
    """:data:`EAGER_ATTENTION` in transformers' attention and mask interfaces (idempotent)."""
    transformers = import_transformers()
    from transformers.masking_utils import AttentionMaskInterface

    transformers.AttentionInterface.register(EAGER_ATTENTION, _model_eager_attention)
    AttentionMaskInterface.register(EAGER_ATTENTION, _graph_safe_eager_mask)


def import_transformers():  # -> module transformers
    try:
        import transformers
    except ImportError:
        raise InputError(TRANSFORMERS_MISSING) from None
    return transformers


@dataclass(frozen=True, kw_only=True)
class HFModelSpec(ModelDims):
    """A transformers config read from disk: its dimensions, hash and architecture (no transformers needed).

    The dimensions are a :class:`~launchgap.dims.ModelDims` read by :meth:`ModelDims.from_mapping`
    (the text model's: ``text_config`` when the config nests one; ``mlp`` is ``intermediate_size``,
    for experts one expert's width; ``dtype_bytes`` 2, as the harness builds the model in bf16).
    ``name`` labels the rows (``--name``, else the file's stem, or its folder's name for a file
    named ``config.json``); ``sha256`` is the hash of the config file's bytes; ``architecture`` its
    first ``architectures`` entry (``None`` when the config names none; ``AutoModelForCausalLM``
    then picks the class from ``model_type``).
    """

    path: str
    config: dict[str, Any] = field(repr=False, compare=False, hash=False)
    sha256: str
    architecture: str | None
    model_type: str
    sliding_window: int | None = None
    experts: int | None = None
    experts_per_token: int | None = None
    tied_embeddings: bool = False

    def validate(self) -> None:  # dimensions were checked when read
        return None

    def with_name(self, name: str) -> HFModelSpec:
        from dataclasses import replace

        return replace(self, name=name)

    def param_count(self) -> int | None:
        """Not known before transformers builds the model (see :meth:`HFDecoder.param_count`)."""
        return None

    def to_dict(self) -> dict[str, Any]:
        """The ``models`` entry of timings.json: dimensions (``ModelDims`` layout) and where they came from."""
        return {"layers": self.layers, "hidden": self.hidden, "heads": self.heads, "kv_heads": self.kv_heads,
                "mlp": self.mlp, "vocab": self.vocab, "head_dim": self.head_dim,
                "sliding_window": self.sliding_window, "experts": self.experts,
                "experts_per_token": self.experts_per_token, "tied_embeddings": self.tied_embeddings,
                "model_source": {"kind": "hf-config", "path": self.path, "sha256": self.sha256,
                                 "architecture": self.architecture, "model_type": self.model_type}}


def read_hf_config(path: str | Path, name: str | None = None) -> HFModelSpec:
    """Read a ``config.json`` (or the one in a folder) into an :class:`HFModelSpec`; one-line errors."""
    p = Path(path)
    if p.is_dir():
        p = p / "config.json"
    where = str(p)
    try:
        size = p.stat().st_size
        if size > MAX_CONFIG_BYTES:
            raise InputError(f"config is {size:,} bytes, over the {MAX_CONFIG_BYTES >> 10} KiB cap", where)
        data = p.read_bytes()
    except FileNotFoundError:
        raise InputError("no such file (give a config.json or a folder holding one)", where) from None
    except OSError as exc:
        raise InputError(f"cannot read ({exc.strerror or exc})", where) from None
    try:
        doc = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise InputError(f"not a JSON config ({getattr(exc, 'msg', 'not UTF-8')})", where) from None
    if not isinstance(doc, dict):
        raise InputError("not a model config: expected a JSON object", where)
    model_type = doc.get("model_type")
    if not isinstance(model_type, str) or not model_type:
        raise InputError("config has no model_type (a transformers config.json names one)", where)
    arch = doc.get("architectures")
    architecture = arch[0] if isinstance(arch, list) and arch and isinstance(arch[0], str) else None
    label = name or (p.stem if p.name != "config.json" else p.parent.name) or model_type
    try:
        dims = ModelDims.from_mapping(doc, label)
    except InputError as exc:
        raise InputError(exc.message, where) from None
    dim_values = {f.name: getattr(dims, f.name) for f in fields(ModelDims)}
    dim_values["dtype_bytes"] = 2  # built in bf16 whatever the config's torch_dtype
    text = text_config(doc)
    sliding = text.get("sliding_window") if text.get("use_sliding_window", True) is not False else None
    experts = text.get("num_local_experts") or text.get("num_experts") or text.get("n_routed_experts")
    routing = moe_routing(doc)  # (experts, experts per token): what the cost model scales the expert kernels with
    return HFModelSpec(
        **dim_values,
        path=p.as_posix(), config=doc, sha256=hashlib.sha256(data).hexdigest(),
        architecture=architecture, model_type=model_type,
        sliding_window=sliding if isinstance(sliding, int) and not isinstance(sliding, bool) else None,
        experts=experts if isinstance(experts, int) and not isinstance(experts, bool) else None,
        experts_per_token=routing[1] if routing else None,
        tied_embeddings=bool(doc.get("tie_word_embeddings", text.get("tie_word_embeddings", False))),
    )


def build_hf_model(spec: HFModelSpec, device: Any, dtype: Any, seed: int,
                   attn_implementation: str = ATTENTION_IMPLEMENTATION) -> Any:
    """transformers' causal LM for ``spec.config`` with random weights made on ``device`` (no download), its
    attention ``attn_implementation`` (``"sdpa"``, or :data:`EAGER_ATTENTION`: matmul, softmax, matmul)."""
    torch = import_torch()
    transformers = import_transformers()
    if attn_implementation == EAGER_ATTENTION:
        register_eager_attention()
    cfg_dict = {k: v for k, v in spec.config.items() if k not in ("transformers_version", "_name_or_path")}
    try:
        config = transformers.AutoConfig.for_model(spec.model_type, **{k: v for k, v in cfg_dict.items()
                                                                          if k != "model_type"})
    except (ValueError, KeyError) as exc:
        raise InputError(f"transformers {transformers.__version__} cannot read model_type "
                         f"{spec.model_type!r} ({str(exc).splitlines()[0].split('. ')[0][:160]})", spec.path) from None
    torch.manual_seed(seed)
    try:
        with torch.device(device):
            model = transformers.AutoModelForCausalLM.from_config(config, dtype=dtype,
                                                                  attn_implementation=attn_implementation)
    except (ValueError, TypeError, KeyError, NotImplementedError) as exc:
        raise InputError(f"transformers {transformers.__version__} cannot build a causal LM from this config: "
                         f"{str(exc).splitlines()[0][:200]}", spec.path) from None
    model.requires_grad_(False)
    _randomise_zero_matrices(model, float(getattr(config, "initializer_range", 0.02) or 0.02), torch)
    return model.eval()


def _randomise_zero_matrices(model: Any, std: float, torch: Any) -> None:
    """Draw every weight matrix that ``from_config`` left all zeros from ``N(0, std)``.

    Some architectures zero-initialise their router (ERNIE-4.5-MoE's ``mlp.gate``): every token would then score the
    experts alike and go to the same top-k at any batch size, so the expert kernels would read k experts' weights where
    a trained model's tokens spread over all of them. Timings of such a step say nothing of the real model."""
    for p in model.parameters():
        if p.dim() == 2 and p.is_floating_point() and not bool(p.detach().any()):
            with torch.no_grad():
                p.normal_(0.0, std)


class HFDecoder:
    """A transformers causal LM with a static KV cache, stepped one token per row (module docstring).

    The same interface as :class:`launchgap.harness.model.Decoder` where the harness uses it:
    ``step(bs)``, ``tokens``, ``pos`` (here one position per cache layer), ``last_logits``,
    ``cfg`` (the :class:`HFModelSpec`), ``weight_bytes()``, ``kv_cache_bytes()``,
    ``param_count()``, ``max_batch_size``. ``compile=True`` runs the forward through
    ``torch.compile`` (default mode, batch dimension dynamic: see :mod:`launchgap.harness.compiled`).
    """

    @property
    def supports_piecewise(self) -> bool:
        """Piecewise pieces are cut from the uncompiled forward: not with ``--compile``."""
        return not self.compiled

    def __init__(self, spec: HFModelSpec, max_batch_size: int, context_len: int = 512, start_pos: int = 128,
                 device: str = "cuda", seed: int = 0, compile: bool = False, eager_attention: bool = False) -> None:
        torch = import_torch()
        transformers = import_transformers()
        if max_batch_size <= 0:
            raise InputError(f"max batch size must be positive, got {max_batch_size}")
        if not 0 <= start_pos < context_len:
            raise InputError(f"start position {start_pos} must lie in [0, context length {context_len})")
        self.cfg = spec
        self.max_batch_size = max_batch_size
        self.context_len = context_len
        self.start_pos = start_pos
        self.device = torch.device(device)
        self.dtype = torch.bfloat16 if self.device.type == "cuda" else torch.float32
        #: the AttentionInterface entry the model calls (and piecewise mode's router stands in for)
        self.attn_implementation = EAGER_ATTENTION if eager_attention else ATTENTION_IMPLEMENTATION
        self.model = build_hf_model(spec, self.device, self.dtype, seed, self.attn_implementation)
        self.transformers_version = transformers.__version__
        gen = torch.Generator(device=self.device)
        gen.manual_seed(seed)
        vocab = int(self.model.config.get_text_config().vocab_size)
        self.tokens = torch.randint(0, vocab, (max_batch_size,), device=self.device, generator=gen)
        self._token_col = self.tokens.view(max_batch_size, 1)
        self.cache = self._make_cache(transformers, gen)
        self.last_logits = None
        self._views: dict[int, tuple[Any, list[tuple[Any, Any]]]] = {}
        self._sliding = [layer for layer in self.cache.layers if hasattr(layer, "cumulative_length_int")]
        for layer in self._sliding:
            # Its length is a Python int (host state a graph would freeze): read the device counter instead,
            # exact here because the window covers the whole cache.
            layer.get_seq_length = (lambda layer=layer: layer.cumulative_length)
        self._forward = self.model
        self.compiled = False
        if compile:
            from .compiled import compile_forward

            self._forward = compile_forward(torch, self.model)
            self.compiled = True

    def _make_cache(self, transformers: Any, gen: Any) -> Any:
        """One StaticCache at the largest batch: layers initialised by one forward, then filled with random
        values (stand-ins for a prompt) and their position counters made views of :attr:`pos`."""
        torch = import_torch()
        cache = transformers.StaticCache(config=self.model.config, max_cache_len=self.context_len)
        short = [getattr(layer, "max_cache_len", self.context_len) for layer in getattr(cache, "layers", [])]
        if short and min(short) < self.context_len:
            raise InputError(f"a sliding window of {min(short)} is shorter than --context-len {self.context_len}: the "
                             "static cache would roll with host-side state; record with --context-len <= "
                             f"{min(short)}", self.cfg.path)
        with torch.no_grad():
            self.model(input_ids=self._token_col, past_key_values=cache, use_cache=True)
        layers = list(getattr(cache, "layers", []))
        need = ("keys", "values", "cumulative_length")
        if not layers or not all(all(hasattr(layer, k) for k in need) for layer in layers):
            raise InputError(f"transformers {transformers.__version__}: StaticCache layers lack "
                             f"{'/'.join(need)}; the harness drives transformers 5.x's StaticCache", self.cfg.path)
        for layer in layers:
            if layer.keys.shape[0] != self.max_batch_size or layer.keys.shape[2] < self.context_len:
                raise InputError(f"transformers {transformers.__version__}: a cache layer holds "
                                 f"{tuple(layer.keys.shape)}, expected batch {self.max_batch_size} and "
                                 f"{self.context_len} positions", self.cfg.path)
            # Random, not zeros: positions before start_pos stand for a real prompt.
            layer.keys.normal_(0.0, 1.0, generator=gen)
            layer.values.normal_(0.0, 1.0, generator=gen)
        self.pos = torch.full((len(layers),), self.start_pos, dtype=torch.long, device=self.device)
        for i, layer in enumerate(layers):
            layer.cumulative_length = self.pos[i]
        self._full = [(layer.keys, layer.values) for layer in layers]
        return cache

    def check_batch(self, bs: int) -> None:
        if not 0 < bs <= self.max_batch_size:
            raise InputError(f"batch size {bs} outside [1, {self.max_batch_size}] of this model instance")

    def _views_of(self, bs: int) -> tuple[Any, list[tuple[Any, Any]]]:
        v = self._views.get(bs)
        if v is None:
            v = (self._token_col[:bs], [(k[:bs], val[:bs]) for k, val in self._full])
            if self.compiled and bs > 1:
                from .compiled import mark_batch_dynamic

                mark_batch_dynamic(v[0], *(t for kv in v[1] for t in kv))
            self._views[bs] = v
        return v

    def step(self, bs: int):
        """One decode step for rows ``[0, bs)``: forward, greedy token written back, positions wrapped."""
        self.check_batch(bs)
        ids, kv = self._views_of(bs)
        for layer, (k, v) in zip(self.cache.layers, kv):
            layer.keys, layer.values = k, v
        for layer in self._sliding:
            layer.cumulative_length_int = self.start_pos
        out = self._forward(input_ids=ids, past_key_values=self.cache, use_cache=True)
        logits = out.logits[:, -1]
        self.last_logits = logits
        self.tokens[:bs].copy_(logits.argmax(dim=-1))
        self.pos.masked_fill_(self.pos >= self.context_len, self.start_pos)
        return self.tokens[:bs]

    def piecewise_forward(self, bs: int, hook: Callable[[Callable[..., Any], tuple, dict[str, Any]], Any]):
        """:meth:`step` (uncompiled) with every attention call handed to ``hook(fn, args, kwargs)``, whose return
        is the call's output (``fn(*args, **kwargs)`` is the attention output tensor); one-line error when the
        model made no attention call through transformers' ``AttentionInterface`` (nothing to split at)."""
        transformers = import_transformers()
        registry = transformers.AttentionInterface
        original = registry._global_mapping[self.attn_implementation]
        calls = [0]

        def attend(*args: Any, **kwargs: Any) -> Any:
            return original(*args, **kwargs)[0]

        def router(module: Any, query: Any, key: Any, value: Any, attention_mask: Any, **kwargs: Any) -> Any:
            calls[0] += 1
            return hook(attend, (module, query, key, value, attention_mask), kwargs), None  # no attention weights

        forward, self._forward = self._forward, self.model
        registry.register(self.attn_implementation, router)
        try:
            out = self.step(bs)
        finally:
            registry.register(self.attn_implementation, original)
            self._forward = forward
        if not calls[0]:
            raise InputError(f"piecewise: {type(self.model).__name__} made no attention call through transformers' "
                             f"AttentionInterface ({self.attn_implementation!r}): no place to split the step",
                             self.cfg.path)
        return out

    def weight_bytes(self) -> int:
        """Bytes of the model's parameters (tied embeddings counted once), KV cache excluded."""
        return sum(p.numel() * p.element_size() for p in self.model.parameters())

    def kv_cache_bytes(self) -> int:
        return sum(k.nbytes + v.nbytes for k, v in self._full)

    def param_count(self) -> int:
        return sum(p.numel() for p in self.model.parameters())

    def describe(self) -> dict[str, Any]:
        """What was built, for the timings' ``models`` entry (added to :meth:`HFModelSpec.to_dict`)."""
        cfg = self.model.config
        return {"params": self.param_count(), "class": type(self.model).__name__,
                "transformers": self.transformers_version,
                "attn_implementation": getattr(cfg, "_attn_implementation", None),
                "experts_implementation": getattr(cfg, "_experts_implementation", None)
                if self.cfg.experts else None}


def capture_failure_reason(exc: BaseException) -> str:
    """One line saying why a step could not be captured as a CUDA graph."""
    while exc.__context__ is not None and exc.__context__ is not exc:  # the first error, not capture_end's
        exc = exc.__context__
    text = " ".join(str(exc).split())
    lowered = text.lower()
    if "capturing" in lowered or "capture" in lowered and "not permitted" in lowered:
        why = "the step asks the host for a value while capturing (a CPU sync: .item(), nonzero, data-dependent shapes)"
    elif "graph break" in lowered or "dynamic shape" in lowered or "data-dependent" in lowered:
        why = "the step has data-dependent shapes"
    else:
        why = "capture failed"
    detail = text[:200] + ("..." if len(text) > 200 else "")
    return f"{why}: {type(exc).__name__}: {detail}" if detail else f"{why}: {type(exc).__name__}"


__all__ = ["ATTENTION_IMPLEMENTATION", "EAGER_ATTENTION", "HFDecoder", "HFModelSpec", "TRANSFORMERS_MISSING",
           "build_hf_model", "capture_failure_reason", "import_transformers", "read_hf_config"]
