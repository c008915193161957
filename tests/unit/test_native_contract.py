"""Unit tests of the native HTTP API's contract (llog/api/native/contract.py): every parse rule and the answers.

Parsing must reject malformed input with ``RequestRejected`` (status and
``error_type``) before anything is written; rendering must follow docs/HTTP_API.md's
status rules and byte encodings. Results are built directly, no storage. Requests are JSON text, as they arrive;
answers are compared as the JSON they encode to.
"""

from __future__ import annotations

import base64
import json
from typing import Any

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from functions.common.http import json_bytes
from llog.api.native import bodies
from llog.api.native.bodies import INT64_MAX, INT64_MIN
from llog.api.native.contract import (
    consume_response,
    decode_body,
    encode_bytes,
    parse_consume_request,
    parse_create_topic,
    parse_grow_topic,
    parse_produce_request,
    produce_response,
)
from llog.api.native.errors import RequestRejected, client_error
from llog.config import LAMBDA_PAYLOAD_LIMIT, Limits
from llog.errors import (
    AppendOutcomeUnknown,
    InvalidArgument,
    LlogError,
    LogFenced,
    OffsetOutOfRange,
    OxiaUnavailable,
    PartitionNotInitialized,
)
from llog.format.codec import Record
from llog.format.kv.control import AppendProtocol
from llog.protocol.append import AppendResult
from llog.protocol.read import LogRecord
from llog.protocol.topics import TopicConfig
from llog.service.consume import ConsumeRequest, FetchPartition, PartitionFetch
from llog_client.wire import decode_bytes
from server.batching import BackPressureRejected
from tests.conftest import fuzz_examples

LIMITS = Limits()


def parse_produce(doc: Any, limits: Limits = LIMITS) -> list[Any]:
    return list(parse_produce_request(json.dumps(doc), limits))


def parse_consume(doc: Any, limits: Limits = LIMITS) -> ConsumeRequest:
    return parse_consume_request(json.dumps(doc), limits)


def produce(*items: dict[str, Any], limits: Limits = LIMITS) -> list[Any]:
    return parse_produce({"topic_partitions": list(items)}, limits)


def built(answer: Any) -> Any:
    """An answer as the JSON it encodes to."""
    return json.loads(msgspec.json.encode(answer))


def parse_any(body: Any, limits: Limits = LIMITS) -> bodies.GrowTopicRequest:
    return decode_body(body, bodies.GrowTopicRequest, limits)


class Permissive(msgspec.Struct):
    """Any JSON object: what JSON itself allows, apart from any body's fields."""


def parse_json(body: Any, limits: Limits = LIMITS) -> Permissive:
    return decode_body(body, Permissive, limits)


def tp(records: Any = ("a",), topic: Any = "orders", partition: Any = 0, **extra: Any) -> dict[str, Any]:
    doc = {"topic": topic, "partition": partition, "records": list(records) if isinstance(records, tuple) else records}
    doc.update(extra)
    return doc


def fetch(topic: Any = "orders", partition: Any = 0, fetch_offset: Any = 1, **extra: Any) -> dict[str, Any]:
    return {"topic": topic, "partition": partition, "fetch_offset": fetch_offset, **extra}


def rejected(
    call: Any, *args: Any, status: int = 400, error_type: str | None = None, match: str | None = None, **kwargs: Any
) -> RequestRejected:
    with pytest.raises(RequestRejected, match=match) as excinfo:
        call(*args, **kwargs)
    assert excinfo.value.status == status
    if error_type is not None:
        assert excinfo.value.error_type == error_type
    return excinfo.value


# --- parse_any -----------------------------------------------------------------


def test_a_body_may_be_str_or_bytes():
    assert parse_any('{"partitions": 1}') == bodies.GrowTopicRequest(1)
    assert parse_any(b'{"partitions": 2}') == bodies.GrowTopicRequest(2)


