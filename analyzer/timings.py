"""The one definition of ``launchgap.timings/1``: the harness's unprofiled ground truth.

Standard library only: the recording harness runs on GPU machines that have torch and
nothing else, and writes through this module; ``record --curve`` and the planner read
through it. :func:`validate_timings` checks a parsed document and raises an
:class:`~launchgap.errors.InputError` (one line naming the file and the reason);
:func:`load_timings` reads and validates a file; :func:`write_timings` validates and
writes atomically.

Layout (every section but ``rows`` optional; unknown keys are kept, so readers of an older
version still accept newer files):

* ``schema``: ``"launchgap.timings/1"``. Absent only in the older ``truth.json`` layout
  (rows with ``bs`` instead of ``batch_size``), which is accepted too.
* ``device``, ``torch``, ``cuda``, ``driver``, ``created``, ``context_len``, ``start_pos``,
  ``micro`` (launch-cost micro-benchmark).
* ``models``: name -> dimensions (``layers``, ``hidden``, ``heads``, ``kv_heads``, ``mlp``,
  ``vocab``, ``head_dim``) and what was measured (all optional, checked by :func:`_check_models`):
  ``model_source`` ``{"kind": "preset", "preset"}`` (the harness's own decoder) or ``{"kind":
  "hf-config", "path", "sha256" (of the config file's bytes), "architecture", "model_type"}``
  (transformers built the model from a ``config.json``); ``compiled`` (bool: the forward ran
  through torch.compile); ``compile`` (``compile_s``: wall seconds of the first steps, where
  the compiles happen; ``graphs``: graphs dynamo compiled then; ``graphs_after_run``: all the
  run compiled); ``capture`` (``ok``, and ``reason``, one line, when the step could not be
  captured as a CUDA graph: its rows then time eager only).
* ``rows``: one object per (model, batch size): ``model`` (str), ``batch_size`` (int > 0),
  ``eager_us`` (number, or null when the sweep timed graph modes only), ``graph_us``,
  ``piecewise_us`` and the other per-mode fields (numbers or null). A row times at least
  one mode.
* ``profiled_vs_unprofiled``: the unprofiled eager step timed in the same process just
  before and after a trace recorded under one profiler setting
  (:data:`PROFILER_SETTINGS`). Required keys :data:`PVU_KEYS`; optional
  :data:`PVU_OPTIONAL_KEYS` (newer harness: ``unprofiled_eager_us``, the median of the
  before and after steps pooled; ``drift``, ``after / before - 1``; ``drift_limit``, the
  limit the harness re-recorded beyond; ``attempts``, traces recorded until the drift held).
  Read a record through :func:`pvu_eager_us` and :func:`pvu_drift`.
* ``graph_memory``: memory, capture time and node counts of capture lists
  (:data:`GRAPH_MEMORY_KEYS`, per-size entries :data:`GRAPH_MEMORY_SIZE_KEYS`).
* ``serving``: replays of a sequence of batch sizes padded to captured sizes.

Sizes are MiB (2**20 bytes), times microseconds (``_us``) or seconds (``_s``).
"""
from __future__ import annotations

import json
import math
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .errors import InputError
from .files import MAX_SMALL_FILE_BYTES, read_small_file

SCHEMA = "launchgap.timings/1"
#: Refuse timings files larger than this (real ones are well under 1 MiB).
MAX_TIMINGS_BYTES = MAX_SMALL_FILE_BYTES

#: Per-mode step-time fields of a row; a row must carry at least one of them as a number.
ROW_TIME_KEYS = ("eager_us", "graph_us", "piecewise_us")
#: Optional numeric row fields (null when not measured).
ROW_NUMBER_KEYS = (
    "graph_us", "piecewise_us", "eager_host_us", "graph_host_us", "piecewise_host_us", "capture_s",
    "piecewise_capture_s", "graph_pool_bytes", "piecewise_pool_bytes", "kernels_per_step", "piecewise_graphs",
    "repeats", "rounds", "eager_us_p10", "eager_us_p90", "graph_us_p10", "graph_us_p90", "piecewise_us_p10",
    "piecewise_us_p90",
)
ROW_LIST_KEYS = ("eager_us_rounds", "graph_us_rounds", "piecewise_us_rounds")

