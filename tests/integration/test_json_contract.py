"""docs/json.md is the JSON contract: checked here against the real output of the commands.

The commands run on the bundled traces (``analyze``, ``plan`` and ``fleet`` with ``--format json``,
through :func:`launchgap.cli.main` as the console script calls it). Every object in the output must
have exactly the keys the doc lists for it, each value one of the documented types, every documented
field must appear in some run, and each top level names its schema.

The doc is read, not copied: each table after a ``<!-- json: NAME -->`` marker gives the fields of
object ``NAME`` (a schema such as ``launchgap.report/1``, or a named object such as ``workload``),
one row per field: ``| `path` | type | meaning |``. Adding a field = adding its row.
"""
from __future__ import annotations

import json
import re
from collections import defaultdict
from pathlib import Path

import pytest

from launchgap.cli import main

REPO = Path(__file__).resolve().parents[2]
DOC = REPO / "docs" / "json.md"

_MARKER = re.compile(r"<!--\s*json:\s*(\S+)\s*-->")
_ROW = re.compile(r"^\|\s*`([^`]+)`\s*\|\s*([^|]+?)\s*\|")
ATOMS = ("str", "int", "float", "bool", "null", "object", "absent")


# --- the doc ----------------------------------------------------------------------------------

def parse_type(text: str):
    """``int or null`` -> [("int",), ("null",)]; ``list of (int or null)``, ``map of T``, names."""
    text = text.strip().strip("`").strip()
    depth, alts, cur = 0, [], ""
    i = 0
    while i < len(text):
        c = text[i]
        depth += (c == "(") - (c == ")")
        if depth == 0 and text.startswith(" or ", i):
            alts.append(cur)
            cur, i = "", i + 4
            continue
        cur += c
        i += 1
    alts.append(cur)
    out = []
    for a in (a.strip() for a in alts):
        if a.startswith("(") and a.endswith(")"):
            out.extend(parse_type(a[1:-1]))
        elif a.startswith("list of "):
            out.append(("list", parse_type(a[len("list of "):])))
        elif a.startswith("map of "):
            out.append(("map", parse_type(a[len("map of "):])))
        else:
            out.append((a,))
    return out


def read_contract(text: str) -> dict[str, dict[str, list]]:
    """{object name: {field path: parsed type}} from the doc's marked tables."""
    objects: dict[str, dict[str, list]] = {}
    current = None
    in_table = False
    for line in text.splitlines():
        m = _MARKER.search(line)
        if m:
            current, in_table = m.group(1), False
            assert current not in objects, f"docs/json.md: object {current} described twice"
            objects[current] = {}
            continue
        if current is None:
            continue
        if line.startswith("|"):
            in_table = True
            r = _ROW.match(line)
            if r:
                path, typ = r.group(1), r.group(2)
                assert path not in objects[current], f"docs/json.md: {current}: {path} listed twice"
                objects[current][path] = parse_type(typ)
        elif in_table:  # the marked table ended: rows after it belong to no object
            current, in_table = None, False
    return objects


CONTRACT = read_contract(DOC.read_text(encoding="utf-8"))


def _names_used(types) -> set[str]:
    out = set()
    for t in types:
        if t[0] in ("list", "map"):
            out |= _names_used(t[1])
        elif t[0] not in ATOMS:
            out.add(t[0])
    return out


def test_contract_doc_is_well_formed():
    assert {"launchgap.report/1", "launchgap.job/1", "launchgap.plan/1", "launchgap.fleet/1", "plan-workloads",
            "workload", "causes"} <= set(CONTRACT)
    for name, fields in CONTRACT.items():
        assert fields, f"docs/json.md: object {name} has no rows"
        for path, types in fields.items():
            unknown = _names_used(types) - set(CONTRACT)
            assert not unknown, f"docs/json.md: {name}: {path}: unknown type {unknown}"
            parent, _, _ = path.rpartition(".")
            parent = parent.removesuffix("[]")
            if parent:
                assert parent in fields, f"docs/json.md: {name}: {path} has no row for its parent {parent}"
                assert any(t[0] == "object" or (t[0] == "list" and ("object",) in t[1]) for t in fields[parent]), \
                    f"docs/json.md: {name}: {path}: parent {parent} is not an object or a list of objects"
    assert parse_type("list of (int or null)") == [("list", [("int",), ("null",)])]
    assert parse_type("`launchgap.plan/1 or null`") == [("launchgap.plan/1",), ("null",)]


