# Quick start: `make app` (dashboard on the bundled samples) and `make test` (whole suite).
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
HOST   ?= 127.0.0.1
PORT   ?= 8501

.PHONY: app lint test test-fast browser-deps fuzz bench bench-fleet screenshots clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip

# Stamps re-run the install when pyproject.toml changes.
$(VENV)/.installed-app: pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install -q -e '.[app]'
	touch $@

$(VENV)/.installed-test: pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install -q -e '.[test]'
	touch $@

app: $(VENV)/.installed-app
	$(BIN)/launchgap app --host $(HOST) --port $(PORT)

# Browser tests drive Debian's chromium (never a downloaded browser).
browser-deps:
	@command -v chromium >/dev/null 2>&1 || { \
	  echo "installing Debian chromium for the browser tests"; \
	  SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
	  $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq chromium >/dev/null; }

lint: $(VENV)/.installed-test
	$(BIN)/ruff check analyzer app tests

test: $(VENV)/.installed-test browser-deps lint
	$(BIN)/python -m pytest -q

test-fast: $(VENV)/.installed-test
	$(BIN)/python -m pytest -q -m "not browser and not slow"

fuzz: $(VENV)/.installed-test
	LAUNCHGAP_FUZZ_EXAMPLES=5000 $(BIN)/python -m pytest -q tests -k fuzz

bench: $(VENV)/.installed-test
	$(BIN)/python tests/perf/bench.py --sizes 50 100 200 400 --formats json gz --vs-hta

clean:
	rm -rf $(VENV) .pytest_cache test-artifacts bench-out

bench-fleet: $(VENV)/.installed-test
	$(BIN)/python tests/perf/bench_fleet.py

screenshots: $(VENV)/.installed-test browser-deps
	$(BIN)/python -m tests.e2e.screenshots docs/screenshots
