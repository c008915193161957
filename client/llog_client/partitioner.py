"""Kafka's default partitioner, bit for bit as the Java client computes it.

``partition_for_key(key, n) = to_positive(murmur2(key)) % n`` (``BuiltInPartitioner.partitionForKey``),
with ``murmur2`` as ``org.apache.kafka.common.utils.Utils.murmur2``: a signed 32-bit result. Keyed
records therefore land on the partition a Kafka producer would pick for the same key and count. This
is the one implementation: the server (keyed ``POST /produce``) and the client import it.
"""

from __future__ import annotations

_SEED = 0x9747B28C
_M = 0x5BD1E995
_R = 24
_MASK = 0xFFFFFFFF


def murmur2(data: bytes) -> int:
    """Java's ``Utils.murmur2(data)``: MurmurHash2, seed 0x9747b28c, as a signed 32-bit int."""
    length = len(data)
    h = (_SEED ^ length) & _MASK
    whole = length - length % 4
    for i in range(0, whole, 4):
        k = int.from_bytes(data[i : i + 4], "little")
        k = (k * _M) & _MASK
        k ^= k >> _R
        k = (k * _M) & _MASK
        h = ((h * _M) & _MASK) ^ k
    tail = data[whole:]
    # Java's switch falls through: 3 trailing bytes fold in all three, then multiply once.
    if len(tail) >= 3:
        h ^= tail[2] << 16
    if len(tail) >= 2:
        h ^= tail[1] << 8
    if tail:
        h ^= tail[0]
        h = (h * _M) & _MASK
    h ^= h >> 13
    h = (h * _M) & _MASK
    h ^= h >> 15
    return h - (1 << 32) if h & 0x80000000 else h


def to_positive(number: int) -> int:
    """Java's ``Utils.toPositive``: the low 31 bits (not ``abs``, which maps MIN_VALUE to itself)."""
    return number & 0x7FFFFFFF


def partition_for_key(key: bytes, partitions: int) -> int:
    """The partition of ``key`` among ``partitions`` (>= 1), as Kafka's default partitioner picks it."""
    if partitions < 1:
        raise ValueError(f"partitions must be >= 1, got {partitions}")
    return to_positive(murmur2(key)) % partitions
