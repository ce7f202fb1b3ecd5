"""The launchgap dashboard (Streamlit): ``launchgap app`` runs ``server.py``, an ``st.App`` around
:data:`MAIN_SCRIPT` with :class:`app.uploads.StagedUploadMiddleware` in front.

Layers: :mod:`app.settings` (limits, from the environment the launcher sets),
:mod:`app.cache` (one bounded LRU cache of parsed traces per server),
:mod:`app.session` (each browser session's own list of loaded traces),
:mod:`app.timeline` (event tables for one step), :mod:`app.charts` (Plotly figures),
:mod:`app.text` (showing trace text literally), :mod:`app.worker` (uploads parsed in a
child process under memory and time limits), :mod:`app.uploads` (uploads streamed to a private
file as they arrive), :mod:`app.timing` (stage timings behind
``LAUNCHGAP_APP_TIMING``), and one module per page under ``app/views``. Analysis is done
only by :mod:`analyzer` functions.
"""
from __future__ import annotations

from pathlib import Path

APP_DIR = Path(__file__).resolve().parent
MAIN_SCRIPT = APP_DIR / "main.py"
