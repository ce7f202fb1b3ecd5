"""Decoding on both cores: worker processes beside the main one, fed through pipes.

:func:`_decoders_for` decides how many processes decode; :class:`_Worker` is one worker (a fork of a
single-threaded process, else a fresh interpreter, never a fork of threads); :class:`_Jobs` hands each
text to the main process or a worker with room and merges the columns back in file order.
"""

from __future__ import annotations

import os
import pickle
import queue
import struct
import sys
import threading
from pathlib import Path
from typing import Any


from .._io import (GZIP_MAGIC, read_head)
from .columns import _ColumnBuilder
from .cutting import _NotStreamable, _NotStrict, _TooDense, _add_text
from .schema import SETTINGS_SAMPLE_EVENTS, _EVENTS_DECODERS


class _WorkerFailed(Exception):
    """A decode worker process died or could not start; the file is read again without workers."""


#: Files at least this large (plain JSON; gzip: compressed size) are decoded by worker processes
#: beside the main one, when the machine has more than one core (see :func:`_decoders_for`).
PARALLEL_MIN_BYTES = 48 * 1024 * 1024


PARALLEL_MIN_GZIP_BYTES = 4 * 1024 * 1024


#: Environment variable: how many processes decode (1: no workers). Unset: :func:`_decoders_for`.
WORKERS_ENV = "LAUNCHGAP_LOAD_WORKERS"


def _cpus() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def _decoders_for(path: Path, decoders: int | None) -> int:
    """Processes that decode ``path``: ``decoders`` if given, else ``$LAUNCHGAP_LOAD_WORKERS``, else
    2 on a machine with two or more cores for a file of :data:`PARALLEL_MIN_BYTES` or more
    (gzip: :data:`PARALLEL_MIN_GZIP_BYTES` compressed; four times that where the worker cannot
    be a fork, see :func:`_can_fork`), else 1. At most 8."""
    if decoders is None:
        env = os.environ.get(WORKERS_ENV, "").strip()
        if env.isdigit() and int(env) >= 1:
            decoders = int(env)
        else:
            size = path.stat().st_size
            gz = read_head(path, 2) == GZIP_MAGIC
            # A fresh interpreter (no fork) costs a few tenths of a second to start: only for more text.
            least = (PARALLEL_MIN_GZIP_BYTES if gz else PARALLEL_MIN_BYTES) * (1 if _can_fork() else 4)
            decoders = min(2, _cpus()) if size >= least else 1
    return max(1, min(int(decoders), 8))


def _can_fork() -> bool:
    """Whether a worker may be a fork of this process: on Linux, from a process with one thread (the
    CLI). A process with threads (the dashboard) starts a fresh interpreter instead, as a plain
    subprocess: never a fork of threads, and never a re-run of the caller's main module (which
    multiprocessing's spawn and forkserver methods do)."""
    return sys.platform.startswith("linux") and threading.active_count() == 1 and hasattr(os, "fork")


def _start_workers(path: Path | None, strict: bool, n: int) -> list[_Worker]:
    if n <= 0:
        return []
    workers: list[_Worker] = []
    try:
        fork = _can_fork()
        for _ in range(n):
            workers.append(_Worker(path, strict, fork, [fd for w in workers for fd in w.own_fds()]))
    except (OSError, ValueError, RuntimeError):  # no processes here (sandbox, limits): decode alone
        for w in workers:
            w.close()
        return []
    for w in workers:  # the sender threads start after every fork
        w.start_sender()
    return workers


# A fresh interpreter's worker: python -c _BOOT jobs_fd results_fd path strict. This module by the
# name it was imported under (the package may be installed under another name than its folder's).
_BOOT = (f"import sys; from {__name__} import _worker_main; "
         "_worker_main(int(sys.argv[1]), int(sys.argv[2]), sys.argv[3] or None, sys.argv[4] == '1', [])")


_JOB_HEAD = struct.Struct("<qqqq")  # order number, events to sample, file offset (-1: text follows), length


_ACK = struct.Struct("<qq")  # order number, events; the pickled columns follow


_F_SETPIPE_SZ = 1031  # Linux fcntl


def _write_all(fd: int, data: bytes | memoryview) -> None:
    view = memoryview(data)
    while view.nbytes:
        view = view[os.write(fd, view):]


def _read_into(fd: int, view: memoryview) -> None:
    while view.nbytes:
        n = os.readv(fd, [view])
        if n == 0:
            raise EOFError
        view = view[n:]


