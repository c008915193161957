"""Restarting the Oxia server (data directory kept) loses no acknowledged append.

Runs last in its module on purpose: it restarts the session's shared server.
"""

from __future__ import annotations

import time

import pytest

from llog.errors import StorageUnavailable
from llog.protocol.append import AppendResult, LogWriter
from llog.protocol.read import LogReader
from tests.conftest import OxiaServer, fuzz_examples

pytestmark = pytest.mark.oxia


def append_with_retry(writer: LogWriter, topic: str, payload: bytes, deadline_s: float = 30) -> AppendResult:
    """What a producer does on a retriable error: try again, within a bound."""
    stop = time.monotonic() + deadline_s
    while True:
        try:
            return writer.append(topic, 0, [payload])
        except StorageUnavailable:
            if time.monotonic() > stop:
                raise
            time.sleep(0.2)


# Restarts per run: one graceful and one SIGKILL in make test, LLOG_FUZZ_SCALE times as many in make soak.
RESTARTS = fuzz_examples(2)


def test_acknowledged_appends_survive_server_restarts_and_kills(
    oxia_server: OxiaServer, writer: LogWriter, reader: LogReader, topic: str
) -> None:
    writer.initialize_partition(topic, 0)
    acknowledged: dict[int | None, bytes] = {}
    for phase in range(RESTARTS + 1):
        if phase:
            # Alternately a clean stop and a crash (kill -9): fsync is off in tests, so a kill
            # checks what the server acknowledged only once it was in its WAL, not on disk.
            oxia_server.restart(kill=phase % 2 == 0)
        for i in range(5):
            payload = f"{phase}-{i}".encode()
            acknowledged[append_with_retry(writer, topic, payload).start_offset] = payload
        # Everything acknowledged so far reads back after each restart.
        assert {r.offset: r.value for r in reader.iter_from(topic, 0, 1)} == acknowledged

    assert sorted(o or 0 for o in acknowledged) == list(range(1, 5 * (RESTARTS + 1) + 1))

    start = time.monotonic()
    writer.close()  # the client saw a reconnect: closing must still not hang
    assert time.monotonic() - start < 10
