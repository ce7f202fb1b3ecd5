"""``python -m analyzer.harness ARGS``: ``launchgap record ARGS`` without loading the other commands.

For GPU machines that have torch but not the analyzer's other dependencies: only the harness
(stdlib + torch) is imported, never :mod:`launchgap.commands`.
"""
from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from ..errors import AnalyzerError
from . import cli


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m analyzer.harness", description=cli.HELP)
    cli.prepare_parser(parser)
    args = parser.parse_args(argv)
    try:
        return cli.run(args)
    except AnalyzerError as exc:
        print(f"launchgap: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("launchgap: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
