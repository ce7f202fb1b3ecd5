"""Every Kineto trace of HTA's own test data either analyses or gets its one-line error.

Runs ``launchgap analyze --format json`` in-process on each file of traces/hta
(copied from facebookresearch/HolisticTraceAnalysis, see its PROVENANCE.md and INVENTORY.tsv).
A file that analyses must report the kernel count INVENTORY.tsv lists for it (counted
independently when the folder was made). A file that cannot be analysed must exit 2 with
one line naming the file and the documented reason.
"""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from launchgap.cli import main

#: Files expected to be refused, and the reason their one-line error must give.
REFUSED = {
    "cpu_only/rank-34.Jul_15_10_52_41.1074.pt.trace.json.gz": r"CPU-only trace",
    # A PyTorch execution trace (ET: schema/nodes), not a Kineto trace.
    "execution_trace/benchmark_simple_add_et.json.gz": r"without a 'traceEvents' list: not a Kineto/Chrome trace",
    "mtia_inference_trace/mtia_inference_rank_0.json.gz": r"MTIA",
}
ANALYSED = (
    "amd_trace/mi250_minitoy_train_ROCm6_2_kineto.json.gz",
    "call_stack/backward_thread.json.gz",
    "critical_path/alexnet/benchmark_result_2869224_1695835535_trace.json.gz",
    "critical_path/cuda_event_sync_multi_stream/event_sync_trace.json.gz",
    "critical_path/simple_add/benchmark_result_493459_1694039959_trace.json.gz",
    "df_index_resolver/df_index_resolver.json.gz",
    "execution_trace/benchmark_simple_add_trace.json.gz",
    "large_integer_trace/rank-70.Mar_25_20_48_12.2861.pt.trace.json.gz",
    "nccl_parser_config/nccl_data.json.gz",
    "negative_queue_length_values_check/rank0.json.gz",
    "ns_resolution_trace/rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz",
    "trace_diff/control/control.json.gz",
    "trace_diff/test/test.json.gz",
    "trace_filter/sampled_rank-0.json.gz",
    "trace_filter/sampled_rank-1.json.gz",
    "triton_example/triton_example.json.gz",
    "with_gpu_user_annotation/step_based_trace_2543932.json.gz",
)


@pytest.fixture(scope="module")
def hta_dir(reference_traces: Path) -> Path:
    return reference_traces / "hta"


@pytest.fixture(scope="module")
def inventory_kernels(hta_dir: Path) -> dict[str, int]:
    """Kernel count per file, from INVENTORY.tsv (``kernels=N`` on each Kineto file's line)."""
    out = {}
    for line in (hta_dir / "INVENTORY.tsv").read_text().splitlines():
        m = re.search(r"\tkernels=(\d+)\t", line)
        if m:
            out[line.split("\t", 1)[0]] = int(m.group(1))
    return out


def _analyze(path: Path, capsys) -> tuple[int, str, str]:
    rc = main(["analyze", str(path), "--format", "json"])
    cap = capsys.readouterr()
    return rc, cap.out, cap.err


def test_every_trace_file_is_listed(hta_dir):
    on_disk = {str(p.relative_to(hta_dir)) for p in hta_dir.rglob("*") if p.name.endswith((".json", ".json.gz"))}
    assert on_disk == set(ANALYSED) | set(REFUSED)


@pytest.mark.parametrize("rel", ANALYSED)
def test_trace_analyses(rel, hta_dir, inventory_kernels, capsys):
    rc, out, err = _analyze(hta_dir / rel, capsys)
    assert rc == 0, err
    doc = json.loads(out)
    assert doc["schema"] == "launchgap.report/1" and doc["errors"] == []
    (rep,) = doc["traces"]
    assert sum(d["kernels"] for d in rep["devices"]) == inventory_kernels[rel]
    assert all(d["gpu_window_us"] >= d["gpu_busy_us"] >= 0 for d in rep["devices"])


@pytest.mark.parametrize("rel", REFUSED)
def test_trace_is_refused_with_its_reason(rel, hta_dir, capsys):
    path = hta_dir / rel
    rc, out, err = _analyze(path, capsys)
    assert rc == 2 and out == ""
    line = err.strip()
    assert "\n" not in line and "Traceback" not in line
    assert line.startswith(f"launchgap: error: {path}: ")
    assert re.search(REFUSED[rel], line), line
