"""Unit tests of the key schema (llog/format/keys.py), including Oxia's real key order."""

from __future__ import annotations

import itertools
import random
import uuid

import pytest

from llog.errors import InvalidArgument, InvalidPartition, InvalidTopicName, LlogError
from llog.format.keys import (
    DEFAULT_ROOT_PREFIX,
    MAX_PARTITION,
    OFFSET_WIDTH,
    PartitionKeys,
    S3Location,
    format_offset,
    partition_keys,
    shared_wal_object_key,
    validate_partition,
    validate_root_prefix,
    validate_topic,
)
from llog.store.oxia_client import oxia_key_order

oxia_order = oxia_key_order  # the server's key order


def oxia_compare(a: str, b: str) -> int:
    """Negative, zero or positive as ``a`` sorts before, with or after ``b`` in Oxia."""
    return (oxia_order(a) > oxia_order(b)) - (oxia_order(a) < oxia_order(b))


# --- the documented key layout -------------------------------------------------------------------


def test_documented_key_strings():
    k = PartitionKeys("orders", 0)
    assert k.root == DEFAULT_ROOT_PREFIX == "llog"
    assert k.partition_key == "orders:0"
    assert k.control == "llog/orders/partitions/0/meta/control"
    assert k.compaction_cursor == "llog/orders/partitions/0/meta/compaction-cursor"
    assert k.compaction == "llog/orders/partitions/0/meta/compaction"
    assert k.compactor_claim == "llog/orders/partitions/0/meta/compactor-claim"
    assert k.index_prefix == "llog/orders/partitions/0/index/"
    assert k.index_scan_end == "llog/orders/partitions/0/index/~"
    assert k.index(2) == "llog/orders/partitions/0/index/00000000000000000002"
    assert k.index(1) == "llog/orders/partitions/0/index/" + "0" * 19 + "1"


def test_partition_number_and_topic_appear_verbatim():
    k = PartitionKeys("A.b_c-9", 2147483647)
    assert k.partition_key == "A.b_c-9:2147483647"
    assert k.control == "llog/A.b_c-9/partitions/2147483647/meta/control"


def test_compacted_object_key():
    k = PartitionKeys("orders", 3)
    assert k.compacted_object_key("abc") == "llog/orders/partitions/3/data/compacted/abc"
    a, b = k.compacted_object_key(), k.compacted_object_key()
    prefix = "llog/orders/partitions/3/data/compacted/"
    assert a.startswith(prefix)
    assert b.startswith(prefix)
    assert a != b
    uuid.UUID(a[len(prefix) :])


def test_shared_wal_object_key():
    key = shared_wal_object_key()
    assert key.startswith("llog/wal-shared/")
    uuid.UUID(key[len("llog/wal-shared/") :])
    assert shared_wal_object_key() != key
    assert shared_wal_object_key("tenant/x", "id-1") == "tenant/x/wal-shared/id-1"


@pytest.mark.parametrize("root", ["", "/llog", "llog/", "a//b", "a b", "\u00fc", 5, None])
def test_shared_wal_object_key_validates_root(root):
    with pytest.raises(InvalidArgument, match="invalid root prefix"):
        shared_wal_object_key(root)


def test_custom_root_prefix():
    k = PartitionKeys("orders", 1, root="tenant-7/logs")
    assert k.control == "tenant-7/logs/orders/partitions/1/meta/control"
    assert k.index(5) == "tenant-7/logs/orders/partitions/1/index/00000000000000000005"
    assert k.compacted_object_key("o") == "tenant-7/logs/orders/partitions/1/data/compacted/o"
    assert k.partition_key == "orders:1"  # the routing key does not include the root


@pytest.mark.parametrize("root", ["", "/", "a/", "/a", "a//b", "a b", "a:b", "\u00fc", "x" * 129, None, 1,
                                  ".", "..", "a/../b", "a/./b", "a/.."])
