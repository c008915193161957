"""Unit tests of the sequential append protocol's pure parts (docs/SEQUENTIAL_APPEND.md).

Keys and their order under Oxia's comparator, the control record's
generations, the state transitions of fence, unfence and migration, the
fence-point search and ``LLOG_APPEND_PROTOCOL``. What needs Oxia is in
tests/integration/test_sequential_append.py.
"""

from __future__ import annotations

import bisect
import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from llog.config import OxiaConfig, WriterConfig, append_protocol_from_env
from llog.errors import ConfigurationError, CorruptMetadata, InvalidArgument
from llog.format.keys import (
    MAX_GENERATION,
    MAX_SEQUENCE,
    PartitionKeys,
    SequenceKey,
    format_sequence_part,
    parse_sequence_suffix,
)
from llog.format.kv.control import (
    AppendProtocol,
    ControlRecord,
    Generation,
    LogState,
    PendingAppend,
    check_generations,
    generation_of,
)
from llog.format.kv.document import DataRef
from llog.format.kv.index import EntryType, FenceMarker, IndexEntry, decode_sequence_value
from llog.protocol.append_sequential import (
    entry_offsets,
    migrated_control,
    reopened_control,
    rolled_control,
    sealed_control,
)
from llog.protocol.index import PartitionIndex, last_valid_position
from llog.protocol.metadata import PartitionMetadata
from llog.store.oxia import OxiaStore
from llog.store.oxia_client import oxia_key_order

oxia_order = oxia_key_order  # the server's key order
KEYS = PartitionKeys("orders", 3)
REF = DataRef("s3://b/llog/wal-shared/x", "bytes-batch-v1", 10, 20)


# --- keys -------------------------------------------------------------------------------


def test_sequence_key_strings():
    assert KEYS.sequence_prefix(1) == "llog/orders/partitions/3/seq/0000000001/e"
    assert KEYS.sequence_key(1, 7) == "llog/orders/partitions/3/seq/0000000001/e-" + "0" * 19 + "7-" + "0" * 20
    assert KEYS.sequence_key(2, 7, 1).endswith("/seq/0000000002/e-00000000000000000007-00000000000000000001")
    assert KEYS.sequence_position(1, 7) == "llog/orders/partitions/3/seq/0000000001/e-00000000000000000007"
    assert KEYS.sequence_scan_end(1) == "llog/orders/partitions/3/seq/0000000001/e-~"
    assert KEYS.sequence_upper_bound(1) == "llog/orders/partitions/3/seq/0000000001/e-18446744073709551615"


def test_sequence_keys_have_the_server_format():
    """Oxia writes ``fmt.Sprintf("%s-%020d", key, value)`` per delta (server/kv/db_sequences.go)."""
    for value in (0, 1, 12345, MAX_SEQUENCE):
        assert format_sequence_part(value) == f"{value:020d}"
        assert len(format_sequence_part(value)) == 20
    for bad in (-1, MAX_SEQUENCE + 1):
        with pytest.raises(InvalidArgument):
            format_sequence_part(bad)


def test_parse_sequence_key_round_trip_and_rejects_anything_else():
    key = KEYS.sequence_key(4, 123, 2)
    assert KEYS.parse_sequence_key(4, key) == SequenceKey(4, 123, 2)
    assert KEYS.parse_sequence_key(5, key) is None  # another generation
    assert PartitionKeys("orders", 30).parse_sequence_key(4, key) is None
    prefix = KEYS.sequence_prefix(4)
    for suffix in ("", "-1-2", "-" + "0" * 20, "-" + "0" * 20 + "-" + "0" * 20 + "-" + "0" * 20,
                   "-" + "0" * 19 + "x-" + "0" * 20, "x" + "0" * 20 + "-" + "0" * 20,
                   "-99999999999999999999-" + "0" * 20, "-" + "0" * 20 + "-" + "0" * 20 + "/x"):  # fmt: skip
        assert KEYS.parse_sequence_key(4, prefix + suffix) is None, suffix
    assert KEYS.parse_sequence_key(4, KEYS.index(5)) is None


