# llog developer commands. `make test` and `make dev` install what is missing first.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-$(shell cat requirements-dev.txt requirements-infra.txt llog_layer/pyproject.toml client/pyproject.toml pyproject.toml | cksum | cut -d' ' -f1)
NPM_STAMP := node_modules/.installed-$(shell cat package-lock.json | cksum | cut -d' ' -f1)
CDK := AWS_EC2_METADATA_DISABLED=true CDK_DISABLE_CLI_TELEMETRY=true JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION=20 \
	node_modules/.bin/cdk

.PHONY: help setup oxia oxia-proto versitygw lincheck rie iceberg chromium wrk sdks screenshots test lint typecheck pytest synth deploy-check dev dev-reset serve invoke glue-local glue-sql bench scale-run load smoke soak clean

help:
	@echo "make setup   - virtualenv, pinned dependencies, the Oxia server, VersityGW, llog-lincheck, the Lambda emulator, Chromium,"
	@echo "               wrk and the Kinesis API's SDK checks (tests/sdk: Java with Maven, JavaScript with npm) (idempotent)"
	@echo "make test    - setup, then ruff, mypy and the whole pytest suite"
	@echo "make dev     - setup, then run the whole system locally (Oxia, S3 (VersityGW), HTTP API on :8080, compaction);"
	@echo "               its data (.dev/oxia, .dev/s3) is kept across restarts; LLOG_DEV_FRONT=lambda make dev serves :8080"
	@echo "               through the dev stage's REST API and its functions as cdk synth builds them (Lambda emulator)"
	@echo "make dev-reset - delete make dev's data (.dev/oxia and .dev/s3 together); refused while make dev runs"
	@echo "make invoke FN=<function> EVENT=<file> - run one Lambda handler on an event against the environment"
	@echo "make glue-local - export the make dev stack's compacted ranges to .dev/tables/records (Spark, local)"
	@echo "make glue-sql SQL='SELECT ...' - Spark SQL over that table (the view is called records)"
	@echo "make bench   - setup, then the benchmarks; results go to docs/PERFORMANCE.md"
	@echo "make scale-run [SCALE_ARGS='--rate 60 --duration 600'] - the background jobs at a compressed schedule against"
	@echo "               the scale model's prediction (docs/SCALE.md); writes docs/img/scale-run.png and its samples"
	@echo "make soak [SOAK_ARGS='--scale 10 --model-examples 100'] - the reliability harness at length (docs/RELIABILITY.md)"
	@echo "make load LOAD_ARGS='--rate 500 --duration 30' - load test of the HTTP API (make dev's :8080), then reconcile"
	@echo "make smoke URL=<ApiUrl> [SMOKE_ARGS='--sigv4-region <region>' | SMOKE_ARGS='--api-key <key>'] - check a deployed"
	@echo "               (or make dev's) API end to end: the README's produce and consume, the client, a group; deletes its topics"
	@echo "make synth   - synthesize the CDK app offline (dev and prod shapes), checked by cdk-nag"
	@echo "make deploy-check - before a first deploy, offline: synth and cdk-nag, cfn-lint over every template variant,"
	@echo "               the functions as built under the Lambda emulator, make smoke through the dev stage's REST API"
	@echo "make oxia-proto - re-generate llog_layer/llog/store/oxia_proto from Oxia's client.proto (needs Go)"
	@echo "make screenshots - regenerate docs/img/console-*.png: the console (http://127.0.0.1:8080/console) on sample data"

setup: $(STAMP) $(NPM_STAMP) oxia versitygw lincheck rie iceberg chromium wrk sdks

$(STAMP):
	@$(PYTHON) -c 'import sys; sys.exit(sys.version_info < (3, 11))' || \
	  { echo "Python >= 3.11 is required (found $$($(PYTHON) --version 2>&1))"; exit 1; }
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --disable-pip-version-check -r requirements-dev.txt -r requirements-infra.txt
	$(PY) -m pip install --quiet --disable-pip-version-check --no-deps -e llog_layer -e client -e .
	@rm -f $(VENV)/.installed-*
	@touch $@

# Found, or built from github.com/oxia-db/oxia at v0.17.1 with Go and git into .tools/bin (once, 3-5 minutes;
# LLOG_OXIA_REPO names another repository). Without an Oxia server the suite still runs; the tests that need
# one are reported as skipped with the reason. LLOG_REQUIRE_OXIA=1 makes it an error.
oxia:
	@scripts/install-oxia.sh || [ -z "$${LLOG_REQUIRE_OXIA:-}" ] || exit 1

