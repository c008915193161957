"""Idempotent producers (docs/IDEMPOTENCE.md): producer ids, and appends that commit each batch once.

A producer gets an id and an epoch (``ProducerRegistry``, ``POST /producers``)
and numbers its records per partition: a batch is ``(producer_id, epoch,
first_sequence, count)``. Each partition keeps, per producer, a small state
record ``{base}/producers/{producer_id}`` (same ``partition_key`` as the
partition, so on its shard): the epoch, the last ``MAX_REMEMBERED_BATCHES``
committed batches with their offsets and the digest of their records
(``codec.records_digest``), and at most one ``in_flight`` claim.

Actions of an idempotent append (``IdempotentAppender.append``), after the
batch's WAL blob PUT began (``LogWriter.append_shared``):

P1 check: read the state. An older epoch is ``ProducerFenced``; a batch whose
   first sequence is remembered returns its offsets (a duplicate: nothing is
   written) if it is the same batch (the same last sequence, and the same
   digest where the remembered batch has one), else is ``OutOfOrderSequence``;
   a claim whose commit deadline has not surely passed is
   ``SequenceInFlight`` (retriable); a sequence that does not follow the last
   remembered one is ``OutOfOrderSequence``. A state that is absent, idle past
   the expiry, of an older epoch, or validated more than
   ``REVALIDATE_AFTER_MS`` ago is checked against the registry
   (``UnknownProducer``, ``ProducerFenced``).
P2 take over: a claim whose commit deadline has passed (``commit_by_ms`` plus
   ``CLAIM_MARGIN_MS``) is taken over: first make any commit request its
   attempt may still send (a process paused between its deadline check and
   its send) fail or be void (``fence.void_late_commits``: CAS, a
   compare-and-set of ``meta/control`` onto itself; sequential, a roll of the
   open generation), then look for its tag from its ``search_from_offset`` on
   (``find_committed``), record what was found, clear it.
P3 claim: CAS the state to name this batch ``in_flight``, with the commit
   deadline of this attempt and a lower bound of the partition's next offset,
   read just before from ``meta/control`` (never a writer's cached generation;
   a void sequential tail does not count).
P4 commit: the partition's protocol commits the batch with its tag
   ``(producer_id, epoch, first, last)`` in the index entry (CAS: in
   ``pending`` first), the sequential entry, never anywhere else.
P5 finalize: CAS the state: the batch joins the remembered ones, ``in_flight``
   is cleared. A definite failure of P4 clears the claim instead (release).

Crash points: ``producer.after_claim`` (P3 done, P4 not: a retry waits for the
deadline, takes over, finds no tag and commits), ``producer.after_commit`` (P4
done, P5 not: a retry waits, takes over, finds the tag and answers with its
offsets as a duplicate).

Invariants:

* E1 A batch of a producer epoch commits at most once per partition: every
  commit happens under a claim (P3 before P4), a claim is only replaced by a
  P5 of the same attempt or by a takeover, and a takeover happens only after
  the claimed attempt's commit deadline, plus a margin for clock skew
  between hosts. The attempt checks its deadline after every read its
  request depends on and before every send (``CommitDeadlineExceeded``); a
  request it sends later anyway (paused between check and send) was read
  before the takeover voided it, so it fails (CAS: the version it names is
  gone) or lands void (sequential: past the roll's marker), and a re-read
  after that meets the passed deadline. The takeover then sees every commit
  the attempt made (a committed batch stays readable, I7), so the answer it
  records is final.
* E2 A committed batch is found again: its tag lies at or after the claim's
  ``search_from_offset`` (read before the claim; offsets only grow, I1), and
  compaction, which drops tags, never compacts an offset at or past the
  ``search_from_offset`` of a claim it cannot resolve (``claims_floor``). A
  claim written after compaction read the claims lies past everything that
  compaction selected before, because its batch commits after it.
* E3 Remembered batches are exact: only P5 and P2 add one, both with offsets
  the commit returned or the index holds, and with the digest of the records
  the claim was made for (P2: the claim's). A duplicate answer gives those
  offsets only to a batch with the same sequences and digest, so never to
  another batch sent under a remembered sequence range (a state stored before
  digests matches by the range alone).
* E4 Without a producer id nothing here runs: appends cost what they cost
  without this module.

A producer has at most one batch in flight per partition (a second one gets
``SequenceInFlight`` until the first is finalized); a client sends the next
batch to a partition after the previous one's answer.
"""

