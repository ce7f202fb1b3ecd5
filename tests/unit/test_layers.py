"""The import layers and installed names stay as the docs draw them (checked on the source, no imports run).

The folders ``analyzer/`` and ``app/`` install as ``launchgap`` and ``launchgap.dashboard``
(pyproject's ``package-dir``), so nothing generic such as ``app`` lands in site-packages.
Inside ``analyzer/`` imports are relative (the package works under either name: installed as
``launchgap``, or as ``analyzer`` from a bare checkout, where ``python3 -m analyzer.harness`` runs on
a GPU box with only the standard library and torch); the dashboard's scripts and the tests import
the installed names.

Layers, lowest first; a module may import its own layer and the ones below, never above:

0. ``launchgap.errors``, ``.files``, ``.trace``, ``.heap``, ``.timings``, ``.distribution``, ``.dims`` (data formats, stdlib only)
1. ``launchgap.loaders`` (file -> Trace) and ``launchgap.engines`` (what each serving engine writes)
2. the per-stage analyses: ``steps``, ``gaps``, ``launches``, ``predict``, ``collectives``, ``graph_mode``
   and the other flat analysis modules
3. the analysis layer, ordered inside (a module imports only modules listed before it, or its own
   sub-layer): ``workload``; ``planning`` (cost model, memory model, readers, optimiser);
   ``report`` and ``overhead_fit``; ``ranks`` and ``hta_bridge``; ``planning.request`` (the one
   plan builder, which analysed traces feed); ``fleet``
4. rendering (``launchgap.render``)
5. ``launchgap.commands`` and ``launchgap.cli``
6. ``launchgap.dashboard`` (the dashboard calls the analyzer; the analyzer never imports the dashboard)

No import circles anywhere (:func:`find_circle` over the import graph of every module; a
module-level or a function-level import counts alike). Two further rules: commands do not import each other (shared flags live in one helper module), and
the GPU harness (``launchgap.harness``) imports nothing of the analyzer but ``errors``, ``files``,
``timings``, ``distribution``, ``dims`` and itself.
"""
from __future__ import annotations

import ast
import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
#: Source folder -> installed package name (pyproject's package-dir).
INSTALLED = {"analyzer": "launchgap", "app": "launchgap.dashboard"}

LOW = {"launchgap.errors": 0, "launchgap.files": 0, "launchgap.trace": 0, "launchgap.heap": 0, "launchgap.timings": 0,
       "launchgap.distribution": 0, "launchgap.dims": 0,
       "launchgap.loaders": 1, "launchgap.engines": 1}
HIGH = {"launchgap.workload": 3.0, "launchgap.planning": 3.1, "launchgap.report": 3.2, "launchgap.overhead_fit": 3.2,
        "launchgap.ranks": 3.3, "launchgap.hta_bridge": 3.3, "launchgap.planning.request": 3.4, "launchgap.fleet": 3.5,
        "launchgap.render": 4,
        "launchgap.commands": 5, "launchgap.cli": 5, "launchgap.__main__": 5, "launchgap.dashboard": 6}
HARNESS_MAY_IMPORT = ("launchgap.errors", "launchgap.files", "launchgap.timings", "launchgap.distribution",
                      "launchgap.dims", "launchgap.harness")


def layer(module: str) -> float | None:
    """Layer of an installed dotted module name (longest matching prefix); None for the harness."""
    if module == "launchgap.harness" or module.startswith("launchgap.harness."):
        return None
    for table in (HIGH, LOW):
        for prefix in sorted(table, key=len, reverse=True):
            if module == prefix or module.startswith(prefix + "."):
                return table[prefix]
    if module in ("launchgap", "launchgap.__init__"):
        return 0
    return 2  # a flat analysis module under analyzer/


