# Quick start: `make app` (dashboard on the bundled samples) and `make test` (whole suite).
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
HOST   ?= 127.0.0.1
PORT   ?= 8501

.PHONY: app lint test test-fast browser-deps build-deps fuzz bench bench-fleet screenshots clean

# Debian packages through apt, as root or through sudo (a fresh machine has neither chromium nor,
# often, python3-venv).
APT_INSTALL = SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
	  $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq

$(BIN)/python:
	$(PYTHON) -m venv $(VENV) || { rm -rf $(VENV); \
	  echo "installing Debian python3-venv to create $(VENV)"; $(APT_INSTALL) python3-venv >/dev/null && \
	  $(PYTHON) -m venv $(VENV); }
	$(BIN)/python -m pip install -q --upgrade pip

# Stamps re-run the install when pyproject.toml or the loader's C scan changes (it is compiled there).
NATIVE := analyzer/loaders/kineto/_scan.c

# An editable install leaves the package's own modules uncompiled (a wheel install compiles them):
# compiled here, so no command recompiles ~60 modules on every start where the environment sets
# PYTHONDONTWRITEBYTECODE (about 0.15 s of each CLI run on the bench VM).
COMPILE = $(BIN)/python -m compileall -q analyzer app >/dev/null

# The loader's C scan is compiled at install: a C compiler and the interpreter's headers (Debian's
# gcc and python3-dev when missing). Without them pip skips it and msgspec reads every trace.
build-deps:
	@command -v cc >/dev/null 2>&1 || command -v gcc >/dev/null 2>&1 || { \
	  echo "installing Debian gcc to compile the loader's C scan"; $(APT_INSTALL) gcc >/dev/null; }
	@$(PYTHON) -c "import os, sys, sysconfig; sys.exit(not os.path.exists(os.path.join(sysconfig.get_paths()['include'], 'Python.h')))" || { \
	  echo "installing Debian python3-dev to compile the loader's C scan"; $(APT_INSTALL) python3-dev >/dev/null; }

$(VENV)/.installed-app: pyproject.toml $(NATIVE) | $(BIN)/python build-deps
	$(BIN)/python -m pip install -q -e '.[app]'
	$(COMPILE)
	touch $@

$(VENV)/.installed-test: pyproject.toml $(NATIVE) | $(BIN)/python build-deps
	$(BIN)/python -m pip install -q -e '.[test]'
	$(COMPILE)
	touch $@

app: $(VENV)/.installed-app
	$(BIN)/launchgap app --host $(HOST) --port $(PORT)

# Browser tests drive Debian's chromium (never a downloaded browser).
browser-deps:
	@command -v chromium >/dev/null 2>&1 || { \
	  echo "installing Debian chromium for the browser tests"; $(APT_INSTALL) chromium >/dev/null; }

# Hypothesis profiles (tests/conftest.py). The suite runs derandomized: the same examples every
# run, so a random search never decides whether a change lands.
CI_HYPOTHESIS = LAUNCHGAP_HYPOTHESIS_PROFILE=ci LAUNCHGAP_HYPOTHESIS_EXAMPLES=

lint: $(VENV)/.installed-test
	$(BIN)/ruff check analyzer app tests bench

test: $(VENV)/.installed-test browser-deps lint
	$(CI_HYPOTHESIS) $(BIN)/python -m pytest -q

test-fast: $(VENV)/.installed-test
	$(CI_HYPOTHESIS) $(BIN)/python -m pytest -q -m "not browser and not slow"

# Every hypothesis test (fuzzers, properties, planner, loader equivalence), fresh seeds, 5000
# examples each (`make fuzz FUZZ_EXAMPLES=500` for fewer). A failure found here becomes an
# @example or a corpus file (docs/fuzzing.md).
FUZZ_EXAMPLES ?=
fuzz: $(VENV)/.installed-test
	LAUNCHGAP_HYPOTHESIS_PROFILE=fuzz LAUNCHGAP_HYPOTHESIS_EXAMPLES=$(FUZZ_EXAMPLES) \
	  $(BIN)/python -m pytest -q -m hypothesis tests

bench: $(VENV)/.installed-test
	$(COMPILE)
	$(BIN)/python bench/bench.py --sizes 50 100 200 400 --formats json gz --vs-hta

clean:
	rm -rf $(VENV) .pytest_cache test-artifacts bench-out build analyzer/loaders/*.so analyzer/loaders/kineto/*.so

bench-fleet: $(VENV)/.installed-test
	$(BIN)/python bench/bench_fleet.py

screenshots: $(VENV)/.installed-test browser-deps
	$(BIN)/python -m tests.e2e.screenshots docs/screenshots