#: ``profiled_vs_unprofiled[].profiler``: what the trace recorded besides CPU and CUDA activity.
#: ``plain``: nothing more; ``shapes``: ``record_shapes=True``; ``stack``: ``with_stack=True``;
#: ``full``: both.
PROFILER_SETTINGS = ("plain", "shapes", "stack", "full")
PVU_KEYS = ("model", "batch_size", "profiler", "unprofiled_eager_us_before", "unprofiled_eager_us_after",
            "unprofiled_graph_us", "trace")
#: Optional keys of a ``profiled_vs_unprofiled`` record (numbers; ``attempts`` a positive integer).
PVU_OPTIONAL_KEYS = ("unprofiled_eager_us", "drift", "drift_limit", "attempts", "unprofiled_graph_us_before",
                     "unprofiled_graph_us_after", "truth", "interleaved_cycles", "profiled_eager_us",
                     "block_eager_us_before", "block_eager_us_after", "unprofiled_steps_us", "profiled_steps_us")
#: ``profiled_vs_unprofiled[].truth``: where the unprofiled eager step was timed. ``blocks``
#: (the default when absent): blocks of steps just before and after the trace; ``interleaved``:
#: wait-phase steps of the trace's own profiler schedule (``interleaved_cycles`` cycles of
#: unprofiled and profiled steps), ``_before``/``_after`` the first and second half of them,
#: ``profiled_eager_us`` the median active-phase step of the same window, ``block_eager_us_*``
#: the blocks around it, ``unprofiled_steps_us``/``profiled_steps_us`` every counted step (us) in
#: cycle order (``active`` profiled steps per cycle; the last cycle's are the kept trace's).
PVU_TRUTHS = ("blocks", "interleaved")
#: Largest ``|after / before - 1|`` of the unprofiled eager step around a trace for which the
#: record counts as timed in one host phase (the harness re-records beyond it; the fit skips it).
DRIFT_LIMIT = 0.05

GRAPH_MODES = ("full", "piecewise")
GRAPH_MEMORY_KEYS = ("model", "mode", "list_name", "capture_sizes", "graphs", "nodes_per_graph", "reserved_mib",
                     "device_used_mib", "capture_s", "per_size")
GRAPH_MEMORY_SIZE_KEYS = ("size", "reserved_mib", "device_used_mib", "capture_s", "nodes")

#: ``models[].model_source.kind``: the harness's own decoder, or a transformers model built from a config.
MODEL_SOURCE_KINDS = ("preset", "hf-config")

SERVING_KEYS = ("model", "graph_mode", "list_name", "capture_sizes", "steps", "kinds", "tokens",
                "sequence_us", "throughput_tokens_per_s", "capture_s", "reserved_mib", "device_used_mib", "trace")
SERVING_STEP_KEYS = ("index", "batch_size", "bucket", "mode", "fallback")
SERVING_KIND_KEYS = ("mode", "batch_size", "bucket", "us")
SERVING_STEP_MODES = ("graph", "eager")


