"""The README is the front door and docs/ the manual: their links resolve, they say nothing of
machines or folders a user does not have, and the README's layout and command table match the tree."""
from __future__ import annotations

import re
import subprocess
from pathlib import Path

from launchgap.cli import COMMANDS

REPO = Path(__file__).resolve().parents[2]
README = REPO / "README.md"
DOCS = sorted((REPO / "docs").glob("*.md"))

_LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")
_FENCE = re.compile(r"^\s*(```|~~~)")


def _prose(text: str) -> str:
    """The text outside fenced code blocks."""
    out, fenced = [], False
    for line in text.splitlines():
        if _FENCE.match(line):
            fenced = not fenced
            continue
        if not fenced:
            out.append(line)
    return "\n".join(out)


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    s = heading.strip().lower()
    s = re.sub(r"[^\w\- ]", "", s)
    return s.replace(" ", "-")


def anchors(md: Path) -> set[str]:
    seen: dict[str, int] = {}
    out = set()
    for line in _prose(md.read_text(encoding="utf-8")).splitlines():
        m = re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line)
        if m:
            base = slug(m.group(1))
            n = seen.get(base, 0)
            seen[base] = n + 1
            out.add(base if n == 0 else f"{base}-{n}")
    return out


def links(md: Path) -> list[str]:
    return [t for t in _LINK.findall(_prose(md.read_text(encoding="utf-8")))
            if not re.match(r"^[a-z][a-z0-9+.-]*:", t)]  # http:, https:, mailto: are not checked here


def broken_links(md: Path) -> list[str]:
    name = md.relative_to(REPO) if md.is_relative_to(REPO) else md.name
    bad = []
    for target in links(md):
        path, _, frag = target.partition("#")
        dest = (md.parent / path).resolve() if path else md
        if not dest.exists():
            bad.append(f"{name}: {target} (no such file)")
        elif frag and dest.suffix == ".md" and frag not in anchors(dest):
            bad.append(f"{name}: {target} (no heading #{frag} in {dest.name})")
    return bad


def test_slug_matches_github():
    assert slug("`launchgap.report/1` (`launchgap analyze --format json`)") == \
        "launchgapreport1-launchgap-analyze---format-json"
    assert slug("The analyzer on the harness's own traces") == "the-analyzer-on-the-harnesss-own-traces"
    assert slug("Graph memory and capture time: the model") == "graph-memory-and-capture-time-the-model"


def test_every_relative_link_resolves(tmp_path):
    assert DOCS, "docs/ has no pages"
    bad = [b for md in [README, *DOCS] for b in broken_links(md)]
    assert not bad, "\n".join(bad)
    # the check can fail: a page with a dead file link and a dead anchor
    page = tmp_path / "p.md"
    page.write_text("# Title\n[a](missing.md) [b](p.md#nowhere) [c](p.md#title) [d](https://example.com)\n")
    found = broken_links(page)
    assert len(found) == 2 and "missing.md" in found[0] and "#nowhere" in found[1]


def test_readme_links_every_docs_page():
    linked = {(README.parent / t.partition("#")[0]).resolve() for t in links(README)}
    missing = [p.name for p in DOCS if p.resolve() not in linked]
    assert not missing, f"README does not link: {missing}"


def test_no_shared_folder_or_lent_machine():
    """A user has the repository, not the development machine's ../shared or its lent GPU."""
    for md in [README, *DOCS]:
        text = md.read_text(encoding="utf-8")
        for bad in ("../shared", "/work/shared", "lent H200", "the lent"):
            assert bad not in text, f"{md.relative_to(REPO)} mentions {bad!r}"


def test_readme_layout_matches_the_tree():
    text = README.read_text(encoding="utf-8")
    block = re.search(r"## Layout\n+```\n(.*?)```", text, re.S)
    assert block, "README has no Layout block"
    listed, parent = set(), None
    for line in block.group(1).splitlines():
        if not line.strip():
            continue
        path = line.split()[0]
        if line.startswith("  "):
            path = f"{parent}{path}"
        else:
            parent = path
        assert (REPO / path).exists(), f"README Layout names {path}, which is not in the tree"
        listed.add(path.rstrip("/"))
    tracked = subprocess.run(["git", "ls-files"], cwd=REPO, capture_output=True, text=True, check=True).stdout
    top_dirs = {p.split("/")[0] for p in tracked.splitlines() if "/" in p and not p.startswith(".")}
    assert top_dirs <= listed, f"top-level folders missing from README Layout: {sorted(top_dirs - listed)}"


def test_readme_command_table_lists_every_command():
    text = README.read_text(encoding="utf-8")
    table = text[text.index("## Commands"):text.index("## What it measures")]
    missing = [c for c in COMMANDS if f"`launchgap {c}" not in table]
    assert not missing, f"README's command table lacks: {missing}"


def test_docs_state_the_trace_size_cap_the_code_has():
    """Where a page gives `--max-trace-bytes`' default, it is the loaders' default (docs/inputs.md and fleet.md
    said 2 GiB after it became 8)."""
    from launchgap.loaders import DEFAULT_MAX_TRACE_BYTES

    said = re.compile(r"`--max-trace-bytes`(?:, default | \()(\d+) GiB")
    found = [(md.name, int(m.group(1))) for md in [README, *DOCS] for m in said.finditer(md.read_text("utf-8"))]
    assert len(found) >= 4 and {n for _, n in found} == {DEFAULT_MAX_TRACE_BYTES // 2**30}, found
