"""Python bytecodes per ``POST /produce`` in ``llog serve``: a count that does not depend on how busy the machine is.

This machine's two cores are shared, and side-by-side timings of a change to
the produce path differ by 5% from one minute to the next. What the event loop
executes per request does not: this script feeds a connection of llog serve's
HTTP server (``server.http11``) the bytes wrk sends, ``--connections`` at a
time, and counts the bytecodes CPython executes (``sys.settrace`` with opcode
events) on the event loop's thread and the flushers', from the bytes received
to the answer written. The writer answers at once (no S3 PUT, no Oxia write:
those are counted by ``bench/serve.py``), so the count is the loop's and the
batcher's work: HTTP, parsing, checks, group commit, answer, metrics. The
batcher runs one flush at a time, and the Oxia client's and the S3 server's
threads are not counted: how much of their work falls in a round depends on
how long the round takes.

Then it counts the flush itself, on its own: ``LogWriter.append_shared`` of
one record to each of 1 and of 16 partitions, with the S3 PUT and the Oxia
write made for real (what the Oxia client's and the S3 client's threads do is
not counted, what the caller's thread does is).

At about 20 ns per bytecode on this machine, 1,000 bytecodes are some 20 us of
the event loop's time per request. Compare two commits by running this in
each checkout (``docs/PERFORMANCE_NOTES.md``), with that checkout's packages
first on the path (the virtualenv's editable installs point at one checkout):

    .venv/bin/python bench/opcodes.py              # the three requests, then the two flushes
    .venv/bin/python bench/opcodes.py --top 30     # and where the bytecodes go
    PYTHONPATH=$OTHER:$OTHER/llog_layer .venv/bin/python $OTHER/bench/opcodes.py

It needs the Oxia server (``OXIA_BIN`` or ``.tools/bin/oxia``): the topic's
partitions are initialized once, for real, before counting.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import json
import os
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.stack import local_stack, stack_env  # noqa: E402

BUCKET = "llog-opcodes"
TOPIC = "opcodes"


@dataclass(frozen=True)
class Case:
    name: str
    records: int  # to each partition
    value_bytes: int
    partitions: int = 1


CASES = (
    Case("1 record of 100 B", 1, 100),
    Case("100 records of 1 KiB", 100, 1024),
    Case("16 partitions, 1 record of 100 B each", 1, 100, partitions=16),
)
WRITER_PARTITIONS = (1, 16)


class _Transport:
    """What ``http11._Connection`` writes to: it counts the answers and wakes the round waiting for them."""

    def __init__(self) -> None:
        self.answered: asyncio.Future[None] | None = None

    def write(self, data: bytes) -> None:
        if self.answered is not None and not self.answered.done():
            self.answered.set_result(None)

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return ("127.0.0.1", 5555) if name == "peername" else default

    def is_closing(self) -> bool:
        return False

    def get_write_buffer_size(self) -> int:
        return 0

    def pause_reading(self) -> None:
        pass

    def resume_reading(self) -> None:
        pass

    def close(self) -> None:
        pass


COUNTED_THREAD = "opcodes-counted"
COUNTED_THREADS = (COUNTED_THREAD, "llog-flush")  # name prefixes: the event loop (or writer) and the flushers


class Counter:
    """Bytecodes and Python calls by function, while ``on``, on the threads that serve the request.

    Not on the others: the Oxia client's and the S3 server's background threads, whose work per
    request depends on how long the round took."""

    def __init__(self) -> None:
        self.on = False
        self.opcodes: collections.Counter[str] = collections.Counter()
        self.calls: collections.Counter[str] = collections.Counter()

    def trace(self, frame: FrameType, event: str, arg: object) -> Any:
        if frame.f_code.co_filename == __file__:
            return None  # this harness's own frames (what it calls is traced)
        if event == "call" and not threading.current_thread().name.startswith(COUNTED_THREADS):
            return None
        if self.on:
            name = f"{Path(frame.f_code.co_filename).name}:{frame.f_code.co_name}"
            if event == "opcode":
                self.opcodes[name] += 1
            elif event == "call":
                self.calls[name] += 1
                frame.f_trace_opcodes = True
        return self.trace

    def reset(self) -> None:
        self.opcodes.clear()
        self.calls.clear()

    def row(self, name: str, counted: int) -> dict[str, Any]:
        """What was counted, per call of what was counted ``counted`` times."""
        return {
            "case": name,
            "requests": counted,
            "opcodes": sum(self.opcodes.values()) / counted,
            "calls": sum(self.calls.values()) / counted,
            "top": [(f, n / counted, self.calls[f] / counted) for f, n in self.opcodes.most_common()],
        }

    def install(self) -> None:
        threading.settrace(self.trace)  # the flusher threads, started after this
        sys.settrace(self.trace)

    def remove(self) -> None:
        sys.settrace(None)
        threading.settrace(None)


def request_bytes(case: Case) -> bytes:
    records = ["x" * case.value_bytes] * case.records
    entries = [{"topic": TOPIC, "partition": p, "records": records} for p in range(case.partitions)]
    body = json.dumps({"topic_partitions": entries}).encode()
    head = "POST /produce HTTP/1.1\r\nHost: 127.0.0.1:8080\r\nContent-Type: application/json\r\n"
    return f"{head}Content-Length: {len(body)}\r\n\r\n".encode() + body


class InstantWriter:
    """Answers an append at once. The first of each round waits until the round's other requests are queued,
    so that every round is the same two flushes (one request, then all the others) whatever the threads'
    timing: the batcher's work per request, and so the count, does not depend on it."""

    def __init__(self, batcher: Any) -> None:
        self._batcher = batcher
        self.round_size = 0  # requests of the round the next flush is the first of; 0: none

    def append_shared(self, groups: Sequence[Any]) -> list[Any]:
        from llog.protocol.append import AppendResult

        deadline = time.monotonic() + 5
        # The queue's length, not ``queued_calls``: a property's bytecodes, once per poll, would be counted.
        while self.round_size and len(self._batcher._queue) < self.round_size - 1 and time.monotonic() < deadline:
            time.sleep(0.0002)
        self.round_size = 0
        return [AppendResult(g.topic, g.partition, len(g.records), 2, 1 + len(g.records), "k", "s3://b/k")
                for g in groups]  # fmt: skip


