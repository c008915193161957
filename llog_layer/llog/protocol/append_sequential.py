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
whose offsets continue where the fenced one ended. A roll (an idempotent
producer's takeover voiding a put sent late) puts a roll marker, then seals
the generation and opens the next in one compare-and-set: the log stays open,
and a writer whose put landed past the marker re-targets instead of
reporting ``LogFenced``.

``SequentialAppender`` holds the writer side (append, fence, unfence, roll) and a
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
    ConditionalAppendUnsupported,
    CorruptMetadata,
    InvalidArgument,
    LlogError,
    LogFenced,
    StorageUnavailable,
    UnknownTopic,
    VersionConflict,
)
from llog.format.keys import MAX_GENERATION, PartitionKeys, SequenceKey
from llog.format.kv.control import AppendProtocol, ControlRecord, Generation, LogState
from llog.format.kv.document import DataRef
from llog.format.kv.index import EntryType, FenceMarker, IndexEntry, ProducerTag
from llog.protocol.commit import BatchCommit, CommitOutcome, Committed
from llog.protocol.faults import WRITER_AFTER_DEADLINE_CHECK, WRITER_AFTER_FENCE_MARKER, WRITER_AFTER_SEQUENCE_PUT
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


def rolled_control(control: ControlRecord, end: int) -> ControlRecord:
    """The current generation sealed at ``end`` as ``rolled`` and the next one open: the log stays OPEN."""
    sealed = sealed_control(control, end)
    current = sealed.current_generation
    return reopened_control(replace(sealed, generations=(*sealed.generations[:-1], replace(current, rolled=True))))


def refuse_deleted(meta: PartitionMetadata, control: ControlRecord) -> None:
    """``UnknownTopic`` if ``control`` marks the partition as its deleted topic's (either protocol): an unfence
    never reopens it."""
    if control.topic_deleted:
        raise UnknownTopic(
            meta.keys.topic, f"topic {meta.keys.topic!r} was deleted: its partition {meta.keys.partition} stays fenced"
        )


def generation_numbered(control: ControlRecord, number: int) -> Generation:
    for generation in control.generations:
        if generation.number == number:
            return generation
    raise CorruptMetadata(f"meta/control has no generation {number}")


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


def _entry(ref: DataRef, count: int, now_ms: int, producer: ProducerTag | None = None) -> bytes:
    if count < 1:
        raise InvalidArgument("an append needs at least one record")  # a zero delta would poison the shard
    return IndexEntry(EntryType.WAL, count, ref, now_ms, uuid.uuid4().hex, producer=producer).encode()


