"""The key schema: Oxia keys and S3 object keys, and the names they are built from.

Layout (docs/PROTOCOL.md, with ``root`` = ``LLOG_ROOT_PREFIX``, default ``llog``, and ``{base}`` a
partition's folder, below), with the module of ``llog.format.kv`` that holds each document::

    {base}/meta/control                                       (kv.control)
    {base}/meta/compaction-cursor                             (kv.compaction)
    {base}/meta/compaction                                    (kv.compaction)
    {base}/meta/compactor-claim                               (llog.protocol.claims)
    {base}/index/{end_offset:020d}                            (kv.index)
    {base}/seq/{generation:010d}/e-{position:020d}-{fences:020d}
                                    (kv.index; sequential partitions, docs/SEQUENTIAL_APPEND.md)
    {base}/producers/{producer_id}                            (kv.producers: idempotent producer state)
    {root}/__catalog/partitions/{topic}:{partition:010d}      (the registry, llog.protocol.registry)
    {root}/__catalog/topics/{topic}                           (topic records, llog.protocol.topics)
    {root}/__catalog/groups/{group}                           (kv.groups: consumer groups)
    {root}/__catalog/producers/{producer_id}                  (kv.producers: issued producer ids)
    {root}/__catalog/namespace                                (kv.namespace: the namespace identity)
    {root}/__catalog/namespace.json                           (S3: the same identity)
    {root}/__catalog/access-keys/{access_key_id}              (kv.access_keys: the Kinesis API's access keys)
    {root}/__catalog/kinesis-iterator-key                     (kv.access_keys: signs shard iterators)
    {root}/wal-shared/{uuid}                                  (S3, llog.format.wal)
    {base}/data/compacted/{uuid}                              (S3)
    {base}/manifests/{start:020d}-{end:020d}.json             (S3, kv.compaction)

A partition's folder (``PartitionKeys.base``) is ``{root}/{topic}/{topic_id}/partitions/{partition}``
for a topic whose record says ``keys_include_id`` (every topic created from that version on), and the
*legacy* ``{root}/{topic}/partitions/{partition}`` for partitions written before: so the keys
and objects of a topic created again under a deleted one's name never coincide with the old ones, and
whatever still holds the old incarnation's keys (a paused reclaim run, a stale writer) cannot touch the
new one's (docs/FORMAT.md, "Partition folders"). An id is a UUID, never ``partitions``, and the two
forms differ in depth, so neither folder is a prefix of the other.

Every Oxia record of a topic-partition uses ``partition_key = "{topic}:{partition}"``
so that one partition lives on one Oxia shard; the registry's records, the
topic records, the producer ids, the namespace identity and the access keys share ``partition_key = "__catalog"``, so
one ordered scan on one shard lists any of them. A partition's producer states sit at the depth of
``meta/`` and ``index/`` in a folder of their own (``producers/`` sorts after
``meta/~`` and ``index/~``), so no scan of those folders meets them, and
``[producers/, producers/~)`` holds exactly them (what deleting a partition clears).

Oxia (v0.17.1, hierarchical key sorting) orders keys by their number of
``/`` first, then bytewise with ``/`` above every other byte. A scan or a
FLOOR/CEILING/LOWER/HIGHER lookup therefore only ever stays within one key
depth: every scan here is bounded by two keys of the depth it reads, and
every key a lookup returns is checked against the expected prefix. Names
are validated before they reach a key: a ``/`` in a topic would change the
key's depth. Topics and partitions are found through the registry, never
through a scan under the root.
"""

from __future__ import annotations

import os
import re
import time
import uuid
from dataclasses import dataclass
from functools import cached_property, lru_cache

from llog.errors import InvalidArgument, InvalidPartition, InvalidTopicName

DEFAULT_ROOT_PREFIX = "llog"
MAX_PARTITION = 2**31 - 1
OFFSET_WIDTH = 20

