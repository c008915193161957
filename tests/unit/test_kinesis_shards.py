"""The Kinesis shard layer: shard ids, the even split of the hash key space, and where a record goes."""

from __future__ import annotations

import hashlib
import itertools

import pytest

from llog.api.kinesis.errors import InvalidArgumentException, ResourceNotFoundException, ValidationException
from llog.api.kinesis.shards import (
    MAX_HASH_KEY,
    HashKeyRange,
    hash_key_of,
    hash_key_range,
    parse_explicit_hash_key,
    partition_of,
    shard_for,
    shard_id,
)

# What a real CreateStream with ShardCount=3 answers in DescribeStream.
THREE_SHARDS = [
    ("0", "113427455640312821154458202477256070484"),
    ("113427455640312821154458202477256070485", "226854911280625642308916404954512140969"),
    ("226854911280625642308916404954512140970", "340282366920938463463374607431768211455"),
]


def test_shard_ids_have_kinesis_format_and_round_trip() -> None:
    assert shard_id(0) == "shardId-000000000000"
    assert shard_id(7) == "shardId-000000000007"
    assert shard_id(123456789012 % 10**12) == "shardId-123456789012"
    for partition in (0, 1, 9, 10, 4095):
        assert partition_of(shard_id(partition), 4096, "s") == partition


@pytest.mark.parametrize("partition", [-1, 10**12])
def test_a_partition_outside_twelve_digits_has_no_shard_id(partition: int) -> None:
    with pytest.raises(ValueError, match="no shard id"):
        shard_id(partition)


@pytest.mark.parametrize(
    "shard", ["shardId-000000000002", "shardId-00000000001", "shardId-0000000000001", "shard-000000000000", "", "0"]
)
def test_an_unknown_or_malformed_shard_is_not_found(shard: str) -> None:
    with pytest.raises(ResourceNotFoundException, match=f"Shard {shard} in stream orders does not exist") as caught:
        partition_of(shard, 2, "orders")
    assert caught.value.status == 400


def test_three_shards_match_what_kinesis_creates() -> None:
    ranges = [hash_key_range(p, 3).as_kinesis() for p in range(3)]
    assert ranges == [{"StartingHashKey": start, "EndingHashKey": end} for start, end in THREE_SHARDS]


def test_two_shards_split_at_two_to_the_127() -> None:
    assert hash_key_range(0, 2) == HashKeyRange(0, 2**127 - 1)
    assert hash_key_range(1, 2) == HashKeyRange(2**127, MAX_HASH_KEY)


@pytest.mark.parametrize("shard_count", [1, 2, 3, 7, 10, 64, 500, 1000])
def test_the_ranges_tile_the_whole_hash_key_space(shard_count: int) -> None:
    ranges = [hash_key_range(p, shard_count) for p in range(shard_count)]
    assert ranges[0].start == 0
    assert ranges[-1].end == MAX_HASH_KEY == 2**128 - 1
    for before, after in itertools.pairwise(ranges):
        assert after.start == before.end + 1
    widths = {r.end - r.start for r in ranges[:-1]}
    assert len(widths) <= 1
    assert 0 <= (ranges[-1].end - ranges[-1].start) - (ranges[0].end - ranges[0].start) < shard_count


@pytest.mark.parametrize(("partition", "shard_count"), [(3, 3), (-1, 3), (0, 0)])
def test_a_range_outside_the_stream_is_a_bug(partition: int, shard_count: int) -> None:
    with pytest.raises(ValueError, match="not one of|1 to 2"):
        hash_key_range(partition, shard_count)


def test_the_hash_key_is_the_big_endian_md5_of_the_utf8_partition_key() -> None:
    assert hash_key_of("a") == int("0cc175b9c0f1b6a831c399e269772661", 16)
    assert hash_key_of("é") == int.from_bytes(hashlib.md5("é".encode()).digest(), "big")


def test_a_lone_surrogate_hashes_as_a_question_mark() -> None:
    assert hash_key_of("a\ud800b") == hash_key_of("a?b")


@pytest.mark.parametrize("shard_count", [1, 2, 3, 5, 16])
def test_a_record_goes_to_the_shard_whose_range_holds_its_hash_key(shard_count: int) -> None:
    for n in range(300):
        key = f"user-{n}"
        partition = shard_for(key, None, shard_count)
        assert hash_key_of(key) in hash_key_range(partition, shard_count)


@pytest.mark.parametrize(("start", "end"), THREE_SHARDS)
def test_explicit_hash_keys_at_the_boundaries_pick_the_owning_shard(start: str, end: str) -> None:
    partition = THREE_SHARDS.index((start, end))
    assert shard_for("ignored", start, 3) == partition
    assert shard_for("ignored", end, 3) == partition
    if partition:
        assert shard_for("ignored", str(int(start) - 1), 3) == partition - 1


def test_the_explicit_hash_key_wins_over_the_partition_key() -> None:
    assert shard_for("a", "0", 2) == 0
    assert shard_for("a", str(MAX_HASH_KEY), 2) == 1
    assert shard_for("a", None, 2) == hash_key_of("a") >> 127


def test_the_largest_hash_key_is_accepted_and_one_more_is_invalid() -> None:
    assert parse_explicit_hash_key(str(MAX_HASH_KEY)) == MAX_HASH_KEY
    too_big = str(MAX_HASH_KEY + 1)
    with pytest.raises(InvalidArgumentException) as caught:
        shard_for("a", too_big, 4)
    assert caught.value.body() == {
        "__type": "InvalidArgumentException",
        "message": "Invalid ExplicitHashKey. ExplicitHashKey must be in the range: [0, 2^128-1]. "
        f"Specified value was {too_big}",
    }


@pytest.mark.parametrize("text", ["", "-1", "01", "1.0", " 1", "1e3", "abc", "9" * 40, "١٢"])
def test_a_hash_key_off_the_model_pattern_is_a_validation_error(text: str) -> None:
    with pytest.raises(ValidationException, match=f"Value '{text}' at 'explicitHashKey' failed to satisfy"):
        parse_explicit_hash_key(text)


def test_a_partition_key_has_one_to_256_characters() -> None:
    assert shard_for("k" * 256, None, 1) == 0
    assert shard_for("€" * 256, None, 1) == 0
    with pytest.raises(ValidationException, match="length greater than or equal to 1"):
        shard_for("", None, 1)
    with pytest.raises(ValidationException, match="length less than or equal to 256"):
        shard_for("k" * 257, "0", 1)