@pytest.mark.parametrize("body", [None, "", b""])
def test_empty_body_is_400(body):
    rejected(parse_any, body, LIMITS, error_type="InvalidRequest", match="empty")


@pytest.mark.parametrize("body", ["{", '{"topic_partitions": [}', "nope", b"\xff\xfe\xfa", '{"a": 1} trailing'])
def test_invalid_json_is_400(body):
    rejected(parse_json, body, LIMITS, error_type="InvalidRequest", match="not valid JSON")


def test_body_over_the_limit_is_413_naming_the_sizes():
    limits = Limits(max_request_bytes=16)
    exc = rejected(parse_any, '{"partitions": 12}', limits, status=413, error_type="PayloadTooLarge")
    assert "18 bytes" in str(exc)
    assert "16 bytes" in str(exc)
    assert parse_any('{"partitions":1}', limits) == bodies.GrowTopicRequest(1)  # exactly 16 bytes is fine


def test_the_default_request_limit_is_lambdas_payload_limit():
    assert Limits().max_request_bytes == LAMBDA_PAYLOAD_LIMIT == 6 * 1024 * 1024
    body = b'"' + b"x" * LAMBDA_PAYLOAD_LIMIT + b'"'
    rejected(parse_any, body, LIMITS, status=413, error_type="PayloadTooLarge")


def test_the_size_limit_counts_utf8_bytes_not_characters():
    limits = Limits(max_request_bytes=7)
    rejected(parse_any, '"ééé"', limits, status=413)  # 5 characters, 8 bytes


def test_deep_nesting_is_400_not_a_crash():
    record = '{"value": "v", "headers": ' + "[" * 100_000 + "]" * 100_000 + "}"
    body = '{"topic_partitions": [{"topic": "t", "records": [' + record + "]}]}"
    rejected(parse_produce_request, body, LIMITS, error_type="InvalidRequest", match="nests too deeply")


@pytest.mark.parametrize("body", ['{"n": NaN}', '{"n": -Infinity}', '{"s": "\\ud800"}', '{"topic": "t"} x'])
def test_what_is_not_json_by_rfc_8259_is_400(body):
    rejected(parse_json, body, LIMITS, error_type="InvalidRequest", match="not valid JSON")


def test_an_integer_past_the_digit_limit_is_400():
    rejected(parse_any, '{"partitions": ' + "9" * 5000 + "}", LIMITS, error_type="InvalidRequest")


# --- produce: shape ------------------------------------------------------------------


@pytest.mark.parametrize("doc", [[], "x", 1, None, [{"topic_partitions": []}]])
def test_produce_body_must_be_an_object(doc):
    rejected(parse_produce, doc, LIMITS, match="expected `object`")


@pytest.mark.parametrize("value", [None, [], {}, "orders", 3, {"topic": "orders"}])
def test_topic_partitions_must_be_a_non_empty_list(value):
    body = {} if value is None else {"topic_partitions": value}
    rejected(parse_produce, body, LIMITS, error_type="InvalidRequest", match="topic_partitions")


@pytest.mark.parametrize("item", ["orders", 1, None, ["orders", 0]])
def test_each_topic_partition_must_be_an_object(item):
    rejected(parse_produce, {"topic_partitions": [item]}, LIMITS, match=r"topic_partitions\[0\]: expected `object`")


@pytest.mark.parametrize("topic", [None, 7, ["orders"], {"name": "orders"}])
def test_topic_must_be_a_string(topic):
    rejected(produce, tp(topic=topic), error_type="InvalidRequest", match=r"topic_partitions\[0\]\.topic")


@pytest.mark.parametrize(
    "topic",
    ["", "a/b", "..", ".", "wal-shared", "__catalog", "orders/../x", "with space", "ü", "x" * 250, "a\x00b", "a:b"],
)
def test_invalid_topic_names_are_400_invalid_topic_name(topic):
    rejected(produce, tp(topic=topic), error_type="InvalidTopicName")
    rejected(parse_consume, {"topic_partitions": [fetch(topic=topic)]}, LIMITS, error_type="InvalidTopicName")