# Sequential keys (docs/SEQUENTIAL_APPEND.md): Oxia appends "-%020d" per delta to the key it is given.
SEQUENCE_WIDTH = 20
SEQUENCE_SEPARATOR = "-"
SEQUENCE_PARTS = 2  # (position, fences): every put into a sequence passes exactly two deltas
MAX_SEQUENCE = 2**64 - 1  # the server searches below "{prefix}-{MAX_SEQUENCE:020d}"
GENERATION_WIDTH = 10
MAX_GENERATION = 10**GENERATION_WIDTH - 1

TOPIC_PATTERN = "[A-Za-z0-9._-]{1,249}"
_TOPIC_RE = re.compile(TOPIC_PATTERN)
_ROOT_SEGMENT_RE = re.compile(r"[A-Za-z0-9._-]{1,128}")
# "wal-shared" would put a topic's compacted objects under the shared WAL prefix;
# "__catalog" would read as the registry's folder.
RESERVED_TOPICS = (".", "..", "wal-shared", "__catalog")
PRODUCER_ID_PATTERN = "[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"  # a UUID, lower case
_UUID_RE = re.compile(PRODUCER_ID_PATTERN)
_PRODUCER_ID_RE = _UUID_RE
PARTITION_WIDTH = 10  # digits of MAX_PARTITION: registry keys sort numerically within a topic


def validate_topic(topic: object) -> str:
    """Return ``topic`` if it is a valid topic name, else raise ``InvalidTopicName``."""
    if not isinstance(topic, str) or not _TOPIC_RE.fullmatch(topic):
        raise InvalidTopicName(f"invalid topic {topic!r}: expected 1-249 characters from [A-Za-z0-9._-]")
    if topic in RESERVED_TOPICS:
        raise InvalidTopicName(f"invalid topic {topic!r}: the name is reserved")
    return topic


def validate_partition(partition: object) -> int:
    """Return ``partition`` if it is an int in ``[0, 2**31-1]``, else raise ``InvalidPartition``."""
    if isinstance(partition, bool) or not isinstance(partition, int):
        raise InvalidPartition(f"invalid partition {partition!r}: expected a non-negative integer")
    if not 0 <= partition <= MAX_PARTITION:
        raise InvalidPartition(f"invalid partition {partition}: expected an integer in [0, {MAX_PARTITION}]")
    return partition


def validate_topic_id(topic_id: object) -> str:
    """Return ``topic_id`` if it is a topic id as created (a lowercase UUID), else raise ``InvalidArgument``."""
    if not isinstance(topic_id, str) or not _UUID_RE.fullmatch(topic_id):
        raise InvalidArgument(f"invalid topic id {topic_id!r}: expected a lowercase UUID")
    return topic_id


def validate_root_prefix(root: object) -> str:
    """Return ``root`` if it is one or more ``/``-joined safe segments."""
    if not isinstance(root, str) or not all(_ROOT_SEGMENT_RE.fullmatch(s) for s in root.split("/")):
        raise InvalidArgument(f"invalid root prefix {root!r}: expected segments of [A-Za-z0-9._-] joined by '/'")
    if any(segment in (".", "..") for segment in root.split("/")):
        # S3 keys take them literally, but a tool that maps keys to paths (a sync to disk, a file-backed S3
        # server) would resolve them: a root would then name another root's folder, or one outside the bucket.
        raise InvalidArgument(f"invalid root prefix {root!r}: a segment may not be '.' or '..'")
    return root


def format_offset(offset: int) -> str:
    """Zero-pad an offset so that keys sort numerically within one segment."""
    if not 0 <= offset < 10**OFFSET_WIDTH:
        raise InvalidArgument(f"offset {offset} cannot be encoded in {OFFSET_WIDTH} digits")
    return f"{offset:0{OFFSET_WIDTH}d}"