# --- checking output against it ----------------------------------------------------------------

class Checker:
    def __init__(self, contract: dict[str, dict[str, list]]):
        self.contract = contract
        self.seen: dict[str, set[str]] = defaultdict(set)
        self.problems: list[str] = []

    def object(self, value: dict, name: str, prefix: str, where: str) -> bool:
        fields = self.contract[name]
        doc_keys = {p[len(prefix):] for p in fields if p.startswith(prefix) and "." not in p[len(prefix):]
                    and not p[len(prefix):].endswith("[]")}
        ok = True
        for k in sorted(set(value) - doc_keys):
            self.problems.append(f"{where}.{k}: in the output, not in docs/json.md ({name})")
            ok = False
        for k in sorted(doc_keys - set(value)):
            if ("absent",) in fields[prefix + k]:
                continue
            self.problems.append(f"{where}.{k}: in docs/json.md ({name}), missing from the output")
            ok = False
        for k in sorted(doc_keys & set(value)):
            self.seen[name].add(prefix + k)
            if not self.value(value[k], fields[prefix + k], name, prefix + k, f"{where}.{k}"):
                ok = False
        return ok

    def value(self, v, types, name: str, path: str, where: str) -> bool:
        for t in types:
            if self._matches(v, t, name, path, where, report=len(types) == 1):
                return True
        if len(types) > 1:
            self.problems.append(f"{where}: {type(v).__name__} {str(v)[:60]!r} is none of {types} ({name})")
        return False

    def _matches(self, v, t, name, path, where, report) -> bool:
        kind = t[0]
        simple = {"absent": lambda: False, "str": lambda: isinstance(v, str), "bool": lambda: isinstance(v, bool),
                  "null": lambda: v is None,
                  "int": lambda: isinstance(v, int) and not isinstance(v, bool),
                  "float": lambda: isinstance(v, (int, float)) and not isinstance(v, bool)}
        if kind in simple:
            ok = simple[kind]()
            if not ok and report:
                self.problems.append(f"{where}: {type(v).__name__} {str(v)[:60]!r}, documented {kind} ({name})")
            return ok
        if kind == "object":
            if not isinstance(v, dict):
                if report:
                    self.problems.append(f"{where}: {type(v).__name__}, documented object ({name})")
                return False
            return self.object(v, name, path + ".", where)
        if kind == "list":
            if not isinstance(v, list):
                if report:
                    self.problems.append(f"{where}: {type(v).__name__}, documented a list ({name})")
                return False
            elem = path + "[]"
            return all([self.value(x, t[1], name, elem, f"{where}[{i}]") for i, x in enumerate(v)])
        if kind == "map":
            if not isinstance(v, dict):
                if report:
                    self.problems.append(f"{where}: {type(v).__name__}, documented a map ({name})")
                return False
            return all([self.value(x, t[1], name, path + "{}", f"{where}[{k!r}]") for k, x in v.items()])
        # a named object
        if not isinstance(v, dict):
            if report:
                self.problems.append(f"{where}: {type(v).__name__}, documented {kind}")
            return False
        if "/" in kind and v.get("schema") != kind:
            self.problems.append(f"{where}.schema: {v.get('schema')!r}, documented {kind}")
            return False
        return self.object(v, kind, "", where)

    def summary(self) -> str:
        """The problems, each once (list positions folded to ``[]``), first 40."""
        seen: dict[str, int] = {}
        for p in self.problems:
            key = re.sub(r"\[\d+\]", "[]", p)
            seen[key] = seen.get(key, 0) + 1
        return "\n".join(f"{k}  (x{n})" if n > 1 else k for k, n in list(seen.items())[:40])

    def document(self, doc: dict, name: str, label: str) -> None:
        if "/" in name:
            assert doc.get("schema") == name, f"{label}: schema {doc.get('schema')!r}, expected {name}"
        self.object(doc, name, "", label)


