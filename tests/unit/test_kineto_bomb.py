"""Decompression bombs and whitespace: memory follows the events kept, not the bytes inflated.

The bomb of issue 17 is whitespace inside ``{"traceEvents": [...]}`` gzipped (4 GiB inflated in
the issue; 512 MiB here, the mechanism does not depend on the size: whitespace between JSON
values is dropped as it streams by, so the memory held does not grow with it). It is refused at
the decompression cap (``--max-trace-bytes``) with one line naming the file, or, with the cap
raised past it, read to the end and refused as a trace with no events; either way in bounded
time and memory. Whitespace inside strings is content and is kept (checked against the
reference loader, with pieces small enough to fall inside such runs).
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from launchgap.loaders.kineto import load_kineto
from tests.synth import gzip_bomb
from tests.unit.test_kineto_loader_equivalence import _events, _reference_trace, assert_same_trace

REPO = Path(__file__).resolve().parents[2]
MiB = 1 << 20




# Runs the CLI and writes the process's peak resident set (VmHWM, kB) to the file named by LG_HWM.
# Not ru_maxrss: a child forked from a large pytest process keeps that size as its maximum across exec.
_PROBE = ("import os, sys\nfrom launchgap.cli import main\nrc = main(sys.argv[1:])\n"
          "hwm = next(line for line in open('/proc/self/status') if line.startswith('VmHWM:')).split()[1]\n"
          "open(os.environ['LG_HWM'], 'w').write(hwm)\nsys.exit(rc)\n")


def _cli(args: list[str], tmp: Path, timeout: float = 120.0) -> tuple[int, str, float, int]:
    """(exit code, stderr, wall s, peak RSS bytes) of the CLI in a fresh process."""
    hwm = tmp / "hwm.txt"
    env = {**os.environ, "PYTHONPATH": str(REPO), "LG_HWM": str(hwm)}
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, "-c", _PROBE, *args], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                          cwd=REPO, env=env, timeout=timeout)
    wall = time.perf_counter() - t0
    return proc.returncode, proc.stderr.decode(errors="replace"), wall, int(hwm.read_text()) * 1024


@pytest.fixture(scope="module")
def bomb_512m(tmp_path_factory) -> Path:
    p = gzip_bomb(tmp_path_factory.mktemp("bomb") / "bomb.json.gz", 512 * MiB)
    assert p.stat().st_size < 4 * MiB  # a real bomb: >200x
    return p


@pytest.mark.slow
def test_whitespace_bomb_refused_at_the_cap(bomb_512m: Path, tmp_path: Path) -> None:
    rc, err, wall, rss = _cli(["analyze", str(bomb_512m), "--max-trace-bytes", str(256 * MiB)], tmp_path)
    lines = err.strip().splitlines()
    assert rc == 2 and len(lines) == 1, err
    assert str(bomb_512m) in lines[0] and "cap (--max-trace-bytes)" in lines[0] and "of gzip" in lines[0]
    assert wall < 60
    assert rss < 400 * MiB, rss


@pytest.mark.slow
def test_whitespace_bomb_under_a_raised_cap_is_read_through_in_little_memory(bomb_512m: Path, tmp_path: Path) -> None:
    # 512 MiB inflated, none of it kept: the run ends on "no events", not on memory.
    rc, err, wall, rss = _cli(["analyze", str(bomb_512m), "--max-trace-bytes", str(1024 * MiB)], tmp_path)
    lines = err.strip().splitlines()
    assert rc == 2 and len(lines) == 1, err
    assert str(bomb_512m) in lines[0] and "no events at all" in lines[0]
    assert wall < 60
    assert rss < 400 * MiB, rss  # the inflated text alone would be 512 MiB


def test_whitespace_after_an_event_is_dropped_in_process(tmp_path: Path) -> None:
    # Whitespace after the last event (inside the array) and before the closing brackets:
    # 64 MiB of it costs no more than a few pieces (tracemalloc counts Python's allocations).
    import tracemalloc

    events = json.dumps(_events())[1:-1].encode()
    p = gzip_bomb(tmp_path / "after.json.gz", 64 * MiB, head=b'{"traceEvents": [' + events, tail=b"\n]}")
    tracemalloc.start()
    try:
        got = load_kineto(p, chunk_bytes=MiB, decoders=1)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 16 * MiB, peak  # a few pieces in flight; keeping the whitespace would be 64 MiB
    assert_same_trace(got, _reference_trace(p))


@pytest.mark.parametrize("decoders", [1, 2])
def test_whitespace_inside_strings_is_kept(tmp_path: Path, decoders: int) -> None:
    evs = _events()
    evs[1]["name"] = "aten::mm" + " " * 5000 + "x"  # a run of spaces inside a name spans whole pieces
    evs[3]["name"] = '\\" ' + " " * 3000 + '"}, {' + "\\\\" + " " * 3000  # escapes and cut look-alikes too
    text = json.dumps({"traceEvents": evs}, indent=1).replace('"ph"', ' ' * 4000 + '"ph"').encode()
    p = tmp_path / "spaces.json"
    p.write_bytes(text)
    want = _reference_trace(p)
    for chunk in (64, 1000, 4096):
        assert_same_trace(load_kineto(p, chunk_bytes=chunk, decoders=decoders), want)


def test_a_stretch_without_cuts_past_the_limit_is_refused(tmp_path: Path, monkeypatch) -> None:
    from launchgap.errors import TraceFormatError
    from launchgap.loaders import kineto
    from launchgap.loaders.kineto import cutting

    monkeypatch.setattr(cutting, "MAX_UNCUT_BYTES", 1 * MiB)
    monkeypatch.setattr(kineto, "WHOLE_DECODE_MAX_BYTES", 2 * MiB)
    # A string of 4 MiB of spaces inside an event: content, not droppable whitespace.
    p = gzip_bomb(tmp_path / "string.json.gz", 4 * MiB, head=b'{"traceEvents": [{"name": "', tail=b'"}]}')
    with pytest.raises(TraceFormatError, match="cannot be read piecewise .* without a place to cut"):
        load_kineto(p, chunk_bytes=256 * 1024)


@pytest.mark.parametrize("decoders", [1, 2])
def test_empty_object_bomb_is_refused_at_its_first_piece(tmp_path: Path, decoders: int) -> None:
    # {},{},... : 3 bytes per "event", whose decoded objects (not the text) would fill memory.
    from launchgap.errors import TraceFormatError

    p = gzip_bomb(tmp_path / "empty.json.gz", 64 * MiB, tail=b"{}]}", fill=b"{},")
    t0 = time.perf_counter()
    with pytest.raises(TraceFormatError, match=r"3\.0 bytes each\): not a profiler trace"):
        load_kineto(p, decoders=decoders)
    assert time.perf_counter() - t0 < 30


def test_empty_object_pile_in_a_whole_document_decode_is_refused(tmp_path: Path) -> None:
    from launchgap.errors import TraceFormatError

    p = tmp_path / "dense.json"  # "traceEvents" not an array: read whole, where "{" are counted first
    p.write_bytes(b'{"traceEvents": 5, "x": [' + b"{}," * MiB + b"{}]}")
    with pytest.raises(TraceFormatError, match="not a profiler trace"):
        load_kineto(p)
