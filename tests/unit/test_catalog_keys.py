"""Keys of the partition registry (``llog.format.keys.RegistryKeys``)."""

from __future__ import annotations

import pytest

from llog.errors import InvalidPartition, InvalidTopicName
from llog.format.keys import MAX_PARTITION, RegistryKeys, validate_topic


def test_layout() -> None:
    keys = RegistryKeys("llog")
    assert keys.partition("orders", 7) == "llog/__catalog/partitions/orders:0000000007"
    assert keys.partition("orders", MAX_PARTITION) == "llog/__catalog/partitions/orders:2147483647"
    assert keys.partition_key == "__catalog"
    assert RegistryKeys("a/b").prefix == "a/b/__catalog/partitions/"


def test_every_key_is_at_the_depth_of_its_scan_bounds() -> None:
    """Oxia v0.17.1 sorts by the number of '/' first: a scan only returns keys of its bounds' depth."""
    keys = RegistryKeys("llog")
    depth = keys.prefix.count("/")
    for key in (keys.partition("a.b-c_d", 0), keys.scan_end, keys.topic_prefix("x"), keys.topic_scan_end("x")):
        assert key.count("/") == depth


def test_a_topic_scan_holds_exactly_that_topic() -> None:
    keys = RegistryKeys("llog")
    start, end = keys.topic_prefix("foo"), keys.topic_scan_end("foo")
    for topic in ("foobar", "foo.bar", "foo-", "fo", "foo_"):
        assert not start <= keys.partition(topic, 1) < end, topic
    for partition in (0, 1, 2, 10, MAX_PARTITION):
        assert start <= keys.partition("foo", partition) < end
        assert keys.prefix <= keys.partition("foo", partition) < keys.scan_end


def test_partitions_sort_numerically() -> None:
    keys = RegistryKeys("llog")
    assert sorted(keys.partition("t", p) for p in (10, 2, 1)) == [keys.partition("t", p) for p in (1, 2, 10)]


def test_parse_round_trips_and_rejects_strays() -> None:
    keys = RegistryKeys("llog")
    assert keys.parse(keys.partition("foo.bar", 10)) == ("foo.bar", 10)
    for stray in (
        "llog/__catalog/partitions/foo",
        "llog/__catalog/partitions/foo:12",
        "llog/__catalog/partitions/foo:00000000x1",
        "llog/__catalog/partitions/:0000000001",
        "llog/__catalog/partitions/wal-shared:0000000001",
        "llog/__catalog/partitions/foo:9999999999",
        "other/__catalog/partitions/foo:0000000001",
    ):
        assert keys.parse(stray) is None, stray


def test_names_are_validated() -> None:
    keys = RegistryKeys("llog")
    with pytest.raises(InvalidTopicName):
        keys.partition("a:b", 1)
    with pytest.raises(InvalidPartition):
        keys.partition("a", -1)
    with pytest.raises(InvalidTopicName):
        validate_topic("__catalog")