# VersityGW, the S3 server of make dev and of the S3-compatibility tests: go-installed
# into .tools/bin once (about 2 minutes). Without it those tests are reported as
# skipped and make dev says why; LLOG_REQUIRE_VERSITYGW=1 makes it an error.
versitygw:
	@scripts/install-versitygw.sh || [ -z "$${LLOG_REQUIRE_VERSITYGW:-}" ] || exit 1

# llog-lincheck, the concurrent harness's linearizability checker (Porcupine, built from tests/lincheck with Go,
# seconds). Without it the harness's tests are reported as skipped; LLOG_REQUIRE_LINCHECK=1 makes that an error.
lincheck:
	@scripts/build-lincheck.sh || [ -z "$${LLOG_REQUIRE_LINCHECK:-}" ] || exit 1

# The functions as Lambda runs them (tests/functions/test_emulated.py): AWS's Runtime Interface Emulator,
# go-installed into .tools/bin once, and .venv-lambda-runtime (CPython 3.13, awslambdaric, the runtime's boto3).
# Without either those tests are reported as skipped; LLOG_REQUIRE_RIE=1 makes that an error.
rie:
	@{ scripts/install-rie.sh && scripts/lambda-runtime-venv.sh >/dev/null; } || [ -z "$${LLOG_REQUIRE_RIE:-}" ] || exit 1

# Iceberg's Spark runtime for the Iceberg export tests; without it they are reported as skipped.
iceberg:
	@scripts/fetch-iceberg.sh || [ -z "$${LLOG_REQUIRE_ICEBERG:-}" ] || exit 1

# Debian's Chromium, for the console's browser tests (tests/browser) and make screenshots. Without it
# they are reported as skipped; LLOG_REQUIRE_BROWSER=1 makes that an error.
chromium:
	@scripts/install-deb.sh chromium /usr/bin/chromium "tests/browser and make screenshots" || \
	  [ -z "$${LLOG_REQUIRE_BROWSER:-}" ] || exit 1

# Debian's wrk, the HTTP clients of bench/serve.py (bench/wrk.py). Without it its tests are reported as
# skipped; LLOG_REQUIRE_WRK=1 makes that an error.
wrk:
	@scripts/install-deb.sh wrk wrk "bench/serve.py (bench/wrk.py) and its tests" || \
	  [ -z "$${LLOG_REQUIRE_WRK:-}" ] || exit 1

# The Kinesis API's SDK checks (tests/integration/test_kinesis_sdk_*.py): tests/sdk/java built with Maven (the AWS
# SDK for Java v2) and tests/sdk/js installed with npm ci (the AWS SDK for JavaScript v3), each again only when its
# sources change. Without a JDK, Maven or Node.js those tests are reported as skipped; LLOG_REQUIRE_SDKS=1 makes
# that an error.
sdks:
	@scripts/build-sdk-checks.sh || [ -z "$${LLOG_REQUIRE_SDKS:-}" ] || exit 1

$(NPM_STAMP): package-lock.json
	@command -v npm >/dev/null || { echo "Node.js and npm are required for the CDK app (make synth) and the console's charts"; exit 1; }
	npm ci --no-audit --no-fund
	@rm -f node_modules/.installed-*
	@touch $@

lint: $(STAMP)
	$(VENV)/bin/ruff check .

typecheck: $(STAMP)
	$(VENV)/bin/mypy

# llog's Oxia messages and stub, generated from Oxia's client.proto v0.17.1 (tests/unit/test_oxia_proto.py checks them).
oxia-proto: $(STAMP)
	PY=$(PY) scripts/generate-oxia-proto.sh

# The slowest tests, printed after every run: make test has a 30-minute budget.
PYTEST_ARGS ?= --durations=40

pytest: setup
	$(PY) -m pytest $(PYTEST_ARGS)

synth: $(STAMP) $(NPM_STAMP)
	$(CDK) synth --quiet -c llog:stage=dev
	$(CDK) synth --quiet -c llog:stage=prod

test: setup lint typecheck pytest synth

# docs/DEPLOY.md, "Before the first deploy": what can be checked without an AWS account, in one command.
deploy-check: setup synth
	LLOG_REQUIRE_OXIA=1 LLOG_REQUIRE_RIE=1 $(PY) -m pytest -q -p no:cacheprovider tests/infra \
	  tests/functions/test_emulated.py tests/functions/test_lambda_front.py

dev: setup
	$(PY) scripts/dev.py

