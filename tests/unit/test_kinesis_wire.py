"""The Kinesis API's encodings: AWS JSON 1.1 and CBOR, as the SDKs write requests and read answers.

The CBOR requests are the bytes the AWS SDK for Java v2 (2.59.1, tests/sdk/java) sent to a recording server;
what it reads back (tag 1 over milliseconds, or a bare number of them) was checked the same way.
"""

from __future__ import annotations

import base64
import json
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import cbor2
import pytest

from llog.api.kinesis import wire
from llog.api.kinesis.errors import ResourceNotFoundException, SerializationException

CBOR = wire.CBOR_CONTENT_TYPE
JSON = wire.JSON_CONTENT_TYPE
AT_123_MS = datetime(2023, 11, 14, 22, 13, 20, 123000, tzinfo=UTC)  # 1700000000123 ms since the epoch

# GetShardIterator(StreamName "s", AT_TIMESTAMP, Timestamp 1700000000123 ms): an indefinite-length map,
# the time as tag 1 (0xc1) over the unsigned 64-bit 0x0000018bcfe5687b milliseconds.
JAVA_GET_SHARD_ITERATOR = bytes.fromhex(
    "bf6a53747265616d4e616d656173675368617264496474736861726449642d303030303030303030303030715368617264497465"
    "7261746f72547970656c41545f54494d455354414d506954696d657374616d70c11b0000018bcfe5687bff"
)
# The same at Instant.ofEpochMilli(0): tag 1 over 0.
JAVA_GET_SHARD_ITERATOR_AT_EPOCH = bytes.fromhex(
    "bf6a53747265616d4e616d65666f7264657273675368617264496474736861726449642d30303030303030303030303071536861"
    "72644974657261746f72547970656c41545f54494d455354414d506954696d657374616d70c100ff"
)
# PutRecord(StreamName "s", PartitionKey "pk", Data 00 ff 01): Data as a byte string.
JAVA_PUT_RECORD = bytes.fromhex("bf6a53747265616d4e616d65617364446174614300ff016c506172746974696f6e4b657962706bff")
# PutRecords("orders", [{a, 01 02}, {b, empty, ExplicitHashKey "0"}]): an indefinite-length array of maps.
JAVA_PUT_RECORDS = bytes.fromhex(
    "bf675265636f7264739fbf64446174614201026c506172746974696f6e4b65796161ffbf6444617461406f4578706c6963697448"
    "6173684b657961306c506172746974696f6e4b65796162ffff6a53747265616d4e616d65666f7264657273ff"
)
# ListStreams() with no input: an empty indefinite-length map.
JAVA_LIST_STREAMS = bytes.fromhex("bfff")


@pytest.mark.parametrize(
    ("header", "expected"),
    [
        ("application/x-amz-cbor-1.1", CBOR),
        ("Application/X-Amz-Cbor-1.1; charset=UTF-8", CBOR),
        ("application/x-amz-json-1.1", JSON),
        ("application/json", JSON),
        (None, JSON),
        ("", JSON),
    ],
)
def test_the_answer_is_in_the_request_encoding(header: str | None, expected: str) -> None:
    assert wire.content_type_of(header) == expected


def test_json_round_trip_of_blobs_and_timestamps() -> None:
    request = json.dumps({"Data": base64.b64encode(b"\x00\xff").decode(), "Timestamp": 1700000000.123}).encode()
    document = wire.decode(JSON, request)
    assert wire.blob(document["Data"], "Data") == b"\x00\xff"
    assert wire.timestamp_ms(document["Timestamp"], "Timestamp") == 1700000000123
    answer = json.loads(
        wire.encode(JSON, {"Records": [{"Data": b"\x00\xff", "ApproximateArrivalTimestamp": AT_123_MS}]})
    )
    assert answer == {"Records": [{"Data": "AP8=", "ApproximateArrivalTimestamp": 1700000000.123}]}


def test_empty_bodies_are_empty_documents() -> None:
    assert wire.decode(JSON, b"") == {}
    assert wire.decode(CBOR, b"") == {}
    assert wire.decode(CBOR, JAVA_LIST_STREAMS) == {}


def test_cbor_timestamp_is_tag_1_over_milliseconds() -> None:
    document = wire.decode(CBOR, JAVA_GET_SHARD_ITERATOR)
    assert document == {
        "StreamName": "s",
        "ShardId": "shardId-000000000000",
        "ShardIteratorType": "AT_TIMESTAMP",
        "Timestamp": AT_123_MS,
    }
    assert wire.timestamp_ms(document["Timestamp"], "Timestamp") == 1700000000123
    epoch = wire.decode(CBOR, JAVA_GET_SHARD_ITERATOR_AT_EPOCH)["Timestamp"]
    assert wire.timestamp_ms(epoch, "Timestamp") == 0


