"""Every unreadable input: exit 2 and one line on stderr naming the file, never a traceback."""
from __future__ import annotations

import gzip
import json
import subprocess
import sys
from pathlib import Path

import pytest

from launchgap.cli import main
from tests.unit.kineto_tiny import kernel, launch, write


def _run(capsys, argv: list[str]) -> tuple[int, str, str]:
    rc = main(argv)
    out, err = capsys.readouterr()
    return rc, out, err


def _assert_one_line(rc: int, err: str, path: Path | str, reason: str) -> None:
    assert rc == 2
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert str(path) in lines[0] and reason in lines[0], lines[0]
    assert "Traceback" not in err


def _bad_files(tmp: Path) -> dict[str, tuple[Path, str]]:
    files: dict[str, tuple[Path, str]] = {}
    empty = tmp / "empty.json"
    empty.write_bytes(b"")
    files["empty"] = (empty, "empty file")
    text = tmp / "notes.json"
    text.write_text("hello, not json")
    files["not json"] = (text, "not a trace")
    badjson = tmp / "bad.json"
    badjson.write_text('{"traceEvents": [ {"ph": "X",, ]}')
    files["malformed"] = (badjson, "not valid JSON")
    other = tmp / "other.json"
    other.write_text(json.dumps({"hello": [1, 2, 3]}))
    files["json not a trace"] = (other, "traceEvents")
    garbage = tmp / "garbage.json"
    garbage.write_text(json.dumps({"traceEvents": [1, "two", None]}))
    files["garbage events"] = (garbage, "not a Kineto trace")
    deep = tmp / "deep.json"
    deep.write_text('{"traceEvents": [{"ph": "X", "name": ' + "[" * 50_000 + "]" * 50_000 + "}]}")
    files["deeply nested"] = (deep, "nested too deeply")
    good = gzip.compress(json.dumps({"traceEvents": [kernel(1, 1, 1)] * 2000}).encode())
    trunc = tmp / "trunc.json.gz"
    trunc.write_bytes(good[: len(good) // 2])
    files["truncated gzip"] = (trunc, "truncated gzip")
    binary = tmp / "random.bin"
    binary.write_bytes(bytes(range(256)) * 10)
    files["random bytes"] = (binary, "not a trace")
    cpu = tmp / "cpu.json"
    cpu.write_text(json.dumps({"traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "aten::mm", "ts": 1, "dur": 2}]}))
    files["no gpu events"] = (cpu, "no GPU kernels")
    return files


@pytest.mark.parametrize("case", ["empty", "not json", "malformed", "json not a trace", "garbage events",
                                  "deeply nested", "truncated gzip", "random bytes", "no gpu events"])
def test_bad_file(tmp_path, capsys, case) -> None:
    path, reason = _bad_files(tmp_path)[case]
    rc, out, err = _run(capsys, ["analyze", str(path)])
    _assert_one_line(rc, err, path, reason)
    assert out == ""


def test_missing_path(tmp_path, capsys) -> None:
    p = tmp_path / "nope.json.gz"
    rc, _, err = _run(capsys, ["analyze", str(p)])
    _assert_one_line(rc, err, p, "no such file")


def test_directory_without_traces(tmp_path, capsys) -> None:
    (tmp_path / "readme.txt").write_text("x")
    rc, _, err = _run(capsys, ["analyze", str(tmp_path)])
    _assert_one_line(rc, err, tmp_path, "no trace files")


def test_decompression_bomb_is_capped(tmp_path, capsys) -> None:
    bomb = tmp_path / "bomb.json.gz"
    with gzip.open(bomb, "wb", compresslevel=9) as fh:
        chunk = b" " * (1 << 20)
        for _ in range(64):  # 64 MiB of spaces, ~64 KB compressed
            fh.write(chunk)
    rc, _, err = _run(capsys, ["analyze", str(bomb), "--max-trace-bytes", str(8 << 20)])
    _assert_one_line(rc, err, bomb, "cap (--max-trace-bytes)")


def test_plain_file_over_cap(tmp_path, capsys) -> None:
    p = write(tmp_path, [launch(0, 1, 1), kernel(2, 1, 1)])
    rc, _, err = _run(capsys, ["analyze", str(p), "--max-trace-bytes", "10"])
    _assert_one_line(rc, err, p, "cap (--max-trace-bytes)")


def test_bad_option_values(tmp_path, capsys) -> None:
    p = write(tmp_path, [launch(0, 1, 1), kernel(2, 1, 1)])
    rc, _, err = _run(capsys, ["analyze", str(p), "--observed-step-us", "-3"])
    assert rc == 2 and "--observed-step-us" in err and len(err.strip().splitlines()) == 1
    rc, _, err = _run(capsys, ["analyze", str(p), "--step-regex", "("])
    assert rc == 2 and "bad --step-regex" in err and len(err.strip().splitlines()) == 1


def test_good_and_bad_together(tmp_path, capsys) -> None:
    good = write(tmp_path, [launch(0, 1, 1), kernel(2, 1, 1)], name="good.json")
    bad = tmp_path / "bad.json"
    bad.write_text("{")
    rc, out, err = _run(capsys, ["analyze", str(good), str(bad), "--format", "json"])
    assert rc == 2
    doc = json.loads(out)
    assert [t["path"] for t in doc["traces"]] == [str(good)]
    assert doc["errors"][0]["path"] == str(bad)
    assert len(err.strip().splitlines()) == 1 and str(bad) in err


def test_subprocess_smoke(tmp_path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text("[1, 2")
    proc = subprocess.run([sys.executable, "-m", "launchgap", "analyze", str(bad)], capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert proc.stderr.count("\n") == 1 and str(bad) in proc.stderr
    good = write(tmp_path, [launch(0, 1, 1), kernel(2, 1, 1)], name="good.json")
    proc = subprocess.run([sys.executable, "-m", "launchgap", "analyze", str(good), "--format", "json"],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["schema"] == "launchgap.report/1"
