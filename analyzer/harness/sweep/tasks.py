"""The work plan of a run: one :class:`Task` per unit of work, which are done already, and the progress bar."""
from __future__ import annotations

import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .document import TimingsDoc, trace_name
from .options import TIME_KEY, SweepOptions


class Progress:
    """A progress bar for :func:`run_sweep`: redrawn in place on a terminal, one line per item elsewhere."""

    def __init__(self, stream: Any = None, width: int = 24) -> None:
        self.width = width
        self.stream = stream if stream is not None else sys.stderr
        self.tty = bool(getattr(self.stream, "isatty", lambda: False)())
        self.t0 = time.perf_counter()

    def __call__(self, done: int, total: int, label: str) -> None:
        total = max(total, 1)
        filled = self.width * min(done, total) // total
        bar = "#" * filled + "-" * (self.width - filled)
        line = f"[{bar}] {done}/{total} {time.perf_counter() - self.t0:6.1f}s {label}"
        if self.tty:
            self.stream.write("\r" + line[:120].ljust(120) + ("\n" if done >= total else ""))
        else:
            self.stream.write(line + "\n")
        self.stream.flush()


@dataclass(frozen=True)
class Task:
    """One unit of work: ``what`` is ``timing``, ``trace <mode>``, ``profiled <setting>``,
    ``memory <mode> <list>`` or ``serving``."""

    model: str
    bs: int
    what: str


def plan_tasks(opts: SweepOptions, on_cuda: bool) -> list[Task]:
    modes = [m for m in opts.modes if m == "eager" or on_cuda]
    traced = set(opts.traced_sizes)
    tasks: list[Task] = []
    for cfg in opts.models:
        for bs in opts.batch_sizes:
            tasks.append(Task(cfg.name, bs, "timing"))
            if opts.trace and bs in traced:
                tasks += [Task(cfg.name, bs, f"trace {mode}") for mode in modes]
        for bs in opts.traced_sizes:
            tasks += [Task(cfg.name, bs, f"profiled {s}") for s in opts.profiler_settings]
        if on_cuda:
            for name, _sizes in opts.capture_lists:
                tasks += [Task(cfg.name, 0, f"memory {mode} {name}") for mode in opts.memory_modes]
        if opts.serving_lists:
            tasks.append(Task(cfg.name, 0, "serving"))
    return tasks


def row_complete(row: dict[str, Any] | None, modes: Sequence[str]) -> bool:
    return row is not None and all(row.get(TIME_KEY[m]) is not None for m in modes)


def task_done(t: Task, doc: TimingsDoc, out: Path, modes: Sequence[str]) -> bool:
    kind, _, rest = t.what.partition(" ")
    if kind == "timing":
        i = doc.row_index(t.model, t.bs)
        return row_complete(doc.doc["rows"][i] if i is not None else None, modes)
    if kind == "trace":
        return (out / trace_name(t.model, t.bs, rest)).exists()
    if kind == "profiled":
        row = doc.find("profiled_vs_unprofiled", model=t.model, batch_size=t.bs, profiler=rest)
        return row is not None and (out / trace_name(t.model, t.bs, f"eager_{rest}")).exists()
    if kind == "memory":
        mode, _, name = rest.partition(" ")
        return doc.find("graph_memory", model=t.model, mode=mode, list_name=name) is not None
    return False  # serving entries are always redone
