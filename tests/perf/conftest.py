"""The benchmark scripts here are run by hand, never collected as tests."""
collect_ignore_glob = ["*.py"]
