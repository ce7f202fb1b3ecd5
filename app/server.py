"""The dashboard's server: Streamlit's ``st.App`` around :mod:`launchgap.dashboard.main`, with uploads streamed to a
private file (:class:`launchgap.dashboard.uploads.StagedUploadMiddleware`) instead of through Streamlit's memory.
``launchgap app`` runs this file with ``streamlit run``."""
import streamlit as st
from starlette.middleware import Middleware

from launchgap.dashboard.uploads import StagedUploadMiddleware

app = st.App("main.py", middleware=[Middleware(StagedUploadMiddleware)])
