"""Review of the typed native contract (llog.api.native): requests 9a1160b's contract answered otherwise.

Each test states what the API answered before the bodies became msgspec definitions; they fail until the
contract answers it again (or the change is documented and the test dropped).
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from llog.api.native.contract import parse_create_topic, parse_grow_topic
from llog.api.native.errors import RequestRejected
from llog.config import Limits
from llog.errors import InvalidArgument
from llog.format.kv.control import AppendProtocol
from llog.protocol.topics import TopicConfig

LIMITS = Limits()


@pytest.mark.parametrize("count", [None, True, 2.0, "2", [2]])
def test_a_partition_count_that_is_not_an_integer_is_invalid_partition_count(count: Any):
    # 9a1160b answered every bad count, 0 and "2" alike, 400 InvalidPartitionCount; the decoder now answers a
    # count of the wrong JSON type 400 InvalidRequest, so 0 and "0" get different error types.
    for parse, body in (
        (parse_create_topic, {"topic": "orders", "partitions": count}),
        (parse_grow_topic, {"partitions": count}),
    ):
        with pytest.raises(RequestRejected) as refused:
            parse(json.dumps(body), LIMITS)
        assert (refused.value.status, refused.value.error_type) == (400, "InvalidPartitionCount"), body


@pytest.mark.parametrize("setting", ["retention_ms", "retention_bytes"])
def test_a_retention_limit_past_64_bits_is_refused(setting: str):
    # 9a1160b read 2**64 as a float (orjson) and refused it; msgspec keeps it an int, TopicConfig.parse takes
    # it, and the topic record stores an integer no 64-bit reader of the record can hold.
    _, _, config = parse_create_topic(json.dumps({"topic": "orders", "config": {setting: 2**64}}), LIMITS)
    with pytest.raises((RequestRejected, InvalidArgument)):
        TopicConfig.parse(config, default_protocol=AppendProtocol.CAS)
