"""Why a graph replay's logits differ from the eager step's on HF models (issue 31's replay check).

Run on a GPU machine from the repository root::

    python3 notes/replay_diag.py CONFIG.json [CONFIG.json ...] [--sizes 8,64,128]

Prints one JSON line (progress goes to stderr). Per config it builds the harness's own
:class:`analyzer.harness.hf.HFDecoder` (bf16, one StaticCache at the largest size, the same
views, positions and wrap as ``record --hf-config``) and per batch size measures, every figure
as the harness's replay check measures it (largest absolute logit difference over the largest
absolute logit of the reference, ``rel``), each run from one snapshot of the state:

* ``eager_vs_eager``: two eager steps on the default stream, each after restoring tokens and
  positions (what :func:`analyzer.harness.graphs.replay_error` restores): the determinism floor;
* ``full_restore_vs_eager``: an eager step after restoring tokens, positions *and every cache
  layer's K/V* against the tokens+positions one: zero when restoring tokens and positions is
  enough to repeat a step (the replay check's assumption);
* ``side_stream_vs_eager``: the eager step on the capture stream (where the harness warms up
  and captures) against the default stream's;
* ``graph_vs_eager``: a replay of the FULL graph captured as the harness captures it
  (``graphs.prepare`` warm-up on a side stream, ``graphs.capture_full`` into its own pool)
  against the eager step; ``graph_vs_graph``: two replays from the same state;
  ``harness_replay_error``: ``graphs.replay_error`` itself for that capture;
* ``kernels``: torch.profiler (CUDA activity) around one eager step and one replay: kernel
  counts, whether the kernel name sequences and launch configurations (grid, block) are equal,
  the first differing index and the names that appear a different number of times;
* ``bf16_vs_fp32``: the bf16 eager step against a float32 copy of the same weights over a
  float32 StaticCache holding the same cache values (TF32 off): the precision scale of bf16 at
  these logits; ``graph_vs_fp32`` the replay against the same reference;
* ``argmax_agree``: rows whose greedy token equals the eager step's, for the replay and the
  float32 reference; ``max_abs_logit`` and ``bf16_ulp_at_max`` (spacing of bf16 at the largest
  logit) give the scale.

Nothing is monkeypatched: only the harness's public functions named above are called. With
``--device cpu`` (tests) the eager parts run in float32 and the graph/profiler parts are skipped.
Without CUDA (and no ``--device cpu``) it prints one line saying so and exits 2.
"""
from __future__ import annotations

import argparse
import copy
import json
import math
import os
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def rel(got, want) -> float:
    """``max |got - want| / max |want|`` in float32 (``graphs.replay_error``'s measure)."""
    got, want = got.float(), want.float()
    return float(((got - want).abs().max() / want.abs().max().clamp_min(1e-6)).item())


class State:
    """A snapshot of the decoder's mutable state: tokens, positions and (optionally) every cache layer's K/V."""

    def __init__(self, dec, with_cache: bool) -> None:
        self.dec = dec
        self.tokens, self.pos = dec.tokens.clone(), dec.pos.clone()
        self.kv = [(k.clone(), v.clone()) for k, v in dec._full] if with_cache else None

    def restore(self, cache: bool = False) -> None:
        self.dec.tokens.copy_(self.tokens)
        self.dec.pos.copy_(self.pos)
        if cache:
            for (k, v), (k0, v0) in zip(self.dec._full, self.kv):
                k.copy_(k0)
                v.copy_(v0)


def eager_logits(torch, dec, bs: int, stream=None):
    """One eager step (on ``stream`` if given); a float32 copy of its logits."""
    if stream is None:
        dec.step(bs)
    else:
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream):
            dec.step(bs)
        torch.cuda.current_stream().wait_stream(stream)
    out = dec.last_logits.float().clone()
    dec.last_logits = None
    return out


def fp32_reference(torch, transformers, ref_model, dec, bs: int, state: State):
    """Logits of a float32 copy of the weights over a float32 StaticCache holding the decoder's cache
    values of rows ``[0, bs)``, at the decoder's current position and tokens (``state`` restored)."""
    state.restore(cache=True)
    pos = int(dec.pos[0])
    cache = transformers.StaticCache(config=ref_model.config, max_cache_len=dec.context_len)
    ids = dec.tokens[:bs].clone().view(bs, 1)
    with torch.no_grad():
        ref_model(input_ids=ids, past_key_values=cache, use_cache=True)  # allocates the layers (fp32)
        for layer, (k, v) in zip(cache.layers, dec._full):
            layer.keys.copy_(k[:bs])
            layer.values.copy_(v[:bs])
            layer.cumulative_length.fill_(pos)
            if hasattr(layer, "cumulative_length_int"):
                layer.cumulative_length_int = pos
        out = ref_model(input_ids=ids, past_key_values=cache, use_cache=True)
    logits = out.logits[:, -1].float().clone()
    del cache, out
    return logits