from __future__ import annotations

import contextlib
import logging
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass

from llog.config import WriterConfig
from llog.errors import (
    AppendConflict,
    AppendOutcomeUnknown,
    InvalidArgument,
    LlogError,
    OutOfOrderSequence,
    ProducerFenced,
    SequenceInFlight,
    UnknownProducer,
    VersionConflict,
)
from llog.format.keys import DEFAULT_ROOT_PREFIX, MAX_SEQUENCE, new_object_id, validate_producer_id
from llog.format.kv.index import ProducerTag
from llog.format.kv.producers import InFlightClaim, ProducerBatch, ProducerKeys, ProducerRecord, ProducerState
from llog.protocol import append_cas, fence
from llog.protocol.append_sequential import SequentialAppender
from llog.protocol.faults import PRODUCER_AFTER_CLAIM, PRODUCER_AFTER_COMMIT, FaultHook
from llog.protocol.index import PartitionIndex
from llog.protocol.metadata import PartitionMetadata
from llog.store.oxia import CREATE_ONLY, OxiaStore

log = logging.getLogger(__name__)

MAX_REMEMBERED_BATCHES = 5  # Kafka's max.in.flight.requests.per.connection bound
CLAIM_MARGIN_MS = 60_000
"""How long after a claim's commit deadline it is taken over: covers clock skew between hosts and a commit
request sent just before its deadline that Oxia retries (``LLOG_OXIA_MAX_RETRIES`` x the request timeout)."""
MAX_EPOCH = 2**31 - 1
REVALIDATE_AFTER_MS = 1_000
"""A partition's state vouches for its epoch this long after the registry last confirmed it: an epoch bump
fences the older epoch in every partition within about this long (at once where the newer epoch writes)."""


# --- producer ids -------------------------------------------------------------------------------


@dataclass(frozen=True)
class ProducerIdentity:
    producer_id: str
    epoch: int


