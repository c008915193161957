#!/usr/bin/env bash
# Generate llog's Oxia client messages and gRPC stub (llog_layer/llog/store/oxia_proto/) from Oxia's own
# client.proto at v0.17.1, so llog never reaches into the Python client's private modules.
#
# The .proto comes from the Go module github.com/oxia-db/oxia/common at the same tag as the server (the
# Go module proxy, checked against the sum pinned here); it is compiled by protoc from grpcio-tools with
# the betterproto2 plugin (both pinned in requirements-dev.txt). Usage:
#   scripts/generate-oxia-proto.sh [OUT]   (default OUT: llog_layer/llog/store/oxia_proto)
# tests/unit/test_oxia_proto.py runs it into a temporary folder and compares with the committed files.
set -euo pipefail

OXIA_VERSION=v0.17.1
MODULE=github.com/oxia-db/oxia/common
MODULE_SUM="h1:PNyzed+CowzI4Nd5CGbzRnQPG22gNqkacUpWS4AU6O4="

ROOT=$(cd "$(dirname "$0")/.." && pwd)
PY=${PY:-$ROOT/.venv/bin/python}
OUT=${1:-$ROOT/llog_layer/llog/store/oxia_proto}
PLUGIN=$(dirname "$PY")/protoc-gen-python_betterproto2

command -v go >/dev/null 2>&1 || { echo "generate-oxia-proto: Go is needed to fetch $MODULE@$OXIA_VERSION" >&2; exit 2; }
[ -x "$PLUGIN" ] || { echo "generate-oxia-proto: no $PLUGIN (pip install -r requirements-dev.txt)" >&2; exit 2; }
"$PY" -c "import grpc_tools.protoc" 2>/dev/null \
  || { echo "generate-oxia-proto: $PY has no grpc_tools (pip install -r requirements-dev.txt)" >&2; exit 2; }

work=$(mktemp -d "${TMPDIR:-/tmp}/oxia-proto.XXXXXX")
trap 'rm -rf "$work"' EXIT
# Outside any Go module, so that only the proxy's copy (verified against sum.golang.org) is used.
(cd "$work" && go mod download -json "$MODULE@$OXIA_VERSION") >"$work/module.json"
read -r dir sum < <("$PY" -c 'import json,sys; m=json.load(open(sys.argv[1])); print(m["Dir"], m["Sum"])' "$work/module.json")
if [ "$sum" != "$MODULE_SUM" ]; then
  echo "generate-oxia-proto: $MODULE@$OXIA_VERSION has sum $sum, expected $MODULE_SUM" >&2
  exit 1
fi

mkdir "$work/out"
# The plugin formats its output with the ruff next to it (pinned in requirements-dev.txt).
(cd "$dir/proto" && PATH="$(dirname "$PY"):$PATH" "$PY" -m grpc_tools.protoc -I . --plugin=protoc-gen-python_betterproto2="$PLUGIN" \
  --python_betterproto2_out="$work/out" client.proto) >"$work/protoc.log" 2>&1 || { cat "$work/protoc.log" >&2; exit 1; }
compiler=$("$PY" -c 'import importlib.metadata as m; print(m.version("betterproto2_compiler"))')
protoc=$("$PY" -m grpc_tools.protoc --version)

cat >"$work/out/__init__.py" <<HEADER
"""Oxia's client protocol (\`\`io.oxia.proto.v1\`\`): messages and gRPC stub, generated: do not edit.

Made by scripts/generate-oxia-proto.sh from proto/client.proto of the Go module
$MODULE@$OXIA_VERSION ($MODULE_SUM) with protoc ($protoc,
grpcio-tools) and betterproto2_compiler $compiler. tests/unit/test_oxia_proto.py
re-generates it and fails if these files differ.
"""
HEADER
rm -rf "$OUT"
mkdir -p "$OUT"
cp -R "$work/out/." "$OUT/"
echo "generate-oxia-proto: $OUT from $MODULE@$OXIA_VERSION" >&2
