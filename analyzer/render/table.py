"""The one table helper of every text and Markdown output, and its one escaping rule."""
from __future__ import annotations

from collections.abc import Sequence


def md_escape(cell: str) -> str:
    """A cell safe inside a Markdown table row: ``|`` escaped, newlines folded to spaces."""
    return " ".join(cell.split("\n")).replace("|", "\\|")


def table(headers: Sequence[str], rows: Sequence[Sequence[object]], markdown: bool, indent: str = "") -> list[str]:
    """Rows as a Markdown table, or as aligned text columns (first left, the rest right) after ``indent``."""
    cells = [[str(c) for c in r] for r in rows]
    if markdown:
        out = ["| " + " | ".join(md_escape(h) for h in headers) + " |", "|" + "|".join("---" for _ in headers) + "|"]
        return out + ["| " + " | ".join(md_escape(c) for c in r) + " |" for r in cells]
    widths = [max([len(h)] + [len(r[i]) for r in cells]) for i, h in enumerate(headers)]
    fmt = "  ".join("{:>%d}" % w if i else "{:<%d}" % w for i, w in enumerate(widths))
    return [indent + fmt.format(*headers), indent + fmt.format(*["-" * w for w in widths])] + \
        [indent + fmt.format(*r) for r in cells]
