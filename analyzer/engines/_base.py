"""The pieces every engine module is made of: what a step marker says, and how a marker is described.

An engine module (see :mod:`analyzer.engines`) lists its step markers as :class:`StepMarker`
values: a regex over one kind of text the engine leaves in a trace and a parser that turns a
match into a :class:`StepInfo`. Nothing here reads a trace; :mod:`analyzer.steps` does.
"""
from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

#: Phases a step can have. ``None`` (not a member) means the marker does not say.
PHASES = ("decode", "prefill", "mixed")
#: Where a marker's text comes from: an annotation (``record_function`` range in a Kineto trace,
#: NVTX range in an Nsight export) or a Python function name (Kineto ``python_function`` events
#: of a trace taken ``with_stack``).
MARKER_SOURCES = ("annotation", "python")


@dataclass(frozen=True)
class StepInfo:
    """What an engine's step marker says about one iteration; ``None`` where it says nothing.

    ``phase``: ``"decode"`` (every sequence generates), ``"prefill"`` (every sequence is in its
    prompt) or ``"mixed"``; ``requests``: sequences in the step; ``tokens``: tokens the step
    processed (prompt tokens plus generated ones).
    """

    phase: str | None = None
    requests: int | None = None
    tokens: int | None = None

    @property
    def fields_known(self) -> int:
        """How many of phase, requests and tokens the marker gave (which nested marker says most)."""
        return (self.phase is not None) + (self.requests is not None) + (self.tokens is not None)

    def filled_from(self, other: StepInfo) -> StepInfo:
        """This info with its unknown fields taken from ``other`` (a marker nested with it)."""
        return StepInfo(self.phase if self.phase is not None else other.phase,
                        self.requests if self.requests is not None else other.requests,
                        self.tokens if self.tokens is not None else other.tokens)


@dataclass(frozen=True)
class StepMarker:
    """One text an engine writes once per iteration, and how to read it.

    ``pattern`` is searched in annotation text (``source="annotation"``) or Python function
    names (``source="python"``); ``parse`` turns the match into a :class:`StepInfo`;
    ``written_by`` names the code and versions that write it (see docs/engines.md).
    """

    engine: str
    source: str
    pattern: re.Pattern[str]
    parse: Callable[[re.Match[str]], StepInfo]
    written_by: str

    def read(self, text: str) -> StepInfo | None:
        """The info in ``text``, or ``None`` when the text is not this marker."""
        m = self.pattern.search(text)
        return self.parse(m) if m else None


def no_info(_: re.Match[str]) -> StepInfo:
    """Parser of markers that only delimit a step (a function name, a bare range)."""
    return StepInfo()


def phase_from_counts(context_requests: int, generation_requests: int) -> str | None:
    """``prefill`` / ``decode`` / ``mixed`` from the sequences in prompt and in generation; ``None`` for none."""
    if context_requests > 0 and generation_requests > 0:
        return "mixed"
    if context_requests > 0:
        return "prefill"
    if generation_requests > 0:
        return "decode"
    return None


def capture_list(sizes: list[int], top: int) -> list[int]:
    """Sorted unique sizes up to ``top`` (a server's list cut at its maximum)."""
    return sorted({s for s in sizes if 0 < s <= top})
