"""The timings document a run writes: environment, resume checks, model entries, lookups, the result."""
from __future__ import annotations

import datetime as _dt
import shutil
import subprocess
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ...errors import InputError
from ...timings import write_timings
from ..hf import HFModelSpec
from ..model import ModelConfig
from .options import SweepOptions
from .rows import TimingRow


@dataclass
class SweepResult:
    """What a run wrote: the timings file, new rows and traces, skipped items, warnings."""

    timings_path: Path
    rows: list[TimingRow] = field(default_factory=list)
    traces: list[Path] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    profiled: list[dict[str, Any]] = field(default_factory=list)
    graph_memory: list[dict[str, Any]] = field(default_factory=list)
    serving: list[dict[str, Any]] = field(default_factory=list)


def trace_name(model: str, batch_size: int, mode: str) -> str:
    return f"{model}_bs{batch_size}_{mode}.json.gz"


def environment(torch: Any, on_cuda: bool) -> dict[str, Any]:
    env: dict[str, Any] = {"torch": torch.__version__, "cuda": torch.version.cuda if on_cuda else None}
    if on_cuda:
        env["device"] = torch.cuda.get_device_name(0)
        env["driver"] = driver_version()
    else:
        import platform

        env["device"] = f"cpu ({platform.processor() or platform.machine()})"
        env["driver"] = None
    return env


def driver_version() -> str | None:
    exe = shutil.which("nvidia-smi")
    if not exe:
        return None
    try:
        out = subprocess.run([exe, "--query-gpu=driver_version", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=20, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip().splitlines()[0] if out.returncode == 0 and out.stdout.strip() else None


def model_entry(cfg: ModelConfig | HFModelSpec, compiled: bool, attention_backend: str = "auto") -> dict[str, Any]:
    """The timings' ``models`` entry: dimensions, ``model_source``, ``compiled`` and ``attention_backend`` (the SDPA
    kernel asked for, ``auto``: PyTorch's choice)."""
    entry = cfg.to_dict()
    if isinstance(cfg, ModelConfig):
        entry["model_source"] = {"kind": "preset", "preset": cfg.preset}
    entry["compiled"] = compiled
    entry["attention_backend"] = attention_backend
    return entry


def check_resumable(doc: dict[str, Any], opts: SweepOptions, path: Path) -> None:
    """Refuse to mix rows measured under other settings into one timings file."""
    for key, want in (("context_len", opts.context_len), ("start_pos", opts.start_pos)):
        if doc.get(key) is not None and doc[key] != want:
            raise InputError(f"holds rows with {key} {doc[key]}, this run asks {want}; use another --out", str(path))
    known = doc.get("models") or {}
    for cfg in opts.models:
        old = known.get(cfg.name)
        if not old:
            continue
        new = cfg.to_dict()
        if any(old.get(k) != v for k, v in new.items() if k != "model_source"):
            raise InputError(f"holds a model named {cfg.name!r} with other dimensions; use --name or another --out",
                             str(path))
        sha_old, sha_new = (old.get("model_source") or {}).get("sha256"), (new.get("model_source") or {}).get("sha256")
        if sha_old != sha_new:  # the same config moved elsewhere resumes; another config does not
            raise InputError(f"holds a model named {cfg.name!r} from another config (sha256 {str(sha_old)[:12]}, "
                             f"this run {str(sha_new)[:12]}); use --name or another --out", str(path))


class TimingsDoc:
    """The timings document being written, with lookups for resuming."""

    def __init__(self, doc: dict[str, Any], path: Path) -> None:
        self.doc, self.path = doc, path

    def save(self) -> None:
        write_timings(self.path, self.doc)

    def row_index(self, model: str, bs: int) -> int | None:
        for i, r in enumerate(self.doc["rows"]):
            if r["model"] == model and r["batch_size"] == bs:
                return i
        return None

    def put_row(self, row: dict[str, Any]) -> None:
        i = self.row_index(row["model"], row["batch_size"])
        if i is None:
            self.doc["rows"].append(row)
        else:
            self.doc["rows"][i] = row

    def _put(self, section: str, item: dict[str, Any], key: Callable[[dict[str, Any]], tuple]) -> None:
        items = self.doc.setdefault(section, [])
        for i, old in enumerate(items):
            if key(old) == key(item):
                items[i] = item
                return
        items.append(item)

    def find(self, section: str, **match: Any) -> dict[str, Any] | None:
        for item in self.doc.get(section) or []:
            if all(item.get(k) == v for k, v in match.items()):
                return item
        return None

    def put_profiled(self, item: dict[str, Any]) -> None:
        self._put("profiled_vs_unprofiled", item, lambda r: (r["model"], r["batch_size"], r["profiler"]))

    def put_memory(self, item: dict[str, Any]) -> None:
        self._put("graph_memory", item, lambda r: (r["model"], r["mode"], r["list_name"]))

    def put_serving(self, item: dict[str, Any]) -> None:
        self._put("serving", item, lambda r: (r["model"], r["graph_mode"], r["list_name"]))


def now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")
