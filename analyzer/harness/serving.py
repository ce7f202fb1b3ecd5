"""Serving mode: a sequence of real batch sizes run as a server runs them, padded to captured sizes.

A server captures a list of batch sizes (largest first, one shared memory pool) and runs
each decode step of real batch ``b`` as the graph of its **bucket**, the smallest captured
size ``>= b`` (``b`` rows of work plus ``bucket - b`` rows of padding); a batch above the
largest captured size runs eagerly (an *uncaptured size*). A *fallback* is a step that
runs eagerly although a bucket exists (a broken lookup, a truncated maximum): injected
here on purpose (``--inject-fallbacks K``, seeded), and recorded.

Step annotations in the trace, one per step (``record_function`` and NVTX):

* ``decode_step[bs=37 bucket=48 graph]``: a FULL-graph step (``piecewise`` instead of
  ``graph`` in piecewise mode): real batch 37 run as the graph of 48;
* ``decode_step[bs=37 eager]``: an eager step, whether an uncaptured size or a fallback (the
  annotation does not say which: that is for the analyzer to find; ``timings.json`` knows).

The sequence: ``--distribution FILE`` (a histogram; with integer counts and no
``--serving-steps``, exactly those steps in a seeded shuffle, else ``--serving-steps`` draws
from it), or a seeded log-normal sampler of batch sizes (``--sampler MEDIAN,SIGMA,MAX``).
Several capture lists (``--capture-sizes`` repeated) replay the same sequence; their
throughput rounds are interleaved so that a slow phase of the host hits every list.

Measured per list: unprofiled truth per step kind (``(mode, batch, bucket)``: graph kinds
of one bucket share the timing of that bucket's replay, eager kinds time the eager step of
that batch), per-step times of the sequence and its throughput (real tokens per second of
the whole sequence, median over rounds), capture seconds and graph memory of the list (as
:func:`launchgap.harness.graphs.capture_list` measures them) and one trace of the sequence.
Without CUDA (tests) a graph step runs its bucket's step directly in place of a replay, and
the memory and capture fields are null.
"""
from __future__ import annotations

import functools
import math
import random
import statistics
from bisect import bisect_left
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import InputError
from .clock import Timed, pct, time_sequence, time_steps
from .lists import file_tag
from .model import Decoder
from .profiling import NvtxRange, annotated, record_steps

DEFAULT_STEPS = 48
DEFAULT_SAMPLER = "24,0.7,96"


@dataclass(frozen=True)
class Sampler:
    """Batch sizes ``round(median * exp(sigma * N(0, 1)))`` clipped to ``[1, max_size]``."""

    median: float
    sigma: float
    max_size: int

    def draw(self, rng: random.Random) -> int:
        return max(1, min(self.max_size, round(self.median * math.exp(self.sigma * rng.gauss(0.0, 1.0)))))


def parse_sampler(text: str) -> Sampler:
    """``MEDIAN,SIGMA,MAX`` (e.g. ``24,0.7,96``)."""
    try:
        median_s, sigma_s, max_s = (p.strip() for p in text.split(","))
        s = Sampler(float(median_s), float(sigma_s), int(max_s))
    except ValueError:
        raise InputError(f"--sampler {text!r}: expected MEDIAN,SIGMA,MAX like {DEFAULT_SAMPLER}") from None
    if not (math.isfinite(s.median) and s.median >= 1 and math.isfinite(s.sigma) and s.sigma >= 0
            and s.max_size >= 1):
        raise InputError(f"--sampler {text!r}: need MEDIAN >= 1, SIGMA >= 0, MAX >= 1")
    return s


def build_sequence(distribution: dict[int, float] | None, steps: int | None, seed: int,
                   sampler: Sampler) -> tuple[list[int], str]:
    """The batch size of every step, and a description of where they came from."""
    if steps is not None and steps < 1:
        raise InputError(f"--serving-steps {steps} must be at least 1")
    rng = random.Random(seed)
    if distribution:
        sizes = sorted(distribution)
        counts = [distribution[b] for b in sizes]
        if steps is None and all(float(c).is_integer() for c in counts) and 0 < sum(counts) <= 100_000:
            seq = [b for b, c in zip(sizes, counts) for _ in range(int(c))]
            rng.shuffle(seq)
            return seq, f"distribution counts ({len(seq)} steps, shuffled with seed {seed})"
        n = steps or DEFAULT_STEPS
        return rng.choices(sizes, weights=counts, k=n), f"{n} draws from the distribution (seed {seed})"
    n = steps or DEFAULT_STEPS
    seq = [sampler.draw(rng) for _ in range(n)]
    return seq, (f"log-normal sampler median {sampler.median:g} sigma {sampler.sigma:g} max {sampler.max_size} "
                 f"({n} steps, seed {seed})")


