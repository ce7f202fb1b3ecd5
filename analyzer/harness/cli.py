"""The ``record`` command's parser and runner, shared by ``launchgap record`` and ``python -m analyzer.harness``.

Records a Llama-style decoder without and with a profiler: a sweep over batch sizes in
eager, FULL-graph and piecewise modes, profiled-vs-unprofiled rows per profiler setting,
graph memory of capture lists, and serving replays (see :mod:`launchgap.harness.sweep`).
Writes ``timings.json`` (schema ``launchgap.timings/1``) and gzipped torch.profiler traces
into ``--out``, then prints what it measured. ``--curve TIMINGS.json`` prints the speedup
curve of an existing file; ``--dry-run`` prints the plan without touching torch.
"""
from __future__ import annotations

import argparse
import json
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

from ..errors import InputError
from ..timings import DRIFT_LIMIT

HELP = "record decode steps eager, as CUDA graphs (full, piecewise), their graph memory and serving replays " \
       "(needs torch), or print a measured speedup curve"

DEFAULT_BATCH_SIZES = "1,2,4,8,16,32,64,128,256"


def prepare_parser(parser: argparse.ArgumentParser) -> None:
    from .lists import PRESET_EXAMPLES
    from .model import PRESETS
    from .sweep.options import ATTENTION_BACKENDS
    from .serving import DEFAULT_SAMPLER, DEFAULT_STEPS

    what = parser.add_argument_group("what to record")
    what.add_argument("--model", help=f"preset(s), comma-separated: {', '.join(PRESETS)}")
    what.add_argument("--hf-config", action="append", default=[], metavar="PATH",
                      help="a transformers config.json (or a folder holding one): the causal LM it describes, "
                           "random bf16 weights, static KV cache (needs transformers; nothing is downloaded); "
                           "repeatable")
    what.add_argument("--compile", action="store_true",
                      help="run the step's forward through torch.compile (default mode, dynamic batch dimension, "
                           "as vLLM compiles), then capture graphs per size; models are named NAME-compiled")
    what.add_argument("--attention-backend", default="auto", choices=ATTENTION_BACKENDS,
                      help="the SDPA kernel the attention runs: auto (PyTorch's choice; cuDNN on the H200), cudnn, "
                           "efficient (CUTLASS memory-efficient), flash, math (batched matmuls and softmax); or eager: "
                           "no SDPA, matmul, softmax, matmul in the model's dtype (transformers' eager attention); "
                           "models other than auto are named NAME-BACKEND")
    what.add_argument("--name", help="label of the model in timings.json and trace names (one model only)")
    for dim in ("layers", "hidden", "heads", "kv-heads", "mlp", "vocab"):
        what.add_argument(f"--{dim}", type=int, metavar="N", help=f"override the preset's {dim}")
    what.add_argument("--batch-sizes",
                      help="sizes to sweep: 1,2,4, power-of-two ranges 1-256, every size 1..64, steps 8..256:8 "
                           f"(default {DEFAULT_BATCH_SIZES}; no sweep when only --capture-lists/--capture-sizes "
                           "are given)")
    what.add_argument("--modes", default="eager,graph",
                      help="sweep modes: eager, graph (one FULL graph), piecewise (graphs between eager "
                           "attentions; a --hf-config model's forward is cut at its transformers attention calls); "
                           "default eager,graph")
    what.add_argument("--out", type=Path, help="output folder for timings.json and traces")
    what.add_argument("--context-len", type=int, default=512, help="static KV-cache length (default 512)")
    what.add_argument("--start-pos", type=int, default=128, help="decode position of the first step (default 128)")
    what.add_argument("--device", choices=("auto", "cuda", "cpu"), default="auto")
    what.add_argument("--seed", type=int, default=0, help="seed of the random weights and of serving sequences")

    how = parser.add_argument_group("how to measure")
    how.add_argument("--repeats", type=int, default=100, help="timed steps per median (default 100)")
    how.add_argument("--rounds", type=int, default=1,
                     help="timing rounds over all batch sizes; medians pool every round (default 1)")
    how.add_argument("--warmup", type=int, default=5, help="untimed steps before each timed run (default 5)")
    how.add_argument("--steps", type=int, default=3, help="profiled (active) steps per trace (default 3)")
    how.add_argument("--no-trace", action="store_true", help="no per-mode sweep traces (other traces still)")
    how.add_argument("--trace-batch-sizes",
                     help="trace (and profile, --profiler-settings) only these of the swept sizes (default: all)")
    how.add_argument("--no-kernel-count", action="store_true", help="skip counting kernels per step")
    how.add_argument("--no-micro", action="store_true", help="skip the launch-cost micro-benchmark")
    how.add_argument("--force", action="store_true", help="redo rows, traces and entries that already exist")
    how.add_argument("--dry-run", action="store_true", help="print what would be recorded and exit (no torch)")

    prof = parser.add_argument_group("profiler overhead")
    prof.add_argument("--profiler-settings", metavar="LIST",
                      help="for each traced size and setting (plain, shapes, stack, full): an eager trace under "
                           "that setting between two unprofiled blocks (eager steps and graph replays)")
    prof.add_argument("--max-drift", type=float, default=DRIFT_LIMIT, metavar="F",
                      help="record a trace again when the unprofiled eager step moved by more than F "
                           f"(after / before - 1) across it (default {DRIFT_LIMIT})")
    prof.add_argument("--interleave", type=int, default=0, metavar="N",
                      help="time the unprofiled eager step inside each trace's window: N profiler cycles of "
                           "wait (unprofiled) and active (profiled) steps; the last cycle's trace is kept "
                           "(default 0: blocks before and after the trace)")
    prof.add_argument("--drift-retries", type=int, default=2, metavar="N",
                      help="times a drifted trace is recorded again; the last attempt is kept, its drift noted "
                           "(default 2)")

    mem = parser.add_argument_group("graph memory")
    mem.add_argument("--capture-lists", action="append", default=[], metavar="LISTS",
                     help="capture lists whose memory, capture time and nodes to measure, largest first in one "
                          f"shared pool: presets ({', '.join(PRESET_EXAMPLES)}, also pow2-N, all-A-B, single-N, "
                          "vllm-default-N), comma-separated, or one explicit list [NAME=]1,2,4,8 per flag; "
                          "repeatable")
    mem.add_argument("--memory-modes", default="full,piecewise", help="full, piecewise or both (default both)")

    srv = parser.add_argument_group("serving")
    srv.add_argument("--capture-sizes", action="append", default=[], metavar="LIST",
                     help="serving mode: one capture list ([NAME=]SIZES or a preset); repeat to replay the same "
                          "sequence on several lists")
    srv.add_argument("--distribution", type=Path, metavar="FILE",
                     help='batch-size histogram (JSON {"8": 120, ...} or CSV batch_size,count) to replay')
    srv.add_argument("--serving-steps", type=int, metavar="N",
                     help=f"steps in the sequence (default: the distribution's counts, else {DEFAULT_STEPS})")
    srv.add_argument("--sampler", default=DEFAULT_SAMPLER, metavar="MEDIAN,SIGMA,MAX",
                     help=f"log-normal batch sizes when no --distribution (default {DEFAULT_SAMPLER})")
    srv.add_argument("--inject-fallbacks", type=int, default=0, metavar="K",
                     help="K steps (seeded) run eagerly although their bucket is captured")
    srv.add_argument("--serving-graphs", choices=("full", "piecewise"), default="full",
                     help="graph mode of the captured lists: full, or piecewise (graphs between eager "
                          "attentions, --hf-config models too; default full)")
    srv.add_argument("--serving-rounds", type=int, default=5, help="timed passes over the sequence (default 5)")

    cur = parser.add_argument_group("speedup curve")
    cur.add_argument("--curve", type=Path, metavar="TIMINGS", help="print the curve of this timings.json and exit")
    cur.add_argument("--format", choices=("text", "markdown", "json"), default="text")
    cur.add_argument("--threshold", type=float, default=0.05, help="win below which graphs stop paying (default 0.05)")