class ProducerRegistry:
    """Issued producer ids and their current epochs: ``{root}/__catalog/producers/{producer_id}``."""

    def __init__(
        self,
        oxia: OxiaStore,
        *,
        root: str = DEFAULT_ROOT_PREFIX,
        expiry_ms: int,
        clock: Callable[[], float] = time.time,
        config: WriterConfig | None = None,
    ) -> None:
        self.oxia = oxia
        self.keys = ProducerKeys(root)
        self.expiry_ms = expiry_ms
        self._clock = clock
        self._config = config or WriterConfig()

    def _now_ms(self) -> int:
        return int(self._clock() * 1000)

    def _read(self, producer_id: str) -> tuple[ProducerRecord, int] | None:
        found = self.oxia.get(self.keys.producer(producer_id), partition_key=self.keys.partition_key)
        return None if found is None else (ProducerRecord.decode(found.value), found.version_id)

    def _write(self, producer_id: str, record: ProducerRecord, expected_version_id: int) -> None:
        self.oxia.put(
            self.keys.producer(producer_id),
            record.encode(),
            partition_key=self.keys.partition_key,
            expected_version_id=expected_version_id,
        )

    def _expired(self, record: ProducerRecord, now_ms: int) -> bool:
        return now_ms - record.touched_at_ms > self.expiry_ms

    def expire_idle(self, now_ms: int | None = None) -> int:
        """Delete the ids idle past the expiry (they already answer ``UnknownProducer``); how many went.

        Ids are never reused, so a deleted one stays unknown. Each delete names
        the version it judged: an id used meanwhile is kept.
        """
        now = self._now_ms() if now_ms is None else now_ms
        deleted = 0
        for found in self.oxia.range_scan(self.keys.prefix, self.keys.scan_end, partition_key=self.keys.partition_key):
            if not self._expired(ProducerRecord.decode(found.value), now):
                continue
            with contextlib.suppress(VersionConflict):
                deleted += self.oxia.delete(
                    found.key, partition_key=self.keys.partition_key, expected_version_id=found.version_id
                )
        return deleted

    def issue(self) -> ProducerIdentity:
        """A new producer id (a UUIDv7) at epoch 0."""
        now = self._now_ms()
        producer_id = new_object_id(now)
        self._write(producer_id, ProducerRecord(0, now, now), CREATE_ONLY)
        return ProducerIdentity(producer_id, 0)

    def bump(self, producer_id: str) -> ProducerIdentity:
        """The same id with its epoch raised by one: batches of older epochs are fenced from now on."""
        validate_producer_id(producer_id)
        backoff = self._config.cas_backoff()
        for _ in range(self._config.max_cas_attempts):
            now = self._now_ms()
            found = self._read(producer_id)
            if found is None or self._expired(found[0], now):
                raise UnknownProducer(f"producer {producer_id} was never issued or has expired")
            record, version = found
            if record.epoch >= MAX_EPOCH:
                raise InvalidArgument(f"producer {producer_id} has no epochs left; ask for a new producer id")
            bumped = ProducerRecord(record.epoch + 1, record.created_at_ms, now)
            try:
                self._write(producer_id, bumped, version)
            except VersionConflict:
                backoff.wait()
                continue
            return ProducerIdentity(producer_id, bumped.epoch)
        raise AppendConflict(f"gave up bumping the epoch of producer {producer_id} after contention")

    def validate(self, producer_id: str, epoch: int, now_ms: int) -> None:
        """Check that ``epoch`` is the producer's current epoch, and mark the producer used.

        The registry record is rewritten only when its last use is older than
        half the expiry, so an active producer never expires and costs a write
        that rarely.
        """
        found = self._read(producer_id)
        if found is None or self._expired(found[0], now_ms):
            raise UnknownProducer(f"producer {producer_id} was never issued or has expired")
        record, version = found
        if epoch < record.epoch:
            raise ProducerFenced(f"producer {producer_id} epoch {epoch} is fenced by epoch {record.epoch}")
        if epoch > record.epoch:
            raise UnknownProducer(f"producer {producer_id} has no epoch {epoch} (its current epoch is {record.epoch})")
        if now_ms - record.touched_at_ms > self.expiry_ms // 2:
            # A lost CAS means someone else touched or bumped it; the next validation looks again.
            with contextlib.suppress(VersionConflict):
                self._write(producer_id, ProducerRecord(record.epoch, record.created_at_ms, now_ms), version)


# --- per-partition state ---------------------------------------------------------------------


@dataclass(frozen=True)
class IdempotentBatch:
    """One partition's batch of an idempotent produce request."""

    producer_id: str
    epoch: int
    first_sequence: int
    count: int
    digest: int | None = None  # of its records (codec.records_digest): a retry has the same one

    def __post_init__(self) -> None:
        validate_producer_id(self.producer_id)
        if isinstance(self.epoch, bool) or not isinstance(self.epoch, int) or not 0 <= self.epoch <= MAX_EPOCH:
            raise InvalidArgument(f"invalid producer_epoch {self.epoch!r}: expected an integer in [0, {MAX_EPOCH}]")
        seq = self.first_sequence
        if isinstance(seq, bool) or not isinstance(seq, int) or not 0 <= seq <= MAX_SEQUENCE - self.count:
            raise InvalidArgument(f"invalid sequence {seq!r}: expected a non-negative integer")

    @property
    def last_sequence(self) -> int:
        return self.first_sequence + self.count - 1

    @property
    def tag(self) -> ProducerTag:
        return ProducerTag(self.producer_id, self.epoch, self.first_sequence, self.last_sequence)


@dataclass(frozen=True)
class VersionedState:
    state: ProducerState | None
    version_id: int | None  # None: no record (a claim creates it)


@dataclass(frozen=True)
class IdempotentOutcome:
    start_offset: int
    end_offset: int
    index_key: str | None  # None for a duplicate: the original's key is not remembered
    duplicate: bool = False


Commit = Callable[[ProducerTag], tuple[int, int, str]]
"""Commits the batch with its tag by the partition's protocol: ``(start, end, index_key)``."""


def read_state(meta: PartitionMetadata, producer_id: str) -> VersionedState:
    found = meta.oxia.get(meta.keys.producer_state(producer_id), partition_key=meta.keys.partition_key)
    if found is None:
        return VersionedState(None, None)
    return VersionedState(ProducerState.decode(found.value), found.version_id)


