"""The harness's new modes on the CPU: capture-list presets and size syntax, distribution files,
serving sequences (buckets, fallbacks, annotations) end to end, the piecewise split against the
eager step, weak aliases, kernel-node counting through a stand-in driver library, profiled vs
unprofiled rows, and ``--dry-run`` without torch."""
from __future__ import annotations

import ctypes
import gzip
import json
import subprocess
import sys
from pathlib import Path

import pytest

from launchgap.cli import main
from launchgap.errors import InputError
from launchgap.timings import load_timings

try:
    import torch
except ImportError:
    torch = None

needs_torch = pytest.mark.skipif(torch is None, reason="torch not installed (pip install 'launchgap[record]')")
REPO = Path(__file__).resolve().parents[2]
SMALL = ["--model", "tiny", "--layers", "2", "--context-len", "32", "--start-pos", "4", "--repeats", "2",
         "--warmup", "1", "--steps", "2"]


# --------------------------------------------------------------------------------------------
# sizes and capture lists


def test_capture_list_presets() -> None:
    from launchgap.harness.lists import preset_sizes

    assert preset_sizes("pow2-128") == [1, 2, 4, 8, 16, 32, 64, 128]
    vllm = preset_sizes("vllm-default")
    assert vllm[:5] == [1, 2, 4, 8, 16] and vllm[-1] == 256 and len(vllm) == 35
    assert vllm == [1, 2, 4] + list(range(8, 257, 8))
    assert preset_sizes("vllm-default-320") == vllm + [272, 288, 304, 320]
    assert preset_sizes("all-1-128") == list(range(1, 129))
    assert preset_sizes("single-128") == [128]
    assert preset_sizes("1,2,4") is None and preset_sizes("pow2") is None
    with pytest.raises(InputError, match="1 <= A <= B"):
        preset_sizes("all-9-3")


def test_capture_list_arguments() -> None:
    from launchgap.harness.lists import file_tag, parse_capture_list, parse_capture_lists

    assert parse_capture_list("1,2,4,8") == ("1,2,4,8", [1, 2, 4, 8])
    assert parse_capture_list("planner=8,4,4,16") == ("planner", [4, 8, 16])
    assert parse_capture_list("vllm=vllm-default")[1][-1] == 256
    assert parse_capture_list("1..4,8") == ("1..4,8", [1, 2, 3, 4, 8])
    got = parse_capture_lists(["pow2-128,vllm-default,all-1-128,single-128", "1,2,4,8", "pow2-128"])
    assert [n for n, _ in got] == ["pow2-128", "vllm-default", "all-1-128", "single-128", "1,2,4,8"]
    assert [len(s) for _, s in got] == [8, 35, 128, 1, 4]
    with pytest.raises(InputError, match="unknown preset 'pow2-x'"):
        parse_capture_lists(["pow2-128,pow2-x"])
    with pytest.raises(InputError, match="bad batch size '0'"):
        parse_capture_lists(["1,0"])
    with pytest.raises(InputError, match="capture list name"):
        parse_capture_list("my list=1,2")
    assert file_tag("1,2,4,8") == "1-2-4-8" and file_tag("vllm-default") == "vllm-default"


def test_batch_size_ranges() -> None:
    from launchgap.harness.lists import parse_batch_sizes

    assert parse_batch_sizes("1..64") == tuple(range(1, 65))
    assert parse_batch_sizes("8..32:8,1") == (1, 8, 16, 24, 32)
    assert parse_batch_sizes("1-256") == (1, 2, 4, 8, 16, 32, 64, 128, 256)
    for bad in ("0..4", "4..1", "1..8:0", "1..x", "70000"):
        with pytest.raises(InputError, match="bad batch size"):
            parse_batch_sizes(bad)


# --------------------------------------------------------------------------------------------
# distributions and serving sequences


