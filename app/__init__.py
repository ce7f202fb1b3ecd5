"""The launchgap dashboard (Streamlit): ``launchgap app`` runs ``server.py``, an ``st.App`` around
:data:`MAIN_SCRIPT` with :class:`launchgap.dashboard.uploads.StagedUploadMiddleware` in front.

Layers: :mod:`launchgap.dashboard.settings` (limits, from the environment the launcher sets),
:mod:`launchgap.dashboard.cache` (one bounded LRU cache of parsed traces per server),
:mod:`launchgap.dashboard.session` (each browser session's own list of loaded traces),
:mod:`launchgap.dashboard.timeline` (event tables for one step), :mod:`launchgap.dashboard.charts` (Plotly figures),
:mod:`launchgap.dashboard.text` (showing trace text literally), :mod:`launchgap.dashboard.worker` (uploads parsed in a
child process under memory and time limits), :mod:`launchgap.dashboard.uploads` (uploads streamed to a private
file as they arrive), :mod:`launchgap.dashboard.timing` (stage timings behind
``LAUNCHGAP_APP_TIMING``), and one module per page under ``app/views``. Analysis is done
only by :mod:`analyzer` functions.
"""
from __future__ import annotations

from pathlib import Path

APP_DIR = Path(__file__).resolve().parent
MAIN_SCRIPT = APP_DIR / "main.py"
