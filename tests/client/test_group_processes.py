"""Three ``llog-client consume --group`` processes share 12 partitions and survive one being killed."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from devserver.serve import LlogServer
from llog_client.producer import Producer
from tests.client.conftest import call

ROOT = Path(__file__).resolve().parents[2]
PARTITIONS = 12
SETTLE_S = 90


def produce(server: LlogServer, topic: str, values: list[str]) -> None:
    with Producer(server.url) as producer:
        for value in values:
            producer.send(topic, value, key=value)
        producer.flush()


def printed(outputs: list[Path]) -> list[str]:
    values = []
    for output in outputs:
        for line in output.read_text().splitlines():
            if line.endswith("}"):  # a line being written is not complete yet
                values.append(json.loads(line)["value"])
    return values


def wait_for(outputs: list[Path], expected: set[str], processes: list[subprocess.Popen[bytes]]) -> None:
    deadline = time.monotonic() + SETTLE_S
    while not expected <= set(printed(outputs)):
        assert time.monotonic() < deadline, f"missing {len(expected - set(printed(outputs)))} records"
        assert all(p.poll() is None for p in processes), [p.returncode for p in processes]
        time.sleep(0.2)


def test_consumers_share_partitions_and_take_over_a_killed_ones(server: LlogServer, tmp_path: Path) -> None:
    call(server, "POST", "/topics", {"topic": "jobs", "partitions": PARTITIONS})
    outputs = [tmp_path / f"consumer-{i}.jsonl" for i in range(3)]
    command = [sys.executable, "-m", "llog_client.cli", "consume", "jobs", "--group", "workers", "--url", server.url,
               "--from-beginning", "--format", "json", "--session-timeout-ms", "3000"]  # fmt: skip
    processes = [
        subprocess.Popen(command, stdout=output.open("wb"), stderr=subprocess.DEVNULL, cwd=ROOT, env=os.environ.copy())
        for output in outputs
    ]
    try:
        first = [f"first-{i}" for i in range(240)]
        produce(server, "jobs", first)
        wait_for(outputs, set(first), processes)
        processes[0].send_signal(signal.SIGKILL)  # no commit, no leave: its lease has to expire
        processes[0].wait()
        deadline = time.monotonic() + SETTLE_S
        while len(call(server, "GET", "/groups/workers")["members"]) != 2:  # its lease expires
            assert time.monotonic() < deadline
            time.sleep(0.2)
        described = call(server, "GET", "/groups/workers")
        owned = sorted(p for m in described["members"] for a in m["assignments"] for p in a["partitions"])
        assert owned == list(range(PARTITIONS))
        second = [f"second-{i}" for i in range(240)]
        produce(server, "jobs", second)
        wait_for(outputs[1:], set(second), processes[1:])  # the survivors read every partition now
    finally:
        for process, stop in zip(processes, (signal.SIGINT, signal.SIGINT, signal.SIGTERM), strict=True):
            if process.poll() is None:
                process.send_signal(stop)  # Ctrl-C or a service manager's stop: commit what was printed, leave
        for process in processes:
            process.wait(timeout=60)
    assert [p.returncode for p in processes[1:]] == [0, 0]
    # At least once across the kill (the killed consumer's uncommitted records are read again by their new
    # owner); exactly once where commits followed processing and no member failed.
    assert set(printed(outputs)) == set(first) | set(second)
    assert sorted(v for v in printed(outputs) if v.startswith("second-")) == sorted(second)
