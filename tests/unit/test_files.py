"""The one capped small-file reader (analyzer/files.py): every refusal a one-line error naming the file."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from launchgap.errors import InputError
from launchgap.files import read_json_file, read_small_file, read_small_text


def test_reads_bytes_text_and_json(tmp_path: Path) -> None:
    f = tmp_path / "d.json"
    f.write_bytes(b'\xef\xbb\xbf{"8": 120}')  # a byte-order mark, as Windows editors write it
    assert read_small_file(f, "distribution") == b'\xef\xbb\xbf{"8": 120}'
    assert read_small_text(f, "distribution") == '{"8": 120}'
    assert read_json_file(f, "distribution") == {"8": 120}


@pytest.mark.parametrize("content, message", [
    (b"", "empty timings file"),
    (b"  \n\t", "empty timings file"),
    (b"\xff\xfe{}", "timings file is not UTF-8 text"),
    (b"{", "timings file is not valid JSON (Expecting property name enclosed in double quotes at line 1)"),
    (b"x" * 2048, "timings file is 2,048 bytes, over the 0 MiB cap"),
])
def test_refusals_name_the_file(tmp_path: Path, content: bytes, message: str) -> None:
    f = tmp_path / "t.json"
    f.write_bytes(content)
    with pytest.raises(InputError) as err:
        read_json_file(f, "timings", max_bytes=1024)
    assert str(err.value) == f"{f}: {message}"


def test_missing_and_folder(tmp_path: Path) -> None:
    with pytest.raises(InputError, match=re.escape(f"{tmp_path / 'nope.csv'}: no such file")):
        read_small_file(tmp_path / "nope.csv", "distribution")
    with pytest.raises(InputError, match=re.escape(f"{tmp_path}: is a folder, expected a distribution file")):
        read_small_file(tmp_path, "distribution")


def test_server_config_file_goes_through_the_same_reader(tmp_path: Path, capsys) -> None:
    """``--server-config FILE``: missing, empty or too large is one line naming the file, exit 2."""
    from launchgap.cli import main
    from launchgap.engines import MAX_CONFIG_CHARS

    big = tmp_path / "big.yaml"
    big.write_bytes(b"#" * (MAX_CONFIG_CHARS + 1))
    empty = tmp_path / "empty.yaml"
    empty.write_bytes(b"")
    for f, why in ((tmp_path / "none.yaml", "no such file"), (empty, "empty server config file"),
                   (big, f"server config file is {MAX_CONFIG_CHARS + 1:,} bytes, over the 1 MiB cap")):
        assert main(["plan", "--server-config", str(f)]) == 2
        assert capsys.readouterr().err == f"launchgap: error: {f}: {why}\n"
