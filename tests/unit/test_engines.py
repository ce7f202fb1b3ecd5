"""The engine registry and each engine's marker grammar, with exact numbers."""
from __future__ import annotations

import re
from types import ModuleType

import pytest

from launchgap import engines
from launchgap.engines import ENGINES, LABELS, NAMES, REQUIRED, STEP_MARKERS, StepInfo, engine
from launchgap.errors import InputError


@pytest.mark.parametrize("mod", ENGINES, ids=lambda m: m.NAME)
def test_every_engine_module_has_everything(mod: ModuleType) -> None:
    for attr in REQUIRED:
        assert hasattr(mod, attr), f"{mod.__name__} lacks {attr}"
    assert isinstance(mod.NAME, str) and re.fullmatch(r"[a-z_]+", mod.NAME)
    assert isinstance(mod.LABEL, str) and mod.LABEL
    assert mod.VERSIONS_READ and all(isinstance(v, str) and v for v in mod.VERSIONS_READ)
    assert mod.STEP_MARKERS and all(m.engine == mod.NAME for m in mod.STEP_MARKERS)
    assert {m.source for m in mod.STEP_MARKERS} <= set(engines.MARKER_SOURCES)
    assert all(m.written_by for m in mod.STEP_MARKERS)
    assert mod.CAPTURE_ANNOTATION is None or {"size", "mode"} <= set(mod.CAPTURE_ANNOTATION.groupindex)
    assert isinstance(mod.PYTHON_CUE, re.Pattern) and isinstance(mod.OP_CUE, re.Pattern)
    re.compile(mod.COLLECTIVE_KERNELS)
    assert mod.SNIPPET_LANGUAGE in ("bash", "yaml")
    assert mod.CAPTURE_LISTS and all(callable(f) for f in mod.CAPTURE_LISTS.values())
    newest = next(iter(mod.CAPTURE_LISTS.values()))
    for padding in ("pad", "exact"):
        for top in (None, 1, 8, 100, 300, 600):
            sizes = mod.default_sizes(top, padding)
            assert sizes == sorted(set(sizes)) and sizes[0] >= 1
            assert sizes[-1] <= (mod.DEFAULT_MAX_SIZE if top is None else top)
        assert mod.default_sizes(None, padding) == newest(None, padding)
    assert mod.capture_config([2, 4], "pad") and mod.config_snippet([2, 4], "pad")
    assert mod.config_snippet([], "pad")


def test_registry() -> None:
    assert NAMES == ("vllm", "sglang", "tensorrt_llm")
    assert LABELS == {"vllm": "vLLM", "sglang": "SGLang", "tensorrt_llm": "TensorRT-LLM"}
    assert engine("sglang").NAME == "sglang"
    with pytest.raises(InputError, match="unknown server 'tgi'"):
        engine("tgi")
    assert engines.default_sizes("vllm", 16) == [1, 2, 4, 8, 16]


def _read(text: str) -> tuple[str, StepInfo] | None:
    for m in STEP_MARKERS:
        info = m.read(text)
        if info is not None:
            return m.engine, info
    return None