def module_name(path: Path) -> str:
    """Installed dotted name of a source file (``analyzer/report.py`` -> ``launchgap.report``)."""
    parts = list(path.relative_to(REPO).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(INSTALLED[parts[0]].split(".") + parts[1:])


def _package(path: Path) -> list[str]:
    name = module_name(path).split(".")
    return name if path.name == "__init__.py" else name[:-1]


def project_imports(path: Path, installed_name: str | None = None) -> set[str]:
    """Installed dotted names of the project's modules a file imports, relative imports resolved.

    ``from . import x`` counts as importing ``pkg.x`` (a submodule or a name of ``pkg``; the layer
    is the same either way for the flat packages checked here)."""
    pkg = _package(path) if installed_name is None else installed_name.split(".")[:-1]
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = pkg[:len(pkg) - node.level + 1]
                mod = ".".join(base + ([node.module] if node.module else []))
                names = [mod] if node.module else [f"{mod}.{a.name}" for a in node.names]
            elif node.module:
                names = [node.module]
            else:
                continue
        elif isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        else:
            continue
        out.update(n for n in names if n.split(".")[0] in ("launchgap", "analyzer", "app"))
    return out


def sources() -> list[Path]:
    return sorted(p for top in INSTALLED for p in (REPO / top).rglob("*.py"))


def test_pyproject_installs_the_folders_under_launchgap() -> None:
    conf = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["setuptools"]
    assert conf["package-dir"] == {"launchgap": "analyzer", "launchgap.dashboard": "app"}
    packages = set(conf["packages"])
    expected = {module_name(p) for p in sources() if p.name == "__init__.py"}
    assert packages == expected, f"pyproject packages differ: missing {expected - packages}, extra {packages - expected}"
    assert not any(p == "app" or p.startswith("app.") or p.startswith("analyzer") for p in packages)


def test_no_generic_top_level_names_are_imported() -> None:
    """Nothing imports ``analyzer.*`` or ``app.*`` by absolute name: those names are not installed."""
    bad = [f"{p.relative_to(REPO)} -> {imp}"
           for top in ("analyzer", "app", "tests", "bench") for p in (REPO / top).rglob("*.py")
           for imp in project_imports(p, "launchgap.tests.x" if top in ("tests", "bench") else None)
           if imp.split(".")[0] in ("analyzer", "app")]
    assert not bad, "imports of uninstalled names:\n" + "\n".join(bad)


def test_analyzer_imports_itself_relatively() -> None:
    """Inside analyzer/, the package imports itself relatively (it must run under both names)."""
    bad = [f"{p.relative_to(REPO)} -> {imp}" for p in (REPO / "analyzer").rglob("*.py")
           for node in ast.walk(ast.parse(p.read_text(encoding="utf-8")))
           if isinstance(node, (ast.Import, ast.ImportFrom)) and not getattr(node, "level", 0)
           for imp in ([node.module] if isinstance(node, ast.ImportFrom) else [a.name for a in node.names])
           if imp and imp.split(".")[0] == "launchgap"]
    assert not bad, "absolute self-imports in analyzer/:\n" + "\n".join(bad)


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
            if imp.startswith("launchgap.commands.") and not imp.split(".")[2].startswith("_"):
                bad.append(f"{me} -> {imp}")
    assert not bad, "commands importing commands:\n" + "\n".join(bad)


def test_harness_needs_only_stdlib_torch_and_its_own() -> None:
    bad = []
    for p in (REPO / "analyzer" / "harness").rglob("*.py"):
        for imp in project_imports(p):
            if not imp.startswith(HARNESS_MAY_IMPORT):
                bad.append(f"{module_name(p)} -> {imp}")
    assert not bad, "harness imports beyond errors/timings/distribution/harness:\n" + "\n".join(bad)


def test_checker_catches_an_upward_import(tmp_path: Path) -> None:
    """The checker itself: a loader importing the report is flagged (a test that can fail)."""
    f = tmp_path / "x.py"
    f.write_text("from ..report import analyze_trace\nimport launchgap.dashboard.ui\nfrom . import kineto\n",
                 encoding="utf-8")
    imps = project_imports(f, "launchgap.loaders.x")
    assert imps == {"launchgap.report", "launchgap.dashboard.ui", "launchgap.loaders.kineto"}
    assert layer("launchgap.loaders.kineto") < layer("launchgap.report") < layer("launchgap.dashboard.ui")
    assert layer("launchgap.harness.sweep") is None
    assert module_name(REPO / "app" / "views" / "diagnosis.py") == "launchgap.dashboard.views.diagnosis"


# --- import circles ---------------------------------------------------------------------------------

def import_graph(files: dict[str, Path] | None = None) -> dict[str, set[str]]:
    """Module -> the project modules it imports, for ``files`` (installed name -> source file; default
    the repository's). Imports resolve to source modules (``from .pkg import name`` is ``pkg``); an
    extension module (a ``.c``/``.so`` beside the sources) imports nothing of ours."""
    files = files if files is not None else {module_name(p): p for p in sources()}
    graph: dict[str, set[str]] = {}
    for me, path in files.items():
        deps = set()
        for imp in project_imports(path, me + (".__init__" if path.name == "__init__.py" else "")):
            while imp and imp not in files:
                pkg, _, leaf = imp.rpartition(".")
                if pkg in files and any(files[pkg].parent.glob(leaf + ".*")):
                    imp = ""  # an extension module in the package's folder
                else:
                    imp = pkg
            if imp and imp != me:
                deps.add(imp)
        graph[me] = deps
    return graph


def find_circle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import circle (``[a, b, ..., a]``), or None: a depth-first search that meets a module on its
    own path. Iterative, so a deep import chain cannot hit the recursion limit."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    for root in sorted(graph):
        if state.get(root):
            continue
        path, stack = [root], [iter(sorted(graph[root]))]
        state[root] = 1
        while stack:
            nxt = next(stack[-1], None)
            if nxt is None:
                state[path.pop()] = 2
                stack.pop()
            elif state.get(nxt) == 1:
                return path[path.index(nxt):] + [nxt]
            elif not state.get(nxt) and nxt in graph:
                state[nxt] = 1
                path.append(nxt)
                stack.append(iter(sorted(graph[nxt])))
    return None


def test_no_import_circles() -> None:
    circle = find_circle(import_graph())
    assert circle is None, "import circle: " + " -> ".join(circle or [])


def test_a_planted_circle_fails_both_checks(tmp_path: Path) -> None:
    """The checks have teeth: a circle planted in a copy of the sources is found, and the ordered
    analysis layer refuses its upward edge."""
    assert find_circle({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == ["a", "b", "c", "a"]
    assert find_circle({"a": {"b"}, "b": {"c"}, "c": set()}) is None
    copy = tmp_path / "analyzer"
    for p in (REPO / "analyzer").rglob("*"):
        if p.is_file() and "__pycache__" not in p.parts and p.suffix in (".py", ".c"):
            dst = copy / p.relative_to(REPO / "analyzer")
            dst.parent.mkdir(parents=True, exist_ok=True)
            dst.write_bytes(p.read_bytes())
    assert find_circle(import_graph(_copy_files(copy))) is None  # the copy as it is: no circle
    costs = copy / "planning" / "costs.py"
    costs.write_text(costs.read_text(encoding="utf-8") + "\n\ndef _planted():\n    from ..report import TraceReport\n",
                     encoding="utf-8")
    graph = import_graph(_copy_files(copy))
    circle = find_circle(graph)
    assert circle is not None and "launchgap.report" in circle and "launchgap.planning.costs" in circle
    assert layer("launchgap.planning.costs") < layer("launchgap.report")  # the upward edge the layer test refuses


def _copy_files(copy: Path) -> dict[str, Path]:
    """Installed name -> file of a copy of ``analyzer/``."""
    return {".".join(["launchgap", *p.relative_to(copy).with_suffix("").parts]).removesuffix(".__init__"): p
            for p in sorted(copy.rglob("*.py"))}
