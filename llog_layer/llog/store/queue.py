"""The compaction task queue (SQS): the planner sends one message per partition to compact.

A botocore client, created (and botocore imported) on the first send: see ``llog.store.s3`` for why not boto3.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from llog.config import CompactionScheduleConfig

SQS_BATCH = 10  # SendMessageBatch limit

log = logging.getLogger(__name__)


class TaskQueue:
    """An SQS queue, sent to in batches; the client is created on the first send."""

    def __init__(self, url: str, client: Any = None) -> None:
        self.url = url
        self._client = client

    @classmethod
    def from_env(cls) -> TaskQueue:
        return cls(CompactionScheduleConfig.from_env().require_queue_url())

    def send(self, bodies: Sequence[str]) -> int:
        """Send every message body; returns how many the queue accepted (refusals are logged)."""
        if self._client is None:
            import botocore.session

            self._client = botocore.session.Session().create_client("sqs")
        sent = 0
        for start in range(0, len(bodies), SQS_BATCH):
            chunk = bodies[start : start + SQS_BATCH]
            response = self._client.send_message_batch(
                QueueUrl=self.url, Entries=[{"Id": str(i), "MessageBody": body} for i, body in enumerate(chunk)]
            )
            sent += len(response.get("Successful", []))
            for failure in response.get("Failed", []):
                log.error("the queue refused a message: %s", failure)
        return sent
