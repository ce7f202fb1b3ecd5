"""Uploads streamed straight into a private file, instead of through Streamlit's in-memory store.

Why: Streamlit's own upload route (``PUT /_stcore/upload_file/{session}/{file}``) parses the
multipart body into a spooled temporary file (on disk past 1 MB by default), reads it back
into one ``bytes`` and keeps that in the server's memory; the Traces page then wrote those
bytes out again for the parse child. For a 405 MB trace that cost about 2.5 s on top of the
browser's own send (measured in ``docs/performance.md``).

:class:`StagedUploadMiddleware` (an ASGI middleware the dashboard's ``st.App`` runs in
front of Streamlit) takes that route's PUTs over, once Streamlit itself has accepted them:

1. it first calls Streamlit's own handler with the same URL, headers and cookies but an
   empty file. Streamlit checks the XSRF token and the session exactly as for any upload
   and, when it accepts (204), registers an empty file under that id; its answer is held.
   On any other answer, or a declared size over ``server.maxUploadSize``, the real request
   goes to Streamlit's handler untouched, so every refusal is Streamlit's own;
2. it streams the body through a multipart parser into a file in RAM-backed ``/dev/shm``
   (or the temporary folder when that lacks room), hashing it (SHA-256) as it goes,
   capped at ``server.maxUploadSize``;
3. it re-registers the file with Streamlit under its real name and type, still empty, and
   records the staged file in this module's registry under (session id, file id); then it
   sends Streamlit's 204.

The page that reads the upload asks :func:`take` for the staged file (its path, size and
hash): with one, it parses the file in place; without one (the middleware is not running,
e.g. under Streamlit's AppTest or ``streamlit run app/main.py``), it reads Streamlit's bytes
as before. A staged file belongs to whoever took it. One never taken is deleted when the
browser removes it from the uploader; each new upload sweeps those whose session is gone or
that waited past :data:`ORPHAN_TTL_S`; a killed server's go when the next server starts.
"""
from __future__ import annotations

import atexit
import hashlib
import logging
import os
import re
import shutil
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from launchgap.dashboard.worker import process_alive

log = logging.getLogger("launchgap.app")

#: A staged file nobody took (its page never ran) is deleted after this many seconds.
ORPHAN_TTL_S = 3600.0
#: Streamlit's own allowance for multipart framing over ``server.maxUploadSize``.
FRAMING_BYTES = 64 * 1024
_ROUTE = re.compile(r"/_stcore/upload_file/([^/]+)/([^/]+)/?$")
_EMPTY_BOUNDARY = b"launchgap-staged-upload"
_EMPTY_BODY = (b"--" + _EMPTY_BOUNDARY + b"\r\nContent-Disposition: form-data; name=\"file\"; "
               b"filename=\"upload\"\r\nContent-Type: application/octet-stream\r\n\r\n\r\n--"
               + _EMPTY_BOUNDARY + b"--\r\n")


@dataclass(frozen=True)
class StagedUpload:
    """One uploaded file, whole, in a private file (``path``), with its size and SHA-256 (hex)."""

    path: Path
    name: str
    size_bytes: int
    sha256: str
    staged_at: float