class _Checker:
    """Small typed accessors that raise one-line :class:`InputError` naming the file and the field."""

    def __init__(self, path: str) -> None:
        self.path = path

    def fail(self, where: str, reason: str) -> InputError:
        return InputError(f"{where} {reason}", self.path)

    def obj(self, v: Any, where: str) -> dict[str, Any]:
        if not isinstance(v, dict):
            raise self.fail(where, f"is {type(v).__name__}, expected an object")
        return v

    def lst(self, v: Any, where: str) -> list[Any]:
        if not isinstance(v, list):
            raise self.fail(where, f"is {type(v).__name__}, expected a list")
        return v

    def string(self, v: Any, where: str) -> str:
        if not isinstance(v, str) or not v:
            raise self.fail(where, f"is {v!r}, expected a non-empty string")
        return v

    def pos_int(self, v: Any, where: str) -> int:
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise self.fail(where, f"is {v!r}, expected a positive integer")
        return v

    def count(self, v: Any, where: str, nullable: bool = False) -> int | None:
        if v is None and nullable:
            return None
        if isinstance(v, bool) or not isinstance(v, int) or v < 0:
            raise self.fail(where, f"is {v!r}, expected a non-negative integer" + (" or null" if nullable else ""))
        return v

    def number(self, v: Any, where: str, nullable: bool = True, positive: bool = False,
               signed: bool = False) -> float | None:
        """A finite number (``>= 0`` unless ``signed``; ``> 0`` with ``positive``) or, if ``nullable``, null."""
        if v is None:
            if nullable:
                return None
            raise self.fail(where, "is missing or null, expected a number")
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
            raise self.fail(where, f"is {v!r}, expected a finite number" + (" or null" if nullable else ""))
        if positive and v <= 0:
            raise self.fail(where, f"is {v!r}, expected a positive number")
        if not signed and v < 0:
            raise self.fail(where, f"is {v!r}, expected a number >= 0")
        return float(v)

    def keys(self, d: dict[str, Any], keys: tuple[str, ...], where: str) -> None:
        missing = [k for k in keys if k not in d]
        if missing:
            raise self.fail(where, f"lacks {', '.join(missing)}")

    def sizes(self, v: Any, where: str) -> list[int]:
        items = self.lst(v, where)
        if not items:
            raise self.fail(where, "is empty, expected batch sizes")
        return [self.pos_int(x, f"{where}[{i}]") for i, x in enumerate(items)]


def _check_row(c: _Checker, r: Any, i: int) -> dict[str, Any]:
    where = f"rows[{i}]"
    r = c.obj(r, where)
    c.string(r.get("model"), f"{where}.model")
    key = "batch_size" if "batch_size" in r or "bs" not in r else "bs"
    bs = c.pos_int(r.get(key), f"{where}.{key}")
    for k in ROW_TIME_KEYS:
        c.number(r.get(k), f"{where}.{k}", positive=True)
    if all(r.get(k) is None for k in ROW_TIME_KEYS):
        raise c.fail(where, f"times no mode: expected a number in one of {', '.join(ROW_TIME_KEYS)}")
    for k in ROW_NUMBER_KEYS:
        c.number(r.get(k), f"{where}.{k}", signed=k == "graph_pool_bytes")
    for k in ROW_LIST_KEYS:
        if r.get(k) is not None:
            for j, x in enumerate(c.lst(r[k], f"{where}.{k}")):
                c.number(x, f"{where}.{k}[{j}]", nullable=False)
    return r if key == "batch_size" else {**r, "batch_size": bs}


def _check_pvu(c: _Checker, r: Any, i: int) -> None:
    where = f"profiled_vs_unprofiled[{i}]"
    r = c.obj(r, where)
    c.keys(r, PVU_KEYS, where)
    c.string(r["model"], f"{where}.model")
    c.pos_int(r["batch_size"], f"{where}.batch_size")
    if r["profiler"] not in PROFILER_SETTINGS:
        raise c.fail(f"{where}.profiler", f"is {r['profiler']!r}, expected one of {', '.join(PROFILER_SETTINGS)}")
    for k in ("unprofiled_eager_us_before", "unprofiled_eager_us_after"):
        c.number(r[k], f"{where}.{k}", nullable=False, positive=True)
    c.number(r["unprofiled_graph_us"], f"{where}.unprofiled_graph_us", positive=True)
    if r["trace"] is not None:
        c.string(r["trace"], f"{where}.trace")
    for k in ("unprofiled_eager_us", "unprofiled_graph_us_before", "unprofiled_graph_us_after", "profiled_eager_us",
              "block_eager_us_before", "block_eager_us_after"):
        c.number(r.get(k), f"{where}.{k}", positive=True)
    if r.get("truth") is not None and r["truth"] not in PVU_TRUTHS:
        raise c.fail(f"{where}.truth", f"is {r['truth']!r}, expected one of {', '.join(PVU_TRUTHS)}")
    for k in ("unprofiled_steps_us", "profiled_steps_us"):
        if r.get(k) is not None:
            for j, x in enumerate(c.lst(r[k], f"{where}.{k}")):
                c.number(x, f"{where}.{k}[{j}]", nullable=False, positive=True)
    if r.get("interleaved_cycles") is not None:
        c.pos_int(r["interleaved_cycles"], f"{where}.interleaved_cycles")
    c.number(r.get("drift"), f"{where}.drift", signed=True)
    c.number(r.get("drift_limit"), f"{where}.drift_limit")
    if r.get("attempts") is not None:
        c.pos_int(r["attempts"], f"{where}.attempts")


