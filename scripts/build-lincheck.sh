#!/usr/bin/env bash
# Build llog-lincheck (tests/lincheck), the linearizability checker of the concurrent harness
# (tests/integration/test_concurrent.py, docs/RELIABILITY.md), into .tools/bin: a small Go program
# around Porcupine (github.com/anishathalye/porcupine, pinned in tests/lincheck/go.mod and go.sum),
# fetched through the Go module proxy. Rebuilt when its sources are newer than the binary (seconds).
# On failure the reason goes to .tools/llog-lincheck-unavailable, which the test suite reports.
set -uo pipefail

TOOL=llog-lincheck
TOOL_VAR=LLOG_LINCHECK_BIN
TOOL_TITLE="llog-lincheck (the concurrent harness's linearizability checker)"
how_to_get_it() {
  cat <<MSG
*** It is built from tests/lincheck with Go >= 1.25 (https://go.dev/dl/):
***   go -C tests/lincheck build -o $TOOLS_BIN/llog-lincheck .
MSG
}
# shellcheck source=scripts/tool-lookup.sh
source "$(dirname "$0")/tool-lookup.sh"

find_named_or_on_path
SRC="$ROOT/tests/lincheck"
binary="$TOOLS_BIN/llog-lincheck"
if [ -x "$binary" ] && [ -z "$(find "$SRC" -newer "$binary" -type f | head -n 1)" ]; then found "$binary"; fi
command -v go >/dev/null 2>&1 || unavailable "Go is not installed"
if ! out=$(go -C "$SRC" build -trimpath -o "$binary" . 2>&1); then
  unavailable "go build of tests/lincheck failed: $(printf '%s' "$out" | tail -n 3 | tr '\n' ' ')"
fi
found "$binary"
