"""A Llama-style decoder for one decode step, graph-capturable by construction.

One step takes the current token of each sequence (``batch_size`` of them), runs every layer
(RMSNorm, fused QKV projection, RoPE, attention over a static KV cache with a boolean length
mask, output projection, RMSNorm, fused gate/up projection, SwiGLU, down projection), picks
the greedy next token and writes it back into the token buffer on the device, so the next
step reads it without the host.

Why it captures: every tensor the step reads or writes lives in a buffer allocated once
(weights, KV cache, token buffer, position), shapes depend only on the batch size, and no op
asks the host for a value (no ``.item()``, no data-dependent shapes). The position advances
on the device and wraps back to ``start_pos`` before it leaves the cache, so any number of
steps or graph replays stays in bounds; attention always runs over the whole static cache
(masked), so its cost does not depend on the position.

Weights are random (bf16 on CUDA, float32 on the CPU): per-kernel work and launch counts
are what matter for launch gaps, not the values. The code is plain tensor code written the
way eager model code usually is (an HF-style RMSNorm of six ops, RoPE from slices), so the
eager step has a realistic number of small kernels (about 46 per layer).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Any

from ..dims import ModelDims
from ..errors import InputError
from . import import_torch


@dataclass(frozen=True)
class ModelConfig(ModelDims):
    """The built-in decoder's dimensions (a :class:`~launchgap.dims.ModelDims`; ``head_dim`` is always
    ``hidden // heads``) and its RoPE base and RMSNorm epsilon."""

    head_dim: int | None = field(default=None, init=False)  # derived from hidden and heads, never given
    rope_theta: float = 10000.0
    norm_eps: float = 1e-5
    #: The preset it came from (``model_source`` in timings.json); not a dimension.
    preset: str | None = field(default=None, compare=False)

    def validate(self) -> None:
        """Raise :class:`InputError` for dimensions the decoder cannot run (positive ones were checked when made)."""
        if self.hidden % self.heads:
            raise InputError(f"model {self.name!r}: hidden {self.hidden} is not a multiple of heads {self.heads}")
        if self.heads % self.kv_heads:
            raise InputError(f"model {self.name!r}: heads {self.heads} is not a multiple of kv_heads {self.kv_heads}")
        if self.head_dim % 2:
            raise InputError(f"model {self.name!r}: head_dim {self.head_dim} must be even for RoPE")

    def param_count(self) -> int:
        """Number of weights (embedding and LM head counted separately, norms included)."""
        d, hd = self.hidden, self.head_dim
        qkv = d * (self.heads + 2 * self.kv_heads) * hd
        per_layer = qkv + self.heads * hd * d + 2 * d * self.mlp + self.mlp * d + 2 * d
        return self.layers * per_layer + 2 * self.vocab * d + d

    def to_dict(self) -> dict[str, Any]:
        """Dimensions, ``head_dim`` and ``params`` (what a rerun must match; the preset is not one)."""
        keys = ("name", "layers", "hidden", "heads", "kv_heads", "mlp", "vocab", "rope_theta", "norm_eps", "head_dim")
        return {**{k: getattr(self, k) for k in keys}, "params": self.param_count()}


#: Presets. ``1b`` matches traces/h200-1b; ``3b`` has Llama-3.2-3B's dims (a held-out size for
#: the graph-memory model); ``8b`` has Llama-3-8B's dims;
#: ``70b-slice`` has Llama-3-70B's per-layer dims with 8 of its 80 layers (per-kernel work is
#: what decides launch gaps; 8 rather than 2-4 layers keeps the 128k-vocab LM head, which a
#: full model pays once, from dominating the step).
PRESETS: dict[str, ModelConfig] = {
    "tiny": ModelConfig("tiny", layers=4, hidden=256, heads=4, kv_heads=2, mlp=768, vocab=8192),
    "1b": ModelConfig("1b", layers=16, hidden=2048, heads=32, kv_heads=8, mlp=8192, vocab=32000),
    "8b": ModelConfig("8b", layers=32, hidden=4096, heads=32, kv_heads=8, mlp=14336, vocab=128256,
                      rope_theta=500000.0),
    "3b": ModelConfig("3b", layers=28, hidden=3072, heads=24, kv_heads=8, mlp=8192, vocab=128256,
                      rope_theta=500000.0),
    "70b-slice": ModelConfig("70b-slice", layers=8, hidden=8192, heads=64, kv_heads=8, mlp=28672,
                             vocab=128256, rope_theta=500000.0),
}