def _write_state(meta: PartitionMetadata, producer_id: str, state: ProducerState, version_id: int | None) -> int:
    return meta.oxia.put(
        meta.keys.producer_state(producer_id),
        state.encode(),
        partition_key=meta.keys.partition_key,
        expected_version_id=CREATE_ONLY if version_id is None else version_id,
    )


def remembered(batches: tuple[ProducerBatch, ...], batch: ProducerBatch) -> tuple[ProducerBatch, ...]:
    """``batches`` with ``batch`` added, the oldest dropped beyond ``MAX_REMEMBERED_BATCHES``."""
    return (*batches, batch)[-MAX_REMEMBERED_BATCHES:]


def _check_same_batch(meta: PartitionMetadata, producer_id: str, done: ProducerBatch, batch: IdempotentBatch) -> None:
    """A remembered batch ``done`` and ``batch`` start at the same sequence: raise ``OutOfOrderSequence`` unless
    ``batch`` is a retry of it (the same range, and the same records where both digests are known: a state
    stored before digests matches by the range alone)."""
    where = f"{meta.keys.topic}/{meta.keys.partition}"
    if done.last_sequence != batch.last_sequence:
        raise OutOfOrderSequence(
            f"producer {producer_id} sent sequences {done.first_sequence}..{done.last_sequence} to {where} before; "
            f"this retry holds {batch.first_sequence}..{batch.last_sequence}"
        )
    if done.digest is not None and batch.digest is not None and done.digest != batch.digest:
        raise OutOfOrderSequence(
            f"producer {producer_id} sent sequences {done.first_sequence}..{done.last_sequence} to {where} before "
            f"with other records (digest {done.digest:#010x}, this batch {batch.digest:#010x}): a batch is retried "
            "with the records of its first attempt, and a new batch takes the next sequence"
        )


def claim_expired(claim: InFlightClaim, now_ms: int) -> bool:
    """True once the claimed attempt can surely no longer commit (E1)."""
    return now_ms > claim.commit_by_ms + CLAIM_MARGIN_MS


def find_committed(
    meta: PartitionMetadata, tag: ProducerTag, from_offset: int, digest: int | None
) -> ProducerBatch | None:
    """The committed batch carrying ``tag`` at or after ``from_offset``, if there is one (P2), remembered
    with ``digest`` (the claim's: the tag does not carry it).

    A CAS partition's pending append is materialized first, so the scan of the
    index sees it; void sequential entries (past a fence marker) are never returned.
    """
    append_cas.recover_pending(meta)
    for batch in PartitionIndex.load(meta).iter(from_offset):
        if batch.entry.producer == tag:
            return ProducerBatch(tag.first_sequence, tag.last_sequence, batch.start_offset, batch.end_offset, digest)
    return None


def take_over(
    meta: PartitionMetadata,
    producer_id: str,
    state: ProducerState,
    version_id: int | None,
    sequential: SequentialAppender,
) -> bool:
    """Resolve ``state``'s expired claim (P2): remember its batch if it committed, clear it.

    First every commit request the claimed attempt may still send late (its
    process paused past every timeout) is made to fail or be void
    (``fence.void_late_commits``), so what the search finds is final.
    ``sequential`` rolls a sequential partition's generation. False when the
    CAS (from ``version_id``) lost: someone else resolved the claim or changed
    the state since; the caller reads it again.
    """
    claim = state.in_flight
    if claim is None:
        return True
    fence.void_late_commits(meta, config=sequential.config, sequential=sequential)
    tag = ProducerTag(producer_id, state.epoch, claim.first_sequence, claim.last_sequence)
    found = find_committed(meta, tag, claim.search_from_offset, claim.digest)
    resolved = state.with_changes(
        in_flight=None, batches=state.batches if found is None else remembered(state.batches, found)
    )
    try:
        _write_state(meta, producer_id, resolved, version_id)
    except VersionConflict:
        return False
    log.info("producer %s: took over claim %s on %s (%s)", producer_id, claim.claim_id, meta.keys.base,
             "committed" if found else "not committed")  # fmt: skip
    return True


