# One entry point for humans and CI. Everything the project needs is installed from here.
SHELL := /bin/bash
export PREFECT_SERVER_ANALYTICS_ENABLED := false
export DO_NOT_TRACK := 1
export UV_PYTHON := 3.11
export ERASURE_HOME ?= $(CURDIR)/.erasure
export PREFECT_HOME ?= $(ERASURE_HOME)/prefect

VENV := .venv
PY := $(VENV)/bin/python
UV := python3 -m uv

.PHONY: help bootstrap demo test quick lint typecheck contracts unit redteam serve bench clean verifier tools

help: ## list the targets
	@grep -E '^[a-z-]+:.*##' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-12s %s\n", $$1, $$2}'

# Bytecode is compiled here, once: where PYTHONDONTWRITEBYTECODE is set (as on these machines), Python
# would otherwise compile every module it imports from source in every process (1.7 s of each
# `erasure request run`; `erasure --help` went from 0.35 s to 0.07 s with it).
$(VENV)/.synced: pyproject.toml uv.lock
	python3 -m uv --version >/dev/null 2>&1 || python3 -m pip install --quiet --disable-pip-version-check uv
	$(UV) sync --frozen --all-groups --quiet --compile-bytecode
	@touch $@

bootstrap: $(VENV)/.synced ## create .venv from the lock file (and compile the project's bytecode)
	@$(PY) -m compileall -q wire erasure memory tasks probes proof service flows cli >/dev/null

lint: bootstrap ## ruff: the rules, and the tree formatted (`ruff format` fixes it)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

typecheck: bootstrap ## mypy strict on every package, tests and bench included
	$(VENV)/bin/mypy

contracts: bootstrap ## import-linter contracts (the import rules of DESIGN.md)
	$(VENV)/bin/lint-imports

# The tiers are marks that tests/conftest.py sets from the fixtures and helpers a test reaches
# (tests/tiers.py). `make quick` runs the tests in none of them, with a tenth of the hypothesis budget.
QUICK_TESTS := not (prefect or framework or cascade or postgres or browser or redteam or slow)

quick: bootstrap ## the inner loop: ruff, contracts, and the tests in no tier (no Prefect, framework, cascade, PostgreSQL, browser, red team, slow), a tenth of the hypothesis budget, on every core: a fresh clone ran 1,446 tests in 2 min 17 s on 2 CPUs, bootstrap and lint included (2026-12-05)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/lint-imports
	@mkdir -p $(PREFECT_HOME)
	$(VENV)/bin/pytest -q -p no:cacheprovider -n auto -m "$(QUICK_TESTS)"

# Four workers on two CPUs: the suite waits on servers and subprocesses a third of its time (a full run on
# three used 1.3-1.6 CPUs of 2). Each worker has its own Prefect test server (the session fixture); a file
# stays on one worker (its module fixtures). tests/conftest.py orders the files longest first by their
# measured seconds (tests/durations.json), and --no-loadscope-reorder keeps that order (xdist's own
# reorders files by their number of tests, which handed the one-test red team shards out last).
UNIT_WORKERS ?= 4

unit: bootstrap ## the whole test suite at CI's hypothesis budget, on UNIT_WORKERS workers (4); the red teams at CI size (2 windows of 50 generated scenarios and 400 document scenarios in windows of at most 50: 500 generated scenarios, every attack drawn)
	@mkdir -p $(PREFECT_HOME)
	ERASURE_TEST_FULL=1 REDTEAM_EXAMPLES=2 REDTEAM_DOCS_SCENARIOS=400 $(VENV)/bin/pytest -q -p no:cacheprovider -n $(UNIT_WORKERS) --dist loadfile --no-loadscope-reorder --durations=25

redteam: bootstrap ## only the generated red teams, at full size: 6 windows (300 scenarios) and 500 document scenarios
	@mkdir -p $(PREFECT_HOME)
	ERASURE_TEST_FULL=1 REDTEAM_EXAMPLES=6 REDTEAM_DOCS_SCENARIOS=500 $(VENV)/bin/pytest -q -m redteam_generated

test: lint typecheck contracts browser postgres ocr tools unit ## everything CI runs

demo: bootstrap ## build a demo store, submit a request, erase, verify, sign, attest, verify offline
	$(VENV)/bin/python -m cli.demo

# Only the standard library builds it (no .venv needed): a regulator can rebuild it from a checkout and
# compare its sha256 with the one `erasure export` shipped.
where: ## print the path of the erasure command (it is not on PATH: run it by this path, or add .venv/bin to PATH)
	@echo $(CURDIR)/$(VENV)/bin/erasure

verifier: ## the offline verifier as one file: dist/erasure-verify.pyz (python dist/erasure-verify.pyz PACK ...)
	python3 -m proof.verifier_zipapp dist/erasure-verify.pyz

bench: bootstrap ## the benchmark tables (slow: builds large stores)
	$(PY) bench/build_store.py

clean: ## remove local state (not evidence)
	rm -rf $(ERASURE_HOME)

.PHONY: browser postgres ocr
serve: bootstrap ## the compliance team's console: Prefect server + UI on 127.0.0.1:4200, deployments, worker (Ctrl-C stops); POSTGRES=1: Prefect on PostgreSQL
	$(PY) -m cli.serve $(if $(filter-out 0,$(POSTGRES)),--postgres)

browser: ## Debian's chromium for the real-browser UI test (installed only when /usr/bin/chromium is missing)
	@test -x /usr/bin/chromium || { $(if $(filter 0,$(shell id -u)),,sudo) apt-get update && \
	  $(if $(filter 0,$(shell id -u)),,sudo) env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends chromium; }
	@/usr/bin/chromium --version

postgres: ## Debian's PostgreSQL (Prefect's server, `erasure server start --postgres`) and its pg_repack (the langgraph-postgres eraser's online rewrite); each installed only when missing
	@ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || { $(if $(filter 0,$(shell id -u)),,sudo) apt-get update && \
	  $(if $(filter 0,$(shell id -u)),,sudo) env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends postgresql; }
	@v=$$(ls -d /usr/lib/postgresql/*/bin/initdb | sed 's|/usr/lib/postgresql/\([0-9]*\)/.*|\1|' | sort -n | tail -1); \
	  { ls /usr/lib/postgresql/$$v/bin/pg_repack && ls /usr/share/postgresql/$$v/extension/pg_repack.control; } >/dev/null 2>&1 || { \
	  $(if $(filter 0,$(shell id -u)),,sudo) apt-get update && \
	  $(if $(filter 0,$(shell id -u)),,sudo) env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends postgresql-$$v-repack; }
	@ls /usr/lib/postgresql/*/bin/initdb /usr/lib/postgresql/*/bin/pg_repack

tools: ## Debian's jq, openssl and curl: the regulator's manual route (VERIFY.md) and the metrics attack are tested with them (installed only when missing)
	@command -v jq >/dev/null && command -v openssl >/dev/null && command -v curl >/dev/null || { \
	  $(if $(filter 0,$(shell id -u)),,sudo) apt-get update && \
	  $(if $(filter 0,$(shell id -u)),,sudo) env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends jq openssl curl; }
	@jq --version && openssl version && curl --version | head -1

ocr: ## Debian's tesseract-ocr: the probes read text in images (installed only when tesseract is missing)
	@command -v tesseract >/dev/null || { $(if $(filter 0,$(shell id -u)),,sudo) apt-get update && \
	  $(if $(filter 0,$(shell id -u)),,sudo) env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends tesseract-ocr tesseract-ocr-eng; }
	@tesseract --version 2>&1 | head -1
