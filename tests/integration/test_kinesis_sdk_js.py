"""The AWS SDK for JavaScript v3 (tests/sdk/js) against llog serve's Kinesis API, in AWS JSON 1.1.

The same checks as the Java SDK's (test_kinesis_sdk_java.py): a stream created, written, read through every kind
of shard iterator, the errors the SDK maps to its exceptions, and deleted.
"""

from __future__ import annotations

import pytest

from tests.kinesis_sdks import JS_PROJECT, KinesisEndpoint, require_sdk, run_check, stream_name

pytestmark = pytest.mark.oxia


def test_js_sdk(kinesis_endpoint: KinesisEndpoint) -> None:
    require_sdk("js", ("node",), JS_PROJECT / "node_modules" / "@aws-sdk" / "client-kinesis")
    output = run_check(["node", "check.mjs"], kinesis_endpoint, stream_name("js"), JS_PROJECT)
    assert "PASS kinesis js sdk application/x-amz-json-1.1" in output
    assert "ok AT_TIMESTAMP" in output
    assert "ok GetRecords" in output
