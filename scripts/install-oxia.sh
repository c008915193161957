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
TOOL=oxia
TOOL_VAR=OXIA_BIN
TOOL_TITLE="The Oxia server $OXIA_VERSION"
how_to_get_it() {
  cat <<MSG
*** Build it from the public repository (Go >= 1.26, 3-5 minutes on 2 cores):
***   git clone --depth 1 --branch $OXIA_VERSION https://github.com/oxia-db/oxia /tmp/oxia-src
***   CGO_ENABLED=0 go -C /tmp/oxia-src build -trimpath -ldflags "-s -w" -o $TOOLS_BIN/oxia ./cmd
*** or point OXIA_BIN at an oxia $OXIA_VERSION binary, or put one on PATH, then run make setup again.
*** (The container image oxia/oxia:${OXIA_VERSION#v} runs the same server, as the deployed stack does.)
*** For tests only: LLOG_TEST_OXIA_ADDRESS=host:port uses a running Oxia server.
MSG
}
# shellcheck source=scripts/tool-lookup.sh
source "$(dirname "$0")/tool-lookup.sh"

find_named_or_on_path
if [ -x "$TOOLS_BIN/oxia" ]; then found "$TOOLS_BIN/oxia"; fi
unavailable "no oxia binary in OXIA_BIN, on PATH or in .tools/bin"