def pvu_eager_us(rec: dict[str, Any]) -> float:
    """The unprofiled eager step (us) of a validated ``profiled_vs_unprofiled`` record: its pooled
    median ``unprofiled_eager_us`` where the harness wrote one, else the mean of before and after."""
    if rec.get("unprofiled_eager_us") is not None:
        return float(rec["unprofiled_eager_us"])
    return (float(rec["unprofiled_eager_us_before"]) + float(rec["unprofiled_eager_us_after"])) / 2


def pvu_window_ratio(rec: dict[str, Any]) -> float | None:
    """Unprofiled over profiled eager step of one interleaved window (``unprofiled_eager_us /
    profiled_eager_us``: wait-phase and active-phase steps of the same profiler cycles), or None
    for a record without a host-timed profiled step (blocks truth, older harness)."""
    if rec.get("profiled_eager_us") is None or rec.get("unprofiled_eager_us") is None:
        return None
    return float(rec["unprofiled_eager_us"]) / float(rec["profiled_eager_us"])


def pvu_drift(rec: dict[str, Any]) -> float:
    """Signed drift of a validated record's unprofiled eager step across its trace: ``after / before - 1``
    (computed from the two timings, so older files without a ``drift`` key read alike)."""
    return float(rec["unprofiled_eager_us_after"]) / float(rec["unprofiled_eager_us_before"]) - 1


def _check_graph_memory(c: _Checker, r: Any, i: int) -> None:
    where = f"graph_memory[{i}]"
    r = c.obj(r, where)
    c.keys(r, GRAPH_MEMORY_KEYS, where)
    c.string(r["model"], f"{where}.model")
    if r["mode"] not in GRAPH_MODES:
        raise c.fail(f"{where}.mode", f"is {r['mode']!r}, expected one of {', '.join(GRAPH_MODES)}")
    c.string(r["list_name"], f"{where}.list_name")
    sizes = c.sizes(r["capture_sizes"], f"{where}.capture_sizes")
    c.count(r["graphs"], f"{where}.graphs")
    nodes = c.obj(r["nodes_per_graph"], f"{where}.nodes_per_graph")
    for k, v in nodes.items():
        if not k.isdigit():
            raise c.fail(f"{where}.nodes_per_graph", f"has key {k!r}, expected a batch size")
        c.count(v, f"{where}.nodes_per_graph[{k!r}]", nullable=True)
    # Memory can shrink across a capture (freed cache), so these may be negative.
    for k in ("reserved_mib", "device_used_mib"):
        c.number(r[k], f"{where}.{k}", signed=True)
    c.number(r["capture_s"], f"{where}.capture_s")
    per = c.lst(r["per_size"], f"{where}.per_size")
    for j, p in enumerate(per):
        pw = f"{where}.per_size[{j}]"
        p = c.obj(p, pw)
        c.keys(p, GRAPH_MEMORY_SIZE_KEYS, pw)
        size = c.pos_int(p["size"], f"{pw}.size")
        if size not in sizes:
            raise c.fail(f"{pw}.size", f"{size} is not in capture_sizes")
        for k in ("reserved_mib", "device_used_mib"):
            c.number(p[k], f"{pw}.{k}", signed=True)
        c.number(p["capture_s"], f"{pw}.capture_s")
        c.count(p["nodes"], f"{pw}.nodes", nullable=True)