def _curve_text(doc: dict[str, Any], fmt: str, threshold: float) -> str:
    from .curve import build_curves, curves_to_dict, render_markdown, render_text

    curves = build_curves(doc, threshold)
    if fmt == "json":
        return json.dumps(curves_to_dict(doc, curves), indent=1) + "\n"
    return (render_markdown if fmt == "markdown" else render_text)(doc, curves)


def build_options(args: argparse.Namespace):  # -> SweepOptions
    """The :class:`~launchgap.harness.sweep.SweepOptions` of parsed arguments (no torch needed)."""
    from ..distribution import load_distribution
    from .lists import parse_batch_sizes, parse_capture_list, parse_capture_lists
    from .model import resolve_config
    from .profiling import parse_profiler_settings
    from .serving import ServingOptions, build_sequence, parse_sampler
    from .sweep import SweepOptions, parse_modes
    from ..timings import GRAPH_MODES

    from .hf import read_hf_config

    presets = [m.strip() for m in (args.model or "").split(",") if m.strip()]
    if args.name and len(presets) + len(args.hf_config) != 1:
        raise InputError("--name labels one model; give a single --model or --hf-config with it")
    dims = {"layers": args.layers, "hidden": args.hidden, "heads": args.heads, "kv_heads": args.kv_heads,
            "mlp": args.mlp, "vocab": args.vocab}
    if args.hf_config and any(v is not None for v in dims.values()) and not presets:
        raise InputError("--layers/--hidden/... override a preset's dimensions; edit the config.json instead")
    models: tuple[Any, ...] = tuple(resolve_config(p, args.name, **dims) for p in presets)
    models += tuple(read_hf_config(p, args.name) for p in args.hf_config)
    suffix = (f"-{args.attention_backend}" if args.attention_backend != "auto" else "") + \
        ("-compiled" if args.compile else "")
    models = tuple(replace(m, name=m.name + suffix) for m in models) if suffix else models
    if len({m.name for m in models}) != len(models):
        raise InputError("two models share a name; label them apart (one --name per run, or other folders)")
    lists = parse_capture_lists(args.capture_lists) if args.capture_lists else []
    serving = [parse_capture_list(v) for v in args.capture_sizes]
    if len({n for n, _ in serving}) != len(serving):
        raise InputError("--capture-sizes: two lists share a name; name them NAME=SIZES")
    sweep_text = args.batch_sizes or (None if lists or serving else DEFAULT_BATCH_SIZES)
    memory_modes = tuple(dict.fromkeys(m.strip() for m in args.memory_modes.split(",") if m.strip()))
    if not memory_modes or any(m not in GRAPH_MODES for m in memory_modes):
        raise InputError(f"--memory-modes {args.memory_modes!r}: choose full, piecewise or both")
    sequence: list[int] = []
    source = ""
    if serving:
        dist = load_distribution(args.distribution) if args.distribution else None
        sequence, source = build_sequence(dist, args.serving_steps, args.seed, parse_sampler(args.sampler))
    elif args.distribution or args.inject_fallbacks:
        raise InputError("--distribution and --inject-fallbacks belong to serving mode: give --capture-sizes")
    if args.serving_rounds < 1:
        raise InputError("--serving-rounds must be at least 1")
    return SweepOptions(
        models=models, batch_sizes=parse_batch_sizes(sweep_text) if sweep_text else (), out_dir=args.out,
        modes=parse_modes(args.modes), steps=args.steps, repeats=args.repeats, rounds=args.rounds,
        warmup=args.warmup, context_len=args.context_len, start_pos=args.start_pos, trace=not args.no_trace,
        trace_batch_sizes=parse_batch_sizes(args.trace_batch_sizes) if args.trace_batch_sizes else None,
        count_kernels=not args.no_kernel_count, micro=not args.no_micro, force=args.force, device=args.device,
        seed=args.seed,
        profiler_settings=parse_profiler_settings(args.profiler_settings) if args.profiler_settings else (),
        max_drift=args.max_drift, drift_retries=args.drift_retries, interleave=args.interleave,
        capture_lists=tuple((n, tuple(s)) for n, s in lists), memory_modes=memory_modes,
        serving_lists=tuple((n, tuple(s)) for n, s in serving), serving_sequence=tuple(sequence),
        serving_source=source,
        serving=ServingOptions(graph_mode=args.serving_graphs, fallbacks=args.inject_fallbacks, seed=args.seed,
                               repeats=args.repeats, warmup=args.warmup, rounds=args.serving_rounds,
                               trace=True),
        compile=args.compile, attention_backend=args.attention_backend,
    )


