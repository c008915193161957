"""The append (docs/PROTOCOL.md, "Append"), and ``LogWriter``, the writer side of a partition.

``LogWriter.append_shared(groups)`` validates and encodes every group, writes one
``LLS1`` blob holding every group's batch, then commits each partition on its
own (the partitions concurrently, ``commit_concurrency``), as a
``llog.protocol.commit.BatchCommit`` handed to the protocol the partition's
``meta/control`` names (a ``llog.protocol.commit.Committer``): a CAS partition
to ``append_cas.CasCommitter`` (reserve, materialize, clear pending), a
sequential one to ``append_sequential.SequentialAppender`` (one Oxia sequential
put; docs/SEQUENTIAL_APPEND.md). A group of an idempotent producer commits
through ``llog.protocol.producers`` around that (at most once;
docs/IDEMPOTENCE.md), and a group with ``expected_offset`` only at that offset
(CAS partitions; sequential ones refuse it before the PUT). Fence, unfence and
migration are ``llog.protocol.fence``. The steps, their crash points and the
invariants they keep are tabled in ``llog.protocol``.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor, wait
from dataclasses import dataclass, field, replace
from functools import cached_property

from llog.config import WriterConfig
from llog.errors import InvalidArgument, LlogError, PartitionNotInitialized
from llog.format.codec import Record, check_records, encode_batch, records_digest
from llog.format.keys import DEFAULT_ROOT_PREFIX, PartitionKeys, S3Location, partition_keys, shared_wal_object_key
from llog.format.kv.control import AppendProtocol, ControlRecord, LogState
from llog.format.kv.document import DataRef, TimeSpan
from llog.format.kv.index import ProducerTag
from llog.format.wal import BlobSlice, PartitionBody, build_shared_blob
from llog.protocol import append_cas, fence
from llog.protocol.append_sequential import SequentialAppender, conditional_unsupported
from llog.protocol.commit import BatchCommit, CommitOutcome, Committed, Committer, ProtocolChanged
from llog.protocol.faults import WRITER_AFTER_BLOB_PUT, FaultHook
from llog.protocol.metadata import CommitWrites, PartitionMetadata, VersionedControl, recording_commit_writes
from llog.protocol.producers import IdempotentAppender, IdempotentBatch, IdempotentOutcome, ProducerRegistry
from llog.protocol.topics import TopicLayouts
from llog.store.storage import Storage

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class SharedAppendGroup:
    """Records for one topic-partition inside a shared append.

    With ``producer_id`` (and ``producer_epoch``, ``sequence``: the first
    record's sequence) the batch is committed at most once
    (``llog.protocol.producers``). With ``expected_offset`` it is appended only
    if it gets that start offset (CAS partitions only).
    """

    topic: str
    partition: int
    records: Sequence[Record | bytes]
    producer_id: str | None = None
    producer_epoch: int | None = None
    sequence: int | None = None
    expected_offset: int | None = None

    @cached_property  # validation asks for it, then the commit: the digest is taken once
    def idempotent(self) -> IdempotentBatch | None:
        """The batch as an idempotent producer's (validated, with its records' digest), or None without a producer."""
        if self.producer_id is None and self.producer_epoch is None and self.sequence is None:
            return None
        if self.producer_id is None or self.producer_epoch is None or self.sequence is None:
            raise InvalidArgument(
                f"group {self.topic}/{self.partition}: producer_id, producer_epoch and sequence go together"
            )
        return IdempotentBatch(
            self.producer_id, self.producer_epoch, self.sequence, len(self.records), records_digest(self.records)
        )


CommitListener = Callable[[str, int, int, bytes, CommitWrites], None]
"""Called as ``(topic, partition, start_offset, batch, written)`` after each committed group (e.g. a tail
cache); ``written``: the partition's commit keys and the commit's writes to them as (key, Oxia version id),
as far as the writer knows them (``llog.protocol.metadata.recording_commit_writes``)."""


def validate_group(group: SharedAppendGroup, root: str = DEFAULT_ROOT_PREFIX) -> PartitionKeys:
    """Check a group's names and records without encoding it; raises ``InvalidArgument``."""
    keys = partition_keys(group.topic, group.partition, root)
    if not group.records:
        raise InvalidArgument(f"group {keys.topic}/{keys.partition} has no records")
    check_records(group.records)
    _ = group.idempotent  # validates the producer fields
    offset = group.expected_offset
    if offset is not None and (isinstance(offset, bool) or not isinstance(offset, int) or offset < 1):
        raise InvalidArgument(f"group {keys.topic}/{keys.partition}: expected_offset must be an integer >= 1")
    return keys


