"""``launchgap.timings/1`` (analyzer/timings.py): the committed files stay valid, every new
section is checked, errors are one line naming the file and the field, stdlib only."""
from __future__ import annotations

import copy
import re
import subprocess
import sys
from pathlib import Path

import pytest

from launchgap.errors import InputError
from launchgap.timings import SCHEMA, load_timings, validate_timings, write_timings

REPO = Path(__file__).resolve().parents[2]


def _doc() -> dict:
    """A small document with every optional section, as the harness writes them."""
    return {
        "schema": SCHEMA, "device": "NVIDIA H200", "torch": "2.11.0+cu130", "cuda": "13.0",
        "rows": [
            {"model": "1b", "batch_size": 8, "eager_us": 14000.5, "graph_us": 2100.0, "piecewise_us": 3000.0,
             "eager_us_rounds": [14000.5, 13990.0], "graph_pool_bytes": 0, "kernels_per_step": 737},
            {"model": "1b", "batch_size": 37, "eager_us": None, "graph_us": 2500.0},  # graph-only sweep
        ],
        "profiled_vs_unprofiled": [
            {"model": "1b", "batch_size": 8, "profiler": "shapes", "unprofiled_eager_us_before": 14100.0,
             "unprofiled_eager_us_after": 13900.0, "unprofiled_graph_us": 2100.0,
             "trace": "1b_bs8_eager_shapes.json.gz"},
        ],
        "graph_memory": [
            {"model": "1b", "mode": "full", "list_name": "1,2", "capture_sizes": [1, 2], "graphs": 2,
             "nodes_per_graph": {"1": 737, "2": None}, "reserved_mib": 40.0, "device_used_mib": 52.0,
             "capture_s": 0.2,
             "per_size": [{"size": 2, "reserved_mib": 40.0, "device_used_mib": 50.0, "capture_s": 0.1, "nodes": None},
                          {"size": 1, "reserved_mib": 0.0, "device_used_mib": 2.0, "capture_s": 0.1, "nodes": 737}]},
        ],
        "serving": [
            {"model": "1b", "graph_mode": "full", "list_name": "1,2,4", "capture_sizes": [1, 2, 4],
             "steps": [{"index": 0, "batch_size": 3, "bucket": 4, "mode": "graph", "fallback": False},
                       {"index": 1, "batch_size": 2, "bucket": 2, "mode": "eager", "fallback": True},
                       {"index": 2, "batch_size": 9, "bucket": None, "mode": "eager", "fallback": False}],
             "kinds": [{"mode": "graph", "batch_size": 3, "bucket": 4, "us": 2000.0},
                       {"mode": "eager", "batch_size": 2, "bucket": None, "us": 14000.0}],
             "tokens": 14, "sequence_us": [2000.0, 14000.0, 15000.0], "throughput_tokens_per_s": 448.7,
             "capture_s": 0.3, "reserved_mib": 30.0, "device_used_mib": 40.0, "trace": "1b_serving.json.gz"},
        ],
    }


def test_full_document_is_valid_and_returned_unchanged() -> None:
    doc = _doc()
    assert validate_timings(doc, "t.json") is doc


@pytest.mark.parametrize("rel", ["traces/h200/timings.json", "traces/h200/timings_run2.json",
                                 "traces/h200-1b/truth.json", "traces/h200x2-tp2-1b/truth.json"])
def test_committed_files_stay_valid(rel: str) -> None:
    doc = load_timings(REPO / rel)
    assert doc["rows"] and all(isinstance(r["batch_size"], int) for r in doc["rows"])


def test_truth_layout_bs_is_renamed_in_a_copy() -> None:
    raw = {"rows": [{"model": "1b", "bs": 4, "eager_us": 10.0, "graph_us": 2.0}]}
    out = validate_timings(raw, "truth.json")
    assert out["rows"] == [{"model": "1b", "bs": 4, "eager_us": 10.0, "graph_us": 2.0, "batch_size": 4}]
    assert "batch_size" not in raw["rows"][0]  # the input is not modified


def _set(doc: dict, dotted: str, value: object) -> dict:
    """Set ``a.0.b`` in a copy of ``doc`` (``value`` ``...`` deletes the key)."""
    doc = copy.deepcopy(doc)
    *parents, last = dotted.split(".")
    node = doc
    for p in parents:
        node = node[int(p)] if isinstance(node, list) else node[p]
    key = int(last) if isinstance(node, list) else last
    if value is ...:
        del node[key]
    else:
        node[key] = value
    return doc