def _plan_text(opts: Any) -> str:
    """What a run of ``opts`` records, for ``--dry-run``."""
    from .curve import describe_attention
    from .serving import plan_steps, step_label

    lines = [f"models: {', '.join(f'{c.name} ({c.layers} layers, hidden {c.hidden})' for c in opts.models)}"
             + (" (torch.compile, dynamic batch)" if opts.compile else "")
             + (f" (attention: {describe_attention(opts.attention_backend)})" if opts.attention_backend != "auto"
                else ""),
             f"out: {opts.out_dir}"]
    if opts.batch_sizes:
        lines.append(f"sweep: {', '.join(opts.modes)} at {len(opts.batch_sizes)} sizes "
                     f"{_short(opts.batch_sizes)}; {opts.rounds} x {opts.repeats} timed steps; "
                     + (f"traces at {_short(opts.traced_sizes)}" if opts.trace else "no traces"))
    if opts.profiler_settings:
        truth = (f"the unprofiled step timed inside each trace's window ({opts.interleave} profiler cycles of "
                 f"unprofiled and {opts.steps} profiled steps), graph replays in blocks of {opts.repeats} around it; "
                 f"a trace recorded again when the eager step drifts over {opts.max_drift:.0%} across its window"
                 if opts.interleave else
                 f"unprofiled blocks of {opts.repeats} steps between the traces; a trace recorded again when "
                 f"the eager step drifts over {opts.max_drift:.0%} across it")
        lines.append(f"profiled vs unprofiled: {', '.join(opts.profiler_settings)} at {_short(opts.traced_sizes)}; "
                     f"{truth} (at most {opts.drift_retries} times)")
    for name, sizes in opts.capture_lists:
        lines.append(f"graph memory {'+'.join(opts.memory_modes)} {name}: {len(sizes)} sizes {_short(sizes)}")
    for name, sizes in opts.serving_lists:
        steps = plan_steps(opts.serving_sequence, sizes, opts.serving.fallbacks, opts.serving.seed)
        fb = [s["index"] for s in steps if s["fallback"]]
        un = [s["index"] for s in steps if s["bucket"] is None]
        lines.append(f"serving {opts.serving.graph_mode} {name} ({_short(sizes)}): {len(steps)} steps, "
                     f"{sum(s['batch_size'] for s in steps)} tokens, fallbacks at {fb}, uncaptured at {un}; "
                     f"first: {step_label(steps[0], opts.serving.graph_mode)}")
    if opts.serving_lists:
        lines.append(f"sequence ({opts.serving_source}): {list(opts.serving_sequence)}")
    return "\n".join(lines) + "\n"


