"""What several commands share: the analysis flags and their options object, the plan flags and their
:class:`~launchgap.planning.request.PlanRequest`, the progress line.

Commands import this module, never each other; nothing below ``analyzer/commands`` sees an
argparse ``Namespace``.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import TextIO

import numpy as np

from ..engines import MAX_CONFIG_CHARS, CaptureSettings, capture_sizes_of, parse_server_config
from ..dims import moe_routing
from ..errors import InputError
from ..files import read_json_file, read_small_file
from ..loaders import DEFAULT_MAX_TRACE_BYTES
from ..planning.planner import PADDING_POLICIES, PlanOptions
from ..planning.request import PlanInput, PlanRequest
from ..predict import DEFAULT_MODEL, PredictionModel
from ..report import AnalysisOptions
from ..steps import StepOptions
from ..timings import load_timings


def add_analysis_arguments(p: argparse.ArgumentParser) -> None:
    """Options shared by every command that analyses traces (analyze, plan, fleet)."""
    p.add_argument("--step-regex", help="regex over annotation/NVTX text that marks one decode step")
    p.add_argument("--batch-regex", help="regex whose first group is the batch size (default reads bs=8, "
                                         "batch_size=8, batch 8)")
    p.add_argument("--batch-op", help="read the batch size from a CPU op's input shapes: OP[:ARG[:DIM]]")
    p.add_argument("--observed-step-us", type=float, help="a real unprofiled step time (e.g. measured inter-token "
                                                          "latency) to calibrate the predicted speedup")
    p.add_argument("--max-trace-bytes", type=int, default=DEFAULT_MAX_TRACE_BYTES,
                   help="refuse traces that decompress past this many bytes (default 8 GiB)")
    p.add_argument("--node-us", type=float, default=None,
                   help="prediction model: per-kernel-node cost inside a graph replay, us (default: fitted from "
                        f"the trace's own graph replays, else {DEFAULT_MODEL.node_us})")
    p.add_argument("--long-kernel-us", type=float, default=DEFAULT_MODEL.long_kernel_us,
                   help="prediction model: kernels at least this long hide the node cost, us")
    p.add_argument("--graph-launch-us", type=float, default=DEFAULT_MODEL.graph_launch_us,
                   help="prediction model: cost of one graph launch, us")
    p.add_argument("--capture-sizes", metavar="LIST",
                   help="the CUDA-graph capture sizes the server ran with, e.g. 1,2,4,8,16, or its capture settings as "
                        "the server takes them (vLLM --cudagraph-capture-sizes / compilation_config JSON, SGLang "
                        "--cuda-graph-max-bs, a TensorRT-LLM cuda_graph_config YAML); default: the sizes the step "
                        "markers write, else the engine's default list for the trace's GPU, else inferred from the "
                        "graph steps (then padding is not costed)")
    p.add_argument("--server-config", metavar="FILE",
                   help="a file holding the server's config or launch command (same settings as --capture-sizes "
                        "reads); wins over --capture-sizes")
    p.add_argument("--graph-timings", metavar="FILE[:MODEL]",
                   help="harness timings (launchgap.timings/1) whose graph_us per batch size feed the padding cost "
                        "curve; MODEL picks one model of several")
    p.add_argument("--profiler-us-per-event", type=float, metavar="US",
                   help="the profiler's cost per recorded host event, us (default: estimated from the profiler "
                        "settings the trace shows)")


def model_config_routing(path: str, model: str | None) -> tuple[int, int] | None:
    """A mixture of experts' ``(E, k)`` from ``--model-config``: a Hugging Face config, or a timings file's
    ``models`` entry (``model``, or its only one); ``None`` for a dense model."""
    doc = read_json_file(path, "model config")
    models = doc.get("models") if isinstance(doc, dict) else None
    if isinstance(models, dict):
        entry = models.get(model) if model else (next(iter(models.values())) if len(models) == 1 else None)
        return moe_routing(entry) if isinstance(entry, dict) else None
    return moe_routing(doc)


def analysis_options(args: argparse.Namespace) -> AnalysisOptions:
    if args.observed_step_us is not None and args.observed_step_us <= 0:
        raise InputError("--observed-step-us must be positive")
    if args.max_trace_bytes <= 0:
        raise InputError("--max-trace-bytes must be positive")
    per_event = getattr(args, "profiler_us_per_event", None)
    if per_event is not None and per_event < 0:
        raise InputError("--profiler-us-per-event must be >= 0")
    cfg = server_config(getattr(args, "server_config", None), getattr(args, "capture_sizes", None))
    plain = cfg is not None and not cfg.engine  # sizes alone: --capture-sizes 1,2,4
    model_config = getattr(args, "model_config", None)  # a mixture of experts' routing scales its expert kernels
    return AnalysisOptions(
        capture_sizes=cfg.sizes if plain else None, server_config=None if plain else cfg,
        moe_routing=model_config_routing(model_config, getattr(args, "model", None)) if model_config else None,
        graph_timings_us=graph_timings(getattr(args, "graph_timings", None)),
        steps=StepOptions(step_regex=args.step_regex, batch_regex=args.batch_regex, batch_op=args.batch_op),
        model=PredictionModel(node_us=args.node_us if args.node_us is not None else DEFAULT_MODEL.node_us,
                              node_us_fixed=args.node_us is not None, long_kernel_us=args.long_kernel_us,
                              graph_launch_us=args.graph_launch_us,
                              profiler_us_per_host_event=per_event),
        observed_step_us=args.observed_step_us,
    )


def add_plan_flags(p: argparse.ArgumentParser) -> None:
    """The capture plan's inputs, budgets and policy: the same flags for ``plan`` and ``fleet``."""
    g = p.add_argument_group("capture plan")
    g.add_argument("--timings", metavar="FILE", help="harness timings.json (or truth.json): unprofiled costs, "
                                                     "preferred over trace-derived costs")
    g.add_argument("--model", help="which model's rows to use when the timings file holds several")
    g.add_argument("--distribution", metavar="FILE", help="batch-size histogram: CSV 'batch_size,count' or JSON "
                                                          "{\"8\": 120, ...}; wins over the traces' steps")
    g.add_argument("--max-graphs", type=int, metavar="K", help="capture at most K graphs (default: no limit)")
    g.add_argument("--memory-mib", "--memory-budget-mib", dest="memory_budget_mib", type=float, metavar="M",
                   help="graph memory allowed (MiB of device memory, as the driver counts it)")
    g.add_argument("--capture-seconds", dest="capture_budget_s", type=float, metavar="T",
                   help="capture (start-up) time allowed, seconds; needs the model's dimensions")
    g.add_argument("--kv-bytes-per-token", type=float, metavar="B",
                   help="KV-cache bytes per token, to state graph memory as KV-cache tokens lost (default from "
                        "the model's dimensions: 2 x layers x kv_heads x head_dim x dtype bytes)")
    g.add_argument("--model-config", metavar="FILE",
                   help="the model's dimensions: a Hugging Face config.json or the harness's layout (default: the "
                        "timings file's models section); switches graph memory to the fitted memory model; a "
                        "mixture of experts' experts and experts per token scale the traces' expert kernels")
    g.add_argument("--memory-model", metavar="FILE",
                   help="a fitted memory model (python -m launchgap.planning.memory fit); default: the committed one")
    g.add_argument("--graph-memory-mib", type=float, metavar="X",
                   help="a constant memory per graph (MiB) instead of the memory model; default without model "
                        "dimensions: measured by the harness, else an assumed figure")
    g.add_argument("--max-batch-size", type=int, metavar="N", help="capture no size above N (server lists are cut "
                                                                   "there too)")
    g.add_argument("--padding", choices=PADDING_POLICIES, default="pad",
                   help="pad a batch up to the next captured size (default) or graph exact matches only")
    g.add_argument("--win-threshold", type=float, default=0.05,
                   help="crossover: the graph win (eager/graph - 1) under which graphs stop paying (default 0.05)")
    g.add_argument("--workload", metavar="ID", help="plan for this workload only (an id such as wl-1a2b3c4d, as "
                                                    "analyze reports it); default: one plan per workload")