@pytest.mark.parametrize("topic", ["orders", "A.b_c-9", "x" * 249, "...", "a..b", "_"])
def test_valid_topic_names(topic):
    assert produce(tp(topic=topic))[0].topic == topic


@pytest.mark.parametrize("partition", [-1, -(2**63)])
def test_partition_must_be_non_negative(partition):
    rejected(produce, tp(partition=partition), error_type="InvalidRequest", match="non-negative integer")


@pytest.mark.parametrize("partition", [True, False, 1.0, 0.5, "0", [0]])
def test_partition_must_be_an_integer(partition):
    rejected(produce, tp(partition=partition), error_type="InvalidRequest", match=r"\.partition: expected `int")


@pytest.mark.parametrize("partition", [2**31, 2**63, 10**30])
def test_huge_partitions_are_400_invalid_partition(partition):
    rejected(produce, tp(partition=partition), error_type="InvalidPartition")


def test_partition_bounds():
    assert produce(tp(partition=0))[0].partition == 0
    assert produce(tp(partition=2**31 - 1))[0].partition == 2**31 - 1


@pytest.mark.parametrize("records", [None, [], "alpha", {"base64": "AA=="}])
def test_records_must_be_a_non_empty_list(records):
    item = tp()
    if records is None:
        del item["records"]
    else:
        item["records"] = records
    rejected(produce, item, match=r"records")


def test_groups_keep_request_order_and_repeats():
    groups = produce(tp(["a"], partition=1), tp(["b"], topic="audit"), tp(["c"], partition=1))
    assert [(g.topic, g.partition) for g in groups] == [("orders", 1), ("audit", 0), ("orders", 1)]


def test_unknown_fields_of_a_topic_partition_are_ignored():
    assert produce(tp(extra="x"))[0].records == [b"a"]


# --- produce: records ------------------------------------------------------------------


def test_string_records_are_utf8():
    (group,) = produce(tp(["alpha", "é", "", "日本"]))
    # A plain string is a value alone: bytes, which the writer takes as a record without key, headers or timestamp.
    assert group.records == [b"alpha", "é".encode(), b"", "日本".encode()]
    assert all(type(r) is bytes for r in group.records)


def test_base64_records_are_raw_bytes():
    every_byte = base64.b64encode(bytes(range(256))).decode()
    (group,) = produce(tp([{"base64": "AAE="}, {"base64": ""}, {"base64": every_byte}]))
    assert [r.value for r in group.records] == [b"\x00\x01", b"", bytes(range(256))]


@pytest.mark.parametrize("text", ["AAE", "!!!!", "AA==AA", "AA E=", "ZZ=", "QUJD\n"])
def test_bad_base64_is_400(text):
    rejected(produce, tp([{"base64": text}]), error_type="InvalidRequest", match=r"records\[0\]\.base64 is not valid")


@pytest.mark.parametrize("value", [1, None, True, [], 1.5, {"base64": 1}, {"base64": None}])
def test_other_record_forms_are_400(value):
    rejected(produce, tp([value]), match=r"records\[0\]")


def test_object_records_with_key_headers_and_timestamp():
    (group,) = produce(
        tp(
            [
                {"value": "v", "key": "k", "headers": {"h1": "x", "h2": {"base64": "/w=="}}, "timestamp_ms": 17},
                {"value": {"base64": "AAE="}, "key": {"base64": "/w=="}},
                {"value": "v", "key": None, "headers": None, "timestamp_ms": None},
                {"value": "v", "headers": {}},
            ]
        )
    )
    assert group.records == [
        Record(b"v", b"k", (("h1", b"x"), ("h2", b"\xff")), 17),
        Record(b"\x00\x01", b"\xff"),
        Record(b"v"),
        Record(b"v"),
    ]


