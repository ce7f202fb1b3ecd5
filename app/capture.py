"""A capture trace beside an execution trace (Diagnosis page): which loaded capture traces fit, which one
to pair automatically, and the pairing itself (:func:`launchgap.graph_mode.pair_capture`), cached."""
from __future__ import annotations

from collections.abc import Callable

import numpy as np

from launchgap.graph_mode import CapturePairing, pair_capture
from launchgap.dashboard.cache import BoundedCache
from launchgap.dashboard.session import LoadedTrace


def capture_entries(entries: list[LoadedTrace], entry: LoadedTrace) -> list[LoadedTrace]:
    """Loaded capture traces that may belong to ``entry``'s engine run: capture traces of the same engine
    (either side unknown counts as the same); none for a capture trace or a trace without graph launches."""
    rep = entry.report
    if rep is None or rep.mode in ("capture", "eager", "compiled") or not any(s.graph_launches for s in rep.steps):
        return []
    eng = rep.summary.engine
    return [e for e in entries if e.ok and e.key != entry.key and e.report.mode == "capture"
            and (eng is None or e.report.summary.engine is None or e.report.summary.engine == eng)]


def pairing(entry: LoadedTrace, cap: LoadedTrace, row_step: np.ndarray, steps_key: object,
            cache: BoundedCache) -> CapturePairing:
    """The pairing of ``entry`` with ``cap`` (cached per trace contents and step options)."""
    return cache.get_or_compute(("capture_pairing", entry.key, entry.digest, cap.key, cap.digest, steps_key),
                                lambda: pair_capture(entry.trace, cap.trace, row_step))


def auto_pick(caps: list[LoadedTrace], pair: Callable[[LoadedTrace], CapturePairing]) -> LoadedTrace | None:
    """The capture trace to pair without asking: the one whose graphs match most replays (the first on a
    tie); ``None`` when none matches any."""
    best, best_n = None, 0
    for c in caps:  # loaded capture traces, a handful
        n = pair(c).replays_matched
        if n > best_n:
            best, best_n = c, n
    return best
