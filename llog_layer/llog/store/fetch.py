"""Fetching the bytes ``DataRef``s name: one ref at a time, or a request's refs each blob range at most once.

Slices of one shared WAL blob that several partitions (or several index
entries) need are merged into one range GET when little lies between them;
whole (compacted) objects come from an optional ``ObjectCache``. Consume
fetches a request's batches this way, compaction the run it rewrites.
"""

from __future__ import annotations

from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor

from llog.format.keys import S3Location
from llog.format.kv.document import DataRef
from llog.store.object_cache import ObjectCache
from llog.store.s3 import BlobStore

# Merge slices of one blob into a single range GET when the merged span wastes
# at most this much beyond the slices themselves.
MERGE_SLACK_BYTES = 256 * 1024
FETCH_THREADS = 8


def fetch_ref(blobs: BlobStore, ref: DataRef) -> bytes:
    """The bytes of one ref in S3, never its inline copy: a range GET for a slice of a shared blob, else a GET."""
    location = S3Location.parse(ref.data_key)
    if ref.byte_offset is not None and ref.byte_length is not None:
        return blobs.get_range(location, ref.byte_offset, ref.byte_length)
    return blobs.get(location)


def batch_bytes(blobs: BlobStore, ref: DataRef) -> bytes:
    """The bytes of one batch for a reader: its inline copy when its entry has one, else ``fetch_ref``."""
    return ref.inline if ref.inline is not None else fetch_ref(blobs, ref)


class BlobFetcher:
    """Fetches byte ranges for one request, each blob range at most once, in parallel."""

    def __init__(self, blobs: BlobStore, objects: ObjectCache | None = None) -> None:
        self.blobs = blobs
        self._objects = objects  # whole (compacted) objects, shared across requests
        self._spans: dict[str, list[tuple[int, bytes]]] = {}  # data_key -> [(offset, bytes)]
        self._whole: dict[str, bytes] = {}

    def prefetch(self, refs: Sequence[DataRef]) -> None:
        by_key: dict[str, list[DataRef]] = {}
        for ref in refs:
            if ref.inline is None:  # a batch kept in its entry needs no GET
                by_key.setdefault(ref.data_key, []).append(ref)
        jobs: list[tuple[str, int | None, int | None]] = []  # (key, start, end); None: whole object
        for key, key_refs in by_key.items():
            if any(r.byte_offset is None or r.byte_length is None for r in key_refs):
                jobs.append((key, None, None))
            else:
                jobs.extend((key, start, end) for start, end in _merge_ranges(key_refs))
        if len(jobs) == 1:
            self._run(*jobs[0])
        elif jobs:
            with ThreadPoolExecutor(min(FETCH_THREADS, len(jobs))) as pool:
                for future in [pool.submit(self._run, *job) for job in jobs]:
                    future.result()

    def _run(self, key: str, start: int | None, end: int | None) -> None:
        if start is None or end is None:
            self._fetch_whole(key)
        else:
            self._fetch_span(key, start, end)

    def _fetch_whole(self, key: str) -> None:
        data = None if self._objects is None else self._objects.get(key)
        if data is None:
            data = self.blobs.get(S3Location.parse(key))
            if self._objects is not None:
                self._objects.put(key, data)
        self._whole[key] = data

    def _fetch_span(self, key: str, start: int, end: int) -> None:
        data = self.blobs.get_range(S3Location.parse(key), start, end - start)
        self._spans.setdefault(key, []).append((start, data))

    def get(self, ref: DataRef) -> bytes:
        """The bytes of ``ref``: its inline copy, or what ``prefetch`` fetched (fetching now if it did not)."""
        if ref.inline is not None:
            return ref.inline
        if ref.byte_offset is None or ref.byte_length is None:
            if ref.data_key not in self._whole:
                self._fetch_whole(ref.data_key)
            return self._whole[ref.data_key]
        start, end = ref.byte_offset, ref.byte_offset + ref.byte_length
        for span_start, data in self._spans.get(ref.data_key, []):
            if span_start <= start and end <= span_start + len(data):
                return data[start - span_start : end - span_start]
        self._fetch_span(ref.data_key, start, end)
        return self.get(ref)


def _merge_ranges(refs: Sequence[DataRef]) -> list[tuple[int, int]]:
    ranges = sorted({(r.byte_offset or 0, (r.byte_offset or 0) + (r.byte_length or 0)) for r in refs})
    merged: list[tuple[int, int]] = []
    for start, end in ranges:
        if merged and start <= merged[-1][1] + MERGE_SLACK_BYTES:
            merged[-1] = (merged[-1][0], max(merged[-1][1], end))
        else:
            merged.append((start, end))
    return merged
