"""torch.profiler / Kineto Chrome-trace JSON (``.json``, ``.json.gz``) -> :class:`Trace`.

Decoding is typed (msgspec Structs that name only the fields the analysis uses), so
unknown keys are skipped without building Python objects for them. Event categories
kept: ``kernel``, ``gpu_memcpy``, ``gpu_memset``, ``cuda_runtime``, ``cuda_driver``,
``cpu_op``, ``user_annotation``, ``gpu_user_annotation``; ``python_function`` ranges go to a
table beside them; ``ac2g`` flow events fill in a GPU op's correlation id when its args lack
one. Everything else is only counted (the profiler-settings sample) or dropped.

The package, one concern per module:

* :mod:`.schema`: the strict and lenient msgspec schemas, value converters, profiler settings,
  device properties.
* :mod:`.scan`: the C scan (``_scan.c``, compiled at install), or None without it.
* :mod:`.cutting`: the ``traceEvents`` text cut into pieces at event boundaries; one piece read
  into columns (:func:`~.cutting._add_text`).
* :mod:`.workers`: decode worker processes (fork or a fresh interpreter) and the job queue.
* :mod:`.columns` (with :mod:`.arrays` and :mod:`.python_calls`): pieces to columns, folded into
  the :class:`Trace` at the end.
* here: :func:`load_kineto`, which reads a file through them (or decodes it whole when it cannot
  be read piecewise).

How a large file is read (memory follows the events kept, not the JSON text):

* The content is read (and gunzipped) in pieces of a few MB by a background thread
  (:func:`~launchgap.loaders._io.read_ahead`), so decompression overlaps decoding.
* Each piece is cut after the last complete event of ``traceEvents`` and read on its own as
  a JSON array. The C scan reads it in one pass straight to one record per event (ts, dur, ids,
  launch configuration, and indices into the piece's distinct strings), which
  :meth:`~.columns._ColumnBuilder.add_scanned` turns into columns with a few numpy operations;
  it declines any text it cannot be sure to read exactly as msgspec's strict schema does
  (invalid JSON, a value of another type, a number it cannot convert exactly...). A declined
  text, or every text where the scan is missing, is decoded by msgspec in stretches of
  :data:`SUB_PIECE_BYTES`; each stretch's events become numpy columns at once, while their
  Structs are still in the CPU's cache. A cut that is not between two events cannot decode (a
  string or object would be left open), so a wrong cut is never silently accepted: the loader
  then decodes the rest of the piece, or the whole document, in one go instead.
* Without the scan, events decode into strict Structs first (``ts`` a number, ids integers...), which
  turn into columns in few passes: one codes every event, one puts every numeric field into
  a numpy record, one per object field (name, pid, tid, Input Dims). A file that breaks
  those types (string ids on ROCm, ``null`` fields) is read again with lenient Structs
  and converted value by value. All three give the same columns (see
  ``tests/unit/test_kineto_loader_equivalence.py`` and ``test_kineto_native_scan.py``).
* Structs are created with ``gc=False``: decoded JSON cannot form reference cycles, and
  without it the cyclic GC re-scans millions of live events over and over.

Memory (issue 30): each piece's columns wait at the narrowest integer type their values allow;
at the end they are folded into the table one column at a time, each piece let go as it is
folded in, times converted in place, the heap trimmed as each column's pieces go and after the
table is sorted (:data:`~launchgap.heap.HEAP`: freed blocks stay resident until then). Text in flight
is one piece being cut, one read ahead and the stretch being decoded here; the first piece is let go
once cut. Events of other categories never become rows (only the
first :data:`SETTINGS_SAMPLE_EVENTS` are counted). Two tables are unavoidable and kept whole: the
event table (every kept event is a row some analysis reads: CPU ops, annotations and runtime calls
are the host ranges of the host stalls, phases and activity and carry the Input Dims the batch
size is read from; launches and GPU ops are the gaps) and the Python calls of a ``with_stack``
trace (the host stalls need every range boundary on the launching thread and the host phases
every range that reaches into a gap between steps, and neither the thread nor the gaps are known
before the whole file is read; the analyses then walk them in blocks and windows of time, not in
copies). Columns no analysis does arithmetic on (``device``, ``stream``, ``graph_id``, ``dims_id``,
``kernel_name_id``, the launch configuration) are stored at the smallest integer type their values
allow, durations at int32 when every one fits (54 bytes a row on the bench's 1 GB eager trace, 102 MiB
for 1.9 M rows); a Python call costs its start and end (int64 ns) and its name id and tid at
the smallest type (20 bytes a call on the bench's vLLM trace: 342 names, one thread).
"""

from __future__ import annotations

from pathlib import Path
from typing import Iterator

import msgspec

from ...errors import TraceFormatError, TraceTooLargeError
from ...trace import Trace
from .._io import CHUNK_BYTES, DEFAULT_MAX_TRACE_BYTES, GZIP_MAGIC, iter_content, mb_text, read_ahead, read_head, \
    read_text_bytes
from .columns import _ColumnBuilder
from .cutting import (_KEY, MAX_UNCUT_BYTES, MIN_EVENT_BYTES, SUB_PIECE_BYTES, _array_start, _check_density,
                      _decode_piece, _event_texts, _NotStreamable, _NotStrict, _TooDense)
from .scan import NATIVE_SCAN_ENV
from .schema import (_FILE_DECODERS, _HEADER_DECODER, PROFILER_FLAGS, SETTINGS_SAMPLE_EVENTS, _flags_of,
                     _KinetoFile, decode_kineto)