@pytest.mark.parametrize(
    "record",
    [
        {"value": "v", "offset": 3},
        {"value": "v", "base64": "AA=="},
        {"base64": "AA==", "key": "k"},
        {"key": "k"},
        {},
    ],
)
def test_unknown_or_missing_record_fields_are_400(record):
    rejected(produce, tp([record]), match=r"records\[0\]")


@pytest.mark.parametrize("headers", ["h", ["h", "x"], 3])
def test_headers_must_be_an_object(headers):
    rejected(produce, tp([{"value": "v", "headers": headers}]), match=r"headers: expected `object \| null`")


@pytest.mark.parametrize("value", [None, 3, ["x"], {"base64": "!"}])
def test_header_values_must_be_bytes(value):
    rejected(produce, tp([{"value": "v", "headers": {"h": value}}]), match=r"records\[0\]\.headers")


@pytest.mark.parametrize("key", [3, ["k"], {"base64": "!"}, True])
def test_keys_must_be_bytes_or_null(key):
    rejected(produce, tp([{"value": "v", "key": key}]), match=r"\.key")


@pytest.mark.parametrize("ts", [INT64_MIN, -1, 0, INT64_MAX])
def test_timestamps_in_int64_range(ts):
    assert produce(tp([{"value": "v", "timestamp_ms": ts}]))[0].records[0].timestamp_ms == ts


@pytest.mark.parametrize("ts", [INT64_MAX + 1, INT64_MIN - 1, 1.5, "1", True])
def test_timestamps_outside_int64_or_not_integers_are_400(ts):
    rejected(produce, tp([{"value": "v", "timestamp_ms": ts}]), match="timestamp_ms")


@pytest.mark.parametrize(
    "record",
    ["\ud800", {"value": "\udfff"}, {"value": "v", "key": "a\ud83d"}, {"value": "v", "headers": {"h": "\ud800x"}}],
)
def test_lone_surrogates_are_400(record):
    # JSON's "\ud800" escape, and the same code point in text handed over by a framework.
    rejected(parse_produce, {"topic_partitions": [tp([record])]}, LIMITS, match="not valid JSON")
    text = json.dumps({"topic_partitions": [tp([record])]}, ensure_ascii=False)
    rejected(parse_produce_request, text, LIMITS, match="not valid JSON")


def test_string_records_are_their_utf8_bytes():
    [entry] = parse_produce({"topic_partitions": [tp(["a", "é", "日本"])]})
    assert list(entry.records) == [b"a", "é".encode(), "日本".encode()]


def test_decode_and_encode_bytes_round_trip_any_bytes():
    for data in [b"", b"abc", "é".encode(), b"\xff", b"\x00" * 3, bytes(range(256)), "日本".encode()[:-1]]:
        assert decode_bytes(built(encode_bytes(data))) == data


def test_encode_bytes_renders_text_as_a_string():
    assert encode_bytes("é".encode()) == "é"
    assert encode_bytes("日本".encode()) == "日本"
    assert encode_bytes(b"") == ""
    assert encode_bytes(b"line 1\n\tline 2\r\n") == "line 1\n\tline 2\r\n"


def test_encode_bytes_renders_binary_as_base64():
    assert built(encode_bytes(b"\x00\x01")) == {"base64": "AAE="}  # valid UTF-8, but control characters
    assert built(encode_bytes(b"\xff")) == {"base64": "/w=="}  # not UTF-8
    assert built(encode_bytes(b"a\x1bb")) == {"base64": "YRti"}  # an escape sequence
    assert built(encode_bytes(b"\x7f")) == {"base64": "fw=="}  # DEL
    assert built(encode_bytes("\x85".encode())) == {"base64": "woU="}  # a C1 control