def request_from_args(args: argparse.Namespace, found_timings: list[Path] | None = None) -> PlanRequest:
    """The :class:`PlanRequest` of the plan flags (no traces yet: callers add them per workload).

    ``found_timings``: timings files found among the command's paths (``plan DIR``); one is used
    as ``--timings`` when that flag is absent.
    """
    notes: list[str] = []
    timings = args.timings
    found = list(found_timings or [])
    if found:
        if timings is None:
            if len(found) > 1:
                raise InputError(f"several timings files among the inputs ({', '.join(str(f) for f in found)}); "
                                 f"pass one with --timings")
            timings = str(found[0])
            notes.append(f"costs from the timings file found among the inputs: {timings}")
        else:
            notes.append(f"ignored timings file(s) among the inputs in favour of --timings: "
                         f"{', '.join(str(f) for f in found)}")
    if args.model and timings is None:
        raise InputError("--model selects rows of a timings file; none was given (--timings)")
    inputs: list[PlanInput] = []
    if timings is not None:
        inputs.append(PlanInput("timings", timings, ("costs", "model_dims", "graph_nodes"), path=timings,
                                model=args.model))
    if args.distribution:
        inputs.append(PlanInput("distribution", args.distribution, ("distribution",), path=args.distribution))
    if args.model_config:
        inputs.append(PlanInput("model_config", args.model_config, ("model_dims",), path=args.model_config,
                                model=args.model))
    if args.memory_model:
        inputs.append(PlanInput("memory_model", args.memory_model, ("memory_model",), path=args.memory_model))
    cfg = server_config(getattr(args, "server_config", None), getattr(args, "capture_sizes", None))
    if cfg is not None:  # the server's capture list now: scored beside the plan
        where = f"--server-config {args.server_config}" if getattr(args, "server_config", None) else "--capture-sizes"
        inputs.append(PlanInput("capture_sizes", where + (f" ({cfg.describe()})" if cfg.engine else ""),
                                ("capture_sizes",), value=tuple(capture_sizes_of(cfg))))
    opts = PlanOptions(max_graphs=args.max_graphs, memory_budget_mib=args.memory_budget_mib,
                       graph_memory_mib=args.graph_memory_mib, max_batch_size=args.max_batch_size,
                       padding=args.padding, win_threshold=args.win_threshold,
                       capture_budget_s=args.capture_budget_s, kv_bytes_per_token=args.kv_bytes_per_token)
    return PlanRequest(tuple(inputs), opts, tuple(notes))