def _short(sizes: Any) -> str:
    sizes = list(sizes)
    return str(sizes) if len(sizes) <= 12 else f"[{', '.join(map(str, sizes[:6]))}, ..., {sizes[-1]}]"


def _summary_text(result: Any) -> str:
    """Profiled-vs-unprofiled, graph-memory and serving results of this run, as text tables."""
    lines: list[str] = []
    if result.profiled:
        lines += ["", f"{'model':<14} {'bs':>4} {'profiler':<8} {'eager before':>13} {'eager after':>12} "
                      f"{'drift':>7} {'tries':>5} {'graph':>9}"]
        for r in result.profiled:
            g = r["unprofiled_graph_us"]
            lines.append(f"{r['model']:<14} {r['batch_size']:>4} {r['profiler']:<8} "
                         f"{r['unprofiled_eager_us_before']:>13,.1f} {r['unprofiled_eager_us_after']:>12,.1f} "
                         f"{r['drift']:>+7.1%} {r['attempts']:>5} {'-' if g is None else format(g, ',.1f'):>9}")
    if result.graph_memory:
        lines += ["", f"{'model':<14} {'mode':<9} {'list':<16} {'graphs':>6} {'device MiB':>11} {'reserved MiB':>13} "
                      f"{'capture s':>10}"]
        for e in result.graph_memory:
            lines.append(f"{e['model']:<14} {e['mode']:<9} {e['list_name'][:16]:<16} {e['graphs']:>6} "
                         f"{e['device_used_mib']:>11,.1f} {e['reserved_mib']:>13,.1f} {e['capture_s']:>10.2f}")
    if result.serving:
        lines += ["", f"{'model':<14} {'list':<16} {'steps':>5} {'tokens/s':>10} {'fallbacks':>9} "
                      f"{'device MiB':>11} {'capture s':>10}"]
        for e in result.serving:
            dev, cap = e["device_used_mib"], e["capture_s"]
            lines.append(f"{e['model']:<14} {e['list_name'][:16]:<16} {len(e['steps']):>5} "
                         f"{e['throughput_tokens_per_s']:>10,.0f} {len(e['fallback_steps']):>9} "
                         f"{'-' if dev is None else format(dev, ',.1f'):>11} "
                         f"{'-' if cap is None else format(cap, '.2f'):>10}")
    return "\n".join(lines) + "\n" if lines else ""


def run(args: argparse.Namespace) -> int:
    if not 0 < args.threshold < 1:
        raise InputError(f"--threshold {args.threshold} must lie in (0, 1)")
    if args.curve is not None:
        from ..timings import load_timings

        sys.stdout.write(_curve_text(load_timings(args.curve), args.format, args.threshold))
        return 0
    if not (args.model or args.hf_config) or args.out is None:
        raise InputError("record needs --model or --hf-config, and --out (or --curve TIMINGS.json)")
    opts = build_options(args)
    opts.validate()
    if args.dry_run:
        sys.stdout.write(_plan_text(opts))
        return 0

    from .sweep import Progress, run_sweep
    from ..timings import load_timings

    def log(line: str) -> None:
        print(f"launchgap: {line}", file=sys.stderr, flush=True)

    result = run_sweep(opts, progress=Progress(sys.stderr), log=log)
    log(f"wrote {result.timings_path} ({len(result.rows)} new rows, {len(result.traces)} traces, "
        f"{len(result.skipped)} items done before)")
    doc = load_timings(result.timings_path)
    if opts.batch_sizes and doc["rows"]:
        sys.stdout.write(_curve_text(doc, args.format, args.threshold))
    sys.stdout.write(_summary_text(result))
    return 0