def format_sequence_part(value: int) -> str:
    """One suffix part of a sequential key, as the Oxia server writes it (``%020d``)."""
    if not 0 <= value <= MAX_SEQUENCE:
        raise InvalidArgument(f"sequence value {value} is outside [0, 2**64-1]")
    return f"{value:0{SEQUENCE_WIDTH}d}"


_SEQUENCE_SUFFIX = re.compile(f"{re.escape(SEQUENCE_SEPARATOR)}([0-9]{{{SEQUENCE_WIDTH}}})" * SEQUENCE_PARTS)


def parse_sequence_suffix(suffix: str) -> tuple[int, ...] | None:
    """``"-{a:020d}-{b:020d}"`` -> ``(a, b)``; None unless it is exactly ``SEQUENCE_PARTS`` such parts."""
    match = _SEQUENCE_SUFFIX.fullmatch(suffix)
    if match is None:
        return None
    values = tuple(map(int, match.groups()))
    return None if max(values) > MAX_SEQUENCE else values


@dataclass(frozen=True, order=True)
class SequenceKey:
    """A parsed sequential key of one partition.

    ``position`` is the generation's offset counter after the put (an entry's
    end offset is the generation's base plus its position); ``fences`` counts
    the fence markers at or before this key: nonzero means past a fence.
    """

    generation: int
    position: int
    fences: int


def validate_generation(generation: int) -> int:
    if isinstance(generation, bool) or not isinstance(generation, int) or not 1 <= generation <= MAX_GENERATION:
        raise InvalidArgument(f"invalid sequence generation {generation!r}")
    return generation


