"""Parse and analyse an uploaded trace in a child process, with a memory and a time limit.

Why a process: the dashboard server is one Python process. A parse there shares the GIL
with the server's event loop and every other session's script thread, and a file that
inflates to gigabytes (a decompression bomb) would grow the server itself until the
kernel kills it, and every session with it. A child parses the upload instead: the
server keeps its GIL and its memory; the child runs in its own process group, and a
watchdog in the calling (script) thread kills that group when the tree's resident memory
passes ``max_rss_bytes`` or the wall time passes ``timeout_s``. Nothing here holds a lock
shared between sessions while a file parses; each upload gets its own child.

Children are forked by a small *zygote*: ``python -m launchgap.dashboard.worker``, started once per server
(:func:`warm_up`), which imports the analyzer once and then forks one child per request
(single-threaded, so forking it is safe; the server itself, with its threads, never
forks). A child starts in milliseconds with the analyzer loaded, instead of the seconds
a fresh interpreter takes to import it on a busy two-core box. (``multiprocessing``'s
forkserver would re-run the Streamlit script in each child: Streamlit makes the page
script the ``__main__`` module while it runs.) The child writes its result, the pickled
:class:`~launchgap.trace.Trace` and :class:`~launchgap.report.TraceReport` or a one-line
error, to a file in the request's folder and exits.

Protocol on the zygote's stdin/stdout: 8-byte big-endian length + pickle, both ways; a
request is ``(path, max_bytes, options, label, result_path, timeout_s)``, the reply the child's
pid. A child dies with the zygote (``PR_SET_PDEATHSIG``) and by ``SIGALRM`` 5 s after its
time limit, should the server's watchdog be gone.
"""
from __future__ import annotations

import dataclasses
import logging
import os
import pickle
import signal
import struct
import subprocess
import sys
import threading
import time
import traceback
from dataclasses import dataclass
from pathlib import Path

from launchgap.errors import AnalyzerError
from launchgap.report import AnalysisOptions, TraceReport
from launchgap.trace import Trace
from launchgap.dashboard.timing import stage

log = logging.getLogger("launchgap.app")

#: How often the watchdog looks at the child's memory and result, seconds.
POLL_S = 0.05
#: Exit code of a child that wrote its result.
_DONE = 0
_REPO = Path(__file__).resolve().parents[1]


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


def _one_line(text: str) -> str:
    return " ".join(str(text).split())


# --- in the child ------------------------------------------------------------------------------

def _write_result(result_path: str, path: str, max_bytes: int, options: AnalysisOptions, label: str | None) -> None:
    """Write b"ok" + pickle of (trace, report), or b"er" + one line, to ``result_path`` (whole or not at all)."""
    tmp = result_path + ".part"
    try:
        from launchgap.loaders import load_trace
        from launchgap.ranks import analyze_for_plan

        with stage("worker.load_trace"):
            trace = load_trace(path, max_bytes)
        if label is not None:  # the name the result is known by (not the temporary file's)
            trace = dataclasses.replace(trace, path=label)
        with stage("worker.analyze"):
            report = analyze_for_plan(trace, options)[0]  # of a file of several ranks: the rank a plan reads
        with stage("worker.write_result"), open(tmp, "wb") as fh:
            fh.write(b"ok")
            pickle.dump((trace, report), fh, protocol=pickle.HIGHEST_PROTOCOL)
    except AnalyzerError as exc:
        body = b"er" + _one_line(exc.message).encode()
    except MemoryError:
        body = b"er" + b"out of memory while parsing; split the trace or lower the trace size cap"
    except Exception as exc:  # noqa: BLE001 - one line to the user, the traceback to the server's log
        traceback.print_exc()
        body = b"er" + f"internal error while analysing this file ({type(exc).__name__}); please report it".encode()
    else:
        body = None
    if body is not None:
        with open(tmp, "wb") as fh:
            fh.write(body)
    os.rename(tmp, result_path)


def _die_with_parent() -> None:
    """Linux: SIGKILL this process when the zygote goes (the server stopped), so no parse outlives it."""
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def _child(request: tuple) -> None:
    path, max_bytes, options, label, result_path, timeout_s = request
    os.setsid()  # its own process group: the watchdog kills the group, helpers included
    _die_with_parent()
    if timeout_s:
        signal.alarm(int(timeout_s) + 5)  # a backstop should the watchdog's thread be gone
    # stdin/stdout are the zygote's protocol pipes: keep them clean of anything the child prints.
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.dup2(2, 1)
    _write_result(result_path, path, max_bytes, options, label)


def _read_msg(fh) -> object | None:
    head = fh.read(8)
    if len(head) < 8:
        return None
    (n,) = struct.unpack(">Q", head)
    return pickle.loads(fh.read(n))


def _write_msg(fh, obj: object) -> None:
    data = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
    fh.write(struct.pack(">Q", len(data)) + data)
    fh.flush()


