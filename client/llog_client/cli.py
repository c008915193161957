"""``llog produce`` and ``llog consume``: kcat-like commands over the HTTP API (docs/CLIENT.md).

``produce TOPIC`` sends every line of stdin as one record (``--key-separator`` splits a key off the
front of each line; ``--partition`` pins them all to one partition, else keys are routed as Kafka
would and keyless lines spread over the partitions). It exits 1 if any record failed.

``consume TOPIC --group G`` prints every record of the topic, as a member of the group, from its
committed offsets (a group without any: the tail, or the start with ``--from-beginning``), one per
line (the value; ``KEY<sep>VALUE`` with ``--key-separator``) or as JSON lines (``--format json``).
Offsets are committed after the records were printed, so a killed consumer's successor prints
every record at least once. ``--count N`` stops after N records. ``--from-time T`` reads each
partition the member gets from the first record at or after T (``POST /offsets``).

The commands reach ``--url``, else ``$LLOG_URL``, else ``make dev``'s ``http://127.0.0.1:8080``;
``--api-key`` (``$LLOG_API_KEY``) or ``--sigv4-region`` authenticate to a deployed API. They are
``llog`` subcommands when the llog package is installed (entry points of the ``llog.commands``
group) and ``llog-client`` subcommands in any case.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import threading
import time
from collections import defaultdict
from collections.abc import Sequence
from concurrent.futures import Future
from datetime import UTC, datetime
from typing import IO, Any

from llog_client.auth import ApiKeyAuth, Auth, SigV4Auth
from llog_client.consumer import Consumer, Record
from llog_client.errors import GroupMembershipError, LlogClientError
from llog_client.producer import Producer, RecordMetadata
from llog_client.transport import default_url
from llog_client.wire import encode_bytes

API_KEY_VARIABLE = "LLOG_API_KEY"
PROGRESS_INTERVAL_S = 0.5
MAX_ERRORS_SHOWN = 5


def _connection_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--url", default=None, help="llog's HTTP API, or one per zone as <zone>=<url>,... "
                        "(default: $LLOG_URL, else http://127.0.0.1:8080)")
    auth = parser.add_mutually_exclusive_group()
    auth.add_argument("--api-key", default=None, help=f"send this API key (default: ${API_KEY_VARIABLE})")
    auth.add_argument("--sigv4-region", default=None, metavar="REGION",
                      help="sign requests with SigV4 for API Gateway in REGION (botocore's credentials)")  # fmt: skip
    parser.add_argument("--progress", action="store_true", help="print a progress line to stderr")


def auth_from_args(args: argparse.Namespace) -> Auth | None:
    if args.sigv4_region:
        return SigV4Auth(args.sigv4_region)
    api_key = args.api_key or os.environ.get(API_KEY_VARIABLE)
    return ApiKeyAuth(api_key) if api_key else None


def _separator(value: str | None) -> bytes | None:
    if value is None:
        return None
    if not value:
        raise argparse.ArgumentTypeError("the key separator is empty")
    return value.encode("utf-8")


class _Progress:
    """A ``\\r``-rewritten status line on stderr, at most every PROGRESS_INTERVAL_S."""

    def __init__(self, enabled: bool, stream: IO[str]) -> None:
        self.enabled = enabled
        self.stream = stream
        self.started = time.monotonic()
        self._shown = 0.0

    def show(self, text: str, *, final: bool = False) -> None:
        now = time.monotonic()
        if not self.enabled or (not final and now - self._shown < PROGRESS_INTERVAL_S):
            return
        self._shown = now
        self.stream.write(f"\r{text} ({now - self.started:.1f} s)" + ("\n" if final else ""))
        self.stream.flush()


class _Tally:
    """Acknowledged and failed records of a produce run, counted from the futures' callbacks."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.acknowledged = 0
        self.errors: defaultdict[str, int] = defaultdict(int)
        self.shown: list[str] = []

    def done(self, future: Future[RecordMetadata]) -> None:
        error = future.exception()
        with self.lock:
            if error is None:
                self.acknowledged += 1
                return
            self.errors[getattr(error, "error_type", type(error).__name__)] += 1
            if len(self.shown) < MAX_ERRORS_SHOWN:
                self.shown.append(str(error))

    @property
    def failed(self) -> int:
        return sum(self.errors.values())


def _stop_on_sigterm() -> None:
    """SIGTERM (a service manager's stop) ends a command as Ctrl-C does: what was sent or printed is settled."""

    def interrupt(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, interrupt)


def produce(args: argparse.Namespace, stdin: IO[bytes] | None = None, stderr: IO[str] | None = None) -> int:
    """Every line of stdin as a record of ``args.topic``."""
    _stop_on_sigterm()
    stdin = stdin or sys.stdin.buffer
    stderr = stderr or sys.stderr
    separator = _separator(args.key_separator)
    tally = _Tally()
    progress = _Progress(args.progress, stderr)
    sent = 0
    producer = Producer(args.url or default_url(), auth_from_args(args))
    try:
        for line in stdin:
            line = line[:-1] if line.endswith(b"\n") else line
            key = None
            if separator is not None and separator in line:
                key, line = line.split(separator, 1)
            producer.send(args.topic, line, key=key, partition=args.partition).add_done_callback(tally.done)
            sent += 1
            progress.show(f"{sent} records sent, {tally.acknowledged} acknowledged, {tally.failed} failed")
    except KeyboardInterrupt:
        pass  # stop reading; what was sent is flushed below and reported
    finally:
        producer.close()
    progress.show(f"{sent} records sent, {tally.acknowledged} acknowledged, {tally.failed} failed", final=True)
    if tally.failed:
        summary = ", ".join(f"{count} {error_type}" for error_type, count in sorted(tally.errors.items()))
        stderr.write(f"llog produce: {tally.failed} of {sent} records failed ({summary})\n")
        for message in tally.shown:
            stderr.write(f"  {message}\n")
        return 1
    return 0


