"""Writer configurations that pin an append protocol.

New partitions are sequential by default; the tests of the CAS protocol (its
crash points, its keys, its operation counts) create their partitions with
``CAS`` so that they keep testing it.
"""

from llog.config import WriterConfig
from llog.format.documents import AppendProtocol

CAS = WriterConfig(append_protocol=AppendProtocol.CAS)