def test_cbor_tag_1_reads_milliseconds_before_1978_too() -> None:
    """Read as seconds (cbor2's reading) these would be valid times a thousand times later."""
    body = cbor2.dumps({"Timestamp": cbor2.CBORTag(1, 86_400_000)})
    assert wire.timestamp_ms(wire.decode(CBOR, body)["Timestamp"], "Timestamp") == 86_400_000
    fractional = cbor2.dumps({"Timestamp": cbor2.CBORTag(1, 1.5)})
    assert wire.decode(CBOR, fractional)["Timestamp"] == wire.EPOCH + timedelta(microseconds=1500)


def test_cbor_blobs_are_byte_strings() -> None:
    put = wire.decode(CBOR, JAVA_PUT_RECORD)
    assert put == {"StreamName": "s", "PartitionKey": "pk", "Data": b"\x00\xff\x01"}
    assert wire.blob(put["Data"], "Data") == b"\x00\xff\x01"
    assert wire.decode(CBOR, JAVA_PUT_RECORDS) == {
        "StreamName": "orders",
        "Records": [
            {"Data": b"\x01\x02", "PartitionKey": "a"},
            {"Data": b"", "ExplicitHashKey": "0", "PartitionKey": "b"},
        ],
    }


def test_cbor_answer_writes_bytes_and_times_as_the_java_sdk_reads_them() -> None:
    record = {"SequenceNumber": "49", "Data": b"\x00\xff", "PartitionKey": "k"}
    answer = {"Records": [{**record, "ApproximateArrivalTimestamp": AT_123_MS}], "NextShardIterator": "it"}
    encoded = wire.encode(CBOR, answer)
    arrival = cbor2.CBORTag(1, 1700000000123)
    assert encoded == cbor2.dumps({**answer, "Records": [{**record, "ApproximateArrivalTimestamp": arrival}]})
    assert b"\xc1\x1b\x00\x00\x01\x8b\xcf\xe5\x68\x7b" in encoded  # tag 1, then the milliseconds as a uint64
    assert b"\x42\x00\xff" in encoded  # the data as a 2-byte byte string
    assert wire.decode(CBOR, encoded) == answer


def test_cbor_times_in_other_zones_are_the_same_instant() -> None:
    in_paris = AT_123_MS.astimezone(timezone(timedelta(hours=1)))
    assert wire.encode(CBOR, {"T": in_paris}) == wire.encode(CBOR, {"T": AT_123_MS})
    assert wire.timestamp_ms(in_paris, "T") == 1700000000123


def test_cbor_error_is_a_map_with_type_and_message() -> None:
    error = ResourceNotFoundException("Stream s under account 000000000000 not found.")
    assert cbor2.loads(wire.encode(CBOR, error.body())) == {
        "__type": "ResourceNotFoundException",
        "message": "Stream s under account 000000000000 not found.",
    }


@pytest.mark.parametrize(
    "body",
    [
        b"\xa1",  # a map cut short
        b"\xbf\x61a",  # an indefinite map with no break
        b"\x82\x01\x02",  # an array, not a map
        b"\x61a",  # a text string
        b"\xff",  # a lone break
        b"\xa0\x00",  # a map, then more bytes
        b"\xa1\x01\x02",  # a key that is not text
        b"\xa1\x61a\xc1\x61x",  # tag 1 over text
        b"\xa1\x61a\xc1\x1b\x7f\xff\xff\xff\xff\xff\xff\xff",  # tag 1 past the year 9999
        b"\xa1\x61a\xc1\xf9\x7e\x00",  # tag 1 over NaN
        b"\xa1\x61a\x62\xc3\x28",  # text that is not UTF-8
        b"\x9f" * 100_000,  # nested past any sane depth
        b"\xa1\x61a\x5a\xff\xff\xff\xff",  # a 4 GiB byte string in a 7-byte body
    ],
)
def test_bad_cbor_bodies_are_serialization_exceptions(body: bytes) -> None:
    with pytest.raises(SerializationException):
        wire.decode(CBOR, body)


@pytest.mark.parametrize("body", [b"{", b"[]", b'"x"', b"\xff\xfe", b"[" * 100_000])
def test_bad_json_bodies_are_serialization_exceptions(body: bytes) -> None:
    with pytest.raises(SerializationException):
        wire.decode(JSON, body)


@pytest.mark.parametrize("value", [True, "1700000000", float("nan"), float("inf"), None])
def test_bad_timestamps_are_serialization_exceptions(value: Any) -> None:
    with pytest.raises(SerializationException):
        wire.timestamp_ms(value, "Timestamp")


@pytest.mark.parametrize("value", [123, "not base64!", "AP8"])
def test_bad_blobs_are_serialization_exceptions(value: Any) -> None:
    with pytest.raises(SerializationException):
        wire.blob(value, "Data")
