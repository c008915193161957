#!/usr/bin/env bash
# Make an Oxia server binary available at .tools/bin/oxia (or use one already there).
#
# Order: $OXIA_BIN, an `oxia` on PATH, .tools/bin/oxia, then
# `go install github.com/oxia-db/oxia/cmd@v0.14.4` into .tools/bin (the binary
# comes out named `cmd`). On failure it writes the reason to
# .tools/oxia-unavailable, which the test suite and `make dev` report.
set -uo pipefail

OXIA_VERSION=v0.14.4
ROOT=$(cd "$(dirname "$0")/.." && pwd)
TOOLS_BIN="$ROOT/.tools/bin"
REASON_FILE="$ROOT/.tools/oxia-unavailable"
mkdir -p "$TOOLS_BIN"

unavailable() {
  printf '%s\n' "$1" > "$REASON_FILE"
  cat >&2 <<MSG

*** The Oxia server $OXIA_VERSION is not available: $1
*** To fix, do one of:
***   - install Go >= 1.24.2 (https://go.dev/dl/) and run 'make setup' again;
***   - point OXIA_BIN at an oxia $OXIA_VERSION binary, or put 'oxia' on PATH;
***   - for tests only: export LLOG_TEST_OXIA_ADDRESS=host:port of a running Oxia server.
*** Tests that need Oxia are reported as skipped with this reason.

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

command -v go >/dev/null 2>&1 || unavailable "Go is not installed (needed to install the Oxia server)"

echo "installing oxia $OXIA_VERSION with go install ..."
log=$(GOBIN="$TOOLS_BIN" go install "github.com/oxia-db/oxia/cmd@$OXIA_VERSION" 2>&1)
status=$?
if [ $status -ne 0 ]; then
  echo "$log" >&2
  # Keep the reason short and free of the proxy's address.
  reason=$(echo "$log" | tr '\n' ' ' | sed -E 's#https?://[^ ]+#<module proxy>#g; s/  +/ /g' | cut -c1-300)
  unavailable "go install github.com/oxia-db/oxia/cmd@$OXIA_VERSION failed: $reason"
fi
mv -f "$TOOLS_BIN/cmd" "$TOOLS_BIN/oxia"
found "$TOOLS_BIN/oxia (installed)"