class _Registry:
    """Staged files by (session id, file id); thread-safe (the event loop adds, script threads take)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._items: dict[tuple[str, str], StagedUpload] = {}

    def put(self, session_id: str, file_id: str, staged: StagedUpload) -> None:
        with self._lock:
            old = self._items.pop((session_id, file_id), None)
            self._items[(session_id, file_id)] = staged
        if old is not None:
            discard_file(old.path)

    def take(self, session_id: str, file_id: str) -> StagedUpload | None:
        with self._lock:
            return self._items.pop((session_id, file_id), None)

    def discard(self, session_id: str, file_id: str) -> None:
        staged = self.take(session_id, file_id)
        if staged is not None:
            discard_file(staged.path)

    def sweep(self, is_active_session, now: float | None = None, ttl_s: float = ORPHAN_TTL_S) -> int:
        """Delete staged files whose session is gone or that waited past ``ttl_s``; returns how many."""
        now = time.time() if now is None else now
        with self._lock:
            gone = [k for k, s in self._items.items() if now - s.staged_at > ttl_s or not is_active_session(k[0])]
            dropped = [self._items.pop(k) for k in gone]
        for s in dropped:
            discard_file(s.path)
        return len(dropped)

    def __len__(self) -> int:
        with self._lock:
            return len(self._items)


REGISTRY = _Registry()


def discard_file(path: str | Path) -> None:
    """Delete a file that may already be gone."""
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass


def staging_dir(size_bytes: int) -> str | None:
    """RAM-backed ``/dev/shm`` when it is writable and has room for ``size_bytes`` (plus a quarter
    to spare; a container's default /dev/shm is 64 MB), else the system's temporary folder."""
    shm = "/dev/shm"
    try:
        if os.path.isdir(shm) and os.access(shm, os.W_OK | os.X_OK):
            st = os.statvfs(shm)
            if st.f_bavail * st.f_frsize >= size_bytes * 1.25:
                return shm
    except OSError:
        pass
    return None


_SERVER_DIR_PREFIX = "launchgap-uploads-"


def server_dir(base: str | None) -> str:
    """This server's own folder under ``base`` (the system's temporary folder when None), made on
    first use. Per server, so a server that was killed leaves its files in one place, which the
    next server to start removes (:func:`remove_dead_servers_files`)."""
    path = os.path.join(base or tempfile.gettempdir(), f"{_SERVER_DIR_PREFIX}{os.getpid()}")
    if not os.path.isdir(path):
        os.makedirs(path, mode=0o700, exist_ok=True)
        atexit.register(shutil.rmtree, path, True)  # a server that stops cleanly leaves nothing
    return path


def remove_dead_servers_files(bases: tuple[str | None, ...] = ("/dev/shm", None)) -> int:
    """Delete the upload folders of servers no longer running (their process is gone); returns how many.
    A staged file lives in RAM when under /dev/shm, so a killed server's must not stay until reboot."""
    removed = 0
    for base in bases:
        root = base or tempfile.gettempdir()
        try:
            names = os.listdir(root)
        except OSError:
            continue
        for name in names:
            pid = name[len(_SERVER_DIR_PREFIX):]
            if not name.startswith(_SERVER_DIR_PREFIX) or not pid.isdigit() or process_alive(int(pid)):
                continue
            shutil.rmtree(os.path.join(root, name), ignore_errors=True)
            removed += 1
    return removed


def take(file) -> StagedUpload | None:
    """The staged file behind an ``UploadedFile`` of this script run's session, handed to the caller
    (who deletes it), or None when it was not staged (then its bytes are in ``file.getvalue()``)."""
    from streamlit.runtime.scriptrunner import get_script_run_ctx

    ctx = get_script_run_ctx()
    if ctx is None:
        return None
    return REGISTRY.take(ctx.session_id, file.file_id)


def release(file) -> None:
    """Drop Streamlit's record of an uploaded file once it is parsed. Staged, the record is empty;
    otherwise it holds the file's bytes (a 400 MB upload would stay in the server's memory for the
    session's life). The uploader still lists the file, as Streamlit does itself for chat uploads."""
    from streamlit.runtime.memory_uploaded_file_manager import MemoryUploadedFileManager
    from streamlit.runtime.scriptrunner import get_script_run_ctx

    ctx = get_script_run_ctx()
    if ctx is not None and isinstance(ctx.uploaded_file_mgr, MemoryUploadedFileManager):
        ctx.uploaded_file_mgr.remove_file(session_id=ctx.session_id, file_id=file.file_id)


class UploadTooLarge(Exception):
    """An upload over a page's own cap; ``size_bytes`` is its size."""

    def __init__(self, size_bytes: int) -> None:
        super().__init__(size_bytes)
        self.size_bytes = size_bytes


def read_bytes(file, max_bytes: int) -> bytes:
    """An uploaded file's bytes, staged or not, for the small files the Plan and Fleet pages read.
    Raises :class:`UploadTooLarge` past ``max_bytes`` (a staged file is deleted either way)."""
    staged = take(file)
    if staged is None:
        if file.size > max_bytes:
            raise UploadTooLarge(file.size)
        return file.getvalue()
    try:
        if staged.size_bytes > max_bytes:
            raise UploadTooLarge(staged.size_bytes)
        return staged.path.read_bytes()
    finally:
        discard_file(staged.path)


class UploadRefused(Exception):
    def __init__(self, status: int, reason: str) -> None:
        super().__init__(reason)
        self.status = status
        self.reason = reason


