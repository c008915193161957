"""Reconciliation of a load run (bench/load.py): what was acknowledged against what the log holds.

Pure: no I/O. ``reconcile`` takes what the load generator sent, batch by
batch with each batch's outcome, and the records consumed back from the log,
and checks that

* every acknowledged record is present exactly once, at its acknowledged
  offset and partition, with the bytes that were sent;
* no record of this run is present that was never acknowledged, except
  records of *ambiguous* requests (a timeout, a lost connection, a 5xx, a
  batch reported ``AppendOutcomeUnknown``): those may legitimately have been
  written and are counted, not failed. A record that was never sent, or whose
  request was definitively rejected (a 4xx, a per-partition error other than
  ``AppendOutcomeUnknown``), is *invented*: a failure.

Record values identify their origin: ``llog-load:<run id>:<client>:<seq>:``
then padding to the record size (``make_value``), so a record read back says
which client sent it in which request without storing the values.
"""

from __future__ import annotations

import bisect
import enum
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

MAGIC = b"llog-load:"
PAD = b"."


class Outcome(enum.StrEnum):
    ACKED = "acked"  # the API returned ok with offsets
    AMBIGUOUS = "ambiguous"  # the outcome is unknown: the batch may or may not be in the log
    REJECTED = "rejected"  # the API said, definitively, that the batch was not written


@dataclass(frozen=True, order=True)
class RecordId:
    client: int
    seq: int


def value_prefix(run_id: str, rid: RecordId) -> bytes:
    return MAGIC + f"{run_id}:{rid.client}:{rid.seq}:".encode("ascii")


def make_value(run_id: str, rid: RecordId, size: int) -> bytes:
    """The value of record ``rid``: its identity, padded to ``size`` bytes (never cut: the identity must survive)."""
    prefix = value_prefix(run_id, rid)
    return prefix + PAD * max(0, size - len(prefix))


def parse_record_id(run_id: str, value: bytes) -> RecordId | None:
    """The identity of a record of run ``run_id``; None for any other value (another run's, or not ours).

    Raises ValueError when the value claims to belong to this run but its
    identity is damaged.
    """
    run_prefix = MAGIC + run_id.encode("ascii") + b":"
    if not value.startswith(run_prefix):
        return None
    parts = value[len(run_prefix):].split(b":", 2)
    if len(parts) != 3 or not parts[0].isdigit() or not parts[1].isdigit():
        raise ValueError(f"damaged identity in {value[:80]!r}")
    return RecordId(int(parts[0]), int(parts[1]))


@dataclass(frozen=True)
class SentBatch:
    """``count`` records ``seq = first_seq ..`` of one client sent in one batch to ``partition``."""

    partition: int
    client: int
    first_seq: int
    count: int
    outcome: Outcome
    start_offset: int | None = None  # the first record's offset, for ACKED batches
    error: str | None = None

    def __post_init__(self) -> None:
        if (self.outcome is Outcome.ACKED) != (self.start_offset is not None):
            raise ValueError("an acknowledged batch has a start offset, and only it")

    def offset_of(self, seq: int) -> int:
        assert self.start_offset is not None
        return self.start_offset + seq - self.first_seq


@dataclass(frozen=True)
class ConsumedRecord:
    partition: int
    offset: int
    value: bytes


@dataclass
class ReconcileReport:
    """Counts per category; ``ok`` when nothing failed and every partition was read to its end."""

    acked: int = 0
    found: int = 0  # acknowledged records found at their offset with their bytes
    missing: int = 0
    duplicates: int = 0
    misplaced: int = 0  # found, but at another offset or partition than acknowledged
    altered: int = 0
    invented: int = 0
    ambiguous_present: int = 0
    ambiguous_absent: int = 0
    rejected_absent: int = 0
    foreign: int = 0  # records of other runs (a reused topic)
    consumed: int = 0
    read_errors: list[str] = field(default_factory=list)
    examples: dict[str, list[str]] = field(default_factory=dict)
    max_examples: int = 10

    FAILURES = ("missing", "duplicates", "misplaced", "altered", "invented")

    @property
    def complete(self) -> bool:
        return not self.read_errors

    @property
    def ok(self) -> bool:
        return self.complete and all(getattr(self, name) == 0 for name in self.FAILURES)

    def fail(self, category: str, example: str) -> None:
        setattr(self, category, getattr(self, category) + 1)
        shown = self.examples.setdefault(category, [])
        if len(shown) < self.max_examples:
            shown.append(example)

    def to_json(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "complete": self.complete,
            "acked": self.acked,
            "found": self.found,
            "missing": self.missing,
            "duplicates": self.duplicates,
            "misplaced": self.misplaced,
            "altered": self.altered,
            "invented": self.invented,
            "ambiguous_present": self.ambiguous_present,
            "ambiguous_absent": self.ambiguous_absent,
            "rejected_absent": self.rejected_absent,
            "foreign": self.foreign,
            "consumed": self.consumed,
            "read_errors": list(self.read_errors),
            "examples": {k: list(v) for k, v in self.examples.items() if v},
        }


