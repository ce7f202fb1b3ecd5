"""Showing text from traces literally.

Kernel names, annotations and file names come from users' files. The dashboard never
renders them as HTML or Markdown: tables and code blocks show them as they are, and any
Streamlit element that renders Markdown (st.error, st.caption, metric labels, ...) gets
them through :func:`md_escape`. Plotly hover text interprets a few HTML tags, so names
pass through :func:`hover_escape` before they reach a chart.
"""
from __future__ import annotations

import html
import re

import numpy as np
import pandas as pd

# Everything Streamlit's Markdown (CommonMark + GFM + $math$ + :emoji: + :color[]) could read as markup.
_MD_SPECIAL = re.compile(r"([\\`*_{}\[\]()<>#+\-.!|~$:=&\"'])")


def md_escape(text: str) -> str:
    """Backslash-escape Markdown/HTML syntax so the text shows literally; newlines become spaces."""
    return _MD_SPECIAL.sub(r"\\\1", " ".join(str(text).split()))


def shorten(text: str, max_chars: int) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= max_chars else text[: max_chars - 1] + "…"


def hover_escape(names: np.ndarray | pd.Series | list[str], max_chars: int = 120) -> np.ndarray:
    """Names made safe for Plotly hover text: shortened, then HTML-escaped (``<`` shows as ``<``).

    Escapes each distinct name once (names repeat across a step).
    """
    s = pd.Series(np.asarray(names, dtype=object))
    uniq = pd.unique(s)
    table = {u: html.escape(shorten(u, max_chars), quote=False) for u in uniq}
    return s.map(table).to_numpy(dtype=object)


def json_safe(obj):
    """A copy of nested dicts/lists with non-finite floats as None, so strict JSON can carry it."""
    if isinstance(obj, float):
        return obj if np.isfinite(obj) else None
    if isinstance(obj, dict):
        return {k: json_safe(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [json_safe(v) for v in obj]
    return obj


#: The command line's hints in the planner's messages, as the Capture plan page says them.
CLI_HINTS = ((re.compile(r"pass --distribution FILE"), "upload a batch-size histogram"),
             (re.compile(r"pass --timings( FILE)?|--timings FILE"), "choose harness timings"),
             (re.compile(r"use --batch-regex/--batch-op"), "set the batch-size regex (Traces page, Analysis options)"),
             (re.compile(r"passed with --costs"), "given as costs"),
             (re.compile(r"pass it with --capture beside the run's trace"),
              "load it beside the run's trace: the Diagnosis page pairs it"))


def page_words(message: str) -> str:
    """A planner message with its command-line hints said as the Capture plan page's controls."""
    for pat, words in CLI_HINTS:
        message = pat.sub(words, message)
    return message


def band_percent(low_us: float, high_us: float, mid_us: float) -> str:
    """A band around ``mid_us`` as signed shares of it, one decimal: ``-2.1/+3.1%``; whole percents from 10% on
    (``-12/+11%``: a metric box at four to a row holds no more); "none" when ``mid_us`` is not positive."""
    if not mid_us > 0:
        return "none"
    lo, hi = (low_us / mid_us - 1) * 100, (high_us / mid_us - 1) * 100
    digits = 0 if max(abs(lo), abs(hi)) >= 9.95 else 1
    return f"{lo:+.{digits}f}/{hi:+.{digits}f}%"