async def _produce(
    server: Any, writer: InstantWriter, raw: bytes, connections: int, rounds: int, counter: Counter | None
) -> None:
    from server import http11

    loop = asyncio.get_running_loop()
    open_connections = []
    for _ in range(connections):
        connection, transport = http11._Connection(server.httpd), _Transport()
        connection.connection_made(transport)  # type: ignore[arg-type]
        open_connections.append((connection, transport))
    if counter is not None:
        counter.on = True
    for _ in range(rounds):
        writer.round_size = connections
        waits = []
        for connection, transport in open_connections:
            transport.answered = loop.create_future()
            waits.append(transport.answered)
            connection.data_received(raw)
        for answered in waits:  # not gather: its callbacks would be counted with the requests
            await answered
    if counter is not None:
        counter.on = False


def _on_a_thread_of_its_own(work: Callable[[], object]) -> None:
    """``work`` on a counted thread of its own (the caller's thread may run an event loop already)."""
    failures: list[BaseException] = []

    def run() -> None:
        try:
            work()
        except BaseException as exc:
            failures.append(exc)

    thread = threading.Thread(target=run, name=COUNTED_THREAD)
    thread.start()
    thread.join()
    if failures:
        raise failures[0]


def count(
    server: Any, writer: InstantWriter, case: Case, connections: int, requests: int, counter: Counter
) -> dict[str, Any]:
    import uvloop

    raw = request_bytes(case)

    def produce(rounds: int, counting: Counter | None) -> None:
        uvloop.run(_produce(server, writer, raw, connections, rounds, counting))

    _on_a_thread_of_its_own(lambda: produce(10, None))  # warm: the topic cached, the flushers started
    counter.reset()
    rounds = max(1, requests // connections)
    try:
        _on_a_thread_of_its_own(lambda: produce(rounds, counter))
    finally:
        counter.on = False
    return counter.row(case.name, rounds * connections)


def run(connections: int = 32, requests: int = 3200, cases: Sequence[Case] = CASES) -> list[dict[str, Any]]:
    from llog.service.produce import ProduceEntry
    from server.serve import LlogServer
    from server.services import ServeServices

    counter = Counter()
    counter.install()  # before the server's threads start, so that they are traced too (counting only when on)
    try:
        with local_stack(BUCKET) as (address, s3):
            os.environ.update(stack_env(address, s3, BUCKET))  # this process is the server
            # One flush at a time: with more, a timer (max_delay) starts a second flush when it fires,
            # and what each flush carries would depend on how fast this machine fed the round.
            os.environ["LLOG_BATCH_MAX_IN_FLIGHT"] = "1"
            services = ServeServices.from_env()
            partitions = max(case.partitions for case in cases)
            services.produce.produce_groups([ProduceEntry(TOPIC, p, [b"first"]) for p in range(partitions)])
            writer = InstantWriter(services.batcher)
            services.writer.append_shared = writer.append_shared  # type: ignore[method-assign]
            server = LlogServer("127.0.0.1", 0, services=services)  # not started: its connections are fed here
            try:
                return [count(server, writer, case, connections, requests, counter) for case in cases]
            finally:
                server.shutdown()
    finally:
        counter.remove()


def count_append(writer: Any, partitions: int, calls: int, counter: Counter) -> dict[str, Any]:
    from llog.protocol.append import SharedAppendGroup

    groups = [SharedAppendGroup(TOPIC, p, [b"x" * 100]) for p in range(partitions)]

    def append(times: int) -> None:
        for _ in range(times):
            failed = [r.error for r in writer.append_shared(groups) if r.error is not None]
            if failed:
                raise failed[0]

    _on_a_thread_of_its_own(lambda: append(10))  # warm: the partitions' generations known to the writer
    counter.reset()
    counter.on = True
    try:
        _on_a_thread_of_its_own(lambda: append(calls))
    finally:
        counter.on = False
    return counter.row(f"append_shared, {partitions} partition{'s' if partitions > 1 else ''}", calls)


def run_writer(partitions: Sequence[int] = WRITER_PARTITIONS, calls: int = 200) -> list[dict[str, Any]]:
    """Bytecodes per ``LogWriter.append_shared`` of one record of 100 B to each of ``partitions`` partitions,
    its S3 PUT and Oxia write for real: the flush behind a produce request, which ``run`` answers at once.
    The partitions are sequential and known to the writer, so their commits run on the calling thread
    (in one Oxia write for several)."""
    from llog.protocol.append import LogWriter

    counter = Counter()
    counter.install()
    try:
        with local_stack(BUCKET) as (address, s3):
            os.environ.update(stack_env(address, s3, BUCKET))
            with LogWriter.from_env() as writer:
                for p in range(max(partitions)):
                    writer.initialize_partition(TOPIC, p)
                return [count_append(writer, n, calls, counter) for n in partitions]
    finally:
        counter.remove()


def table(rows: Sequence[dict[str, Any]], top: int = 0) -> str:
    lines = ["| call | calls counted | bytecodes per call | Python calls per call |"]
    lines.append("|---|---:|---:|---:|")
    lines += [f"| {r['case']} | {r['requests']} | {r['opcodes']:,.0f} | {r['calls']:,.1f} |" for r in rows]
    for r in rows if top else ():
        lines += ["", f"{r['case']}, the {top} functions with the most bytecodes (per call: bytecodes, calls):"]
        lines += [f"    {n:8.1f} {c:6.2f}  {name}" for name, n, c in r["top"][:top]]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--connections", type=int, default=32, help="connections sending at once (default 32)")
    parser.add_argument("--requests", type=int, default=3200, help="requests counted per case (default 3200)")
    parser.add_argument("--top", type=int, default=0, help="also list the functions with the most bytecodes")
    args = parser.parse_args(argv)
    print(table(run(args.connections, args.requests) + run_writer(), args.top))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