@pytest.mark.parametrize("text, engine_name, phase, requests, tokens", [
    # vLLM detailed (PR #37524): tokens first, then per side sum q / sum kv / sum q^2 / sum q*kv.
    ("execute_32_context_0(sq0sk0sqsq0sqsk0)_generation_32(sq32sk55086sqsq32sqsk55086)", "vllm", "decode", 32, 32),
    ("execute_8192_context_9(sq8155sk8430sqsq7475785sqsk7671310)_generation_37(sq37sk34489sqsq37sqsk34489)",
     "vllm", "mixed", 46, 8192),
    ("execute_512_context_2(sq512sk512sqsq131072sqsk131072)_generation_0(sq0sk0sqsq0sqsk0)", "vllm", "prefill", 2,
     512),
    # vLLM context/generation (PR #31193), with and without a fork's extra figure.
    ("execute_context_1(888_788544)_generation_0(0)", "vllm", "prefill", 1, 888),
    ("execute_context_3(300)_generation_61(61)", "vllm", "mixed", 64, 361),
    ("execute_context_0(0)_generation_8(8)", "vllm", "decode", 8, 8),
    # vLLM new/cached (PR #22496): only "no cached request" says the phase.
    ("execute_new_4_cached_0", "vllm", "prefill", 4, None),
    ("execute_new_0_cached_30", "vllm", None, 30, None),
    ("execute_new_2_cached_30", "vllm", None, 32, None),
    ("execute_model", "vllm", None, None, None),
    ("vllm/v1/worker/gpu_model_runner.py(3380): execute_model", "vllm", None, None, None),
    ("/usr/lib/python3/dist-packages/vllm/v1/worker/gpu/model_runner.py(512): execute_model", "vllm", None, None,
     None),
    # SGLang step spans (PR #23419 and the forms of its description).
    ("step[DECODE bs=32]", "sglang", "decode", 32, 32),
    ("step[EXTEND bs=15 toks=15360]", "sglang", "prefill", 15, 15360),
    ("step[MIXED bs=12]", "sglang", "mixed", 12, None),
    ("step[mixed bs=12 ext=900 dec=10]", "sglang", "mixed", 12, 910),
    ("step[prefill bs=3 toks=700]", "sglang", "prefill", 3, 700),
    ("step[decode bs=5]", "sglang", "decode", 5, 5),
    ("step[idle]", "sglang", None, 0, None),
    ("step[TARGET_VERIFY bs=8]", "sglang", "decode", 8, None),
    ("step[DRAFT_EXTEND_V2 bs=1]", "sglang", None, 1, None),
    ("step[DECODE bs=32 ctx=2 kv=900]", "sglang", "decode", 32, 32),
    ("/sgl-workspace/sglang/python/sglang/srt/model_executor/model_runner.py(3123): forward", "sglang", None, None,
     None),
    # TensorRT-LLM PyExecutor NVTX range.
    ("[Executor] _forward_step 17: 0 ctx reqs, 64 gen reqs", "tensorrt_llm", "decode", 64, None),
    ("[Executor] _forward_step 3: 2 ctx reqs, 0 gen reqs", "tensorrt_llm", "prefill", 2, None),
    ("[Executor] _forward_step 9: 1 ctx reqs, 7 gen reqs", "tensorrt_llm", "mixed", 8, None),
    ("tensorrt_llm/_torch/pyexecutor/py_executor.py(1377): _forward_step", "tensorrt_llm", None, None, None),
])
def test_marker_grammar(text: str, engine_name: str, phase: str | None, requests: int | None,
                        tokens: int | None) -> None:
    assert _read(text) == (engine_name, StepInfo(phase, requests, tokens))


@pytest.mark.parametrize("text", [
    "decode_step[bs=8]", "ProfilerStep#3", "execute_model_x", "step [DECODE bs=1]", "mystep[DECODE bs=1]",
    "execute_context_1(888)", "capture_32_FULL", "vllm/v1/worker/gpu_model_runner.py(10): _dummy_run",
    "[Executor] _forward_step", "## Call CompiledFxGraph abc ##",
])
def test_not_markers(text: str) -> None:
    assert _read(text) is None


def test_capture_lists_exact() -> None:
    vllm, sglang, trt = (engine(n) for n in NAMES)
    assert len(vllm.v1_sizes()) == 51 and vllm.v1_sizes()[-3:] == [480, 496, 512]
    assert vllm.v0_sizes() == [1, 2, 4] + list(range(8, 257, 8))
    assert sglang.default_max_bs(141, 1) == 256 and sglang.default_max_bs(141, 8) == 512  # H200
    assert sglang.default_max_bs(80, 2) == 256 and sglang.default_max_bs(192, 1) == 512  # H100, MI300X
    assert sglang.default_max_bs(40, 1) == 32 and sglang.default_max_bs(24, 4) == 80
    assert sglang.default_max_bs(None) == 160
    assert sglang.current_sizes(512)[-3:] == [480, 496, 512] and len(sglang.current_sizes(512)) == 52
    assert sglang.older_sizes() == [1, 2, 4, 8] + list(range(16, 257, 8))
    assert trt.pytorch_config_sizes(1024) == [1, 2, 4] + list(range(8, 129, 8)) + [256, 512, 1024]
    assert trt.current_sizes(1024)[-4:] == [832, 896, 960, 1024]


