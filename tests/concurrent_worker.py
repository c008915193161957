"""An idempotent producer in an OS process of its own, for the concurrent harness (``test_concurrent.py``).

The harness starts it with ``python -m tests.concurrent_worker``, stops it with SIGSTOP at any moment (mid-append
too) past every timeout, resumes it with SIGCONT, and now and then kills it with SIGKILL. It opens its own Oxia and
S3 clients under the run's root, issues a producer id, and appends numbered batches, one in flight per partition,
each retried until answered, as the harness's producer threads do.

It talks in JSON lines. On stdin, first its settings (``Settings``), then one line per attempt: ``go`` lets the
attempt run, anything else (or the end of stdin) ends the worker before it. On stdout:

* ``{"producer": id}`` once;
* ``{"call": batch, "partition": p, "seq": s, "values": [...]}`` before each attempt, which then waits for its
  ``go``: the harness records the call before the append begins, and counts the attempt in flight (its clock does
  not jump during it) from then;
* ``{"answer": batch, "start": offset, "duplicate": bool}`` after an attempt that succeeded, or
  ``{"answer": batch, "error": [module, class], "message": text}`` after one that did not (its result's error;
  ``append_shared`` reports storage failures in its results, and raises only on bad input or a bug, which ends
  the worker: the harness fails the run when a worker exits by itself).

Its wall clock is the harness's: the system clock plus the skew the harness's ``JumpingClock`` writes to
``skew_file`` at every jump, so that a resumed process sees the minute that passed while it was stopped.
"""

from __future__ import annotations

import dataclasses
import json
import random
import sys
import time
from pathlib import Path
from typing import Any

from llog.config import OxiaConfig, S3Config, WriterConfig
from llog.errors import LlogError, SequenceInFlight
from llog.format.codec import Record
from llog.format.kv.control import AppendProtocol
from llog.protocol.append import AppendResult, LogWriter, SharedAppendGroup
from llog.store.oxia import OxiaStore
from llog.store.s3 import BlobStore
from llog.store.storage import Storage


@dataclasses.dataclass(frozen=True)
class Settings:
    """Where and how the worker appends: the harness's stores, root, topic and writer configuration."""

    oxia: dict[str, Any]  # OxiaConfig's fields
    s3: dict[str, Any]  # S3Config's fields
    bucket: str
    root: str
    topic: str
    partitions: list[int]
    prefix: str  # of its batch names, unique to this worker
    skew_file: str
    append_protocol: str
    max_commit_delay_ms: int


class SkewFileClock:
    """The wall clock plus the skew the harness's ``JumpingClock`` last wrote (replaced atomically at each jump)."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def __call__(self) -> float:
        return time.time() + float(self.path.read_text())


def emit(line: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(line) + "\n")
    sys.stdout.flush()


def main() -> None:
    settings = Settings(**json.loads(sys.stdin.readline()))
    storage = Storage(
        OxiaStore(OxiaConfig(**settings.oxia)), BlobStore(S3Config(**settings.s3)), settings.bucket, settings.root,
        clock=SkewFileClock(Path(settings.skew_file)),
    )  # fmt: skip
    config = WriterConfig(
        append_protocol=AppendProtocol(settings.append_protocol), max_commit_delay_ms=settings.max_commit_delay_ms
    )
    with LogWriter(storage, config=config) as writer:
        produce(writer, settings)


def produce(writer: LogWriter, settings: Settings) -> None:
    """Issues a producer id, then appends batches until stdin says otherwise."""
    while True:
        try:
            pid = writer.producers.issue().producer_id
            break
        except LlogError as exc:  # an Oxia restart
            if not exc.retriable:
                raise
            time.sleep(0.1)
    emit({"producer": pid})
    sequence = dict.fromkeys(settings.partitions, 0)
    unanswered: dict[int, tuple[str, list[str]]] = {}
    for number in range(1, sys.maxsize):
        partition = random.choice(settings.partitions)
        if partition not in unanswered:
            batch = f"{settings.prefix}{number}"
            unanswered[partition] = (batch, [f"{batch}#{k}" for k in range(random.randint(1, 3))])
        batch, values = unanswered[partition]
        seq = sequence[partition]
        emit({"call": batch, "partition": partition, "seq": seq, "values": values})
        if sys.stdin.readline().strip() != "go":
            return
        group = SharedAppendGroup(settings.topic, partition, [Record(v.encode()) for v in values], pid, 0, seq)
        result = writer.append_shared([group])[0]
        emit(answer(batch, result))
        if result.ok:
            del unanswered[partition]
            sequence[partition] += len(values)
        elif isinstance(result.error, SequenceInFlight):
            time.sleep(0.05)


def answer(batch: str, result: AppendResult) -> dict[str, Any]:
    """An attempt's answer line: its offsets, or its error's class."""
    if result.error is None:
        return {"answer": batch, "start": result.start_offset, "duplicate": result.duplicate}
    kind = type(result.error)
    return {"answer": batch, "error": [kind.__module__, kind.__qualname__], "message": str(result.error)}


if __name__ == "__main__":
    main()