def test_parse_sequence_suffix():
    assert parse_sequence_suffix("-00000000000000000003-00000000000000000000") == (3, 0)
    assert parse_sequence_suffix("-00000000000000000003") is None
    assert parse_sequence_suffix("-00000000000000000003-00000000000000000000-00000000000000000000") is None
    assert parse_sequence_suffix("-\u0663" + "0" * 19 + "-" + "0" * 20) is None  # a digit, but not an ASCII one
    assert parse_sequence_suffix(f"-{2**64 - 1:020d}-{2**64 - 1:020d}") == (2**64 - 1, 2**64 - 1)
    assert parse_sequence_suffix(f"-{2**64:020d}-" + "0" * 20) is None


@pytest.mark.parametrize("generation", [0, -1, MAX_GENERATION + 1, True, "1", None])
def test_invalid_generations(generation):
    with pytest.raises(InvalidArgument):
        KEYS.sequence_prefix(generation)


def test_keys_of_a_generation_sort_by_position_then_fences():
    keys = [KEYS.sequence_key(1, p, f) for p, f in [(1, 0), (2, 0), (10, 0), (11, 1), (12, 1), (13, 2), (100, 2)]]
    shuffled = [keys[i] for i in (3, 0, 6, 1, 5, 2, 4)]
    assert sorted(shuffled, key=oxia_order) == keys
    # A CEILING from a position (one part) finds the keys at that position (two parts) first.
    assert sorted([KEYS.sequence_position(1, 10), keys[2], keys[1]], key=oxia_order) == [
        keys[1],
        KEYS.sequence_position(1, 10),
        keys[2],
    ]
    assert all(oxia_order(k) < oxia_order(KEYS.sequence_scan_end(1)) for k in keys)


def _shard_keys() -> list[str]:
    """What one Oxia shard may hold next to a partition's sequence: every other key llog writes there."""
    keys = ["__oxia/commit-offset", "__oxia/term"]
    for topic in ("orders", "orders-x", "order", "o"):
        for partition in (0, 1, 3, 10, 30, 300):
            k = PartitionKeys(topic, partition)
            keys += [k.control, k.compaction_cursor, k.compaction, k.compactor_claim, k.gc_watermark]
            keys += [k.index(1), k.index(99), k.index(10**19)]
            for generation in (1, 2, 10):
                keys += [k.sequence_key(generation, p, f) for p, f in ((1, 0), (50, 0), (51, 1), (52, 1))]
    return keys


@pytest.mark.parametrize("generation", [1, 2, 10])
def test_the_servers_tail_search_only_finds_this_sequence(generation):
    """The server takes the highest key below ``{prefix}-{2**64-1}`` in the whole shard and uses it only if it
    starts with the prefix (findCurrentLastKeyInSequence). With every other key llog writes in the shard, that
    key is this generation's tail, or (empty sequence) a key without the prefix: never a stranger's."""
    keys = sorted(_shard_keys(), key=oxia_order)
    bound = KEYS.sequence_upper_bound(generation)
    below = [k for k in keys if oxia_order(k) < oxia_order(bound)]
    assert below[-1] == KEYS.sequence_key(generation, 52, 1)
    ours = [k for k in keys if k.startswith(KEYS.sequence_prefix(generation))]
    assert ours == [k for k in keys if KEYS.parse_sequence_key(generation, k) is not None]
    # Emptied: the search lands on a key without the prefix, so the server starts from zero.
    rest = [k for k in below if k not in ours]
    assert not rest[-1].startswith(KEYS.sequence_prefix(generation))


def test_a_ceiling_past_a_generation_returns_foreign_keys_that_parse_to_none():
    keys = sorted(_shard_keys(), key=oxia_order)
    start = KEYS.sequence_position(10, 53)
    after = [k for k in keys if oxia_order(k) >= oxia_order(start)]
    assert after
    assert KEYS.parse_sequence_key(10, after[0]) is None