@dataclass(frozen=True)
class PartitionKeys:
    """All keys of one topic-partition, of one incarnation of the topic. Construction validates the names.

    ``topic_id`` is the id of the topic whose partitions these are when its record says
    ``keys_include_id``; None for the legacy folder of partitions written before (module docstring).
    """

    topic: str
    partition: int
    root: str = DEFAULT_ROOT_PREFIX
    topic_id: str | None = None

    def __post_init__(self) -> None:
        validate_topic(self.topic)
        validate_partition(self.partition)
        validate_root_prefix(self.root)
        if self.topic_id is not None:
            validate_topic_id(self.topic_id)

    @cached_property
    def base(self) -> str:
        if self.topic_id is None:
            return f"{self.root}/{self.topic}/partitions/{self.partition}"
        return f"{self.root}/{self.topic}/{self.topic_id}/partitions/{self.partition}"

    @property
    def partition_key(self) -> str:
        """Oxia routing key shared by every record of this partition."""
        return f"{self.topic}:{self.partition}"

    @property
    def control(self) -> str:
        return f"{self.base}/meta/control"

    @property
    def commit_keys(self) -> tuple[str, str]:
        """What a change of the partition's log writes: ``meta/control`` and (a prefix) the ``seq/`` folder."""
        return self.control, self.sequences

    @property
    def compaction_cursor(self) -> str:
        return f"{self.base}/meta/compaction-cursor"

    @property
    def compaction(self) -> str:
        return f"{self.base}/meta/compaction"

    @property
    def compactor_claim(self) -> str:
        return f"{self.base}/meta/compactor-claim"

    @property
    def gc_watermark(self) -> str:
        """The last compacted object garbage collection has judged (objects sort by creation time)."""
        return f"{self.base}/meta/gc-watermark"

    @cached_property
    def index_prefix(self) -> str:
        return f"{self.base}/index/"

    @property
    def index_scan_end(self) -> str:
        """Exclusive upper bound of this partition's index keys.

        ``~`` sorts after every digit, and a key without a further ``/`` sorts
        before deeper keys, so ``[index/, index/~)`` holds exactly the index.
        """
        return f"{self.index_prefix}~"

    def index(self, end_offset: int) -> str:
        return f"{self.index_prefix}{format_offset(end_offset)}"

    def parse_index_key(self, key: str) -> int | None:
        """Return the end offset encoded in ``key``, or ``None`` if it is not one of ours.

        Oxia CEILING lookups search a whole shard and may return another
        partition's key: every returned key must pass through here.
        """
        if not key.startswith(self.index_prefix):
            return None
        digits = key[len(self.index_prefix) :]
        if len(digits) != OFFSET_WIDTH or not (digits.isascii() and digits.isdigit()):
            return None
        return int(digits)

    # --- sequential partitions (docs/SEQUENTIAL_APPEND.md) ----------------------

    @property
    def sequences(self) -> str:
        """The folder of every generation's sequence (a sequential append adds a key below it)."""
        return f"{self.base}/seq/"

    def sequence_prefix(self, generation: int) -> str:
        """The key a sequential put names; the server appends ``-{position:020d}-{fences:020d}``.

        Each generation has a folder of its own, holding nothing but its
        sequence, so the server's search for the highest key below
        ``{prefix}-{2**64-1}`` can only find keys of this sequence.
        """
        return f"{self.base}/seq/{validate_generation(generation):0{GENERATION_WIDTH}d}/e"

    def sequence_key(self, generation: int, position: int, fences: int = 0) -> str:
        return (
            f"{self.sequence_prefix(generation)}{SEQUENCE_SEPARATOR}{format_sequence_part(position)}"
            f"{SEQUENCE_SEPARATOR}{format_sequence_part(fences)}"
        )

    def sequence_position(self, generation: int, position: int) -> str:
        """Sorts just before every key at ``position`` (a prefix of them): a CEILING or scan start."""
        return f"{self.sequence_prefix(generation)}{SEQUENCE_SEPARATOR}{format_sequence_part(position)}"

    def sequence_scan_end(self, generation: int) -> str:
        """Exclusive upper bound of a generation's keys (``~`` sorts after every digit)."""
        return f"{self.sequence_prefix(generation)}{SEQUENCE_SEPARATOR}~"

    def sequence_upper_bound(self, generation: int) -> str:
        """The key the server looks below for a sequence's highest key; a LOWER lookup here finds the tail."""
        return self.sequence_position(generation, MAX_SEQUENCE)

    def parse_sequence_key(self, generation: int, key: str) -> SequenceKey | None:
        """``key`` as a key of this generation's sequence, or None if it is anything else."""
        prefix = self.sequence_prefix(generation)
        if not key.startswith(prefix):
            return None
        parsed = parse_sequence_suffix(key[len(prefix) :])
        return None if parsed is None else SequenceKey(generation, parsed[0], parsed[1])

    # --- idempotent producers (llog.protocol.producers) -----------------------------

    @property
    def producer_states_prefix(self) -> str:
        return f"{self.base}/producers/"

    @property
    def producer_states_scan_end(self) -> str:
        """Exclusive upper bound of this partition's producer states (``~`` sorts after every id character)."""
        return f"{self.producer_states_prefix}~"

    def producer_state(self, producer_id: str) -> str:
        return f"{self.producer_states_prefix}{validate_producer_id(producer_id)}"

    @property
    def sequence_folders_scan(self) -> tuple[str, str]:
        """``[start, end)`` of every generation's sequence keys (``seq/{g}/e-…``), at their one depth.

        Both bounds have the depth of a sequence key; generation numbers are
        ten digits from 1, so ``seq/0000000000/`` sorts before all of them and
        ``seq/~/`` after (``~`` above every digit).
        """
        return f"{self.base}/seq/{0:0{GENERATION_WIDTH}d}/", f"{self.base}/seq/~/"

    @property
    def oxia_ranges(self) -> tuple[tuple[str, str], ...]:
        """``[start, end)`` ranges, one per key depth, that together hold every Oxia key of the partition.

        What deleting a partition removes (``llog.protocol.topics``); a new kind
        of per-partition key must be covered here. ``meta/`` comes first: once
        ``meta/control`` is gone, every reader, writer and compactor finds the
        partition not initialized and stops.
        """
        meta = f"{self.base}/meta/"
        return (
            (meta, f"{meta}~"),
            (self.index_prefix, self.index_scan_end),
            (self.producer_states_prefix, self.producer_states_scan_end),
            self.sequence_folders_scan,
        )

    @property
    def object_prefix(self) -> str:
        """Every S3 object of this partition (compacted objects, manifests) lies under it."""
        return f"{self.base}/"

    @property
    def compacted_prefix(self) -> str:
        return f"{self.base}/data/compacted/"

    def compacted_object_key(self, object_id: str | None = None) -> str:
        return f"{self.compacted_prefix}{object_id or new_object_id()}"

    @property
    def manifest_prefix(self) -> str:
        return f"{self.base}/manifests/"

    def manifest_key(self, start_offset: int, end_offset: int) -> str:
        """S3 key of a compacted range's manifest: named by its range, sorting by start offset.

        The range in the name lets a reader follow the chain of ranges from a
        listing alone, without reading each manifest.
        """
        return f"{self.manifest_prefix}{format_offset(start_offset)}-{format_offset(end_offset)}.json"

    def parse_manifest_key(self, key: str) -> tuple[int, int] | None:
        """The ``(start, end)`` range named by a manifest key of this partition, else ``None``."""
        name = key[len(self.manifest_prefix) :] if key.startswith(self.manifest_prefix) else ""
        if len(name) != 2 * OFFSET_WIDTH + 6 or name[OFFSET_WIDTH] != "-" or not name.endswith(".json"):
            return None
        start, end = name[:OFFSET_WIDTH], name[OFFSET_WIDTH + 1 : 2 * OFFSET_WIDTH + 1]
        if not (start.isascii() and start.isdigit() and end.isascii() and end.isdigit()):
            return None
        return (int(start), int(end)) if 0 < int(start) <= int(end) else None


