"""The stores every component of both Oxia and S3 is built on, built once from ``LLOG_*`` variables.

A component that uses both stores (writer, reader, compactor, retention,
garbage collector) takes one ``Storage``; one that uses a single store takes
that store: the Oxia store and root for partition metadata, the registry, the
catalog and compactor claims, the S3 store for manifests.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from llog.config import OxiaConfig, S3Config, root_prefix_from_env
from llog.store.oxia import OxiaStore
from llog.store.s3 import BlobStore


@dataclass(frozen=True)
class Storage:
    """An Oxia store, an S3 store, the bucket for new objects, the key root prefix, and the wall clock.

    The reader writes no objects and ignores the bucket: index entries carry
    full S3 URIs. The clock stamps stored documents (``created_at_ms``) and
    judges ages (retention, GC's grace); tests replace it.
    """

    oxia: OxiaStore
    blobs: BlobStore
    bucket: str
    root: str
    clock: Callable[[], float] = time.time

    @classmethod
    def from_env(cls, *, writes_objects: bool = True) -> Storage:
        """Touches no network: the Oxia store connects on its first call.

        ``LLOG_S3_BUCKET`` is required only when the component writes objects
        (a reader's storage may leave it unset: its bucket is then empty).
        """
        s3 = S3Config.from_env()
        bucket = s3.require_bucket() if writes_objects else s3.bucket or ""
        return cls(OxiaStore(OxiaConfig.from_env()), BlobStore(s3), bucket, root_prefix_from_env())

    def close(self) -> None:
        """Close the Oxia store (the S3 store holds nothing to close)."""
        self.oxia.close()
