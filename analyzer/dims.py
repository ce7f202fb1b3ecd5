"""A decoder's dimensions: the one reader of model dimensions (standard library only).

:class:`ModelDims` reads the harness's layout (``timings["models"][name]``: ``layers``,
``hidden``, ``heads``, ``kv_heads``, ``mlp``, ``vocab``, ``head_dim``) or a Hugging Face
``config.json`` (``num_hidden_layers``, ``hidden_size``, ...), and derives what the memory
model (:mod:`analyzer.planning.memory`) and the KV-cache arithmetic need from them. It sits in
the lowest layer, beside :mod:`analyzer.timings`, so the GPU harness may read configs through it
too.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields

from .errors import InputError
from .timings import GRAPH_MODES

MIB = float(1 << 20)
_DTYPE_BYTES = {"bfloat16": 2, "float16": 2, "half": 2, "float32": 4, "float": 4, "float8_e4m3fn": 1}


@dataclass(frozen=True)
class ModelDims:
    """A decoder's dimensions, as the harness's ``timings["models"][name]`` or a Hugging Face config gives them."""

    name: str
    layers: int
    hidden: int
    heads: int
    kv_heads: int
    mlp: int
    vocab: int
    head_dim: int
    dtype_bytes: int = 2

    def __post_init__(self) -> None:
        for f in ("layers", "hidden", "heads", "kv_heads", "mlp", "vocab", "head_dim", "dtype_bytes"):
            v = getattr(self, f)
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise InputError(f"model dimension {f} of {self.name!r} is {v!r}, expected a positive integer")

    @classmethod
    def from_mapping(cls, d: Mapping, name: str | None = None) -> ModelDims:
        """From the harness's layout (``layers``, ``hidden``, ``heads``, ``kv_heads``, ``mlp``, ``vocab``,
        ``head_dim``) or a Hugging Face ``config.json`` (``num_hidden_layers``, ``hidden_size``, ...)."""
        if not isinstance(d, Mapping):
            raise InputError("model dimensions must be a JSON object")

        def get(*keys: str, default: object = None) -> object:
            for k in keys:
                if d.get(k) is not None:
                    return d[k]
            if default is None:
                raise InputError(f"model dimensions lack {keys[0]!r} (or {keys[-1]!r})")
            return default

        layers = get("layers", "num_hidden_layers")
        hidden = get("hidden", "hidden_size")
        heads = get("heads", "num_attention_heads")
        kv = get("kv_heads", "num_key_value_heads", default=heads)
        head_dim = get("head_dim", default=(hidden // heads) if isinstance(hidden, int) and isinstance(heads, int)
                       and heads > 0 else -1)
        dtype = d.get("dtype_bytes") or _DTYPE_BYTES.get(str(d.get("torch_dtype") or d.get("dtype") or "bfloat16"), 2)
        return cls(str(name or d.get("name") or d.get("model_type") or "model"), layers, hidden, heads, kv,
                   get("mlp", "intermediate_size"), get("vocab", "vocab_size"), head_dim, dtype)

    @property
    def act_row_mib(self) -> float:
        """Activations of one batch row in one decode step (MiB); see the module docstring."""
        widest = max(self.vocab, 3 * self.mlp, (2 * self.heads + 2 * self.kv_heads) * self.head_dim)
        return self.dtype_bytes * (2 * self.hidden + widest) / MIB

    @property
    def kept_row_mib(self) -> float:
        """Each layer's attention inputs for one batch row (MiB): the fused q/k/v output and the rotated
        q and k, ``dtype_bytes * layers * (2 * heads + 3 * kv_heads) * head_dim / 2**20``."""
        return self.dtype_bytes * self.layers * (2 * self.heads + 3 * self.kv_heads) * self.head_dim / MIB

    def pool_row_mib(self, mode: str = "full") -> float:
        """Activations one batch row keeps live in the graph pool (MiB): ``act_row_mib`` plus, in
        ``full`` mode, ``kept_row_mib`` (module docstring)."""
        if mode not in GRAPH_MODES:
            raise InputError(f"graph mode must be one of {', '.join(GRAPH_MODES)}, got {mode!r}")
        return self.act_row_mib + (self.kept_row_mib if mode == "full" else 0.0)

    @property
    def gemm_weights_gib(self) -> float:
        """Weights the step's matrix multiplies read (GiB): per layer the fused q/k/v, output, gate/up and
        down projections, plus the LM head, ``dtype_bytes * (layers * hidden * ((2 * heads + 2 * kv_heads)
        * head_dim + 3 * mlp) + vocab * hidden) / 2**30``."""
        per_layer = self.hidden * ((2 * self.heads + 2 * self.kv_heads) * self.head_dim + 3 * self.mlp)
        return self.dtype_bytes * (self.layers * per_layer + self.vocab * self.hidden) / float(1 << 30)

    @property
    def kv_bytes_per_token(self) -> int:
        """KV-cache bytes one token takes: ``2 * layers * kv_heads * head_dim * dtype_bytes`` (K and V)."""
        return 2 * self.layers * self.kv_heads * self.head_dim * self.dtype_bytes

    @property
    def default_pieces(self) -> int:
        """Graphs per size in piecewise mode when not measured: one per stretch between attention ops."""
        return self.layers + 1

    def to_dict(self) -> dict:
        return {f.name: getattr(self, f.name) for f in fields(self)}