class Progress:
    """The commands' one progress printer, on stderr.

    Two uses, one look: :meth:`show` puts a transient status line (``analyze``'s "parsing
    FILE...") that is redrawn in place on a terminal and not written at all elsewhere (logs
    stay clean); with ``total`` items, :meth:`advance` counts them (``fleet``): on a terminal
    the count line (done, percent, items/s, MB/s, failures, ETA) is redrawn after every item,
    elsewhere it is written as a line each tenth done. :meth:`note` writes a permanent line
    (a failure) in either case; :meth:`done` ends: it clears the status line, or, when
    counting on a terminal, leaves the final count line.
    """

    def __init__(self, total: int = 0, total_bytes: int = 0, *, label: str = "", unit: str = "traces",
                 stream: TextIO | None = None) -> None:
        self.stream = stream if stream is not None else sys.stderr
        self.live = bool(getattr(self.stream, "isatty", lambda: False)())
        self.total, self.total_bytes = total, total_bytes
        self.prefix = f"{label}: " if label else ""
        self.unit = unit
        self.count = self.failed = self.bytes = 0
        self.t0 = time.perf_counter()
        self._next_tenth = 1

    def show(self, text: str) -> None:
        """A transient status line (terminal only)."""
        if self.live:
            self._write("\r\x1b[K" + text)

    def note(self, text: str) -> None:
        """A permanent line, on a terminal written above the status line."""
        self._write(("\r\x1b[K" if self.live else "") + self.prefix + text + "\n")

    def line(self) -> str:
        """The count line: ``[done/total] pct  rate  MB/s  failed  ETA``."""
        dt = max(time.perf_counter() - self.t0, 1e-9)
        rate = self.count / dt
        eta = (self.total - self.count) / rate if rate > 0 else 0.0
        pct = self.count / self.total if self.total else 1.0
        return (f"{self.prefix}[{self.count}/{self.total}] {pct:.0%}  {rate:.2f} {self.unit}/s  "
                f"{self.bytes / 1e6 / dt:.1f} MB/s  {self.failed} failed  ETA {eta:.0f}s")

    def advance(self, size_bytes: int = 0, failure: str | None = None) -> None:
        """One item done (``failure``: why it failed, written as a permanent line)."""
        self.count += 1
        self.bytes += size_bytes
        if failure is not None:
            self.failed += 1
            self.note(f"FAILED {failure}")
        if self.live:
            self.show(self.line())
        elif self.count * 10 >= self._next_tenth * self.total or self.count == self.total:
            self._next_tenth = self.count * 10 // max(self.total, 1) + 1
            self._write(self.line() + "\n")

    def done(self) -> None:
        """End: clear the status line; when counting on a terminal, leave the final count there."""
        if self.live:
            self._write("\r\x1b[K" + (self.line() + "\n" if self.total else ""))

    def _write(self, text: str) -> None:
        self.stream.write(text)
        self.stream.flush()


