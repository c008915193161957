#!/usr/bin/env bash
# Build the Kinesis API's SDK checks (tests/integration/test_kinesis_sdk_java.py and _js.py): tests/sdk/java with
# Maven (the AWS SDK for Java v2 from Maven Central: target/classes and its jars in target/lib) and tests/sdk/js
# with npm ci (the AWS SDK for JavaScript v3, pinned in its package-lock.json). Each is rebuilt only when its
# sources changed, and tried offline (Maven's local repository, npm's cache) before the registry.
# What could not be built has its reason in .tools/kinesis-sdk-{java,js}-unavailable, which the tests report;
# the exit status is 3 if either could not.
set -uo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
mkdir -p "$ROOT/.tools"
status=0

unavailable() {  # <java|js> <reason>
  printf '%s\n' "$2" > "$ROOT/.tools/kinesis-sdk-$1-unavailable"
  printf '\n*** the Kinesis SDK check in tests/sdk/%s is not available: %s\n\n' "$1" "$2" >&2
  status=3
}

available() {  # <java|js> <what>
  rm -f "$ROOT/.tools/kinesis-sdk-$1-unavailable"
  echo "kinesis-sdk-$1: $2"
}

build_java() {
  local project="$ROOT/tests/sdk/java" stamp="$ROOT/tests/sdk/java/target/.built"
  if [ -f "$stamp" ] && [ -z "$(find "$project/pom.xml" "$project/src" -newer "$stamp" -type f | head -n 1)" ]; then
    available java "tests/sdk/java/target (up to date)"; return
  fi
  local tool
  for tool in java javac mvn; do
    command -v "$tool" >/dev/null 2>&1 || { unavailable java "$tool is not installed (a JDK >= 17 and Maven)"; return; }
  done
  echo "kinesis-sdk-java: building tests/sdk/java with Maven (the first time it downloads the SDK, about a minute)" >&2
  local out
  rm -rf "$project/target"  # no jar of an earlier pom left in target/lib
  if ! out=$(cd "$project" && { mvn -B -q -o package 2>&1 || mvn -B -q package 2>&1; }); then
    unavailable java "mvn package in tests/sdk/java failed: $(printf '%s' "$out" | grep -m 3 ERROR | tr '\n' ' ')"
    return
  fi
  touch "$stamp"
  available java "tests/sdk/java/target (built)"
}

build_js() {
  local project="$ROOT/tests/sdk/js" stamp
  stamp="$project/node_modules/.installed-$(cksum < "$project/package-lock.json" | cut -d' ' -f1)"
  if [ -f "$stamp" ]; then available js "tests/sdk/js/node_modules (up to date)"; return; fi
  local tool
  for tool in node npm; do
    command -v "$tool" >/dev/null 2>&1 || { unavailable js "$tool is not installed (Node.js >= 18 and npm)"; return; }
  done
  local out
  if ! out=$(cd "$project" && npm ci --prefer-offline --no-audit --no-fund 2>&1); then
    unavailable js "npm ci in tests/sdk/js failed: $(printf '%s' "$out" | tail -n 3 | tr '\n' ' ')"
    return
  fi
  touch "$stamp"
  available js "tests/sdk/js/node_modules (installed)"
}

build_java
build_js
exit "$status"
