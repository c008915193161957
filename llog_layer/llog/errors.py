"""Typed exceptions for every failure a caller can act on.

Each class says whether retrying the same call may succeed (``retriable``).
Callers map these to their own surface: the HTTP layer turns ``LlogError``
subclasses into status codes, Lambda handlers into metrics dimensions.
"""

from __future__ import annotations


class LlogError(Exception):
    """Base class of every error raised by the llog library."""

    retriable: bool = False

    @property
    def error_type(self) -> str:
        """Stable name for APIs and metrics (the class name)."""
        return type(self).__name__


# --- caller errors -----------------------------------------------------------


class InvalidArgument(LlogError, ValueError):
    """An argument is malformed; nothing was read or written."""


class InvalidTopicName(InvalidArgument):
    """A topic name does not match ``[A-Za-z0-9._-]{1,249}`` or is reserved."""


class InvalidPartition(InvalidArgument):
    """A partition is not a non-negative 32-bit integer."""


class ConfigurationError(LlogError):
    """Required configuration is missing or invalid."""


class BatchTooLarge(InvalidArgument):
    """A batch exceeds the limits of the ``bytes-batch-v1`` format."""


# --- topics (llog.protocol.topics) ---------------------------------------------


class UnknownTopic(LlogError):
    """The topic does not exist (never created, or deleted), or is not an explicit topic where one is needed."""

    def __init__(self, topic: str, message: str | None = None) -> None:
        super().__init__(message or f"topic {topic!r} does not exist")
        self.topic = topic


class TopicExists(LlogError):
    """A create named an existing topic with other settings."""


class TopicDeleted(LlogError):
    """The topic was deleted and its data is being reclaimed; the name is free again once GC has done that."""


class InvalidPartitionCount(InvalidArgument):
    """A partition count is out of range, or would shrink a topic (counts only grow)."""


# --- log state ---------------------------------------------------------------


class PartitionNotInitialized(LlogError):
    """The partition has no ``meta/control`` record yet."""

    def __init__(self, topic: str, partition: int) -> None:
        super().__init__(f"partition {topic}/{partition} is not initialized")
        self.topic = topic
        self.partition = partition


class OffsetOutOfRange(LlogError):
    """A requested offset lies outside ``[log_start, high_watermark]``."""

    def __init__(self, topic: str, partition: int, offset: int, log_start: int, high_watermark: int) -> None:
        super().__init__(
            f"offset {offset} of {topic}/{partition} is out of range: "
            f"readable offsets are [{log_start}, {high_watermark}]"
            + (" (the log is empty)" if high_watermark < log_start else "")
        )
        self.topic = topic
        self.partition = partition
        self.offset = offset
        self.log_start = log_start
        self.high_watermark = high_watermark


class LogFenced(LlogError):
    """The partition is fenced: it rejects appends until unfenced."""

    def __init__(self, topic: str, partition: int) -> None:
        super().__init__(f"partition {topic}/{partition} is fenced and rejects appends")
        self.topic = topic
        self.partition = partition


class AppendConflict(LlogError):
    """Offset reservation lost the compare-and-set race too many times."""

    retriable = True


class CommitDeadlineExceeded(LlogError):
    """Too much time passed since the data object was written to still commit it; nothing was committed.

    Garbage collection may delete an unreferenced object once it is older than
    its grace period, so nothing may start referencing an object after a bound.
    """

    retriable = True


class AppendOutcomeUnknown(LlogError):
    """A storage call failed ambiguously; the append may or may not be in the log.

    Never reported as success. Producers that need exactly-once must
    deduplicate on their side (for example by a record key).
    """

    retriable = True


class InconsistentReadState(LlogError):
    """The sparse index has a gap or overlap that should not exist."""

    retriable = True


class RecordsLost(LlogError):
    """Offsets ``first`` .. ``last`` were committed but their records are gone: a rebuild from S3 after Oxia
    lost its data could not recover them (a ``LOST`` index entry, docs/RECOVERY.md "Rebuild from S3").

    Not retriable: reading continues at ``next_offset``.
    """

    def __init__(self, topic: str, partition: int, first: int, last: int) -> None:
        super().__init__(
            f"offsets [{first}, {last}] of {topic}/{partition} were lost (Oxia's data was lost and the rebuild "
            f"from S3 could not recover them); continue at {last + 1}"
        )
        self.topic = topic
        self.partition = partition
        self.first = first
        self.last = last

    @property
    def next_offset(self) -> int:
        return self.last + 1


# --- consumer groups (llog.protocol.groups) ---------------------------------------


class UnknownGroup(LlogError):
    """The consumer group does not exist (never joined, or expired)."""


