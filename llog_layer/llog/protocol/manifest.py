"""Compacted-range manifests: the committed compacted data, readable from S3 alone.

Compaction publishes ``{base}/manifests/{start:020d}-{end:020d}.json`` (a
:class:`~llog.format.kv.compaction.CompactedRange`) after the range's COMPACTED index entry is
written and before any lower index key is deleted, and a resumed compaction
publishes it again (same bytes). So every committed compacted range has a
manifest once its compaction finishes, and no manifest names an orphaned object
(an object whose compaction never committed). Compacted ranges never overlap
and are never rewritten, so the manifests of a partition, in key order, form a
chain ``[1, a], [a+1, b], ...``; a consumer that follows the chain from its own
cursor and stops at the first gap (a range whose compaction is still finishing)
reads every committed record exactly once. The keys name their ranges, so the
chain is followed with listings alone (1,000 ranges per request). Analytics
jobs use this instead of Oxia, so they need no network path to the metadata store.

Retention removes whole ranges from the front of the chain. It publishes the
new log start first (``manifests/log-start.json``), then deletes the manifests;
a reader whose cursor fell below it continues from there (:meth:`log_start`).
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from llog.errors import BlobNotFound, CorruptMetadata, InvalidArgument, InvalidTopicName
from llog.format.keys import (
    PartitionKeys,
    S3Location,
    format_offset,
    validate_root_prefix,
    validate_topic,
    validate_topic_id,
)
from llog.format.kv.compaction import CompactedRange
from llog.format.kv.document import INITIAL_OFFSET
from llog.store.s3 import BlobStore

LOG_START_NAME = "log-start.json"  # next to the manifests; not a manifest name, so chains skip it


@dataclass(frozen=True)
class ManifestSpan:
    """A manifest as named in a listing: its key and the range the key names."""

    key: str
    start_offset: int
    end_offset: int

    @property
    def record_count(self) -> int:
        return self.end_offset - self.start_offset + 1


class ManifestStore:
    def __init__(self, blobs: BlobStore, *, bucket: str, root: str) -> None:
        self.blobs = blobs
        self.bucket = bucket
        self.root = validate_root_prefix(root)

    def publish(self, keys: PartitionKeys, manifest: CompactedRange) -> None:
        """Write (or rewrite, with the same bytes) the manifest of a committed range of the partition ``keys``."""
        key = keys.manifest_key(manifest.start_offset, manifest.end_offset)
        self.blobs.put(S3Location(self.bucket, key), manifest.encode())

    def spans(self, keys: PartitionKeys, from_offset: int = 1) -> Iterator[ManifestSpan]:
        """The chain of committed ranges from ``from_offset``, from listings alone; stops at the first gap.

        ``from_offset`` must be where a range starts (1, or one past a range's
        end): a consumer's cursor always is.
        """
        # Keys of ranges starting at from_offset sort right after this (a prefix sorts first).
        start_after = f"{keys.manifest_prefix}{format_offset(from_offset)}" if from_offset > 1 else None
        expected = from_offset
        for info in self.blobs.list(self.bucket, keys.manifest_prefix, start_after=start_after):
            span = keys.parse_manifest_key(info.key)
            if span is None:
                continue  # not a manifest (an operator's stray file): never a reason to fail
            if span[0] != expected:
                return  # a gap: the range at ``expected`` is not committed or not yet published
            yield ManifestSpan(info.key, *span)
            expected = span[1] + 1

    def read(self, keys: PartitionKeys, key: str) -> CompactedRange:
        """The manifest at ``key``, checked against the partition and range its key names."""
        manifest = CompactedRange.decode(self.blobs.get(S3Location(self.bucket, key)), key)
        named = keys.parse_manifest_key(key)
        if named is None or (manifest.topic, manifest.partition, manifest.start_offset, manifest.end_offset) != (
            keys.topic,
            keys.partition,
            *named,
        ):
            raise CorruptMetadata(f"manifest {key} describes {manifest}")
        return manifest

    def ranges(self, keys: PartitionKeys, from_offset: int = 1) -> Iterator[CompactedRange]:
        """:meth:`spans` with each manifest read."""
        for span in self.spans(keys, from_offset):
            yield self.read(keys, span.key)

    def delete(self, keys: PartitionKeys, spans: Sequence[tuple[int, int]]) -> None:
        """Delete the manifests of ``(start, end)`` ranges (retention)."""
        self.blobs.delete(self.bucket, [keys.manifest_key(start, end) for start, end in spans])

    def publish_log_start(self, keys: PartitionKeys, offset: int) -> None:
        """Record the partition's log start where manifest readers look when the chain has a gap."""
        location = S3Location(self.bucket, keys.manifest_prefix + LOG_START_NAME)
        self.blobs.put(location, json.dumps({"log_start_offset": offset}).encode())

    def log_start(self, keys: PartitionKeys) -> int:
        """The log start retention last published (1 if it never truncated the partition)."""
        key = keys.manifest_prefix + LOG_START_NAME
        try:
            doc = json.loads(self.blobs.get(S3Location(self.bucket, key)))
            offset = doc["log_start_offset"]
        except BlobNotFound:
            return INITIAL_OFFSET
        except (ValueError, KeyError, TypeError):
            raise CorruptMetadata(f"{key} is not a log start document") from None
        if isinstance(offset, bool) or not isinstance(offset, int) or offset < INITIAL_OFFSET:
            raise CorruptMetadata(f"{key} holds an invalid log start {offset!r}")
        return offset

    def topics(self) -> list[str]:
        """Topics with at least one partition directory in S3, in key order."""
        found = []
        for prefix in self.blobs.list_prefixes(self.bucket, f"{self.root}/"):
            name = prefix[len(self.root) + 1 : -1]
            try:
                validate_topic(name)
            except InvalidTopicName:
                continue  # the shared WAL prefix and anything else that is not a topic
            found.append(name)
        return found

    def partitions(self, topic: str) -> list[PartitionKeys]:
        """The partitions of ``topic`` that have objects in S3, of every incarnation found there: the legacy
        folder's, then each topic id's (``llog.format.keys``), in key order, each in numeric order. S3 alone
        does not say which incarnation is the current one; the caller that knows picks."""
        topic_folder = f"{self.root}/{validate_topic(topic)}/"
        found: list[PartitionKeys] = []
        for folder in self.blobs.list_prefixes(self.bucket, topic_folder):
            name = folder[len(topic_folder) : -1]
            if name == "partitions":
                topic_id = None
            else:
                try:
                    topic_id = validate_topic_id(name)
                except InvalidArgument:
                    continue  # not a partition folder: never a reason to fail
                folder = f"{folder}partitions/"
            numbers = []
            for prefix in self.blobs.list_prefixes(self.bucket, folder):
                number = prefix[len(folder) : -1]
                if number.isascii() and number.isdigit():
                    numbers.append(int(number))
            found.extend(PartitionKeys(topic, p, self.root, topic_id) for p in sorted(numbers))
        return found