# --- models -----------------------------------------------------------------------------


SEQ = ControlRecord(
    LogState.OPEN,
    8,
    None,
    3,
    AppendProtocol.SEQUENTIAL,
    (Generation(0, 0, 7), Generation(1, 7, 20), Generation(2, 20)),
)


def test_sequential_control_round_trip_and_fields():
    assert ControlRecord.decode(SEQ.encode()) == SEQ
    doc = json.loads(SEQ.encode())
    assert doc["append_protocol"] == "sequential"
    assert doc["generations"] == [
        {"generation": 0, "base": 0, "end": 7},
        {"generation": 1, "base": 7, "end": 20},
        {"generation": 2, "base": 20, "end": None},
    ]
    assert SEQ.sequential
    assert SEQ.current_generation == Generation(2, 20)
    assert ControlRecord().encode() == b'{"log_state":"OPEN","pending":null,"sequence_counter":1}'
    assert not ControlRecord.decode(ControlRecord().encode()).sequential


def test_sequential_control_may_have_a_log_start_past_its_stored_counter():
    late = SEQ.with_changes(log_start_offset=30)
    assert ControlRecord.decode(late.encode()).log_start_offset == 30


@pytest.mark.parametrize(
    "generations",
    [
        [],
        [{"generation": 1, "base": 0, "end": None}, {"generation": 2, "base": 0, "end": None}],  # first is open
        [{"generation": 1, "base": 0, "end": 5}, {"generation": 2, "base": 4, "end": None}],  # gap/overlap
        [{"generation": 2, "base": 0, "end": 5}, {"generation": 1, "base": 5, "end": None}],  # order
        [{"generation": 0, "base": 0, "end": 5}],  # only the CAS generation
        [{"generation": 0, "base": 0, "end": None}, {"generation": 1, "base": 0, "end": None}],
        [{"generation": 0, "base": 1, "end": 5}, {"generation": 1, "base": 5, "end": None}],
        [{"generation": 1, "base": 5, "end": 4}],
        [{"generation": 1, "base": -1, "end": None}],
        [{"generation": 1, "base": 3, "end": None}],  # offsets 1-3 would be nowhere
        [5],
        None,
    ],
)
def test_corrupt_generations_are_rejected(generations):
    doc = {"log_state": "OPEN", "sequence_counter": 1, "pending": None, "append_protocol": "sequential"}
    if generations is not None:
        doc["generations"] = generations
    with pytest.raises(CorruptMetadata):
        ControlRecord.decode(json.dumps(doc).encode())


def test_a_sequential_partition_is_fenced_exactly_when_its_current_generation_is_sealed():
    with pytest.raises(CorruptMetadata, match="FENCED with a current generation that is open"):
        ControlRecord.decode(SEQ.with_changes(log_state=LogState.FENCED).encode())
    sealed = SEQ.with_changes(generations=(*SEQ.generations[:-1], Generation(2, 20, 25)))
    with pytest.raises(CorruptMetadata, match="OPEN with a current generation that is sealed"):
        ControlRecord.decode(sealed.encode())
    assert ControlRecord.decode(sealed.with_changes(log_state=LogState.FENCED).encode()).log_state is LogState.FENCED


def test_unknown_protocol_and_pending_in_a_sequential_partition_are_corrupt():
    with pytest.raises(CorruptMetadata, match="append_protocol"):
        ControlRecord.decode(b'{"log_state":"OPEN","sequence_counter":1,"pending":null,"append_protocol":"x"}')
    pending = PendingAppend("a", 1, 1, 1, REF, 0)
    with pytest.raises(CorruptMetadata, match="pending"):
        ControlRecord.decode(SEQ.with_changes(pending=pending).encode())


