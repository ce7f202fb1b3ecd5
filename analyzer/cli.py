"""The ``launchgap`` command line: one module per subcommand under ``analyzer/commands``.

Each command module has ``NAME``, ``HELP``, ``prepare_parser(parser)`` and ``run(args) -> int``.
:func:`main` turns any :class:`~launchgap.errors.AnalyzerError` into one line on stderr and
exit code 2 (never a traceback).
"""
from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Sequence

from . import __version__
from .errors import AnalyzerError

#: Subcommand modules, in the order ``launchgap --help`` lists them.
COMMANDS = ("analyze", "plan", "record", "app", "hta", "fleet")


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The full parser, or (``only``) one with just that subcommand: importing every command
    module costs ~0.1 s of start-up that a single run does not need."""
    parser = argparse.ArgumentParser(
        prog="launchgap",
        description="Diagnose GPU launch gaps in LLM decode traces and plan CUDA-graph capture.",
    )
    parser.add_argument("--version", action="version", version=f"launchgap {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMANDS if only is None else (only,):
        try:
            mod = importlib.import_module(f"{__package__}.commands.{name}")
        except ModuleNotFoundError as exc:
            if exc.name == f"{__package__}.commands.{name}":
                continue  # command not part of this build
            raise
        p = sub.add_parser(mod.NAME, help=mod.HELP, description=mod.HELP)
        mod.prepare_parser(p)
        p.set_defaults(_run=mod.run)
    return parser


#: numpy's OpenBLAS starts a thread per core that spins for a while at import; launchgap makes no BLAS
#: calls worth threads, and on a small machine the spinning takes a core from the decode worker (about
#: 0.1-0.3 s of a 400 MB trace's time on two cores). A user's own setting wins.
BLAS_THREADS_ENV = "OPENBLAS_NUM_THREADS"


def main(argv: Sequence[str] | None = None) -> int:
    os.environ.setdefault(BLAS_THREADS_ENV, "1")  # before the commands import numpy
    args_list = list(sys.argv[1:] if argv is None else argv)
    first = args_list[0] if args_list else None
    parser = build_parser(first if first in COMMANDS else None)
    args = parser.parse_args(args_list)
    if not getattr(args, "_run", None):
        parser.print_help(sys.stderr)
        return 2
    try:
        return int(args._run(args) or 0)
    except AnalyzerError as exc:
        print(f"launchgap: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("launchgap: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
