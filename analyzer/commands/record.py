"""``launchgap record``: the recording harness (:mod:`launchgap.harness.cli` holds its parser and runner).

The harness owns its command line so that ``python3 -m analyzer.harness`` on a GPU machine
(stdlib + torch only) never imports the command layer.
"""
from __future__ import annotations

from ..harness.cli import HELP, prepare_parser, run

NAME = "record"

__all__ = ["NAME", "HELP", "prepare_parser", "run"]
