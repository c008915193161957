#!/usr/bin/env bash
# The python3.13 Lambda runtime without the function and its layer, for the emulator tests
# (tests/functions/emulator.py): CPython 3.13, the runtime interface client awslambdaric (and its
# two dependencies), and the boto3 the managed runtime provides (pinned as in requirements-dev.txt).
# Nothing of llog's: the layer and the function code come from cdk.out, so an import the layer
# lacks fails here as it would on Lambda.
#
# Idempotent (a stamp of the interpreter and the pins). On failure the reason goes to
# .tools/lambda-runtime-unavailable, which the test suite reports.
#   scripts/lambda-runtime-venv.sh    # LLOG_LAMBDA_PYTHON=/path/to/python3.13 to choose the interpreter
set -uo pipefail

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
VENV="$ROOT/.venv-lambda-runtime"
REASON_FILE="$ROOT/.tools/lambda-runtime-unavailable"
# awslambdaric 4.2.2 (cp313 manylinux wheels) needs simplejson and snapshot-restore-py.
RIC_PINS='awslambdaric==4.2.2
simplejson==4.3.0
snapshot-restore-py==1.0.0'
RUNTIME_PACKAGES='^(boto3|botocore|s3transfer|jmespath|urllib3|python-dateutil|six)=='
mkdir -p "$ROOT/.tools"

unavailable() {
  printf '%s\n' "$1" > "$REASON_FILE"
  printf '\n*** The emulated Lambda runtime is not available: %s\n\n' "$1" >&2
  exit 3
}

is_313() { "$1" -c 'import sys; sys.exit(sys.version_info[:2] != (3, 13))' >/dev/null 2>&1; }
python=""
# A pyenv shim named python3.13 exists even when 3.13 is not selected, hence the version check.
for candidate in ${LLOG_LAMBDA_PYTHON:-} python3.13 "$HOME"/.pyenv/versions/3.13.*/bin/python3.13; do
  if is_313 "$candidate"; then python="$candidate"; break; fi
done
[ -n "$python" ] || unavailable "no CPython 3.13 (python3.13 on PATH, in pyenv, or LLOG_LAMBDA_PYTHON)"

requirements="$(printf '%s\n' "$RIC_PINS"; grep -E "$RUNTIME_PACKAGES" "$ROOT/requirements-dev.txt")"
stamp="$VENV/.installed-$(printf '%s\n%s' "$("$python" --version)" "$requirements" | cksum | cut -d' ' -f1)"
if [ ! -e "$stamp" ]; then
  rm -rf "$VENV"
  "$python" -m venv "$VENV" || unavailable "$python -m venv failed"
  # --no-deps: the list is the complete closure.
  printf '%s\n' "$requirements" | "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check \
    --no-deps --only-binary=:all: -r /dev/stdin || unavailable "pip install of awslambdaric and boto3 failed"
  touch "$stamp"
fi
rm -f "$REASON_FILE"
echo "$VENV/bin/python"
