"""The dashboard's upload path against the CLI, on one large Kineto trace, in one run.

Not a test: run it by hand from the project root, e.g.

    .venv/bin/python bench/dashboard_upload.py --size-mb 400 --repeat 3
    .venv/bin/python bench/dashboard_upload.py --bomb-gib 1 --size-mb 0   # the bomb check only
    .venv/bin/python bench/dashboard_upload.py --size-mb 4000 --gz --repeat 1 \
        --source traces/engines/tracelens-vllm-prefilldecode-piecewise-mi300x/graph_execution.json.gz
        # a 4 GB with_stack trace under the per-upload memory limit (issue 30)

For each of ``--repeat`` rounds, interleaved so both meet the same load on the box:

* **CLI**: ``python -m launchgap analyze FILE --format json`` as a fresh process, wall time
  around it;
* **dashboard**: a fresh ``launchgap app`` server (so the server's parse cache is cold),
  Debian chromium through Playwright (never a downloaded browser); after the session has
  loaded its default samples and shown the Diagnosis page once (a running server has its
  imports done), back on Traces the clock starts at the file input's ``set_input_files``,
  and stops when the Diagnosis page shows its metrics (the upload, the Traces page's parse
  and analysis, the click on "Diagnosis", that page's run). The metrics shown are checked
  against the CLI's JSON. The server's process tree (server, parse child, its decode worker) is
  sampled every 50 ms meanwhile: ``server.tree_rss_mib_peak`` is its peak resident memory, and
  ``server.parse_rss_mib_peak`` that of the parse child's tree alone, which the dashboard kills past
  its per-upload limit (1.5 GiB).

The server runs with ``LAUNCHGAP_APP_TIMING=1``, so each stage it passes (upload digest,
temp file, trace load, analysis, page runs, ...) logs a line; the breakdown printed is the
median of each stage over the rounds. ``browser.upload`` is the time from
``set_input_files`` to the first server stage of that upload (Chromium reading the file,
the HTTP upload, the server's multipart parse and the rerun that follows), split into
``browser.upload_put`` (until the PUT request finished) and ``browser.put_to_script``.
``browser.send_floor``, timed in each round after the dashboard's: Chromium sending the same
file the same way (a multipart ``FormData`` PUT) to a local server that only reads and
discards it, the part of the upload no server can remove.

``--bomb-gib N`` then checks that one session's decompression bomb (a gzip of N GiB of
whitespace inside ``{"traceEvents": [...]}``) does not stall another session: session B
switches pages in a loop (Traces <-> Compare, timing each switch until its heading shows)
before, and while session A uploads the bomb; it prints B's switch times in both phases,
A's time to its error line, and the error line itself.

Machine facts (CPU, cores, load average) are printed with the table.
"""
from __future__ import annotations

import argparse
import http.server
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import threading
import time
import urllib.request
import zlib
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from launchgap.dashboard.timing import ENV_TIMING, parse_lines  # noqa: E402
from launchgap.dashboard.worker import tree_rss_bytes  # noqa: E402
from tests.synth import scaled_trace, trace_meta  # noqa: E402

from bench import machine  # noqa: E402 - bench/bench.py, beside this script

CHROMIUM = Path(os.environ.get("LAUNCHGAP_CHROMIUM", "/usr/bin/chromium"))
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]
UI_TIMEOUT_MS = 600_000


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def load_avg() -> float:
    return os.getloadavg()[0]


class Server:
    """``python -m launchgap app`` on a free port with stage timing on; log in a file."""

    def __init__(self, log: Path, extra_env: dict[str, str] | None = None, root: Path = REPO) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}/"
        self.log = log
        env = dict(os.environ, PYTHONUNBUFFERED="1", **{ENV_TIMING: "1"}, **(extra_env or {}))
        env["PYTHONPATH"] = str(root) + os.pathsep + env.get("PYTHONPATH", "")
        with open(log, "wb") as out:
            self.proc = subprocess.Popen([sys.executable, "-m", "launchgap", "app", "--port", str(self.port)],
                                         cwd=root, stdout=out, stderr=subprocess.STDOUT, env=env,
                                         start_new_session=True)
        deadline = time.monotonic() + 120
        while not self._healthy():
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"server did not start:\n{log.read_text(errors='replace')}")
            time.sleep(0.3)

    def _healthy(self) -> bool:
        try:
            with urllib.request.urlopen(self.url + "_stcore/health", timeout=2) as r:
                return r.status == 200
        except OSError:
            return False

    def timings(self) -> list[dict]:
        return parse_lines(self.log.read_text(errors="replace"))

    def stop(self) -> None:
        try:
            os.killpg(self.proc.pid, signal.SIGTERM)
            self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=20)
        except ProcessLookupError:
            pass