def test_distribution_formats(tmp_path: Path) -> None:
    from launchgap.distribution import load_distribution

    j = tmp_path / "d.json"
    j.write_text('{"8": 3, "2": 1.5, "8.0": 1}')
    assert load_distribution(j) == {2: 1.5, 8: 4.0}
    c = tmp_path / "d.csv"
    c.write_text("# decode steps\nsteps,bs\n10,4\n\n2,16\n")
    assert load_distribution(c) == {4: 10.0, 16: 2.0}
    for text, msg in (("1,x\n", "line 1: count 'x' is not a number"), ("[1]", "must be an object"),
                      ('{"0": 1}', "batch size '0' is not a positive integer"), ("3,0\n", "all zero")):
        c.write_text(text)
        with pytest.raises(InputError, match=msg):
            load_distribution(c)


def test_sequences_are_seeded() -> None:
    from launchgap.harness.serving import Sampler, build_sequence, parse_sampler

    s = parse_sampler("24,0.7,96")
    a, src = build_sequence(None, 48, 7, s)
    assert a == build_sequence(None, 48, 7, s)[0] and a != build_sequence(None, 48, 8, s)[0]
    assert len(a) == 48 and 1 <= min(a) and max(a) <= 96 and "seed 7" in src
    counts, src = build_sequence({3: 2, 5: 1}, None, 0, s)
    assert sorted(counts) == [3, 3, 5] and "counts" in src
    drawn, src = build_sequence({3: 2, 5: 1}, 10, 0, s)
    assert len(drawn) == 10 and set(drawn) <= {3, 5} and "10 draws" in src
    assert build_sequence({3: 0.5, 5: 1}, None, 0, s)[0] == build_sequence({3: 0.5, 5: 1}, 48, 0, s)[0]
    assert Sampler(1, 0.0, 4).draw(__import__("random").Random(0)) == 1
    for bad in ("1,2", "0,1,4", "4,-1,8", "a,b,c"):
        with pytest.raises(InputError, match="--sampler"):
            parse_sampler(bad)


def test_buckets_fallbacks_and_labels() -> None:
    from launchgap.harness.serving import bucket_of, plan_steps, step_label

    assert [bucket_of(b, [1, 2, 4, 48, 64]) for b in (1, 3, 37, 64, 65)] == [1, 4, 48, 64, None]
    seq = [37, 65, 1, 48, 3, 64, 2]
    steps = plan_steps(seq, [64, 1, 2, 4, 48], fallbacks=0, seed=0)
    assert [(s["bucket"], s["mode"]) for s in steps] == [
        (48, "graph"), (None, "eager"), (1, "graph"), (48, "graph"), (4, "graph"), (64, "graph"), (2, "graph")]
    fb = plan_steps(seq, [1, 2, 4, 48, 64], fallbacks=2, seed=0)
    chosen = [s["index"] for s in fb if s["fallback"]]
    assert len(chosen) == 2 and 1 not in chosen  # never the uncaptured step
    assert all(fb[i]["mode"] == "eager" and fb[i]["bucket"] is not None for i in chosen)
    assert chosen == [s["index"] for s in plan_steps(seq, [1, 2, 4, 48, 64], 2, 0) if s["fallback"]]
    assert len([s for s in plan_steps(seq, [1, 2, 4, 48, 64], 99, 0) if s["fallback"]]) == 6
    assert step_label(steps[0], "full") == "decode_step[bs=37 bucket=48 graph]"
    assert step_label(steps[0], "piecewise") == "decode_step[bs=37 bucket=48 piecewise]"
    assert step_label(steps[1], "full") == "decode_step[bs=65 eager]"
    assert step_label(fb[chosen[0]], "full") == f"decode_step[bs={seq[chosen[0]]} eager]"
    with pytest.raises(InputError, match="--inject-fallbacks"):
        plan_steps(seq, [1], -1, 0)


