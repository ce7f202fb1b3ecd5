"""A decoder's dimensions: the one reader of model dimensions (standard library only).

:class:`ModelDims` reads the harness's layout (``timings["models"][name]``: ``layers``,
``hidden``, ``heads``, ``kv_heads``, ``mlp``, ``vocab``, ``head_dim``) or a Hugging Face
``config.json`` (``num_hidden_layers``, ``hidden_size``, ...), and derives what the memory
model (:mod:`launchgap.planning.memory`) and the KV-cache arithmetic need from them. It sits in
the lowest layer, beside :mod:`launchgap.timings`, so the GPU harness builds on it: its preset
decoder's :class:`~launchgap.harness.model.ModelConfig` and a ``--hf-config`` model's
:class:`~launchgap.harness.hf.HFModelSpec` are ``ModelDims`` (subclasses adding what only the
harness needs), and ``--hf-config`` reads a config's dimensions through :meth:`ModelDims.from_mapping`.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields

from .errors import InputError
from .timings import GRAPH_MODES

MIB = float(1 << 20)
_DTYPE_BYTES = {"bfloat16": 2, "float16": 2, "half": 2, "float32": 4, "float": 4, "float8_e4m3fn": 1}


def text_config(doc: Mapping) -> Mapping:
    """The part of a Hugging Face ``config.json`` that describes the text model: its ``text_config``
    when it nests one (multimodal configs), else the config itself."""
    text = doc.get("text_config")
    return text if isinstance(text, Mapping) else doc


#: Where each dimension is read, first key present wins: the harness's name, then Hugging Face's
#: (``mlp``: a dense model's ``intermediate_size``, else one expert's width under the names MoE configs use).
_KEYS = {"layers": ("layers", "num_hidden_layers"), "hidden": ("hidden", "hidden_size"),
         "heads": ("heads", "num_attention_heads"), "kv_heads": ("kv_heads", "num_key_value_heads"),
         "mlp": ("mlp", "intermediate_size", "moe_intermediate_size", "ffn_dim"), "vocab": ("vocab", "vocab_size"),
         "head_dim": ("head_dim",)}


#: Where a mixture of experts' routing is read, first key present wins: its routed experts and experts per token.
_MOE_KEYS = (("num_experts", "num_local_experts", "n_routed_experts", "moe_num_experts", "experts"),
             ("num_experts_per_tok", "num_experts_per_token", "moe_k", "moe_top_k", "moe_topk", "experts_per_token"))


def moe_routing(d: Mapping) -> tuple[int, int] | None:
    """A mixture of experts' ``(E, k)`` from a Hugging Face ``config.json`` (its ``text_config`` where it nests one)
    or the harness's ``models`` entry: ``E`` routed experts (``num_experts``, ``num_local_experts``,
    ``n_routed_experts``, ERNIE-4.5's and DBRX's ``moe_num_experts``, DBRX's under ``ffn_config``; the harness's
    ``experts``), ``k`` of them per token (``num_experts_per_tok``, ERNIE-4.5's ``moe_k``, DBRX's ``moe_top_k``,
    Hunyuan's ``moe_topk``; the harness's ``experts_per_token``); ``None`` for a dense model or when either is missing or not ``1 <= k <= E``. What the
    cost model's expert scaling needs (:func:`launchgap.costmodel.fit_cost_curve`)."""
    if not isinstance(d, Mapping):
        return None
    text = text_config(d)
    if isinstance(ffn := text.get("ffn_config"), Mapping):  # DBRX nests its experts there
        text = {**ffn, **text}
    e, k = ([v for key in keys if isinstance(v := text.get(key), int) and not isinstance(v, bool)][:1]
            for keys in _MOE_KEYS)
    return (e[0], k[0]) if e and k and 1 <= k[0] <= e[0] else None


@dataclass(frozen=True)
class ModelDims:
    """A decoder's dimensions, as the harness's ``timings["models"][name]`` or a Hugging Face config gives them.

    ``head_dim`` left out (``None``) is ``hidden // heads``. The harness's model descriptions
    (:class:`launchgap.harness.model.ModelConfig`, :class:`launchgap.harness.hf.HFModelSpec`) are
    ``ModelDims`` with what the harness needs besides.
    """

    name: str
    layers: int
    hidden: int
    heads: int
    kv_heads: int
    mlp: int
    vocab: int
    head_dim: int | None = None
    dtype_bytes: int = 2

    def __post_init__(self) -> None:
        def check(f: str) -> None:
            v = getattr(self, f)
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise InputError(f"model dimension {f} of {self.name!r} is {v!r}, expected a positive integer")

        for f in ("layers", "hidden", "heads", "kv_heads", "mlp", "vocab", "dtype_bytes"):
            check(f)
        if self.head_dim is None:  # frozen: set once, here
            object.__setattr__(self, "head_dim", self.hidden // self.heads)
        check("head_dim")

    @classmethod
    def from_mapping(cls, d: Mapping, name: str | None = None) -> ModelDims:
        """From the harness's layout (``layers``, ``hidden``, ``heads``, ``kv_heads``, ``mlp``, ``vocab``,
        ``head_dim``) or a Hugging Face ``config.json`` (``num_hidden_layers``, ``hidden_size``, ...; the
        ``text_config`` of one that nests it). A key whose value is ``null`` counts as absent; ``kv_heads``
        defaults to ``heads``, ``head_dim`` to ``hidden // heads``."""
        if not isinstance(d, Mapping):
            raise InputError("model dimensions must be a JSON object")
        text = text_config(d)

        def get(dim: str, required: bool = True) -> object:
            keys = _KEYS[dim]
            for k in keys:
                v = text.get(k)
                if v is not None:
                    if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                        raise InputError(f"model dimension {k} is {v!r}, expected a positive integer")
                    return v
            if required:
                raise InputError(f"model dimensions lack {keys[0]!r} (or {keys[1]!r})")
            return None

        layers, hidden, heads = get("layers"), get("hidden"), get("heads")  # read in order: the first missing is named
        dtype = (d.get("dtype_bytes")
                 or _DTYPE_BYTES.get(str(text.get("torch_dtype") or text.get("dtype") or d.get("torch_dtype")
                                         or d.get("dtype") or "bfloat16"), 2))
        return cls(str(name or d.get("name") or d.get("model_type") or "model"), layers, hidden, heads,
                   get("kv_heads", required=False) or heads, get("mlp"), get("vocab"), get("head_dim", required=False),
                   dtype)

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
