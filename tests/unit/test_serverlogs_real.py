"""Real server logs and scrapes pasted by users of each engine (tests/serverlogs_real/PROVENANCE.md):
the engine recognised, every decode / stats / iteration line read, graph flags, the capture list, its
seconds and memory exact (the numbers are the ones in the pasted lines), no ceiling state flagged
where none shows, and a plan in the engine's own syntax from a log alone."""
from __future__ import annotations

from pathlib import Path

import pytest

from launchgap.serverlogs import read_server_file
from launchgap.serverlogs.diagnosis import diagnose

REAL = Path(__file__).resolve().parents[1] / "serverlogs_real"

#: file -> what the pasted lines say (None: the excerpt does not say)
EXPECTED = {
    "sglang-pr22166.log": dict(engine="sglang", batch=[32], graph=[1], tok=[1635.11], prefill=([1, 1, 1], [158, 290, 160])),
    "sglang-pr13023.log": dict(engine="sglang", batch=[46, 36, 28, 22, 20, 15, 12, 11], graph=[0, 0, 1, 1, 1, 1, 1, 1],
                               tok=[1447.08, 1262.64, 1086.59, 895.36, 768.87, 681.65, 532.14, 475.19]),
    "sglang-fastrl4-custom-prefix.log": dict(engine="sglang", batch=[48, 48], graph=[0, 0], tok=[5452.63, 5399.46]),
    "sglang-npu-pr608.log": dict(engine="sglang", batch=[24, 23, 22], graph=[1, 1, 1], tok=[239.06, 631.96, 648.87],
                                 prefill=([8], [54400]), sources=["TP0 EP0"]),
    "sglang-issue33483-capture.log": dict(engine="sglang", sizes=[1, 2, 4, 8, 12, 16, 24, 32], seconds=0.89,
                                          memory_mib=0.15 * 1024, max_running=4096),
    "sglang-pr20758-capture-tp2.log": dict(engine="sglang", sizes=[1, 2, 4, 8], seconds=27.41, memory_mib=0.83 * 1024),
    "sglang-pr12978-capture-tp2.log": dict(engine="sglang", sizes=None, count=36, seconds=11.39, memory_mib=1.00 * 1024),
    "sglang-pr11830-capture.log": dict(engine="sglang", sizes=None, count=52, seconds=5.92, memory_mib=1.44 * 1024,
                                       max_running=4096),
    "sglang-pr11716-capture-tp8.log": dict(engine="sglang", sizes=[1, 2, 4, 8, 12, 16, 24] + list(range(32, 257, 8))
                                           + list(range(272, 513, 16)), count=52),
    "vllm-pr11349-v0-capture.log": dict(engine="vllm", seconds=14.0, memory_mib=0.21 * 1024),
    "vllm-pr19794-v1-capture.log": dict(engine="vllm", seconds=14.0, memory_mib=0.84 * 1024),
    "vllm-issue2734-ray.log": dict(engine="vllm", batch=[1, 1], seconds=35.0, memory_mib=None),
    "vllm-kserve4470-v0-stats.log": dict(engine="vllm", batch=[1]),
    "vllm-tt3359-docker-stats.log": dict(engine="vllm", batch=[9, 9, 10, 10]),
    "vllm-issue43295-stats.log": dict(engine="vllm", batch=[18, 18, 18, 21, 20]),
    "vllm-genesis24-spec.log": dict(engine="vllm", batch=[0, 0]),
    "vllm-prodstack318-metrics.prom": dict(engine="vllm", kind="metrics", batch=[0]),
    "trtllm-pr6683-iter.log": dict(engine="tensorrt_llm", batch=[], iter_batch=[0, 1, 2, 3], iter_context=[1, 1, 1, 1],
                                   iter_ms=[82.3206901550293, 98.75988960266113, 66.9400691986084, 94.99597549438477]),
    # before PR #3914 the line has no num_scheduled_requests: the generation tokens (padding included) stand in
    "trtllm-pr3914-iter.log": dict(engine="tensorrt_llm", batch=[16, 10], iter_batch=[16, 10], iter_context=[0, 0]),
}
#: the periodic record of each engine: every line holding it must be read
MARKERS = {"sglang": b"Decode batch", "vllm": b"Avg prompt throughput", "tensorrt_llm": b"iter = "}


def test_every_real_excerpt_is_listed_with_its_provenance():
    files = {p.name for p in REAL.iterdir() if p.name != "PROVENANCE.md"}
    prov = (REAL / "PROVENANCE.md").read_text()
    assert files == set(EXPECTED) and all(f"`{f}`" in prov for f in files)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_real_excerpt(name):
    want = EXPECTED[name]
    log = read_server_file(REAL / name)
    assert (log.engine, log.kind) == (want["engine"], want.get("kind", "log"))
    assert log.skipped_lines == 0
    text = (REAL / name).read_bytes()
    records = sum(1 for ln in text.splitlines() if MARKERS[log.engine] in ln)
    read = len(log.iter_batch) if log.engine == "tensorrt_llm" else len(log.decode_batch)
    if log.kind == "log":
        assert read == records  # every decode / stats / iteration line read (>= 99% asked)
    if "batch" in want:
        assert log.decode_batch.tolist() == want["batch"]
    if "graph" in want:
        assert log.decode_graph.tolist() == want["graph"]
    if "tok" in want:
        assert log.decode_tok_s.tolist() == pytest.approx(want["tok"], rel=1e-7)  # float32
    if "prefill" in want:
        assert (log.prefill_batch.tolist(), log.prefill_tokens.tolist()) == want["prefill"]
    if "sources" in want:
        assert log.sources == want["sources"]
    if "sizes" in want:
        assert log.capture_sizes == want["sizes"]
    if "count" in want:
        assert log.capture_count == want["count"]
    if "seconds" in want:
        assert log.capture_seconds == want["seconds"]
    if "memory_mib" in want:
        assert log.capture_memory_mib == (None if want["memory_mib"] is None else pytest.approx(want["memory_mib"],
                                                                                                 abs=1e-9))
    if "max_running" in want:
        assert log.max_running_requests == want["max_running"]
    for col in ("iter_batch", "iter_context"):
        if col in want:
            assert getattr(log, col).tolist() == want[col]
    if "iter_ms" in want:
        assert log.iter_ms.tolist() == pytest.approx(want["iter_ms"], rel=1e-7)  # float32
    d = diagnose(log)
    assert d.absorbing is not True  # no excerpt stays above its ceiling


@pytest.mark.parametrize("name, syntax", [("sglang-pr13023.log", ": --cuda-graph-bs "),
                                          ("vllm-issue43295-stats.log", """: --compilation-config '{"cudagraph_capture_sizes": ["""),
                                          ("trtllm-pr3914-iter.log", ": cuda_graph_config:\n  batch_sizes: [")])
def test_plan_from_a_real_log(name, syntax, capsys):
    from launchgap.cli import main

    rc = main(["plan", "--server-log", str(REAL / name)])
    out = capsys.readouterr().out
    engine = read_server_file(REAL / name).engine
    label = {"sglang": "SGLang", "vllm": "vLLM", "tensorrt_llm": "TensorRT-LLM"}[engine]
    assert rc == 0
    assert f"note: {label} ({REAL / name}){syntax}" in out  # the plan as that server's own flags or config