# --- the runs -----------------------------------------------------------------------------------

def _run(argv: list[str], capsys, expect_rc: int = 0) -> dict:
    rc = main(argv)
    captured = capsys.readouterr()
    assert rc == expect_rc, f"launchgap {' '.join(argv)} -> {rc}: {captured.err[-2000:]}"
    return json.loads(captured.out)


@pytest.fixture(scope="module")
def bad_trace(tmp_path_factory) -> Path:
    p = tmp_path_factory.mktemp("bad") / "broken.pt.trace.json"
    p.write_text('{"traceEvents": [', encoding="utf-8")
    return p


def _analyze_outputs(traces: Path, bad_trace: Path, capsys) -> list[dict]:
    SERVING = traces / "h200-session-2026-12-01"
    PAIR = traces / "engines" / "tracelens-vllm-decode-fullgraph-mi300x"
    return [
        # vLLM / SGLang / TensorRT-LLM-era traces, engine steps and three capture traces
        _run(["analyze", str(traces / "engines"), "--format", "json"], capsys),
        # a tensor-parallel job (jobs[]), Nsight Systems exports (one of two ranks: a job split from one file), a
        # measured step, a bad file (errors[])
        _run(["analyze", *map(str, sorted((traces / "h200x2-tp2-1b").glob("tp1b_bs1_eager_rank*.json.gz"))),
              str(traces / "nsys" / "healthy_1pct.sqlite"), str(traces / "nsys" / "h100_2gpu_1s.sqlite"), str(traces / "h200-1b" / "1b_bs8_eager.json.gz"),
              str(bad_trace), "--observed-step-us", "16000", "--format", "json"], capsys, expect_rc=2),
        # graph-mode serving: capture sizes from the flag, padding from harness timings, fallbacks, planner comparison
        _run(["analyze", str(SERVING / "serving" / "1b_serving_serve.json.gz"), "--capture-sizes",
              "1,2,4,8,16,24,32,40,48,56,64", "--graph-timings", str(SERVING / "timings_fullrange.json"),
              "--format", "json"], capsys),
        # an execution trace with the capture trace of the same engine run (capture_pairing)
        _run(["analyze", str(PAIR / "graph_execution.json.gz"), "--capture",
              str(next(PAIR.glob("capture_traces__*.json.gz"))), "--format", "json"], capsys),
        # server logs and /metrics scrapes of every engine (logs[])
        _run(["analyze", *map(str, sorted((traces / "serverlogs").glob("*.gz"))), "--format", "json"], capsys),
        # host stalls inside and outside the model's forward (host_stall_frames)
        _run(["analyze", str(_stall_trace(bad_trace.parent)), "--format", "json"], capsys),
    ]


def _stall_trace(folder: Path) -> Path:
    from tests.unit.test_host_stalls import _trace
    return _trace(folder, 2400.0)