def test_invalid_root_prefix(root):
    with pytest.raises(InvalidArgument, match="invalid root prefix"):
        PartitionKeys("orders", 0, root=root)
    with pytest.raises(InvalidArgument):
        validate_root_prefix(root)


@pytest.mark.parametrize("root", ["a", "llog", "a/b/c", "A.b_c-9", "x" * 128, "...", ".a/b.", "a/..b"])
def test_valid_root_prefix(root):
    assert validate_root_prefix(root) == root


def test_partition_keys_are_values():
    assert PartitionKeys("orders", 0) == PartitionKeys("orders", 0, "llog")
    assert len({PartitionKeys("orders", 0), PartitionKeys("orders", 0), PartitionKeys("orders", 1)}) == 2
    with pytest.raises(AttributeError):
        PartitionKeys("orders", 0).topic = "x"  # type: ignore[misc]


# --- topic and partition validation -----------------------------------------------------


@pytest.mark.parametrize("topic", ["a", "A.b_c-9", "x" * 249, "0", "...", ".a", "-", "_", "wal-shared2", "WAL-SHARED"])
def test_valid_topics(topic):
    assert validate_topic(topic) == topic
    assert PartitionKeys(topic, 0).topic == topic


@pytest.mark.parametrize(
    "topic",
    ["", "x" * 250, "a/b", "a b", "\u00fc", "..", ".", "wal-shared", "a\n", "\na", "a:b", "a*", "a\x00", None, 5, b"a"],
)
def test_invalid_topics(topic):
    with pytest.raises(InvalidTopicName, match="invalid topic"):
        validate_topic(topic)
    with pytest.raises(InvalidTopicName):
        PartitionKeys(topic, 0)


def test_invalid_topic_is_a_value_error():
    assert issubclass(InvalidTopicName, ValueError)
    assert issubclass(InvalidTopicName, InvalidArgument)
    assert issubclass(InvalidTopicName, LlogError)
    with pytest.raises(ValueError, match="reserved"):
        validate_topic("wal-shared")


@pytest.mark.parametrize("partition", [0, 1, 7, MAX_PARTITION, 2**31 - 1])
def test_valid_partitions(partition):
    assert validate_partition(partition) == partition


@pytest.mark.parametrize("partition", [-1, 2**31, 2**63, True, False, 1.0, "1", None, [0]])
def test_invalid_partitions(partition):
    with pytest.raises(InvalidPartition, match="invalid partition"):
        validate_partition(partition)
    with pytest.raises(InvalidPartition):
        PartitionKeys("orders", partition)
    assert issubclass(InvalidPartition, ValueError)


def test_partition_keys_are_built_once_per_partition():
    first = partition_keys("orders", 3, "tenant/a")
    assert first == PartitionKeys("orders", 3, "tenant/a")
    assert partition_keys("orders", 3, "tenant/a") is first
    assert partition_keys("orders", 4, "tenant/a") is not first
    assert partition_keys("orders", 3) == PartitionKeys("orders", 3, DEFAULT_ROOT_PREFIX)


@pytest.mark.parametrize(
    ("topic", "partition", "root", "error"),
    [
        ("orders", True, "llog", InvalidPartition),  # equal to 1, whose keys are remembered below
        ("orders", False, "llog", InvalidPartition),
        ("orders", -1, "llog", InvalidPartition),
        ("a/b", 1, "llog", InvalidTopicName),
        (["orders"], 1, "llog", InvalidTopicName),  # not hashable: refused by the check, not by the cache
        ("orders", [1], "llog", InvalidPartition),
        ("orders", 1, "a b", InvalidArgument),
        ("orders", 1, None, InvalidArgument),
    ],
)
def test_partition_keys_refuse_what_partition_keys_refuse_every_time(topic, partition, root, error):
    partition_keys("orders", 1, "llog")
    partition_keys("orders", 0, "llog")
    for _ in range(2):  # a refusal is not remembered as valid
        with pytest.raises(error):
            partition_keys(topic, partition, root)


