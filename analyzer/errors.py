"""One exception family for everything the analyzer refuses.

The CLI turns any :class:`AnalyzerError` into one line on stderr and exit code 2;
the dashboard shows the same line next to the file that caused it.
"""
from __future__ import annotations


class AnalyzerError(Exception):
    """Base class: a problem with the user's input, not a bug in launchgap."""

    def __init__(self, message: str, path: str | None = None) -> None:
        # One line, printable: messages quote text from damaged files (SQLite errors, names).
        message = "".join(c if c.isprintable() else " " for c in message)
        message = " ".join(message.split())
        super().__init__(message)
        self.message = message
        self.path = path

    def __str__(self) -> str:
        return f"{self.path}: {self.message}" if self.path else self.message


class TraceFormatError(AnalyzerError):
    """The file is not a trace we can read (wrong format, malformed, truncated)."""


class TraceTooLargeError(AnalyzerError):
    """The file decompresses past the configured byte cap."""


class NoGpuActivityError(AnalyzerError):
    """The trace parsed but holds no GPU kernels, copies or sets to analyse."""


class InputError(AnalyzerError):
    """A bad option or a bad auxiliary input (distribution file, regex, ...)."""
