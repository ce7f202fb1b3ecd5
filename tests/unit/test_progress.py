"""The commands' one progress printer (launchgap.commands._shared.Progress): exact stderr text."""
from __future__ import annotations

import io

from launchgap.commands._shared import Progress


class _Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_counting_off_a_terminal_writes_a_line_each_tenth_and_failures() -> None:
    s = io.StringIO()
    p = Progress(20, 20_000_000, label="fleet", stream=s)
    p.show("parsing x...")  # transient: not written off a terminal
    for i in range(20):
        p.advance(1_000_000, "a.json: broken" if i == 4 else None)
    p.done()
    lines = s.getvalue().splitlines()
    assert lines[2] == "fleet: FAILED a.json: broken"
    counts = [ln.split()[1] for ln in lines if ln.startswith("fleet: [")]
    assert counts == [f"[{n}/20]" for n in range(2, 21, 2)]  # a line per tenth, the last at 20/20
    assert lines[-1].startswith("fleet: [20/20] 100%  ") and " 1 failed  ETA 0s" in lines[-1]
    assert "traces/s" in lines[-1] and "MB/s" in lines[-1]


def test_on_a_terminal_the_line_is_redrawn_and_the_final_count_stays() -> None:
    s = _Tty()
    p = Progress(2, 0, label="fleet", stream=s)
    p.advance()
    p.advance(0, "b.json: bad")
    p.done()
    out = s.getvalue()
    assert out.startswith("\r\x1b[Kfleet: [1/2] 50%  ")
    assert "\r\x1b[Kfleet: FAILED b.json: bad\n" in out
    assert out.count("\n") == 2 and out.endswith(" 1 failed  ETA 0s\n")
    assert out.rsplit("\r\x1b[K", 1)[1].startswith("fleet: [2/2] 100%  ")


def test_status_only_use_clears_its_line() -> None:
    s = _Tty()
    p = Progress()
    p.stream, p.live = s, True
    p.show("[1/3] parsing a.json (1.0 MB)...")
    p.done()
    assert s.getvalue() == "\r\x1b[K[1/3] parsing a.json (1.0 MB)...\r\x1b[K"
    quiet = io.StringIO()
    q = Progress(stream=quiet)
    q.show("x")
    q.done()
    assert quiet.getvalue() == ""