# --- offsets and index keys ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("offset", "text"),
    [
        (0, "0" * 20),
        (1, "0" * 19 + "1"),
        (12345, "0" * 15 + "12345"),
        (10**20 - 1, "9" * 20),
        (2**63 - 1, "09223372036854775807"),
    ],
)
def test_format_offset(offset, text):
    assert format_offset(offset) == text
    assert len(text) == OFFSET_WIDTH


@pytest.mark.parametrize("offset", [-1, 10**20, 10**30])
def test_format_offset_bounds(offset):
    with pytest.raises(InvalidArgument, match=f"offset {offset} cannot be encoded in 20 digits"):
        format_offset(offset)
    with pytest.raises(InvalidArgument):
        PartitionKeys("orders", 0).index(offset)


@pytest.mark.parametrize("offset", [0, 1, 9, 10, 99, 100, 123456789, 2**31, 2**63 - 1, 10**20 - 1])
def test_parse_index_key_round_trip(offset):
    k = PartitionKeys("orders", 0)
    assert k.parse_index_key(k.index(offset)) == offset


@pytest.mark.parametrize(
    "key",
    [
        PartitionKeys("orders", 1).index(5),  # another partition
        PartitionKeys("orders", 10).index(5),  # a partition whose number starts with ours
        PartitionKeys("orders2", 0).index(5),  # another topic sharing our prefix
        PartitionKeys("order", 0).index(5),
        PartitionKeys("orders", 0, root="other").index(5),  # another root
        PartitionKeys("orders", 0).index(5) + "/x",  # a deeper key
        PartitionKeys("orders", 0).index(5) + "0",  # 21 digits
        PartitionKeys("orders", 0).index(5)[:-1],  # 19 digits
        PartitionKeys("orders", 0).index_prefix,
        PartitionKeys("orders", 0).index_prefix + "0000000000000000000a",
        PartitionKeys("orders", 0).index_prefix + "-0000000000000000001",
        PartitionKeys("orders", 0).index_prefix + "+0000000000000000001",
        PartitionKeys("orders", 0).index_prefix + " 0000000000000000001",
        PartitionKeys("orders", 0).index_prefix + "0000000000_000000001",
        PartitionKeys("orders", 0).index_scan_end,
        PartitionKeys("orders", 0).control,
        "",
        "llog/orders/partitions/0/index",
    ],
)
def test_parse_index_key_rejects_foreign_keys(key):
    assert PartitionKeys("orders", 0).parse_index_key(key) is None


@pytest.mark.parametrize(
    "digit", ["\u0660", "\u00b2", "\uff11"], ids=["arabic-indic", "superscript-two", "fullwidth-one"]
)
def test_parse_index_key_rejects_non_ascii_digits(digit):
    k = PartitionKeys("orders", 0)
    # Actual: arabic-indic/fullwidth digits parse to a number, "\u00b2" raises ValueError from int().
    assert k.parse_index_key(k.index_prefix + digit * 20) is None


# --- Oxia key order (the real client's comparator) -----------------------------------------

ORDER_OFFSETS = [0, 1, 2, 9, 10, 11, 99, 100, 101, 999, 1000, 12345, 2**31, 2**32 + 1, 2**63 - 1, 10**20 - 1]


def in_scan(k: PartitionKeys, key: str) -> bool:
    return bool(oxia_compare(k.index_prefix, key) <= 0 and oxia_compare(key, k.index_scan_end) < 0)


def test_index_keys_sort_numerically_under_oxia_order():
    k = PartitionKeys("orders", 0)
    keys = [k.index(o) for o in ORDER_OFFSETS]
    shuffled = keys[:]
    random.Random(7).shuffle(shuffled)
    assert sorted(shuffled, key=oxia_order) == keys
    assert [k.parse_index_key(x) for x in sorted(shuffled, key=oxia_order)] == ORDER_OFFSETS
    for a, b in itertools.pairwise(keys):
        assert oxia_compare(a, b) < 0 < oxia_compare(b, a)