from .workers import (PARALLEL_MIN_BYTES, PARALLEL_MIN_GZIP_BYTES, WORKERS_ENV, _decoders_for, _Jobs,
                      _start_workers, _Worker, _WorkerFailed)

#: The loader's public names (the settings and bounds are documented where they are used).
__all__ = ["load_kineto", "decode_kineto", "kineto_to_trace", "NATIVE_SCAN_ENV", "WORKERS_ENV", "PROFILER_FLAGS",
           "SETTINGS_SAMPLE_EVENTS", "MIN_EVENT_BYTES", "SUB_PIECE_BYTES", "MAX_UNCUT_BYTES", "WHOLE_DECODE_MAX_BYTES",
           "PARALLEL_MIN_BYTES", "PARALLEL_MIN_GZIP_BYTES"]


def load_kineto(path: str | Path, max_bytes: int = DEFAULT_MAX_TRACE_BYTES, *,
                chunk_bytes: int = CHUNK_BYTES, decoders: int | None = None) -> Trace:
    """Load a Kineto trace file into the columnar :class:`Trace`.

    ``chunk_bytes`` is the size of the pieces the content is read and decoded in (tests
    make it small to cut files in many places); it changes memory use, never the result.
    ``decoders`` is how many processes decode (None: :func:`_decoders_for` decides); it changes
    the time taken, never the result.
    """
    p = Path(path)
    n = _decoders_for(p, decoders)
    reason = ""
    strict = True
    while True:
        try:
            return _load_streaming(p, max_bytes, chunk_bytes, strict, n)
        except _NotStrict:
            if not strict:
                break
            strict = False  # read again with the lenient schema
        except _WorkerFailed:
            if n == 1:
                raise
            n = 1  # read again in this process alone
        except _NotStreamable as exc:
            reason = str(exc)
            break
        except _TooDense as exc:
            raise TraceFormatError(str(exc), str(p)) from None
    # Not laid out as {..., "traceEvents": [...], ...} or not valid JSON: decode it whole,
    # which also gives the precise error for a broken file.
    doc = decode_kineto(_read_whole(p, max_bytes, reason), str(p))
    return kineto_to_trace(doc, str(p))


def _read_whole(path: Path, max_bytes: int, reason: str) -> bytes | bytearray:
    """The content for a whole-document decode: at most :data:`WHOLE_DECODE_MAX_BYTES` of it, since
    decoding it whole takes a multiple of its size in memory."""
    limit = min(max_bytes, WHOLE_DECODE_MAX_BYTES)
    try:
        data = read_text_bytes(path, limit)
        try:
            _check_density(data.count(b"{"), len(data))  # every event has a "{"
        except _TooDense as exc:
            raise TraceFormatError(str(exc), str(path)) from None
        return data
    except TraceTooLargeError:
        if limit == max_bytes:
            raise
        raise TraceFormatError(
            f"cannot be read piecewise ({reason or 'not laid out as a Kineto trace'}) and is over "
            f"{mb_text(limit)}, too large to decode whole", str(path)) from None


def kineto_to_trace(doc: _KinetoFile, path: str) -> Trace:
    """Columns from a whole decoded (lenient) document."""
    cols = _ColumnBuilder(strict=False)
    cols.add(doc.traceEvents)
    return cols.finish(path, doc.deviceProperties, doc.distributedInfo, _flags_of(doc))


#: Largest content decoded whole when it cannot be read piecewise (the decode takes about 2.5x
#: this in memory); past it the file is refused with the reason it could not be read piecewise.
WHOLE_DECODE_MAX_BYTES = 384 * 1024 * 1024


def _load_streaming(path: Path, max_bytes: int, chunk_bytes: int, strict: bool, decoders: int) -> Trace:
    plain = read_head(path, 2) != GZIP_MAGIC
    workers = _start_workers(path if plain else None, strict, decoders - 1)  # before our threads start (fork)
    try:
        pieces = read_ahead(iter_content(path, max_bytes, chunk_bytes), depth=1)
        try:
            return _decode_stream(pieces, str(path), strict, workers, plain)
        finally:
            pieces.close()
    finally:
        for w in workers:
            w.close()


def _decode_stream(pieces: Iterator[bytes], path: str, strict: bool, workers: list[_Worker], plain: bool = False,
                   ) -> Trace:
    buf = b""
    start = None
    for data in pieces:
        buf += data
        start = _array_start(buf)
        if start is not None:
            break
    if start is None:
        raise _NotStreamable("no 'traceEvents' array")  # let the whole-document decode say why
    try:
        head = _HEADER_DECODER.decode(buf[: buf.rfind(_KEY, 0, start)] + b'"traceEvents":[]}')
    except (msgspec.DecodeError, msgspec.ValidationError, RecursionError):
        raise _NotStreamable("the text before 'traceEvents' is not the start of a JSON object") from None
    first = [buf[start:]]  # emptied by the cutter once read: the first piece is not held to the end
    del buf
    jobs = _Jobs(strict, workers)
    for is_tail, parts, offset in _event_texts(pieces, first, start, plain):
        if is_tail:
            tail = _decode_piece(_FILE_DECODERS[strict], b"".join((b'{"traceEvents":[', *parts)))
            del parts
            cols = jobs.finish(tail.traceEvents)
            break
        jobs.submit(parts, offset)
        del parts
    devices = tail.deviceProperties if tail.deviceProperties is not None else head.deviceProperties
    dist = tail.distributedInfo if tail.distributedInfo is not None else head.distributedInfo
    flags = {k: v if v is not None else _flags_of(head)[k] for k, v in _flags_of(tail).items()}
    return cols.finish(path, devices, dist, flags)
