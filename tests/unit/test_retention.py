"""Retention planning and configuration (no storage): which log start a policy asks for."""

from __future__ import annotations

import pytest

from llog.config import RetentionConfig, RetentionPolicy
from llog.errors import ConfigurationError
from llog.format.kv.document import DataRef
from llog.format.kv.index import EntryType, IndexedBatch, IndexEntry
from llog.protocol.retention import plan_log_start

NOW = 1_000_000_000


def entry(
    end: int, count: int, *, kind: EntryType = EntryType.COMPACTED, age_ms: int = 0, size: int = 100
) -> IndexedBatch:
    ref = DataRef("s3://b/k") if kind is EntryType.COMPACTED else DataRef("s3://b/w", byte_offset=0, byte_length=size)
    data_bytes = size if kind is EntryType.COMPACTED else None
    return IndexedBatch(end, IndexEntry(kind, count, ref, NOW - age_ms, data_bytes=data_bytes))


def size_of(batch: IndexedBatch) -> int:
    return batch.entry.data_bytes or batch.entry.ref.byte_length or 0


def plan(entries: list[IndexedBatch], policy: RetentionPolicy, cursor: int | None = None) -> int | None:
    cursor = entries[-1].end_offset + 1 if cursor is None else cursor
    return plan_log_start(entries, cursor=cursor, policy=policy, now_ms=NOW, size_of=size_of)


def test_keep_everything_by_default() -> None:
    assert plan([entry(10, 10, age_ms=10**9), entry(20, 10)], RetentionPolicy()) is None


def test_age_removes_the_leading_ranges_older_than_the_limit() -> None:
    entries = [entry(10, 10, age_ms=5000), entry(15, 5, age_ms=4000), entry(20, 5, age_ms=100), entry(30, 10)]
    assert plan(entries, RetentionPolicy(max_age_ms=3000)) == 16
    assert plan(entries, RetentionPolicy(max_age_ms=4500)) == 11
    assert plan(entries, RetentionPolicy(max_age_ms=9000)) is None


def test_size_removes_the_oldest_ranges_until_the_partition_fits() -> None:
    entries = [entry(10, 10, size=400), entry(20, 10, size=300), entry(30, 10, size=200), entry(40, 10, size=100)]
    assert plan(entries, RetentionPolicy(max_bytes=1000)) is None
    assert plan(entries, RetentionPolicy(max_bytes=999)) == 11
    assert plan(entries, RetentionPolicy(max_bytes=600)) == 11  # 400 goes: 600 left
    assert plan(entries, RetentionPolicy(max_bytes=300)) == 21  # 400 and 300 go: 300 left
    assert plan(entries, RetentionPolicy(max_bytes=299)) == 31  # and 200: 100 left
    assert plan(entries, RetentionPolicy(max_bytes=1)) == 31  # never the last entry


def test_the_stricter_limit_wins() -> None:
    entries = [entry(10, 10, age_ms=10_000, size=10), entry(20, 10, age_ms=10, size=500), entry(30, 10, size=10)]
    assert plan(entries, RetentionPolicy(max_age_ms=1000, max_bytes=10_000)) == 11
    assert plan(entries, RetentionPolicy(max_age_ms=1000, max_bytes=100)) == 21


def test_the_last_entry_wal_entries_and_ranges_above_the_cursor_are_never_removed() -> None:
    old = 10**9
    only = [entry(10, 10, age_ms=old)]
    assert plan(only, RetentionPolicy(max_age_ms=1)) is None  # the counter must not move back
    mixed = [entry(10, 10, age_ms=old), entry(12, 2, kind=EntryType.WAL, age_ms=old), entry(20, 8, age_ms=old)]
    assert plan(mixed, RetentionPolicy(max_age_ms=1)) == 11  # stops at the WAL entry
    compacted = [entry(10, 10, age_ms=old), entry(20, 10, age_ms=old), entry(30, 10, age_ms=old)]
    assert plan(compacted, RetentionPolicy(max_age_ms=1), cursor=21) == 21  # [21, 30] is at the cursor
    assert plan_log_start([], cursor=1, policy=RetentionPolicy(max_age_ms=1), now_ms=NOW, size_of=size_of) is None


def test_configuration_from_the_environment() -> None:
    config = RetentionConfig.from_env(
        {
            "LLOG_RETENTION_MS": "86400000",
            "LLOG_RETENTION_TOPICS": '{"audit": {}, "clicks": {"bytes": 1000, "ms": -1}}',
        }
    )
    assert config.policy("orders") == RetentionPolicy(max_age_ms=86_400_000)
    assert config.policy("audit") == RetentionPolicy()  # kept forever
    assert config.policy("clicks") == RetentionPolicy(max_bytes=1000)
    assert RetentionConfig.from_env({}).keeps_everything
    assert RetentionConfig.from_env({"LLOG_RETENTION_BYTES": "0"}).keeps_everything


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"LLOG_RETENTION_MS": "soon"}, "LLOG_RETENTION_MS"),
        ({"LLOG_RETENTION_TOPICS": "{"}, "not JSON"),
        ({"LLOG_RETENTION_TOPICS": "[]"}, "JSON object"),
        ({"LLOG_RETENTION_TOPICS": '{"a/b": {"ms": 1}}'}, "a/b"),
        ({"LLOG_RETENTION_TOPICS": '{"t": {"days": 1}}'}, '"ms"'),
        ({"LLOG_RETENTION_TOPICS": '{"t": {"ms": "1"}}'}, "integer"),
    ],
)
def test_bad_configuration_names_the_variable(env: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigurationError, match=message):
        RetentionConfig.from_env(env)
