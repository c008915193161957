"""The stores every writing component shares, built once from ``LLOG_*`` variables."""

from __future__ import annotations

from dataclasses import dataclass

from llog.config import OxiaConfig, S3Config, root_prefix_from_env
from llog.store.oxia import OxiaStore
from llog.store.s3 import BlobStore


@dataclass(frozen=True)
class Storage:
    """An Oxia store, an S3 store, the bucket for new objects and the key root prefix."""

    oxia: OxiaStore
    blobs: BlobStore
    bucket: str
    root: str

    @classmethod
    def from_env(cls) -> Storage:
        """Touches no network: the Oxia store connects on its first call."""
        s3 = S3Config.from_env()
        return cls(OxiaStore(OxiaConfig.from_env()), BlobStore(s3), s3.require_bucket(), root_prefix_from_env())
