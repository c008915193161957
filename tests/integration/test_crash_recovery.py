"""Writers that die between storage steps, and the writers that recover after them.

A crash is a ``SimulatedCrash`` raised by a fault hook at a named point: the
writer's remaining steps never run, exactly as if its process had died.
"""

from __future__ import annotations

import pytest

from llog.format.keys import PartitionKeys
from llog.protocol.append import LogWriter
from llog.protocol.faults import WRITER_AFTER_BLOB_PUT as AFTER_BLOB_PUT
from llog.protocol.faults import WRITER_AFTER_INDEX_WRITE as AFTER_INDEX_WRITE
from llog.protocol.faults import WRITER_AFTER_RESERVE as AFTER_RESERVE
from llog.protocol.read import LogReader
from llog.store.oxia import OxiaStore
from llog.store.storage import Storage
from tests.faults import SimulatedCrash, crash_at
from tests.integration.test_append_and_read import control_of
from tests.protocols import CAS

pytestmark = pytest.mark.oxia


def index_keys(oxia: OxiaStore, root: str, topic: str, partition: int = 0) -> list[str]:
    keys = PartitionKeys(topic, partition, root)
    return [r.key for r in oxia.range_scan(keys.index_prefix, keys.index_scan_end, partition_key=keys.partition_key)]


def test_crash_between_reserve_and_index_write_is_read_through_pending(
    writer: LogWriter, reader: LogReader, oxia_store: OxiaStore, topic: str, root: str, storage: Storage
) -> None:
    writer.initialize_partition(topic, 0)
    writer.append(topic, 0, [b"a"])
    doomed = LogWriter(storage, config=CAS, fault_hook=crash_at(AFTER_RESERVE))
    with pytest.raises(SimulatedCrash):
        doomed.append(topic, 0, [b"b", b"c"])

    pending = control_of(oxia_store, root, topic, 0).pending
    assert pending is not None
    assert (pending.start_offset, pending.end_offset) == (2, 3)
    assert index_keys(oxia_store, root, topic) == [PartitionKeys(topic, 0, root).index(1)]
    # Logically committed: readable before anyone recovers it.
    assert reader.high_watermark(topic, 0) == 3
    assert [r.value for r in reader.iter_from(topic, 0, 1)] == [b"a", b"b", b"c"]
    assert reader.read_offset(topic, 0, 3).value == b"c"

    # The next writer materializes it before reserving its own offsets.
    assert writer.append(topic, 0, [b"d"]).start_offset == 4
    assert control_of(oxia_store, root, topic, 0).pending is None
    keys = PartitionKeys(topic, 0, root)
    assert index_keys(oxia_store, root, topic) == [keys.index(1), keys.index(3), keys.index(4)]
    assert [r.value for r in reader.iter_from(topic, 0, 1)] == [b"a", b"b", b"c", b"d"]


def test_crash_after_index_write_leaves_pending_that_recovery_clears(
    writer: LogWriter, reader: LogReader, oxia_store: OxiaStore, topic: str, root: str, storage: Storage
) -> None:
    writer.initialize_partition(topic, 0)
    with pytest.raises(SimulatedCrash):
        LogWriter(storage, config=CAS, fault_hook=crash_at(AFTER_INDEX_WRITE)).append(topic, 0, [b"a", b"b"])
    assert control_of(oxia_store, root, topic, 0).pending is not None
    assert index_keys(oxia_store, root, topic) == [PartitionKeys(topic, 0, root).index(2)]

    assert writer.recover_pending(topic, 0) is True
    assert writer.recover_pending(topic, 0) is False
    assert control_of(oxia_store, root, topic, 0).pending is None
    assert index_keys(oxia_store, root, topic) == [PartitionKeys(topic, 0, root).index(2)]
    assert [r.value for r in reader.read_range(topic, 0, 1, 2)] == [b"a", b"b"]


def test_crash_after_blob_put_commits_nothing(
    writer: LogWriter, reader: LogReader, topic: str, storage: Storage
) -> None:
    writer.initialize_partition(topic, 0)
    with pytest.raises(SimulatedCrash):
        LogWriter(storage, config=CAS, fault_hook=crash_at(AFTER_BLOB_PUT)).append(topic, 0, [b"lost"])
    assert reader.high_watermark(topic, 0) == 0
    assert writer.append(topic, 0, [b"kept"]).start_offset == 1
    assert reader.read_offset(topic, 0, 1).value == b"kept"


def test_fence_finishes_a_pending_append_so_it_stays_readable(
    writer: LogWriter, reader: LogReader, oxia_store: OxiaStore, topic: str, root: str, storage: Storage
) -> None:
    writer.initialize_partition(topic, 0)
    with pytest.raises(SimulatedCrash):
        LogWriter(storage, config=CAS, fault_hook=crash_at(AFTER_RESERVE)).append(topic, 0, [b"a"])
    writer.fence(topic, 0)
    control = control_of(oxia_store, root, topic, 0)
    assert control.pending is None
    assert index_keys(oxia_store, root, topic) == [PartitionKeys(topic, 0, root).index(1)]
    assert reader.read_offset(topic, 0, 1).value == b"a"
