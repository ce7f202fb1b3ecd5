"""``launchgap app``: run the Streamlit dashboard (app/main.py), headless, on 127.0.0.1 by default.

Binding to any other address exposes the dashboard, with no login, to every machine that
can reach it; that takes ``--allow-remote``. The server is started with the settings the
dashboard needs whatever the user's own Streamlit config says: uploads up to
``--max-upload-mb`` (1024 by default), no usage statistics sent anywhere, no file watcher.
"""
from __future__ import annotations

import argparse
import importlib.util
import ipaddress
import os
import socket
import subprocess
import sys
from pathlib import Path

from ..errors import InputError

NAME = "app"
HELP = "run the dashboard (Streamlit) in the browser: upload traces, see the diagnosis, plan capture"

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8501
DEFAULT_MAX_UPLOAD_MB = 1024
#: The dashboard package (the ``app/`` folder, installed as ``launchgap.dashboard``).
DASHBOARD = "launchgap.dashboard"


def main_script() -> Path:
    """The dashboard's entry script, wherever the package is installed (editable or not)."""
    spec = importlib.util.find_spec(DASHBOARD)
    if spec is None or not spec.submodule_search_locations:
        raise InputError("launchgap app: the dashboard is not installed (pip install 'launchgap[app]')")
    return Path(list(spec.submodule_search_locations)[0]) / "main.py"


def server_script() -> Path:
    """What ``streamlit run`` runs: the ``st.App`` around :func:`main_script` (``server.py`` beside it)."""
    return main_script().with_name("server.py")


def prepare_parser(p: argparse.ArgumentParser) -> None:
    p.add_argument("--port", type=int, default=DEFAULT_PORT, help=f"TCP port (default {DEFAULT_PORT})")
    p.add_argument("--host", default=DEFAULT_HOST,
                   help=f"address to bind (default {DEFAULT_HOST}; anything but loopback needs --allow-remote)")
    p.add_argument("--allow-remote", action="store_true",
                   help="allow a non-loopback --host: anyone who can reach it can use the dashboard, without login")
    p.add_argument("--max-upload-mb", type=int, default=DEFAULT_MAX_UPLOAD_MB,
                   help=f"largest file the browser may upload, MB (default {DEFAULT_MAX_UPLOAD_MB})")
    p.add_argument("--max-trace-bytes", type=int, default=None,
                   help="refuse traces that decompress past this many bytes (default 8 GiB)")
    p.add_argument("--samples-dir", default=None,
                   help="folder of sample traces to offer (default: the traces/ folder shipped with launchgap)")


def is_loopback(host: str) -> bool:
    """True when every address ``host`` names is a loopback address (127.0.0.0/8, ::1)."""
    h = host.strip().strip("[]")
    if h.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(h).is_loopback
    except ValueError:
        pass
    try:
        infos = socket.getaddrinfo(h, None)
    except (socket.gaierror, UnicodeError):
        return False
    addrs = {info[4][0] for info in infos}
    return bool(addrs) and all(ipaddress.ip_address(a.split("%", 1)[0]).is_loopback for a in addrs)


def url_host(host: str) -> str:
    """The host as it goes in a URL (IPv6 in brackets; the wildcard shown as the loopback name)."""
    h = host.strip().strip("[]")
    if h in ("0.0.0.0", "::"):
        return "localhost"
    return f"[{h}]" if ":" in h else h


def streamlit_command(args: argparse.Namespace) -> list[str]:
    """The ``streamlit run`` command line for the dashboard (explicit flags win over any config file)."""
    return [
        sys.executable, "-m", "streamlit", "run", str(server_script()),
        "--server.address", args.host.strip().strip("[]"),
        "--server.port", str(args.port),
        "--server.headless", "true",
        "--server.maxUploadSize", str(args.max_upload_mb),
        "--server.fileWatcherType", "none",
        "--server.runOnSave", "false",
        "--server.enableXsrfProtection", "true",
        "--browser.gatherUsageStats", "false",
        "--client.showErrorDetails", "type",
        "--client.toolbarMode", "minimal",
        "--global.developmentMode", "false",
    ]


def _check(args: argparse.Namespace) -> None:
    if not 1 <= args.port <= 65535:
        raise InputError(f"--port must be between 1 and 65535, got {args.port}")
    if args.max_upload_mb < 1:
        raise InputError(f"--max-upload-mb must be at least 1, got {args.max_upload_mb}")
    if args.max_trace_bytes is not None and args.max_trace_bytes <= 0:
        raise InputError("--max-trace-bytes must be positive")
    if args.samples_dir is not None and not os.path.isdir(args.samples_dir):
        raise InputError("not a directory", args.samples_dir)
    if not is_loopback(args.host) and not args.allow_remote:
        raise InputError(
            f"refusing to bind to {args.host}: that exposes the dashboard, with no login, to every machine that "
            f"can reach {args.host}:{args.port}; anyone there can upload files for this machine to parse and "
            "read the bundled samples. Pass --allow-remote to do it anyway (ideally behind an authenticating "
            "proxy), or use --host 127.0.0.1")


def run(args: argparse.Namespace) -> int:
    _check(args)
    try:
        import plotly  # noqa: F401
        import streamlit  # noqa: F401
    except ImportError:
        raise InputError("the dashboard needs streamlit and plotly: pip install 'launchgap[app]'") from None
    if not main_script().is_file():
        raise InputError(f"dashboard script not found at {main_script()}; reinstall with pip install 'launchgap[app]'")
    env = dict(os.environ)
    if args.max_trace_bytes is not None:
        env["LAUNCHGAP_MAX_TRACE_BYTES"] = str(args.max_trace_bytes)
    if args.samples_dir is not None:
        env["LAUNCHGAP_SAMPLES_DIR"] = os.path.abspath(args.samples_dir)
    if not is_loopback(args.host):
        print(f"launchgap: warning: serving on {args.host} (--allow-remote): reachable without login by "
              "every machine that can reach this address", file=sys.stderr)
    print(f"launchgap dashboard: http://{url_host(args.host)}:{args.port}", flush=True)
    proc = subprocess.Popen(streamlit_command(args), env=env)
    try:
        return proc.wait()
    except KeyboardInterrupt:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        raise