def test_each_ascii_byte_is_text_or_not_as_the_rule_says():
    """The ASCII fast path agrees with the rule: text is printable, tab, newline or carriage return."""
    for byte in range(0x80):
        data = b"ab" + bytes([byte]) + b"cd"
        text = byte in (0x09, 0x0A, 0x0D) or 0x20 <= byte < 0x7F
        expected = data.decode("ascii") if text else {"base64": base64.b64encode(data).decode()}
        assert built(encode_bytes(data)) == expected


@settings(max_examples=fuzz_examples(200), deadline=None)
@given(st.binary(max_size=64))
def test_encode_decode_property(data):
    assert decode_bytes(built(encode_bytes(data))) == data


# --- produce: limits -------------------------------------------------------------------


def test_partition_limit_names_its_variable():
    limits = Limits(max_partitions_per_request=2)
    assert len(produce(tp(), tp(), limits=limits)) == 2
    exc = rejected(produce, tp(), tp(), tp(), limits=limits, error_type="LimitExceeded")
    assert "LLOG_MAX_PARTITIONS_PER_REQUEST" in str(exc)


def test_record_limit_counts_the_whole_request_and_names_its_variable():
    limits = Limits(max_records_per_request=3)
    assert len(produce(tp(["a", "b"]), tp(["c"]), limits=limits)) == 2
    exc = rejected(produce, tp(["a", "b"]), tp(["c", "d"]), limits=limits, error_type="LimitExceeded")
    assert "LLOG_MAX_RECORDS_PER_REQUEST" in str(exc)


def test_limits_from_env():
    limits = Limits.from_env(
        {
            "LLOG_MAX_REQUEST_BYTES": "100",
            "LLOG_MAX_PARTITIONS_PER_REQUEST": "2",
            "LLOG_MAX_RECORDS_PER_REQUEST": "3",
            "LLOG_CONSUME_MAX_WAIT_MS": "400",
            "LLOG_CONSUME_MAX_RESPONSE_BYTES": "500",
            "LLOG_CONSUME_DEFAULT_PARTITION_MAX_BYTES": "600",
        }
    )
    assert limits == Limits(100, 2, 3, 400, 500, 600)
    assert Limits.from_env({}) == Limits()


def test_invalid_limit_variables_name_themselves():
    with pytest.raises(LlogError, match="LLOG_MAX_REQUEST_BYTES"):
        Limits.from_env({"LLOG_MAX_REQUEST_BYTES": "0"})
    with pytest.raises(LlogError, match="LLOG_CONSUME_MAX_WAIT_MS"):
        Limits.from_env({"LLOG_CONSUME_MAX_WAIT_MS": "soon"})


# --- consume -----------------------------------------------------------------------------


def consume(*items: dict[str, Any], limits: Limits = LIMITS, **controls: Any) -> ConsumeRequest:
    return parse_consume({"topic_partitions": list(items), **controls}, limits)


def test_consume_defaults():
    request = consume(fetch(), fetch(partition=1, fetch_offset=7, partition_max_bytes=10))
    assert request == ConsumeRequest(
        [FetchPartition("orders", 0, 1, LIMITS.default_partition_max_bytes), FetchPartition("orders", 1, 7, 10)],
        max_wait_ms=0,
        min_bytes=1,
        max_bytes=LIMITS.max_response_bytes,
    )


def test_consume_example_request():
    request = consume(
        fetch(partition_max_bytes=1048576), fetch(partition=1), max_wait_ms=250, min_bytes=1, max_bytes=4194304
    )
    assert (request.max_wait_ms, request.min_bytes, request.max_bytes) == (250, 1, 4194304)


@pytest.mark.parametrize("value", [None, [], {}, "orders"])
def test_consume_topic_partitions_must_be_a_non_empty_list(value):
    body = {} if value is None else {"topic_partitions": value}
    rejected(parse_consume, body, LIMITS, match="topic_partitions")