def claims_floor(meta: PartitionMetadata, now_ms: int, expiry_ms: int, sequential: SequentialAppender) -> int | None:
    """The lowest ``search_from_offset`` of a claim that may still need its tag; None if there is none (E2).

    Compaction calls it after selecting its run and compacts nothing at or past
    it. Expired claims are taken over here first (``take_over``; ``sequential``
    rolls a sequential partition), so an abandoned claim never holds
    compaction back for longer than its deadline and margin. A state
    without a claim that was not written for ``expiry_ms`` is deleted (its
    producer has expired, or starts the partition afresh: P1), on the version
    read, so the partition's producer states stay bounded by its active producers.
    """
    floor: int | None = None
    prefix = meta.keys.producer_states_prefix
    records = meta.oxia.range_scan(prefix, meta.keys.producer_states_scan_end, partition_key=meta.keys.partition_key)
    for record in records:
        producer_id = record.key[len(prefix) :]
        current = VersionedState(ProducerState.decode(record.value), record.version_id)
        claim = current.state.in_flight if current.state is not None else None
        if current.state is not None and claim is None and now_ms - current.state.touched_at_ms > expiry_ms:
            with contextlib.suppress(VersionConflict):
                meta.oxia.delete(
                    record.key, partition_key=meta.keys.partition_key, expected_version_id=record.version_id
                )
            continue
        if current.state is not None and claim is not None and claim_expired(claim, now_ms):
            if take_over(meta, producer_id, current.state, current.version_id, sequential):
                continue
            current = read_state(meta, producer_id)
        claim = current.state.in_flight if current.state is not None else None
        if claim is not None:
            floor = claim.search_from_offset if floor is None else min(floor, claim.search_from_offset)
    return floor


