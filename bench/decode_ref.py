"""Decode-only reference for the benchmark: one single-threaded typed msgspec decode of a trace.

Run as a fresh process by ``bench.py`` beside ``launchgap analyze`` on the same file: it reads
the file (gunzipping a ``.json.gz`` in memory first), decodes the whole document with msgspec
Structs naming the fields an analysis needs (the loader's strict schema, written out here on
its own), and prints the number of events. Nothing else: no columns, no analysis, no output.
It is the floor a single-threaded typed decoder cannot go under; ``bench.py`` reports
launchgap's end-to-end time as a ratio of it.
"""
from __future__ import annotations

import sys
import zlib
from typing import Union

import msgspec


class Args(msgspec.Struct, gc=False):
    correlation: int = -1
    device: int = -1
    stream: int = -1
    graph_id: int = msgspec.field(name="graph id", default=-1)
    input_dims: msgspec.Raw = msgspec.field(name="Input Dims", default=msgspec.Raw(b""))
    call_stack: msgspec.Raw = msgspec.field(name="Call stack", default=msgspec.Raw(b""))


class Event(msgspec.Struct, gc=False):
    ph: str = ""
    cat: str = ""
    name: str = ""
    pid: Union[int, str] = 0
    tid: Union[int, str] = 0
    ts: float = 0.0
    dur: float = 0.0
    id: Union[int, float, str, None] = None
    args: Union[Args, None] = None


class Device(msgspec.Struct, gc=False):
    id: int = -1
    name: str = ""


class File(msgspec.Struct, gc=False):
    traceEvents: list[Event]
    deviceProperties: Union[list[Device], None] = None


def main(path: str) -> int:
    with open(path, "rb") as fh:
        data = fh.read()
    if data[:2] == b"\x1f\x8b":
        data = zlib.decompress(data, 16 + zlib.MAX_WBITS)
    doc = msgspec.json.decode(data, type=File)
    print(len(doc.traceEvents))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