def test_config_writers() -> None:
    vllm, sglang, trt = (engine(n) for n in NAMES)
    assert vllm.capture_config([1, 8], "pad") == {"cudagraph_capture_sizes": [1, 8]}
    assert vllm.config_snippet([1, 8], "pad") == "--compilation-config '{\"cudagraph_capture_sizes\": [1, 8]}'"
    assert sglang.config_snippet([1, 8], "exact") == "--cuda-graph-bs 1 8 --disable-cuda-graph-padding"
    assert trt.config_snippet([1, 8], "pad") == "cuda_graph_config:\n  batch_sizes: [1, 8]\n  enable_padding: true"
    assert [e.config_snippet([], "pad") for e in ENGINES] == ["--enforce-eager", "--disable-cuda-graph",
                                                               "cuda_graph_config: null"]


# --- one parser for every engine's capture settings (--capture-sizes TEXT, --server-config, the dashboard) ----

@pytest.mark.parametrize("text, eng, read, padding, sizes", [
    ("1, 2,4 8", "", ("sizes=[1, 2, 4, 8]",), "pad", [1, 2, 4, 8]),
    ('{"cudagraph_capture_sizes": [1, 2, 4, 8, 16], "cudagraph_mode": "FULL_AND_PIECEWISE"}', "vllm",
     ("cudagraph_capture_sizes=[1, 2, 4, 8, 16]", "cudagraph_mode=FULL_AND_PIECEWISE"), "pad", [1, 2, 4, 8, 16]),
    # the Python dict vLLM's launch log prints (single quotes, enum reprs)
    ("{'cudagraph_capture_sizes': [1, 2, 4, 8, 16, 24, 32], 'cudagraph_copy_inputs': False, "
     "'cudagraph_mode': <CUDAGraphMode.FULL_AND_PIECEWISE: (2, 1)>, 'max_cudagraph_capture_size': 24}", "vllm",
     ("cudagraph_capture_sizes=[1, 2, 4, 8, 16, 24, 32]", "max_cudagraph_capture_size=24",
      "cudagraph_mode=FULL_AND_PIECEWISE"), "pad", [1, 2, 4, 8, 16, 24]),
    ("vllm serve m --max-num-seqs 12", "vllm", ("max_num_seqs=12 (default maximum min(2 x 12, 512) = 24)",), "pad",
     [1, 2, 4, 8, 16, 24]),
    ("-cc.cudagraph_capture_sizes '[1,2,4,8,16,24,32,48,64]' -cc.max_cudagraph_capture_size 64", "vllm",
     ("cudagraph_capture_sizes=[1, 2, 4, 8, 16, 24, 32, 48, 64]", "max_cudagraph_capture_size=64"), "pad",
     [1, 2, 4, 8, 16, 24, 32, 48, 64]),
    ("--cudagraph-capture-sizes 1 2 4 8 --port 8000", "vllm", ("cudagraph_capture_sizes=[1, 2, 4, 8]",), "pad",
     [1, 2, 4, 8]),
    ("--enforce-eager", "vllm", ("enforce_eager=true",), "pad", []),
    ("python -m sglang.launch_server --cuda-graph-max-bs 20 --disable-cuda-graph-padding", "sglang",
     ("cuda_graph_max_bs=20", "disable_cuda_graph_padding=true"), "exact", list(range(1, 21))),
    ("server_args=ServerArgs(model_path='x', cuda_graph_max_bs=40, cuda_graph_bs=None, disable_cuda_graph=False, "
     "disable_cuda_graph_padding=False)", "sglang", ("cuda_graph_max_bs=40", "disable_cuda_graph_padding=false"),
     "pad", [1, 2, 4, 8, 12, 16, 24, 32, 40]),
    ("--cuda-graph-bs 1 2 4 8 16", "sglang", ("cuda_graph_bs=[1, 2, 4, 8, 16]",), "pad", [1, 2, 4, 8, 16]),
    ("cuda_graph_config:\n  batch_sizes:\n    - 1\n    - 2\n    - 8\n  enable_padding: true\nmax_batch_size: 512\n",
     "tensorrt_llm", ("cuda_graph_config", "batch_sizes=[1, 2, 8]", "enable_padding=true"), "pad", [1, 2, 8]),
    ("cuda_graph_config:\n  max_batch_size: 24\n  enable_padding: true\n", "tensorrt_llm",
     ("cuda_graph_config", "max_batch_size=24", "enable_padding=true"), "pad", [1, 2, 4, 8, 16, 24]),
    ('{"cuda_graph_config": {"batch_sizes": [1, 4, 16]}, "max_batch_size": 9}', "tensorrt_llm",
     ("cuda_graph_config", "batch_sizes=[1, 4, 16]"), "exact", [1, 4, 16]),
    ("cuda_graph_config: null", "tensorrt_llm", ("cuda_graph_config=null",), None, []),
])
def test_parse_server_config(text: str, eng: str, read: tuple, padding: str | None, sizes: list[int]) -> None:
    s = engines.parse_server_config(text)
    assert (s.engine, s.read, s.padding) == (eng, read, padding)
    assert engines.capture_sizes_of(s) == sizes


