# llog developer commands. `make test` and `make dev` install what is missing first.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-$(shell cat requirements-dev.txt requirements-infra.txt llog_layer/pyproject.toml | cksum | cut -d' ' -f1)
NPM_STAMP := node_modules/.installed-$(shell cat package-lock.json | cksum | cut -d' ' -f1)
CDK := AWS_EC2_METADATA_DISABLED=true CDK_DISABLE_CLI_TELEMETRY=true JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION=20 \
	node_modules/.bin/cdk

.PHONY: help setup oxia test lint typecheck pytest synth dev serve invoke bench clean

help:
	@echo "make setup   - virtualenv, pinned dependencies and the Oxia server (idempotent)"
	@echo "make test    - setup, then ruff, mypy and the whole pytest suite"
	@echo "make dev     - setup, then run the whole system locally (Oxia, S3, HTTP API on :8080, compaction)"
	@echo "make invoke FN=<function> EVENT=<file> - run one Lambda handler on an event against the environment"
	@echo "make bench   - setup, then the benchmarks; results go to docs/PERFORMANCE.md"
	@echo "make synth   - synthesize the CDK app offline (dev and prod shapes), checked by cdk-nag"

setup: $(STAMP) oxia

$(STAMP):
	@$(PYTHON) -c 'import sys; sys.exit(sys.version_info < (3, 11))' || \
	  { echo "Python >= 3.11 is required (found $$($(PYTHON) --version 2>&1))"; exit 1; }
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --disable-pip-version-check -r requirements-dev.txt -r requirements-infra.txt
	$(PY) -m pip install --quiet --disable-pip-version-check --no-deps -e llog_layer
	@rm -f $(VENV)/.installed-*
	@touch $@

# Without an Oxia server the suite still runs; the tests that need one are
# reported as skipped with the reason. LLOG_REQUIRE_OXIA=1 makes it an error.
oxia:
	@scripts/install-oxia.sh || [ -z "$${LLOG_REQUIRE_OXIA:-}" ] || exit 1

$(NPM_STAMP): package-lock.json
	@command -v npm >/dev/null || { echo "Node.js and npm are required for the CDK app (make synth)"; exit 1; }
	npm ci --no-audit --no-fund
	@rm -f node_modules/.installed-*
	@touch $@

lint: $(STAMP)
	$(VENV)/bin/ruff check .

typecheck: $(STAMP)
	$(VENV)/bin/mypy

pytest: setup
	$(PY) -m pytest $(PYTEST_ARGS)

synth: $(STAMP) $(NPM_STAMP)
	$(CDK) synth --quiet -c llog:stage=dev
	$(CDK) synth --quiet -c llog:stage=prod

test: setup lint typecheck pytest synth

dev: setup
	$(PY) scripts/dev.py

# Against a running stack (make dev), or any LLOG_* environment.
serve: setup
	$(VENV)/bin/llog serve

# make invoke FN=produce EVENT=events/produce.json
invoke: setup
	@test -n "$(FN)" -a -n "$(EVENT)" || { echo "usage: make invoke FN=<function> EVENT=<event file>"; exit 2; }
	$(VENV)/bin/llog invoke $(FN) $(EVENT)

bench: setup
	$(PY) bench/run.py

clean:
	rm -rf $(VENV) .tools .dev .pytest_cache .mypy_cache .ruff_cache llog_layer/*.egg-info cdk.out node_modules
