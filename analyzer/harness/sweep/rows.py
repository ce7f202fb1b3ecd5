"""One row of the sweep: :class:`TimingRow` (the ``rows`` of timings.json) built from timed rounds."""
from __future__ import annotations

import statistics
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from ..clock import Timed, pct


@dataclass(frozen=True)
class TimingRow:
    """Ground truth for one (model, batch size). Times in microseconds; ``None`` = not measured.

    ``eager_us``/``graph_us``/``piecewise_us``: median device time per step between CUDA
    events (CPU: host wall time). ``*_host_us``: median host time to issue one step.
    ``capture_s``/``piecewise_capture_s``: wall seconds to capture (instantiation included).
    ``graph_pool_bytes``/``piecewise_pool_bytes``: reserved-memory growth across the capture.
    ``kernels_per_step``: kernels of one eager step; ``graph_nodes``/``piecewise_nodes``:
    kernel nodes of the FULL graph / of all pieces; ``piecewise_graphs``: pieces per step;
    ``graph_replay_ok``/``piecewise_replay_ok``: the replay's logits matched the eager step's.
    ``repeats``: timed steps behind each median (all rounds). ``*_p10``/``*_p90`` give the
    spread over steps, ``*_rounds`` the median of each round.
    """

    model: str
    batch_size: int
    eager_us: float | None
    graph_us: float | None
    eager_host_us: float | None
    capture_s: float | None
    graph_pool_bytes: int | None
    kernels_per_step: int | None
    repeats: int
    graph_host_us: float | None = None
    eager_us_p10: float | None = None
    eager_us_p90: float | None = None
    graph_us_p10: float | None = None
    graph_us_p90: float | None = None
    rounds: int = 1
    eager_us_rounds: list[float] | None = None
    graph_us_rounds: list[float] | None = None
    graph_nodes: int | None = None
    graph_replay_ok: bool | None = None
    piecewise_us: float | None = None
    piecewise_host_us: float | None = None
    piecewise_us_p10: float | None = None
    piecewise_us_p90: float | None = None
    piecewise_us_rounds: list[float] | None = None
    piecewise_capture_s: float | None = None
    piecewise_pool_bytes: int | None = None
    piecewise_graphs: int | None = None
    piecewise_nodes: int | None = None
    piecewise_replay_ok: bool | None = None

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        if self.piecewise_us is None:  # keep rows of sweeps without piecewise mode as they were
            for k in [k for k in d if k.startswith("piecewise_")]:
                del d[k]
        return d


@dataclass
class SizeCapture:
    """What a size's capture cost and whether its replay matched the eager step (fields of its row)."""

    run: Callable[[], Any]
    capture_s: float
    pool_bytes: int
    nodes: int | None
    graphs: int
    replay_ok: bool | None = None


def median_or_none(values: list[float]) -> float | None:
    return round(statistics.median(values), 2) if values else None


def make_row(model: str, bs: int, eager: list[Timed], graph: list[Timed], captured: SizeCapture | None,
              kernels: int | None, piecewise: Sequence[Timed] = (), pw_captured: SizeCapture | None = None
              ) -> TimingRow:
    e_all = [x for t in eager for x in t.device_us]
    g_all = [x for t in graph for x in t.device_us]
    p_all = [x for t in piecewise for x in t.device_us]

    def host(ts: Sequence[Timed]) -> float | None:
        return median_or_none([x for t in ts for x in t.host_us])

    def spread(values: list[float], q: float) -> float | None:
        return round(pct(values, q), 2) if values else None

    def per_round(ts: Sequence[Timed]) -> list[float] | None:
        return [round(t.median_us, 2) for t in ts] if ts else None

    return TimingRow(
        model=model, batch_size=bs, eager_us=median_or_none(e_all), graph_us=median_or_none(g_all),
        eager_host_us=host(eager),
        capture_s=round(captured.capture_s, 4) if captured else None,
        graph_pool_bytes=captured.pool_bytes if captured else None,
        kernels_per_step=kernels, repeats=len(e_all or g_all or p_all),
        graph_host_us=host(graph),
        eager_us_p10=spread(e_all, 0.1), eager_us_p90=spread(e_all, 0.9),
        graph_us_p10=spread(g_all, 0.1), graph_us_p90=spread(g_all, 0.9),
        rounds=max(len(eager), len(graph), len(piecewise)),
        eager_us_rounds=per_round(eager), graph_us_rounds=per_round(graph),
        graph_nodes=captured.nodes if captured else None,
        graph_replay_ok=captured.replay_ok if captured else None,
        piecewise_us=median_or_none(p_all), piecewise_host_us=host(piecewise),
        piecewise_us_p10=spread(p_all, 0.1), piecewise_us_p90=spread(p_all, 0.9),
        piecewise_us_rounds=per_round(piecewise),
        piecewise_capture_s=round(pw_captured.capture_s, 4) if pw_captured else None,
        piecewise_pool_bytes=pw_captured.pool_bytes if pw_captured else None,
        piecewise_graphs=pw_captured.graphs if pw_captured else None,
        piecewise_nodes=pw_captured.nodes if pw_captured else None,
        piecewise_replay_ok=pw_captured.replay_ok if pw_captured else None,
    )