@needs_torch
@pytest.mark.parametrize("graphs", ["full", "piecewise"])
def test_serving_end_to_end_on_cpu(tmp_path: Path, graphs: str, capsys: pytest.CaptureFixture[str]) -> None:
    """Two lists replay one sequence; buckets, fallbacks, tokens, annotations in the trace."""
    dist = tmp_path / "d.csv"
    dist.write_text("batch_size,count\n1,2\n3,2\n6,1\n")
    rc = main(["record", *SMALL, "--capture-sizes", "1,2,4", "--capture-sizes", "big=8", "--distribution", str(dist),
               "--inject-fallbacks", "1", "--serving-rounds", "2", "--serving-graphs", graphs, "--seed", "3",
               "--out", str(tmp_path / "o")])
    assert rc == 0
    doc = load_timings(tmp_path / "o" / "timings.json")
    assert doc["rows"] == [] and "graph_memory" not in doc
    small, big = doc["serving"]
    assert (small["list_name"], big["list_name"]) == ("1,2,4", "big")
    seq = [s["batch_size"] for s in small["steps"]]
    assert sorted(seq) == [1, 1, 3, 3, 6] and seq == [s["batch_size"] for s in big["steps"]]
    assert small["tokens"] == 14 and small["rounds"] == 2 and len(small["sequence_us"]) == 5
    assert small["uncaptured_steps"] == [seq.index(6)] and big["uncaptured_steps"] == []
    assert len(small["fallback_steps"]) == 1 and len(big["fallback_steps"]) == 1
    word = "graph" if graphs == "full" else "piecewise"
    for e in (small, big):
        assert e["graph_mode"] == graphs and e["capture_s"] is None and e["throughput_tokens_per_s"] > 0
        with gzip.open(tmp_path / "o" / e["trace"], "rt") as fh:
            names = [x["name"] for x in json.load(fh)["traceEvents"] if x.get("cat") == "user_annotation"
                     and x["name"].startswith("decode_step")]
        assert names == [s["annotation"] for s in e["steps"]]  # one sequence, in order
        for s in e["steps"]:
            want = (f"decode_step[bs={s['batch_size']} bucket={s['bucket']} {word}]" if s["mode"] == "graph"
                    else f"decode_step[bs={s['batch_size']} eager]")
            assert s["annotation"] == want
        kinds = {(k["mode"], k["batch_size"], k["bucket"]) for k in e["kinds"]}
        assert kinds == {(s["mode"], s["batch_size"], s["bucket"] if s["mode"] == "graph" else None)
                         for s in e["steps"]}
    assert big["padded_rows"] == sum(8 - b for i, b in enumerate(seq) if i not in big["fallback_steps"])
    assert "tokens/s" in capsys.readouterr().out


# --------------------------------------------------------------------------------------------
# piecewise split, weak aliases, node counts


@needs_torch
def test_piecewise_direct_equals_eager_step() -> None:
    """Graph pieces and eager attention islands, called directly, compute exactly the eager step
    (logits, next tokens, cache writes, position), over enough steps to wrap the position."""
    from launchgap.harness.graphs import PiecewiseStep, attention_buffer
    from launchgap.harness.model import Decoder, resolve_config

    cfg = resolve_config("tiny", layers=3, vocab=512)
    ref = Decoder(cfg, 5, context_len=12, start_pos=4, device="cpu", seed=2)
    pw_model = Decoder(cfg, 5, context_len=12, start_pos=4, device="cpu", seed=2)
    pw = PiecewiseStep(pw_model, 5)
    assert (len(pw.pieces), len(pw.islands)) == (4, 3)
    assert attention_buffer(pw_model).shape == (5, cfg.heads * cfg.head_dim)
    assert pw.attn_out.data_ptr() == attention_buffer(pw_model).data_ptr()  # one buffer per model
    for _ in range(10):
        want = ref.step(5).clone()
        got = pw.run().clone()
        assert torch.equal(ref.last_logits, pw_model.last_logits)
        assert torch.equal(want, got)
    assert int(ref.pos.item()) == int(pw_model.pos.item()) == 6
    for a, b in zip(ref.layers, pw_model.layers):
        assert torch.equal(a["k_cache"], b["k_cache"]) and torch.equal(a["v_cache"], b["v_cache"])
    pw.state.clear()
    pw.run_pieces_directly()  # the graph part alone runs and refills the state
    assert {"x", "mask", "q0", "k2", "v2"} <= set(pw.state)


@needs_torch
def test_weak_alias_views_the_same_memory() -> None:
    from launchgap.harness.graphs import weak_alias

    t = torch.arange(24, dtype=torch.float32).view(2, 3, 4)[:, 1:]
    alias, weak = weak_alias(torch, t)
    assert weak and alias.shape == t.shape and alias.stride() == t.stride()
    assert alias.data_ptr() == t.data_ptr() and torch.equal(alias, t)
    t.add_(1)
    assert torch.equal(alias, t)
    assert weak_alias(torch, object())[1] is False  # anything it cannot alias comes back as is