class _Worker:
    """One decode worker process.

    Texts go to it through a pipe, written by a thread of ours (so the decoding here never waits
    on the pipe) straight from the pieces, without joining them first; a text that is one
    stretch of a plain file goes as its offset and length, and the worker reads it from the file
    itself. Each text's columns come back, pickled, as soon as they are done, read whenever the
    main process looks (:meth:`poll`, :meth:`collect`).
    """

    def __init__(self, path: Path | None, strict: bool, fork: bool, close_in_child: list[int]) -> None:
        from multiprocessing.connection import Connection

        jobs_r, self.jobs_fd = os.pipe()
        results_r, results_w = os.pipe()
        try:
            for fd in (self.jobs_fd, results_w):
                try:  # bigger pipes: fewer wake-ups per text (Linux; elsewhere the default size)
                    import fcntl

                    fcntl.fcntl(fd, _F_SETPIPE_SZ, 1 << 20)
                except (ImportError, OSError):
                    pass
            spath = "" if path is None else str(path)
            if fork:
                import multiprocessing as mp

                # The child closes the parent's ends (and earlier workers'), so it sees EOF if we die.
                self.proc: Any = mp.get_context("fork").Process(
                    target=_worker_main, args=(jobs_r, results_w, spath or None, strict,
                                               [self.jobs_fd, results_r, *close_in_child]),
                    daemon=True, name="launchgap-decode")
                self.proc.start()
            else:
                import subprocess

                # The folder holding this package's folder: lets a source checkout import it (an
                # installed package imports anyway, through the same interpreter).
                root = str(Path(__file__).resolve().parents[3])
                env = {**os.environ, "PYTHONPATH": root + os.pathsep + os.environ.get("PYTHONPATH", "")}
                self.proc = subprocess.Popen(
                    [sys.executable, "-c", _BOOT, str(jobs_r), str(results_w), spath, "1" if strict else "0"],
                    pass_fds=(jobs_r, results_w), env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL)
        except BaseException:
            for fd in (jobs_r, self.jobs_fd, results_r, results_w):
                os.close(fd)
            raise
        os.close(jobs_r)
        os.close(results_w)
        self.results = Connection(results_r)
        self.outstanding = 0
        self.done: list[tuple[int, _ColumnBuilder]] = []  # columns back from the worker, with order numbers
        self.queue: queue.SimpleQueue = queue.SimpleQueue()
        self.sender: threading.Thread | None = None
        self.closed = False

    def own_fds(self) -> list[int]:
        return [self.jobs_fd, self.results.fileno()]

    def start_sender(self) -> None:
        self.sender = threading.Thread(target=self._send_loop, name="launchgap-decode-feed", daemon=True)
        self.sender.start()

    def _send_loop(self) -> None:
        fd = self.jobs_fd
        try:
            while True:
                item = self.queue.get()
                if item is None:
                    _write_all(fd, _JOB_HEAD.pack(-1, 0, 0, 0))
                    return
                seq, limit, parts, offset = item
                del item
                length = sum(len(p) for p in parts)
                _write_all(fd, _JOB_HEAD.pack(seq, limit, offset, length))
                if offset < 0:
                    for part in parts:
                        _write_all(fd, part)
                del parts
        except (OSError, ValueError):  # the worker is gone: poll/collect report it
            return

    def submit(self, seq: int, sample_limit: int, parts: list, offset: int) -> None:
        self.outstanding += 1
        self.queue.put((seq, sample_limit, parts, offset))

    def poll(self, counts: dict[int, int]) -> None:
        """Read the acknowledgements that have come (never waits): event counts into ``counts``."""
        try:
            while self.results.poll():
                self._ack(self.results.recv_bytes(), counts)
        except (EOFError, OSError):
            raise _WorkerFailed("decode worker exited") from None

    def _ack(self, msg: bytes, counts: dict[int, int]) -> None:
        if msg[:1] == b"A":
            seq, n = _ACK.unpack_from(msg, 1)
            counts[seq] = n
            self.outstanding -= 1
            self.done.append((seq, pickle.loads(memoryview(msg)[1 + _ACK.size:])))
            return
        if msg[:2] == b"E\x01":
            raise _NotStrict
        if msg[:2] == b"E\x02":
            raise _NotStreamable(msg[2:].decode(errors="replace"))
        if msg[:2] == b"E\x04":
            raise _TooDense(msg[2:].decode(errors="replace"))
        raise _WorkerFailed(msg[2:].decode(errors="replace"))

    def collect(self, counts: dict[int, int]) -> list[tuple[int, _ColumnBuilder]]:
        """Tell the worker that no more text comes; its columns, per text, with their order numbers."""
        self.queue.put(None)
        try:
            while True:
                msg = self.results.recv_bytes()
                if msg[:1] == b"R":
                    done, self.done = self.done, []  # ours no longer: merged and freed by the caller
                    return done
                self._ack(msg, counts)
        except (EOFError, OSError):
            raise _WorkerFailed("decode worker exited") from None

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        if hasattr(self.proc, "is_alive"):  # a fork (multiprocessing.Process)
            if self.proc.is_alive():
                self.proc.terminate()
            self.proc.join(5)
        else:  # a subprocess.Popen
            if self.proc.poll() is None:
                self.proc.terminate()
            try:
                self.proc.wait(5)
            except Exception:  # noqa: BLE001 - it is killed below
                self.proc.kill()
        if self.sender is not None:
            self.queue.put(None)
            self.sender.join(5)
        os.close(self.jobs_fd)
        self.results.close()


