"""The AWS SDK for Java v2 (tests/sdk/java) against llog serve's Kinesis API, in CBOR (its default) and in JSON.

Each run creates a stream, waits for it to be ACTIVE, puts records (one by one and in batches, to chosen shards),
reads them back through every kind of shard iterator, checks the errors the SDK maps to its exceptions, and
deletes the stream; the program checks every answer, and every request's and answer's Content-Type.
"""

from __future__ import annotations

import pytest

from tests.kinesis_sdks import JAVA_PROJECT, KinesisEndpoint, require_sdk, run_check, stream_name

pytestmark = pytest.mark.oxia
CLASSPATH = f"{JAVA_PROJECT / 'target' / 'classes'}:{JAVA_PROJECT / 'target' / 'lib'}/*"


@pytest.mark.parametrize(
    ("encoding", "java_options"),
    [("application/x-amz-cbor-1.1", []), ("application/x-amz-json-1.1", ["-Daws.cborEnabled=false"])],
    ids=["cbor", "json"],
)
def test_java_sdk(kinesis_endpoint: KinesisEndpoint, encoding: str, java_options: list[str]) -> None:
    require_sdk("java", ("java",), JAVA_PROJECT / "target" / ".built")
    command = ["java", *java_options, "-cp", CLASSPATH, "Main"]
    output = run_check(command, kinesis_endpoint, stream_name("java"), JAVA_PROJECT)
    assert f"PASS kinesis java sdk {encoding}" in output
    assert "ok AT_TIMESTAMP" in output
    assert "ok GetRecords" in output
