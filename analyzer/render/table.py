"""The one table helper of every text and Markdown output, and its one escaping rule."""
from __future__ import annotations

from collections.abc import Sequence


def md_escape(cell: str) -> str:
    """A cell safe inside a Markdown table row: ``|`` escaped, newlines folded to spaces."""
    return " ".join(cell.split("\n")).replace("|", "\\|")


def table(headers: Sequence[str], rows: Sequence[Sequence[object]], markdown: bool, indent: str = "",
          align: str | None = None) -> list[str]:
    """Rows as a Markdown table, or as aligned text columns after ``indent``.

    ``align`` gives each text column's alignment, ``l`` or ``r`` (default: the first left, the
    rest right). A left-aligned last column (free text) is not padded and its rule is as wide as
    its header; lines carry no trailing blanks then. Markdown ignores ``align``.
    """
    cells = [[str(c) for c in r] for r in rows]
    if markdown:
        out = ["| " + " | ".join(md_escape(h) for h in headers) + " |", "|" + "|".join("---" for _ in headers) + "|"]
        return out + ["| " + " | ".join(md_escape(c) for c in r) + " |" for r in cells]
    align = align or "l" + "r" * (len(headers) - 1)
    if len(align) != len(headers) or set(align) - {"l", "r"}:
        raise ValueError(f"align needs one 'l' or 'r' per column, got {align!r} for {len(headers)} columns")
    widths = [max([len(h)] + [len(r[i]) for r in cells]) for i, h in enumerate(headers)]
    free = align[-1] == "l" and len(headers) > 1
    if free:
        widths[-1] = len(headers[-1])
    fmt = "  ".join("{:>%d}" % w if a == "r" else "{}" if free and i == len(headers) - 1 else "{:<%d}" % w
                    for i, (w, a) in enumerate(zip(widths, align)))
    out = [indent + fmt.format(*headers), indent + fmt.format(*["-" * w for w in widths])] + \
        [indent + fmt.format(*r) for r in cells]
    return [ln.rstrip() for ln in out] if free else out