# Oxia's index and the S3 objects it points to go together: both or neither.
DEV_DIR := $(or $(LLOG_DEV_DIR),.dev)
dev-reset:
	@pid=$$(cat "$(DEV_DIR)/dev.pid" 2>/dev/null); \
	if [ -n "$$pid" ] && ps -p "$$pid" -o args= 2>/dev/null | grep -q 'scripts/dev.py'; then \
	  echo "make dev is running (pid $$pid): stop it (Ctrl-C) before make dev-reset"; exit 1; fi
	rm -rf "$(DEV_DIR)/oxia" "$(DEV_DIR)/s3" "$(DEV_DIR)/dev.pid"

# Against a running stack (make dev), or any LLOG_* environment.
serve: setup
	$(VENV)/bin/llog serve

# make invoke FN=produce EVENT=events/produce.json
invoke: setup
	@test -n "$(FN)" -a -n "$(EVENT)" || { echo "usage: make invoke FN=<function> EVENT=<event file>"; exit 2; }
	$(VENV)/bin/llog invoke $(FN) $(EVENT)

# The Glue export job run locally against `make dev` (same entry point and arguments as on Glue).
# TABLE_FORMAT=iceberg writes an Iceberg table (warehouse .dev/tables/iceberg, table glue_catalog.llog_dev.records).
TABLE_FORMAT ?= parquet
GLUE_OUTPUT = $(if $(filter iceberg,$(TABLE_FORMAT)),.dev/tables/iceberg,.dev/tables/records)
glue-local: setup
	LLOG_S3_ENDPOINT_URL=$${LLOG_S3_ENDPOINT_URL:-http://127.0.0.1:$${LLOG_DEV_S3_PORT:-4566}} \
	LLOG_S3_REGION_NAME=$${LLOG_S3_REGION_NAME:-us-east-1} \
	LLOG_S3_ACCESS_KEY_ID=$${LLOG_S3_ACCESS_KEY_ID:-testing} LLOG_S3_SECRET_ACCESS_KEY=$${LLOG_S3_SECRET_ACCESS_KEY:-testing} \
	LLOG_ICEBERG_JAR=.tools/jars/iceberg-spark-runtime-4.1_2.13-1.11.0.jar \
	$(PY) glue_jobs/export_job.py --JOB_NAME llog-export-local --llog_bucket $${LLOG_S3_BUCKET:-leaderless-log-wal} \
	  --llog_root_prefix $${LLOG_ROOT_PREFIX:-llog} --output_path $(GLUE_OUTPUT) --table_format $(TABLE_FORMAT) \
	  $(if $(filter iceberg,$(TABLE_FORMAT)),--database llog_dev --table records) $(GLUE_ARGS)

glue-sql: setup
	@test -n "$${SQL:-}" || { echo "usage: make glue-sql SQL='SELECT topic, date, count(*) FROM records GROUP BY 1, 2'"; exit 2; }
	@# through the environment: quotes and backticks in the query reach Spark untouched
	$(PY) scripts/spark_sql.py "$$SQL"

bench: setup
	-scripts/lambda-venv.sh >/dev/null
	$(PY) bench/run.py

# The scale model against a real run on local servers (docs/SCALE.md); exit 1 when they disagree by more than 25%.
scale-run: setup
	PATH=$(CURDIR)/.tools/bin:$$PATH $(PY) bench/scale_run.py --json docs/img/scale-run.json --plot docs/img/scale-run.png $(SCALE_ARGS)

# Fuzz and model tests with many more examples than make test; summary in .soak/report.json.
soak: setup
	$(PY) scripts/soak.py $(SOAK_ARGS)

# Against `make dev` (or any API: LOAD_ARGS="--url https://... --auth sigv4"); docs/LOAD_TEST.md.
load: $(STAMP)
	$(PY) bench/load.py $(LOAD_ARGS)

# After a deploy (docs/DEPLOY.md), or against make dev (URL=http://127.0.0.1:8080); scripts/smoke.py --help.
# Without a URL it is refused before setup runs.
smoke:
	@test -n "$(URL)" || { echo "usage: make smoke URL=https://<api-id>.execute-api.<region>.amazonaws.com/<stage>/" \
	  "[SMOKE_ARGS='--sigv4-region <region>' | SMOKE_ARGS='--api-key <key>']"; exit 2; }
	@$(MAKE) --no-print-directory $(STAMP)
	$(PY) scripts/smoke.py --url "$(URL)" $(SMOKE_ARGS)

# The console's pictures in docs/img/: a temporary stack (Oxia, moto S3, llog serve) with sample data, Chromium.
screenshots: setup
	$(PY) -m devserver.screenshots docs/img

clean:
	rm -rf $(VENV) .venv-lambda-runtime .tools .dev .soak .pytest_cache .mypy_cache .ruff_cache llog_layer/*.egg-info cdk.out node_modules