def _plan_outputs(traces: Path, tmp_path: Path, capsys) -> list[tuple[dict, str]]:
    dist = tmp_path / "dist.csv"
    dist.write_text("batch_size,count\n1,10\n8,20\n64,10\n200,5\n400,2\n", encoding="utf-8")
    h1b = sorted(map(str, (traces / "h200-1b").glob("*.json.gz")))
    two = h1b + sorted(map(str, (traces / "h200").glob("tiny_*.json.gz")))
    return [
        (_run(["plan", *h1b, "--distribution", str(dist), "--max-graphs", "4", "--format", "json"], capsys),
         "launchgap.plan/1"),
        # a graph-mode serving trace alone: costs from its kernels, distribution from its steps
        (_run(["plan", str(traces / "h200-heldout-3b-2026-12-02" / "serving" / "3b_serving_serve.json.gz"), "--format",
               "json"], capsys), "launchgap.plan/1"),
        # extrapolation above the timings' sizes
        (_run(["plan", "--timings", str(traces / "h200-1b" / "truth.json"), "--model", "70b-slice",
               "--distribution", str(dist), "--format", "json"], capsys), "launchgap.plan/1"),
        # memory model from the timings' model dimensions, memory and capture budgets
        (_run(["plan", "--timings", str(traces / "h200" / "timings.json"), "--model", "1b", "--distribution",
               str(dist), "--memory-mib", "3000", "--capture-seconds", "5", "--format", "json"], capsys),
         "launchgap.plan/1"),
        # the server's current capture list scored beside the plan (baselines.current)
        (_run(["plan", *h1b, "--distribution", str(dist), "--capture-sizes", "1,2,4,8,16", "--format", "json"],
              capsys), "launchgap.plan/1"),
        # two workloads: one plan each
        (_run(["plan", *two, "--distribution", str(dist), "--format", "json"], capsys), "plan-workloads"),
        # a server log alone: its costs, distribution, capture list and capture cost (sources.capture_cost)
        (_run(["plan", "--server-log", str(traces / "serverlogs" / "vllm-0.22-ceiling.log.gz"), "--max-graphs", "6",
               "--format", "json"], capsys), "launchgap.plan/1"),
    ]


def test_analyze_json_matches_the_doc(reference_traces, bad_trace, capsys):
    c = Checker(CONTRACT)
    outputs = _analyze_outputs(reference_traces, bad_trace, capsys)
    for i, doc in enumerate(outputs):
        c.document(doc, "launchgap.report/1", f"analyze run {i}")
    assert not c.problems, c.summary()
    for name in ("launchgap.report/1", "launchgap.job/1", "causes", "workload"):
        never = set(CONTRACT[name]) - c.seen[name]
        assert not never, f"documented in {name} but in no analyze run (add a run that shows them): {sorted(never)}"
    # the runs above show the graph-mode serving fields with values, not only as null
    traces = [t for doc in outputs for t in doc["traces"]]
    steps = [s for t in traces for s in t["steps"]]
    assert any(t["summary"]["capture_sizes_source"] == "flag" for t in traces)
    assert any(t["capture_pairing"] is not None and t["capture_pairing"]["kernels"] for t in traces)
    for key in ("bucket", "padded_rows", "padding_us", "padding_us_low", "padding_us_high", "fallback_cause",
                "fallback_lost_us", "inter_step_host_us"):
        assert any(s[key] is not None for s in steps), key
    assert any(s["host_phases_us"] for s in steps) and any(t["summary"]["host_phases_us_per_step"] for t in traces)
    logs = [lg for doc in outputs for lg in doc["logs"]]
    assert {lg["engine"] for lg in logs} == {"vllm", "sglang", "tensorrt_llm"} and {lg["kind"] for lg in logs} == \
        {"log", "metrics"}
    assert any(lg["ceiling"]["absorbing"] is True for lg in logs) and any(lg["ceiling"]["absorbing"] is False
                                                                         for lg in logs)
    assert any(lg["capture"]["memory_mib"] is not None and lg["decode"]["eager_above_max"] for lg in logs)


