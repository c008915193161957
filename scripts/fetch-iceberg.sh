#!/usr/bin/env bash
# Download Iceberg's Spark runtime (the version AWS Glue 6.0 ships) to .tools/jars, checked
# against a pinned SHA-1, for the Iceberg export tests and `make glue-local TABLE_FORMAT=iceberg`.
# On failure it writes the reason to .tools/iceberg-unavailable; those tests then skip with it.
set -uo pipefail

ARTIFACT=iceberg-spark-runtime-4.1_2.13
VERSION=1.11.0
SHA1=f9b1e4a18797c58ae406104ef5c75d1b64a373c5
REPOSITORY=${MAVEN_REPOSITORY:-https://repo1.maven.org/maven2}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
JAR="$ROOT/.tools/jars/$ARTIFACT-$VERSION.jar"
REASON_FILE="$ROOT/.tools/iceberg-unavailable"
mkdir -p "$(dirname "$JAR")"

check() { [ -f "$JAR" ] && [ "$(sha1sum "$JAR" | cut -d' ' -f1)" = "$SHA1" ]; }

if check; then
  rm -f "$REASON_FILE"
  exit 0
fi
url="$REPOSITORY/org/apache/iceberg/$ARTIFACT/$VERSION/$ARTIFACT-$VERSION.jar"
if curl -fsSL --retry 3 -o "$JAR.part" "$url" && mv "$JAR.part" "$JAR" && check; then
  rm -f "$REASON_FILE"
  echo "iceberg: $JAR"
  exit 0
fi
rm -f "$JAR" "$JAR.part"
printf 'could not download %s-%s from the Maven repository (or its SHA-1 did not match %s)\n' \
  "$ARTIFACT" "$VERSION" "$SHA1" > "$REASON_FILE"
echo "*** Iceberg runtime unavailable: $(cat "$REASON_FILE"); Iceberg export tests will be skipped" >&2
exit 3
