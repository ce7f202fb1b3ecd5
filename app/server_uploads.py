"""Server logs and ``/metrics`` scrapes uploaded beside traces: recognised by content, read, kept in the session.

The Traces page hands every new upload to :func:`take_server_file` first; a file whose content
is a vLLM / SGLang / TensorRT-LLM log or metrics scrape, or text not named like a trace
(``launchgap.serverlogs.for_server_reader``, as the command line decides),
is read here (streamed, bounded memory) and kept as a diagnosis for the Server page, and never
goes to the trace loader. Nothing uploaded is executed or rendered as HTML.
"""
from __future__ import annotations

import tempfile
from collections.abc import MutableMapping
from dataclasses import dataclass
from pathlib import Path

from launchgap.engines import CaptureSettings
from launchgap.errors import AnalyzerError
from launchgap.planning.serverlog import stated_capture
from launchgap.serverlogs import for_server_reader, read_server_file
from launchgap.serverlogs.diagnosis import LogDiagnosis, diagnose

#: Session key: {upload name: ServerUpload}, in upload order.
SERVER_LOGS_KEY = "lg_server_logs"


@dataclass
class ServerUpload:
    name: str
    diagnosis: LogDiagnosis | None
    error: str | None = None


def server_logs(state: MutableMapping) -> dict[str, ServerUpload]:
    return state.setdefault(SERVER_LOGS_KEY, {})


def latest_stated_capture(state: MutableMapping) -> CaptureSettings | None:
    """The capture list the latest uploaded server log states (``None``: no log states one): the traces of its engine
    are analysed under it where no server config is pasted, as ``launchgap plan TRACE --server-log LOG`` does."""
    return stated_capture([up.diagnosis for up in reversed(list(server_logs(state).values()))
                           if up.diagnosis is not None])


def take_server_file(state: MutableMapping, name: str, path: Path | None, data: bytes | None) -> bool:
    """Read ``name`` as a server file when its content is one (then True: the trace loader skips it).
    ``path``: the staged file; else ``data``: its bytes (written to a private temporary file)."""
    tmp = None
    try:
        if path is None:
            tmp = tempfile.NamedTemporaryFile(prefix="lg-serverlog-", suffix="-" + Path(name).name[-40:], delete=False)
            tmp.write(data or b"")
            tmp.close()
            path = Path(tmp.name)
        if not for_server_reader(path, name):
            return False
        try:
            log = read_server_file(path)
            assert log is not None
            log.path = name  # the name the user knows, not the staging path
            server_logs(state)[name] = ServerUpload(name, diagnose(log))
        except AnalyzerError as exc:
            server_logs(state)[name] = ServerUpload(name, None, f"{name}: {exc.message}")
        return True
    finally:
        if tmp is not None:
            Path(tmp.name).unlink(missing_ok=True)
