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
from llog.format.documents import AppendProtocol
from llog.format.keys import PartitionKeys, S3Location

if TYPE_CHECKING:
    from llog.client.reader import LogReader, LogRecord, PartitionInfo
    from llog.client.writer import AppendResult, LogWriter, SharedAppendGroup

# The reader and writer need the Oxia client; importing them lazily keeps the codec,
# keys and S3 parts usable where it is not installed (the Glue export job).
_LAZY = {
    "LogReader": "llog.client.reader",
    "LogRecord": "llog.client.reader",
    "PartitionInfo": "llog.client.reader",
    "AppendResult": "llog.client.writer",
    "LogWriter": "llog.client.writer",
    "SharedAppendGroup": "llog.client.writer",
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