class _FakeDriver:
    """cuGraphGetNodes / cuGraphNodeGetType as real C function pointers over a Python graph."""

    GET_NODES = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p, ctypes.POINTER(ctypes.c_size_t))
    GET_TYPE = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.POINTER(ctypes.c_int))

    def __init__(self, types: list[int], fail_type_at: int | None = None) -> None:
        self.types = types
        handles = [1000 + i for i in range(len(types))]
        self.by_handle = dict(zip(handles, types))

        def get_nodes(graph, nodes, n):
            if graph != 77:
                return 400  # CUDA_ERROR_INVALID_HANDLE
            if nodes:
                arr = (ctypes.c_void_p * n[0]).from_address(nodes)
                for i in range(min(n[0], len(handles))):
                    arr[i] = handles[i]
            n[0] = len(handles)
            return 0

        def get_type(node, out):
            if fail_type_at is not None and node == 1000 + fail_type_at:
                return 1
            out[0] = self.by_handle[node]
            return 0

        self.cuGraphGetNodes = self.GET_NODES(get_nodes)
        self.cuGraphNodeGetType = self.GET_TYPE(get_type)


def test_count_kernel_nodes_through_the_driver_interface() -> None:
    from launchgap.harness.graphs import count_kernel_nodes

    lib = _FakeDriver([0, 0, 2, 0, 1, 0])  # kernels, a memset (2), a memcpy (1)
    assert count_kernel_nodes(77, lib) == 4
    assert count_kernel_nodes(78, lib) is None  # the driver refuses the handle
    assert count_kernel_nodes(0, lib) is None
    assert count_kernel_nodes(77, _FakeDriver([])) == 0
    assert count_kernel_nodes(77, _FakeDriver([0, 0, 0], fail_type_at=1)) is None


# --------------------------------------------------------------------------------------------
# profiled vs unprofiled, graph-only rows, dry runs


@needs_torch
def test_profiled_vs_unprofiled_rows_and_traces(tmp_path: Path) -> None:
    out = tmp_path / "p"
    rc = main(["record", *SMALL, "--batch-sizes", "1,2", "--trace-batch-sizes", "2", "--no-trace",
               "--profiler-settings", "plain,shapes,stack", "--out", str(out)])
    assert rc == 0
    doc = load_timings(out / "timings.json")
    rows = doc["profiled_vs_unprofiled"]
    assert [(r["batch_size"], r["profiler"]) for r in rows] == [(2, "plain"), (2, "shapes"), (2, "stack")]
    for r in rows:
        assert r["unprofiled_eager_us_before"] > 0 and r["unprofiled_eager_us_after"] > 0
        assert r["unprofiled_graph_us"] is None  # no CUDA
        with gzip.open(out / r["trace"], "rt") as fh:
            events = json.load(fh)["traceEvents"]
        assert r["trace"] == f"tiny-layers2_bs2_eager_{r['profiler']}.json.gz"
        steps = [e for e in events if e.get("cat") == "user_annotation" and e["name"] == "decode_step[bs=2]"]
        assert len(steps) == 2
        shapes = any(e.get("args", {}).get("Input Dims") for e in events if e.get("cat") == "cpu_op")
        stacks = any(e.get("cat") == "python_function" for e in events)
        assert (shapes, stacks) == {"plain": (False, False), "shapes": (True, False), "stack": (False, True)}[
            r["profiler"]]
    assert not list(out.glob("*_eager.json.gz"))  # --no-trace: no per-mode traces
    # A rerun finds every item done.
    assert main(["record", *SMALL, "--batch-sizes", "1,2", "--trace-batch-sizes", "2", "--no-trace",
                 "--profiler-settings", "plain,shapes,stack", "--out", str(out)]) == 0
    assert load_timings(out / "timings.json") == doc


def test_profiler_settings_parse() -> None:
    from launchgap.harness.profiling import PROFILER_OPTIONS, parse_profiler_settings
    from launchgap.timings import PROFILER_SETTINGS

    assert tuple(PROFILER_OPTIONS) == PROFILER_SETTINGS
    assert parse_profiler_settings("stack, plain,stack") == ("stack", "plain")
    with pytest.raises(InputError, match="unknown profiler setting"):
        parse_profiler_settings("plain,cuda")