@dataclass(frozen=True)
class AppendResult:
    """Outcome of one group: offsets on success, the error otherwise."""

    topic: str
    partition: int
    count: int
    start_offset: int | None = None
    end_offset: int | None = None
    index_key: str | None = None
    wal_uri: str | None = None
    error: LlogError | None = field(default=None, compare=False)
    duplicate: bool = False  # an idempotent retry: the offsets are the original's, nothing was written

    @property
    def ok(self) -> bool:
        return self.error is None

    @property
    def error_type(self) -> str | None:
        return None if self.error is None else self.error.error_type


class LogWriter:
    """Appends to partitions; safe to share between threads."""

    def __init__(
        self,
        storage: Storage,
        *,
        config: WriterConfig | None = None,
        fault_hook: FaultHook | None = None,
        commit_listener: CommitListener | None = None,
    ) -> None:
        if not storage.bucket:
            raise InvalidArgument("the writer needs an S3 bucket")
        self.storage = storage
        self.config = config or WriterConfig()
        self._fault_hook = fault_hook
        self._commit_listener = commit_listener
        self._sequential = SequentialAppender(self.config, fault=self._fault, clock=storage.clock)
        self._cas = append_cas.CasCommitter(self.config, fault_hook)
        self.layouts = TopicLayouts(storage.oxia, root=storage.root)  # each partition's incarnation
        self.producers = ProducerRegistry(
            storage.oxia, root=storage.root, expiry_ms=self.config.producer_expiry_ms, clock=storage.clock,
            config=self.config,
        )  # fmt: skip
        self._idempotent = IdempotentAppender(
            self.producers, self.config, self._sequential, clock=storage.clock, fault_hook=fault_hook
        )
        # Threads start on the first append of more than one partition and are reused.
        self._commits = ThreadPoolExecutor(self.config.commit_concurrency, thread_name_prefix="llog-commit")

    @classmethod
    def from_env(cls, *, commit_listener: CommitListener | None = None) -> LogWriter:
        return cls(Storage.from_env(), config=WriterConfig.from_env(), commit_listener=commit_listener)

    @property
    def root(self) -> str:
        """The key root prefix partitions are validated against (what a batcher in front needs)."""
        return self.storage.root

    def close(self) -> None:
        self._commits.shutdown()
        self.storage.close()

    def __enter__(self) -> LogWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _now_ms(self) -> int:
        return int(self.storage.clock() * 1000)

    def _fault(self, point: str) -> None:
        if self._fault_hook is not None:
            self._fault_hook(point)

    def _metadata(self, topic: str, partition: int) -> PartitionMetadata:
        return PartitionMetadata(self.storage.oxia, self.layouts.keys(topic, partition))

    # --- partition lifecycle ---------------------------------------------------

    def initialize_partition(self, topic: str, partition: int) -> bool:
        """Create the partition if absent (``sequence_counter=1``, cursor 1, ``OPEN``).

        New partitions use ``config.append_protocol``; an existing one keeps
        its own. Idempotent; returns True if this call created it.
        """
        return self._metadata(topic, partition).create(self.config.append_protocol)

    def fence(self, topic: str, partition: int) -> ControlRecord:
        """Stop appends. Finishes a pending append first, so it stays readable."""
        meta = self._metadata(topic, partition)
        return fence.set_state(
            meta, LogState.FENCED, config=self.config, sequential=self._sequential, fault_hook=self._fault_hook
        )

    def unfence(self, topic: str, partition: int) -> ControlRecord:
        """Reopen a fenced partition for appends (``UnknownTopic`` for a partition of a deleted topic)."""
        meta = self._metadata(topic, partition)
        return fence.set_state(
            meta, LogState.OPEN, config=self.config, sequential=self._sequential, fault_hook=self._fault_hook
        )

    def migrate_to_sequential(self, topic: str, partition: int) -> ControlRecord:
        """Switch a CAS partition to the sequential protocol, one way (docs/SEQUENTIAL_APPEND.md).

        Finishes a pending append, then compare-and-sets ``meta/control``: the
        CAS entries become generation 0 and appends continue in generation 1.
        Every CAS append after this fails its own compare-and-set and moves to
        the sequential path. Idempotent. Needs every writer to run this version.
        """
        meta = self._metadata(topic, partition)
        return fence.migrate_to_sequential(
            meta, config=self.config, sequential=self._sequential, fault_hook=self._fault_hook
        )

    def forget(self, topic: str, partition: int) -> None:
        """Drop what this writer caches of a partition, of every incarnation (its open sequential generation):
        it was deleted."""
        self._sequential.forget_partition(topic, partition)

    def recover_pending(self, topic: str, partition: int) -> bool:
        """Finish a pending append left by a crashed writer; True if there was one."""
        return append_cas.recover_pending(self._metadata(topic, partition), self._fault_hook)

    # --- appends ---------------------------------------------------------------

    def append(self, topic: str, partition: int, records: Sequence[Record | bytes]) -> AppendResult:
        """Append to one partition; raises the error instead of returning it."""
        (result,) = self.append_shared([SharedAppendGroup(topic, partition, records)])
        if result.error is not None:
            raise result.error
        return result

    def append_shared(self, groups: Sequence[SharedAppendGroup]) -> list[AppendResult]:
        """Write all groups in one shared WAL blob, then commit each partition.

        Invalid input raises before anything is written. Storage failures are
        reported per group: there is no atomicity across partitions.
        """
        if not groups:
            raise InvalidArgument("append_shared needs at least one group")
        refused = self.conditional_refusals(groups)
        if not refused:
            return self._append_shared(groups)
        # A refused group fails alone: the others (in llog serve, other requests' batches) are appended.
        kept = [g for i, g in enumerate(groups) if i not in refused]
        appended = iter(self._append_shared(kept) if kept else [])
        return [
            AppendResult(g.topic, g.partition, len(g.records), error=refused[i]) if i in refused else next(appended)
            for i, g in enumerate(groups)
        ]

    def _append_shared(self, groups: Sequence[SharedAppendGroup]) -> list[AppendResult]:
        now = self._now_ms()
        bodies = []
        for group in groups:
            keys = validate_group(group, self.storage.root)
            bodies.append(
                PartitionBody(keys.topic, keys.partition, len(group.records), encode_batch(group.records, now_ms=now))
            )
        blob, slices = build_shared_blob(bodies, now_ms=now)
        location = S3Location(self.storage.bucket, shared_wal_object_key(self.storage.root))
        commit_deadline = time.monotonic() + self.config.max_commit_delay_ms / 1000
        commit_by_ms = self._now_ms() + self.config.max_commit_delay_ms  # the deadline on the wall clock

        try:
            self.storage.blobs.put(location, blob)
        except LlogError as exc:
            return [AppendResult(b.topic, b.partition, b.msg_count, error=exc) for b in bodies]
        self._fault(WRITER_AFTER_BLOB_PUT)

        results = []
        inline_max = self.config.inline_batch_max_bytes
        refs = [
            DataRef(location.uri, s.encoding, s.byte_offset, s.byte_length, TimeSpan.of_batch(body.body),
                    inline=body.body if len(body.body) <= inline_max else None)
            for s, body in zip(slices, bodies, strict=True)
        ]  # fmt: skip
        outcomes = self._commit_all(groups, refs, slices, now, _Deadline(commit_deadline, commit_by_ms))
        for s, body, (outcome, written) in zip(slices, bodies, outcomes, strict=True):
            if isinstance(outcome, LlogError):
                results.append(AppendResult(s.topic, s.partition, s.msg_count, error=outcome))
                continue
            if isinstance(outcome, IdempotentOutcome) and outcome.duplicate:
                results.append(
                    AppendResult(s.topic, s.partition, s.msg_count, outcome.start_offset, outcome.end_offset,
                                 duplicate=True)
                )  # fmt: skip
                continue
            start, end, index_key = _offsets(outcome)
            results.append(AppendResult(s.topic, s.partition, s.msg_count, start, end, index_key, location.uri))
            if self._commit_listener is not None:
                try:
                    self._commit_listener(s.topic, s.partition, start, body.body, written)
                except Exception:  # a cache must never fail a committed append
                    log.exception("commit listener failed for %s/%s", s.topic, s.partition)
        return results

    def conditional_refusals(
        self,
        groups: Sequence[SharedAppendGroup],
        protocol_if_new: Callable[[SharedAppendGroup], AppendProtocol] | None = None,
    ) -> dict[int, LlogError]:
        """The groups whose ``expected_offset`` cannot be checked, by index, before anything is written.

        A sequential partition cannot check it atomically (``ConditionalAppendUnsupported``); a
        partition whose control record cannot be read fails with that error. One read per
        conditional group of a partition not known to be sequential; nothing for other groups.
        A partition not initialized yet is judged by ``protocol_if_new`` (the protocol the caller
        would create it with), else left to its commit, which reports it not initialized.
        """
        refused: dict[int, LlogError] = {}
        for i, group in enumerate(groups):
            if group.expected_offset is None:
                continue
            try:
                meta = self._metadata(group.topic, group.partition)
                sequential = self._sequential.knows(meta.keys) or meta.control().record.sequential
            except PartitionNotInitialized:
                if protocol_if_new is None:
                    continue  # its commit reports that, for this group alone
                sequential = protocol_if_new(group) is AppendProtocol.SEQUENTIAL
            except LlogError as exc:
                refused[i] = exc
                continue
            if sequential:
                refused[i] = conditional_unsupported(meta)
        return refused

    def _commit_all(
        self,
        groups: Sequence[SharedAppendGroup],
        refs: Sequence[DataRef],
        slices: Sequence[BlobSlice],
        now_ms: int,
        deadline: _Deadline,
    ) -> list[tuple[_Outcome, CommitWrites]]:
        """Each slice's commit, the partitions at once (there is no atomicity across them anyway), with its
        writes to its partition's commit keys (of the batched puts: that partition's only).

        Sequential partitions this writer knows put their entries with one Oxia
        write per shard; the others commit concurrently on the writer's
        threads. An unexpected exception (an injected crash, a bug) is raised
        only after every commit has ended, so nothing of this append runs on
        afterwards.
        """
        metas: dict[int, PartitionMetadata] = {}
        outcomes: dict[int, tuple[_Outcome, CommitWrites]] = {}
        for i, s in enumerate(slices):
            try:
                metas[i] = self._metadata(s.topic, s.partition)
            except LlogError as exc:  # its topic's record (which folder) could not be read: this group fails
                outcomes[i] = exc, CommitWrites((), frozenset())

        def batch(i: int) -> BatchCommit:
            group = groups[i]
            return BatchCommit(metas[i], refs[i], slices[i].msg_count, now_ms, deadline.monotonic,
                               expected_offset=group.expected_offset)  # fmt: skip

        def commit(i: int) -> tuple[_Outcome, CommitWrites]:
            with recording_commit_writes() as written:
                try:
                    outcome: _Outcome = self._commit_group(groups[i], batch(i), deadline.wall_ms)
                except LlogError as exc:
                    outcome = exc
            return outcome, CommitWrites.of(metas[i].keys, written)

        if len(slices) == 1:
            return [outcomes[0] if 0 in outcomes else commit(0)]
        plain = [g.producer_id is None and g.expected_offset is None for g in groups]
        # A partition with an idempotent or conditional group commits all its groups on one thread instead.
        special = {meta.keys for i, meta in metas.items() if not plain[i]}
        known = [i for i, meta in metas.items() if meta.keys not in special and self._sequential.knows(meta.keys)]
        batched = known if len(known) > 1 else []
        # Groups of one partition commit one after another, in request order, on one thread.
        by_partition: dict[PartitionKeys, list[int]] = {}
        for i, meta in metas.items():
            if i not in batched:
                by_partition.setdefault(meta.keys, []).append(i)
        futures = [self._commits.submit(lambda indexes: [(i, commit(i)) for i in indexes], indexes)
                   for indexes in by_partition.values()]  # fmt: skip
        try:
            with recording_commit_writes() as written:
                many = self._sequential.commit_many([batch(i) for i in batched]) if batched else []
            for i, outcome in zip(batched, many, strict=True):
                outcomes[i] = outcome, CommitWrites.of(metas[i].keys, written)
        finally:
            wait(futures)
        for future in futures:
            outcomes.update(future.result())
        return [outcomes[i] for i in range(len(slices))]

    def _commit_group(self, group: SharedAppendGroup, batch: BatchCommit, commit_by_ms: int) -> _Outcome:
        """Commit one partition's batch by the partition's protocol, idempotently if it has a producer."""
        idempotent = group.idempotent
        if idempotent is None:
            return self._commit_batch(batch)
        meta = batch.meta
        read: list[VersionedControl] = []  # the meta/control read before the claim; the CAS commit's first read

        def next_offset() -> int:
            # From fresh state, never the cached generation (docs/IDEMPOTENCE.md, "Safety").
            read.append(meta.control())
            control = read[-1].record
            return self._sequential.next_offset(meta, control) if control.sequential else control.sequence_counter

        def commit(tag: ProducerTag) -> Committed:
            return self._commit_batch(replace(batch, producer=tag), read[-1] if read else None)

        return self._idempotent.append(
            meta, idempotent, commit_by_ms=commit_by_ms, next_offset=next_offset, commit=commit
        )

    def _commit_batch(self, batch: BatchCommit, current: VersionedControl | None = None) -> Committed:
        """Commit one partition's batch by the protocol its ``meta/control`` names.

        A partition known to be sequential costs no read here; otherwise the
        ``meta/control`` read that picks the protocol is the CAS path's first
        read (``current``, when the caller made it already).
        """
        if self._sequential.knows(batch.meta.keys) and batch.expected_offset is None:
            return self._sequential.commit(batch)
        current = current or batch.meta.control()
        committer: Committer = self._sequential if current.record.sequential else self._cas
        try:
            return committer.commit(batch, current)
        except ProtocolChanged as changed:  # migrated while the CAS commit worked on it
            return self._sequential.commit(batch, changed.current)


@dataclass(frozen=True)
class _Deadline:
    """An append's commit deadline: ``time.monotonic()`` for this process, the wall clock for claims."""

    monotonic: float
    wall_ms: int


_Outcome = CommitOutcome | IdempotentOutcome


def _offsets(outcome: tuple[int, int, str] | IdempotentOutcome) -> tuple[int, int, str | None]:
    if isinstance(outcome, IdempotentOutcome):
        return outcome.start_offset, outcome.end_offset, outcome.index_key
    return outcome