@pytest.mark.parametrize("partition", [0, 1, 10, 2**31 - 1])
def test_every_index_key_lies_in_the_scan_range(partition):
    k = PartitionKeys("orders", partition)
    assert oxia_compare(k.index_prefix, k.index_scan_end) < 0
    for offset in ORDER_OFFSETS:
        key = k.index(offset)
        assert oxia_compare(k.index_prefix, key) < 0
        assert oxia_compare(key, k.index_scan_end) < 0
        assert in_scan(k, key)
    assert oxia_compare(k.index(0), k.index(10**20 - 1)) < 0


@pytest.mark.parametrize(
    "key",
    [
        PartitionKeys("orders", 1).index(0),
        PartitionKeys("orders", 1).index(10**20 - 1),
        PartitionKeys("orders", 10).index(5),
        PartitionKeys("orders", 2).index(5),
        PartitionKeys("orders2", 0).index(5),
        PartitionKeys("orders-x", 0).index(5),
        PartitionKeys("order", 0).index(5),
        PartitionKeys("Orders", 0).index(5),
        PartitionKeys("orders", 0, root="llog2").index(5),
        PartitionKeys("orders", 0).index(0) + "/deeper",
        PartitionKeys("orders", 0).index(10**20 - 1) + "/deeper",
        PartitionKeys("orders", 0).index_prefix + "x/y",
        PartitionKeys("orders", 0).control,
        PartitionKeys("orders", 0).compaction,
        PartitionKeys("orders", 0).compaction_cursor,
        PartitionKeys("orders", 0).compactor_claim,
        "llog/orders/partitions/0/indey/00000000000000000005",
        "llog/orders/partitions/0/index",
    ],
)
def test_foreign_keys_fall_outside_the_scan_range(key):
    k = PartitionKeys("orders", 0)
    lower, upper = k.index(0), k.index_scan_end
    assert not (oxia_compare(lower, key) <= 0 and oxia_compare(key, upper) < 0)
    assert not in_scan(k, key)


def test_a_whole_shard_sorted_keeps_each_index_contiguous():
    """Sorting many partitions' keys the Oxia way leaves each partition's index keys adjacent."""
    parts = [PartitionKeys(t, p) for t in ("a", "orders", "orders2") for p in (0, 1, 10)]
    everything = []
    for k in parts:
        everything += [k.index(o) for o in ORDER_OFFSETS] + [k.control, k.compaction, k.index(3) + "/x"]
    everything.sort(key=oxia_order)
    for k in parts:
        positions = [i for i, key in enumerate(everything) if k.parse_index_key(key) is not None]
        assert len(positions) == len(ORDER_OFFSETS)
        assert positions == list(range(positions[0], positions[0] + len(positions)))
        assert [k.parse_index_key(everything[i]) for i in positions] == ORDER_OFFSETS
        inside = [key for key in everything if in_scan(k, key)]
        assert [k.parse_index_key(key) for key in inside] == ORDER_OFFSETS


# --- S3 locations ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("uri", "bucket", "key"),
    [
        ("s3://bucket/key", "bucket", "key"),
        ("s3://my-bucket/llog/wal-shared/0f3e", "my-bucket", "llog/wal-shared/0f3e"),
        ("s3://b/a/b/", "b", "a/b/"),
        ("s3://b//k", "b", "/k"),
    ],
)
def test_s3_location_round_trip(uri, bucket, key):
    loc = S3Location.parse(uri)
    assert (loc.bucket, loc.key) == (bucket, key)
    assert loc.uri == uri
    assert S3Location(bucket, key).uri == uri
    assert S3Location.parse(loc.uri) == loc


