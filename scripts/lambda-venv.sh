#!/usr/bin/env bash
# The Lambda runtime's Python environment, for the cold-start benchmark (bench/cold_start.py):
# CPython 3.13 (the runtime and layer target) with exactly the layer's packages
# (infra/layer-requirements.txt) plus the boto3 the runtime provides, pinned as in
# requirements-dev.txt. Nothing else: no moto, no pytest, no llog install (bench puts the
# repository and llog_layer on PYTHONPATH, as Lambda puts /var/task and /opt/python on sys.path).
#
# Idempotent: does nothing when .venv-lambda was built from the same requirements.
# Prints the venv's python on success; exits 1 (saying why) without CPython 3.13.
#   scripts/lambda-venv.sh            # LLOG_LAMBDA_PYTHON=/path/to/python3.13 to choose the interpreter
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
VENV="$ROOT/.venv-lambda"
LAYER_REQUIREMENTS="$ROOT/infra/layer-requirements.txt"
DEV_REQUIREMENTS="$ROOT/requirements-dev.txt"
# What the python3.13 runtime ships and the layer therefore leaves out (infra/layer-requirements.txt).
RUNTIME_PACKAGES='^(boto3|botocore|s3transfer|jmespath|urllib3)=='

is_313() { "$1" -c 'import sys; sys.exit(sys.version_info[:2] != (3, 13))' >/dev/null 2>&1; }
python=""
# A pyenv shim named python3.13 exists even when 3.13 is not selected, hence the version check.
for candidate in ${LLOG_LAMBDA_PYTHON:-} python3.13 "$HOME"/.pyenv/versions/3.13.*/bin/python3.13; do
  if is_313 "$candidate"; then python="$candidate"; break; fi
done
if [ -z "$python" ]; then
  echo "lambda-venv: no CPython 3.13 found (python3.13 on PATH, in pyenv, or LLOG_LAMBDA_PYTHON)" >&2
  exit 1
fi

requirements="$(grep -v '^#' "$LAYER_REQUIREMENTS"; grep -E "$RUNTIME_PACKAGES" "$DEV_REQUIREMENTS")"
stamp="$VENV/.installed-$(printf '%s\n%s' "$("$python" --version)" "$requirements" | cksum | cut -d' ' -f1)"
if [ ! -e "$stamp" ]; then
  [ -x "$VENV/bin/python" ] || "$python" -m venv "$VENV"
  # --no-deps: the list is the complete closure (see infra/layer-requirements.txt).
  printf '%s\n' "$requirements" | "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check \
    --no-deps -r /dev/stdin
  rm -f "$VENV"/.installed-*
  touch "$stamp"
fi
echo "$VENV/bin/python"
