"""What several commands share: the analysis flags, their options object, the progress line.

Commands import this module, never each other; nothing below ``analyzer/commands`` sees an
argparse ``Namespace``.
"""
from __future__ import annotations

import argparse
import sys

from ..errors import InputError
from ..loaders import DEFAULT_MAX_TRACE_BYTES
from ..predict import DEFAULT_MODEL, PredictionModel
from ..report import AnalysisOptions
from ..steps import StepOptions


def add_analysis_arguments(p: argparse.ArgumentParser) -> None:
    """Options shared by every command that analyses traces (analyze, plan, fleet)."""
    p.add_argument("--step-regex", help="regex over annotation/NVTX text that marks one decode step")
    p.add_argument("--batch-regex", help="regex whose first group is the batch size (default reads bs=8, "
                                         "batch_size=8, batch 8)")
    p.add_argument("--batch-op", help="read the batch size from a CPU op's input shapes: OP[:ARG[:DIM]]")
    p.add_argument("--observed-step-us", type=float, help="a real unprofiled step time (e.g. measured inter-token "
                                                          "latency) to calibrate the predicted speedup")
    p.add_argument("--max-trace-bytes", type=int, default=DEFAULT_MAX_TRACE_BYTES,
                   help="refuse traces that decompress past this many bytes (default 2 GiB)")
    p.add_argument("--node-us", type=float, default=DEFAULT_MODEL.node_us,
                   help="prediction model: per-kernel-node cost inside a graph replay, us")
    p.add_argument("--long-kernel-us", type=float, default=DEFAULT_MODEL.long_kernel_us,
                   help="prediction model: kernels at least this long hide the node cost, us")
    p.add_argument("--graph-launch-us", type=float, default=DEFAULT_MODEL.graph_launch_us,
                   help="prediction model: cost of one graph launch, us")
    p.add_argument("--profiler-us-per-event", type=float, metavar="US",
                   help="the profiler's cost per recorded host event, us (default: estimated from the profiler "
                        "settings the trace shows)")


def analysis_options(args: argparse.Namespace) -> AnalysisOptions:
    if args.observed_step_us is not None and args.observed_step_us <= 0:
        raise InputError("--observed-step-us must be positive")
    if args.max_trace_bytes <= 0:
        raise InputError("--max-trace-bytes must be positive")
    per_event = getattr(args, "profiler_us_per_event", None)
    if per_event is not None and per_event < 0:
        raise InputError("--profiler-us-per-event must be >= 0")
    return AnalysisOptions(
        steps=StepOptions(step_regex=args.step_regex, batch_regex=args.batch_regex, batch_op=args.batch_op),
        model=PredictionModel(node_us=args.node_us, long_kernel_us=args.long_kernel_us,
                              graph_launch_us=args.graph_launch_us,
                              profiler_us_per_host_event=per_event),
        observed_step_us=args.observed_step_us,
    )


class Progress:
    """One status line on stderr while parsing, only when stderr is a terminal."""

    def __init__(self) -> None:
        self.live = sys.stderr.isatty()

    def show(self, text: str) -> None:
        if self.live:
            sys.stderr.write("\r\x1b[K" + text)
            sys.stderr.flush()

    def done(self) -> None:
        if self.live:
            sys.stderr.write("\r\x1b[K")
            sys.stderr.flush()
