"""Page scripts of the dashboard (run by st.navigation in app/main.py, not imported)."""