def conditional_unsupported(meta: PartitionMetadata) -> ConditionalAppendUnsupported:
    return ConditionalAppendUnsupported(
        f"{meta.keys.topic}/{meta.keys.partition} uses the sequential append protocol, which cannot check "
        "expected_offset atomically; only partitions of the cas protocol take conditional appends"
    )


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

    def commit(self, batch: BatchCommit, current: VersionedControl | None = None) -> Committed:
        """Append one batch: one sequential put; returns ``(start, end, index_key)``
        (``llog.protocol.commit.Committer``).

        ``current`` is a just-read ``meta/control`` (else the cached generation,
        or one read). The put is the commit point; it is never repeated, so a
        lost answer is ``AppendOutcomeUnknown``. ``batch.producer`` tags the entry
        (``llog.protocol.producers``). A conditional batch is refused: a sequential
        put cannot check its start offset atomically (``ConditionalAppendUnsupported``).
        """
        meta = batch.meta
        if batch.expected_offset is not None:
            raise conditional_unsupported(meta)
        value = _entry(batch.ref, batch.count, batch.now_ms, batch.producer)
        target = self._target(meta, None if current is None else current.record)
        return self._commit_from(meta, target, value, batch.count, batch.deadline)

    def commit_many(self, commits: Sequence[BatchCommit]) -> list[CommitOutcome]:
        """``commit`` for several unconditional batches of partitions whose open generation this writer
        knows, their first puts in one Oxia write per shard, each request sent only before the earliest
        deadline. Each partition gets its offsets or its error; a put that landed past a fence marker goes
        on alone, as in ``commit``.
        """
        deadline = min(c.deadline for c in commits)
        results: list[CommitOutcome | None] = [None] * len(commits)
        started: list[tuple[int, _Target, bytes]] = []
        for i, c in enumerate(commits):
            if c.expected_offset is not None:
                results[i] = conditional_unsupported(c.meta)
                continue
            try:
                started.append((i, self._target(c.meta, None), _entry(c.ref, c.count, c.now_ms, c.producer)))
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

    def next_offset(self, meta: PartitionMetadata, control: ControlRecord) -> int:
        """A lower bound of the offset any append sent from now on gets: the last valid offset plus one.

        ``control`` must be read just before (never the cached generation: a
        fence and unfence since then would leave a marker on its tail). A void
        tail does not count: past a marker, the last valid key is looked up,
        and later appends land in the next generation, which starts there.
        """
        self._target(meta, control)  # LogFenced on a fenced partition; caches its open generation
        generation = control.current_generation
        return generation.base + SequenceSegment(meta, generation).last_valid_position() + 1

    def _check_deadline(self, meta: PartitionMetadata, deadline: float) -> None:
        """Refuse to send a put after ``deadline``; called right before each one."""
        if time.monotonic() > deadline:
            raise CommitDeadlineExceeded(
                f"{self.config.max_commit_delay_ms} ms passed since the WAL blob was written; "
                f"nothing was committed to {meta.keys.topic}/{meta.keys.partition}"
            )
        self._fault(WRITER_AFTER_DEADLINE_CHECK)

    def _after_fence(self, meta: PartitionMetadata, target: _Target) -> _Target:
        """Our entry landed past a marker of ``target``: LogFenced, or the generation opened since (a roll's,
        or an unfence's)."""
        self.forget(meta.keys)
        current = meta.control()
        generation = current.record.current_generation
        if generation.number == target.generation and generation.end is None:
            # The marker's seal is not recorded yet (in flight, or its author
            # died): finish it as what it began, so it holds for everyone. A
            # roll opens the next generation (we go on there); a fence fences the log.
            if self._first_marker_rolls(meta, generation):
                return self._target(meta, self.roll(meta, current))
            self.fence(meta, current)
            raise LogFenced(meta.keys.topic, meta.keys.partition)
        return self._target(meta, current.record)

    # --- fence and unfence --------------------------------------------------------

    def fence(
        self, meta: PartitionMetadata, current: VersionedControl, *, topic_deleted: bool = False
    ) -> ControlRecord:
        """Put a fence marker into the open generation (unless one is there), then seal it in ``meta/control``.

        Idempotent, and safe to run concurrently or to resume after a crash:
        an extra marker only adds void keys. Appends that got a key before the
        first marker keep their offsets (they end at or before the sealed end);
        every later one is void.

        It fences the generation open in ``current`` and no other: once that
        one is sealed by a fence (ours, another fencer's, or an unfence
        finishing this fence) it is done, even if an unfence has opened a newer
        generation since (that unfence comes after this fence; the record
        returned is then the open one). Writers and unfences call it to
        *finish* a fence they met: moving on to the new generation would fence
        a log that was just unfenced. A generation a roll sealed was never
        fenced: the fence goes on with the generation the roll opened.

        ``topic_deleted`` (the fence of a topic's delete) also marks the record
        as its deleted topic's, and goes on until the record in force is sealed
        and marked: a generation an unfence opened meanwhile is fenced too (no
        unfence of a deleted topic is wanted), and a generation sealed without
        the mark gets it by compare-and-set.
        """
        return self._seal(meta, current, roll=False, topic_deleted=topic_deleted)

    def roll(self, meta: PartitionMetadata, current: VersionedControl) -> ControlRecord:
        """Seal the open generation and open the next one at the same offset; the log stays OPEN.

        A takeover's way to void a put sent late (docs/SEQUENTIAL_APPEND.md,
        "Roll"): a roll marker goes into the generation open in ``current``,
        then one compare-and-set seals it (``rolled``) and opens the next. A
        put that lands after the marker is void, and its writer re-targets to
        the next generation after checking its deadline again; nobody sees
        ``LogFenced``. A marker already there without its seal is finished as
        what its first marker began (a fence stays a fence). Nothing to do on
        a fenced partition: every put there is void already. Returns the
        record in force.
        """
        return self._seal(meta, current, roll=True)

    def finish_seal(self, meta: PartitionMetadata, current: VersionedControl) -> ControlRecord:
        """The open generation of ``current`` holds a marker without its seal: finish what its first marker began."""
        if self._first_marker_rolls(meta, current.record.current_generation):
            return self.roll(meta, current)
        return self.fence(meta, current)

    def _first_marker_rolls(self, meta: PartitionMetadata, generation: Generation) -> bool:
        """Whether the generation's first marker (the key after its last valid one) is a roll's."""
        first = meta.sequence_ceiling(generation.number, SequenceSegment(meta, generation).last_valid_position() + 1)
        return first is not None and isinstance(first.value, FenceMarker) and first.value.roll

    def _seal(
        self, meta: PartitionMetadata, current: VersionedControl, *, roll: bool, topic_deleted: bool = False
    ) -> ControlRecord:
        """``fence`` (``roll`` False) or ``roll``: a marker, then one compare-and-set of ``meta/control``."""
        sealing = current.record.current_generation.number
        backoff = self.config.cas_backoff()
        for _ in range(self.config.max_cas_attempts):
            record = current.record
            generation = record.current_generation
            if topic_deleted and generation.end is not None and not record.topic_deleted:
                try:  # sealed by another fence (or a writer finishing one): only the mark is missing
                    meta.replace_control(replace(record, topic_deleted=True), current.version_id)
                except VersionConflict:
                    backoff.wait()
                    current = meta.control()
                    continue
                self.forget(meta.keys)
                return replace(record, topic_deleted=True)
            if generation.end is not None or generation.number != sealing:
                # Opened since by a roll (a fence goes on there) or, for a deleted topic's fence, by any unfence.
                goes_on = topic_deleted or (not roll and generation_numbered(record, sealing).rolled)
                if generation.end is not None or not goes_on:
                    self.forget(meta.keys)
                    return record
                sealing = generation.number
            tail = meta.sequence_tail(generation.number)
            if tail is None or not tail.void:
                marker = FenceMarker(uuid.uuid4().hex, int(self._clock() * 1000), roll=roll)
                key = meta.append_to_sequence(generation.number, marker.encode(), FENCE_DELTAS)
                self._fault(WRITER_AFTER_FENCE_MARKER)
                if key.fences == 1:
                    # The first marker: it went on top of the last valid key (or an empty sequence).
                    last_valid = key.position - 1
                else:  # another fence's or roll's marker came first: a roll finishes what it began
                    last_valid = SequenceSegment(meta, generation).last_valid_position(
                        0 if tail is None else tail.key.position
                    )
                    roll = roll and self._first_marker_rolls(meta, generation)
            else:  # a marker is there already (a fence or roll in flight, or one that died before sealing)
                last_valid = SequenceSegment(meta, generation).last_valid_position()
                roll = roll and self._first_marker_rolls(meta, generation)
            end = generation.base + last_valid
            sealed = rolled_control(record, end) if roll else sealed_control(record, end)
            sealed = replace(sealed, topic_deleted=record.topic_deleted or topic_deleted)
            try:
                meta.replace_control(sealed, current.version_id)
            except VersionConflict:
                backoff.wait()
                current = meta.control()
                continue
            self.remember(meta.keys, sealed)
            return sealed
        raise AppendConflict(
            f"gave up {'rolling' if roll else 'fencing'} {meta.keys.topic}/{meta.keys.partition} after "
            f"{self.config.max_cas_attempts} compare-and-set conflicts"
        )

    def unfence(self, meta: PartitionMetadata, current: VersionedControl) -> ControlRecord:
        """Open a new generation after the sealed one. Idempotent; finishes a fence left half-done first.

        ``UnknownTopic`` for a partition marked as its deleted topic's (``fence``'s ``topic_deleted``).
        """
        backoff = self.config.cas_backoff()
        for _ in range(self.config.max_cas_attempts):
            record = current.record
            refuse_deleted(meta, record)  # read again after every lost compare-and-set: a delete's fence wins
            generation = record.current_generation
            if generation.end is None:
                tail = meta.sequence_tail(generation.number)
                if tail is None or not tail.void:
                    # Already open. The stored counter lags the sequence: report the live one.
                    last = generation.base + (0 if tail is None else tail.key.position)
                    return replace(record, sequence_counter=last + 1)
                self.finish_seal(meta, current)  # a marker without its seal: finish it (a fence: then reopen)
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

    def set_state(
        self, meta: PartitionMetadata, state: LogState, current: VersionedControl, *, topic_deleted: bool = False
    ) -> ControlRecord:
        if state is LogState.FENCED:
            return self.fence(meta, current, topic_deleted=topic_deleted)
        return self.unfence(meta, current)