def kernel_sequence(torch, fn) -> list[tuple[str, tuple, tuple]]:
    """(name, grid, block) of every kernel ``fn`` runs on the GPU, in start order (torch.profiler, CUDA only)."""
    from torch.profiler import ProfilerActivity, profile

    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        fn()
        torch.cuda.synchronize()
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "t.json")
        prof.export_chrome_trace(path)
        events = json.load(open(path)).get("traceEvents", [])
    ks = sorted((e for e in events if e.get("cat") == "kernel"), key=lambda e: e.get("ts", 0))
    return [(e.get("name", ""), tuple(e.get("args", {}).get("grid", ())), tuple(e.get("args", {}).get("block", ())))
            for e in ks]


def _launch(seq: list, i: int) -> list | None:
    return [seq[i][0], list(seq[i][1]), list(seq[i][2])] if i < len(seq) else None


def compare_kernels(eager: list, graph: list) -> dict:
    """Counts, whether names and (name, grid, block) sequences are equal, the first differing launch and the
    names launched a different number of times (at most 12, as ``name: [eager, graph]``)."""
    names_e, names_g = [k[0] for k in eager], [k[0] for k in graph]
    first = next((i for i, (a, b) in enumerate(zip(eager, graph)) if a != b), None)
    if first is None and len(eager) != len(graph):
        first = min(len(eager), len(graph))
    ce, cg = Counter(names_e), Counter(names_g)
    differ = {n: [ce[n], cg[n]] for n in set(ce) | set(cg) if ce[n] != cg[n]}
    return {"eager": len(eager), "graph": len(graph), "names_equal": names_e == names_g,
            "launch_equal": eager == graph, "first_diff": None if first is None else {
                "index": first, "eager": _launch(eager, first), "graph": _launch(graph, first)},
            "count_differs": dict(sorted(differ.items())[:12])}


def diagnose_size(torch, transformers, dec, ref_model, bs: int, cuda: bool) -> dict:
    from analyzer.harness import graphs

    t0 = time.perf_counter()
    state = State(dec, with_cache=True)
    row: dict = {"batch_size": bs, "position": int(dec.pos[0])}
    state.restore()
    a = eager_logits(torch, dec, bs)
    state.restore()
    b = eager_logits(torch, dec, bs)
    state.restore(cache=True)
    c = eager_logits(torch, dec, bs)
    row["eager_vs_eager"] = rel(b, a)
    row["eager_bitwise_equal"] = bool(torch.equal(a, b))
    row["full_restore_vs_eager"] = rel(c, a)
    mx = float(a.abs().max())
    row["max_abs_logit"] = round(mx, 5)
    row["bf16_ulp_at_max"] = 2.0 ** (math.floor(math.log2(mx)) - 7) if mx > 0 else None
    row["dtype"] = str(dec.dtype).removeprefix("torch.")
    if ref_model is not None:
        try:
            f = fp32_reference(torch, transformers, ref_model, dec, bs, state)
            row["bf16_vs_fp32"] = rel(a, f)
            row["argmax_agree_fp32"] = float((f.argmax(-1) == a.argmax(-1)).float().mean())
        except Exception as exc:  # noqa: BLE001 - a diagnostic reports and goes on
            f = None
            row["bf16_vs_fp32"] = f"failed: {type(exc).__name__}: {str(exc)[:160]}"
    else:
        f = None
    if not cuda:
        row["graph"] = "skipped: no CUDA"
        state.restore(cache=True)
        row["seconds"] = round(time.perf_counter() - t0, 2)
        return row
    stream = torch.cuda.Stream()
    state.restore(cache=True)
    d = eager_logits(torch, dec, bs, stream)
    row["side_stream_vs_eager"] = rel(d, a)
    # The harness's capture, as sweep.sizes.capture_own_pool does it: warm-up on the stream, own pool.
    state.restore(cache=True)
    graphs.prepare(torch, dec, bs, "full", stream, 3)
    graphs.settle(torch)
    cap = graphs.capture_full(torch, dec, bs, torch.cuda.graph_pool_handle(), stream)
    torch.cuda.synchronize()
    state.restore(cache=True)
    cap.run()
    g = cap.logits.float().clone()
    state.restore(cache=True)
    cap.run()
    g2 = cap.logits.float().clone()
    row["graph_vs_eager"] = rel(g, a)
    row["graph_vs_graph"] = rel(g2, g)
    row["argmax_agree_graph"] = float((g.argmax(-1) == a.argmax(-1)).float().mean())
    if f is not None:
        row["graph_vs_fp32"] = rel(g, f)
    state.restore(cache=True)
    row["harness_replay_error"] = graphs.replay_error(torch, dec, cap)
    state.restore(cache=True)
    ke = kernel_sequence(torch, lambda: dec.step(bs))
    dec.last_logits = None
    state.restore(cache=True)
    kg = kernel_sequence(torch, cap.run)
    row["kernels"] = compare_kernels(ke, kg)
    state.restore(cache=True)
    del cap
    graphs.settle(torch, collect=True)
    row["seconds"] = round(time.perf_counter() - t0, 2)
    return row


