"""``launchgap plan`` on a tensor-parallel server's per-rank traces: one plan for the job, not one per rank.

The ranks are the held-out 3B serving trace written twice with ``distributedInfo`` rank 0 and 1 of 2 (what a TP2
server's workers write, one file each): the plan is the one trace's plan, its notes say the ranks were planned
together."""
from __future__ import annotations

import gzip
import json

from launchgap.cli import main


def test_rank_traces_of_one_job_make_one_plan(reference_traces, tmp_path, capsys) -> None:
    serving = reference_traces / "h200-heldout-3b-2026-12-02" / "serving" / "3b_serving_serve.json.gz"
    doc = json.loads(gzip.decompress(serving.read_bytes()))
    files = []
    for r in (0, 1):
        doc["distributedInfo"] = {"backend": "nccl", "rank": r, "world_size": 2}
        f = tmp_path / f"serve_rank{r}.json.gz"
        f.write_bytes(gzip.compress(json.dumps(doc).encode(), compresslevel=1))
        files.append(str(f))
    assert main(["plan", files[0], "--format", "json"]) == 0
    one = json.loads(capsys.readouterr().out)
    assert main(["plan", *files, "--format", "json"]) == 0
    both = json.loads(capsys.readouterr().out)
    assert isinstance(both, dict), "one plan for the job, not a list of one per rank"
    assert both["buckets"] == one["buckets"] and both["expected_step_us"] == one["expected_step_us"]
    assert both["workload"]["rank"] is None and both["workload"]["world_size"] == 2
    assert both["workload"]["label"].endswith("· all ranks")
    assert any(n.startswith("ranks 0, 1 of 2 planned together") for n in both["inputs"])
    # a rank's own workload id (what analyze prints for that file) picks the job's plan
    from launchgap.loaders import load_trace
    from launchgap.report import analyze_trace
    rank1 = analyze_trace(load_trace(files[1])).workload.id
    assert main(["plan", *files, "--workload", rank1, "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["workload"]["id"] == both["workload"]["id"]

