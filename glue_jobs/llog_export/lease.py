"""One export run per table at a time: the run lease (docs/ANALYTICS.md, "One run at a time").

Two runs into one table lose rows in Parquet mode (the second deletes the
first's staged files, and the first then commits its cursors with fewer files)
and export ranges twice in Iceberg mode (Iceberg accepts two appends at once).
Glue runs one at a time (MaxConcurrentRuns=1); the lease makes it hold for any
runner (a laptop, EMR, two Glue jobs on one table).

A run takes the lease before it reads anything: it creates
``{output}/_llog_export/lease-{n:020d}.json`` with a create-only write
(``FileSystem.create_new``: a conditional PUT on S3, a hard link locally), so
of two runs that create the same number one wins; the other gets
``ExportRunning``, which names the holder. ``n`` is one past the newest lease,
which must be released or expired: a run that crashed blocks the table until
its lease expires (``duration_s``), then the next run takes over with the next
number. Numbers only grow (a release writes the next number, holderless), and a
run that created a number checks that it is still the newest, so a run that
read the leases long ago and creates an old number is refused too.

The holder checks, before its commit point, that its lease has at least
``margin_s`` left (``LeaseExpired`` otherwise: it commits nothing, the next run
does its work). A lease must therefore outlast a run (the CDK job's lease is
its timeout and more); a run paused longer than the margin between that check
and its commit is the remaining window.
"""

from __future__ import annotations

import json
import logging
import re
import time
from collections.abc import Callable
from dataclasses import dataclass

from llog.errors import CorruptMetadata, LlogError
from llog_export.state import STATE_DIR, FileSystem

log = logging.getLogger("llog_export")

_LEASE_NAME = re.compile(r"lease-(\d{20})\.json")
KEEP_LEASES = 10  # older lease files are deleted
LEASE_MARGIN_S = 300  # a run commits only with at least this much of its lease left


class ExportRunning(LlogError):
    """Another export run holds the table's run lease."""

    retriable = True  # once that run ends or its lease expires

    def __init__(self, lease: Lease, uri: str) -> None:
        super().__init__(
            f"another export run holds {uri}: {lease.holder}, since {lease.acquired_at_ms} ms, until "
            f"{lease.expires_at_ms} ms (Unix time); one run per table at a time"
        )
        self.lease = lease


class LeaseExpired(LlogError):
    """This run outlived its lease: it must not commit (another run may have started)."""


@dataclass(frozen=True)
class Lease:
    number: int
    holder: str | None  # None: released
    acquired_at_ms: int
    expires_at_ms: int

    def encode(self) -> bytes:
        return json.dumps(
            {"holder": self.holder, "acquired_at_ms": self.acquired_at_ms, "expires_at_ms": self.expires_at_ms},
            sort_keys=True,
        ).encode()

    @classmethod
    def decode(cls, number: int, raw: bytes, what: str) -> Lease:
        try:
            doc = json.loads(raw)
            holder = doc["holder"]
            return cls(number, None if holder is None else str(holder), int(doc["acquired_at_ms"]),
                       int(doc["expires_at_ms"]))  # fmt: skip
        except (ValueError, KeyError, TypeError) as exc:
            raise CorruptMetadata(f"{what} is not a run lease: {exc!r}") from None


class RunLease:
    """The run leases of one table location."""

    def __init__(
        self,
        fs: FileSystem,
        output: str,
        *,
        duration_s: float,
        margin_s: float = LEASE_MARGIN_S,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.fs = fs
        self.directory = f"{output.rstrip('/')}/{STATE_DIR}"
        self.duration_ms = int(duration_s * 1000)
        self.margin_ms = int(margin_s * 1000)
        self.clock = clock

    def _now_ms(self) -> int:
        return int(self.clock() * 1000)

    def _uri(self, number: int) -> str:
        return f"{self.directory}/lease-{number:020d}.json"

    def _numbers(self) -> list[int]:
        if not self.fs.exists(self.directory):
            return []
        names = (uri.rsplit("/", 1)[-1] for uri in self.fs.list_files(self.directory))
        return sorted(int(m.group(1)) for name in names if (m := _LEASE_NAME.fullmatch(name)))

    def _newest(self) -> Lease | None:
        numbers = self._numbers()
        return self._read(numbers[-1]) if numbers else None

    def _read(self, number: int) -> Lease:
        uri = self._uri(number)
        return Lease.decode(number, self.fs.read_bytes(uri), uri)

    def acquire(self, holder: str) -> Lease:
        """The lease for ``holder``; ``ExportRunning`` if another run holds it."""
        now = self._now_ms()
        newest = self._newest()
        if newest is not None and newest.holder is not None:
            if newest.expires_at_ms > now:
                raise ExportRunning(newest, self._uri(newest.number))
            log.warning("run lease %d of %s expired at %d ms unreleased (a crashed run): taking over",
                        newest.number, newest.holder, newest.expires_at_ms)  # fmt: skip
        lease = Lease(1 if newest is None else newest.number + 1, holder, now, now + self.duration_ms)
        if not self.fs.create_new(self._uri(lease.number), lease.encode()):
            raise ExportRunning(self._read(lease.number), self._uri(lease.number))
        numbers = self._numbers()
        if numbers[-1] != lease.number:  # ours is an old number: we read the leases long ago
            raise ExportRunning(self._read(numbers[-1]), self._uri(numbers[-1]))
        for number in numbers:
            if number <= lease.number - KEEP_LEASES:
                self.fs.delete(self._uri(number))
        return lease

    def check(self, lease: Lease) -> None:
        """``LeaseExpired`` unless ``lease`` has at least the margin left: call before a commit point."""
        left = lease.expires_at_ms - self._now_ms()
        if left < self.margin_ms:
            raise LeaseExpired(
                f"run lease {lease.number} of {lease.holder} has {left} ms left, less than the "
                f"{self.margin_ms} ms a commit needs: committing nothing; the next run does this work"
            )

    def release(self, lease: Lease) -> None:
        """End ``lease``: the next number, holderless (a run that took over an expired one has it already)."""
        now = self._now_ms()
        if not self.fs.create_new(self._uri(lease.number + 1), Lease(lease.number + 1, None, now, now).encode()):
            log.warning("run lease %d of %s was taken over before its release", lease.number, lease.holder)