def diagnose_config(torch, transformers, path: str, sizes: list[int], device: str, fp32: bool) -> dict:
    from analyzer.harness.hf import HFDecoder, read_hf_config

    t0 = time.perf_counter()
    spec = read_hf_config(path)
    dec = HFDecoder(spec, max_batch_size=max(sizes), device=device)
    out: dict = {"config": spec.name, "class": type(dec.model).__name__, "context_len": dec.context_len,
                 "build_s": round(time.perf_counter() - t0, 1)}
    ref_model = None
    if fp32:
        try:
            ref_model = copy.deepcopy(dec.model).to(torch.float32)
        except Exception as exc:  # noqa: BLE001
            out["fp32"] = f"failed: {type(exc).__name__}: {str(exc)[:160]}"
    cuda = dec.device.type == "cuda"
    rows = []
    for bs in sizes:
        try:
            rows.append(diagnose_size(torch, transformers, dec, ref_model, bs, cuda))
        except Exception as exc:  # noqa: BLE001
            rows.append({"batch_size": bs, "failed": f"{type(exc).__name__}: {str(exc)[:200]}"})
        print(f"{spec.name}: {json.dumps(rows[-1])}", file=sys.stderr, flush=True)
    out["sizes"] = rows
    out["wall_s"] = round(time.perf_counter() - t0, 1)
    del dec, ref_model
    if cuda:
        torch.cuda.empty_cache()
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("configs", nargs="+", help="transformers config.json files")
    ap.add_argument("--sizes", default="8,64,128")
    ap.add_argument("--device", default="cuda", choices=("cuda", "cpu"), help="cpu: eager parts only (tests)")
    ap.add_argument("--no-fp32", action="store_true", help="skip the float32 reference")
    a = ap.parse_args(argv)
    try:
        sizes = sorted({int(x) for x in a.sizes.split(",") if x})
    except ValueError:
        print(f"replay_diag: --sizes must be integers, got {a.sizes!r}", file=sys.stderr)
        return 2
    try:
        import torch
        import transformers
    except ImportError as exc:
        print(f"replay_diag: needs torch and transformers ({exc})", file=sys.stderr)
        return 2
    if a.device == "cuda" and not torch.cuda.is_available():
        print(f"replay_diag: CUDA is not available (torch {torch.__version__}); run it on a GPU machine "
              "(or --device cpu for the eager parts)", file=sys.stderr)
        return 2
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    t0 = time.perf_counter()
    doc = {"torch": torch.__version__, "transformers": transformers.__version__,
           "gpu": torch.cuda.get_device_name() if a.device == "cuda" else None,
           # bf16 GEMMs may reduce in bf16 (split-K) when this is on (torch's default): one suspect for the spread.
           "bf16_reduced_precision_reduction": torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction,
           "configs": []}
    for path in a.configs:
        doc["configs"].append(diagnose_config(torch, transformers, path, sizes, a.device, not a.no_fp32))
    doc["wall_s"] = round(time.perf_counter() - t0, 1)
    print(json.dumps(doc))
    return 0


if __name__ == "__main__":
    sys.exit(main())