class _PartWriter:
    """Multipart callbacks: the one file part's bytes to ``fd`` (and the hash), its headers kept."""

    def __init__(self, fd: int, max_bytes: int) -> None:
        self.fd = fd
        self.max_bytes = max_bytes
        self.hash = hashlib.sha256()
        self.size = 0
        self.files = 0
        self.headers: dict[bytes, bytes] = {}
        self._field = bytearray()
        self._value = bytearray()
        self._writing = False
        self.ended = False  # the closing boundary was read
        self.filename: str | None = None
        self.content_type = "application/octet-stream"

    def callbacks(self) -> dict:
        return {"on_part_begin": self._part_begin, "on_header_field": self._header_field,
                "on_header_value": self._header_value, "on_header_end": self._header_end,
                "on_headers_finished": self._headers_finished, "on_part_data": self._data,
                "on_part_end": self._part_end, "on_end": self._end}

    def _part_begin(self) -> None:
        self.headers = {}

    def _header_field(self, data: bytes, start: int, end: int) -> None:
        self._field += data[start:end]

    def _header_value(self, data: bytes, start: int, end: int) -> None:
        self._value += data[start:end]

    def _header_end(self) -> None:
        self.headers[bytes(self._field).lower()] = bytes(self._value)
        self._field.clear()
        self._value.clear()

    def _headers_finished(self) -> None:
        from python_multipart.multipart import parse_options_header

        _, params = parse_options_header(self.headers.get(b"content-disposition", b""))
        if b"filename" not in params:
            self._writing = False  # a plain form field: Streamlit sends none, and none is kept
            return
        self.files += 1
        if self.files > 1:
            raise UploadRefused(400, f"Expected 1 file, but got {self.files}")
        self.filename = params[b"filename"].decode("utf-8", "replace")
        ctype = self.headers.get(b"content-type", b"").decode("latin-1").strip()
        self.content_type = ctype or "application/octet-stream"
        self._writing = True

    def _data(self, data: bytes, start: int, end: int) -> None:
        if not self._writing or end <= start:
            return
        self.size += end - start
        if self.size > self.max_bytes:
            raise UploadRefused(413, "File too large")
        view = memoryview(data)[start:end]
        self.hash.update(view)
        while view:
            view = view[os.write(self.fd, view):]

    def _part_end(self) -> None:
        self._writing = False

    def _end(self) -> None:
        self.ended = True


class StreamlitServer:
    """What the middleware asks of the running Streamlit server (tests pass their own)."""

    def upload_manager(self):
        from streamlit.runtime import Runtime

        return Runtime.instance().uploaded_file_mgr

    def is_active_session(self, session_id: str) -> bool:
        from streamlit.runtime import Runtime

        return Runtime.instance().is_active_session(session_id)

    def max_upload_bytes(self) -> int:
        import streamlit as st

        return int(st.get_option("server.maxUploadSize")) * 1024 * 1024


