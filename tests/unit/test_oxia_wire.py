"""llog/store/oxia_wire.py against the messages generated from Oxia's client.proto (llog/store/oxia_proto),
both ways."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from llog.store.oxia_proto.io.oxia.proto import v1 as pb
from llog.store.oxia_wire import (
    GetAnswer,
    PutAnswer,
    ScannedRecord,
    SequentialPut,
    decode_range_scan_response,
    decode_read_response,
    decode_write_response,
    encode_range_scan_request,
    encode_read_request,
    encode_write_request,
)

INT64 = st.integers(min_value=-(2**63), max_value=2**63 - 1)
UINT64 = st.integers(min_value=0, max_value=2**64 - 1)
PUTS = st.builds(
    SequentialPut,
    prefix_key=st.text(max_size=80),
    value=st.binary(max_size=300),
    partition_key=st.text(min_size=1, max_size=40),
    deltas=st.lists(UINT64, max_size=3).map(tuple),
)


def generated_request(shard: int, puts: list[SequentialPut]) -> pb.WriteRequest:
    return pb.WriteRequest(shard=shard, puts=[
        pb.PutRequest(key=p.prefix_key, value=p.value, partition_key=p.partition_key,
                      sequence_key_delta=list(p.deltas))
        for p in puts
    ])  # fmt: skip


@given(shard=INT64, puts=st.lists(PUTS, max_size=20))
def test_a_write_request_is_byte_for_byte_the_generated_messages(shard: int, puts: list[SequentialPut]) -> None:
    expected = generated_request(shard, puts)
    encoded = encode_write_request(shard, puts)
    assert encoded == bytes(expected)
    assert pb.WriteRequest().parse(encoded) == expected


VERSIONS = st.builds(
    pb.Version,
    version_id=INT64,
    modifications_count=INT64,
    created_timestamp=UINT64,
    modified_timestamp=UINT64,
    session_id=st.none() | INT64,
    client_identity=st.none() | st.text(max_size=20),
)


def version_id(answer: pb.GetResponse | pb.PutResponse) -> int:
    assert answer.version is not None  # VERSIONS always makes one
    return int(answer.version.version_id)


@given(shard=INT64, keys=st.lists(st.text(max_size=80), max_size=20))
def test_a_read_request_is_byte_for_byte_the_generated_messages(shard: int, keys: list[str]) -> None:
    expected = pb.ReadRequest(shard=shard, gets=[pb.GetRequest(key=k, include_value=True) for k in keys])
    encoded = encode_read_request(shard, keys)
    assert encoded == bytes(expected)
    assert pb.ReadRequest().parse(encoded) == expected


GET_ANSWERS = st.builds(
    pb.GetResponse,
    status=st.sampled_from(list(pb.Status)),
    version=VERSIONS,
    value=st.none() | st.binary(max_size=300),
    key=st.none() | st.text(max_size=80),
    secondary_index_key=st.none() | st.text(max_size=20),
)


@given(answers=st.lists(GET_ANSWERS, max_size=20))
def test_a_read_response_reads_as_the_generated_messages_do(answers: list[pb.GetResponse]) -> None:
    """Every field of the answer is present: what is not read must be skipped correctly."""
    decoded = decode_read_response(bytes(pb.ReadResponse(gets=answers)))
    assert decoded == [GetAnswer(int(a.status), version_id(a), a.value or b"") for a in answers]


def test_bytes_that_are_not_a_read_response_raise_value_error() -> None:
    with pytest.raises(ValueError, match="truncated"):
        decode_read_response(b"\x0a\x05\x08")


ANSWERS = st.builds(
    pb.PutResponse,
    status=st.sampled_from(list(pb.Status)),
    version=VERSIONS,
    key=st.none() | st.text(max_size=80),
)


@given(answers=st.lists(ANSWERS, max_size=20), deletes=st.integers(min_value=0, max_value=3))
def test_a_write_response_reads_as_the_generated_messages_do(answers: list[pb.PutResponse], deletes: int) -> None:
    """Every field of the answer is present, and deletes too: what is not read must be skipped correctly."""
    response = pb.WriteResponse(puts=answers, deletes=[pb.DeleteResponse(status=pb.Status.OK)] * deletes)
    decoded = decode_write_response(bytes(response))
    assert decoded == [PutAnswer(int(a.status), version_id(a), a.key) for a in answers]


@pytest.mark.parametrize(
    "garbage",
    [b"\x0a\x05\x08", b"\x0a", b"\x08\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff", b"\x0b", b"\x09\x00"],
    ids=["truncated message", "missing length", "overlong varint", "group wire type", "truncated fixed64"],
)
def test_bytes_that_are_not_a_write_response_raise_value_error(garbage: bytes) -> None:
    with pytest.raises(ValueError, match="truncated|overlong|wire type"):
        decode_write_response(garbage)


@given(shard=INT64, start=st.text(max_size=80), end=st.text(max_size=80))
def test_a_range_scan_request_is_byte_for_byte_the_generated_message(shard: int, start: str, end: str) -> None:
    expected = pb.RangeScanRequest(shard=shard, start_inclusive=start, end_exclusive=end)
    encoded = encode_range_scan_request(shard, start, end)
    assert encoded == bytes(expected)
    assert pb.RangeScanRequest().parse(encoded) == expected


def scanned(records: list[pb.GetResponse]) -> list[ScannedRecord]:
    """What the Oxia client's own ``range_scan`` yields for these records."""
    return [ScannedRecord(r.key or "", r.value or b"", version_id(r)) for r in records]


@given(records=st.lists(GET_ANSWERS, max_size=20), limit=st.none() | st.integers(min_value=0, max_value=25))
def test_a_range_scan_response_reads_as_the_generated_messages_do(records: list[pb.GetResponse],
                                                                   limit: int | None) -> None:  # fmt: skip
    """Every field of each record is present: what is not read must be skipped correctly."""
    decoded = decode_range_scan_response(bytes(pb.RangeScanResponse(records=records)), limit)
    assert decoded == scanned(records)[:limit]


def test_a_range_scan_response_is_not_read_past_the_records_taken() -> None:
    records = [pb.GetResponse(key=f"k{i}", value=b"v", version=pb.Version(version_id=i)) for i in range(3)]
    response = bytes(pb.RangeScanResponse(records=records)) + b"\x0a\x05\x08"  # a truncated fourth record
    assert decode_range_scan_response(response, 3) == scanned(records)
    with pytest.raises(ValueError, match="truncated"):
        decode_range_scan_response(response)
