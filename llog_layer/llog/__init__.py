"""llog: a diskless, leaderless log on Oxia (metadata) and S3 (record bytes).

Public API::

    from llog import LogWriter, LogReader, SharedAppendGroup, Record

    writer = LogWriter.from_env()
    writer.initialize_partition("orders", 0)
    writer.append_shared([SharedAppendGroup("orders", 0, [b"a", Record(b"b", key=b"k")])])
    reader = LogReader.from_env()
    reader.read_offset("orders", 0, 1).value
"""

import importlib
from typing import TYPE_CHECKING, Any

from llog.config import OxiaConfig, S3Config, WriterConfig
from llog.errors import (
    AppendConflict,
    AppendOutcomeUnknown,
    BatchTooLarge,
    BlobNotFound,
    BlobStoreUnavailable,
    ConfigurationError,
    CorruptBatch,
    CorruptData,
    CorruptMetadata,
    CorruptSharedBlob,
    InconsistentReadState,
    InvalidArgument,
    InvalidPartition,
    InvalidTopicName,
    LlogError,
    LogFenced,
    OffsetOutOfRange,
    OxiaUnavailable,
    PartitionNotInitialized,
    SessionExpired,
    StorageUnavailable,
    VersionConflict,
)
from llog.format.codec import ENCODING, Record, RecordBatch, decode_batch, encode_batch
from llog.format.keys import PartitionKeys, S3Location
from llog.format.kv.control import AppendProtocol

if TYPE_CHECKING:
    from llog.protocol.append import AppendResult, LogWriter, SharedAppendGroup
    from llog.protocol.read import LogReader, LogRecord, PartitionInfo

# The reader and writer need the Oxia client; importing them lazily keeps the codec,
# keys and S3 parts usable where it is not installed (the Glue export job).
_LAZY = {
    "LogReader": "llog.protocol.read",
    "LogRecord": "llog.protocol.read",
    "PartitionInfo": "llog.protocol.read",
    "AppendResult": "llog.protocol.append",
    "LogWriter": "llog.protocol.append",
    "SharedAppendGroup": "llog.protocol.append",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'llog' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)


__all__ = [
    "ENCODING",
    "AppendConflict",
    "AppendOutcomeUnknown",
    "AppendProtocol",
    "AppendResult",
    "BatchTooLarge",
    "BlobNotFound",
    "BlobStoreUnavailable",
    "ConfigurationError",
    "CorruptBatch",
    "CorruptData",
    "CorruptMetadata",
    "CorruptSharedBlob",
    "InconsistentReadState",
    "InvalidArgument",
    "InvalidPartition",
    "InvalidTopicName",
    "LlogError",
    "LogFenced",
    "LogReader",
    "LogRecord",
    "LogWriter",
    "OffsetOutOfRange",
    "OxiaConfig",
    "OxiaUnavailable",
    "PartitionInfo",
    "PartitionKeys",
    "PartitionNotInitialized",
    "Record",
    "RecordBatch",
    "S3Config",
    "S3Location",
    "SessionExpired",
    "SharedAppendGroup",
    "StorageUnavailable",
    "VersionConflict",
    "WriterConfig",
    "decode_batch",
    "encode_batch",
]
