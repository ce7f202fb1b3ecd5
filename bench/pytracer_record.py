"""Record what torch.profiler's Python tracer (``with_stack``) costs per Python call, on the GPU host, same process.

    PYTHONPATH=. python bench/pytracer_record.py --out OUT [--depths 0,2,8,24] [--ops 256]

A serving engine's decode step makes many Python calls per CUDA op (vLLM 0.24's eager step: ~3.7 per recorded host
event; the harness decoder: 0.24), and with ``with_stack`` the profiler records every one of them. Its cost per host
event therefore depends on how much Python runs per op, which the harness recordings cannot separate. This script
isolates it: one "step" is ``--ops`` small CUDA ops (an element-wise add on a 4,096-float tensor: a ~2 us kernel),
each called through ``depth`` nested Python functions; for every depth it records interleaved steps
(``launchgap.harness.profiling.record_interleaved``: unprofiled and profiled steps alternate within a second) with
the profiler ``plain`` and ``stack``. The per-call cost is the slope of (profiled - unprofiled) step time over the
Python calls per step; the traces let the analyzer count those calls and host events itself.

Writes into OUT: ``py<depth>_bs1_eager_<setting>.json.gz`` (one trace per depth and setting) and
``timings_overhead.json`` with one ``profiled_vs_unprofiled`` record per trace (the harness's schema, so
``python -m launchgap.overhead_fit`` reads it; ``model`` is ``py<depth>``).

``--kinds`` (no GPU, no files): the tracer's cost per call by kind of call, ``--calls`` calls of each with no
profiler, the profiler without stacks and with them (median of 5): a Python function, a built-in (``len``), an
``nn.Module`` call (its ``_call_impl`` and ``forward`` frames and the tracer's module record).
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path


def _chain(torch, depth: int):
    """The op ``x + 1e-3 y`` called through ``depth`` nested Python functions (each a real frame the tracer sees)."""
    def op(x, y):
        return torch.add(x, y, alpha=1e-3)

    fn = op
    for _ in range(depth):
        def wrap(x, y, _inner=fn):
            return _inner(x, y)
        fn = wrap
    return fn


def per_call_by_kind(torch, calls: int) -> dict[str, dict[str, float]]:
    """us per call of each kind of call with no profiler (``none``), ``plain`` and ``stack`` (CPU activity only)."""
    import time  # noqa: PLC0415

    from torch.profiler import ProfilerActivity, profile  # noqa: PLC0415

    class Module(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.w = torch.nn.Parameter(torch.zeros(4))

        def forward(self, x):
            return x

    def frame(x):
        return x

    m, x, lst = Module(), torch.zeros(4), [1, 2, 3]
    kinds = {"python function": lambda: [frame(x) for _ in range(calls)],
             "built-in": lambda: [len(lst) for _ in range(calls)],
             "nn.Module": lambda: [m(x) for _ in range(calls)]}
    out: dict[str, dict[str, float]] = {}
    for name, run in kinds.items():
        out[name] = {}
        for mode in ("none", "plain", "stack"):
            times = []
            for _ in range(5):
                if mode == "none":
                    t0 = time.perf_counter()
                    run()
                    times.append(time.perf_counter() - t0)
                    continue
                with profile(activities=[ProfilerActivity.CPU], with_stack=mode == "stack"):
                    t0 = time.perf_counter()
                    run()
                    times.append(time.perf_counter() - t0)
            out[name][mode] = statistics.median(times) / calls * 1e6
    return out


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", help="the folder for the traces and timings (not with --kinds)")
    ap.add_argument("--kinds", action="store_true", help="per-call cost by kind of call, on the CPU; nothing written")
    ap.add_argument("--calls", type=int, default=20_000, help="--kinds: calls of each kind")
    ap.add_argument("--depths", default="0,2,8,24")
    ap.add_argument("--ops", type=int, default=256)
    ap.add_argument("--cycles", type=int, default=8)
    ap.add_argument("--rounds", type=int, default=2, help="passes over every depth and setting; the last one's traces")
    args = ap.parse_args()

    import torch  # noqa: PLC0415 (the recording machine's torch)

    if args.kinds:
        for name, us in per_call_by_kind(torch, args.calls).items():
            print(f"{name:16s} " + "  ".join(f"{k} {v:.3f} us" for k, v in us.items())
                  + f"  -> with_stack adds {us['stack'] - us['none']:.3f} us per call", flush=True)
        return 0
    if not args.out:
        ap.error("--out is needed (or --kinds)")
    from launchgap.harness.profiling import record_interleaved  # noqa: PLC0415

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    on_cuda = torch.cuda.is_available()
    dev = "cuda" if on_cuda else "cpu"
    x = torch.zeros(4096, device=dev)
    y = torch.ones(4096, device=dev)
    depths = [int(d) for d in args.depths.split(",")]
    records: dict[tuple[int, str], dict] = {}
    for rnd in range(args.rounds):
        order = depths if rnd % 2 == 0 else depths[::-1]
        for depth in order:
            fn = _chain(torch, depth)

            def body(fn=fn) -> None:
                from torch.profiler import record_function  # noqa: PLC0415

                with record_function(f"decode_step bs=1 depth={depth}"):
                    z = x
                    for _ in range(args.ops):
                        z = fn(z, y)
                    if on_cuda:
                        torch.cuda.synchronize()

            for _ in range(20):  # warm: allocator, the frames' first calls
                body()
            for setting in ("plain", "stack"):
                name = f"py{depth}_bs1_eager_{setting}.json.gz"
                rec = record_interleaved(torch, body, out / name, on_cuda, active=3, cycles=args.cycles,
                                         setting=setting)
                unprof, prof = statistics.median(rec.unprofiled_us), statistics.median(rec.profiled_us)
                prev = records.get((depth, setting))
                r = {"model": f"py{depth}", "batch_size": 1, "profiler": setting,
                     "unprofiled_eager_us": round(unprof, 2), "profiled_eager_us": round(prof, 2),
                     "trace": name, "round": rnd, "python_calls_per_op": depth + 1, "ops": args.ops}
                if prev is not None:
                    r["unprofiled_eager_us_rounds"] = prev.get("unprofiled_eager_us_rounds", [prev["unprofiled_eager_us"]]) \
                        + [r["unprofiled_eager_us"]]
                    r["profiled_eager_us_rounds"] = prev.get("profiled_eager_us_rounds", [prev["profiled_eager_us"]]) \
                        + [r["profiled_eager_us"]]
                records[(depth, setting)] = r
                print(f"round {rnd} depth {depth:3d} {setting:5s}: unprofiled {unprof:9.1f} us, "
                      f"profiled {prof:9.1f} us, +{(prof - unprof) / args.ops:6.2f} us per op", flush=True)
    doc = {"schema": 1, "torch": torch.__version__, "device": torch.cuda.get_device_name() if on_cuda else "cpu",
           "profiled_vs_unprofiled": [records[k] for k in sorted(records)]}
    (out / "timings_overhead.json").write_text(json.dumps(doc, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
