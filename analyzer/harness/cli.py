"""The ``record`` command's parser and runner, shared by ``launchgap record`` and ``python -m analyzer.harness``.

Sweep a Llama-style decoder over batch sizes, eager vs CUDA graph.

Writes ``timings.json`` (schema ``launchgap.timings/1``, unprofiled ground truth) and gzipped
torch.profiler traces ``<model>_bs<N>_<mode>.json.gz`` into ``--out``, then prints the
measured speedup curve. ``--curve TIMINGS.json`` prints that curve for an existing file.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from analyzer.errors import InputError

HELP = "record eager vs CUDA-graph decode over batch sizes (needs torch), or print a measured speedup curve"

DEFAULT_BATCH_SIZES = "1,2,4,8,16,32,64,128,256"


def prepare_parser(parser: argparse.ArgumentParser) -> None:
    from analyzer.harness.model import PRESETS

    what = parser.add_argument_group("what to record")
    what.add_argument("--model", help=f"preset(s), comma-separated: {', '.join(PRESETS)}")
    what.add_argument("--name", help="label of the model in timings.json and trace names (one --model only)")
    for dim in ("layers", "hidden", "heads", "kv-heads", "mlp", "vocab"):
        what.add_argument(f"--{dim}", type=int, metavar="N", help=f"override the preset's {dim}")
    what.add_argument("--batch-sizes", default=DEFAULT_BATCH_SIZES,
                      help=f"comma-separated sizes or power-of-two ranges like 1-256 (default {DEFAULT_BATCH_SIZES})")
    what.add_argument("--modes", default="eager,graph", help="eager, graph or both (default eager,graph)")
    what.add_argument("--out", type=Path, help="output folder for timings.json and traces")
    what.add_argument("--context-len", type=int, default=512, help="static KV-cache length (default 512)")
    what.add_argument("--start-pos", type=int, default=128, help="decode position of the first step (default 128)")
    what.add_argument("--device", choices=("auto", "cuda", "cpu"), default="auto")
    what.add_argument("--seed", type=int, default=0, help="seed of the random weights")

    how = parser.add_argument_group("how to measure")
    how.add_argument("--repeats", type=int, default=100, help="timed steps per median (default 100)")
    how.add_argument("--rounds", type=int, default=1,
                     help="timing rounds over all batch sizes; medians pool every round (default 1)")
    how.add_argument("--warmup", type=int, default=5, help="untimed steps before each timed run (default 5)")
    how.add_argument("--steps", type=int, default=3, help="profiled (active) steps per trace (default 3)")
    how.add_argument("--no-trace", action="store_true", help="timings only, no profiler traces")
    how.add_argument("--trace-batch-sizes", help="record traces only for these sizes (default: all swept)")
    how.add_argument("--no-kernel-count", action="store_true", help="skip counting kernels per step")
    how.add_argument("--no-micro", action="store_true", help="skip the launch-cost micro-benchmark")
    how.add_argument("--force", action="store_true", help="redo rows and traces that already exist")

    cur = parser.add_argument_group("speedup curve")
    cur.add_argument("--curve", type=Path, metavar="TIMINGS", help="print the curve of this timings.json and exit")
    cur.add_argument("--format", choices=("text", "markdown", "json"), default="text")
    cur.add_argument("--threshold", type=float, default=0.05, help="win below which graphs stop paying (default 0.05)")


def _curve_text(path: Path, fmt: str, threshold: float) -> str:
    from analyzer.harness.curve import build_curves, curves_to_dict, render_markdown, render_text
    from analyzer.timings import load_timings

    doc = load_timings(path)
    curves = build_curves(doc, threshold)
    if fmt == "json":
        return json.dumps(curves_to_dict(doc, curves), indent=1) + "\n"
    return (render_markdown if fmt == "markdown" else render_text)(doc, curves)


def run(args: argparse.Namespace) -> int:
    if not 0 < args.threshold < 1:
        raise InputError(f"--threshold {args.threshold} must lie in (0, 1)")
    if args.curve is not None:
        sys.stdout.write(_curve_text(args.curve, args.format, args.threshold))
        return 0
    if not args.model or args.out is None:
        raise InputError("record needs --model and --out (or --curve TIMINGS.json)")

    from analyzer.harness.model import resolve_config
    from analyzer.harness.sweep import Progress, SweepOptions, parse_batch_sizes, parse_modes, run_sweep

    presets = [m.strip() for m in args.model.split(",") if m.strip()]
    if args.name and len(presets) != 1:
        raise InputError("--name labels one model; give a single --model with it")
    dims = {"layers": args.layers, "hidden": args.hidden, "heads": args.heads, "kv_heads": args.kv_heads,
            "mlp": args.mlp, "vocab": args.vocab}
    models = tuple(resolve_config(p, args.name, **dims) for p in presets)
    opts = SweepOptions(
        models=models, batch_sizes=parse_batch_sizes(args.batch_sizes), out_dir=args.out,
        modes=parse_modes(args.modes), steps=args.steps, repeats=args.repeats, rounds=args.rounds,
        warmup=args.warmup,
        context_len=args.context_len, start_pos=args.start_pos, trace=not args.no_trace,
        trace_batch_sizes=parse_batch_sizes(args.trace_batch_sizes) if args.trace_batch_sizes else None,
        count_kernels=not args.no_kernel_count, micro=not args.no_micro, force=args.force, device=args.device,
        seed=args.seed,
    )

    def log(line: str) -> None:
        print(f"launchgap: {line}", file=sys.stderr, flush=True)

    result = run_sweep(opts, progress=Progress(sys.stderr), log=log)
    log(f"wrote {result.timings_path} ({len(result.rows)} new rows, {len(result.traces)} traces, "
        f"{len(result.skipped)} items done before)")
    sys.stdout.write(_curve_text(result.timings_path, args.format, args.threshold))
    return 0
