"""`make dev`: the whole system on this machine.

* Oxia standalone on 127.0.0.1:6648, data under .dev/oxia (kept across restarts);
* moto's S3 (and SQS) server on 127.0.0.1:4566, in memory (moto has no disk
  persistence, so objects are gone when this process stops);
* the HTTP API (`llog serve`: produce, consume, admin) on 127.0.0.1:8080;
* scheduled compaction (planner + worker, the Lambdas' code paths, run
  in-process every LLOG_DEV_COMPACTION_INTERVAL_S, default 60 s) and garbage
  collection (every LLOG_DEV_GC_INTERVAL_S, default 3600 s).
"""

from __future__ import annotations

import logging
import os
import signal
import sys
import threading
import uuid
from collections.abc import Callable
from pathlib import Path

from llog.admin import LogCatalog
from llog.claims import CompactorClaims
from llog.cli import LlogServer
from llog.compaction_service import plan_compaction, run_compaction_task
from llog.compactor import Compactor
from llog.config import env_int
from llog.devstack import MotoS3, OxiaProcess, find_oxia_binary
from llog.errors import LlogError
from llog.gc import GarbageCollector

ROOT = Path(__file__).resolve().parents[1]
OXIA_PORT = env_int(os.environ, "LLOG_DEV_OXIA_PORT", 6648)
S3_PORT = env_int(os.environ, "LLOG_DEV_S3_PORT", 4566)
HTTP_PORT = env_int(os.environ, "LLOG_DEV_HTTP_PORT", 8080)
BUCKET = os.environ.get("LLOG_S3_BUCKET", "leaderless-log-wal")

log = logging.getLogger("llog.dev")


def every(seconds: int, stop: threading.Event, job: Callable[[], None], name: str) -> threading.Thread:
    def loop() -> None:
        while not stop.wait(seconds):
            try:
                job()
            except LlogError as exc:
                log.warning("%s failed: %s", name, exc)

    thread = threading.Thread(target=loop, name=name, daemon=True)
    thread.start()
    return thread


def compaction_pass(compactor: Compactor, claims: CompactorClaims) -> None:
    """What the planner and worker Lambdas do, in-process."""
    plan = plan_compaction(LogCatalog(compactor.oxia, root=compactor.root), min_lag=1)
    for task in plan.tasks:
        outcome = run_compaction_task(task, compactor, claims, budget_s=30)
        if outcome.runs:
            log.info("compacted %s/%s: %s, %d records", task.topic, task.partition, outcome.outcome,
                     outcome.records)


def main() -> int:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    binary = find_oxia_binary([ROOT / ".tools" / "bin"])
    if binary is None:
        reason_file = ROOT / ".tools" / "oxia-unavailable"
        reason = reason_file.read_text().strip() if reason_file.exists() else "run make setup"
        print(f"make dev needs the Oxia server: {reason}", file=sys.stderr)
        return 1

    oxia = OxiaProcess(binary, ROOT / ".dev" / "oxia", port=OXIA_PORT, fsync=True)
    s3 = MotoS3(port=S3_PORT)
    try:
        oxia.start()
        s3.start()
        s3.create_bucket(BUCKET)
    except LlogError as exc:
        print(f"could not start the local stack: {exc}", file=sys.stderr)
        oxia.stop()
        return 1
    env = {
        "LLOG_OXIA_SERVICE_ADDRESS": oxia.address,
        "LLOG_S3_BUCKET": BUCKET,
        "LLOG_S3_ENDPOINT_URL": s3.endpoint_url,
        "LLOG_S3_REGION_NAME": s3.region,
        "LLOG_S3_ACCESS_KEY_ID": "testing",
        "LLOG_S3_SECRET_ACCESS_KEY": "testing",
    }
    os.environ.update(env)

    stop = threading.Event()
    compactor = Compactor.from_env()
    claims = CompactorClaims(compactor.oxia, f"dev-{uuid.uuid4().hex[:8]}")
    collector = GarbageCollector.from_env()
    server = LlogServer("127.0.0.1", HTTP_PORT).start()
    every(env_int(os.environ, "LLOG_DEV_COMPACTION_INTERVAL_S", 60, minimum=1), stop,
          lambda: compaction_pass(compactor, claims), "dev-compaction")
    every(env_int(os.environ, "LLOG_DEV_GC_INTERVAL_S", 3600, minimum=1), stop,
          lambda: log.info("gc: %s", collector.collect()), "dev-gc")

    exports = "\n".join(f"  export {k}={v}" for k, v in env.items())
    print(f"""
llog is up.
  HTTP API         {server.url}   (POST /produce, POST /consume, GET /topics, GET /health, /metrics)
  Oxia standalone  {oxia.address}   (data: .dev/oxia, log: {oxia.log_path})
  S3 (moto)        {s3.endpoint_url}   bucket {BUCKET} (in memory)
  compaction       in-process every {os.environ.get("LLOG_DEV_COMPACTION_INTERVAL_S", "60")} s

Try the curl examples in README.md. To use the library directly:
{exports}

Ctrl-C stops everything.
""", flush=True)

    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    try:
        stop.wait()
    except KeyboardInterrupt:
        stop.set()
    finally:
        server.shutdown()
        compactor.close()
        collector.close()
        s3.stop()
        oxia.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
