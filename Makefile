# Two commands do all the set-up on a fresh machine: `make demo` and `make test`.
SHELL := /bin/bash
PYTHON ?= $(shell command -v python3.12 >/dev/null 2>&1 && echo python3.12 || echo python3)
VENV := .venv
BIN := $(VENV)/bin
# Tests and benchmarks run against PostgreSQL and a Redis database of their own: each run claims
# a free Redis database (scripts/own_services.py) and names its test database after it, so runs
# sharing this machine's servers never flush each other's data. TEST_REDIS_URL=... overrides.
TEST_DATABASE_URL ?= postgres://postgres@127.0.0.1:5432/postgres
OWN := $(BIN)/python scripts/own_services.py --

# `make fuzz`: schemathesis over the API's OpenAPI schema, this many examples per operation.
FUZZ_EXAMPLES ?= 100

# TypeScript MCP SDK server for the gateway's classification tests (tests/mcp/ts), by its own
# package-lock.json; without npm the tests that need it skip and say so.
MCP_TS := tests/mcp/ts

.PHONY: venv mcp1 mcp-ts services system-packages browser-deps screenshots test fuzz lint typecheck bench demo example sdk clean replay-check replay-ways

venv: $(BIN)/.installed

$(BIN)/.installed: requirements.lock pyproject.toml sdk/python/pyproject.toml
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 12) else "Python 3.12+ is needed (found " + sys.version.split()[0] + "); install it, e.g. pyenv install 3.12")'
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -r requirements.lock
	$(BIN)/python -m pip install --quiet --no-deps --no-build-isolation -e sdk/python
	$(BIN)/python -m pip install --quiet --no-deps -e .
	@touch $@

services:
	@scripts/ensure_services.sh

system-packages:
	@scripts/ensure_system_packages.sh

# mcp 1.x in a venv of its own, for the test that checks guard_session against the 1.x API.
mcp1: $(VENV)-mcp1/.installed

$(VENV)-mcp1/.installed: requirements-mcp1.lock
	$(PYTHON) -m venv $(VENV)-mcp1
	$(VENV)-mcp1/bin/python -m pip install --quiet -r requirements-mcp1.lock
	@touch $@

mcp-ts: $(MCP_TS)/node_modules/.installed

$(MCP_TS)/node_modules/.installed: $(MCP_TS)/package-lock.json
	@if command -v npm >/dev/null 2>&1; then \
	  (cd $(MCP_TS) && timeout 300 npm ci --no-audit --no-fund --silent) && touch $@ \
	    || echo "warning: npm ci in $(MCP_TS) failed; the TypeScript MCP server tests will skip" >&2; \
	else echo "warning: no npm; the TypeScript MCP server tests will skip" >&2; fi

# axe-core for the browser tests' accessibility checks, from npm at the version the lock pins.
AXE := tests/browser/node_modules/axe-core/axe.min.js

browser-deps: $(AXE)

$(AXE): tests/browser/package.json tests/browser/package-lock.json
	@if command -v npm >/dev/null 2>&1; then \
	  timeout 300 npm ci --prefix tests/browser --no-audit --no-fund --loglevel=error && touch $@; \
	else echo "warning: npm missing: the accessibility checks will skip (apt-get install npm)" >&2; fi

test: venv mcp1 services system-packages mcp-ts browser-deps
	DATABASE_URL=$(TEST_DATABASE_URL) $(OWN) $(BIN)/pytest $(PYTEST_ARGS)

# docs/screenshots/: the main pages at 1440 px and the board, a tool, an incident and Outages at 390.
screenshots:
	BP_SCREENSHOTS=1 $(MAKE) test PYTEST_ARGS="tests/browser/test_screenshots.py -q -p no:cacheprovider"

# The long fuzz pass (a few minutes); `make test` runs the same test with 10 examples.
fuzz: venv services
	BP_FUZZ_EXAMPLES=$(FUZZ_EXAMPLES) DATABASE_URL=$(TEST_DATABASE_URL) $(OWN) $(BIN)/pytest tests/fuzz -q -rxX $(PYTEST_ARGS)

lint: venv
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/python scripts/import_graph.py --check

typecheck: venv
	$(BIN)/mypy breakers runs controlplane sdk/python/src/breaker_panel

bench: venv services
	DATABASE_URL=$(TEST_DATABASE_URL) $(OWN) bench/run_all.sh

demo: venv
	@scripts/demo.sh

# The outage replay's figures on a quiet and on a busy machine (about 6 minutes).
replay-check: venv
	@scripts/replay_check.sh

# The outage replay with prompt caching on, per provider, mode and way (about 40 minutes).
replay-ways: venv
	@scripts/replay_ways.sh

example: venv
	$(BIN)/python -m breaker_panel.example

# The agent SDK as its own wheel (breaker-panel-sdk, no dependencies) into dist/.
sdk: venv
	$(BIN)/python -m pip wheel --quiet --no-deps --no-build-isolation --wheel-dir dist sdk/python

clean:
	rm -rf $(VENV) $(VENV)-mcp1 $(MCP_TS)/node_modules .pytest_cache .mypy_cache .ruff_cache .hypothesis