def _check_serving(c: _Checker, r: Any, i: int) -> None:
    where = f"serving[{i}]"
    r = c.obj(r, where)
    c.keys(r, SERVING_KEYS, where)
    c.string(r["model"], f"{where}.model")
    if r["graph_mode"] not in GRAPH_MODES:
        raise c.fail(f"{where}.graph_mode", f"is {r['graph_mode']!r}, expected one of {', '.join(GRAPH_MODES)}")
    sizes = set(c.sizes(r["capture_sizes"], f"{where}.capture_sizes"))
    steps = c.lst(r["steps"], f"{where}.steps")
    if not steps:
        raise c.fail(f"{where}.steps", "is empty")
    tokens = 0
    for j, s in enumerate(steps):
        sw = f"{where}.steps[{j}]"
        s = c.obj(s, sw)
        c.keys(s, SERVING_STEP_KEYS, sw)
        if s["index"] != j:
            raise c.fail(f"{sw}.index", f"is {s['index']!r}, expected {j}")
        tokens += c.pos_int(s["batch_size"], f"{sw}.batch_size")
        if s["mode"] not in SERVING_STEP_MODES:
            raise c.fail(f"{sw}.mode", f"is {s['mode']!r}, expected graph or eager")
        if not isinstance(s["fallback"], bool):
            raise c.fail(f"{sw}.fallback", f"is {s['fallback']!r}, expected true or false")
        if s["bucket"] is not None:
            b = c.pos_int(s["bucket"], f"{sw}.bucket")
            if b not in sizes or b < s["batch_size"]:
                raise c.fail(f"{sw}.bucket", f"{b} is not a captured size >= the batch {s['batch_size']}")
        if s["mode"] == "graph" and s["bucket"] is None:
            raise c.fail(sw, "is a graph step without a bucket")
        if s["fallback"] and (s["mode"] != "eager" or s["bucket"] is None):
            raise c.fail(sw, "is a fallback, which needs mode eager and the bucket it skipped")
    if r["tokens"] != tokens:
        raise c.fail(f"{where}.tokens", f"is {r['tokens']!r}, expected {tokens} (the sum of the batch sizes)")
    for j, k in enumerate(c.lst(r["kinds"], f"{where}.kinds")):
        kw = f"{where}.kinds[{j}]"
        k = c.obj(k, kw)
        c.keys(k, SERVING_KIND_KEYS, kw)
        if k["mode"] not in SERVING_STEP_MODES:
            raise c.fail(f"{kw}.mode", f"is {k['mode']!r}, expected graph or eager")
        c.pos_int(k["batch_size"], f"{kw}.batch_size")
        if k["bucket"] is not None:
            c.pos_int(k["bucket"], f"{kw}.bucket")
        c.number(k["us"], f"{kw}.us", positive=True, nullable=False)
    seq = c.lst(r["sequence_us"], f"{where}.sequence_us")
    if len(seq) != len(steps):
        raise c.fail(f"{where}.sequence_us", f"has {len(seq)} values for {len(steps)} steps")
    for j, x in enumerate(seq):
        c.number(x, f"{where}.sequence_us[{j}]", nullable=False)
    c.number(r["throughput_tokens_per_s"], f"{where}.throughput_tokens_per_s", positive=True)
    c.number(r["capture_s"], f"{where}.capture_s")
    for k in ("reserved_mib", "device_used_mib"):
        c.number(r[k], f"{where}.{k}", signed=True)
    if r["trace"] is not None:
        c.string(r["trace"], f"{where}.trace")