@pytest.mark.parametrize("partition", [-1, True, 1.0, "0", None])
def test_consume_partition_must_be_a_non_negative_integer(partition):
    rejected(consume, fetch(partition=partition), match=r"partition( must be a non-negative integer|: expected `int`)")


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("fetch_offset", -1),
        ("fetch_offset", None),
        ("fetch_offset", "1"),
        ("fetch_offset", 1.0),
        ("fetch_offset", True),
        ("fetch_offset", INT64_MAX + 1),
        ("partition_max_bytes", 0),
        ("partition_max_bytes", -1),
        ("partition_max_bytes", "1"),
    ],
)
def test_consume_partition_fields(field, value):
    item = fetch()
    item[field] = value
    rejected(consume, item, match=field)


def test_fetch_offset_zero_and_int64_max_parse():
    # Out-of-range offsets are answered per partition (OffsetOutOfRange), not rejected.
    assert consume(fetch(fetch_offset=0)).partitions[0].fetch_offset == 0
    assert consume(fetch(fetch_offset=INT64_MAX)).partitions[0].fetch_offset == INT64_MAX


def test_repeated_partitions_are_400():
    rejected(consume, fetch(), fetch(fetch_offset=3), match="repeats orders/0")


@pytest.mark.parametrize(
    ("controls", "match"),
    [
        ({"max_wait_ms": -1}, "max_wait_ms"),
        ({"max_wait_ms": 1.5}, "max_wait_ms"),
        ({"min_bytes": -1}, "min_bytes"),
        ({"min_bytes": "1"}, "min_bytes"),
        ({"max_bytes": 0}, "max_bytes"),
        ({"max_bytes": None}, "max_bytes"),
    ],
)
def test_consume_controls(controls, match):
    rejected(consume, fetch(), **controls, match=match)


def test_max_wait_over_the_limit_names_its_variable():
    limits = Limits(max_wait_ms=1000)
    assert consume(fetch(), limits=limits, max_wait_ms=1000).max_wait_ms == 1000
    exc = rejected(consume, fetch(), limits=limits, max_wait_ms=1001, error_type="LimitExceeded")
    assert "LLOG_CONSUME_MAX_WAIT_MS" in str(exc)


def test_max_bytes_is_capped_by_the_response_limit():
    limits = Limits(max_response_bytes=100)
    assert consume(fetch(), limits=limits, max_bytes=10**9).max_bytes == 100
    assert consume(fetch(), limits=limits, max_bytes=50).max_bytes == 50


def test_consume_partition_limit_names_its_variable():
    limits = Limits(max_partitions_per_request=1)
    exc = rejected(consume, fetch(), fetch(partition=1), limits=limits, error_type="LimitExceeded")
    assert "LLOG_MAX_PARTITIONS_PER_REQUEST" in str(exc)


# --- produce_response ----------------------------------------------------------------------


def ok(partition: int = 0, start: int = 1, count: int = 2) -> AppendResult:
    end = start + count - 1
    return AppendResult(
        "orders", partition, count, start, end, f"llog/orders/partitions/{partition}/index/{end:020d}",
        "s3://leaderless-log-wal/llog/wal-shared/abc",
    )


def failed(error: LlogError, partition: int = 1, count: int = 1) -> AppendResult:
    return AppendResult("orders", partition, count, error=error)


def test_all_ok_is_200_with_the_documented_shape():
    status, answer = produce_response([ok(0, 1, 2), ok(1, 1, 1)])
    body = built(answer)
    assert status == 200
    assert body == {
        "results": [
            {
                "topic": "orders",
                "partition": 0,
                "ok": True,
                "count": 2,
                "start_offset": 1,
                "end_offset": 2,
                "index_key": "llog/orders/partitions/0/index/00000000000000000002",
                "wal_uri": "s3://leaderless-log-wal/llog/wal-shared/abc",
            },
            {
                "topic": "orders",
                "partition": 1,
                "ok": True,
                "count": 1,
                "start_offset": 1,
                "end_offset": 1,
                "index_key": "llog/orders/partitions/1/index/00000000000000000001",
                "wal_uri": "s3://leaderless-log-wal/llog/wal-shared/abc",
            },
        ],
        "success_count": 2,
        "error_count": 0,
    }


