"""The export's own state: a cursor per partition and the attempt being committed.

The state lives next to the table, in ``{output}/_llog_export/state-{n:020d}.json``.
Every change writes the next number (to a temporary name, then renamed), so a
reader always sees a whole document and older states stay for post-mortems.

An attempt commits in three steps (docs/ANALYTICS.md):

1. its Parquet files are written under ``{output}/_llog_staging/{attempt}/``
   (``_``-prefixed paths are invisible to Spark, Hive and Athena);
2. a state with ``pending`` = the list of moves into the table and the cursors
   they bring is written: from here on the attempt rolls forward;
3. the files are moved into ``{output}/topic=…/date=…/``, the partitions are
   registered, and a state with the new cursors and no ``pending`` is written.

A run that finds ``pending`` finishes steps 3 first (moves already done are
skipped), so a crash anywhere neither duplicates nor loses rows.
"""

from __future__ import annotations

import json
import re
import uuid
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

from llog.errors import CorruptMetadata, LlogError

STATE_FORMAT = "llog-export-state-v1"
STATE_DIR = "_llog_export"
STAGING_DIR = "_llog_staging"
_STATE_NAME = re.compile(r"state-(\d{20})\.json")
KEEP_STATES = 10  # older state files are deleted; a few stay for post-mortems

# cursors[name][partition] = the next offset to export; name: the topic, or "{topic}/{topic_id}" for a partition
# folder named by a topic id (llog_export.job.cursor_name)
Cursors = dict[str, dict[int, int]]


class ConcurrentExport(LlogError):
    """Another export committed to the same table at the same time (one writer per table)."""


class FileSystem(Protocol):
    """The few file operations the commit protocol needs (Hadoop's FileSystem on Spark)."""

    def list_files(self, uri: str) -> list[str]: ...
    def exists(self, uri: str) -> bool: ...
    def read_bytes(self, uri: str) -> bytes: ...
    def create(self, uri: str, data: bytes) -> None: ...
    def create_new(self, uri: str, data: bytes) -> bool: ...  # atomic create-only: False if ``uri`` exists
    def rename(self, source: str, target: str) -> bool: ...
    def delete(self, uri: str) -> None: ...


@dataclass(frozen=True)
class Move:
    staged: str
    final: str


@dataclass(frozen=True)
class PendingAttempt:
    attempt_id: str
    moves: tuple[Move, ...]
    cursors: Cursors  # the cursors once the moves are done
    table_partitions: tuple[tuple[str, str], ...]  # (topic, date) directories the moves fill


@dataclass(frozen=True)
class ExportState:
    sequence: int = 0  # 0: nothing committed yet
    cursors: Cursors = field(default_factory=dict)
    pending: PendingAttempt | None = None

    def cursor(self, topic: str, partition: int) -> int:
        return self.cursors.get(topic, {}).get(partition, 1)

    def encode(self) -> bytes:
        doc: dict[str, Any] = {
            "format": STATE_FORMAT,
            "sequence": self.sequence,
            "cursors": cursors_to_json(self.cursors),
            "pending": None,
        }
        if self.pending is not None:
            doc["pending"] = {
                "attempt_id": self.pending.attempt_id,
                "moves": [[m.staged, m.final] for m in self.pending.moves],
                "cursors": cursors_to_json(self.pending.cursors),
                "table_partitions": [list(p) for p in self.pending.table_partitions],
            }
        return json.dumps(doc, indent=1, sort_keys=True).encode()

    @classmethod
    def decode(cls, raw: bytes, what: str) -> ExportState:
        try:
            doc = json.loads(raw)
            if doc["format"] != STATE_FORMAT:
                raise CorruptMetadata(f"{what} has an unknown format {doc['format']!r}")
            pending = doc["pending"]
            return cls(
                sequence=int(doc["sequence"]),
                cursors=cursors_from_json(doc["cursors"]),
                pending=None
                if pending is None
                else PendingAttempt(
                    attempt_id=str(pending["attempt_id"]),
                    moves=tuple(Move(str(s), str(f)) for s, f in pending["moves"]),
                    cursors=cursors_from_json(pending["cursors"]),
                    table_partitions=tuple((str(t), str(d)) for t, d in pending["table_partitions"]),
                ),
            )
        except (ValueError, KeyError, TypeError) as exc:
            raise CorruptMetadata(f"{what} is not an export state: {exc!r}") from None


def cursors_to_json(cursors: Cursors) -> dict[str, dict[str, int]]:
    return {topic: {str(p): o for p, o in sorted(parts.items())} for topic, parts in sorted(cursors.items())}


def cursors_from_json(doc: dict[str, dict[str, int]]) -> Cursors:
    return {str(topic): {int(p): int(o) for p, o in parts.items()} for topic, parts in doc.items()}


def merge_cursors(base: Cursors, updates: Cursors) -> Cursors:
    merged = {topic: dict(parts) for topic, parts in base.items()}
    for topic, parts in updates.items():
        merged.setdefault(topic, {}).update(parts)
    return merged


class StateStore:
    """Reads and advances the state files of one table location."""

    def __init__(self, fs: FileSystem, output: str) -> None:
        self.fs = fs
        self.output = output.rstrip("/")
        self.directory = f"{self.output}/{STATE_DIR}"

    def staging(self, attempt_id: str) -> str:
        return f"{self.output}/{STAGING_DIR}/{attempt_id}"

    def _numbered(self) -> list[tuple[int, str]]:
        if not self.fs.exists(self.directory):
            return []
        found = []
        for uri in self.fs.list_files(self.directory):
            match = _STATE_NAME.fullmatch(uri.rsplit("/", 1)[-1])
            if match:
                found.append((int(match.group(1)), uri))
        return sorted(found)

    def load(self) -> ExportState:
        numbered = self._numbered()
        if not numbered:
            return ExportState()
        sequence, uri = numbered[-1]
        state = ExportState.decode(self.fs.read_bytes(uri), uri)
        if state.sequence != sequence:
            raise CorruptMetadata(f"{uri} says it is state {state.sequence}")
        return state

    def advance(self, current: ExportState, *, cursors: Cursors, pending: PendingAttempt | None) -> ExportState:
        """Write the state after ``current``; raises ``ConcurrentExport`` if someone else did."""
        new = replace(current, sequence=current.sequence + 1, cursors=cursors, pending=pending)
        target = f"{self.directory}/state-{new.sequence:020d}.json"
        # A guard: one run per table at a time is the run lease's job (llog_export.lease).
        if self.fs.exists(target):
            raise ConcurrentExport(f"{target} already exists: another export is writing {self.output}")
        # Renamed into place so that no reader, and no run after a crash, sees half a document.
        temporary = f"{self.directory}/.tmp-{uuid.uuid4().hex}"
        self.fs.create(temporary, new.encode())
        if not self.fs.rename(temporary, target):
            self.fs.delete(temporary)
            raise ConcurrentExport(f"could not rename {temporary} to {target}")
        # Each advance adds one state: dropping the one KEEP_STATES back keeps the folder bounded.
        if new.sequence > KEEP_STATES:
            self.fs.delete(f"{self.directory}/state-{new.sequence - KEEP_STATES:020d}.json")
        return new
