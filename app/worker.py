"""Parse and analyse an uploaded trace in a child process, with a memory and a time limit.

Why a process: the dashboard server is one Python process. A parse there shares the GIL
with the server's event loop and every other session's script thread, and a file that
inflates to gigabytes (a decompression bomb) would grow the server itself until the
kernel kills it, and every session with it. A child parses the upload instead: the
server keeps its GIL and its memory; the child runs in its own process group, and a
watchdog in the calling (script) thread kills that group when the tree's resident memory
passes ``max_rss_bytes`` or the wall time passes ``timeout_s``. Nothing here takes a lock
shared between sessions; each upload gets its own child.

Children come from a ``forkserver`` started once per server with the analyzer already
imported, so a child starts in milliseconds and without the server's threads. The result
(the parsed :class:`~analyzer.trace.Trace` and its :class:`~analyzer.report.TraceReport`)
comes back pickled through a pipe.
"""
from __future__ import annotations

import dataclasses
import logging
import multiprocessing
import os
import pickle
import signal
import threading
import time
import traceback
from dataclasses import dataclass
from pathlib import Path

from analyzer.errors import AnalyzerError
from analyzer.report import AnalysisOptions, TraceReport
from analyzer.trace import Trace

log = logging.getLogger("launchgap.app")

#: Modules the fork server imports once, so each child starts with them loaded.
PRELOAD = ["analyzer.loaders", "analyzer.loaders.kineto", "analyzer.loaders.nsys", "analyzer.ranks",
           "analyzer.report", "app.worker"]
#: How often the watchdog looks at the child's memory, seconds.
POLL_S = 0.05

_ctx_lock = threading.Lock()
_ctx: multiprocessing.context.BaseContext | None = None


class WorkerError(Exception):
    """The child did not produce a result; ``message`` is one line for the user."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


@dataclass(frozen=True)
class Limits:
    """``max_rss_bytes``: resident memory of the child and its descendants; ``timeout_s``: wall time."""

    max_rss_bytes: int
    timeout_s: float


def _context() -> multiprocessing.context.BaseContext:
    global _ctx
    with _ctx_lock:
        if _ctx is None:
            methods = multiprocessing.get_all_start_methods()
            ctx = multiprocessing.get_context("forkserver" if "forkserver" in methods else "spawn")
            if ctx.get_start_method() == "forkserver":
                ctx.set_forkserver_preload(PRELOAD)
            _ctx = ctx
        return _ctx


def warm_up() -> None:
    """Start the fork server now (it imports the analyzer once), so the first upload does not wait for it."""
    ctx = _context()
    if ctx.get_start_method() == "forkserver":
        from multiprocessing import forkserver

        forkserver.ensure_running()


def _one_line(text: str) -> str:
    return " ".join(str(text).split())


def _child(path: str, max_bytes: int, options: AnalysisOptions, label: str | None, conn) -> None:
    """Runs in the child: its own process group, then load + analyse; sends ("ok", pickled) or ("error", line)."""
    try:
        os.setsid()
    except OSError:
        pass
    try:
        from analyzer.loaders import load_trace
        from analyzer.ranks import analyze_with_collectives

        trace = load_trace(path, max_bytes)
        if label is not None:  # the name the result is known by (not the temporary file's)
            trace = dataclasses.replace(trace, path=label)
        report = analyze_with_collectives(trace, options)
        payload = pickle.dumps((trace, report), protocol=pickle.HIGHEST_PROTOCOL)
        del trace, report
        conn.send_bytes(b"ok" + payload)
    except AnalyzerError as exc:
        conn.send_bytes(b"er" + _one_line(exc.message).encode())
    except MemoryError:
        conn.send_bytes(b"er" + b"out of memory while parsing; split the trace or lower the trace size cap")
    except Exception as exc:  # noqa: BLE001 - reported to the parent as one line, traceback logged here
        traceback.print_exc()
        conn.send_bytes(b"er" + f"internal error while analysing this file ({type(exc).__name__}); "
                                f"please report it".encode())
    finally:
        conn.close()


def tree_rss_bytes(pid: int) -> int:
    """Resident memory of ``pid`` and its descendants (Linux /proc; 0 when it is gone)."""
    total = 0
    todo = [pid]
    seen: set[int] = set()
    page = os.sysconf("SC_PAGE_SIZE")
    while todo:
        p = todo.pop()
        if p in seen:
            continue
        seen.add(p)
        try:
            with open(f"/proc/{p}/statm") as fh:
                total += int(fh.read().split()[1]) * page
        except (OSError, ValueError, IndexError):
            continue
        try:
            for task in os.listdir(f"/proc/{p}/task"):
                with open(f"/proc/{p}/task/{task}/children") as fh:
                    todo.extend(int(c) for c in fh.read().split())
        except (OSError, ValueError):
            pass
    return total


def _kill_group(proc) -> None:
    """SIGKILL the child's process group (it called setsid), else the child alone."""
    if proc.pid is None:
        return
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        try:
            proc.kill()
        except (ProcessLookupError, AttributeError):
            pass
    proc.join(timeout=10)


def _gib(n: int) -> str:
    return f"{n / 1024**3:.2g} GiB" if n >= 1024**3 else f"{n / 1024**2:.0f} MiB"


def parse_in_worker(path: Path, max_bytes: int, options: AnalysisOptions, limits: Limits,
                    label: str | None = None, cancel: threading.Event | None = None) -> tuple[Trace, TraceReport]:
    """``load_trace`` + ``analyze_with_collectives`` of ``path`` in a child process (``label``: the
    trace's ``path`` in the result, instead of the temporary file's).

    Raises :class:`WorkerError` (one line, no file name) when the child reports an
    analyzer error, passes a limit, dies, or ``cancel`` is set (the child is killed).
    """
    ctx = _context()
    recv, send = ctx.Pipe(duplex=False)
    proc = ctx.Process(target=_child, args=(str(path), max_bytes, options, label, send), daemon=True,
                       name="launchgap-parse")
    proc.start()
    send.close()
    t0 = time.monotonic()
    peak = 0
    try:
        while True:
            if recv.poll(POLL_S):
                try:
                    msg = recv.recv_bytes()
                except EOFError:
                    msg = None
                break
            rss = tree_rss_bytes(proc.pid)
            peak = max(peak, rss)
            if rss > limits.max_rss_bytes:
                _kill_group(proc)
                raise WorkerError(f"refused: parsing it took more than {_gib(limits.max_rss_bytes)} of memory "
                                  f"(the dashboard's per-upload limit); analyse it with `launchgap analyze`")
            if time.monotonic() - t0 > limits.timeout_s:
                _kill_group(proc)
                raise WorkerError(f"refused: parsing it took longer than {limits.timeout_s:g} s (the dashboard's "
                                  "per-upload limit); analyse it with `launchgap analyze`")
            if cancel is not None and cancel.is_set():
                _kill_group(proc)
                raise WorkerError("cancelled")
            if not proc.is_alive() and not recv.poll(0):
                msg = None
                break
        if msg is None:
            proc.join(timeout=10)
            code = proc.exitcode
            how = f"signal {-code}" if code is not None and code < 0 else f"exit code {code}"
            raise WorkerError(f"the parsing process died ({how}); it may have run out of memory")
        kind, body = msg[:2], msg[2:]
        if kind == b"er":
            raise WorkerError(body.decode(errors="replace"))
        return pickle.loads(body)
    finally:
        recv.close()
        if proc.is_alive():
            _kill_group(proc)
        else:
            proc.join(timeout=10)
        log.debug("parse worker for %s: peak tree RSS %d bytes", path.name, peak)