def cli_run(trace: Path, out_json: Path) -> float:
    cmd = [sys.executable, "-m", "launchgap", "analyze", str(trace), "--format", "json"]
    env = dict(os.environ, PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    t0 = time.perf_counter()
    with open(out_json, "wb") as out:
        rc = subprocess.run(cmd, cwd=REPO, stdout=out, env=env).returncode
    wall = time.perf_counter() - t0
    if rc not in (0, 1):  # 1: findings, still a report
        raise RuntimeError(f"CLI exited {rc}")
    return wall


def open_page(page, name: str) -> None:
    page.get_by_test_id("stSidebarNavLink").filter(has_text=name).click()


def metric_value(page, label: str, timeout_ms: int = UI_TIMEOUT_MS) -> str:
    m = page.get_by_test_id("stMetric").filter(has_text=label).first
    m.wait_for(timeout=timeout_ms)
    return m.get_by_test_id("stMetricValue").inner_text().strip()


def expected_metrics(cli_json: Path) -> dict[str, str]:
    s = json.loads(cli_json.read_text())["traces"][0]["summary"]
    return {"GPU idle": f"{s['gpu_idle_fraction']:.1%}", "Steps": str(s["steps"])}


def dashboard_run(browser, trace: Path, log: Path, expect: dict[str, str], root: Path = REPO
                  ) -> tuple[float, dict[str, float]]:
    """(seconds from set_input_files to the Diagnosis metrics, stage breakdown) on a fresh server
    running the dashboard of the checkout at ``root``."""
    server = Server(log, root=root)
    try:
        ctx = browser.new_context(viewport={"width": 1400, "height": 1000})
        page = ctx.new_page()
        page.goto(server.url, timeout=UI_TIMEOUT_MS)
        page.get_by_text("Loaded traces").wait_for(timeout=UI_TIMEOUT_MS)
        # Warm the server as a running one would be: the Diagnosis page once (its imports, Plotly).
        open_page(page, "Diagnosis")
        metric_value(page, "GPU idle")
        open_page(page, "Traces")
        page.get_by_text("Loaded traces").wait_for(timeout=UI_TIMEOUT_MS)
        page.wait_for_timeout(500)
        n_before = len(server.timings())
        put_done: list[float] = []
        page.on("requestfinished", lambda r: put_done.append(time.time()) if "/_stcore/upload_file/" in r.url
                and r.method == "PUT" else None)
        peaks = {"tree": 0, "parse": 0}
        sampling = threading.Event()

        def sample() -> None:  # the server's tree, and the children it starts to parse uploads
            while not sampling.wait(0.05):
                peaks["tree"] = max(peaks["tree"], tree_rss_bytes(server.proc.pid))
                for child in _descendants(server.proc.pid):  # a parse child: forked by the worker zygote
                    if _ZYGOTE in _cmdline(child) and _ZYGOTE in _cmdline(_parent(child)):
                        peaks["parse"] = max(peaks["parse"], tree_rss_bytes(child))

        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        t_wall0 = time.time()
        t0 = time.perf_counter()
        try:
            page.locator("input[type=file]").set_input_files(str(trace))
            page.get_by_text("Loaded 1 of 1 file(s)").wait_for(timeout=UI_TIMEOUT_MS)
        finally:
            sampling.set()
            sampler.join()
        t_loaded = time.perf_counter()
        open_page(page, "Diagnosis")
        shown = {label: metric_value(page, label) for label in expect}
        t1 = time.perf_counter()
        # Let the page's run end (its own timing line is written then) before reading the log.
        page.wait_for_function("() => !document.querySelector('[data-testid=\"stStatusWidget\"]')",
                               timeout=UI_TIMEOUT_MS)
        page.wait_for_timeout(500)
        rss_after = tree_rss_bytes(server.proc.pid)  # the session still open: what the server holds for it
        ctx.close()
        if shown != expect:
            raise RuntimeError(f"Diagnosis shows {shown}, the CLI says {expect}")
        recs = server.timings()[n_before:]
    finally:
        server.stop()
    stages: dict[str, float] = {}
    for r in recs:
        name = r["stage"] + (f"[{r['page']}]" if "page" in r else "")
        stages[name] = stages.get(name, 0.0) + float(r["s"])
    first = min((r["t"] - r["s"] for r in recs if r["stage"] != "page"), default=None)
    if first is not None:
        stages["browser.upload"] = first - t_wall0
    if put_done:
        # The HTTP PUT of the file: Chromium reading and sending it, Streamlit/Starlette receiving it.
        stages["browser.upload_put"] = put_done[0] - t_wall0
        if first is not None:
            stages["browser.put_to_script"] = first - put_done[0]
    stages["browser.until_loaded"] = t_loaded - t0
    stages["server.tree_rss_mib_after"] = rss_after / 1024**2  # not seconds: resident memory, MiB
    stages["server.tree_rss_mib_peak"] = peaks["tree"] / 1024**2
    stages["server.parse_rss_mib_peak"] = peaks["parse"] / 1024**2
    stages["browser.diagnosis_click_to_metrics"] = t1 - t_loaded
    return t1 - t0, stages


def _descendants(pid: int) -> list[int]:
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        try:
            for task in Path(f"/proc/{p}/task").iterdir():
                kids = [int(c) for c in (task / "children").read_text().split()]
                out += kids
                todo += kids
        except OSError:
            continue
    return out


_ZYGOTE = b"launchgap.dashboard.worker"


def _parent(pid: int) -> int:
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
    except (OSError, ValueError, IndexError):
        return 0


def _cmdline(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""


def make_bomb(path: Path, gib: float) -> Path:
    """``{"traceEvents": [`` + gib GiB of spaces + ``]}``, gzip level 1, written in pieces."""
    if path.exists():
        return path
    tmp = path.with_name(path.name + ".tmp")
    co = zlib.compressobj(1, zlib.DEFLATED, 31)
    block = b" " * (16 * 1024 * 1024)
    with open(tmp, "wb") as fh:
        fh.write(co.compress(b'{"traceEvents": ['))
        for _ in range(int(gib * 1024**3) // len(block)):
            fh.write(co.compress(block))
        fh.write(co.compress(b"]}"))
        fh.write(co.flush())
    tmp.rename(path)
    return path


def bomb_check(browser, bomb: Path, log: Path, switches: int, root: Path = REPO, bomb_timeout_s: float = 900) -> dict:
    server = Server(log, root=root)
    peak_tree = [0]
    result: dict = {"bomb_file_bytes": bomb.stat().st_size}
    try:
        ctx_a = browser.new_context(viewport={"width": 1400, "height": 1000})
        ctx_b = browser.new_context(viewport={"width": 1400, "height": 1000})
        pa, pb = ctx_a.new_page(), ctx_b.new_page()
        for p in (pa, pb):
            p.goto(server.url, timeout=UI_TIMEOUT_MS)
            p.get_by_text("Loaded traces").wait_for(timeout=UI_TIMEOUT_MS)

        def switch_times(n: int) -> list[float]:
            out = []
            for i in range(n):
                name, heading = ("Compare", "Compare") if i % 2 == 0 else ("Traces", "Loaded traces")
                t = time.perf_counter()
                open_page(pb, name)
                pb.get_by_role("heading", name=heading).first.wait_for(timeout=UI_TIMEOUT_MS)
                pb.wait_for_function("() => !document.querySelector('[data-testid=\"stStatusWidget\"]')",
                                     timeout=UI_TIMEOUT_MS)
                out.append(time.perf_counter() - t)
                peak_tree[0] = max(peak_tree[0], tree_rss_bytes(server.proc.pid))
            return out

        result["b_switch_s_idle"] = switch_times(switches)
        # Playwright's sync API is one thread: A's upload is started, B is driven while it runs,
        # then A's outcome is read.
        t0 = time.perf_counter()
        pa.locator("input[type=file]").set_input_files(str(bomb))
        during = []
        a_done = None
        deadline = time.monotonic() + bomb_timeout_s
        while time.monotonic() < deadline:
            during.extend(switch_times(2))
            if pa.get_by_text("Loaded 0 of 1 file(s); 1 failed").count():
                a_done = time.perf_counter() - t0
                break
        result["b_switch_s_during_bomb"] = during
        result["a_seconds_to_error"] = a_done
        alert = pa.get_by_test_id("stAlertContentError").filter(has_text=bomb.name)
        result["a_error_line"] = (alert.first.get_by_test_id("stMarkdownContainer").inner_text().strip()
                                  if alert.count() else None)
        result["server_tree_peak_rss_mib_sampled"] = peak_tree[0] / 1024**2
        ctx_a.close()
        ctx_b.close()
        result["server_peak_rss_mib"] = _tree_peak_rss_mib(server.proc.pid)
    finally:
        server.stop()
    result["stages"] = [r for r in parse_lines(log.read_text(errors="replace")) if r["stage"] != "page"]
    return result


def _tree_peak_rss_mib(pid: int) -> dict[str, float]:
    """VmHWM (peak RSS) of the launcher and its descendants still alive, MiB."""
    out = {}
    try:
        children = subprocess.run(["pgrep", "-g", str(pid)], capture_output=True, text=True).stdout.split()
    except OSError:
        return out
    for c in children:
        try:
            status = Path(f"/proc/{c}/status").read_text()
            cmd = Path(f"/proc/{c}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")[:60]
        except OSError:
            continue
        for line in status.splitlines():
            if line.startswith("VmHWM:"):
                out[f"{c} {cmd}"] = int(line.split()[1]) / 1024
    return out


_SINK_PAGE = b"""<!doctype html><title>sink</title><input type=file id=f><script>
window.sendFile = async () => { const fd = new FormData(); fd.append("file", document.getElementById("f").files[0]);
  const t0 = performance.now(); const r = await fetch("/upload", {method: "PUT", body: fd}); await r.text();
  return performance.now() - t0; };</script>"""


class _Sink(http.server.BaseHTTPRequestHandler):
    """Serves the page above and reads each PUT's body to the end, keeping nothing."""

    def do_GET(self) -> None:  # noqa: N802 - http.server's naming
        self.send_response(200)
        self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", str(len(_SINK_PAGE)))
        self.end_headers()
        self.wfile.write(_SINK_PAGE)

    def do_PUT(self) -> None:  # noqa: N802
        left = int(self.headers["Content-Length"])
        while left > 0:
            chunk = self.rfile.read(min(left, 1 << 20))
            if not chunk:  # the browser went away
                break
            left -= len(chunk)
        self.send_response(204)
        self.end_headers()

    def log_message(self, *args) -> None:
        pass


def browser_send_floor(browser, trace: Path) -> float:
    """Seconds Chromium takes to PUT ``trace`` as a multipart ``FormData`` (as Streamlit's uploader
    sends it) to a local server that reads and discards it: what no server-side work can go below."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Sink)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    ctx = browser.new_context()
    try:
        page = ctx.new_page()
        page.goto(f"http://127.0.0.1:{server.server_address[1]}/")
        page.locator("#f").set_input_files(str(trace))
        return page.evaluate("sendFile()") / 1000.0
    finally:
        ctx.close()
        server.shutdown()
        server.server_close()


def median(xs: list[float]) -> float:
    return statistics.median(xs) if xs else float("nan")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--size-mb", type=float, default=400, help="JSON MB of the trace (0: skip the timing)")
    ap.add_argument("--gz", action="store_true", help="upload the .json.gz form of the trace")
    ap.add_argument("--source", type=Path, help="the real trace to scale up (default: the plain bench trace)")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--bomb-gib", type=float, default=0, help="also run the two-session bomb check (GiB inflated)")
    ap.add_argument("--switches", type=int, default=6, help="page switches of session B per phase")
    ap.add_argument("--bomb-root", type=Path, help="run the bomb check against this checkout's dashboard")
    ap.add_argument("--bomb-timeout", type=float, default=900, help="give up waiting for session A after this long")
    ap.add_argument("--baseline-root", type=Path,
                    help="also time the dashboard of this checkout in each round (e.g. an export of an older "
                         "commit: git archive COMMIT | tar -x -C DIR)")
    ap.add_argument("--out", type=Path, default=REPO / "bench-out")
    ap.add_argument("--json", type=Path, help="write every number as JSON here")
    args = ap.parse_args(argv)
    from playwright.sync_api import sync_playwright

    if not CHROMIUM.exists():
        print(f"{CHROMIUM} not found (Debian chromium: make browser-deps)", file=sys.stderr)
        return 2
    args.out.mkdir(parents=True, exist_ok=True)
    doc: dict = {"machine": machine()}
    print(f"machine: {doc['machine']}")
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS, headless=True)
        try:
            if args.size_mb > 0:
                trace = scaled_trace(args.size_mb, args.out, gz=args.gz,
                                     **({"source": args.source} if args.source else {}))
                meta = trace_meta(trace)
                print(f"trace: {trace.name}: {meta['file_bytes'] / 1e6:.0f} MB file, "
                      f"{meta['json_bytes'] / 1e6:.0f} MB JSON, {meta['events']:,} events")
                cli, dash, stages, loads, base, base_stages = [], [], [], [], [], []
                for i in range(args.repeat):
                    cli_out = args.out / "dashboard_upload_cli.json"
                    cli.append(cli_run(trace, cli_out))
                    expect = expected_metrics(cli_out)
                    d, st = dashboard_run(browser, trace, args.out / f"dashboard_upload_server_{i}.log", expect)
                    dash.append(d)
                    st["browser.send_floor"] = browser_send_floor(browser, trace)
                    stages.append(st)
                    line = (f"round {i + 1}: CLI {cli[-1]:.2f} s, dashboard {d:.2f} s "
                            f"(Chromium's send alone {st['browser.send_floor']:.2f} s)")
                    if args.baseline_root:
                        b, bst = dashboard_run(browser, trace, args.out / f"dashboard_upload_baseline_{i}.log", expect,
                                               root=args.baseline_root.resolve())
                        base.append(b)
                        base_stages.append(bst)
                        line += f", baseline dashboard {b:.2f} s"
                    loads.append(load_avg())
                    print(f"{line} (load avg {loads[-1]:.1f})", flush=True)
                names = sorted({k for s in stages for k in s})
                breakdown = {k: median([s.get(k, 0.0) for s in stages]) for k in names}
                doc.update(trace=trace.name, file_bytes=meta["file_bytes"], events=meta["events"],
                           cli_s=cli, dashboard_s=dash, load_avg=loads, stages=stages, breakdown_median_s=breakdown,
                           ratio=median(dash) / median(cli))
                print(f"\nCLI median {median(cli):.2f} s, dashboard median {median(dash):.2f} s, "
                      f"ratio {median(dash) / median(cli):.2f}x")
                if base:
                    bnames = sorted({k for s in base_stages for k in s})
                    bbreak = {k: median([s.get(k, 0.0) for s in base_stages]) for k in bnames}
                    doc.update(baseline_root=str(args.baseline_root), baseline_s=base, baseline_stages=base_stages,
                               baseline_breakdown_median_s=bbreak, baseline_ratio=median(base) / median(cli))
                    print(f"baseline dashboard median {median(base):.2f} s, ratio {median(base) / median(cli):.2f}x")
                    print("\nbaseline stage (median s over rounds):")
                    for k in bnames:
                        print(f"  {k:45s} {bbreak[k]:7.3f}")
                print("\nstage (median s over rounds):")
                for k in names:
                    print(f"  {k:45s} {breakdown[k]:7.3f}")
            if args.bomb_gib > 0:
                bomb = make_bomb(args.out / f"bomb_{args.bomb_gib:g}GiB.json.gz", args.bomb_gib)
                root = (args.bomb_root or REPO).resolve()
                res = bomb_check(browser, bomb, args.out / "dashboard_bomb_server.log", args.switches, root=root,
                                 bomb_timeout_s=args.bomb_timeout)
                res["root"] = str(root)
                doc["bomb"] = res
                idle, during = res["b_switch_s_idle"], res["b_switch_s_during_bomb"]
                print(f"\nbomb {bomb.name} ({res['bomb_file_bytes'] / 1e6:.1f} MB gz, {args.bomb_gib:g} GiB inflated)")
                print(f"  session B page switch: idle median {median(idle):.2f} s (max {max(idle):.2f}), "
                      f"during the bomb median {median(during):.2f} s (max {max(during, default=float('nan')):.2f}, "
                      f"{len(during)} switches)")
                print(f"  session A: error after {res['a_seconds_to_error']} s: {res['a_error_line']}")
                print(f"  server process tree RSS, highest sampled during the bomb: "
                      f"{res['server_tree_peak_rss_mib_sampled']:,.0f} MiB; peak RSS of the processes still "
                      f"alive at the end (MiB): {res['server_peak_rss_mib']}")
        finally:
            browser.close()
    if args.json:
        args.json.write_text(json.dumps(doc, indent=1))
    return 0


if __name__ == "__main__":
    threading.current_thread().name = "bench"
    sys.exit(main())