class UnknownMember(LlogError):
    """The member id is not in the group: it never joined, left, or its session expired.

    Join again (without a member id) to get a new one.
    """


class StaleGeneration(LlogError):
    """The request names an older generation of the group: rejoin to learn the current assignment."""


class NotPartitionOwner(LlogError):
    """The member's assignment in the current generation does not hold the partition."""


# --- data integrity ------------------------------------------------------------


class CorruptData(LlogError):
    """Stored bytes failed validation; no data from them is returned."""


class CorruptBatch(CorruptData):
    """A ``bytes-batch-v1`` body is malformed or fails its checksum."""


class CorruptSharedBlob(CorruptData):
    """An ``LLS1`` shared WAL blob is malformed."""


class CorruptMetadata(CorruptData):
    """An Oxia record does not hold the JSON document its key promises."""


# --- storage -------------------------------------------------------------------


class StorageUnavailable(LlogError):
    """A backing store did not answer in time or refused the call."""

    retriable = True


class OxiaUnavailable(StorageUnavailable):
    """Oxia could not be reached, or a call exceeded its deadline."""


class BlobStoreUnavailable(StorageUnavailable):
    """S3 could not be reached or kept failing after retries."""


class BlobNotFound(LlogError):
    """An S3 object referenced by the log does not exist."""


class SealerUnavailable(StorageUnavailable):
    """The service that seals access keys' secrets (KMS) could not be reached, throttled, or failed."""


# --- access keys (llog.service.keys) --------------------------------------------


class SealingFailed(LlogError):
    """A sealed secret could not be opened: it was altered, or sealed under another key than the one configured
    (``LLOG_KEYS_SEALING_KEY_FILE`` or ``LLOG_KEYS_KMS_KEY_ID`` changed)."""


# --- recovery (llog.protocol.backup, llog.protocol.rebuild, llog.protocol.namespace) ---------


class BackupNotFound(LlogError):
    """No complete backup with that id (or none at all, or none holding the topic) under the root."""


class NamespaceNotEmpty(LlogError):
    """Restore or rebuild found Oxia state it would overwrite; nothing was written."""


class NamespaceMismatch(LlogError):
    """Oxia does not hold the namespace identity S3 holds: Oxia's state was lost or replaced.

    Garbage collection refuses to run (it deletes nothing): against an empty or
    foreign Oxia every shared WAL blob looks unreferenced. ``s3_id`` is the id
    in S3, ``oxia_id`` the one in Oxia (None: none).
    """

    def __init__(self, message: str, *, s3_id: str, oxia_id: str | None) -> None:
        super().__init__(message)
        self.s3_id = s3_id
        self.oxia_id = oxia_id


class VersionConflict(LlogError):
    """A conditional Oxia write found a different version than expected.

    ``ambiguous`` is True when an earlier attempt of the same call failed in
    transit: that attempt may have applied, and this conflict may be our own
    write. Callers that care re-read to find out.
    """

    retriable = True

    def __init__(self, message: str, *, ambiguous: bool = False) -> None:
        super().__init__(message)
        self.ambiguous = ambiguous


class SessionExpired(LlogError):
    """The Oxia session behind an ephemeral record is gone (e.g. after a freeze)."""

    retriable = True


# --- idempotent producers and conditional appends (llog.protocol.producers) ---------


class UnknownProducer(LlogError):
    """The producer id was never issued, or it expired after being idle (``POST /producers`` gets a new one)."""


class ProducerFenced(LlogError):
    """The request's producer epoch is older than the producer's current one: a newer instance took over."""


class OutOfOrderSequence(LlogError):
    """The batch's sequence is not the next one this producer owes the partition; nothing was written.

    A gap (a batch lost in between), a retry too old to be remembered, or a
    remembered sequence range sent with a different number of records or other
    records (their digest differs).
    """


class SequenceInFlight(LlogError):
    """An earlier attempt of this producer on this partition may still commit; retry after a while.

    The earlier attempt's commit deadline has not passed yet: until it has,
    nobody can tell whether it will commit, so nothing is written now.
    """

    retriable = True


class OffsetMismatch(LlogError):
    """A conditional append's ``expected_offset`` is not the partition's next offset; nothing was written."""

    def __init__(self, topic: str, partition: int, expected_offset: int, next_offset: int) -> None:
        super().__init__(f"{topic}/{partition}: expected_offset {expected_offset} is not the next offset {next_offset}")
        self.topic = topic
        self.partition = partition
        self.expected_offset = expected_offset
        self.next_offset = next_offset


class ConditionalAppendUnsupported(InvalidArgument):
    """The partition's append protocol cannot check ``expected_offset`` atomically (sequential partitions)."""
