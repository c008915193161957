#!/usr/bin/env bash
# Find or install aws-lambda-rie, AWS's Lambda Runtime Interface Emulator, which the emulator tests
# (tests/functions/test_emulated.py) run each function under as Lambda runs it.
#
# Order: $LLOG_RIE_BIN, an `aws-lambda-rie` on PATH, .tools/bin/aws-lambda-rie; else `go install` it
# into .tools/bin from the Go module proxy (Go >= 1.26.6, under a minute, once). The module publishes
# no tagged release the proxy serves, so the pin is a pseudo-version (a commit of its main branch).
# On failure the reason goes to .tools/aws-lambda-rie-unavailable, which the test suite reports.
set -uo pipefail

RIE_VERSION=v0.0.0-20261030222936-bef5c4ba774d
MODULE=github.com/aws/aws-lambda-runtime-interface-emulator
TOOL=aws-lambda-rie
TOOL_VAR=LLOG_RIE_BIN
TOOL_TITLE="aws-lambda-rie $RIE_VERSION (the Lambda Runtime Interface Emulator of the emulator tests)"
how_to_get_it() {
  cat <<MSG
*** Install it with Go >= 1.26.6 (https://go.dev/dl/; under a minute):
***   GOBIN=$TOOLS_BIN go install $MODULE/cmd/aws-lambda-rie@$RIE_VERSION
*** or point LLOG_RIE_BIN at an aws-lambda-rie binary, or put one on PATH, then run make setup again.
MSG
}
# shellcheck source=scripts/tool-lookup.sh
source "$(dirname "$0")/tool-lookup.sh"

find_named_or_on_path
find_or_go_install cmd/aws-lambda-rie "$RIE_VERSION" "under a minute"