class StagedUploadMiddleware:
    """ASGI middleware: Streamlit's upload PUTs streamed to a private file (see the module's text)."""

    def __init__(self, app, server: StreamlitServer | None = None, registry: _Registry | None = None) -> None:
        self.app = app
        self.server = server or StreamlitServer()
        self.registry = REGISTRY if registry is None else registry
        remove_dead_servers_files()

    async def __call__(self, scope, receive, send) -> None:
        if scope.get("type") != "http":
            await self.app(scope, receive, send)
            return
        m = _ROUTE.search(scope.get("path", ""))
        if m is None:
            await self.app(scope, receive, send)
            return
        session_id, file_id = m.group(1), m.group(2)
        if scope.get("method") == "DELETE":
            self.registry.discard(session_id, file_id)
            await self.app(scope, receive, send)
            return
        boundary = _boundary(scope) if scope.get("method") == "PUT" else None
        if boundary is None:
            await self.app(scope, receive, send)
            return
        answer = await _ask_streamlit(self.app, scope, self.server.max_upload_bytes())
        if answer is None:  # Streamlit refused (or its handler changed): let it handle the real request
            await self.app(scope, receive, send)
            return
        await self._stage(scope, receive, send, session_id, file_id, boundary, answer)

    async def _stage(self, scope, receive, send, session_id: str, file_id: str, boundary: bytes,
                     answer: list[dict]) -> None:
        from python_multipart.multipart import MultipartParser
        from streamlit.runtime.uploaded_file_manager import UploadedFileRec

        mgr = self.server.upload_manager()
        self.registry.sweep(self.server.is_active_session)
        max_bytes = self.server.max_upload_bytes()
        declared = _content_length(scope) or max_bytes
        try:
            fd, tmp = tempfile.mkstemp(prefix="upload-", dir=server_dir(staging_dir(declared)))
        except OSError as exc:
            mgr.remove_file(session_id=session_id, file_id=file_id)
            await _send_text(send, 507, f"cannot store the upload: {exc.strerror or exc}")
            return
        staged = None
        try:
            writer = _PartWriter(fd, max_bytes)
            # No max_size here: past it python-multipart drops the rest silently; the cap is ours.
            parser = MultipartParser(boundary, writer.callbacks())
            received = 0
            while True:
                msg = await receive()
                if msg["type"] == "http.disconnect":
                    raise UploadRefused(400, "the browser closed the upload")
                body = msg.get("body", b"")
                received += len(body)
                if received > max_bytes + FRAMING_BYTES:
                    raise UploadRefused(413, "File too large")
                if body:
                    try:
                        parser.write(body)
                    except UploadRefused:
                        raise
                    except Exception as exc:  # noqa: BLE001 - python-multipart's parse errors
                        raise UploadRefused(400, f"bad upload body: {exc}") from None
                if not msg.get("more_body", False):
                    break
            if not writer.ended:  # finalize() does not check it
                raise UploadRefused(400, "bad upload body: it ends before its closing boundary")
            if writer.filename is None:
                raise UploadRefused(400, "Expected 1 file, but got 0")
            staged = StagedUpload(path=Path(tmp), name=writer.filename, size_bytes=writer.size,
                                  sha256=writer.hash.hexdigest(), staged_at=time.time())
        except UploadRefused as exc:
            log.warning("upload refused (%d): %s", exc.status, exc.reason)
            mgr.remove_file(session_id=session_id, file_id=file_id)
            await _send_text(send, exc.status, exc.reason)
            return
        except OSError as exc:  # the staging folder filled up
            log.warning("upload not stored: %s", exc)
            mgr.remove_file(session_id=session_id, file_id=file_id)
            await _send_text(send, 507, f"cannot store the upload: {exc.strerror or exc}")
            return
        finally:
            os.close(fd)
            if staged is None:
                discard_file(tmp)
        mgr.add_file(session_id=session_id, file=UploadedFileRec(
            file_id=file_id, name=staged.name, type=writer.content_type, data=b""))
        self.registry.put(session_id, file_id, staged)
        for msg in answer:
            await send(msg)


def _header(scope, name: bytes) -> bytes | None:
    for k, v in scope.get("headers", ()):
        if k.lower() == name:
            return v
    return None


def _boundary(scope) -> bytes | None:
    from python_multipart.multipart import parse_options_header

    ctype, params = parse_options_header(_header(scope, b"content-type") or b"")
    if ctype != b"multipart/form-data" or not params.get(b"boundary"):
        return None
    return params[b"boundary"]


def _content_length(scope) -> int | None:
    raw = _header(scope, b"content-length")
    try:
        return int(raw) if raw is not None else None
    except ValueError:
        return None


async def _ask_streamlit(app, scope, max_upload_bytes: int) -> list[dict] | None:
    """Streamlit's answer to this PUT with an empty file (its checks, its headers); None unless 204."""
    headers = [(k, v) for k, v in scope.get("headers", ()) if k.lower() not in (b"content-type", b"content-length")]
    headers += [(b"content-type", b"multipart/form-data; boundary=" + _EMPTY_BOUNDARY),
                (b"content-length", str(len(_EMPTY_BODY)).encode())]
    probe = dict(scope, headers=headers)
    declared = _content_length(scope)
    if declared is not None and declared > max_upload_bytes + FRAMING_BYTES:
        return None  # Streamlit answers 413 from the real headers
    sent = False

    async def receive() -> dict:
        nonlocal sent
        if sent:
            return {"type": "http.disconnect"}
        sent = True
        return {"type": "http.request", "body": _EMPTY_BODY, "more_body": False}

    answer: list[dict] = []

    async def collect(msg: dict) -> None:
        answer.append(msg)

    await app(probe, receive, collect)
    if not answer or answer[0].get("type") != "http.response.start" or answer[0].get("status") != 204:
        return None
    return answer


async def _send_text(send, status: int, text: str) -> None:
    body = text.encode()
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"text/plain; charset=utf-8"),
                            (b"content-length", str(len(body)).encode())]})
    await send({"type": "http.response.body", "body": body})
