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

find_named_or_on_path
find_or_go_install cmd/versitygw "$VERSITYGW_VERSION" "about 2 minutes"