class IdempotentAppender:
    """P1-P5 for one writer; safe to share between threads."""

    def __init__(
        self,
        registry: ProducerRegistry,
        config: WriterConfig,
        sequential: SequentialAppender,
        *,
        clock: Callable[[], float] = time.time,
        fault_hook: FaultHook | None = None,
    ) -> None:
        self.registry = registry
        self.config = config
        self._sequential = sequential  # the writer's: a takeover's roll (P2) updates its cache
        self._clock = clock
        self._fault_hook = fault_hook

    def _now_ms(self) -> int:
        return int(self._clock() * 1000)

    def _fault(self, point: str) -> None:
        if self._fault_hook is not None:
            self._fault_hook(point)

    def append(
        self,
        meta: PartitionMetadata,
        batch: IdempotentBatch,
        *,
        commit_by_ms: int,
        next_offset: Callable[[], int],
        commit: Commit,
    ) -> IdempotentOutcome:
        """Commit ``batch`` once (P1-P5). ``commit_by_ms``: wall-clock time of this attempt's commit deadline;
        ``next_offset``: reads a lower bound of the partition's next offset."""
        pid = batch.producer_id
        current = read_state(meta, pid)
        for _ in range(self.config.max_cas_attempts):
            now = self._now_ms()
            state = current.state
            if state is not None and now - state.touched_at_ms > self.config.producer_expiry_ms:
                state = None  # idle past the expiry: forgotten (its claim, if any, expired long ago)
            if state is not None and batch.epoch < state.epoch:
                raise ProducerFenced(f"producer {pid} epoch {batch.epoch} is fenced by epoch {state.epoch}")
            if state is not None and batch.epoch == state.epoch:
                for done in state.batches:
                    if done.first_sequence == batch.first_sequence:
                        _check_same_batch(meta, pid, done, batch)
                        return IdempotentOutcome(done.start_offset, done.end_offset, None, duplicate=True)
            if state is not None and state.in_flight is not None:
                if not claim_expired(state.in_flight, now):
                    raise SequenceInFlight(
                        f"an earlier attempt of producer {pid} (sequences {state.in_flight.first_sequence}.."
                        f"{state.in_flight.last_sequence}) on {meta.keys.topic}/{meta.keys.partition} may still "
                        "commit; retry later"
                    )
                take_over(meta, pid, state, current.version_id, self._sequential)
                current = read_state(meta, pid)  # resolved by us or by someone else: look again
                continue
            validated_at = self._validate(batch, state, now)
            base = state if state is not None and state.epoch == batch.epoch else ProducerState(batch.epoch)
            if base.batches and batch.first_sequence != base.batches[-1].last_sequence + 1:
                raise OutOfOrderSequence(
                    f"producer {pid} owes {meta.keys.topic}/{meta.keys.partition} sequence "
                    f"{base.batches[-1].last_sequence + 1}, not {batch.first_sequence}"
                )
            claim = InFlightClaim(
                uuid.uuid4().hex, batch.first_sequence, batch.last_sequence, now, commit_by_ms, next_offset(),
                batch.digest,
            )  # fmt: skip
            claimed = base.with_changes(in_flight=claim, validated_at_ms=validated_at, touched_at_ms=now)
            try:
                version = _write_state(meta, pid, claimed, current.version_id)
            except VersionConflict as conflict:
                current = read_state(meta, pid)
                if not (conflict.ambiguous and current.state is not None and current.state.in_flight == claim):
                    continue
                version = current.version_id or 0  # the record exists: it holds our claim
            return self._commit_claimed(meta, batch, VersionedState(claimed, version), commit)
        raise AppendConflict(
            f"gave up claiming producer {pid}'s batch on {meta.keys.topic}/{meta.keys.partition} after contention"
        )

    def _validate(self, batch: IdempotentBatch, state: ProducerState | None, now_ms: int) -> int:
        """When the registry last confirmed the epoch (P1): now, unless the state's confirmation is fresh."""
        fresh = state is not None and 0 <= now_ms - state.validated_at_ms <= REVALIDATE_AFTER_MS
        if state is not None and state.epoch == batch.epoch and fresh:
            return state.validated_at_ms
        self.registry.validate(batch.producer_id, batch.epoch, now_ms)
        return now_ms

    def _commit_claimed(
        self, meta: PartitionMetadata, batch: IdempotentBatch, claimed: VersionedState, commit: Commit
    ) -> IdempotentOutcome:
        self._fault(PRODUCER_AFTER_CLAIM)
        try:
            start, end, index_key = commit(batch.tag)
        except AppendOutcomeUnknown:
            raise  # the claim stays: a retry takes it over once the deadline has passed
        except LlogError:
            self._release(meta, batch.producer_id, claimed)  # nothing was committed
            raise
        self._fault(PRODUCER_AFTER_COMMIT)
        committed = ProducerBatch(batch.first_sequence, batch.last_sequence, start, end, batch.digest)
        self._finalize(meta, batch, claimed, committed)
        return IdempotentOutcome(start, end, index_key)

    def _resolve_claim(
        self, meta: PartitionMetadata, producer_id: str, claimed: VersionedState, found: ProducerBatch | None
    ) -> None:
        """CAS the state from our claim to resolved (``found`` remembered, or nothing); best effort."""
        current = claimed
        mine = claimed.state.in_flight if claimed.state is not None else None
        for _ in range(self.config.max_cas_attempts):
            state = current.state
            if state is None or mine is None or state.in_flight != mine:
                return  # taken over (only after our deadline; it found what we committed)
            batches = state.batches if found is None else remembered(state.batches, found)
            resolved = state.with_changes(in_flight=None, batches=batches, touched_at_ms=self._now_ms())
            try:
                _write_state(meta, producer_id, resolved, current.version_id)
                return
            except VersionConflict:
                current = read_state(meta, producer_id)
            except LlogError as exc:
                log.warning("producer %s: could not resolve claim %s: %s", producer_id, mine.claim_id, exc)
                return

    def _finalize(
        self, meta: PartitionMetadata, batch: IdempotentBatch, claimed: VersionedState, committed: ProducerBatch
    ) -> None:
        """P5. Never fails the append: it committed; a claim left behind is taken over later (E1)."""
        try:
            self._resolve_claim(meta, batch.producer_id, claimed, committed)
        except LlogError as exc:
            log.warning("producer %s: batch committed, state not finalized: %s", batch.producer_id, exc)

    def _release(self, meta: PartitionMetadata, producer_id: str, claimed: VersionedState) -> None:
        try:
            self._resolve_claim(meta, producer_id, claimed, None)
        except LlogError as exc:
            log.warning("producer %s: could not release a claim: %s", producer_id, exc)
