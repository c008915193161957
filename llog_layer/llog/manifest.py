"""Compacted-range manifests: the committed compacted data, readable from S3 alone.

Compaction publishes ``{base}/manifests/{start_offset:020d}.json`` (a
:class:`~llog.models.CompactedRange`) after the range's COMPACTED index entry is
written and before any lower index key is deleted, and a resumed compaction
publishes it again (same bytes). So every committed compacted range has a
manifest once its compaction finishes, and no manifest names an orphaned object
(an object whose compaction never committed). Compacted ranges never overlap
and are never rewritten, so the manifests of a partition, in key order, form a
chain ``[1, a], [a+1, b], ...``; a consumer that follows the chain from its own
cursor and stops at the first gap (a range whose compaction is still finishing)
reads every committed record exactly once. Analytics jobs use this instead of
Oxia, so they need no network path to the metadata store.
"""

from __future__ import annotations

from collections.abc import Iterator

from llog.blob_store import BlobStore
from llog.errors import CorruptMetadata, InvalidTopicName
from llog.keys import PartitionKeys, S3Location, validate_root_prefix, validate_topic
from llog.models import CompactedRange


class ManifestStore:
    def __init__(self, blobs: BlobStore, *, bucket: str, root: str) -> None:
        self.blobs = blobs
        self.bucket = bucket
        self.root = validate_root_prefix(root)

    def keys(self, topic: str, partition: int) -> PartitionKeys:
        return PartitionKeys(topic, partition, self.root)

    def publish(self, manifest: CompactedRange) -> None:
        """Write (or rewrite, with the same bytes) the manifest of a committed range."""
        key = self.keys(manifest.topic, manifest.partition).manifest_key(manifest.start_offset)
        self.blobs.put(S3Location(self.bucket, key), manifest.encode())

    def ranges(self, topic: str, partition: int, from_offset: int = 1) -> Iterator[CompactedRange]:
        """The chain of committed ranges from ``from_offset``, stopping at the first gap.

        ``from_offset`` must be where a range starts (1, or one past a range's
        end): a consumer's cursor always is.
        """
        keys = self.keys(topic, partition)
        start_after = keys.manifest_key(from_offset - 1) if from_offset > 1 else None
        expected = from_offset
        for info in self.blobs.list(self.bucket, keys.manifest_prefix, start_after=start_after):
            start = keys.parse_manifest_key(info.key)
            if start is None:
                continue  # not a manifest (an operator's stray file): never a reason to fail
            if start != expected:
                return  # a gap: the range at ``expected`` is not committed or not yet published
            manifest = CompactedRange.decode(self.blobs.get(S3Location(self.bucket, info.key)), info.key)
            if (manifest.topic, manifest.partition, manifest.start_offset) != (topic, partition, start):
                raise CorruptMetadata(f"manifest {info.key} describes {manifest}")
            yield manifest
            expected = manifest.end_offset + 1

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

    def partitions(self, topic: str) -> list[int]:
        """Partitions of ``topic`` that have objects in S3, in numeric order."""
        base = f"{self.root}/{validate_topic(topic)}/partitions/"
        found = []
        for prefix in self.blobs.list_prefixes(self.bucket, base):
            name = prefix[len(base) : -1]
            if name.isascii() and name.isdigit():
                found.append(int(name))
        return sorted(found)