@pytest.mark.parametrize("dotted, value, message", [
    ("schema", "launchgap.report/1", "expected schema 'launchgap.timings/1', found 'launchgap.report/1'"),
    ("rows", ..., "no 'rows' list"),
    ("rows", {}, "rows is dict, expected a list"),
    ("rows.0.batch_size", 0, "rows[0].batch_size is 0, expected a positive integer"),
    ("rows.0.batch_size", True, "rows[0].batch_size is True, expected a positive integer"),
    ("rows.0.model", 3, "rows[0].model is 3, expected a non-empty string"),
    ("rows.0.eager_us", float("nan"), "rows[0].eager_us is nan, expected a finite number or null"),
    ("rows.0.graph_us", -1.0, "rows[0].graph_us is -1.0, expected a positive number"),
    ("rows.1.graph_us", None, "rows[1] times no mode"),
    ("rows.0.eager_us_rounds", [1.0, None], "rows[0].eager_us_rounds[1] is missing or null"),
    ("rows.0.kernels_per_step", "737", "rows[0].kernels_per_step is '737', expected a finite number"),
    ("profiled_vs_unprofiled.0.profiler", "cuda", "profiled_vs_unprofiled[0].profiler is 'cuda', expected one of"),
    ("profiled_vs_unprofiled.0.unprofiled_eager_us_after", None,
     "profiled_vs_unprofiled[0].unprofiled_eager_us_after is missing or null"),
    ("profiled_vs_unprofiled.0.trace", ..., "profiled_vs_unprofiled[0] lacks trace"),
    ("graph_memory.0.mode", "FULL", "graph_memory[0].mode is 'FULL', expected one of full, piecewise"),
    ("graph_memory.0.capture_sizes", [], "graph_memory[0].capture_sizes is empty"),
    ("graph_memory.0.nodes_per_graph", {"x": 3}, "graph_memory[0].nodes_per_graph has key 'x'"),
    ("graph_memory.0.per_size.0.size", 3, "graph_memory[0].per_size[0].size 3 is not in capture_sizes"),
    ("graph_memory.0.per_size.1.nodes", -2, "graph_memory[0].per_size[1].nodes is -2"),
    ("graph_memory.0.reserved_mib", "40", "graph_memory[0].reserved_mib is '40'"),
    ("serving.0.steps.0.bucket", 2, "serving[0].steps[0].bucket 2 is not a captured size >= the batch 3"),
    ("serving.0.steps.0.bucket", None, "serving[0].steps[0] is a graph step without a bucket"),
    ("serving.0.steps.2.fallback", True, "serving[0].steps[2] is a fallback, which needs mode eager and the bucket"),
    ("serving.0.steps.1.index", 5, "serving[0].steps[1].index is 5, expected 1"),
    ("serving.0.tokens", 13, "serving[0].tokens is 13, expected 14"),
    ("serving.0.sequence_us", [1.0], "serving[0].sequence_us has 1 values for 3 steps"),
    ("serving.0.kinds.0.us", 0, "serving[0].kinds[0].us is 0, expected a positive number"),
    ("serving.0.graph_mode", "eager", "serving[0].graph_mode is 'eager'"),
])
def test_bad_documents_are_one_line_naming_file_and_field(dotted: str, value: object, message: str) -> None:
    with pytest.raises(InputError) as err:
        validate_timings(_set(_doc(), dotted, value), "runs/t.json")
    text = str(err.value)
    assert text.startswith("runs/t.json: ") and message in text and "\n" not in text


@pytest.mark.parametrize("content, message", [
    (b"\xff\xfe", "not UTF-8 text"),
    (b"{", "not a timings JSON file (Expecting property name"),
    (b"[1]", "the JSON is list, expected an object"),
])
def test_load_bad_files(tmp_path: Path, content: bytes, message: str) -> None:
    p = tmp_path / "t.json"
    p.write_bytes(content)
    with pytest.raises(InputError, match=re.escape(message)):
        load_timings(p)
    with pytest.raises(InputError, match="no such file"):
        load_timings(tmp_path / "absent.json")
    with pytest.raises(InputError, match="is a folder"):
        load_timings(tmp_path)


def test_write_validates_then_replaces_atomically(tmp_path: Path) -> None:
    p = tmp_path / "timings.json"
    write_timings(p, _doc())
    assert load_timings(p) == _doc()
    before = p.read_text()
    with pytest.raises(InputError, match="rows\\[0\\].batch_size"):
        write_timings(p, _set(_doc(), "rows.0.batch_size", -1))
    assert p.read_text() == before and not (tmp_path / "timings.json.tmp").exists()


def test_timings_and_harness_entry_import_stdlib_only() -> None:
    """The GPU machine has torch and nothing else: neither module may pull in numpy or the commands."""
    code = ("import sys, analyzer.timings, analyzer.harness.__main__, analyzer.harness.sweep, "
            "launchgap.harness.curve, analyzer.harness.model\n"
            "bad = sorted(m for m in sys.modules if m.split('.')[0] in ('numpy', 'msgspec', 'torch')"
            " or m.startswith('launchgap.commands'))\n"
            "print(','.join(bad))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, check=True)
    assert out.stdout.strip() == ""
