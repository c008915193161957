"""The HTTP benchmark's settings (bench/serve.py): buckets, timeouts, scenario lengths and load shapes."""

from __future__ import annotations

from dataclasses import dataclass

BUCKET = "llog-bench"
PEER_BUCKET = "s2-lite-bench"
PEER_BASIN = "llog-bench-basin"
PEER_STREAM = "s0"
VALUE = "x" * 100  # one 100-byte record
TIMEOUT_S = 30.0
LONG_POLL_MS = 5000
START_TIMEOUT_S = 60.0

# Seconds (or samples) per scenario: the whole benchmark stays within ~4 minutes on 2 cores.
PRODUCE_S = 5.0
TAIL_SAMPLES = 40
TAIL_DELAY_S = (0.01, 0.15)


@dataclass(frozen=True)
class LoadShape:
    """A ``bench.load`` run at full speed (rate 0)."""

    clients: int
    partitions: int
    batch: int
    record_size: int
    duration: float


@dataclass(frozen=True)
class IngestShape:
    """wrk's ``connections`` sending ``records`` of ``record_size`` bytes per request, spread over ``partitions``."""

    connections: int
    partitions: int = 4
    records: int = 100
    record_size: int = 1024
    duration: float = 8.0

    @property
    def per_partition(self) -> int:
        return self.records // self.partitions


# Sustained ingest: a closed loop of 16 connections keeps about 8 requests (800 KB) waiting behind each flush;
# more connections let a flush carry more (up to LLOG_BATCH_MAX_BYTES). The highest rate of these is the one
# the target compares with raw PUTs.
INGEST = tuple(IngestShape(connections) for connections in (16, 64, 128))
# Requests of 256,000 bytes of values (the cost model's size, docs/COST.md) from 1, 4 and 16 clients: how many
# produce requests share one flush (one S3 PUT), the count the serve fleet's cost per GB divides by.
FLUSH_SHARING = tuple(LoadShape(clients=c, partitions=4, batch=250, record_size=1024, duration=6.0) for c in (1, 4, 16))
RAW_PUT_S = 4.0
MANY = LoadShape(clients=256, partitions=16, batch=1, record_size=100, duration=6.0)

# (key, what) of the produce scenarios, in table order.
PRODUCE_SCENARIOS = (
    ("idle", "idle: 1 client, 1 record to 1 partition"),
    ("partitions16", "1 client, 1 record to each of 16 partitions"),
    ("clients32", "32 clients, 1 record each to 1 partition"),
)
PEER_SCENARIOS = (
    ("idle", "idle: 1 client, 1 record"),
    ("clients32", "32 clients, 1 record each to 1 stream"),
)
