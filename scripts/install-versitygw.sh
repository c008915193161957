#!/usr/bin/env bash
# Find or install VersityGW v1.8.0, the S3-compatible server of `make dev`
# (objects on disk under .dev/s3) and of the S3-compatibility tests.
#
# Order: $VERSITYGW_BIN, a `versitygw` on PATH, .tools/bin/versitygw; else
# `go install` it into .tools/bin from the Go module proxy (Go >= 1.25,
# about 2 minutes on 2 cores, once: the binary stays in .tools/bin).
# On failure the reason goes to .tools/versitygw-unavailable, which the
# test suite and `make dev` report.
set -uo pipefail

VERSITYGW_VERSION=v1.8.0
MODULE=github.com/versity/versitygw
TOOL=versitygw
TOOL_VAR=VERSITYGW_BIN
TOOL_TITLE="VersityGW $VERSITYGW_VERSION (the local S3 server of make dev)"
how_to_get_it() {
  cat <<MSG
*** Install it with Go >= 1.25 (https://go.dev/dl/; about 2 minutes on 2 cores):
***   GOBIN=$TOOLS_BIN go install $MODULE/cmd/versitygw@$VERSITYGW_VERSION
*** or point VERSITYGW_BIN at a versitygw $VERSITYGW_VERSION binary, or put one on PATH, then run make setup again.
MSG
}
# shellcheck source=scripts/tool-lookup.sh
source "$(dirname "$0")/tool-lookup.sh"

# The module version a Go binary was built from ("" if unknown: no Go, or not a Go binary).
built_version() {
  command -v go >/dev/null 2>&1 || return 0
  go version -m "$1" 2>/dev/null | awk -v m="$MODULE" '$1 == "mod" && $2 == m { print $3 }'
}

find_named_or_on_path
if [ -x "$TOOLS_BIN/versitygw" ]; then
  have=$(built_version "$TOOLS_BIN/versitygw")
  # Unknown (no Go to ask) counts as right: there would be no way to replace it anyway.
  if [ -z "$have" ] || [ "$have" = "$VERSITYGW_VERSION" ]; then found "$TOOLS_BIN/versitygw"; fi
  echo "versitygw: .tools/bin/versitygw is $have, not $VERSITYGW_VERSION: reinstalling" >&2
fi

command -v go >/dev/null 2>&1 || unavailable "Go is not installed (needed once, to install it into .tools/bin)"
echo "versitygw: installing $MODULE/cmd/versitygw@$VERSITYGW_VERSION into .tools/bin (about 2 minutes, once)" >&2
if ! GOBIN="$TOOLS_BIN" go install "$MODULE/cmd/versitygw@$VERSITYGW_VERSION"; then
  unavailable "go install $MODULE/cmd/versitygw@$VERSITYGW_VERSION failed (output above; is the Go module proxy reachable?)"
fi
[ -x "$TOOLS_BIN/versitygw" ] || unavailable "go install succeeded but left no $TOOLS_BIN/versitygw"
found "$TOOLS_BIN/versitygw (installed)"