def test_mixed_outcome_is_409_with_per_partition_errors():
    status, answer = produce_response([ok(0), failed(LogFenced("orders", 1))])
    body = built(answer)
    assert status == 409
    assert (body["success_count"], body["error_count"]) == (1, 1)
    assert body["results"][1] == {
        "topic": "orders",
        "partition": 1,
        "ok": False,
        "count": 1,
        "error_type": "LogFenced",
        "error": "partition orders/1 is fenced and rejects appends",
        "retriable": False,
    }


def test_all_failed_without_back_pressure_is_409():
    status, answer = produce_response([failed(OxiaUnavailable("down"), 0), failed(AppendOutcomeUnknown("?"), 1)])
    body = built(answer)
    assert status == 409
    assert [r["error_type"] for r in body["results"]] == ["OxiaUnavailable", "AppendOutcomeUnknown"]
    assert all(r["retriable"] for r in body["results"])


def test_all_back_pressure_is_503():
    refused = [failed(BackPressureRejected("full"), 0), failed(BackPressureRejected("full"), 1)]
    status, answer = produce_response(refused)
    body = built(answer)
    assert status == 503
    assert body["error_count"] == 2
    assert {r["error_type"] for r in body["results"]} == {"BackPressureRejected"}


def test_back_pressure_mixed_with_other_failures_is_409():
    status, _ = produce_response([failed(BackPressureRejected("full"), 0), failed(OxiaUnavailable("down"), 1)])
    assert status == 409
    status, _ = produce_response([ok(0), failed(BackPressureRejected("full"), 1)])
    assert status == 409


# --- consume_response ------------------------------------------------------------------------


def record(offset: int, value: bytes, key: bytes | None = None, headers=(), ts: int = 1700) -> LogRecord:
    return LogRecord(offset, value, key, tuple(headers), ts)


def test_consume_response_encodes_utf8_as_text_and_binary_as_base64():
    fetched = PartitionFetch(
        "orders",
        0,
        1,
        [
            record(1, b"alpha"),
            record(2, b"\x00\x01\xff", key=b"k\xff", headers=[("h", b"x"), ("bin", b"\xfe")]),
            record(3, "é".encode(), key=b""),
        ],
        high_watermark=5,
    )
    status, answer = consume_response([fetched])
    body = built(answer)
    assert status == 200
    assert body == {
        "results": [
            {
                "topic": "orders",
                "partition": 0,
                "ok": True,
                "high_watermark": 5,
                "log_start_offset": 1,
                "next_fetch_offset": 4,
                "records": [
                    {"offset": 1, "timestamp_ms": 1700, "key": None, "headers": {}, "value": "alpha"},
                    {
                        "offset": 2,
                        "timestamp_ms": 1700,
                        "key": {"base64": base64.b64encode(b"k\xff").decode()},
                        "headers": {"h": "x", "bin": {"base64": "/g=="}},
                        "value": {"base64": "AAH/"},
                    },
                    {"offset": 3, "timestamp_ms": 1700, "key": "", "headers": {}, "value": "é"},
                ],
            }
        ]
    }


def test_consume_response_reports_partition_errors_inline_with_200():
    empty_tail = PartitionFetch("orders", 0, 6, [], high_watermark=5)
    out_of_range = PartitionFetch("orders", 1, 9, [], 5, error=OffsetOutOfRange("orders", 1, 9, 1, 5))
    missing = PartitionFetch("audit", 0, 1, [], None, error=PartitionNotInitialized("audit", 0))
    status, answer = consume_response([empty_tail, out_of_range, missing])
    body = built(answer)
    assert status == 200
    tail, oor, absent = body["results"]
    assert tail == {
        "topic": "orders",
        "partition": 0,
        "ok": True,
        "high_watermark": 5,
        "log_start_offset": 1,
        "next_fetch_offset": 6,
        "records": [],
    }
    assert (oor["ok"], oor["error_type"], oor["retriable"], oor["next_fetch_offset"]) == (
        False, "OffsetOutOfRange", False, 9
    )
    assert "[1, 5]" in oor["error"]
    assert (absent["error_type"], absent["high_watermark"]) == ("PartitionNotInitialized", None)