def test_curve_of_graph_only_rows(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    p = tmp_path / "t.json"
    p.write_text(json.dumps({"schema": "launchgap.timings/1", "rows": [
        {"model": "1b", "batch_size": 1, "eager_us": None, "graph_us": 2000.0},
        {"model": "1b", "batch_size": 2, "eager_us": 9000.0, "graph_us": 2100.0}]}))
    assert main(["record", "--curve", str(p), "--format", "json"]) == 0
    pts = json.loads(capsys.readouterr().out)["curves"][0]["points"]
    assert [(x["eager_us"], x["speedup"]) for x in pts] == [(None, None), (9000.0, 4.286)]
    assert main(["record", "--curve", str(p)]) == 0
    assert "     1           -     2,000.0" in capsys.readouterr().out


def test_dry_run_plans_without_torch(tmp_path: Path) -> None:
    """``--dry-run`` parses everything (lists, distribution, sampler) and never imports torch."""
    dist = tmp_path / "d.json"
    dist.write_text('{"37": 3, "70": 1}')
    code = ("import sys; from analyzer.harness.__main__ import main\n"
            f"rc = main(['--model', '1b,3b', '--capture-lists', 'pow2-128,vllm-default', '--capture-lists', "
            f"'1,2,4,8', '--capture-sizes', 's=1,2,4,8,16,24,32,40,48,56,64', '--distribution', {str(dist)!r}, "
            "'--inject-fallbacks', '1', '--out', '/nonexistent', '--dry-run'])\n"
            "assert rc == 0 and 'torch' not in sys.modules, sorted(sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO)
    assert out.returncode == 0, out.stderr
    text = out.stdout
    assert "models: 1b (16 layers, hidden 2048), 3b (28 layers, hidden 3072)" in text
    assert "graph memory full+piecewise vllm-default: 35 sizes" in text
    assert "graph memory full+piecewise 1,2,4,8: 4 sizes [1, 2, 4, 8]" in text
    assert "serving full s ([1, 2, 4, 8, 16, 24, 32, 40, 48, 56, 64]): 4 steps, 181 tokens" in text
    assert "sweep" not in text  # lists only: no sweep


@pytest.mark.parametrize("argv, message", [
    (["--capture-lists", "pow2-8", "--memory-modes", "full,half"], "--memory-modes"),
    (["--distribution", "x.json"], "belong to serving mode"),
    (["--capture-sizes", "a=1,2", "--capture-sizes", "a=4"], "share a name"),
    (["--batch-sizes", "1", "--modes", "eager,compiled"], "unknown mode"),
    (["--capture-sizes", "1,2", "--serving-steps", "0"], "--serving-steps 0"),
])
def test_bad_mode_arguments_are_one_line(argv: list[str], message: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["record", "--model", "tiny", "--out", "/nonexistent", "--dry-run", *argv]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1


def test_attention_backend_names_the_model_and_says_so(capsys: pytest.CaptureFixture[str]) -> None:
    from launchgap.harness.curve import source_text

    assert main(["record", "--model", "tiny", "--attention-backend", "math", "--batch-sizes", "1,2", "--out",
                 "/nonexistent", "--dry-run"]) == 0
    assert capsys.readouterr().out.startswith("models: tiny-math (4 layers, hidden 256) (attention: SDPA math)\n")
    assert source_text({"model_source": {"kind": "preset", "preset": "1b"}, "compiled": False,
                        "attention_backend": "efficient"}) == "launchgap's decoder, preset 1b, not compiled, SDPA efficient"
    assert source_text({"model_source": {"kind": "preset", "preset": "1b"}, "compiled": False,
                        "attention_backend": "auto"}) == "launchgap's decoder, preset 1b, not compiled"
    assert source_text({"model_source": {"kind": "preset", "preset": "1b"}, "compiled": False,
                        "attention_backend": "eager"}) == ("launchgap's decoder, preset 1b, not compiled, eager "
                                                           "attention (matmul, softmax, matmul)")
    assert main(["record", "--model", "tiny", "--attention-backend", "eager", "--batch-sizes", "1", "--out",
                 "/nonexistent", "--dry-run"]) == 0
    assert capsys.readouterr().out.startswith("models: tiny-eager (4 layers, hidden 256) (attention: eager attention "
                                              "(matmul, softmax, matmul))\n")


@needs_torch
def test_eager_attention_computes_what_sdpa_does() -> None:
    """The built-in decoder's attention written out (matmul, float32 softmax, matmul) against SDPA, same weights and
    state: the same step output to float32 rounding; no SDPA call is made (its kernel list would say it)."""
    from launchgap.harness.model import Decoder, resolve_config

    cfg = resolve_config("tiny", layers=2)
    sdpa = Decoder(cfg, 3, 32, 8, device="cpu", seed=1)
    eager = Decoder(cfg, 3, 32, 8, device="cpu", seed=1, eager_attention=True)
    for _ in range(2):  # the second step reads the position the first wrote
        sdpa.step(3)
        eager.step(3)
        torch.testing.assert_close(eager.last_logits, sdpa.last_logits, rtol=1e-4, atol=1e-4)
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        eager.step(3)
    ops = {e.key for e in prof.key_averages()}
    assert "aten::softmax" in ops and not any("scaled_dot_product" in op for op in ops)


@needs_torch
def test_attention_backend_runs_only_that_kernel(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``--attention-backend math`` records under its own name and entry; a backend PyTorch cannot run for the
    step's attention (CUTLASS's memory-efficient kernel on a CPU) is a one-line error, not a traceback."""
    base = ["record", *SMALL, "--modes", "eager", "--batch-sizes", "1", "--no-micro", "--device", "cpu"]
    assert main([*base, "--attention-backend", "math", "--out", str(tmp_path / "m")]) == 0
    doc = load_timings(tmp_path / "m" / "timings.json")
    assert {r["model"] for r in doc["rows"]} == {"tiny-layers2-math"}
    assert doc["models"]["tiny-layers2-math"]["attention_backend"] == "math"
    assert (tmp_path / "m" / "tiny-layers2-math_bs1_eager.json.gz").is_file()
    capsys.readouterr()
    if torch.cuda.is_available():
        return
    assert main([*base, "--attention-backend", "efficient", "--out", str(tmp_path / "e")]) == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert err.startswith("launchgap: error: --attention-backend efficient: PyTorch has no efficient SDPA kernel "
                          "for tiny-layers2-efficient's attention on this device (")
    assert "Traceback" not in err


@needs_torch
def test_graph_memory_needs_cuda(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    assert main(["record", *SMALL, "--capture-lists", "pow2-4", "--out", str(tmp_path)]) == 2
    assert "graph memory needs a CUDA GPU" in capsys.readouterr().err


@needs_torch
def test_replay_error_compares_a_run_with_the_eager_step_from_the_same_state() -> None:
    from launchgap.harness.graphs import REPLAY_TOLERANCE, PiecewiseStep, replay_error
    from launchgap.harness.model import Decoder, resolve_config

    m = Decoder(resolve_config("tiny", layers=2, vocab=256), 4, context_len=16, start_pos=4, device="cpu", seed=5)

    class Run:  # stands in for a Captured: run() and the logits it wrote
        size = 4

        def __init__(self, fn) -> None:
            self.fn = fn

        def run(self) -> None:
            self.fn()

        @property
        def logits(self):
            return m.last_logits

    pw = PiecewiseStep(m, 4)
    assert replay_error(torch, m, Run(pw.run)) == 0.0
    assert int(m.pos.item()) == 5  # run twice from one state: one step further in the end

    def wrong() -> None:  # a step that reads stale tokens
        m.tokens[:4].add_(1)
        m.step(4)

    assert replay_error(torch, m, Run(wrong)) > REPLAY_TOLERANCE


def test_held_out_3b_preset() -> None:
    from launchgap.harness.model import PRESETS

    c = PRESETS["3b"]
    assert (c.layers, c.hidden, c.heads, c.kv_heads, c.mlp, c.vocab, c.head_dim) == (28, 3072, 24, 8, 8192, 128256, 128)
    assert round(c.param_count() / 1e9, 2) == 3.61
