"""The group consumer: joins a consumer group, reads its partitions from the committed offsets, commits.

The first ``poll`` joins the group (``POST /groups/{group}/join``) and a background thread heartbeats
every ``heartbeat_interval_ms`` the server asks for. When a heartbeat says the group rebalanced (or
the member is unknown, its lease having expired), the next ``poll`` joins again: ``on_revoke`` gets
the partitions the member lost and ``on_assign`` the ones it gained (the assignment is sticky, so
usually few). A gained partition is read from its committed offset (``GET /groups/{group}``); without
one, from ``auto_offset_reset``: ``"earliest"`` (the log start) or ``"latest"`` (the tail). A
committed offset below the log start (retention removed those records) reads from the log start, and
a range whose records were lost (``RecordsLost``: Oxia lost its data and a rebuild could not recover
them) is skipped with a warning.

``poll(timeout)`` is one long-poll ``POST /consume`` over the assigned partitions (at most 100 per
request: the server's limit; more are read in turns). A retriable failure (API Gateway's 429, a 503,
no answer) is retried within the poll's timeout after a jittered exponential backoff; ``poll`` raises
only non-retriable errors, and whatever ``on_assign`` or ``on_revoke`` raised (retriable or not: the
application's, so never retried as a failed request; the callback is not run again for those
partitions). ``commit()`` commits, synchronously, the
position after the last record ``poll`` returned of every assigned partition; with
``enable_auto_commit`` (the default) ``poll`` does so every ``auto_commit_interval_ms`` and ``close``
once more. Offsets are committed after the records were returned, so a record is processed at least
once; exactly once when the application commits after processing (``enable_auto_commit=False``,
``commit()`` after each batch) and nothing else fails. Progress on a partition that was reassigned
before it was committed is read again by its next owner (commits of a stale generation are refused):
``on_revoke`` runs after the join, with the revoked partitions already out of the assignment, so a
``commit()`` there (as Kafka users write it) commits the partitions kept, under the new generation.

A commit or consume refused because a topic does not exist (``UnknownTopic``: deleted) revokes that
topic's partitions (``on_revoke``), commits the others' positions and rejoins, as a Kafka consumer
does on UNKNOWN_TOPIC_OR_PARTITION; a join refused for a subscribed topic that does not exist is sent
again without it, and with none left ``poll`` returns nothing and joins again after a heartbeat
interval (docs/GROUPS.md, "Limits and known gaps").
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from llog_client.auth import Auth
from llog_client.errors import GroupMembershipError, LlogClientError, NotFoundError, error_from
from llog_client.transport import Transport, backoff, path
from llog_client.wire import decode_bytes

logger = logging.getLogger("llog_client.consumer")

MAX_CONSUME_WAIT_MS = 20_000  # the server's LLOG_CONSUME_MAX_WAIT_MS default
MAX_REQUEST_PARTITIONS = 100
FIRST_OFFSET = 1

TopicPartition = tuple[str, int]
Rebalance = Callable[[list[TopicPartition]], None]


@dataclass(frozen=True)
class Record:
    """One record as read: where it is, when it was appended, its key, value and headers (bytes)."""

    topic: str
    partition: int
    offset: int
    timestamp_ms: int
    key: bytes | None
    value: bytes
    headers: dict[str, bytes] = field(default_factory=dict)


@dataclass
class _Membership:
    member_id: str | None = None
    generation: int = -1
    heartbeat_interval_s: float = 3.0
    rejoin: threading.Event = field(default_factory=threading.Event)


class Consumer:
    """Reads ``topics`` as a member of ``group``; see the module docstring for offsets and rebalances."""

    def __init__(
        self,
        url: str | None,
        group: str,
        topics: Sequence[str],
        auth: Auth | None = None,
        *,
        enable_auto_commit: bool = True,
        auto_commit_interval_ms: float = 5_000,
        auto_offset_reset: Literal["earliest", "latest"] = "earliest",
        on_assign: Rebalance | None = None,
        on_revoke: Rebalance | None = None,
        session_timeout_ms: int = 10_000,
        max_bytes: int | None = None,
        partition_max_bytes: int | None = None,
        request_timeout_ms: float = 30_000,
        retry_backoff_ms: float = 100,
        retry_backoff_max_ms: float = 1_000,
    ) -> None:
        if auto_offset_reset not in ("earliest", "latest"):
            raise ValueError(f'auto_offset_reset must be "earliest" or "latest", got {auto_offset_reset!r}')
        if not topics:
            raise ValueError("a consumer needs at least one topic")
        self.transport = Transport(url, auth, read_timeout_s=request_timeout_ms / 1000)
        self.group = group
        self.topics = list(dict.fromkeys(topics))
        self.enable_auto_commit = enable_auto_commit
        self.auto_commit_interval_s = auto_commit_interval_ms / 1000
        self.auto_offset_reset = auto_offset_reset
        self.on_assign = on_assign
        self.on_revoke = on_revoke
        self.session_timeout_ms = session_timeout_ms
        self.max_bytes = max_bytes
        self.partition_max_bytes = partition_max_bytes
        self.retry_backoff_s = retry_backoff_ms / 1000
        self.retry_backoff_max_s = retry_backoff_max_ms / 1000
        self._failures = 0  # retriable failures in a row (poll's backoff)
        self._retry_at = 0.0  # poll sends nothing before this (time.monotonic())
        self._membership = _Membership()
        self._lock = threading.Lock()
        self._assignment: list[TopicPartition] = []
        self._positions: dict[TopicPartition, int] = {}
        self._committed: dict[TopicPartition, int] = {}
        self._next_window = 0
        self._last_commit = time.monotonic()
        self._join_again_at: float | None = None  # every subscribed topic was gone at the last join: try again then
        self._in_callback = False  # on_revoke or on_assign is running
        self._callback_error: BaseException | None = None  # what on_revoke or on_assign raised last
        self._closed = threading.Event()
        self._heartbeat: threading.Thread | None = None

    # -- the application's side --

    @property
    def assignment(self) -> list[TopicPartition]:
        """The partitions this member reads now (empty before the first ``poll``)."""
        return list(self._assignment)

    def position(self, topic: str, partition: int) -> int:
        """The offset the next ``poll`` reads from in an assigned partition."""
        return self._positions[(topic, partition)]

    def poll(self, timeout: float = 1.0) -> list[Record]:
        """Records of the assigned partitions, waiting up to ``timeout`` seconds for the first one.

        A retriable failure (API Gateway's 429, a 503, no answer) is retried within ``timeout`` after a
        backoff (``retry_backoff_ms`` doubling up to ``retry_backoff_max_ms``, ±20% jitter, kept across
        polls until a request succeeds); a poll whose time ran out first returns nothing.
        """
        if self._closed.is_set():
            raise RuntimeError("the consumer is closed")
        deadline = time.monotonic() + timeout
        while True:
            if self._closed.wait(max(0.0, min(self._retry_at, deadline) - time.monotonic())):
                return []
            if time.monotonic() < self._retry_at:  # the next attempt is due after this poll's timeout
                return []
            try:
                records = self._poll_once(deadline)
            except LlogClientError as exc:
                if not exc.retriable or self._raised_by_callback(exc):
                    raise
                self._failures += 1
                delay = backoff(self._failures, self.retry_backoff_s, self.retry_backoff_max_s)
                self._retry_at = time.monotonic() + delay
                logger.warning("group %s: %s; retrying in %.0f ms", self.group, exc, delay * 1000)
                continue
            self._failures = 0
            return records

    def _poll_once(self, deadline: float) -> list[Record]:
        if self._join_again_at is not None:  # no subscribed topic existed at the last join
            due = time.monotonic() >= self._join_again_at
        else:
            due = self._membership.member_id is None or self._membership.rejoin.is_set()
        if due:
            self._join()
        if self.enable_auto_commit and time.monotonic() - self._last_commit >= self.auto_commit_interval_s:
            self._commit_quietly()
        if not self._assignment:
            self._membership.rejoin.wait(max(0.0, deadline - time.monotonic()))
            return []
        return self._fetch(max(0.0, deadline - time.monotonic()))

    def __iter__(self) -> Iterator[Record]:
        """Every record, as it arrives, until the consumer is closed."""
        while not self._closed.is_set():
            yield from self.poll(1.0)

    def commit(self) -> None:
        """Commit the positions of the assigned partitions (what ``poll`` returned).

        If the group rebalanced since the last poll (the commit is refused as stale), the consumer
        joins again at once and commits the partitions it kept; the progress on partitions it lost
        is read again by their new owner. Raises :class:`GroupMembershipError` if that is refused too.
        In ``on_revoke`` (as Kafka users write it) it commits the partitions the member keeps, under
        the generation just joined: the revoked ones already belong to their new owner, whose
        offsets the server does not let this member overwrite. A commit refused there raises (the
        next ``poll`` joins again) rather than join from inside the rebalance.
        """
        try:
            self._commit_positions()
        except GroupMembershipError as exc:
            if self._in_callback or self._raised_by_callback(exc):
                raise
            logger.info("group %s: %s; rejoining to commit what this member keeps", self.group, exc)
            self._join()
            self._commit_positions()

    def _commit_positions(self) -> None:
        committing = {
            tp: self._positions[tp]
            for tp in self._assignment
            if tp in self._positions and self._committed.get(tp) != self._positions[tp]
        }
        offsets = [
            {"topic": topic, "partition": partition, "offset": o} for (topic, partition), o in committing.items()
        ]
        self._last_commit = time.monotonic()
        if not offsets or self._membership.member_id is None:
            return
        body = {"member_id": self._membership.member_id, "generation": self._membership.generation, "offsets": offsets}
        try:
            self.transport.request("POST", path("groups", self.group, "commit"), body)
        except GroupMembershipError:
            self._membership.rejoin.set()
            raise
        except NotFoundError as exc:
            if exc.error_type != "UnknownTopic" or exc.topic not in {topic for topic, _ in committing}:
                raise
            self._topic_gone(exc.topic, exc)
            self._commit_positions()  # the other topics' positions, without it
            return
        self._committed.update(committing)

    def seek(self, topic: str, partition: int, offset: int) -> None:
        """Read an assigned partition from ``offset`` on (offsets start at 1)."""
        if (topic, partition) not in self._assignment:
            raise ValueError(f"{topic}/{partition} is not assigned to this consumer: {self._assignment}")
        if offset < FIRST_OFFSET:
            raise ValueError(f"offsets start at {FIRST_OFFSET}, got {offset}")
        self._positions[(topic, partition)] = offset

    def offsets_for_times(self, times: Mapping[TopicPartition, int | str]) -> dict[TopicPartition, int | None]:
        """Kafka's ``offsetsForTimes`` (``POST /offsets``): per partition, the first offset whose record
        timestamp is at or after the time (ms since the epoch), or ``"earliest"`` / ``"latest"``; None
        where no record is that late. Any partition, assigned or not."""
        items = [{"topic": t, "partition": p, "timestamp_ms": ts} for (t, p), ts in times.items()]
        found: dict[TopicPartition, int | None] = {}
        for start in range(0, len(items), MAX_REQUEST_PARTITIONS):
            _, answer = self.transport.request(
                "POST", "/offsets", {"topic_partitions": items[start : start + MAX_REQUEST_PARTITIONS]}
            )
            for result in answer["results"]:
                tp = (str(result["topic"]), int(result["partition"]))
                if not result.get("ok"):
                    raise error_from(result)
                found[tp] = None if result["offset"] is None else int(result["offset"])
        return found

    def seek_to_time(self, timestamp_ms: int, partitions: Sequence[TopicPartition] | None = None) -> None:
        """Read ``partitions`` (default: every assigned one) from the first record at or after
        ``timestamp_ms``; a partition with no record that late is read from its tail."""
        chosen = self.assignment if partitions is None else list(partitions)
        found = self.offsets_for_times({tp: timestamp_ms for tp in chosen})
        tails = self.offsets_for_times({tp: "latest" for tp, offset in found.items() if offset is None})
        for tp in chosen:
            self.seek(*tp, found[tp] or tails[tp] or FIRST_OFFSET)  # "latest" always has an offset

    def close(self) -> None:
        """Commit (with auto-commit), leave the group and stop heartbeating."""
        if self._closed.is_set():
            return
        self._closed.set()
        if self._heartbeat is not None:
            self._heartbeat.join()
        member_id = self._membership.member_id
        try:
            if member_id is not None:
                if self.enable_auto_commit:
                    self._commit_quietly()
                self.transport.request("POST", path("groups", self.group, "leave"), {"member_id": member_id})
        except LlogClientError as exc:
            logger.warning("leaving group %s: %s", self.group, exc)
        finally:
            self.transport.close()

    def __enter__(self) -> Consumer:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # -- membership --

    def _join(self) -> None:
        membership = self._membership
        if self.enable_auto_commit and membership.member_id is not None:
            self._commit_quietly()  # refused once the generation moved on; partitions kept are committed below
        membership.rejoin.clear()
        try:
            answer = self._join_answer()
            if answer is None:
                return
            with self._lock:  # a join that fails below is sent again as this member
                membership.member_id = str(answer["member_id"])
            assigned = sorted(
                (str(entry["topic"]), int(partition))
                for entry in answer["assignments"]
                for partition in entry["partitions"]
            )
            gained = [tp for tp in assigned if tp not in self._positions]
            starts = self._start_offsets(gained)
        except BaseException:
            membership.rejoin.set()  # nothing changed here yet: the next poll joins again
            raise
        with self._lock:
            membership.generation = int(answer["generation"])
            membership.heartbeat_interval_s = max(0.1, int(answer.get("heartbeat_interval_ms", 3000)) / 1000)
        self._revoke([tp for tp in self._assignment if tp not in assigned])
        self._assignment = assigned
        self._positions.update(starts)
        if self.enable_auto_commit:
            self._commit_quietly()
        if gained and self.on_assign is not None:
            self._callback(self.on_assign, gained)
        if self._heartbeat is None:
            self._heartbeat = threading.Thread(target=self._heartbeat_loop, name="llog-consumer-heartbeat", daemon=True)
            self._heartbeat.start()

    def _join_answer(self) -> dict[str, Any] | None:
        """The join's answer for the subscribed topics that exist; None (their partitions revoked) if none does."""
        topics = list(self.topics)
        while True:
            try:
                answer = self._join_request(topics)
                self._join_again_at = None
                return answer
            except NotFoundError as exc:
                # A subscribed topic that does not exist (deleted): join without it, as a Kafka consumer's
                # subscription leaves out a topic its metadata does not know; the next join asks for it again.
                if exc.error_type != "UnknownTopic" or exc.topic not in topics:
                    raise
                logger.warning("group %s: subscribed topic %r does not exist (%s); joining without it",
                               self.group, exc.topic, exc)  # fmt: skip
                topics.remove(exc.topic)
                if not topics:  # nothing to read: no partition, and another try after a heartbeat interval
                    self._revoke(self._assignment)
                    self._join_again_at = time.monotonic() + self._membership.heartbeat_interval_s
                    return None

    def _join_request(self, topics: list[str]) -> dict[str, Any]:
        """``POST .../join`` for ``topics``, as this member (as a new one once its lease has expired)."""
        body: dict[str, Any] = {"topics": topics, "session_timeout_ms": self.session_timeout_ms}
        if self._membership.member_id is not None:
            body["member_id"] = self._membership.member_id
        try:
            _, answer = self.transport.request("POST", path("groups", self.group, "join"), body)
        except GroupMembershipError:
            body.pop("member_id", None)  # our lease expired: join as a new member
            _, answer = self.transport.request("POST", path("groups", self.group, "join"), body)
        return dict(answer)

    def _revoke(self, partitions: list[TopicPartition]) -> None:
        """Stop reading ``partitions``: ``on_revoke``, then their positions are forgotten.

        They leave the assignment first, so that a ``commit()`` in ``on_revoke`` commits the partitions
        kept (``position`` still answers for the revoked ones there).
        """
        partitions = list(partitions)
        self._assignment = [tp for tp in self._assignment if tp not in partitions]
        try:
            if partitions and self.on_revoke is not None:
                self._callback(self.on_revoke, partitions)
        finally:
            for tp in partitions:
                self._positions.pop(tp, None)
                self._committed.pop(tp, None)

    def _callback(self, callback: Rebalance, partitions: list[TopicPartition]) -> None:
        """Run ``on_revoke`` or ``on_assign``; if it raises, the next poll joins again to finish the rebalance."""
        self._in_callback = True
        try:
            callback(partitions)
        except BaseException as exc:
            self._membership.rejoin.set()
            self._callback_error = exc
            raise
        finally:
            self._in_callback = False

    def _raised_by_callback(self, error: BaseException) -> bool:
        """Whether ``error`` comes from the application's callback: it propagates (never retried or logged away
        as if a request of the consumer's had failed), and the callback is not run again for those partitions."""
        return error is self._callback_error

    def _topic_gone(self, topic: str, error: LlogClientError) -> None:
        """The server says ``topic`` does not exist (Kafka's UNKNOWN_TOPIC_OR_PARTITION): revoke its partitions
        now, and rejoin at the next poll to refresh the assignment."""
        gone = [tp for tp in self._assignment if tp[0] == topic]
        logger.warning("group %s: topic %r does not exist any more (%s); revoking %s and rejoining", self.group,
                       topic, error, ", ".join(f"{t}/{p}" for t, p in gone) or "nothing")  # fmt: skip
        self._revoke(gone)
        self._membership.rejoin.set()

    def _heartbeat_loop(self) -> None:
        while not self._closed.wait(self._membership.heartbeat_interval_s):
            with self._lock:
                body = {"member_id": self._membership.member_id, "generation": self._membership.generation}
            try:
                _, answer = self.transport.request("POST", path("groups", self.group, "heartbeat"), body)
            except GroupMembershipError as exc:
                logger.info("group %s: %s; rejoining", self.group, exc)
                self._membership.rejoin.set()
                continue
            except LlogClientError as exc:
                logger.warning("group %s: heartbeat failed: %s", self.group, exc)
                continue
            if answer.get("rejoin"):
                self._membership.rejoin.set()

    def _commit_quietly(self) -> None:
        try:
            self._commit_positions()
        except LlogClientError as exc:
            if self._raised_by_callback(exc):  # on_revoke of a deleted topic's partitions
                raise
            logger.info("group %s: commit refused: %s", self.group, exc)

    # -- offsets --

    def _start_offsets(self, partitions: list[TopicPartition]) -> dict[TopicPartition, int]:
        """Where each gained partition is read from: its committed offset, else ``auto_offset_reset``."""
        if not partitions:
            return {}
        _, described = self.transport.request("GET", path("groups", self.group))
        known = {(str(o["topic"]), int(o["partition"])): o for o in described.get("offsets", [])}
        starts = {}
        for tp in partitions:
            entry = known.get(tp, {})
            committed = entry.get("committed")
            log_start = entry.get("log_start")
            earlier = entry.get("committed_for_earlier_topic")
            if committed is None and earlier is not None:
                # Kafka's OFFSET_OUT_OF_RANGE: a position of another topic means nothing here; reset, and say why.
                logger.warning("group %s: offset %s of %s/%d was committed for an earlier topic of that name (deleted, "
                               "then created again): not applied; reading as auto_offset_reset=%r says",
                               self.group, earlier, tp[0], tp[1], self.auto_offset_reset)  # fmt: skip
            if committed is not None:
                self._committed[tp] = int(committed)
                starts[tp] = max(int(committed), int(log_start or FIRST_OFFSET))
            elif self.auto_offset_reset == "earliest":
                starts[tp] = int(log_start or FIRST_OFFSET)
            else:
                high_watermark = entry.get("high_watermark")
                starts[tp] = (int(high_watermark) if high_watermark is not None else self._high_watermark(tp)) + 1
        return starts

    def _high_watermark(self, tp: TopicPartition) -> int:
        try:
            _, state = self.transport.request("GET", path("topics", tp[0], "partitions", str(tp[1])))
        except NotFoundError:
            return FIRST_OFFSET - 1  # not written yet
        return int(state["high_watermark"])

    # -- fetching --

    def _window(self) -> list[TopicPartition]:
        """The assigned partitions this request reads: all of them, or the next 100 in turn."""
        if len(self._assignment) <= MAX_REQUEST_PARTITIONS:
            return self._assignment
        start = self._next_window % len(self._assignment)
        self._next_window = start + MAX_REQUEST_PARTITIONS
        return (self._assignment[start:] + self._assignment[:start])[:MAX_REQUEST_PARTITIONS]

    def _fetch(self, wait_s: float) -> list[Record]:
        window = self._window()
        entries = []
        for topic, partition in window:
            position = self._positions[(topic, partition)]
            entry: dict[str, Any] = {"topic": topic, "partition": partition, "fetch_offset": position}
            if self.partition_max_bytes is not None:
                entry["partition_max_bytes"] = self.partition_max_bytes
            entries.append(entry)
        wait_ms = min(MAX_CONSUME_WAIT_MS, int(wait_s * 1000))
        body: dict[str, Any] = {"topic_partitions": entries, "max_wait_ms": wait_ms}
        if self.max_bytes is not None:
            body["max_bytes"] = self.max_bytes
        try:
            _, answer = self.transport.request(
                "POST", "/consume", body, read_timeout_s=self.transport.read_timeout_s + wait_ms / 1000
            )
        except NotFoundError as exc:  # the whole request names a deleted topic
            if exc.error_type != "UnknownTopic" or exc.topic not in {topic for topic, _ in window}:
                raise
            self._topic_gone(exc.topic, exc)
            return []
        records: list[Record] = []
        for result in answer["results"]:
            tp = (str(result["topic"]), int(result["partition"]))
            if tp not in self._positions:
                continue
            if result.get("ok"):
                records.extend(self._records(tp, result))
            else:
                self._fetch_failed(tp, result)
        return records

    def _records(self, tp: TopicPartition, result: dict[str, Any]) -> list[Record]:
        position = self._positions[tp]
        records = [
            Record(
                topic=tp[0],
                partition=tp[1],
                offset=int(r["offset"]),
                timestamp_ms=int(r["timestamp_ms"]),
                key=None if r.get("key") is None else decode_bytes(r["key"]),
                value=decode_bytes(r["value"]),
                headers={name: decode_bytes(data) for name, data in (r.get("headers") or {}).items()},
            )
            for r in result.get("records", [])
            if int(r["offset"]) >= position
        ]
        if records:
            self._positions[tp] = records[-1].offset + 1
        return records

    def _fetch_failed(self, tp: TopicPartition, result: dict[str, Any]) -> None:
        error = error_from(result)
        if error.error_type == "OffsetOutOfRange":
            log_start = int(result.get("log_start_offset", FIRST_OFFSET))
            high_watermark = int(result.get("high_watermark", log_start - 1))
            position = self._positions[tp]
            if position < log_start or self.auto_offset_reset == "earliest":
                self._positions[tp] = log_start
            else:
                self._positions[tp] = high_watermark + 1
            logger.warning("group %s: %s; reading %s/%s from %d", self.group, error, *tp, self._positions[tp])
        elif error.error_type == "RecordsLost":  # a range a rebuild could not recover: its records are gone
            self._positions[tp] = int(result["next_fetch_offset"])
            logger.warning("group %s: %s; skipping to %s/%s@%d", self.group, error, *tp, self._positions[tp])
        elif error.error_type != "PartitionNotInitialized" and not error.retriable:  # not written yet: nothing to read
            raise error
