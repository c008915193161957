"""Fixed limits of the protocol, here so that the HTTP API's definitions (``llog.api.native.bodies``) show
them without loading the protocol's modules (and with them the storage clients) at a function's cold start."""

from __future__ import annotations

MAX_PARTITIONS = 10_000  # of a topic
MIN_SESSION_TIMEOUT_MS = 1_000  # of a consumer group member
MAX_SESSION_TIMEOUT_MS = 300_000
DEFAULT_SESSION_TIMEOUT_MS = 10_000
MAX_TOPICS_PER_MEMBER = 100  # a group's record is rewritten by every heartbeat: this keeps it small
