"""The sequential append protocol (docs/SEQUENTIAL_APPEND.md): one Oxia write per partition-append.

A sequential partition's ``meta/control`` names ``append_protocol:
"sequential"`` and its generations. An append puts its index entry with
Oxia's sequential keys into the current generation's sequence::

    put("{base}/seq/{g}/e", entry, partition_key, sequence_keys_deltas=[count, 0])
      -> "{base}/seq/{g}/e-{position:020d}-{fences:020d}"

The server adds ``count`` to the position of the sequence's highest key and
copies its fence count, atomically: the key names the entry's offsets
(``base + position - count + 1 .. base + position``) and nobody else can get
them. A fence puts a marker with deltas ``[1, 1]``: every key after it has a
nonzero fence count, so the writer of an entry that lands past a fence sees it
in the key it gets back (no read needed) and reports ``LogFenced``; such void
entries are never read. Unfencing opens a new generation (a fresh sequence)
whose offsets continue where the fenced one ended.

``SequentialAppender`` holds the writer side (append, fence, unfence) and a
per-writer cache of each partition's open generation, so the common path is
one sequential put and no read. ``LogWriter`` routes each partition here or to
the CAS protocol (``llog.protocol.append_cas``) by what its ``meta/control`` says.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import cast

from llog.config import WriterConfig
from llog.errors import (
    AppendConflict,
    AppendOutcomeUnknown,
    CommitDeadlineExceeded,
    CorruptMetadata,
    InvalidArgument,
    LlogError,
    LogFenced,
    StorageUnavailable,
    VersionConflict,
)
from llog.format.documents import (
    AppendProtocol,
    ControlRecord,
    DataRef,
    EntryType,
    FenceMarker,
    Generation,
    IndexEntry,
    LogState,
    ProducerTag,
)
from llog.format.keys import MAX_GENERATION, PartitionKeys, SequenceKey
from llog.protocol.faults import WRITER_AFTER_FENCE_MARKER, WRITER_AFTER_SEQUENCE_PUT
from llog.protocol.index import SequenceSegment
from llog.protocol.metadata import (
    APPEND_DELTAS_FENCES,
    FENCE_DELTAS,
    PartitionMetadata,
    SequenceAppend,
    VersionedControl,
    append_to_sequences,
)

log = logging.getLogger(__name__)

# An append re-targets only when an unfence opened a newer generation while it
# was in flight; more hops than this means the partition is being fenced and
# unfenced continuously.
MAX_GENERATION_HOPS = 8


# --- pure state transitions (unit-tested) ------------------------------------------


def migrated_control(control: ControlRecord) -> ControlRecord:
    """A CAS partition's control record after the one-way switch to the sequential protocol.

    Its CAS entries become generation 0 (offsets ``1 .. sequence_counter - 1``,
    still under ``index/``); generation 1 continues from there. A fenced
    partition gets generation 1 sealed and empty (nobody can have appended to it).
    """
    if control.sequential:
        return control
    if control.pending is not None:
        raise InvalidArgument("finish the pending append before migrating the partition")
    last = control.high_watermark
    generations: tuple[Generation, ...] = (Generation(0, 0, last),) if last > 0 else ()
    fenced = control.log_state is LogState.FENCED
    generations += (Generation(1, last, last if fenced else None),)
    return replace(control, protocol=AppendProtocol.SEQUENTIAL, generations=generations)


def sealed_control(control: ControlRecord, end: int) -> ControlRecord:
    """FENCED, with the current generation sealed at ``end`` (its last valid offset)."""
    current = control.current_generation
    if end < current.base:
        raise CorruptMetadata(f"generation {current.number} cannot end at {end}, before its base {current.base}")
    return replace(
        control,
        log_state=LogState.FENCED,
        generations=(*control.generations[:-1], replace(current, end=end)),
        sequence_counter=end + 1,
    )


def reopened_control(control: ControlRecord) -> ControlRecord:
    """OPEN, with a new empty generation starting where the sealed current one ended."""
    current = control.current_generation
    if current.end is None:
        raise CorruptMetadata(f"generation {current.number} is not sealed; nothing to reopen")
    if current.number >= MAX_GENERATION:
        raise CorruptMetadata("no sequence generation numbers left")
    return replace(
        control,
        log_state=LogState.OPEN,
        generations=(*control.generations, Generation(current.number + 1, current.end)),
        sequence_counter=current.end + 1,
    )


def entry_offsets(base: int, position: int, count: int) -> tuple[int, int]:
    """The offsets of an entry of ``count`` records that got ``position`` in a generation starting after ``base``."""
    end = base + position
    return end - count + 1, end


# --- the writer side ----------------------------------------------------------------


@dataclass(frozen=True)
class _Target:
    """The open generation a writer puts into, as it last read it."""

    generation: int
    base: int


@dataclass(frozen=True)
class SequentialCommit:
    """One partition's batch in ``SequentialAppender.commit_many``."""

    meta: PartitionMetadata
    ref: DataRef
    count: int
    now_ms: int


