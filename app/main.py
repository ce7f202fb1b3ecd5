"""launchgap dashboard: the entry script ``launchgap app`` runs with Streamlit.

One ``st.navigation`` over six pages (modules under ``app/views``): Traces, Diagnosis,
Compare, Ranks (tensor-parallel jobs), Capture plan, Fleet (``launchgap fleet`` results).
A new session starts with the bundled samples loaded.
"""
from __future__ import annotations

import sys
from pathlib import Path

import streamlit as st

# Streamlit puts this script's folder, not the project root, on sys.path; make `import app`
# find this package (not a namespace left by an older editable install) when run from a checkout.
_ROOT = str(Path(__file__).resolve().parents[1])
if _ROOT not in sys.path:
    sys.path.insert(0, _ROOT)

from launchgap.dashboard import APP_DIR  # noqa: E402
from launchgap.dashboard.ui import start_session  # noqa: E402

# A local favicon: Material icons as favicons would be fetched from Google.
st.set_page_config(page_title="launchgap", page_icon=str(APP_DIR / "favicon.png"), layout="wide")

VIEWS = APP_DIR / "views"
pages = [
    st.Page(VIEWS / "traces.py", title="Traces", icon=":material/upload_file:", default=True),
    st.Page(VIEWS / "diagnosis.py", title="Diagnosis", icon=":material/troubleshoot:"),
    st.Page(VIEWS / "compare.py", title="Compare", icon=":material/compare_arrows:"),
    st.Page(VIEWS / "ranks.py", title="Ranks", icon=":material/view_column:"),
    st.Page(VIEWS / "plan.py", title="Capture plan", icon=":material/checklist:", url_path="plan"),
    st.Page(VIEWS / "fleet.py", title="Fleet", icon=":material/hub:"),
]
nav = st.navigation(pages)
start_session()
with st.sidebar:
    st.caption("launchgap: GPU launch gaps in decode traces. Traces you load stay in this browser session.")
nav.run()