@pytest.mark.parametrize("text, message", [
    ("hello", "server config: no CUDA-graph capture setting recognised"),
    ("--cuda-graph-bs x", "server config (SGLang): cuda_graph_bs: expected a list of positive integers"),
    ("max_cudagraph_capture_size: -3", "server config (vLLM): max_cudagraph_capture_size: expected a positive integer"),
    ("__import__('os').system('x')", "server config: no CUDA-graph capture setting recognised"),
    ("0,2", "capture sizes '0,2': expected positive integers"),
    ("x" * (engines.MAX_CONFIG_CHARS + 1), "over the 1,048,576 cap"),
])
def test_parse_server_config_refuses(text: str, message: str) -> None:
    with pytest.raises(InputError, match=re.escape(message)):
        engines.parse_server_config(text)


def test_engine_hint_and_trace_defaults() -> None:
    both = "--cuda-graph-max-bs 8 --max-cudagraph-capture-size 16"
    assert engines.parse_server_config(both).engine == "vllm"  # a tie: registry order
    assert engines.parse_server_config(both, "sglang").engine == "sglang"
    assert engine("sglang").trace_default("NVIDIA H200", 139.8, 1) == (
        engine("sglang").current_sizes(256), "SGLang default, cuda_graph_max_bs 256 (140 GiB, TP 1)")
    assert engine("sglang").trace_default(None, None, 4)[1] == "SGLang default, cuda_graph_max_bs 160 (unknown memory, TP 4)"
    assert engine("vllm").trace_default("NVIDIA B200", 180.0, 8)[0][-1] == 1024
    assert engine("vllm").trace_default("NVIDIA H100 80GB HBM3", 80.0, 4) == (
        engine("vllm").v1_sizes(), "vLLM V1 default, maximum 512")
    assert engine("tensorrt_llm").trace_default(None, None, None)[0][-3:] == [32, 64, 128]


def test_the_default_list_of_a_logs_version():
    """A log naming no capture list: vLLM before 0.8 ran the V0 engine (up to max_num_seqs, 256), later V1 (up to
    min(2 x max_num_seqs, 512)); an unknown version takes the newest; engines without versioned defaults their newest."""
    from launchgap.engines import version_default

    assert [(max(s), w) for s, w in (version_default("vllm", "0.6.4.post1", None), version_default("vllm", "0.6.4", 64),
                                     version_default("vllm", "0.22.0", 128), version_default("vllm", None, None))] == [
        (256, "V0 engine (up to 0.10)"), (64, "V0 engine (up to 0.10)"),
        (256, "V1 engine (0.11+, max_cudagraph_capture_size)"), (512, "V1 engine (0.11+, max_cudagraph_capture_size)")]
    sizes, which = version_default("sglang", "0.5.9", None)
    assert (sizes, which) == (engines.default_sizes("sglang"), engines.default_version("sglang"))
