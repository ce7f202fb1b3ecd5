"""The gzip reader gives the same content and the same errors with ISA-L's inflate and with zlib.

``analyzer/loaders/_io.py`` takes python-isal's ``isal_zlib`` where it is installed (about 3x zlib's
speed) and the standard library's ``zlib`` otherwise; every case here runs through both.
"""
from __future__ import annotations

import gzip
import zlib
from pathlib import Path

import pytest

from launchgap.errors import TraceFormatError, TraceTooLargeError
from launchgap.loaders import _io

isal_zlib = pytest.importorskip("isal.isal_zlib")

TEXT = b'{"traceEvents": [' + b",".join(b'{"ph": "X", "name": "k%d", "ts": %d}' % (i, i) for i in range(3000)) + b"]}"


def _cases(tmp: Path) -> dict[str, Path]:
    whole = gzip.compress(TEXT)
    corrupt = bytearray(whole)
    corrupt[len(whole) // 2] ^= 0xFF  # a flipped byte mid-stream
    bad_crc = bytearray(whole)
    bad_crc[-8] ^= 0x01  # the trailer's CRC32
    half = len(TEXT) // 2
    files = {
        "one member": whole,
        "two members": gzip.compress(TEXT[:half]) + gzip.compress(TEXT[half:]),
        "zero padding": whole + b"\x00" * 512,
        "garbage after": whole + b"not gzip",
        "truncated": whole[: len(whole) * 2 // 3],
        "corrupt": bytes(corrupt),
        "bad crc": bytes(bad_crc),
    }
    out = {}
    for name, data in files.items():
        p = tmp / (name.replace(" ", "_") + ".json.gz")
        p.write_bytes(data)
        out[name] = p
    return out


def _read(path: Path, max_bytes: int) -> bytes | tuple[type, str]:
    try:
        return b"".join(_io.iter_content(path, max_bytes, chunk_bytes=4096))
    except (TraceFormatError, TraceTooLargeError) as exc:
        return type(exc), str(exc).split(" (")[0]  # the library's own words in brackets may differ


@pytest.mark.parametrize("max_bytes", [_io.DEFAULT_MAX_TRACE_BYTES, len(TEXT) // 3])
def test_isal_and_zlib_read_the_same(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, max_bytes: int) -> None:
    files = _cases(tmp_path)
    got = {}
    for backend, errors in ((isal_zlib, (zlib.error, isal_zlib.error)), (zlib, (zlib.error,))):
        monkeypatch.setattr(_io, "_inflate", backend)
        monkeypatch.setattr(_io, "_INFLATE_ERRORS", errors)
        got[backend.__name__] = {name: _read(p, max_bytes) for name, p in files.items()}
    assert got["isal.isal_zlib"] == got["zlib"]
    full = got["zlib"]
    if max_bytes > len(TEXT):
        assert full["one member"] == full["two members"] == full["zero padding"] == TEXT
        assert full["garbage after"][0] is TraceFormatError and full["truncated"][0] is TraceFormatError
        assert full["corrupt"][0] is TraceFormatError and full["bad crc"][0] is TraceFormatError
    else:  # the cap stops every readable stream first
        assert full["one member"][0] is TraceTooLargeError


def test_the_fast_inflater_is_used_when_installed() -> None:
    assert _io._inflate is isal_zlib