def partition_keys(
    topic: str, partition: int, root: str = DEFAULT_ROOT_PREFIX, topic_id: str | None = None
) -> PartitionKeys:
    """``PartitionKeys(topic, partition, root, topic_id)``, one object per partition: llog serve checks the
    same partitions' names several times per request. Exact types only (a bool is refused as a partition,
    but equals 0 or 1); names that are not valid raise, and are not remembered."""
    if type(topic) is str and type(partition) is int and type(root) is str and type(topic_id) in (str, type(None)):
        return _known_partition_keys(topic, partition, root, topic_id)
    return PartitionKeys(topic, partition, root, topic_id)


@lru_cache(maxsize=4096)
def _known_partition_keys(topic: str, partition: int, root: str, topic_id: str | None) -> PartitionKeys:
    return PartitionKeys(topic, partition, root, topic_id)


@dataclass(frozen=True)
class RegistryKeys:
    """Keys of the registry of partitions (``llog.protocol.registry``) and of topic records: one shard.

    ``{root}/__catalog/partitions/{topic}:{partition:010d}``: a colon cannot
    occur in a topic, so ``{topic}:`` bounds exactly one topic's partitions,
    and zero padding sorts them numerically. ``{root}/__catalog/topics/{topic}``
    (``llog.protocol.topics``) has the same depth, in a folder of its own.
    """

    root: str = DEFAULT_ROOT_PREFIX
    partition_key = "__catalog"  # not a field: every registry record on one shard

    def __post_init__(self) -> None:
        validate_root_prefix(self.root)

    @property
    def prefix(self) -> str:
        return f"{self.root}/__catalog/partitions/"

    @property
    def scan_end(self) -> str:
        """Exclusive end of every registry key: ``~`` sorts after every topic character."""
        return f"{self.prefix}~"

    def topic_prefix(self, topic: str) -> str:
        return f"{self.prefix}{validate_topic(topic)}:"

    def topic_scan_end(self, topic: str) -> str:
        return f"{self.topic_prefix(topic)}~"

    def partition(self, topic: str, partition: int) -> str:
        return f"{self.topic_prefix(topic)}{validate_partition(partition):0{PARTITION_WIDTH}d}"

    def parse(self, key: str) -> tuple[str, int] | None:
        """``(topic, partition)`` named by a registry key, or None if it is not one."""
        if not key.startswith(self.prefix):
            return None
        topic, sep, digits = key[len(self.prefix) :].rpartition(":")
        if not sep or len(digits) != PARTITION_WIDTH or not (digits.isascii() and digits.isdigit()):
            return None
        try:
            return validate_topic(topic), validate_partition(int(digits))
        except (InvalidTopicName, InvalidPartition):
            return None

    # --- topic records ----------------------------------------------------------------

    @property
    def topics_prefix(self) -> str:
        return f"{self.root}/__catalog/topics/"

    @property
    def topics_scan_end(self) -> str:
        """Exclusive end of every topic record's key: ``~`` sorts after every topic character."""
        return f"{self.topics_prefix}~"

    def topic(self, topic: str) -> str:
        return f"{self.topics_prefix}{validate_topic(topic)}"

    def parse_topic(self, key: str) -> str | None:
        """The topic a topic record's key names, or None if it is not one."""
        if not key.startswith(self.topics_prefix):
            return None
        try:
            return validate_topic(key[len(self.topics_prefix) :])
        except InvalidTopicName:
            return None