def _record_json(record: Record) -> str:
    return json.dumps({
        "topic": record.topic, "partition": record.partition, "offset": record.offset,
        "timestamp_ms": record.timestamp_ms, "key": None if record.key is None else encode_bytes(record.key),
        "value": encode_bytes(record.value), "headers": {n: encode_bytes(v) for n, v in record.headers.items()},
    })  # fmt: skip


def _record_line(record: Record, args: argparse.Namespace, separator: bytes | None) -> bytes:
    if args.format == "json":
        return _record_json(record).encode("utf-8") + b"\n"
    if separator is not None:
        return (record.key or b"") + separator + record.value + b"\n"
    return record.value + b"\n"


def consume(args: argparse.Namespace, stdout: IO[bytes] | None = None, stderr: IO[str] | None = None) -> int:
    """Print the topic's records as a member of ``args.group``, committing what was printed."""
    _stop_on_sigterm()
    stdout = stdout or sys.stdout.buffer
    stderr = stderr or sys.stderr
    separator = _separator(args.key_separator)
    progress = _Progress(args.progress, stderr)
    printed = 0
    consumer = Consumer(
        args.url or default_url(), args.group, [args.topic], auth_from_args(args),
        enable_auto_commit=False, auto_offset_reset="earliest" if args.from_beginning else "latest",
        session_timeout_ms=args.session_timeout_ms,
        on_assign=None if args.from_time is None else lambda gained: consumer.seek_to_time(args.from_time, gained),
    )  # fmt: skip
    try:
        while args.count is None or printed < args.count:
            records = consumer.poll(1.0)
            if args.count is not None and printed + len(records) > args.count:
                records = _keep_first(consumer, records, args.count - printed)
            stdout.writelines(_record_line(record, args, separator) for record in records)
            stdout.flush()
            printed += len(records)
            if records:
                _commit(consumer, stderr)
            progress.show(f"{printed} records")
    except KeyboardInterrupt:
        pass
    except BrokenPipeError:  # the reader went away (| head): what was printed is committed
        pass
    except LlogClientError as exc:
        stderr.write(f"llog consume: {exc}\n")
        return 1
    finally:
        consumer.close()
    progress.show(f"{printed} records", final=True)
    return 0


def _commit(consumer: Consumer, stderr: IO[str]) -> None:
    """Commit what was printed; a rebalance in between only means the new owner may print some again."""
    try:
        consumer.commit()
    except GroupMembershipError as exc:
        stderr.write(f"llog consume: commit refused after a rebalance ({exc.error_type}); continuing\n")


def _keep_first(consumer: Consumer, records: list[Record], count: int) -> list[Record]:
    """The first ``count`` records; each partition is sought back to its first record not kept."""
    kept, dropped = records[:count], records[count:]
    for record in reversed(dropped):
        consumer.seek(record.topic, record.partition, record.offset)
    return kept


def _time_ms(text: str) -> int:
    """``--from-time``: ms since the epoch, or an ISO 8601 time (UTC unless it names its offset)."""
    if text.isdigit():
        return int(text)
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a time: {text!r} (ISO 8601, or ms since the epoch)") from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return int(moment.timestamp() * 1000)


def register_produce(subparsers: Any) -> None:
    parser = subparsers.add_parser("produce", help="send lines of stdin as records to a topic (kcat -P)")
    parser.add_argument("topic")
    parser.add_argument("--key-separator", default=None, metavar="SEP",
                        help="split each line at its first SEP into key and value")  # fmt: skip
    parser.add_argument("--partition", type=int, default=None, help="write every record to this partition")
    _connection_options(parser)
    parser.set_defaults(run=produce)


def register_consume(subparsers: Any) -> None:
    parser = subparsers.add_parser("consume", help="print a topic's records as a consumer group member (kcat -G)")
    parser.add_argument("topic")
    parser.add_argument("--group", required=True, help="the consumer group (its committed offsets are shared)")
    parser.add_argument("--from-beginning", action="store_true",
                        help="a group without committed offsets starts at the log start (default: tail)")  # fmt: skip
    parser.add_argument("--from-time", type=_time_ms, default=None, metavar="TIME",
                        help="read each partition this member gets from the first record at or after TIME "
                             "(ISO 8601, e.g. 2026-11-24T09:00:00Z, or ms since the epoch), "
                             "whatever the group committed")  # fmt: skip
    parser.add_argument("--format", choices=("text", "json"), default="text",
                        help="text: the value per line; json: one JSON object per record")  # fmt: skip
    parser.add_argument("--key-separator", default=None, metavar="SEP", help="text format: print KEY SEP VALUE")
    parser.add_argument("--count", type=int, default=None, help="stop after this many records")
    parser.add_argument("--session-timeout-ms", type=int, default=10_000,
                        help="without heartbeats for this long, the group gives its partitions to others")  # fmt: skip
    _connection_options(parser)
    parser.set_defaults(run=consume)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="llog-client", description="produce to and consume from llog over HTTP")
    subparsers = parser.add_subparsers(dest="command", required=True)
    register_produce(subparsers)
    register_consume(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    status: int = args.run(args)
    return status


if __name__ == "__main__":
    sys.exit(main())