@pytest.mark.parametrize("uri", ["", "bucket/key", "http://b/k", "S3://b/k", "s3:/b/k", None, 5])
def test_s3_location_rejects_other_schemes(uri):
    with pytest.raises(InvalidArgument, match="not an s3:// URI"):
        S3Location.parse(uri)


@pytest.mark.parametrize("uri", ["s3://", "s3://bucket", "s3://bucket/", "s3:///key"])
def test_s3_location_needs_bucket_and_key(uri):
    with pytest.raises(InvalidArgument, match="needs a bucket and a key"):
        S3Location.parse(uri)


def test_manifest_keys_name_their_range_sort_by_start_and_parse_back():
    keys = PartitionKeys("orders", 3, "llog")
    assert keys.manifest_key(7, 9) == (
        "llog/orders/partitions/3/manifests/00000000000000000007-00000000000000000009.json"
    )
    assert sorted([keys.manifest_key(10, 10), keys.manifest_key(9, 9)]) == [
        keys.manifest_key(9, 9),
        keys.manifest_key(10, 10),
    ]
    assert keys.parse_manifest_key(keys.manifest_key(42, 50)) == (42, 50)
    for stray in [
        keys.manifest_prefix + "00000000000000000007.json",
        keys.manifest_prefix + "00000000000000000007-00000000000000000009",
        keys.manifest_prefix + "00000000000000000009-00000000000000000007.json",  # end before start
        keys.manifest_prefix + "00000000000000000000-00000000000000000001.json",  # offsets start at 1
        keys.manifest_prefix + "0000000000000000000x-00000000000000000009.json",
        keys.manifest_prefix + "notes.txt",
        PartitionKeys("orders", 4).manifest_key(7, 9),
    ]:
        assert keys.parse_manifest_key(stray) is None


TOPIC_ID = "6f1c0a52-8d0e-4c1b-9a57-2b9d8c1e0f43"


def test_a_partition_of_a_topic_with_an_id_lives_in_a_folder_of_its_own_the_legacy_one_does_not_prefix() -> None:
    legacy, keyed = PartitionKeys("orders", 1), PartitionKeys("orders", 1, topic_id=TOPIC_ID)
    other = PartitionKeys("orders", 1, topic_id="00000000-0000-4000-8000-000000000000")
    assert keyed.control == f"llog/orders/{TOPIC_ID}/partitions/1/meta/control"
    assert legacy.control == "llog/orders/partitions/1/meta/control"
    assert keyed.partition_key == legacy.partition_key == "orders:1"  # one shard for every incarnation
    for a, b in ((legacy, keyed), (keyed, legacy), (keyed, other)):
        assert not a.object_prefix.startswith(b.object_prefix)
        assert a.parse_index_key(b.index(5)) is None
        assert a.parse_manifest_key(b.manifest_key(1, 2)) is None
        assert a.parse_sequence_key(1, b.sequence_key(1, 3)) is None
        for start, end in a.oxia_ranges:  # in Oxia's order, no range of one holds a key of the other
            for key in (b.control, b.index(5), b.producer_state(str(uuid.UUID(int=5))), b.sequence_key(1, 3)):
                assert not (oxia_compare(start, key) <= 0 and oxia_compare(key, end) < 0)
    assert partition_keys("orders", 1, "llog", TOPIC_ID) == keyed
    assert partition_keys("orders", 1, "llog", TOPIC_ID) is partition_keys("orders", 1, "llog", TOPIC_ID)


@pytest.mark.parametrize("topic_id", ["partitions", "", "6F1C0A52-8D0E-4C1B-9A57-2B9D8C1E0F43", "a/b", 7])
def test_a_topic_id_that_is_not_a_lowercase_uuid_is_refused(topic_id: object) -> None:
    with pytest.raises(InvalidArgument):
        PartitionKeys("orders", 0, topic_id=topic_id)  # type: ignore[arg-type]