def bucket_of(bs: int, sizes: Sequence[int]) -> int | None:
    """The smallest of the sorted ``sizes`` that is ``>= bs``, or ``None`` (an uncaptured size)."""
    i = bisect_left(sizes, bs)
    return sizes[i] if i < len(sizes) else None


def plan_steps(sequence: Sequence[int], capture_sizes: Sequence[int], fallbacks: int,
               seed: int) -> list[dict[str, Any]]:
    """Bucket and mode of every step; ``fallbacks`` steps that have a bucket are made eager (seeded)."""
    if fallbacks < 0:
        raise InputError(f"--inject-fallbacks {fallbacks} must be at least 0")
    sizes = sorted(set(capture_sizes))
    steps = []
    for i, b in enumerate(sequence):
        bucket = bucket_of(b, sizes)
        steps.append({"index": i, "batch_size": b, "bucket": bucket, "mode": "graph" if bucket else "eager",
                      "fallback": False})
    candidates = [s["index"] for s in steps if s["bucket"] is not None]
    for i in random.Random(seed + 1).sample(candidates, min(fallbacks, len(candidates))):
        steps[i]["mode"], steps[i]["fallback"] = "eager", True
    return steps


def step_label(step: dict[str, Any], graph_mode: str) -> str:
    """The step's annotation (see the module docstring)."""
    if step["mode"] == "graph":
        word = "graph" if graph_mode == "full" else "piecewise"
        return f"decode_step[bs={step['batch_size']} bucket={step['bucket']} {word}]"
    return f"decode_step[bs={step['batch_size']} eager]"


@dataclass(frozen=True)
class ServingOptions:
    graph_mode: str = "full"
    fallbacks: int = 0
    seed: int = 0
    repeats: int = 20
    warmup: int = 3
    rounds: int = 5
    trace: bool = True


@dataclass
class _ListRun:
    name: str
    sizes: list[int]
    steps: list[dict[str, Any]]
    ops: dict[int, Callable[[], Any]]
    captured: Any = None  # CapturedList on CUDA
    graph_times: dict[int, Timed] = field(default_factory=dict)
    per_step: list[list[float]] = field(default_factory=list)
    totals: list[float] = field(default_factory=list)
    trace: str | None = None


def run_serving(torch: Any, model: Decoder, lists: Sequence[tuple[str, list[int]]], sequence: Sequence[int],
                source: str, opts: ServingOptions, on_cuda: bool, out: Path, nvtx_range: NvtxRange,
                progress: Callable[[str], None] | None = None) -> list[dict[str, Any]]:
    """Capture every list, replay ``sequence`` on each, and return one ``serving`` entry per list."""
    from .graphs import REPLAY_TOLERANCE, capture_list, piecewise_step, replay_error, settle

    say = progress or (lambda _line: None)
    runs: list[_ListRun] = []
    stream = torch.cuda.Stream() if on_cuda else None
    if on_cuda and lists:
        # One throwaway capture first: the process's first capture pays one-time costs (capture
        # and instantiate paths warming up) that would otherwise be charged to whichever list
        # comes first and skew the lists' capture seconds against each other.
        capture_list(torch, model, [min(min(sizes) for _, sizes in lists)], opts.graph_mode, "warm-up",
                     stream, keep=False)
        settle(torch, collect=True)
    for name, sizes in lists:
        steps = plan_steps(sequence, sizes, opts.fallbacks, opts.seed)
        if on_cuda:
            cl = capture_list(torch, model, sizes, opts.graph_mode, name, stream, keep=False)
            ops = {b: c.run for b, c in cl.captures.items()}
            bad = [b for b, c in cl.captures.items() if replay_error(torch, model, c) > REPLAY_TOLERANCE]
            if bad:
                say(f"warning: serving {name}: replays of sizes {sorted(bad)} differ from the eager step")
        else:
            cl = None
            ops = {b: (functools.partial(model.step, b) if opts.graph_mode == "full" else piecewise_step(model, b).run)
                   for b in sorted(set(sizes))}
        runs.append(_ListRun(name, sorted(set(sizes)), steps, ops, cl))
        mem = cl.entry if cl else {}
        say(f"serving {name}: {len(ops)} sizes captured ({mem.get('capture_s')} s, {mem.get('device_used_mib')} MiB)")

    def eager(bs: int) -> Callable[[], Any]:
        return functools.partial(model.step, bs)

    def fns(run: _ListRun) -> list[Callable[[], Any]]:
        return [run.ops[s["bucket"]] if s["mode"] == "graph" else eager(s["batch_size"]) for s in run.steps]

    # Truth per distinct operation: a bucket's replay, or the eager step of one batch size.
    eager_times: dict[int, Timed] = {}
    for run in runs:
        for s in run.steps:
            if s["mode"] == "graph" and s["bucket"] not in run.graph_times:
                run.graph_times[s["bucket"]] = time_steps(torch, run.ops[s["bucket"]], opts.repeats, opts.warmup,
                                                          on_cuda)
            elif s["mode"] == "eager" and s["batch_size"] not in eager_times:
                eager_times[s["batch_size"]] = time_steps(torch, eager(s["batch_size"]), opts.repeats, opts.warmup,
                                                          on_cuda)
    say(f"serving: timed {sum(len(r.graph_times) for r in runs)} replays and {len(eager_times)} eager sizes")

    sequences = [fns(run) for run in runs]
    for seq in sequences:
        time_sequence(torch, seq, on_cuda)  # warm-up pass
    for _ in range(opts.rounds):
        for run, seq in zip(runs, sequences):
            per, total = time_sequence(torch, seq, on_cuda)
            run.per_step.append(per)
            run.totals.append(total)

    if opts.trace:
        for run, seq in zip(runs, sequences):
            labels = [step_label(s, opts.graph_mode) for s in run.steps]
            prefix = "serving" if opts.graph_mode == "full" else "serving_piecewise"
            dst = out / f"{model.cfg.name}_{prefix}_{file_tag(run.name)}.json.gz"

            def body(labels: list[str] = labels, seq: list[Callable[[], Any]] = seq) -> None:
                for label, fn in zip(labels, seq):
                    annotated(label, fn, nvtx_range)

            record_steps(torch, body, dst, on_cuda, wait=1, warmup=1, active=1, setting="shapes")
            del body  # its defaults hold the sequence's replays: drop them before the graphs are released
            run.trace = dst.name
            say(f"serving {run.name}: trace -> {dst.name} ({dst.stat().st_size / 1e3:,.0f} kB)")

    entries = [_entry(model.cfg.name, run, opts, source, eager_times) for run in runs]
    sequences.clear()
    for run in runs:
        run.ops.clear()
        run.graph_times.clear()
    for run in runs:
        if run.captured is not None:
            run.captured.release(torch)
    return entries


