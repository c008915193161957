"""The namespace identity (``llog.protocol.namespace``): ``{root}/__catalog/namespace`` in Oxia, on the
catalogue's shard, and ``{root}/__catalog/namespace.json`` in S3 hold the same document::

    {"namespace_id": "…", "created_at_ms": …}
"""

from __future__ import annotations

from dataclasses import dataclass

import msgspec

from llog.format.keys import DEFAULT_ROOT_PREFIX, validate_root_prefix
from llog.format.kv.document import NonNegative, Text, decode_document, encode_document


@dataclass(frozen=True)
class NamespaceKeys:
    """Where the namespace identity lives: the Oxia record and the S3 object."""

    root: str = DEFAULT_ROOT_PREFIX
    partition_key = "__catalog"

    def __post_init__(self) -> None:
        validate_root_prefix(self.root)

    @property
    def record(self) -> str:
        return f"{self.root}/__catalog/namespace"

    @property
    def object_key(self) -> str:
        return f"{self.root}/__catalog/namespace.json"


class NamespaceRecord(msgspec.Struct, frozen=True, gc=False):
    """The namespace identity, as both copies hold it."""

    namespace_id: Text
    created_at_ms: NonNegative

    def encode(self) -> bytes:
        return encode_document(self)

    @classmethod
    def decode(cls, raw: bytes, what: str = "namespace record") -> NamespaceRecord:
        return decode_document(_NAMESPACE, raw, what)


_NAMESPACE = msgspec.json.Decoder(NamespaceRecord)