_OVERRIDABLE = ("layers", "hidden", "heads", "kv_heads", "mlp", "vocab")


def resolve_config(preset: str, name: str | None = None, **overrides: int | None) -> ModelConfig:
    """A preset with some dimensions replaced (``None`` keeps the preset's value).

    The result is named ``name`` if given, else the preset's name, suffixed with the changed
    dimensions (``1b-layers4``) so rows of different shapes never share a label.
    """
    if preset not in PRESETS:
        raise InputError(f"unknown model preset {preset!r}; choose from {', '.join(PRESETS)}")
    base = PRESETS[preset]
    changed = {k: int(v) for k, v in overrides.items() if v is not None and k in _OVERRIDABLE
               and int(v) != getattr(base, k)}
    unknown = set(overrides) - set(_OVERRIDABLE)
    if unknown:
        raise InputError(f"unknown model dimension(s): {', '.join(sorted(unknown))}")
    label = name or (base.name + "".join(f"-{k.replace('_', '')}{v}" for k, v in changed.items()))
    cfg = replace(base, name=label, preset=preset, **changed)
    cfg.validate()
    return cfg


def _rms_norm(x, weight, eps: float):
    # HF LlamaRMSNorm: compute in float32, scale, cast back (six kernels in eager mode).
    import torch

    xf = x.float()
    var = xf.pow(2).mean(-1, keepdim=True)
    xf = xf * torch.rsqrt(var + eps)
    return weight * xf.to(x.dtype)


def _rope(x, cos, sin):
    import torch

    half = x.shape[-1] // 2
    x1, x2 = x[..., :half], x[..., half:]
    return torch.cat((x1 * cos - x2 * sin, x2 * cos + x1 * sin), dim=-1)