def _worker_main(jobs_fd: int, results_fd: int, path: str | None, strict: bool, close: list[int]) -> None:
    """A worker process: decode each text it is sent into columns of its own and send them back,
    pickled, with its order number and event count; ``R`` when told that no more text comes."""
    import signal
    from multiprocessing.connection import Connection

    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the main process's to handle; it ends us
    for fd in close:
        os.close(fd)
    results = Connection(results_fd)
    outbox: queue.SimpleQueue = queue.SimpleQueue()

    def post() -> None:  # a thread: writing to the pipe never holds up the decoding
        while (msg := outbox.get()) is not None:
            try:
                results.send_bytes(msg)
            except OSError:  # the parent is gone (or gave up on us): nothing to tell
                return

    poster = threading.Thread(target=post, name="launchgap-decode-post", daemon=True)
    poster.start()
    decoder = _EVENTS_DECODERS[strict]
    fd = jobs_fd
    head = bytearray(_JOB_HEAD.size)
    src = os.open(path, os.O_RDONLY) if path is not None else -1
    reply = b"R"
    try:
        while True:
            _read_into(fd, memoryview(head))
            seq, sample_limit, offset, length = _JOB_HEAD.unpack(head)
            if seq < 0:
                break
            text = bytearray(length + 2)
            text[0], text[-1] = 0x5B, 0x5D  # "[" ... "]"
            view = memoryview(text)[1:-1]
            if offset < 0:
                _read_into(fd, view)
            else:
                while view.nbytes:
                    n = os.preadv(src, [view], offset)
                    if n == 0:
                        raise _WorkerFailed("the file changed while it was read")
                    view, offset = view[n:], offset + n
            del view
            cols = _ColumnBuilder(strict, sample_limit=sample_limit)
            _add_text(cols, decoder, text)
            del text
            # Sent as soon as done: the columns wait in the main process, not here as well.
            outbox.put(b"A" + _ACK.pack(seq, cols.n_events) + pickle.dumps(cols, protocol=pickle.HIGHEST_PROTOCOL))
            del cols
    except _NotStrict:
        reply = b"E\x01"
    except _NotStreamable as exc:
        reply = b"E\x02" + str(exc).encode()
    except _TooDense as exc:
        reply = b"E\x04" + str(exc).encode()
    except Exception as exc:  # noqa: BLE001 - reported to the parent, which reads the file without workers
        reply = b"E\x03" + repr(exc).encode()[:500]
    finally:
        if src >= 0:
            os.close(src)
    outbox.put(reply)
    outbox.put(None)
    poster.join()


class _Jobs:
    """Event texts, in file order, to columns: decoded here, or by a worker that has room.

    Without workers one builder takes every text as it comes. With workers each text gets a
    builder of its own, and the builders are merged in file order at the end; each is told how
    many of its events to sample for the profiler settings (none once the texts before it are
    known to hold :data:`SETTINGS_SAMPLE_EVENTS`).
    """

    def __init__(self, strict: bool, workers: list[_Worker]) -> None:
        self.strict = strict
        self.workers = workers
        self.decoder = _EVENTS_DECODERS[strict]
        self.acc = _ColumnBuilder(strict)
        self.parts: dict[int, _ColumnBuilder] = {}
        self.counts: dict[int, int] = {}
        self.seq = 0

    def _sample_limit(self, seq: int) -> int:
        before = sum(n for s, n in self.counts.items() if s < seq)
        return SETTINGS_SAMPLE_EVENTS if before < SETTINGS_SAMPLE_EVENTS else 0

    def submit(self, parts: list, offset: int) -> None:
        if not self.workers:
            _add_text(self.acc, self.decoder, bytearray().join((b"[", *parts, b"]")))
            return
        seq = self.seq
        self.seq += 1
        for w in self.workers:
            w.poll(self.counts)
        limit = self._sample_limit(seq)
        free = min(self.workers, key=lambda w: w.outstanding)
        if free.outstanding < 2:  # one being decoded, one waiting: the worker never idles
            free.submit(seq, limit, parts, offset)
            return
        cols = _ColumnBuilder(self.strict, sample_limit=limit)
        _add_text(cols, self.decoder, bytearray().join((b"[", *parts, b"]")))
        self.parts[seq] = cols
        self.counts[seq] = cols.n_events

    def finish(self, tail_events: list) -> _ColumnBuilder:
        """The columns of every text, the tail's events last."""
        if not self.workers:
            self.acc.add(tail_events)
            return self.acc
        tail = _ColumnBuilder(self.strict, sample_limit=self._sample_limit(self.seq))
        tail.add(tail_events)
        self.parts[self.seq] = tail
        for w in self.workers:
            self.parts.update(w.collect(self.counts))
        for seq in sorted(self.parts):
            self.acc.merge(self.parts.pop(seq))
        return self.acc
