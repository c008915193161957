"""What ``llog serve`` shares between its routes: one Oxia store, one S3 client, the batcher and the tail cache,
and the services over them that count the traffic a Lambda would report as EMF metrics."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from functions.common.lazy import Lazy
from functions.produce import app as produce_app
from llog.api.kinesis.endpoint import DEFAULT_ACCOUNT
from llog.config import WriterConfig, kinesis_account_from_env
from llog.protocol.append import AppendResult, LogWriter, SharedAppendGroup
from llog.protocol.read import LogReader
from llog.service.admin import AdminService
from llog.service.consume import ConsumeRequest, ConsumeService, PartitionFetch
from llog.service.keys import AccessKeys
from llog.service.produce import PreparedProduce, ProduceService
from llog.service.tail_cache import TailCache
from llog.store.oxia import OxiaStore
from llog.store.s3 import BlobStore
from llog.store.sealing import sealer_from_env
from llog.store.storage import Storage
from server.batching import BatchingConfig, BatchingProducer
from server.billing import BillingConfig, S3Billing


class Traffic:
    """Records and bytes produced and consumed (the EMF metrics of a Lambda, which llog serve turns off)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counts = {"produced_records": 0, "produced_bytes": 0, "consumed_records": 0, "consumed_bytes": 0}

    def add(self, direction: str, records: int, nbytes: int) -> None:
        with self._lock:
            self._counts[f"{direction}_records"] += records
            self._counts[f"{direction}_bytes"] += nbytes

    def snapshot(self) -> dict[str, int]:
        with self._lock:
            return dict(self._counts)


class CountedProduceService(ProduceService):
    """``ProduceService`` counting what it appended, as the produce handler's ``RecordsProduced`` does."""

    traffic: Traffic

    def finish(
        self, prepared: PreparedProduce, appended: Sequence[AppendResult], *, cached_only: bool = False
    ) -> tuple[list[SharedAppendGroup], list[AppendResult]] | None:
        finished = super().finish(prepared, appended, cached_only=cached_only)
        if finished is not None:
            groups, results = finished
            ok = [i for i, r in enumerate(results) if r.ok]
            nbytes = sum(produce_app.group_bytes(groups[i]) for i in ok)
            self.traffic.add("produced", sum(results[i].count for i in ok), nbytes)
        return finished


class CountedConsumeService(ConsumeService):
    """``ConsumeService`` counting what it returned, as the consume handler's ``RecordsConsumed`` does."""

    traffic: Traffic

    def consume(self, request: ConsumeRequest) -> list[PartitionFetch]:
        results = super().consume(request)
        self.traffic.add("consumed", sum(len(r.records) for r in results), sum(r.nbytes for r in results))
        return results


class CacheClearingAdminService(AdminService):
    """``AdminService`` whose topic delete also empties the tail cache of the topic at once (other tasks
    learn it from Oxia: the delete fences every partition, a change of ``meta/control`` they are notified of)."""

    def __init__(self, oxia: OxiaStore, *, root: str, writer: LogWriter, tail_cache: TailCache) -> None:
        super().__init__(oxia, root=root, writer=writer)
        self.tail_cache = tail_cache

    def delete_topic(self, topic: str) -> dict[str, Any]:
        try:
            return super().delete_topic(topic)
        finally:
            self.tail_cache.forget_topic(topic)


@dataclass
class ServeServices:
    """One Oxia store and one S3 client for the whole process, shared by every route."""

    oxia: OxiaStore
    blobs: BlobStore
    writer: LogWriter
    batcher: BatchingProducer
    tail_cache: TailCache
    produce: ProduceService
    consume: ConsumeService
    root: str
    billing: S3Billing
    traffic: Traffic
    account: str = DEFAULT_ACCOUNT  # of the Kinesis API's stream ARNs (LLOG_KINESIS_ACCOUNT_ID)
    _keys: Lazy[AccessKeys] | None = field(default=None, repr=False)

    def access_keys(self) -> AccessKeys:
        """The issued keys the Kinesis API checks signatures against: opened by its first request, so a server
        without a sealing key set up serves the native API all the same."""
        if self._keys is None:
            self._keys = Lazy(lambda: AccessKeys(self.oxia, root=self.root, sealer=sealer_from_env()))
        return self._keys.get()

    @classmethod
    def from_env(cls) -> ServeServices:
        """Build everything from ``LLOG_*``; touches no network (Oxia connects on first use)."""
        storage = Storage.from_env()
        oxia, blobs, root = storage.oxia, storage.blobs, storage.root
        cache = TailCache.from_env()
        writer = LogWriter(
            storage, config=WriterConfig.from_env(), commit_listener=cache.on_commit if cache.enabled else None
        )
        batcher = BatchingProducer(writer, BatchingConfig.from_env())
        traffic = Traffic()
        produce = CountedProduceService(writer, batcher=batcher)
        consume = CountedConsumeService(LogReader(storage), tail_cache=cache)
        produce.traffic = consume.traffic = traffic
        return cls(
            oxia=oxia,
            blobs=blobs,
            writer=writer,
            batcher=batcher,
            tail_cache=cache,
            produce=produce,
            consume=consume,
            root=root,
            billing=S3Billing.for_root(blobs, storage.bucket, root, BillingConfig.from_env()),
            traffic=traffic,
            account=kinesis_account_from_env(),
        )

    def close(self) -> None:
        """Flush the batcher, then close the Oxia store (shared: closing it twice is harmless)."""
        self.produce.close()
        self.consume.close()
