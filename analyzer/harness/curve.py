"""The measured speedup curve: eager vs graph step time by batch size, per model.

``speedup = eager_us / graph_us`` (both unprofiled medians from ``timings.json``) and
``win_pct = 100 * (speedup - 1)``. The batch size where the win disappears
(``win_gone_at``) is the smallest measured batch size from which every larger measured
size wins less than ``threshold`` (default 5%); ``None`` when the last size still wins.
Requiring every larger size keeps one noisy point from ending the curve early.

``source`` says what was measured, from the timings' ``models`` entry: ``model_source`` and
``compiled`` (``None`` for files written before they existed); text and Markdown print it as
e.g. ``transformers LlamaForCausalLM (config sha256 d9e132abbac6), compiled``.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

CURVE_SCHEMA = "launchgap.curve/1"
DEFAULT_THRESHOLD = 0.05


def describe_attention(backend: str | None) -> str:
    """How a recording's attention ran, for its source line and ``--dry-run`` (``""`` for ``auto`` or unknown)."""
    if not backend or backend == "auto":
        return ""
    return "eager attention (matmul, softmax, matmul)" if backend == "eager" else f"SDPA {backend}"


@dataclass(frozen=True)
class CurvePoint:
    batch_size: int
    eager_us: float | None
    graph_us: float | None
    speedup: float | None
    win_pct: float | None
    eager_host_us: float | None
    kernels_per_step: int | None
    capture_s: float | None
    graph_pool_bytes: int | None


@dataclass(frozen=True)
class ModelCurve:
    model: str
    points: list[CurvePoint]
    win_gone_at: int | None
    threshold: float
    source: dict[str, Any] | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def win_gone_at(batch_sizes: list[int], speedups: list[float | None],
                threshold: float = DEFAULT_THRESHOLD) -> int | None:
    """Smallest batch size from which every larger one (with a graph time) wins under ``threshold``."""
    pts = sorted((b, s) for b, s in zip(batch_sizes, speedups) if s is not None)
    gone: int | None = None
    for b, s in reversed(pts):
        if s - 1.0 < threshold:
            gone = b
        else:
            break
    return gone


def build_curves(doc: dict[str, Any], threshold: float = DEFAULT_THRESHOLD) -> list[ModelCurve]:
    """One :class:`ModelCurve` per model of a loaded timings document, in order of appearance."""
    by_model: dict[str, list[dict[str, Any]]] = {}
    for r in doc["rows"]:
        by_model.setdefault(r["model"], []).append(r)
    curves = []
    for model, rows in by_model.items():
        pts = []
        for r in sorted(rows, key=lambda r: r["batch_size"]):
            g, e = r.get("graph_us"), r.get("eager_us")
            sp = e / g if g and e else None  # a graph-only sweep has no eager time
            pts.append(CurvePoint(
                batch_size=r["batch_size"], eager_us=None if e is None else float(e), graph_us=g,
                speedup=round(sp, 3) if sp else None, win_pct=round(100 * (sp - 1), 1) if sp else None,
                eager_host_us=r.get("eager_host_us"), kernels_per_step=r.get("kernels_per_step"),
                capture_s=r.get("capture_s"), graph_pool_bytes=r.get("graph_pool_bytes"),
            ))
        gone = win_gone_at([p.batch_size for p in pts], [p.speedup for p in pts], threshold)
        entry = (doc.get("models") or {}).get(model) or {}
        source = ({"model_source": entry.get("model_source"), "compiled": entry.get("compiled"),
                   "attention_backend": entry.get("attention_backend")}
                  if "model_source" in entry or "compiled" in entry else None)
        curves.append(ModelCurve(model=model, points=pts, win_gone_at=gone, threshold=threshold, source=source))
    return curves


def source_text(source: dict[str, Any] | None) -> str | None:
    """One line saying what was measured (``None`` when the file does not say)."""
    if not source:
        return None
    src = source.get("model_source") or {}
    if src.get("kind") == "hf-config":
        sha = src.get("sha256") or ""
        what = f"transformers {src.get('architecture') or src.get('model_type')}" + (
            f" (config sha256 {sha[:12]})" if sha else "")
    elif src.get("kind") == "preset":
        what = f"launchgap's decoder, preset {src.get('preset')}"
    else:
        what = "model source not recorded"
    attention = describe_attention(source.get("attention_backend"))
    return what + (", compiled" if source.get("compiled") else ", not compiled" if source.get("compiled") is False
                   else "") + (f", {attention}" if attention else "")


def curves_to_dict(doc: dict[str, Any], curves: list[ModelCurve]) -> dict[str, Any]:
    return {"schema": CURVE_SCHEMA, "device": doc.get("device"), "torch": doc.get("torch"),
            "cuda": doc.get("cuda"), "curves": [c.to_dict() for c in curves]}


def _fmt(x: float | None, spec: str) -> str:
    return "-" if x is None else format(x, spec)


def _gone_text(c: ModelCurve) -> str:
    pct = f"{c.threshold:.0%}"
    if not any(p.speedup is not None for p in c.points):  # say which half is missing: a graph-only sweep has no win
        missing = [m for m, has in (("eager", any(p.eager_us is not None for p in c.points)),
                                    ("graph", any(p.graph_us is not None for p in c.points))) if not has]
        return (f"no {' or '.join(missing)} timings" if missing
                else "no size with both eager and graph timings") + ", no speedup"
    if c.win_gone_at is None:
        return f"the win stays above {pct} up to batch {c.points[-1].batch_size}"
    return f"the win falls under {pct} from batch {c.win_gone_at} on"


def render_text(doc: dict[str, Any], curves: list[ModelCurve]) -> str:
    lines = [f"device {doc.get('device')}, torch {doc.get('torch')}, cuda {doc.get('cuda')}"]
    for c in curves:
        lines.append("")
        lines.append(f"{c.model}: {_gone_text(c)}")
        if source_text(c.source):
            lines.append(f"  measured: {source_text(c.source)}")
        lines.append(f"{'batch':>6} {'eager us':>11} {'graph us':>11} {'speedup':>8} {'win %':>7} {'kernels':>8}")
        for p in c.points:
            lines.append(f"{p.batch_size:>6} {_fmt(p.eager_us, ',.1f'):>11} {_fmt(p.graph_us, ',.1f'):>11} "
                         f"{_fmt(p.speedup, '.2f'):>8} {_fmt(p.win_pct, '.1f'):>7} "
                         f"{_fmt(p.kernels_per_step, 'd'):>8}")
    return "\n".join(lines) + "\n"


def render_markdown(doc: dict[str, Any], curves: list[ModelCurve]) -> str:
    lines = [f"Measured on {doc.get('device')} (torch {doc.get('torch')}, CUDA {doc.get('cuda')}); "
             "unprofiled medians per decode step."]
    for c in curves:
        said = source_text(c.source)
        lines += ["", f"**{c.model}**: {_gone_text(c)}." + (f" Measured: {said}." if said else ""), "",
                  "| batch | eager us | graph us | speedup | win % | kernels/step |",
                  "| ---: | ---: | ---: | ---: | ---: | ---: |"]
        for p in c.points:
            lines.append(f"| {p.batch_size} | {_fmt(p.eager_us, ',.1f')} | {_fmt(p.graph_us, ',.1f')} | "
                         f"{_fmt(p.speedup, '.2f')} | {_fmt(p.win_pct, '.1f')} | {_fmt(p.kernels_per_step, 'd')} |")
    return "\n".join(lines) + "\n"