def _check_models(c: _Checker, models: Any) -> None:
    """The optional provenance fields of each ``models`` entry (dimensions are read by the planner)."""
    for name, m in c.obj(models, "models").items():
        where = f"models[{name!r}]"
        m = c.obj(m, where)
        src = m.get("model_source")
        if src is not None:
            src = c.obj(src, f"{where}.model_source")
            if src.get("kind") not in MODEL_SOURCE_KINDS:
                raise c.fail(f"{where}.model_source.kind",
                             f"is {src.get('kind')!r}, expected one of {', '.join(MODEL_SOURCE_KINDS)}")
            sha = src.get("sha256")
            if sha is not None and not (isinstance(sha, str) and len(sha) == 64
                                        and all(ch in "0123456789abcdef" for ch in sha)):
                raise c.fail(f"{where}.model_source.sha256", f"is {sha!r}, expected 64 lowercase hex digits")
        if m.get("compiled") is not None and not isinstance(m["compiled"], bool):
            raise c.fail(f"{where}.compiled", f"is {m['compiled']!r}, expected true or false")
        if m.get("compile") is not None:
            comp = c.obj(m["compile"], f"{where}.compile")
            c.number(comp.get("compile_s"), f"{where}.compile.compile_s")
            for k in ("graphs", "graphs_after_run"):
                c.count(comp.get(k), f"{where}.compile.{k}", nullable=True)
        if m.get("capture") is not None:
            cap = c.obj(m["capture"], f"{where}.capture")
            if not isinstance(cap.get("ok"), bool):
                raise c.fail(f"{where}.capture.ok", f"is {cap.get('ok')!r}, expected true or false")
            if cap["ok"] is False:
                c.string(cap.get("reason"), f"{where}.capture.reason")


_SECTIONS: dict[str, Callable[[_Checker, Any, int], None]] = {
    "profiled_vs_unprofiled": _check_pvu,
    "graph_memory": _check_graph_memory,
    "serving": _check_serving,
}


def validate_timings(obj: Any, path: str | Path = "timings.json") -> dict[str, Any]:
    """Check a parsed ``launchgap.timings/1`` document; return it with every row's batch size
    under ``batch_size`` (the older ``truth.json`` layout names it ``bs``).

    Raises :class:`InputError` (one line: file, field, reason) for anything else.
    The returned document is a shallow copy when rows were renamed, else ``obj`` itself.
    """
    c = _Checker(str(path))
    if not isinstance(obj, dict):
        raise InputError(f"not a timings file: the JSON is {type(obj).__name__}, expected an object", c.path)
    schema = obj.get("schema")
    if schema is not None and schema != SCHEMA:
        raise InputError(f"expected schema {SCHEMA!r}, found {schema!r}", c.path)
    if "rows" not in obj:
        raise InputError(f"not a timings file: no 'rows' list (schema {SCHEMA})", c.path)
    rows = c.lst(obj["rows"], "rows")
    checked = [_check_row(c, r, i) for i, r in enumerate(rows)]
    if obj.get("models") is not None:
        _check_models(c, obj["models"])
    for name, check in _SECTIONS.items():
        if obj.get(name) is not None:
            for i, item in enumerate(c.lst(obj[name], name)):
                check(c, item, i)
    if any(a is not b for a, b in zip(checked, rows)):
        return {**obj, "rows": checked}
    return obj


def load_timings(path: str | Path) -> dict[str, Any]:
    """Read and validate a timings file (see :func:`validate_timings`), through the one capped
    small-file reader (:func:`launchgap.files.read_small_file`)."""
    p = Path(path)
    try:
        text = read_small_file(p, "timings", MAX_TIMINGS_BYTES).decode("utf-8")
    except UnicodeDecodeError:
        raise InputError("not a timings JSON file (not UTF-8 text)", str(p)) from None
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InputError(f"not a timings JSON file ({exc.msg} at line {exc.lineno})", str(p)) from None
    return validate_timings(doc, p)


def write_timings(path: str | Path, doc: dict[str, Any]) -> None:
    """Validate ``doc`` and write it to ``path`` atomically (a crash mid-write keeps the old file)."""
    p = Path(path)
    validate_timings(doc, p)
    tmp = p.with_name(p.name + ".tmp")
    tmp.write_text(json.dumps(doc, indent=1) + "\n")
    os.replace(tmp, p)


__all__ = ["SCHEMA", "MODEL_SOURCE_KINDS", "PROFILER_SETTINGS", "PVU_KEYS", "PVU_OPTIONAL_KEYS", "PVU_TRUTHS", "pvu_window_ratio", "DRIFT_LIMIT", "GRAPH_MODES",
           "GRAPH_MEMORY_KEYS", "GRAPH_MEMORY_SIZE_KEYS", "pvu_eager_us", "pvu_drift", "validate_timings",
           "load_timings", "write_timings"]
