"""The import layers stay as the docs draw them (checked on the source, no imports run).

Layers, lowest first; a module may import its own layer and the ones below, never above:

0. ``analyzer.errors``, ``analyzer.trace``, ``analyzer.timings``, ``analyzer.distribution`` (data formats, stdlib only)
1. ``analyzer.loaders`` (file -> Trace) and ``analyzer.engines`` (what each serving engine writes)
2. the per-stage analyses: ``steps``, ``gaps``, ``launches``, ``predict``, ``collectives``, ``graph_mode``
   and the other flat analysis modules
3. ``analyzer.report`` / ``ranks`` / ``fleet`` / ``planning`` / ``hta_bridge`` / ``workload``
4. rendering (``analyzer.render``)
5. ``analyzer.commands`` and ``analyzer.cli``
6. ``app`` (the dashboard calls the analyzer; the analyzer never imports the dashboard)

Two further rules: commands do not import each other (shared flags live in one helper module), and
the GPU harness (``analyzer.harness``) imports nothing of the analyzer but ``errors``, ``timings``, ``distribution``
and itself, since it runs on GPU machines with only the standard library and torch.
"""
from __future__ import annotations

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

LOW = {"launchgap.errors": 0, "launchgap.trace": 0, "launchgap.timings": 0, "launchgap.distribution": 0, "analyzer": 0,
       "launchgap.loaders": 1, "launchgap.engines": 1}
HIGH = {"launchgap.report": 3, "launchgap.ranks": 3, "launchgap.fleet": 3, "launchgap.planning": 3,
        "launchgap.hta_bridge": 3, "launchgap.workload": 3, "launchgap.overhead_fit": 3, "launchgap.render": 4,
        "launchgap.commands": 5, "launchgap.cli": 5, "launchgap.__main__": 5, "app": 6}
HARNESS_MAY_IMPORT = ("launchgap.errors", "launchgap.timings", "launchgap.distribution", "launchgap.harness")


def layer(module: str) -> int | None:
    """Layer of a dotted module name (longest matching prefix); None for the harness."""
    if module == "launchgap.harness" or module.startswith("launchgap.harness."):
        return None
    for table in (HIGH, LOW):
        for prefix in sorted(table, key=len, reverse=True):
            if prefix != "analyzer" and (module == prefix or module.startswith(prefix + ".")):
                return table[prefix]
    if module in ("analyzer", "launchgap.__init__"):
        return 0
    return 2  # a flat analysis module under analyzer/


def module_name(path: Path) -> str:
    parts = path.relative_to(REPO).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def project_imports(path: Path) -> set[str]:
    """Dotted names of the analyzer/app modules a file imports (absolute imports only)."""
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [node.module]
        elif isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        else:
            continue
        out.update(n for n in names if n.split(".")[0] in ("analyzer", "app"))
    return out


def sources() -> list[Path]:
    return sorted(p for top in ("analyzer", "app") for p in (REPO / top).rglob("*.py"))


def test_layer_table_knows_every_package() -> None:
    assert sources(), "no sources found"
    for p in sources():
        assert layer(module_name(p)) is not None or "harness" in p.parts


def test_imports_only_go_down() -> None:
    bad = []
    for p in sources():
        me = module_name(p)
        mine = layer(me)
        if mine is None:
            continue
        for imp in project_imports(p):
            theirs = layer(imp)
            if theirs is None and me != "launchgap.commands.record":
                bad.append(f"{me} -> {imp} (the harness is used only by its command)")
            elif theirs is not None and theirs > mine:
                bad.append(f"{me} (layer {mine}) -> {imp} (layer {theirs})")
    assert not bad, "upward imports:\n" + "\n".join(bad)


def test_commands_do_not_import_each_other() -> None:
    bad = []
    for p in (REPO / "analyzer" / "commands").glob("*.py"):
        me = module_name(p)
        for imp in project_imports(p):
            if imp.startswith("launchgap.commands.") and not imp.split(".")[-1].startswith("_"):
                bad.append(f"{me} -> {imp}")
    assert not bad, "commands importing commands:\n" + "\n".join(bad)


def test_harness_needs_only_stdlib_torch_and_its_own() -> None:
    bad = []
    for p in (REPO / "analyzer" / "harness").rglob("*.py"):
        for imp in project_imports(p):
            if not imp.startswith(HARNESS_MAY_IMPORT):
                bad.append(f"{module_name(p)} -> {imp}")
    assert not bad, "harness imports beyond errors/timings/harness:\n" + "\n".join(bad)


def test_checker_catches_an_upward_import(tmp_path: Path) -> None:
    """The checker itself: a loader importing the report is flagged (a test that can fail)."""
    f = tmp_path / "x.py"
    f.write_text("from analyzer.report import analyze_trace\nimport app.ui\n", encoding="utf-8")
    assert project_imports(f) == {"launchgap.report", "launchgap.dashboard.ui"}
    assert layer("launchgap.loaders.kineto") < layer("launchgap.report") < layer("launchgap.dashboard.ui")
    assert layer("launchgap.harness.sweep") is None