def _kind(mode: str, bs: int, bucket: int | None, t: Timed) -> dict[str, Any]:
    return {"mode": mode, "batch_size": bs, "bucket": bucket, "us": round(t.median_us, 2),
            "host_us": round(t.host_median_us, 2), "us_p10": round(pct(t.device_us, 0.1), 2),
            "us_p90": round(pct(t.device_us, 0.9), 2), "repeats": len(t.device_us)}


def _entry(model: str, run: _ListRun, opts: ServingOptions, source: str,
           eager_times: dict[int, Timed]) -> dict[str, Any]:
    kinds: dict[tuple[str, int, int | None], dict[str, Any]] = {}
    for s in run.steps:
        if s["mode"] == "graph":
            key = ("graph", s["batch_size"], s["bucket"])
            t = run.graph_times[s["bucket"]]
        else:
            key = ("eager", s["batch_size"], None)
            t = eager_times[s["batch_size"]]
        kinds.setdefault(key, _kind(*key, t))
    tokens = sum(s["batch_size"] for s in run.steps)
    total = statistics.median(run.totals)
    mem = run.captured.entry if run.captured is not None else {}
    return {
        "model": model, "graph_mode": opts.graph_mode, "list_name": run.name, "capture_sizes": run.sizes,
        "distribution": source, "seed": opts.seed, "injected_fallbacks": opts.fallbacks,
        "annotation_format": "decode_step[bs=N bucket=B graph|piecewise] / decode_step[bs=N eager]",
        "steps": [{**s, "annotation": step_label(s, opts.graph_mode)} for s in run.steps],
        "fallback_steps": [s["index"] for s in run.steps if s["fallback"]],
        "uncaptured_steps": [s["index"] for s in run.steps if s["bucket"] is None],
        "padded_rows": sum(s["bucket"] - s["batch_size"] for s in run.steps if s["mode"] == "graph"),
        "kinds": sorted(kinds.values(), key=lambda k: (k["mode"], k["batch_size"])),
        "tokens": tokens,
        "rounds": len(run.totals),
        "sequence_us": [round(statistics.median(col), 2) for col in zip(*run.per_step)],
        "sequence_total_us": round(total, 2),
        "sequence_total_us_rounds": [round(x, 2) for x in run.totals],
        "throughput_tokens_per_s": round(tokens / (total / 1e6), 2),
        "capture_s": mem.get("capture_s"), "reserved_mib": mem.get("reserved_mib"),
        "device_used_mib": mem.get("device_used_mib"), "graphs": mem.get("graphs"),
        "trace": run.trace,
    }
