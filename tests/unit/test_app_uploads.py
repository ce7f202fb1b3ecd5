"""Uploads streamed to a private file by the dashboard's ASGI middleware (app.uploads).

The middleware is driven here through ASGI calls, in front of a stand-in for Streamlit's
upload route that answers as Streamlit does (204 when the XSRF header is right, 403 when
not) and records every body it is given; the upload manager is Streamlit's own class.
The real server and Chromium take the same path in tests/e2e/test_browser_upload.py.
"""
from __future__ import annotations

import asyncio
import hashlib
import os
from pathlib import Path

import pytest

pytest.importorskip("streamlit")
pytest.importorskip("python_multipart")

from streamlit.runtime.memory_uploaded_file_manager import MemoryUploadedFileManager  # noqa: E402

from launchgap.dashboard import uploads  # noqa: E402
from launchgap.dashboard.uploads import StagedUploadMiddleware, _Registry  # noqa: E402

BOUNDARY = b"----WebKitFormBoundaryabc123"
PATH = "/_stcore/upload_file/sess-1/file-1"


def multipart(parts: list[tuple[str | None, bytes]], ctype: bytes = b"application/json") -> bytes:
    """A multipart/form-data body; ``(filename, data)`` per part (None: a plain field)."""
    out = b""
    for filename, data in parts:
        disp = b'form-data; name="file"' + (f'; filename="{filename}"'.encode() if filename is not None else b"")
        out += b"--" + BOUNDARY + b"\r\nContent-Disposition: " + disp + b"\r\n"
        if filename is not None:
            out += b"Content-Type: " + ctype + b"\r\n"
        out += b"\r\n" + data + b"\r\n"
    return out + b"--" + BOUNDARY + b"--\r\n"


class FakeStreamlit:
    """Streamlit's upload route as the middleware sees it: checks the XSRF header, reads the whole
    body, registers what it read (as Streamlit would), answers 204 with its CORS headers."""

    def __init__(self, mgr: MemoryUploadedFileManager, max_body_bytes: int) -> None:
        self.mgr = mgr
        self.max_body_bytes = max_body_bytes
        self.bodies: list[bytes] = []
        self.calls = 0

    async def __call__(self, scope, receive, send) -> None:
        self.calls += 1
        body = b""
        while True:
            msg = await receive()
            body += msg.get("body", b"")
            if not msg.get("more_body", False):
                break
        self.bodies.append(body)
        headers = dict(scope["headers"])
        if int(headers.get(b"content-length", b"0")) > self.max_body_bytes:
            await send({"type": "http.response.start", "status": 413, "headers": []})
            await send({"type": "http.response.body", "body": b"File too large"})
            return
        if headers.get(b"x-xsrftoken") != b"ok":
            await send({"type": "http.response.start", "status": 403, "headers": []})
            await send({"type": "http.response.body", "body": b"XSRF token missing or invalid"})
            return
        if scope["method"] == "PUT":
            from streamlit.runtime.uploaded_file_manager import UploadedFileRec

            fid = scope["path"].rsplit("/", 1)[1]
            self.mgr.add_file("sess-1", UploadedFileRec(fid, "from-streamlit", "application/octet-stream", body))
        await send({"type": "http.response.start", "status": 204,
                    "headers": [(b"access-control-allow-methods", b"PUT, OPTIONS, DELETE")]})
        await send({"type": "http.response.body", "body": b""})


class FakeServer(uploads.StreamlitServer):
    def __init__(self, mgr, max_bytes: int = 1 << 20, active: tuple[str, ...] = ("sess-1",)) -> None:
        self.mgr, self.max_bytes, self.active = mgr, max_bytes, active

    def upload_manager(self):
        return self.mgr

    def is_active_session(self, session_id: str) -> bool:
        return session_id in self.active

    def max_upload_bytes(self) -> int:
        return self.max_bytes


