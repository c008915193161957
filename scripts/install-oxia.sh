#!/usr/bin/env bash
# Find the Oxia server v0.17.1 for the tests and `make dev`, or say exactly how to get one.
#
# Order: $OXIA_BIN, an `oxia` on PATH, .tools/bin/oxia. Nothing is downloaded:
# since v0.15.0 `go install github.com/oxia-db/oxia/cmd@...` cannot build the
# server (the repository is a Go workspace), so it is built from a clone.
# On failure the reason goes to .tools/oxia-unavailable, which the test
# suite and `make dev` report.
set -uo pipefail

OXIA_VERSION=v0.17.1
ROOT=$(cd "$(dirname "$0")/.." && pwd)
TOOLS_BIN="$ROOT/.tools/bin"
REASON_FILE="$ROOT/.tools/oxia-unavailable"
mkdir -p "$TOOLS_BIN"

unavailable() {
  printf '%s\n' "$1" > "$REASON_FILE"
  cat >&2 <<MSG

*** The Oxia server $OXIA_VERSION is not available: $1
*** Build it from the public repository (Go >= 1.26, 3-5 minutes on 2 cores):
***   git clone --depth 1 --branch $OXIA_VERSION https://github.com/oxia-db/oxia /tmp/oxia-src
***   CGO_ENABLED=0 go -C /tmp/oxia-src build -trimpath -ldflags "-s -w" -o $TOOLS_BIN/oxia ./cmd
*** or point OXIA_BIN at an oxia $OXIA_VERSION binary, or put one on PATH, then run make setup again.
*** (The container image oxia/oxia:${OXIA_VERSION#v} runs the same server, as the deployed stack does.)
*** For tests only: LLOG_TEST_OXIA_ADDRESS=host:port uses a running Oxia server.

MSG
  exit 3
}

found() {
  rm -f "$REASON_FILE"
  echo "oxia: $1"
  exit 0
}

if [ -n "${OXIA_BIN:-}" ]; then
  [ -x "$OXIA_BIN" ] && found "$OXIA_BIN (OXIA_BIN)"
  unavailable "OXIA_BIN=$OXIA_BIN is not an executable file"
fi
if command -v oxia >/dev/null 2>&1; then found "$(command -v oxia) (PATH)"; fi
if [ -x "$TOOLS_BIN/oxia" ]; then found "$TOOLS_BIN/oxia"; fi
unavailable "no oxia binary in OXIA_BIN, on PATH or in .tools/bin"
