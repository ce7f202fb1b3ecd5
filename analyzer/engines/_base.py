"""The pieces every engine module is made of: what a step marker says, and how a marker is described.

An engine module (see :mod:`launchgap.engines`) lists its step markers as :class:`StepMarker`
values: a regex over one kind of text the engine leaves in a trace and a parser that turns a
match into a :class:`StepInfo`. Nothing here reads a trace; :mod:`launchgap.steps` does.
"""
from __future__ import annotations

import re
from collections.abc import Callable, Sequence
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
    ``written_by`` names the code and versions that write it (see docs/engines.md). A ``fallback``
    marker delimits a part of the iteration only (the forward pass, not the input preparation and
    sampling around it): it makes the steps only where the trace holds no other marker.
    """

    engine: str
    source: str
    pattern: re.Pattern[str]
    parse: Callable[[re.Match[str]], StepInfo]
    written_by: str
    fallback: bool = False

    def read(self, text: str) -> StepInfo | None:
        """The info in ``text``, or ``None`` when the text is not this marker."""
        m = self.pattern.search(text)
        return self.parse(m) if m else None


@dataclass(frozen=True)
class PhaseKernel:
    """An attention kernel that runs in one phase only, so its presence in a step says which requests it holds.

    ``pattern`` is searched in the kernel's own name (template arguments and parameters left out); ``phase`` is
    ``"decode"`` (the step holds requests that generate) or ``"prefill"`` (it holds requests in their prompt);
    ``one_token``: a decode kernel that only ever runs one query token per request (so a step whose only attention
    is this one has as many tokens as requests); ``written_by`` names the source read (see docs/engines.md).
    """

    pattern: re.Pattern[str]
    phase: str
    one_token: bool
    written_by: str


@dataclass(frozen=True)
class SequenceKernel:
    """A kernel launched with one block (Triton program) per sequence of the step, plus ``extra`` more: its grid x
    less ``extra`` is the step's requests. ``pattern`` is searched in the kernel's name; ``written_by`` names the
    launch read (see docs/engines.md), e.g. ``_compute_slot_mapping_kernel[(num_reqs + 1,)]``: ``extra`` 1.
    """

    pattern: re.Pattern[str]
    extra: int
    written_by: str


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


# --- a server's capture settings, as pasted by the user (one grammar, each engine its keys) -------

#: Refuse pasted server configs longer than this many characters (a launch log's server-args dump fits).
MAX_CONFIG_CHARS = 1 << 20


@dataclass(frozen=True)
class CaptureSettings:
    """The CUDA-graph capture settings a server config says (:func:`launchgap.engines.parse_server_config`).

    ``engine``: whose settings; ``sizes``: the explicit capture list (``None`` when the config gives
    none, then the engine's default list cut at ``max_size`` applies); ``max_size``: the largest size
    (``None``: the engine's default); ``padding``: ``"pad"``, ``"exact"`` or ``None`` (the engine's
    default); ``disabled``: graphs are off (``--enforce-eager``, ``--disable-cuda-graph``,
    ``cudagraph_mode NONE``, ``cuda_graph_config: null``); ``read``: the settings read, as
    ``key=value`` texts, for the report's "which input gave what".
    """

    engine: str
    sizes: tuple[int, ...] | None = None
    max_size: int | None = None
    padding: str | None = None
    disabled: bool = False
    read: tuple[str, ...] = ()

    def describe(self) -> str:
        return ", ".join(self.read)


def sizes_text(sizes: Sequence[int]) -> str:
    """A capture list as messages show it: ``[1, 2, 4]``, or its first eight sizes and its largest past twelve
    (``[1, 2, 4, 8, 16, 24, 32, 40, ..., 512]``)."""
    s = list(sizes)
    return "[" + ", ".join(map(str, s if len(s) <= 12 else s[:8])) + (", ..., " + str(s[-1]) if len(s) > 12 else "") + "]"


def _key_re(key: str) -> str:
    """A setting name as JSON/Python/YAML keys and CLI flags write it (``-`` and ``_`` alike, any prefix
    such as ``--``, ``-cc.`` or ``server_args.``), followed by its separator."""
    body = r"[-_]".join(re.escape(p) for p in key.split("_"))
    return rf"(?:(?<=--)|(?<![\w-])){body}(?![\w-])[\"']?[ \t]*[:=]?[ \t]*"


_INT_LIST = re.compile(r"\[\s*([^\]]*)\]|((?:\d+(?:\s*,\s*|[ \t]+)?)+)|\n((?:[ \t]*-[ \t]*\d+[ \t]*(?:\n|$))+)")


def find_key(text: str, key: str) -> re.Match[str] | None:
    """The first place ``key`` is set in ``text`` (the match ends where its value starts), or ``None``."""
    return re.search(_key_re(key), text)


def read_int_list(text: str, key: str) -> tuple[int, ...] | None:
    """The integer list set for ``key``: ``[1, 2, 4]`` (JSON, Python, YAML flow), ``1 2 4`` / ``1,2,4``
    (command-line flags) or a YAML block of ``- 1`` lines; ``None`` when the key is absent.

    Raises :class:`ValueError` naming the key when the key is there but its value is no list of
    positive integers (``null``/``None`` gives ``()``).
    """
    m = find_key(text, key)
    if m is None:
        return None
    rest = text[m.end():].lstrip("'\"")
    if re.match(r"(?:null|None|~)\b", rest):
        return ()
    v = _INT_LIST.match(rest) or _INT_LIST.match(text[m.end():])
    if v is None:
        raise ValueError(f"{key}: expected a list of positive integers")
    body = v.group(1) if v.group(1) is not None else (v.group(2) or v.group(3) or "")
    items = [x for x in re.split(r"[\s,\-]+", body) if x]
    if not items or not all(x.isdigit() and int(x) > 0 for x in items):
        raise ValueError(f"{key}: expected a list of positive integers, got {body.strip()[:40]!r}")
    return tuple(sorted({int(x) for x in items}))


def read_int(text: str, key: str) -> int | None:
    """The positive integer set for ``key`` (``None`` when absent or null); :class:`ValueError` when not one."""
    m = find_key(text, key)
    if m is None:
        return None
    rest = text[m.end():].lstrip("'\"")
    if re.match(r"(?:null|None|~)\b", rest):
        return None
    v = re.match(r"(\d+)\b", rest)
    if v is None or int(v.group(1)) < 1:
        raise ValueError(f"{key}: expected a positive integer, got {rest[:20].strip()!r}")
    return int(v.group(1))


def read_bool(text: str, key: str) -> bool | None:
    """The boolean set for ``key``: ``true``/``false`` in any case, ``1``/``0``, or a bare command-line
    flag (``--disable-cuda-graph-padding``: true); ``None`` when absent."""
    m = find_key(text, key)
    if m is None:
        return None
    rest = text[m.end():].lstrip("'\"")
    v = re.match(r"(?i)(true|false|1|0)\b", rest)
    if v is not None:
        return v.group(1).lower() in ("true", "1")
    if text[max(0, m.start() - 2):m.start()] == "--":
        return True
    raise ValueError(f"{key}: expected true or false, got {rest[:20].strip()!r}")


def read_word(text: str, key: str) -> str | None:
    """The word set for ``key`` (``cudagraph_mode: FULL``, ``<CUDAGraphMode.NONE: 0>``), upper-cased; ``None``
    when absent."""
    m = find_key(text, key)
    if m is None:
        return None
    v = re.match(r"[\"'<]*(?:\w+\.)?([A-Za-z_]+)", text[m.end():])
    return v.group(1).upper() if v else None