CommitOutcome = tuple[int, int, str] | LlogError
"""``(start, end, index_key)`` of a committed batch, or why it was not committed."""


def _entry(ref: DataRef, count: int, now_ms: int, producer: ProducerTag | None = None) -> bytes:
    if count < 1:
        raise InvalidArgument("an append needs at least one record")  # a zero delta would poison the shard
    return IndexEntry(EntryType.WAL, count, ref, now_ms, uuid.uuid4().hex, producer=producer).encode()


def _outcome_unknown(meta: PartitionMetadata, exc: LlogError) -> AppendOutcomeUnknown:
    return AppendOutcomeUnknown(
        f"lost the answer to the sequential put into {meta.keys.topic}/{meta.keys.partition}; "
        f"the records may or may not have been committed: {exc}"
    )


class SequentialAppender:
    """Append, fence and unfence for sequential partitions; safe to share between threads."""

    def __init__(
        self,
        config: WriterConfig,
        *,
        fault: Callable[[str], None],
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.config = config
        self._fault = fault
        self._clock = clock
        self._lock = threading.Lock()
        self._targets: dict[PartitionKeys, _Target] = {}

    # --- the per-writer cache of open generations ----------------------------------

    def knows(self, keys: PartitionKeys) -> bool:
        with self._lock:
            return keys in self._targets

    def remember(self, keys: PartitionKeys, control: ControlRecord) -> None:
        """Cache the open generation (a fenced partition is not cached: every append re-reads it)."""
        with self._lock:
            current = control.current_generation
            if control.log_state is LogState.OPEN and current.end is None:
                self._targets[keys] = _Target(current.number, current.base)
            else:
                self._targets.pop(keys, None)

    def forget(self, keys: PartitionKeys) -> None:
        with self._lock:
            self._targets.pop(keys, None)

    def forget_partition(self, topic: str, partition: int) -> None:
        """``forget`` the partition's keys of every incarnation of the topic (``PartitionKeys.topic_id``)."""
        with self._lock:
            for keys in [k for k in self._targets if (k.topic, k.partition) == (topic, partition)]:
                del self._targets[keys]

    def _target(self, meta: PartitionMetadata, control: ControlRecord | None) -> _Target:
        with self._lock:
            cached = self._targets.get(meta.keys)
        if cached is not None and control is None:
            return cached
        record = meta.control().record if control is None else control
        self.remember(meta.keys, record)
        current = record.current_generation
        if record.log_state is LogState.FENCED or current.end is not None:
            raise LogFenced(meta.keys.topic, meta.keys.partition)
        return _Target(current.number, current.base)

    # --- append -------------------------------------------------------------------

    def commit(
        self,
        meta: PartitionMetadata,
        ref: DataRef,
        count: int,
        now_ms: int,
        deadline: float,
        control: ControlRecord | None = None,
        producer: ProducerTag | None = None,
    ) -> tuple[int, int, str]:
        """Append one batch: one sequential put; returns ``(start, end, index_key)``.

        ``control`` is a just-read ``meta/control`` (else the cached generation,
        or one read). The put is the commit point; it is never repeated, so a
        lost answer is ``AppendOutcomeUnknown``. ``producer`` tags the entry
        (``llog.protocol.producers``).
        """
        value = _entry(ref, count, now_ms, producer)
        return self._commit_from(meta, self._target(meta, control), value, count, deadline)

    def commit_many(self, commits: Sequence[SequentialCommit], deadline: float) -> list[CommitOutcome]:
        """``commit`` for several partitions whose open generation this writer knows, their first puts in one
        Oxia write per shard, each request sent only before ``deadline``. Each partition gets its offsets or its
        error; a put that landed past a fence marker goes on alone, as in ``commit``.
        """
        results: list[CommitOutcome | None] = [None] * len(commits)
        started: list[tuple[int, _Target, bytes]] = []
        for i, c in enumerate(commits):
            try:
                started.append((i, self._target(c.meta, None), _entry(c.ref, c.count, c.now_ms)))
            except LlogError as exc:
                results[i] = exc
        if started:
            first = commits[started[0][0]].meta
            appends = [
                SequenceAppend(commits[i].meta, target.generation, value, (commits[i].count, APPEND_DELTAS_FENCES))
                for i, target, value in started
            ]
            landed = append_to_sequences(first.oxia, appends, before_each=lambda: self._check_deadline(first, deadline))
            if any(not isinstance(key, LlogError) for key in landed):
                self._fault(WRITER_AFTER_SEQUENCE_PUT)
            for (i, target, value), key in zip(started, landed, strict=True):
                c = commits[i]
                if isinstance(key, LlogError):
                    sent = isinstance(key, StorageUnavailable | CorruptMetadata)  # but no usable answer
                    results[i] = _outcome_unknown(c.meta, key) if sent else key
                    continue
                try:
                    results[i] = self._commit_from(c.meta, target, value, c.count, deadline, landed=key)
                except LlogError as exc:
                    results[i] = exc
        assert all(r is not None for r in results), "every partition has an outcome"
        return cast(list[CommitOutcome], results)

    def _commit_from(
        self,
        meta: PartitionMetadata,
        target: _Target,
        value: bytes,
        count: int,
        deadline: float,
        landed: SequenceKey | None = None,
    ) -> tuple[int, int, str]:
        """Put the entry into ``target`` until it lands in an open generation (``landed``: the first put's key)."""
        for _ in range(MAX_GENERATION_HOPS):
            if landed is None:
                self._check_deadline(meta, deadline)
                try:
                    landed = meta.append_to_sequence(target.generation, value, (count, APPEND_DELTAS_FENCES))
                except (StorageUnavailable, CorruptMetadata) as exc:  # sent, but no usable answer
                    raise _outcome_unknown(meta, exc) from exc
                self._fault(WRITER_AFTER_SEQUENCE_PUT)
            if landed.fences == 0:
                start, end = entry_offsets(target.base, landed.position, count)
                return start, end, meta.keys.sequence_key(landed.generation, landed.position)
            # Landed past a fence marker: the entry is void and never read.
            target = self._after_fence(meta, target)
            landed = None
        raise AppendConflict(
            f"{meta.keys.topic}/{meta.keys.partition} was fenced and unfenced {MAX_GENERATION_HOPS} times "
            "while this append was in flight"
        )

    def next_offset(self, meta: PartitionMetadata, control: ControlRecord | None = None) -> int:
        """The open generation's next offset, from its tail (one lookup; the generation cached or read)."""
        target = self._target(meta, control)
        tail = meta.sequence_tail(target.generation)
        return target.base + (0 if tail is None else tail.key.position) + 1

    def _check_deadline(self, meta: PartitionMetadata, deadline: float) -> None:
        if time.monotonic() > deadline:
            raise CommitDeadlineExceeded(
                f"{self.config.max_commit_delay_ms} ms passed since the WAL blob was written; "
                f"nothing was committed to {meta.keys.topic}/{meta.keys.partition}"
            )

    def _after_fence(self, meta: PartitionMetadata, target: _Target) -> _Target:
        """Our entry landed past a fence marker of ``target``: LogFenced, or the generation opened since."""
        self.forget(meta.keys)
        current = meta.control()
        generation = current.record.current_generation
        if generation.number == target.generation and generation.end is None:
            # The marker's fence has not recorded itself yet (in flight, or its
            # fencer died): finish it, so the log is fenced for everyone.
            self.fence(meta, current)
            raise LogFenced(meta.keys.topic, meta.keys.partition)
        return self._target(meta, current.record)

    # --- fence and unfence --------------------------------------------------------

    def fence(self, meta: PartitionMetadata, current: VersionedControl) -> ControlRecord:
        """Put a fence marker into the open generation (unless one is there), then seal it in ``meta/control``.

        Idempotent, and safe to run concurrently or to resume after a crash:
        an extra marker only adds void keys. Appends that got a key before the
        first marker keep their offsets (they end at or before the sealed end);
        every later one is void.

        It fences the generation open in ``current`` and no other: once that
        one is sealed (by us, another fencer, or an unfence finishing this
        fence) it is done, even if an unfence has opened a newer generation
        since (that unfence comes after this fence; the record returned is
        then the open one). Writers and unfences call it to *finish* a fence
        they met: moving on to the new generation would fence a log that was
        just unfenced.
        """
        fencing = current.record.current_generation.number
        backoff = self.config.cas_backoff()
        for _ in range(self.config.max_cas_attempts):
            record = current.record
            generation = record.current_generation
            if generation.end is not None or generation.number != fencing:
                self.forget(meta.keys)
                return record
            tail = meta.sequence_tail(generation.number)
            if tail is None or not tail.void:
                marker = FenceMarker(uuid.uuid4().hex, int(self._clock() * 1000))
                key = meta.append_to_sequence(generation.number, marker.encode(), FENCE_DELTAS)
                self._fault(WRITER_AFTER_FENCE_MARKER)
                if key.fences == 1:
                    # The first marker: it went on top of the last valid key (or an empty sequence).
                    last_valid = key.position - 1
                else:  # another fence's marker came first
                    last_valid = SequenceSegment(meta, generation).last_valid_position(
                        0 if tail is None else tail.key.position
                    )
            else:  # a marker is there already (a fence in flight, or one that died before sealing)
                last_valid = SequenceSegment(meta, generation).last_valid_position()
            sealed = sealed_control(record, generation.base + last_valid)
            try:
                meta.replace_control(sealed, current.version_id)
            except VersionConflict:
                backoff.wait()
                current = meta.control()
                continue
            self.forget(meta.keys)
            return sealed
        raise AppendConflict(
            f"gave up fencing {meta.keys.topic}/{meta.keys.partition} after "
            f"{self.config.max_cas_attempts} compare-and-set conflicts"
        )

    def unfence(self, meta: PartitionMetadata, current: VersionedControl) -> ControlRecord:
        """Open a new generation after the sealed one. Idempotent; finishes a fence left half-done first."""
        backoff = self.config.cas_backoff()
        for _ in range(self.config.max_cas_attempts):
            record = current.record
            generation = record.current_generation
            if generation.end is None:
                tail = meta.sequence_tail(generation.number)
                if tail is None or not tail.void:
                    # Already open. The stored counter lags the sequence: report the live one.
                    last = generation.base + (0 if tail is None else tail.key.position)
                    return replace(record, sequence_counter=last + 1)
                self.fence(meta, current)  # a marker without its seal: finish that fence, then reopen
                current = meta.control()
                continue
            reopened = reopened_control(record)
            try:
                meta.replace_control(reopened, current.version_id)
            except VersionConflict:
                backoff.wait()
                current = meta.control()
                continue
            self.remember(meta.keys, reopened)
            return reopened
        raise AppendConflict(
            f"gave up unfencing {meta.keys.topic}/{meta.keys.partition} after "
            f"{self.config.max_cas_attempts} compare-and-set conflicts"
        )

    def set_state(self, meta: PartitionMetadata, state: LogState, current: VersionedControl) -> ControlRecord:
        return self.fence(meta, current) if state is LogState.FENCED else self.unfence(meta, current)