def put(mw, body: bytes, chunks: int = 3, xsrf: bytes = b"ok", path: str = PATH, method: str = "PUT",
        disconnect_after: int | None = None, ctype: bytes | None = None) -> tuple[int, dict, bytes]:
    """One request through the middleware, the body in ``chunks`` pieces; (status, headers, body)."""
    step = max(1, -(-len(body) // chunks))
    pieces = [body[i:i + step] for i in range(0, len(body), step)] or [b""]
    if disconnect_after is not None:
        pieces = pieces[:disconnect_after]
    scope = {"type": "http", "method": method, "path": path, "headers": [
        (b"content-type", ctype or b"multipart/form-data; boundary=" + BOUNDARY),
        (b"content-length", str(len(body)).encode()), (b"x-xsrftoken", xsrf)]}
    queue = list(pieces)

    async def receive():
        if not queue:
            return {"type": "http.disconnect"}
        piece = queue.pop(0)
        more = bool(queue) or disconnect_after is not None
        return {"type": "http.request", "body": piece, "more_body": more}

    sent: list[dict] = []

    async def send(msg):
        sent.append(msg)

    asyncio.run(mw(scope, receive, send))
    start = next(m for m in sent if m["type"] == "http.response.start")
    out = b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")
    return start["status"], dict(start.get("headers", [])), out


@pytest.fixture
def staged_in(tmp_path, monkeypatch):
    """Staged files go to tmp_path (so each test sees exactly what it left behind)."""
    monkeypatch.setattr(uploads, "server_dir", lambda base: str(tmp_path))
    return tmp_path


def setup(max_bytes: int = 1 << 20):
    mgr = MemoryUploadedFileManager("/_stcore/upload_file")
    inner = FakeStreamlit(mgr, max_bytes + uploads.FRAMING_BYTES)
    reg = _Registry()
    return StagedUploadMiddleware(inner, FakeServer(mgr, max_bytes), reg), inner, mgr, reg


def test_accepted_upload_is_staged_whole_with_its_hash(staged_in) -> None:
    mw, inner, mgr, reg = setup()
    data = bytes(range(256)) * 1000 + b"\r\n--not-the-boundary\r\n"  # binary, with a near-boundary inside
    status, headers, _ = put(mw, multipart([("trace.json.gz", data)]), chunks=7)
    assert status == 204 and headers[b"access-control-allow-methods"] == b"PUT, OPTIONS, DELETE"
    # Streamlit saw only the empty probe, never the real body.
    assert inner.calls == 1 and b"launchgap-staged-upload" in inner.bodies[0] and data not in inner.bodies[0]
    staged = reg.take("sess-1", "file-1")
    assert staged.path.read_bytes() == data and staged.size_bytes == len(data)
    assert staged.sha256 == hashlib.sha256(data).hexdigest() and staged.name == "trace.json.gz"
    [rec] = mgr.get_files("sess-1", ["file-1"])
    assert (rec.name, rec.type, rec.data) == ("trace.json.gz", "application/json", b"")
    assert [p.name for p in staged_in.iterdir()] == [staged.path.name]


def test_refused_probe_hands_the_real_request_to_streamlit(staged_in) -> None:
    mw, inner, mgr, reg = setup()
    body = multipart([("t.json", b"{}")])
    status, _, text = put(mw, body, xsrf=b"forged")
    assert status == 403 and text == b"XSRF token missing or invalid"
    assert inner.calls == 2 and inner.bodies[1] == body  # the probe, then the real body, untouched
    assert len(reg) == 0 and not list(staged_in.iterdir()) and not mgr.get_files("sess-1", ["file-1"])


def test_over_the_upload_cap_is_413_and_leaves_nothing(staged_in) -> None:
    mw, inner, mgr, reg = setup(max_bytes=1000)
    status, _, text = put(mw, multipart([("big.json", b"x" * 1001)]), chunks=4)
    assert (status, text) == (413, b"File too large")
    assert len(reg) == 0 and not list(staged_in.iterdir()) and not mgr.get_files("sess-1", ["file-1"])
    status, _, _ = put(mw, multipart([("fits.json", b"x" * 1000)]))
    assert status == 204 and reg.take("sess-1", "file-1").size_bytes == 1000


def test_declared_over_the_cap_is_streamlits_413(staged_in) -> None:
    mw, inner, mgr, reg = setup(max_bytes=10)
    body = multipart([("big.json", b"z" * (uploads.FRAMING_BYTES + 100))])
    status, _, text = put(mw, body)
    assert (status, text) == (413, b"File too large")
    assert inner.calls == 1 and inner.bodies == [body]  # no probe: Streamlit refused the real headers itself
    assert len(reg) == 0 and not list(staged_in.iterdir())


def test_two_files_or_none_are_400(staged_in) -> None:
    mw, inner, mgr, reg = setup()
    status, _, text = put(mw, multipart([("a.json", b"1"), ("b.json", b"2")]))
    assert (status, text) == (400, b"Expected 1 file, but got 2")
    status, _, text = put(mw, multipart([(None, b"just a field")]))
    assert (status, text) == (400, b"Expected 1 file, but got 0")
    assert len(reg) == 0 and not list(staged_in.iterdir()) and not mgr.get_files("sess-1", ["file-1"])


def test_broken_body_and_disconnect_leave_nothing(staged_in) -> None:
    mw, inner, mgr, reg = setup()
    status, _, text = put(mw, b"--wrong-boundary\r\n\r\nxx", chunks=1)
    assert status == 400 and text.startswith(b"bad upload body")
    cut = multipart([("t.json", b"y" * 5000)])
    status, _, text = put(mw, cut[:-len(BOUNDARY) - 8], chunks=2)  # complete per its length, no closing boundary
    assert (status, text) == (400, b"bad upload body: it ends before its closing boundary")
    status, _, text = put(mw, cut, chunks=5, disconnect_after=2)
    assert (status, text) == (400, b"the browser closed the upload")
    assert len(reg) == 0 and not list(staged_in.iterdir())


def test_other_requests_pass_through_untouched(staged_in) -> None:
    mw, inner, mgr, reg = setup()
    body = b'{"plain": "json"}'
    status, _, _ = put(mw, body, ctype=b"application/json")  # not multipart: Streamlit's to handle
    assert status == 204 and inner.bodies == [body]
    status, _, _ = put(mw, multipart([("t.json", b"{}")]), path="/api/elsewhere")
    assert status == 204 and len(inner.bodies) == 2 and len(reg) == 0


def test_delete_from_the_uploader_discards_the_staged_file(staged_in) -> None:
    mw, inner, mgr, reg = setup()
    put(mw, multipart([("t.json", b"{}")]))
    assert len(reg) == 1 and len(list(staged_in.iterdir())) == 1
    status, _, _ = put(mw, b"", method="DELETE", ctype=b"text/plain")
    assert status == 204 and len(reg) == 0 and not list(staged_in.iterdir())


def test_sweep_drops_files_of_gone_sessions_and_old_ones(tmp_path) -> None:
    reg = _Registry()
    for sid, fid, at in (("live", "a", 1000.0), ("gone", "b", 1000.0), ("live", "c", 1000.0 - 4000)):
        p = tmp_path / f"{sid}-{fid}"
        p.write_bytes(b"x")
        reg.put(sid, fid, uploads.StagedUpload(p, fid, 1, "0" * 64, at))
    assert reg.sweep(lambda sid: sid == "live", now=1000.0 + 10, ttl_s=3600) == 2
    assert sorted(p.name for p in tmp_path.iterdir()) == ["live-a"] and reg.take("live", "a") is not None


def test_staging_dir_needs_room_in_dev_shm(monkeypatch) -> None:
    class Vfs:
        f_frsize = 4096
        f_bavail = 1000  # 4,096,000 bytes free

    monkeypatch.setattr(os, "statvfs", lambda path: Vfs())
    monkeypatch.setattr(os.path, "isdir", lambda path: True)
    monkeypatch.setattr(os, "access", lambda path, mode: True)
    assert uploads.staging_dir(3_000_000) == "/dev/shm"  # 3.75 MB with a quarter to spare: fits
    assert uploads.staging_dir(3_500_000) is None  # does not: the system's temporary folder


def test_folders_of_dead_servers_are_removed(tmp_path) -> None:
    import subprocess
    import sys

    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    for pid in (dead.pid, os.getpid()):
        d = tmp_path / f"launchgap-uploads-{pid}"
        d.mkdir()
        (d / "upload-x").write_bytes(b"staged")
    (tmp_path / "launchgap-uploads-notapid").mkdir()
    assert uploads.remove_dead_servers_files((str(tmp_path),)) == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == [f"launchgap-uploads-{os.getpid()}",
                                                          "launchgap-uploads-notapid"]
    mine = uploads.server_dir(str(tmp_path))
    assert mine == str(tmp_path / f"launchgap-uploads-{os.getpid()}") and (Path(mine) / "upload-x").exists()


def test_read_bytes_caps_and_deletes_the_staged_file(tmp_path, monkeypatch) -> None:
    class File:
        file_id, size = "f", 0

        def getvalue(self):
            return b""

    for data, cap in ((b"small", 10), (b"x" * 11, 10)):
        p = tmp_path / "staged"
        p.write_bytes(data)
        monkeypatch.setattr(uploads, "take", lambda f, p=p, data=data: uploads.StagedUpload(p, "n", len(data), "", 0))
        if len(data) <= cap:
            assert uploads.read_bytes(File(), cap) == data
        else:
            with pytest.raises(uploads.UploadTooLarge) as exc:
                uploads.read_bytes(File(), cap)
            assert exc.value.size_bytes == 11
        assert not p.exists()


def test_without_the_middleware_the_bytes_come_from_streamlit(monkeypatch) -> None:
    class File:
        file_id, size = "f", 4

        def getvalue(self):
            return b"data"

    assert uploads.take(File()) is None  # no script run here: nothing staged
    assert uploads.read_bytes(File(), 10) == b"data"
    with pytest.raises(uploads.UploadTooLarge):
        uploads.read_bytes(File(), 3)