class _Sent:
    """The sent batches indexed by client and sequence number, with a seen-count per record."""

    def __init__(self, batches: Sequence[SentBatch]) -> None:
        self.batches = sorted(batches, key=lambda b: (b.client, b.first_seq))
        self._keys = [(b.client, b.first_seq) for b in self.batches]
        self.seen = [bytearray(b.count) for b in self.batches]
        for before, after in zip(self.batches, self.batches[1:], strict=False):
            if before.client == after.client and before.first_seq + before.count > after.first_seq:
                raise ValueError(f"client {after.client} sent seq {after.first_seq} twice")

    def find(self, rid: RecordId) -> int | None:
        i = bisect.bisect_right(self._keys, (rid.client, rid.seq)) - 1
        if i < 0:
            return None
        batch = self.batches[i]
        if batch.client != rid.client or not batch.first_seq <= rid.seq < batch.first_seq + batch.count:
            return None
        return i


def _where(partition: int, offset: int) -> str:
    return f"p{partition}@{offset}"


def _check_one(report: ReconcileReport, sent: _Sent, run_id: str, record_size: int, rec: ConsumedRecord) -> None:
    where = _where(rec.partition, rec.offset)
    try:
        rid = parse_record_id(run_id, rec.value)
    except ValueError as exc:
        report.fail("altered", f"{where}: {exc}")
        return
    if rid is None:
        report.foreign += 1
        return
    i = sent.find(rid)
    if i is None:
        report.fail("invented", f"{where}: client {rid.client} seq {rid.seq} was never sent")
        return
    batch = sent.batches[i]
    index = rid.seq - batch.first_seq
    sent.seen[i][index] = min(255, sent.seen[i][index] + 1)
    if sent.seen[i][index] > 1:
        report.fail("duplicates", f"{where}: client {rid.client} seq {rid.seq} read again")
        return
    if rec.value != make_value(run_id, rid, record_size):
        report.fail("altered", f"{where}: client {rid.client} seq {rid.seq} has other bytes than were sent")
        return
    if batch.outcome is Outcome.ACKED:
        expected = _where(batch.partition, batch.offset_of(rid.seq))
        if expected != where:
            report.fail("misplaced", f"{where}: client {rid.client} seq {rid.seq} was acknowledged at {expected}")
        else:
            report.found += 1
    elif batch.outcome is Outcome.AMBIGUOUS:
        report.ambiguous_present += 1
    else:
        report.fail("invented", f"{where}: client {rid.client} seq {rid.seq} was rejected ({batch.error})")


def reconcile(
    batches: Sequence[SentBatch],
    consumed: Iterable[ConsumedRecord],
    *,
    run_id: str,
    record_size: int,
    read_errors: Sequence[str] = (),
    max_examples: int = 10,
) -> ReconcileReport:
    """Check ``consumed`` (every record read back, any order) against ``batches`` (everything sent).

    ``read_errors`` (partitions that could not be read to their end) is read
    after ``consumed`` is exhausted, so a reader may fill it while it streams.
    """
    sent = _Sent(batches)
    report = ReconcileReport(max_examples=max_examples)
    for rec in consumed:
        report.consumed += 1
        _check_one(report, sent, run_id, record_size, rec)
    for batch, seen in zip(sent.batches, sent.seen, strict=True):
        if batch.outcome is Outcome.ACKED:
            report.acked += batch.count
        for index, times in enumerate(seen):
            if times:
                continue
            seq = batch.first_seq + index
            if batch.outcome is Outcome.ACKED:
                report.fail(
                    "missing",
                    f"client {batch.client} seq {seq}, acknowledged at "
                    f"{_where(batch.partition, batch.offset_of(seq))}, was not read back",
                )
            elif batch.outcome is Outcome.AMBIGUOUS:
                report.ambiguous_absent += 1
            else:
                report.rejected_absent += 1
    report.read_errors = list(read_errors)
    return report