def zygote_main() -> int:
    """The zygote's loop: import the analyzer once, fork one child per request, reply its pid."""
    import launchgap.loaders  # noqa: F401 - loaded once here, inherited by every child
    import launchgap.loaders.kineto  # noqa: F401
    import launchgap.loaders.nsys  # noqa: F401
    import launchgap.ranks  # noqa: F401

    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # children are reaped by the kernel
    rfh, wfh = sys.stdin.buffer, sys.stdout.buffer
    while True:
        req = _read_msg(rfh)
        if req is None:  # the server went away
            return 0
        pid = os.fork()
        if pid == 0:
            code = 1
            try:
                signal.signal(signal.SIGCHLD, signal.SIG_DFL)
                _child(req)
                code = _DONE
            except BaseException:  # noqa: BLE001 - a child never returns into the zygote's loop
                traceback.print_exc()
            finally:
                os._exit(code)
        _write_msg(wfh, pid)


# --- in the server -----------------------------------------------------------------------------

_lock = threading.Lock()  # held only to send one request and read its pid, never during a parse
_zygote: subprocess.Popen | None = None


def _zygote_proc() -> subprocess.Popen:
    global _zygote
    if _zygote is None or _zygote.poll() is not None:
        env = dict(os.environ, OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
        env["PYTHONPATH"] = str(_REPO) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
        _zygote = subprocess.Popen([sys.executable, "-m", "launchgap.dashboard.worker"], stdin=subprocess.PIPE,
                                   stdout=subprocess.PIPE, cwd=str(_REPO), env=env)
    return _zygote


def warm_up() -> None:
    """Start the zygote now (it imports the analyzer once), so the first upload does not wait for it."""
    with _lock:
        _zygote_proc()


def _start_child(request: tuple) -> int:
    with _lock:
        for attempt in (1, 2):  # a zygote that died is restarted once
            z = _zygote_proc()
            try:
                _write_msg(z.stdin, request)
                pid = _read_msg(z.stdout)
            except (BrokenPipeError, OSError):
                pid = None
            if isinstance(pid, int):
                return pid
            z.kill()
            z.wait(timeout=10)
        raise WorkerError("could not start the parsing process")


def process_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return True


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


def _kill_group(pid: int) -> None:
    """SIGKILL the child's process group (it called setsid first), else the child alone."""
    for kill in (os.killpg, os.kill):
        try:
            kill(pid, signal.SIGKILL)
            return
        except (ProcessLookupError, PermissionError):
            continue


def _gib(n: float) -> str:
    return f"{n / 1024**3:.2g} GiB" if n >= 1024**3 else f"{n / 1024**2:.0f} MiB"


class ParseJob:
    """One upload's parse in a child process, started at once; :meth:`result` watches and collects it.

    ``label``: the trace's ``path`` in the result, instead of the temporary file's. The result
    file goes beside ``path``; it is deleted by :meth:`result` and :meth:`cancel`.
    """

    def __init__(self, path: Path, max_bytes: int, options: AnalysisOptions, label: str | None = None,
                 timeout_s: float | None = None) -> None:
        self.result_path = Path(f"{path}.result")
        self.t0 = time.monotonic()
        self.pid = _start_child((str(path), max_bytes, options, label, str(self.result_path), timeout_s))
        self._finished = False  # after result(): the pid may be reused, never signal it again

    def _cleanup(self) -> None:
        if process_alive(self.pid) and not self.result_path.exists():
            _kill_group(self.pid)
        for p in (self.result_path, Path(f"{self.result_path}.part")):
            try:
                p.unlink()
            except FileNotFoundError:
                pass

    def cancel(self) -> None:
        """Kill the child (if still running) and delete what it wrote; a no-op after :meth:`result`."""
        if self._finished:
            return
        self._finished = True
        _kill_group(self.pid)
        self._cleanup()

    def result(self, limits: Limits) -> tuple[Trace, TraceReport]:
        """Wait for the child under ``limits`` (counted from the start). Raises :class:`WorkerError`
        (one line, no file name) when the child reports an analyzer error, passes a limit, or dies."""
        result = self.result_path
        try:
            while not result.exists():
                if not process_alive(self.pid):
                    if result.exists():
                        break
                    raise WorkerError("the parsing process died; it may have run out of memory")
                if tree_rss_bytes(self.pid) > limits.max_rss_bytes:
                    _kill_group(self.pid)
                    raise WorkerError(f"refused: parsing it took more than {_gib(limits.max_rss_bytes)} of memory "
                                      "(the dashboard's per-upload limit); analyse it with `launchgap analyze`")
                if time.monotonic() - self.t0 > limits.timeout_s:
                    _kill_group(self.pid)
                    raise WorkerError(f"refused: parsing it took longer than {limits.timeout_s:g} s (the "
                                      "dashboard's per-upload limit); analyse it with `launchgap analyze`")
                time.sleep(POLL_S)
            with stage("worker.read_result"), open(result, "rb") as fh:
                kind = fh.read(2)
                value = pickle.load(fh) if kind == b"ok" else fh.read().decode(errors="replace")
        finally:
            self._cleanup()
            self._finished = True
        if kind != b"ok":
            raise WorkerError(value)
        return value


def parse_in_worker(path: Path, max_bytes: int, options: AnalysisOptions, limits: Limits,
                    label: str | None = None) -> tuple[Trace, TraceReport]:
    """``load_trace`` + ``analyze_for_plan`` of ``path`` in a child process (:class:`ParseJob`)."""
    return ParseJob(path, max_bytes, options, label, limits.timeout_s).result(limits)


if __name__ == "__main__":
    sys.exit(zygote_main())