def test_generation_of():
    gens = SEQ.generations
    assert generation_of(gens, 0) is None
    assert [generation_of(gens, o) for o in (1, 7)] == [gens[0]] * 2
    assert [generation_of(gens, o) for o in (8, 20)] == [gens[1]] * 2
    assert [generation_of(gens, o) for o in (21, 10**12)] == [gens[2]] * 2
    sealed = (Generation(1, 0, 5),)
    assert generation_of(sealed, 6) is None
    assert Generation(1, 5, 5).holds(5) is False  # an empty sealed generation holds nothing


def test_check_generations_accepts_an_empty_sealed_generation_after_the_cas_one():
    check_generations((Generation(0, 0, 4), Generation(1, 4, 4)))
    check_generations((Generation(1, 0),))


def test_sequence_values():
    entry = IndexEntry(EntryType.WAL, 2, REF, 5, "id")
    assert decode_sequence_value(entry.encode()) == entry
    marker = FenceMarker("f", 9)
    assert json.loads(marker.encode()) == {"type": "FENCE", "fence_id": "f", "created_at_ms": 9}
    assert decode_sequence_value(marker.encode()) == marker
    with pytest.raises(CorruptMetadata):
        decode_sequence_value(b'{"type":"FENCE"}')
    with pytest.raises(CorruptMetadata):
        decode_sequence_value(b'{"type":"OTHER"}')


# --- state transitions ---------------------------------------------------------------------


def test_migration_of_a_cas_partition():
    cas = ControlRecord(LogState.OPEN, 12, None, 4)
    migrated = migrated_control(cas)
    assert migrated.sequential
    assert migrated.generations == (Generation(0, 0, 11), Generation(1, 11))
    assert (migrated.log_state, migrated.sequence_counter, migrated.log_start_offset) == (LogState.OPEN, 12, 4)
    assert migrated_control(migrated) is migrated
    assert ControlRecord.decode(migrated.encode()) == migrated


def test_migration_of_an_empty_and_of_a_fenced_partition():
    assert migrated_control(ControlRecord()).generations == (Generation(1, 0),)
    fenced = migrated_control(ControlRecord(LogState.FENCED, 6))
    assert fenced.generations == (Generation(0, 0, 5), Generation(1, 5, 5))
    assert fenced.log_state is LogState.FENCED
    check_generations(fenced.generations)


def test_migration_needs_the_pending_append_finished():
    with pytest.raises(InvalidArgument):
        migrated_control(ControlRecord(LogState.OPEN, 3, PendingAppend("a", 2, 2, 1, REF, 0)))


def test_seal_and_reopen():
    open_ = ControlRecord(protocol=AppendProtocol.SEQUENTIAL, generations=(Generation(1, 0),))
    sealed = sealed_control(open_, 9)
    assert (sealed.log_state, sealed.sequence_counter, sealed.high_watermark) == (LogState.FENCED, 10, 9)
    assert sealed.generations == (Generation(1, 0, 9),)
    reopened = reopened_control(sealed)
    assert (reopened.log_state, reopened.sequence_counter) == (LogState.OPEN, 10)
    assert reopened.generations == (Generation(1, 0, 9), Generation(2, 9))
    check_generations(reopened.generations)
    with pytest.raises(CorruptMetadata):
        reopened_control(reopened)  # the current generation is open
    with pytest.raises(CorruptMetadata):
        sealed_control(reopened, 8)  # before the generation's base


def test_entry_offsets():
    assert entry_offsets(0, 1, 1) == (1, 1)
    assert entry_offsets(0, 5, 3) == (3, 5)
    assert entry_offsets(100, 5, 5) == (101, 105)


# --- the fence-point search -----------------------------------------------------------------


def _probe(keys: list[tuple[int, int]]):
    positions = [p for p, _ in keys]

    def probe(x: int) -> tuple[int, bool] | None:
        i = bisect.bisect_left(positions, x)
        return None if i == len(keys) else (keys[i][0], keys[i][1] == 0)

    return probe