class Decoder:
    """Weights, KV cache and the step's static buffers for up to ``max_batch_size`` sequences.

    ``step(bs)`` runs one decode step for the first ``bs`` sequences, in place. Call it eagerly
    or inside ``torch.cuda.graph`` and replay the graph: both run the same kernels.
    """

    @property
    def supports_piecewise(self) -> bool:
        """Piecewise pieces run the stages directly: not with a compiled step."""
        return not self.compiled

    def __init__(self, cfg: ModelConfig, max_batch_size: int, context_len: int = 512, start_pos: int = 128,
                 device: str = "cuda", seed: int = 0, eager_attention: bool = False) -> None:
        torch = import_torch()
        cfg.validate()
        if max_batch_size <= 0:
            raise InputError(f"max batch size must be positive, got {max_batch_size}")
        if not 0 <= start_pos < context_len:
            raise InputError(f"start position {start_pos} must lie in [0, context length {context_len})")
        self.cfg = cfg
        self.eager_attention = eager_attention
        self.max_batch_size = max_batch_size
        self.context_len = context_len
        self.start_pos = start_pos
        self.device = torch.device(device)
        self.dtype = torch.bfloat16 if self.device.type == "cuda" else torch.float32
        gen = torch.Generator(device=self.device)
        gen.manual_seed(seed)
        d, hd, h, kvh = cfg.hidden, cfg.head_dim, cfg.heads, cfg.kv_heads

        def w(*shape: int, std: float):
            return torch.empty(shape, dtype=self.dtype, device=self.device).normal_(0.0, std, generator=gen)

        def ones(n: int):
            return torch.ones(n, dtype=self.dtype, device=self.device)

        # nn.Linear layout (out, in); std 1/sqrt(fan_in) keeps activations near unit scale.
        self.embed = w(cfg.vocab, d, std=1.0)
        self.layers: list[dict[str, Any]] = []
        for _ in range(cfg.layers):
            self.layers.append({
                "attn_norm": ones(d),
                "wqkv": w((h + 2 * kvh) * hd, d, std=d ** -0.5),
                "wo": w(d, h * hd, std=(h * hd) ** -0.5),
                "mlp_norm": ones(d),
                "wgu": w(2 * cfg.mlp, d, std=d ** -0.5),
                "wdown": w(d, cfg.mlp, std=cfg.mlp ** -0.5),
                # Random, not zeros: positions before start_pos stand for a real prompt.
                "k_cache": w(max_batch_size, kvh, context_len, hd, std=1.0),
                "v_cache": w(max_batch_size, kvh, context_len, hd, std=1.0),
            })
        self.final_norm = ones(d)
        self.lm_head = w(cfg.vocab, d, std=d ** -0.5)
        inv_freq = 1.0 / (cfg.rope_theta ** (torch.arange(0, hd, 2, dtype=torch.float64) / hd))
        angles = torch.outer(torch.arange(context_len, dtype=torch.float64), inv_freq)
        self.cos = angles.cos().to(self.dtype).to(self.device)
        self.sin = angles.sin().to(self.dtype).to(self.device)
        self.positions = torch.arange(context_len, device=self.device)
        self.tokens = torch.randint(0, cfg.vocab, (max_batch_size,), device=self.device, generator=gen)
        self.pos = torch.full((1,), start_pos, dtype=torch.long, device=self.device)
        self.scale = 1.0 / math.sqrt(hd)
        self.last_logits = None
        self._token_views: dict[int, Any] = {}
        self._forward = self._run
        self.compiled = False

    def weight_bytes(self) -> int:
        """Bytes of weights (embedding, layers, norms, LM head), KV cache excluded."""
        total = self.embed.numel() + self.lm_head.numel() + self.final_norm.numel()
        for layer in self.layers:
            total += sum(t.numel() for k, t in layer.items() if not k.endswith("_cache"))
        return total * self.embed.element_size()

    def kv_cache_bytes(self) -> int:
        return sum(layer["k_cache"].nbytes + layer["v_cache"].nbytes for layer in self.layers)

    # The step in stages. ``step`` runs them in order; :mod:`launchgap.harness.graphs` captures
    # the stages between attentions as separate graphs (piecewise mode). A stage reads and
    # writes a state dict ``s``: ``x`` (residual stream), ``cos``/``sin``/``mask`` (from the
    # device-side position), and per layer ``q<i>``/``k<i>``/``v<i>`` (attention inputs).

    def check_batch(self, bs: int) -> None:
        if not 0 < bs <= self.max_batch_size:
            raise InputError(f"batch size {bs} outside [1, {self.max_batch_size}] of this model instance")

    def prologue(self, s: dict[str, Any], bs: int) -> None:
        """Embedding of the current tokens; RoPE angles and the length mask of the current position."""
        import torch.nn.functional as F

        pos = self.pos
        s["x"] = F.embedding(self.tokens[:bs], self.embed)
        s["cos"] = self.cos.index_select(0, pos)
        s["sin"] = self.sin.index_select(0, pos)
        s["mask"] = (self.positions <= pos).view(1, 1, 1, self.context_len)

    def pre_attention(self, s: dict[str, Any], i: int, bs: int) -> None:
        """Layer ``i`` up to attention: RMSNorm, fused QKV projection, RoPE."""
        import torch.nn.functional as F

        cfg = self.cfg
        hd, h, kvh = cfg.head_dim, cfg.heads, cfg.kv_heads
        layer = self.layers[i]
        hn = _rms_norm(s["x"], layer["attn_norm"], cfg.norm_eps)
        q, k, v = F.linear(hn, layer["wqkv"]).split((h * hd, kvh * hd, kvh * hd), dim=-1)
        # Decode has one query per sequence, so the query heads that share a KV head sit in
        # the "query length" axis: GQA without repeating the cache.
        s[f"q{i}"] = _rope(q.view(bs, kvh, h // kvh, hd), s["cos"], s["sin"])
        s[f"k{i}"] = _rope(k.view(bs, kvh, 1, hd), s["cos"], s["sin"])
        s[f"v{i}"] = v.view(bs, kvh, 1, hd)

    def attention(self, s: dict[str, Any], i: int, bs: int):
        """Layer ``i``'s attention: write K/V at the current position, SDPA over the static cache (with
        ``eager_attention``: matmul, softmax, matmul written out).

        What vLLM's piecewise mode runs eagerly between graph pieces (cache write included).
        Returns the ``(bs, heads * head_dim)`` output.
        """
        import torch.nn.functional as F

        cfg = self.cfg
        layer = self.layers[i]
        k_cache, v_cache = layer["k_cache"][:bs], layer["v_cache"][:bs]
        k_cache.index_copy_(2, self.pos, s[f"k{i}"])
        v_cache.index_copy_(2, self.pos, s[f"v{i}"])
        if self.eager_attention:  # written out, as transformers' eager attention: softmax in float32
            scores = (s[f"q{i}"] @ k_cache.transpose(-1, -2)) * self.scale
            scores = scores.masked_fill(~s["mask"], float("-inf"))
            attn = scores.float().softmax(dim=-1).to(v_cache.dtype) @ v_cache
        else:
            attn = F.scaled_dot_product_attention(s[f"q{i}"], k_cache, v_cache, attn_mask=s["mask"], scale=self.scale)
        return attn.reshape(bs, cfg.heads * cfg.head_dim)

    def post_attention(self, s: dict[str, Any], i: int, attn) -> None:
        """Layer ``i`` after attention: output projection, residual, RMSNorm, SwiGLU MLP, residual."""
        import torch.nn.functional as F

        cfg = self.cfg
        layer = self.layers[i]
        x = s["x"] + F.linear(attn, layer["wo"])
        hn = _rms_norm(x, layer["mlp_norm"], cfg.norm_eps)
        gate, up = F.linear(hn, layer["wgu"]).chunk(2, dim=-1)
        s["x"] = x + F.linear(F.silu(gate) * up, layer["wdown"])

    def epilogue(self, s: dict[str, Any], bs: int):
        """Final norm, LM head, greedy next token written back; the position advances on the device."""
        import torch
        import torch.nn.functional as F

        logits = F.linear(_rms_norm(s["x"], self.final_norm, self.cfg.norm_eps), self.lm_head)
        # Kept for checks: inside a captured graph this is the graph's static output buffer.
        self.last_logits = logits
        nxt = logits.argmax(dim=-1)
        self.tokens[:bs].copy_(nxt)
        # Advance on the device; wrap to start_pos before leaving the cache.
        span = self.context_len - self.start_pos
        self.pos.copy_(torch.remainder(self.pos + (1 - self.start_pos), span) + self.start_pos)
        return self.tokens[:bs]

    def step(self, bs: int):
        """One decode step for sequences ``[0, bs)``; returns the next tokens (a view of the buffer)."""
        self.check_batch(bs)
        view = self._token_views.get(bs)
        if view is None:
            view = self._token_views[bs] = self.tokens[:bs]
            if self.compiled and bs > 1:
                from .compiled import mark_batch_dynamic

                mark_batch_dynamic(view)
        return self._forward(view)

    def _run(self, tokens):
        """The step's body over ``tokens`` (a view ``[:bs]`` of the token buffer; its length is the batch,
        symbolic when compiled)."""
        bs = tokens.shape[0]
        s: dict[str, Any] = {}
        self.prologue(s, bs)
        for i in range(self.cfg.layers):
            self.pre_attention(s, i, bs)
            self.post_attention(s, i, self.attention(s, i, bs))
        return self.epilogue(s, bs)

    def compile(self) -> None:
        """Run the step through torch.compile from now on (see :mod:`launchgap.harness.compiled`)."""
        from .compiled import compile_forward

        self._forward = compile_forward(import_torch(), self._run)
        self.compiled = True

    def param_count(self) -> int:
        return self.cfg.param_count()
