"""Writer configurations that pin an append protocol.

New partitions are sequential by default; the tests of the CAS protocol (its
crash points, its keys, its operation counts) create their partitions with
``CAS`` so that they keep testing it.
"""

from llog.config import WriterConfig
from llog.format.kv.control import AppendProtocol

CAS = WriterConfig(append_protocol=AppendProtocol.CAS)

# Every batch read from S3, none from its index entry: for the tests of the S3 read path
# (small batches are otherwise also kept in their index entries, LLOG_INLINE_BATCH_MAX_BYTES).
CAS_S3_ONLY = WriterConfig(append_protocol=AppendProtocol.CAS, inline_batch_max_bytes=0)