@given(
    valid=st.lists(st.integers(1, 10**6), unique=True, max_size=40),
    void=st.integers(1, 10),
    kept=st.data(),
)
def test_last_valid_position_finds_the_last_key_before_the_first_marker(valid, void, kept):
    valid = sorted(valid)
    first_marker = (valid[-1] if valid else 0) + 1
    keys = [(p, 0) for p in valid] + [(first_marker + i, 1 + i // 2) for i in range(void)]
    # Compaction deletes lower keys of ranges, never the last valid one.
    dropped = kept.draw(st.sets(st.sampled_from(valid[:-1]))) if len(valid) > 1 else set()
    keys = [k for k in keys if k[0] not in dropped]
    probe = _probe(keys)
    expected = valid[-1] if valid else 0
    assert last_valid_position(0, keys[-1][0] - 1, probe) == expected
    lo = kept.draw(st.sampled_from([0, *[p for p in valid if p not in dropped]]))
    assert last_valid_position(lo, keys[-1][0] - 1, probe) == expected


def test_last_valid_position_is_logarithmic():
    keys = [(p, 0) for p in range(1, 100_001)] + [(100_001, 1)]
    calls = []
    inner = _probe(keys)

    def probe(x: int) -> tuple[int, bool] | None:
        calls.append(x)
        found: tuple[int, bool] | None = inner(x)
        return found

    assert last_valid_position(0, 100_000, probe) == 100_000
    assert len(calls) <= 20


# --- retention's key ranges -------------------------------------------------------------------


def _index(control: ControlRecord) -> PartitionIndex:
    """An index whose key ranges are computed without contacting Oxia (the store connects lazily)."""
    return PartitionIndex(PartitionMetadata(OxiaStore(OxiaConfig("127.0.0.1:1")), KEYS), control)


def _inside(key: str, ranges: list[tuple[str, str]]) -> bool:
    return any(oxia_order(lo) <= oxia_order(key) < oxia_order(hi) for lo, hi in ranges)


def test_retention_ranges_keep_every_counter():
    control = ControlRecord(
        LogState.OPEN, 12, None, 1, AppendProtocol.SEQUENTIAL,
        (Generation(0, 0, 2), Generation(1, 2, 5), Generation(2, 5)),
    )  # fmt: skip
    # Generation 1: entries at positions 1..3, its marker at 4, a void entry at 6. Generation 2: entries at 2, 4.
    ranges = _index(control).ranges_below(10, read_through=9)
    assert _inside(KEYS.index(2), ranges)
    assert all(_inside(KEYS.sequence_key(1, p), ranges) for p in (1, 2, 3))
    assert not _inside(KEYS.sequence_key(1, 4, 1), ranges)
    assert not _inside(KEYS.sequence_key(1, 6, 1), ranges)
    assert _inside(KEYS.sequence_key(2, 4), ranges)  # ends at 9
    assert not _inside(KEYS.sequence_key(2, 5), ranges)  # ends at 10, the log start
    assert not _inside(KEYS.sequence_key(3, 1), ranges)
    assert _index(control).ranges_below(3, read_through=2) == [(f"{KEYS.index_prefix}{'0' * 20}", KEYS.index(3))]


def test_retention_ranges_of_a_cas_partition_are_the_cas_ones():
    assert _index(ControlRecord(LogState.OPEN, 20, None, 9)).ranges_below(9, read_through=5) == [
        (f"{KEYS.index_prefix}{'0' * 20}", KEYS.index(9))
    ]


def test_retention_with_a_stale_generation_table_never_reaches_a_fence_marker():
    """A run read the table while generation 1 was open and read entries ending at 2 and 3. Since then the
    partition was fenced at 3 (marker at position 4, a late writer's void entry at 6), unfenced into generation
    2, and another run, reading the new table, moved the log start to 9: the log start this run meets. Deleting
    generation 1 up to the log start would take its marker, the sequence's counter: a writer still holding
    generation 1 would then get position 1 with fence count 0, a valid key, and its acknowledged records would
    be nowhere (generation 1 is sealed at 3, below the log start)."""
    stale = ControlRecord(protocol=AppendProtocol.SEQUENTIAL, generations=(Generation(1, 0),))
    ranges = _index(stale).ranges_below(9, read_through=3)
    assert _inside(KEYS.sequence_key(1, 2), ranges)
    assert _inside(KEYS.sequence_key(1, 3), ranges)
    assert not _inside(KEYS.sequence_key(1, 4, 1), ranges)
    assert not _inside(KEYS.sequence_key(1, 6, 1), ranges)
    # Nothing read below the log start in the open generation: nothing of it is deleted.
    later = ControlRecord(protocol=AppendProtocol.SEQUENTIAL, generations=(Generation(1, 0, 3), Generation(2, 3)))
    assert not _inside(KEYS.sequence_key(2, 1), _index(later).ranges_below(9, read_through=3))


# --- configuration and the adapter's guards ------------------------------------------------


def test_append_protocol_setting():
    assert append_protocol_from_env({}) is AppendProtocol.SEQUENTIAL
    assert append_protocol_from_env({"LLOG_APPEND_PROTOCOL": ""}) is AppendProtocol.SEQUENTIAL
    assert append_protocol_from_env({"LLOG_APPEND_PROTOCOL": " "}) is AppendProtocol.SEQUENTIAL
    assert append_protocol_from_env({"LLOG_APPEND_PROTOCOL": "cas"}) is AppendProtocol.CAS
    assert append_protocol_from_env({"LLOG_APPEND_PROTOCOL": "sequential"}) is AppendProtocol.SEQUENTIAL
    assert append_protocol_from_env({"LLOG_APPEND_PROTOCOL": " Sequential "}) is AppendProtocol.SEQUENTIAL
    assert append_protocol_from_env({"LLOG_APPEND_PROTOCOL": "cas"}) is AppendProtocol.CAS
    assert WriterConfig.from_env({}).append_protocol is AppendProtocol.SEQUENTIAL == WriterConfig().append_protocol
    assert WriterConfig.from_env({"LLOG_APPEND_PROTOCOL": "sequential"}).append_protocol is AppendProtocol.SEQUENTIAL
    with pytest.raises(ConfigurationError, match="LLOG_APPEND_PROTOCOL"):
        append_protocol_from_env({"LLOG_APPEND_PROTOCOL": "raft"})


@pytest.mark.parametrize("deltas", [(), (0, 0), (0, 1), (1, -1), (-1, 0)])
def test_put_sequential_refuses_deltas_the_server_would_fail_after_logging(deltas):
    """A zero first delta fails in the server after the write is in its WAL (ErrSequenceDeltaIsZero), and the
    Python client does not check it: the adapter does, before it even connects."""
    store = OxiaStore(OxiaConfig("127.0.0.1:1"))
    with pytest.raises(InvalidArgument):
        store.put_sequential("k", b"v", partition_key="p", deltas=deltas)
    assert store.counters.total_calls() == 0


def test_a_roll_seals_the_generation_and_opens_the_next_with_the_log_open():
    control = ControlRecord(protocol=AppendProtocol.SEQUENTIAL, generations=(Generation(1, 0),))
    rolled = rolled_control(control, 3)
    assert rolled.log_state is LogState.OPEN
    assert rolled.generations == (Generation(1, 0, 3, rolled=True), Generation(2, 3))
    assert rolled.sequence_counter == 4
    assert ControlRecord.decode(rolled.encode()) == rolled
    assert "rolled" not in json.loads(reopened_control(sealed_control(control, 3)).encode())["generations"][0]
    marker = FenceMarker("m", 1, roll=True)
    assert decode_sequence_value(marker.encode()) == marker
    assert decode_sequence_value(FenceMarker("f", 1).encode()) == FenceMarker("f", 1)
    with pytest.raises(CorruptMetadata):
        ControlRecord.decode(
            json.dumps(
                {"log_state": "OPEN", "sequence_counter": 1, "append_protocol": "sequential",
                 "generations": [{"generation": 1, "base": 0, "end": None, "rolled": True}]}
            ).encode()
        )  # fmt: skip