def test_consume_response_is_json_serializable_for_any_bytes():
    fetched = PartitionFetch("orders", 0, 1, [record(1, bytes(range(256)), key=bytes(range(255, -1, -1)))], 1)
    text = msgspec.json.encode(consume_response([fetched])[1])
    rec = json.loads(text)["results"][0]["records"][0]
    assert decode_bytes(rec["value"]) == bytes(range(256))
    assert decode_bytes(rec["key"]) == bytes(range(255, -1, -1))


# --- errors -------------------------------------------------------------------------------


def test_an_error_answer_has_the_topic_only_when_it_names_one():
    assert built(client_error("down", "OxiaUnavailable", retriable=True)) == {
        "error": "down", "error_type": "OxiaUnavailable", "retriable": True
    }
    assert built(client_error("gone", "UnknownTopic", topic="t"))["topic"] == "t"


def test_request_rejected_defaults():
    exc = RequestRejected("bad")
    assert (exc.status, exc.error_type, exc.retriable) == (400, "InvalidRequest", False)


def test_consume_answers_are_what_their_definition_says():
    """The consume answer is built as plain data (for orjson's speed): it must decode as ``bodies.ConsumeResponse``,
    with every field the definition requires and none it does not know."""
    fetched = [
        PartitionFetch("orders", 0, 1, [record(1, b"a"), record(2, b"\x00", key=b"k", headers=[("h", b"\xff")])], 5),
        PartitionFetch("orders", 1, 9, [], 5, error=OffsetOutOfRange("orders", 1, 9, 1, 5)),
        PartitionFetch("audit", 0, 1, [], None, error=PartitionNotInitialized("audit", 0)),
    ]
    _, answer = consume_response(fetched)
    decoded = msgspec.json.decode(json_bytes(answer), type=bodies.ConsumeResponse)
    assert [r.ok for r in decoded.results] == [True, False, False]
    assert decoded.results[0].records[1].value == bodies.Base64Bytes("AA==")
    assert json.loads(msgspec.json.encode(decoded)) == json.loads(json_bytes(answer))


# --- topics -------------------------------------------------------------------------------


@pytest.mark.parametrize("count", [None, True, 2.0, "2", [2]])
def test_a_partition_count_that_is_not_an_integer_is_invalid_partition_count(count: Any):
    # Every bad count, 0 and "2" alike, is the same error (the decoder would answer the wrong JSON type
    # InvalidRequest, the range InvalidPartitionCount).
    for parse, body in (
        (parse_create_topic, {"topic": "orders", "partitions": count}),
        (parse_grow_topic, {"partitions": count}),
    ):
        with pytest.raises(RequestRejected) as refused:
            parse(json.dumps(body), LIMITS)
        assert (refused.value.status, refused.value.error_type) == (400, "InvalidPartitionCount"), body


@pytest.mark.parametrize("setting", ["retention_ms", "retention_bytes"])
def test_a_retention_limit_past_64_bits_is_refused(setting: str):
    # The decoder keeps 2**64 an exact int: TopicConfig.parse must refuse what no 64-bit reader of the topic
    # record could hold.
    _, _, config = parse_create_topic(json.dumps({"topic": "orders", "config": {setting: 2**64}}), LIMITS)
    with pytest.raises(InvalidArgument, match=setting):
        TopicConfig.parse(config, default_protocol=AppendProtocol.CAS)