def test_plan_json_matches_the_doc(reference_traces, tmp_path, capsys):
    outputs = _plan_outputs(reference_traces, tmp_path, capsys)
    c = Checker(CONTRACT)
    for i, (doc, name) in enumerate(outputs):
        c.document(doc, name, f"plan run {i}")
    assert not c.problems, c.summary()
    for name in ("launchgap.plan/1", "plan-workloads", "baseline", "trace-note"):
        never = set(CONTRACT[name]) - c.seen[name]
        assert not never, f"documented in {name} but in no plan run: {sorted(never)}"
    # the runs above show the optional parts with values, not only as null
    plans = [d for d, n in outputs if n == "launchgap.plan/1"]
    assert any(p["extrapolation"] is not None for p in plans)
    assert any(p["memory"]["predicted_capture_s"] is not None for p in plans)


def test_fleet_json_matches_the_doc(reference_traces, bad_trace, tmp_path, capsys):
    pytest.importorskip("dask.distributed")
    h1b = sorted(map(str, (reference_traces / "h200-1b").glob("*.json.gz")))
    tiny = sorted(map(str, (reference_traces / "h200").glob("tiny_*.json.gz")))
    wl = _run(["analyze", h1b[0], "--format", "json"], capsys)["traces"][0]["workload"]["id"]
    # with the analysis options that show up in analysis_options (capture sizes, graph timings)
    hist = tmp_path / "hist.csv"  # launchgap record sweeps give costs only: the traffic from a histogram
    hist.write_text("1,2\n8,1\n")
    doc = _run(["fleet", *h1b, *tiny, str(bad_trace), "--workers", "1", "--out", str(tmp_path / "fleet.jsonl"),
                "--workload", wl, "--capture-sizes", "1,8,64,256", "--graph-timings",
                str(reference_traces / "h200-session-2026-12-01" / "timings_fullrange.json"), "--distribution",
                str(hist), "--format", "json"], capsys, expect_rc=2)
    c = Checker(CONTRACT)
    c.document(doc, "launchgap.fleet/1", "fleet run")
    assert not c.problems, c.summary()
    for name in ("launchgap.fleet/1", "percentiles", "fleet-row"):
        never = set(CONTRACT[name]) - c.seen[name]
        assert not never, f"documented in {name} but in no fleet run: {sorted(never)}"
    assert doc["plan"] is not None and doc["errors"] and len(doc["workloads"]) == 2
    assert doc["analysis_options"]["capture_sizes"] and doc["analysis_options"]["graph_timings_us"]


def test_checker_catches_drift():
    """The checker fails on an undocumented field, a missing one and a wrong type (so the tests above can fail)."""
    contract = read_contract("<!-- json: x/1 -->\n| field | type | meaning |\n|---|---|---|\n"
                             "| `schema` | str | |\n| `a` | list of object | |\n| `a[].b` | int or null | |\n"
                             "| `m` | map of float | |\n| `w` | y or null | |\n| `o` | str or absent | |\n\n"
                             "<!-- json: y -->\n| field | type | meaning |\n|---|---|---|\n| `z` | bool | |\n")
    good = {"schema": "x/1", "a": [{"b": 1}, {"b": None}], "m": {"8": 1.5, "16": 2}, "w": {"z": True}}
    c = Checker(contract)
    c.document(good, "x/1", "good")
    assert c.problems == [] and c.seen["x/1"] == {"schema", "a", "a[].b", "m", "w"} and c.seen["y"] == {"z"}
    c.document({**good, "o": "here"}, "x/1", "good")
    assert c.problems == [] and "o" in c.seen["x/1"]
    for bad, what in (({**good, "extra": 1}, "extra: in the output, not in docs"),
                      ({k: v for k, v in good.items() if k != "m"}, "m: in docs/json.md (x/1), missing"),
                      ({**good, "a": [{"b": 1.5}]}, "a[0].b: float"),
                      ({**good, "w": {"z": 1}}, "w: dict"),
                      ({**good, "m": {"8": "x"}}, "m['8']: str"),
                      ({**good, "o": 3}, "o: int")):
        c = Checker(contract)
        c.document(bad, "x/1", "bad")
        assert any(what in p for p in c.problems), (what, c.problems)