def server_config(path: str | None, text: str | None) -> CaptureSettings | None:
    """``--server-config FILE`` (its text), else ``--capture-sizes TEXT`` (sizes like ``1,2,4,8`` or a server's
    capture settings), read by :func:`launchgap.engines.parse_server_config`; ``None`` when neither is given."""
    if path is not None:
        # the one capped small-file reader; a stray byte of another encoding does not hide the settings
        body = read_small_file(path, "server config", MAX_CONFIG_CHARS).decode("utf-8", errors="replace")
        try:
            return parse_server_config(body)
        except InputError as exc:
            raise InputError(exc.message, path) from None
    if text is None:
        return None
    try:
        return parse_server_config(text)
    except InputError as exc:
        raise InputError(f"--capture-sizes: {exc.message}") from None


def graph_timings(spec: str | None) -> tuple[tuple[int, float], ...] | None:
    """``--graph-timings FILE[:MODEL]``: the rows' ``graph_us`` by ``batch_size`` (median of repeats)."""
    if spec is None:
        return None
    path, model = spec, None
    if not Path(spec).exists() and ":" in spec:
        path, model = spec.rsplit(":", 1)
    doc = load_timings(path)
    rows = [r for r in doc.get("rows", []) if r.get("graph_us") is not None]
    models = sorted({str(r.get("model")) for r in rows})
    if model is None and len(models) > 1:
        raise InputError(f"timings hold several models ({', '.join(models)}): give FILE:MODEL", path)
    if model is not None:
        rows = [r for r in rows if str(r.get("model")) == model]
    if not rows:
        raise InputError("no rows with graph_us" + (f" for model {model!r}" if model else ""), path)
    by: dict[int, list[float]] = {}
    for r in rows:  # rows of a small JSON file
        by.setdefault(int(r.get("batch_size", r.get("bs"))), []).append(float(r["graph_us"]))
    return tuple((b, float(np.median(v))) for b, v in sorted(by.items()))