def validate_producer_id(producer_id: object) -> str:
    """Return ``producer_id`` if it is a producer id as issued (a lowercase UUID), else raise ``InvalidArgument``."""
    if not isinstance(producer_id, str) or not _PRODUCER_ID_RE.fullmatch(producer_id):
        raise InvalidArgument(f"invalid producer_id {producer_id!r}: expected an id issued by POST /producers")
    return producer_id


def shared_wal_prefix(root: str = DEFAULT_ROOT_PREFIX) -> str:
    return f"{validate_root_prefix(root)}/wal-shared/"


def shared_wal_object_key(root: str = DEFAULT_ROOT_PREFIX, object_id: str | None = None) -> str:
    """S3 key of a new shared WAL blob."""
    return f"{shared_wal_prefix(root)}{object_id or new_object_id()}"


def new_object_id(now_ms: int | None = None) -> str:
    """A UUIDv7 (RFC 9562): 48 bits of Unix milliseconds, then random bits.

    Object keys therefore sort by creation time, so garbage collection can
    list only what is new since its last run (S3 ``StartAfter``).
    """
    ms = int(time.time() * 1000) if now_ms is None else now_ms
    value = (ms & (2**48 - 1)) << 80 | int.from_bytes(os.urandom(10), "big")
    value = (value & ~(0xF << 76)) | (0x7 << 76)  # version 7
    value = (value & ~(0x3 << 62)) | (0x2 << 62)  # RFC 9562 variant
    return str(uuid.UUID(int=value))


def object_id_time_ms(object_id: str) -> int | None:
    """The creation time encoded in a UUIDv7 object id, or None for other ids."""
    try:
        parsed = uuid.UUID(object_id)
    except ValueError:
        return None
    return parsed.int >> 80 if parsed.version == 7 else None


@dataclass(frozen=True)
class S3Location:
    """A bucket and key; index entries store it as an ``s3://bucket/key`` URI."""

    bucket: str
    key: str

    @property
    def uri(self) -> str:
        return f"s3://{self.bucket}/{self.key}"

    @classmethod
    def parse(cls, uri: str) -> S3Location:
        if not isinstance(uri, str) or not uri.startswith("s3://"):
            raise InvalidArgument(f"not an s3:// URI: {uri!r}")
        bucket, sep, key = uri[len("s3://") :].partition("/")
        if not bucket or not sep or not key:
            raise InvalidArgument(f"S3 URI needs a bucket and a key: {uri!r}")
        return cls(bucket, key)
