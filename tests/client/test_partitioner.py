"""Kafka's default partitioner: the hash and the partition of a key are the Java client's."""

from __future__ import annotations

import pytest

from llog_client.partitioner import murmur2, partition_for_key, to_positive

# kafka-clients UtilsTest.testMurmur2 (clients/src/test/java/org/apache/kafka/common/utils/UtilsTest.java).
KAFKA_VECTORS = {
    b"21": -973932308,
    b"foobar": -790332482,
    b"a-little-bit-long-string": -985981536,
    b"a-little-bit-longer-string": -1486304829,
    b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8": -58897971,
    b"abc": 479470107,
}
# librdkafka's rdmurmur2.c unit test (its murmur2 partitioner is Java-compatible): a 1-byte tail and 0 bytes.
LIBRDKAFKA_VECTORS = {b"kafka": -798503068, b"giberish123456789": -1890243828, b"1234": -1614185708, b"4": 1514888353}


@pytest.mark.parametrize(("data", "expected"), [*KAFKA_VECTORS.items(), *LIBRDKAFKA_VECTORS.items()])
def test_murmur2_is_javas(data: bytes, expected: int) -> None:
    assert murmur2(data) == expected


def test_every_tail_length_is_hashed_with_every_byte() -> None:
    # Changing any byte of a key of any tail length changes its hash (no byte is dropped).
    for length in range(0, 9):
        key = bytes(range(1, length + 1))
        for index in range(length):
            changed = bytearray(key)
            changed[index] ^= 0x80
            assert murmur2(bytes(changed)) != murmur2(key), (length, index)


def test_to_positive_keeps_the_low_31_bits() -> None:
    assert to_positive(-973932308) == -973932308 & 0x7FFFFFFF == 1173551340
    assert to_positive(-(2**31)) == 0  # not abs(): Integer.MIN_VALUE maps to 0
    assert to_positive(479470107) == 479470107


def test_partition_for_key_is_to_positive_murmur2_modulo_the_count() -> None:
    for key, hashed in KAFKA_VECTORS.items():
        for partitions in (1, 2, 3, 6, 12, 50):
            assert partition_for_key(key, partitions) == (hashed & 0x7FFFFFFF) % partitions
    assert partition_for_key(b"foobar", 50) == 16


def test_partition_for_key_needs_a_partition() -> None:
    with pytest.raises(ValueError, match="partitions must be >= 1"):
        partition_for_key(b"k", 0)
