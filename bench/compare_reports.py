"""Same reports, field for field, before and after a change: ``launchgap analyze --format json`` of every
trace under ``traces/``, from two versions of the code.

    python bench/compare_reports.py --base REV [--traces traces] [--jobs 2]

``REV`` (a commit, e.g. main where a change started) is checked out into a temporary git worktree and
run from there (its own ``analyzer/`` imported as ``launchgap``; without a compiled C scan that
version reads every Kineto file with msgspec, which gives the same trace: tests/unit/
test_kineto_native_scan.py); the current tree runs through this interpreter's installed package.
Each file's exit code, JSON report (or its one-line error) must match exactly; the first differences
are printed and the exit code is 1 when any file differs. A benchmark-style check, not a test: it
takes minutes on the bundled traces.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TRACE_SUFFIXES = (".json", ".json.gz", ".sqlite")


def trace_files(folder: Path) -> list[Path]:
    """Every file the CLI might be pointed at: Kineto JSON (plain or gzip) and nsys SQLite exports."""
    return sorted(p for p in folder.rglob("*") if p.is_file() and p.name.endswith(TRACE_SUFFIXES))


def analyze(path: Path, env: dict[str, str]) -> tuple[int, str]:
    proc = subprocess.run([sys.executable, "-m", "launchgap", "analyze", str(path), "--format", "json"],
                          capture_output=True, text=True, env=env, cwd=ROOT, timeout=900)
    return proc.returncode, proc.stdout if proc.returncode == 0 else proc.stderr.strip()


def base_env(tree: Path, shim: Path) -> dict[str, str]:
    """Environment that imports ``launchgap`` from ``tree``'s analyzer/ (a symlink in ``shim``)."""
    shim.mkdir(parents=True, exist_ok=True)
    link = shim / "launchgap"
    if not link.exists():
        link.symlink_to(tree / "analyzer", target_is_directory=True)
    return {**os.environ, "PYTHONPATH": str(shim), "OPENBLAS_NUM_THREADS": "1"}


def diff(a: object, b: object, where: str = "") -> list[str]:
    """Paths where two JSON values differ (first few)."""
    if type(a) is not type(b):
        return [f"{where}: {a!r} != {b!r}"]
    if isinstance(a, dict):
        out = [f"{where}.{k}: only in one" for k in sorted(set(a) ^ set(b))]
        for k in sorted(set(a) & set(b)):
            out += diff(a[k], b[k], f"{where}.{k}")
        return out
    if isinstance(a, list):
        if len(a) != len(b):
            return [f"{where}: {len(a)} items != {len(b)}"]
        return [d for i, (x, y) in enumerate(zip(a, b)) for d in diff(x, y, f"{where}[{i}]")]
    return [] if a == b else [f"{where}: {a!r} != {b!r}"]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--base", required=True, help="git revision to compare against")
    ap.add_argument("--traces", type=Path, default=ROOT / "traces")
    ap.add_argument("--jobs", type=int, default=2)
    args = ap.parse_args()
    files = trace_files(args.traces)
    with tempfile.TemporaryDirectory(prefix="launchgap-base-") as tmp:
        tree = Path(tmp) / "tree"
        subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", "-q", str(tree), args.base], check=True)
        try:
            env_base = base_env(tree, Path(tmp) / "shim")
            env_new = {**os.environ, "OPENBLAS_NUM_THREADS": "1"}
            with ThreadPoolExecutor(args.jobs) as pool:
                before = list(pool.map(lambda p: analyze(p, env_base), files))
                after = list(pool.map(lambda p: analyze(p, env_new), files))
        finally:
            subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(tree)], check=False)
    differing = 0
    for path, (rc_a, out_a), (rc_b, out_b) in zip(files, before, after):
        if rc_a != rc_b:
            problems = [f"exit {rc_a} != {rc_b}: {out_a[-200:]!r} / {out_b[-200:]!r}"]
        elif rc_a != 0:
            problems = [] if out_a == out_b else [f"error {out_a!r} != {out_b!r}"]
        else:
            problems = diff(json.loads(out_a), json.loads(out_b))
        if problems:
            differing += 1
            print(f"DIFFERS {path.relative_to(ROOT)}:", *problems[:8], sep="\n  ")
    ok = sum(rc == 0 for rc, _ in after)
    print(f"{len(files)} files ({ok} analysed, {len(files) - ok} refused by both), {differing} differ "
          f"(base {args.base})")
    return 1 if differing else 0


if __name__ == "__main__":
    sys.exit(main())
