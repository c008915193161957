#!/usr/bin/env bash
# Find the Oxia server v0.17.1 for the tests and `make dev`, or build it from source.
#
# Order: $OXIA_BIN, an `oxia` on PATH, .tools/bin/oxia, then the prebuilt server of
# ../shared/tools/oxia (its install.sh) where that folder exists. Else, with Go and git, the
# repository $LLOG_OXIA_REPO (default: the public github.com/oxia-db/oxia) is cloned at tag
# v0.17.1 and ./cmd is built into .tools/bin, stamped with the tag's version as Oxia's own
# Makefile does, and kept only if `oxia --version` then says 0.17.1. (Since v0.15.0
# `go install github.com/oxia-db/oxia/cmd@...` cannot build the server: the repository is
# a Go workspace, so it is built from a clone.) Only when that cannot work are the manual
# commands printed; the reason goes to .tools/oxia-unavailable, which the test suite and
# `make dev` report.
set -uo pipefail

OXIA_VERSION=v0.17.1
OXIA_REPO=${LLOG_OXIA_REPO:-https://github.com/oxia-db/oxia}
TOOL=oxia
TOOL_VAR=OXIA_BIN
TOOL_TITLE="The Oxia server $OXIA_VERSION"
how_to_get_it() {
  cat <<MSG
*** Build it from the public repository (Go >= 1.26, 3-5 minutes on 2 cores):
***   git clone --depth 1 --branch $OXIA_VERSION $OXIA_REPO /tmp/oxia-src
***   CGO_ENABLED=0 go -C /tmp/oxia-src build -trimpath -ldflags "-s -w -X main.version=${OXIA_VERSION#v}" -o $TOOLS_BIN/oxia ./cmd
*** or point OXIA_BIN at an oxia $OXIA_VERSION binary, or put one on PATH, then run make setup again.
*** (The container image oxia/oxia:${OXIA_VERSION#v} runs the same server, as the deployed stack does.)
*** For tests only: LLOG_TEST_OXIA_ADDRESS=host:port uses a running Oxia server.
MSG
}
# shellcheck source=scripts/tool-lookup.sh
source "$(dirname "$0")/tool-lookup.sh"

find_named_or_on_path
if [ -x "$TOOLS_BIN/oxia" ]; then found "$TOOLS_BIN/oxia"; fi

shared_install="$ROOT/../shared/tools/oxia/install.sh"
if [ -x "$shared_install" ]; then
  if "$shared_install" "$TOOLS_BIN" >/dev/null; then found "$TOOLS_BIN/oxia (prebuilt, from ../shared/tools/oxia)"; fi
  echo "oxia: ../shared/tools/oxia/install.sh failed (output above); building from source instead" >&2
fi

command -v go >/dev/null 2>&1 || unavailable "no oxia binary in OXIA_BIN, on PATH or in .tools/bin, and Go is not installed to build one"
command -v git >/dev/null 2>&1 || unavailable "no oxia binary in OXIA_BIN, on PATH or in .tools/bin, and git is not installed to fetch its source"

src=$(mktemp -d "${TMPDIR:-/tmp}/oxia-src.XXXXXX")
trap 'rm -rf "$src"' EXIT
echo "oxia: no server found; cloning $OXIA_REPO at $OXIA_VERSION" >&2
if ! git -c advice.detachedHead=false clone --progress --depth 1 --branch "$OXIA_VERSION" "$OXIA_REPO" "$src" >&2; then
  unavailable "git clone of $OXIA_REPO at $OXIA_VERSION failed (output above; is it reachable?)"
fi
echo "oxia: building its server with $(go version | cut -d' ' -f3) into .tools/bin (3-5 minutes on 2 cores, once;" \
  "each package is listed as it is compiled)" >&2
built="$TOOLS_BIN/oxia.building"
if ! (cd "$src" && CGO_ENABLED=0 GOFLAGS=-buildvcs=false go build -v -trimpath \
      -ldflags "-s -w -X main.version=${OXIA_VERSION#v}" -o "$built" ./cmd); then
  rm -f "$built"
  unavailable "go build of $OXIA_REPO at $OXIA_VERSION failed (output above)"
fi
reported=$("$built" --version 2>&1)
if [ "$reported" != "oxia version ${OXIA_VERSION#v}" ]; then
  rm -f "$built"
  unavailable "the server built from $OXIA_REPO at $OXIA_VERSION reports '$reported', not 'oxia version ${OXIA_VERSION#v}'"
fi
mv "$built" "$TOOLS_BIN/oxia"
found "$TOOLS_BIN/oxia (built from $OXIA_REPO at $OXIA_VERSION: $reported)"
