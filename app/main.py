"""launchgap dashboard: the entry script ``launchgap app`` runs with Streamlit.

One ``st.navigation`` over seven pages (modules under ``app/views``): Traces, Diagnosis,
Compare, Ranks (tensor-parallel jobs), Capture plan, Server (server logs and ``/metrics``
scrapes), Fleet (``launchgap fleet`` results).
A new session starts with the bundled samples loaded.
"""
from __future__ import annotations

import streamlit as st

from launchgap.dashboard import APP_DIR
from launchgap.dashboard.timing import stage
from launchgap.dashboard.ui import start_session

# A local favicon: Material icons as favicons would be fetched from Google.
st.set_page_config(page_title="launchgap", page_icon=str(APP_DIR / "favicon.png"), layout="wide")

VIEWS = APP_DIR / "views"
pages = [
    st.Page(VIEWS / "traces.py", title="Traces", icon=":material/upload_file:", default=True),
    st.Page(VIEWS / "diagnosis.py", title="Diagnosis", icon=":material/troubleshoot:"),
    st.Page(VIEWS / "compare.py", title="Compare", icon=":material/compare_arrows:"),
    st.Page(VIEWS / "ranks.py", title="Ranks", icon=":material/view_column:"),
    st.Page(VIEWS / "plan.py", title="Capture plan", icon=":material/checklist:", url_path="plan"),
    st.Page(VIEWS / "server.py", title="Server", icon=":material/dns:", url_path="server"),
    st.Page(VIEWS / "fleet.py", title="Fleet", icon=":material/hub:"),
]
nav = st.navigation(pages)
start_session()
with st.sidebar:
    st.caption("launchgap: GPU launch gaps in decode traces. Traces you load stay in this browser session.")
with stage("page", page=getattr(nav, "_title", None) or getattr(nav, "url_path", "?")):
    nav.run()
