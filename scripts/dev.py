"""`make dev`: the whole system on this machine, its data kept across restarts.

* Oxia standalone on 127.0.0.1:6648, data under .dev/oxia;
* VersityGW (a real S3-compatible server, POSIX backend) on 127.0.0.1:4566,
  objects under .dev/s3 (bucket leaderless-log-wal, credentials testing/testing);
* the HTTP API (`llog serve`: produce, consume, admin, /metrics, /openapi.json) on 127.0.0.1:8080, and the
  console at /console (docs/CONSOLE.md); or, with LLOG_DEV_FRONT=lambda, what `cdk deploy` would run: the dev
  stage's REST API as synthesized (routes, request models, gateway responses) in front of the produce, consume
  and admin functions, built as `cdk synth` builds them and run under AWS's Lambda Runtime Interface Emulator
  (devserver/lambda_front.py; docs/DEPLOY.md, "make dev on the deployed code path");
* scheduled compaction (planner + worker, the Lambdas' code paths, run
  in-process every LLOG_DEV_COMPACTION_INTERVAL_S, default 60 s) and garbage
  collection (every LLOG_DEV_GC_INTERVAL_S, default 3600 s).

Oxia's index points at S3 objects, so the two data directories go together:
both kept, or both deleted by `make dev-reset`. If only one of them exists,
this refuses to start rather than serve a log whose records are missing; when
the objects are there without the index, it first offers `llog rebuild`
(docs/RECOVERY.md), which keeps them, and only then `make dev-reset`.

Overrides: LLOG_DEV_DIR (default .dev), LLOG_DEV_OXIA_PORT, LLOG_DEV_S3_PORT,
LLOG_DEV_HTTP_PORT, LLOG_S3_BUCKET, LLOG_DEV_FRONT (serve, the default, or lambda),
LLOG_DEV_LAMBDA_CONCURRENCY (lambda: execution environments per function, default 4).
"""

from __future__ import annotations

import json
import logging
import os
import signal
import sys
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from devserver.devstack import (
    VERSITYGW_BUCKETS,
    OxiaProcess,
    VersityGW,
    find_oxia_binary,
    find_versitygw_binary,
)
from devserver.emulator import EmulatorUnavailable, find_rie, find_runtime_python, local_endpoints, synthesize
from devserver.lambda_front import LambdaFront, start_front
from functions.common import names, routes
from llog.config import CompactionScheduleConfig, env_int, kinesis_account_from_env, root_prefix_from_env
from llog.errors import InvalidTopicName, LlogError
from llog.format.keys import validate_topic
from llog.format.kv.namespace import NamespaceKeys
from llog.protocol.catalog import LogCatalog
from llog.protocol.claims import CompactorClaims
from llog.protocol.compaction import Compactor
from llog.protocol.gc import GarbageCollector
from llog.service.compaction import plan_compaction, run_compaction_task
from llog.service.keys import AccessKeys, KeyPermissions
from llog.store.sealing import sealer_from_env
from server import console
from server.serve import SERVE_PATHS, LlogServer, logging_from_a_writer_thread

ROOT = Path(__file__).resolve().parents[1]
TOOLS = ROOT / ".tools"
DEV_DIR = Path(os.environ.get("LLOG_DEV_DIR") or ROOT / ".dev").resolve()
OXIA_DIR = DEV_DIR / "oxia"
S3_DIR = DEV_DIR / "s3"
PID_FILE = DEV_DIR / "dev.pid"
OXIA_PORT = env_int(os.environ, "LLOG_DEV_OXIA_PORT", 6648)
S3_PORT = env_int(os.environ, "LLOG_DEV_S3_PORT", 4566)
HTTP_PORT = env_int(os.environ, "LLOG_DEV_HTTP_PORT", 8080)
FRONTS = ("serve", "lambda")
LAMBDA_DIR = DEV_DIR / "lambda"  # the synthesized stack, its layer and the functions' tree: rebuilt as needed
BUCKET = os.environ.get("LLOG_S3_BUCKET", "leaderless-log-wal")
# Seals the secrets of the Kinesis API's access keys (`llog keys`); created on first use.
KEYS_SEALING_KEY_FILE = os.environ.get("LLOG_KEYS_SEALING_KEY_FILE") or str(DEV_DIR / "keys-sealing.key")
ACCESS_KEY_ID = SECRET_ACCESS_KEY = "testing"
KINESIS_KEY_FILE = DEV_DIR / "kinesis-key.json"  # the key make dev prints for the Kinesis API, kept across runs

log = logging.getLogger("llog.dev")


def shown(path: Path) -> str:
    """``path`` relative to the checkout when it is inside it (as the README names it)."""
    try:
        return str(path.relative_to(ROOT))
    except ValueError:
        return str(path)


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
    """What the planner and worker Lambdas do, in-process, with their settings (``LLOG_COMPACTION_*``)."""
    config = CompactionScheduleConfig.from_env()
    catalog = LogCatalog(compactor.storage.oxia, root=compactor.storage.root)
    plan = plan_compaction(catalog, min_lag=config.min_lag, max_delay_ms=config.max_delay_ms)
    for task in plan.tasks:
        outcome = run_compaction_task(task, compactor, claims, budget_s=30)
        if outcome.runs:
            log.info("compacted %s/%s: %s, %d records", task.topic, task.partition, outcome.outcome, outcome.records)


def unavailable_reason(name: str) -> str:
    """Why ``name`` could not be installed, as make setup recorded it."""
    reason_file = TOOLS / f"{name}-unavailable"
    return reason_file.read_text().strip() if reason_file.exists() else "run make setup"


def running_pid() -> int | None:
    """The pid of a ``make dev`` already running on DEV_DIR, if any (a stale pid file is ignored)."""
    try:
        pid = int(PID_FILE.read_text().strip())
        os.kill(pid, 0)
    except (OSError, ValueError):
        return None
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return pid  # no /proc: trust the pid file
    return pid if b"dev.py" in cmdline else None


def topic_folders(objects: Path) -> list[str]:
    """The topics whose folders are under ``objects`` (a bucket's root prefix, as VersityGW keeps it on disk)."""
    found = []
    for folder in sorted(objects.iterdir()) if objects.is_dir() else []:
        try:
            found.append(validate_topic(folder.name))
        except InvalidTopicName:  # wal-shared, __catalog
            continue
    return found


def broken_data(dev_dir: Path, bucket: str, root_prefix: str) -> str | None:
    """Why make dev refuses to serve ``dev_dir``, and what to do, or None if it can serve it.

    Oxia's index names S3 objects: an index without its objects reads as
    BlobNotFound, objects without an index are an empty log plus garbage. The
    objects alone can give their index back (llog rebuild), so that comes
    before make dev-reset, which deletes them.
    """
    oxia_dir, s3_dir = dev_dir / "oxia", dev_dir / "s3"
    has_oxia, has_s3 = oxia_dir.exists(), s3_dir.exists()
    if has_oxia == has_s3:
        return None
    head = "make dev will not serve a broken log: "
    if has_oxia:
        return (f"{head}{shown(oxia_dir)} exists but {shown(s3_dir)} does not: Oxia's index would point at S3 "
                "objects that are not there (left by a make dev that kept S3 in memory?).\n"
                "Run `make dev-reset` to delete both and start from an empty log.")  # fmt: skip
    bucket_dir = s3_dir / VERSITYGW_BUCKETS / bucket
    objects = bucket_dir / root_prefix
    topics = topic_folders(objects)
    # GC's first run writes the namespace identity; from then on GC waits for adopt-namespace after a rebuild.
    adopt = ("\n     then: .venv/bin/llog adopt-namespace"
             if (bucket_dir / NamespaceKeys(root_prefix).object_key).exists() else "")  # fmt: skip
    hold_off = "LLOG_DEV_COMPACTION_INTERVAL_S=86400 LLOG_DEV_GC_INTERVAL_S=86400"
    return f"""{head}{shown(s3_dir)} exists but {shown(oxia_dir)} does not:
the S3 objects have no index to find them by.
To keep the records, rebuild the index from the objects (docs/RECOVERY.md, "Rebuild from S3"; it recovers every
record compacted before the index was lost, and reports the newer ones lost):
  1. mkdir {shown(oxia_dir)} && {hold_off} make dev
     (an empty index, with compaction and GC held off; produce nothing until step 3)
  2. in another shell, with the exports it prints, for each topic folder in {shown(objects)}
     ({", ".join(topics) or "none found"}):
       .venv/bin/llog rebuild --topic TOPIC{adopt}
  3. stop that make dev (Ctrl-C) and run make dev again.
Or start from an empty log: `make dev-reset` deletes both directories, and these records with them."""


def wrapped(head: str, items: list[str], width: int = 118) -> str:
    """``head`` then ``items`` separated by commas, over as many lines as ``width`` needs, no item split."""
    lines, line = [], head
    for i, item in enumerate(items):
        text = item + ("," if i < len(items) - 1 else "")
        if line.strip() and len(line) + 1 + len(text) > width:
            lines.append(line.rstrip())
            line = " " * len(head)
        line += text if line.endswith(" ") else " " + text
    return "\n".join([*lines, line])


@dataclass(frozen=True)
class Front:
    """What answers on the HTTP port, as the banner names it."""

    description: str
    routes: dict[str, list[str]]  # by function (or server), "METHOD /path"
    console: bool


def serve_front() -> Front:
    by_function: dict[str, list[str]] = {}
    for route in routes.ROUTES:
        by_function.setdefault(route.function, []).append(f"{route.method} {route.resource}")
    by_function[names.KINESIS] = [f"POST {routes.KINESIS_PATH}"]
    by_function["llog serve"] = [f"GET {path}" for path in SERVE_PATHS]
    return Front("llog serve: the produce, consume, admin and kinesis functions' routes", by_function, console=True)


def lambda_front(front: LambdaFront) -> Front:
    names_by_id = {e.spec.logical_id: e.spec.name for pool in front.pools.values() for e in pool.environments}
    by_function: dict[str, list[str]] = {name: [] for name in names.FUNCTIONS if name in names_by_id.values()}
    for (method, resource), served in sorted(front.api.methods.items(), key=lambda item: item[0][::-1]):
        if method != "ANY":
            by_function[names_by_id[served.function]].append(f"{method} {resource}")
    description = (
        "the dev stage's REST API as synthesized, in front of its functions under aws-lambda-rie;\n"
        "                   no SigV4 or API key is checked, no /console or /metrics (LLOG_DEV_FRONT=lambda)"
    )
    return Front(description, by_function, console=False)


def dev_kinesis_key(keys: AccessKeys) -> tuple[str, str]:
    """The key make dev prints for the Kinesis API (every stream; read, write, admin): the last run's, while it
    is still issued (``llog keys revoke`` it, and the next run issues another)."""
    if KINESIS_KEY_FILE.exists():
        kept = json.loads(KINESIS_KEY_FILE.read_text())
        if keys.lookup(kept["access_key_id"]) is not None:
            return kept["access_key_id"], kept["secret_access_key"]
    key, secret = keys.create("make-dev", KeyPermissions(read=True, write=True, admin=True))
    KINESIS_KEY_FILE.touch(mode=0o600)
    KINESIS_KEY_FILE.write_text(json.dumps({"access_key_id": key.access_key_id, "secret_access_key": secret}))
    return key.access_key_id, secret


def banner(url: str, front: Front, oxia: OxiaProcess, s3: VersityGW, compaction_s: int, gc_s: int,
           first_start: bool, env: dict[str, str], kinesis_key: tuple[str, str]) -> str:  # fmt: skip
    """What make dev prints once it serves: every route and page of its front, the servers, where the data is."""
    served = "\n".join(wrapped(f"    {name:<13}", paths) for name, paths in front.routes.items())
    console_line = ""
    if front.console:
        pages = "topics, records, groups, live charts: docs/CONSOLE.md"
        console_line = f"\n  console          {url}{console.ROUTE}   ({pages})"
    exports = "\n".join(f"  export {k}={v}" for k, v in env.items())
    state = "new, empty" if first_start else "kept from the last run"
    return f"""
llog is up.
  HTTP API         {url}   ({front.description})
{served}{console_line}
  Kinesis API      {url}/kinesis   key {kinesis_key[0]}, secret {kinesis_key[1]}   (docs/KINESIS.md)
  Oxia standalone  {oxia.address}   data {shown(oxia.data_dir)}, log {shown(oxia.log_path)}
  S3 (VersityGW)   {s3.endpoint_url}   bucket {BUCKET}: objects in {shown(s3.root_dir / BUCKET)}, \
log {shown(s3.log_path)}
  compaction       in-process every {compaction_s} s; garbage collection every {gc_s} s

Data ({state}) lives in {shown(DEV_DIR)} and survives restarts; `make dev-reset` deletes it.
Try the curl examples in README.md. To use the library directly:
{exports}

Ctrl-C stops everything.
"""


def start_lambda_front(oxia: OxiaProcess, s3: VersityGW) -> LambdaFront:
    """The dev stage as ``cdk synth`` builds it, its REST API on HTTP_PORT in front of its functions."""
    print("LLOG_DEV_FRONT=lambda: synthesizing the dev stack and bundling its layer for this machine "
          f"(into {shown(LAMBDA_DIR)}; the first time takes a minute or two) ...", flush=True)  # fmt: skip
    started = time.monotonic()
    synthesized = synthesize({"llog:stage": "dev"}, LAMBDA_DIR / "cdk.out", LAMBDA_DIR / "cdk.out-layer")
    print(f"  synthesized in {time.monotonic() - started:.0f} s; starting the functions of its REST API "
          "under aws-lambda-rie ...", flush=True)  # fmt: skip
    local = {
        "LLOG_OXIA_SERVICE_ADDRESS": oxia.address,
        "LLOG_S3_BUCKET": BUCKET,
        "LLOG_ROOT_PREFIX": root_prefix_from_env(os.environ),
        "LLOG_KINESIS_ACCOUNT_ID": kinesis_account_from_env(os.environ),
        # No KMS stands in here (VersityGW serves S3 alone), and the Lambda runtime has no AES for a local key
        # file: the kinesis function answers /kinesis, but cannot open an issued key's secret.
        "LLOG_KEYS_KMS_KEY_ID": "",
    }
    endpoints = local_endpoints(s3.endpoint_url, s3.region, ACCESS_KEY_ID, SECRET_ACCESS_KEY)
    concurrency = env_int(os.environ, "LLOG_DEV_LAMBDA_CONCURRENCY", 4, minimum=1)
    front = start_front(synthesized, LAMBDA_DIR / "run", local, endpoints, "127.0.0.1", HTTP_PORT,
                        concurrency=concurrency)  # fmt: skip
    functions = sorted(e.spec.name for pool in front.pools.values() for e in pool.environments)
    print(f"  started {', '.join(functions)} (up to {concurrency} environments each; logs in "
          f"{shown(LAMBDA_DIR / 'run')})", flush=True)  # fmt: skip
    return front.start()


def main() -> int:
    with logging_from_a_writer_thread():
        return _run()


def _run() -> int:
    oxia_bin, vgw_bin = find_oxia_binary([TOOLS / "bin"]), find_versitygw_binary([TOOLS / "bin"])
    if oxia_bin is None:
        print(f"make dev needs the Oxia server: {unavailable_reason('oxia')}", file=sys.stderr)
        return 1
    if vgw_bin is None:
        print(f"make dev needs VersityGW, its S3 server: {unavailable_reason('versitygw')}", file=sys.stderr)
        return 1
    front_kind = os.environ.get("LLOG_DEV_FRONT") or "serve"
    if front_kind not in FRONTS:
        print(f"LLOG_DEV_FRONT must be one of {', '.join(FRONTS)}, not {front_kind!r}", file=sys.stderr)
        return 2
    if front_kind == "lambda":
        try:
            find_rie(), find_runtime_python()
        except EmulatorUnavailable as unavailable:
            print(f"LLOG_DEV_FRONT=lambda make dev needs the Lambda emulator and runtime: {unavailable}",
                  file=sys.stderr)  # fmt: skip
            return 1
    other = running_pid()
    if other is not None:
        print(f"make dev already runs on {shown(DEV_DIR)} (pid {other}); stop it first (Ctrl-C)", file=sys.stderr)
        return 1
    refusal = broken_data(DEV_DIR, BUCKET, root_prefix_from_env(os.environ))
    if refusal is not None:
        print(refusal, file=sys.stderr)
        return 1
    first_start = not OXIA_DIR.exists()
    # Both directories before anything writes in one of them: an interrupted first start stays consistent.
    OXIA_DIR.mkdir(parents=True, exist_ok=True)
    S3_DIR.mkdir(parents=True, exist_ok=True)
    PID_FILE.write_text(f"{os.getpid()}\n")

    stop = threading.Event()
    signalled: list[str] = []

    def request_stop(signum: int, _frame: Any) -> None:
        signalled.append(signal.Signals(signum).name)  # only this: the main loop below acts on it

    # Ctrl-C reaches only this process (the servers run in sessions of their own): it stops them in order.
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, request_stop)

    oxia = OxiaProcess(oxia_bin, OXIA_DIR, port=OXIA_PORT, fsync=True, new_session=True)
    s3 = VersityGW(
        vgw_bin,
        S3_DIR,
        port=S3_PORT,
        access_key_id=ACCESS_KEY_ID,
        secret_access_key=SECRET_ACCESS_KEY,
        new_session=True,
    )
    stop_front: Callable[[], None] | None = None
    threads: list[threading.Thread] = []
    closers: list[Callable[[], None]] = []
    try:
        try:
            oxia_log = logging.getLogger("oxia")
            oxia_log.setLevel(logging.ERROR)  # not every refused readiness probe while Oxia starts
            try:
                oxia.start()
            finally:
                oxia_log.setLevel(logging.NOTSET)
            s3.start()
            s3.create_bucket(BUCKET)
        except LlogError as exc:
            print(f"could not start the local stack: {exc}", file=sys.stderr)
            return 1
        env = {
            "LLOG_OXIA_SERVICE_ADDRESS": oxia.address,
            "LLOG_S3_BUCKET": BUCKET,
            "LLOG_S3_ENDPOINT_URL": s3.endpoint_url,
            "LLOG_S3_REGION_NAME": s3.region,
            "LLOG_S3_ACCESS_KEY_ID": ACCESS_KEY_ID,
            "LLOG_S3_SECRET_ACCESS_KEY": SECRET_ACCESS_KEY,
            "LLOG_KEYS_SEALING_KEY_FILE": KEYS_SEALING_KEY_FILE,
        }
        os.environ.update(env)

        compactor = Compactor.from_env()
        closers.append(compactor.close)
        claims = CompactorClaims(compactor.storage.oxia, f"dev-{uuid.uuid4().hex[:8]}", root=compactor.storage.root)
        collector = GarbageCollector.from_env()
        closers.append(collector.close)
        try:
            if front_kind == "lambda":
                front = start_lambda_front(oxia, s3)
                url, shown_front, stop_front = front.url, lambda_front(front), front.stop
            else:
                server = LlogServer("127.0.0.1", HTTP_PORT).start()
                url, shown_front, stop_front = server.url, serve_front(), server.shutdown
        except OSError as exc:
            print(
                f"could not serve the HTTP API on 127.0.0.1:{HTTP_PORT}: {exc} (LLOG_DEV_HTTP_PORT moves it)",
                file=sys.stderr,
            )
            return 1
        compaction_s = env_int(os.environ, "LLOG_DEV_COMPACTION_INTERVAL_S", 60, minimum=1)
        gc_s = env_int(os.environ, "LLOG_DEV_GC_INTERVAL_S", 3600, minimum=1)
        threads.append(every(compaction_s, stop, lambda: compaction_pass(compactor, claims), "dev-compaction"))
        threads.append(every(gc_s, stop, lambda: log.info("gc: %s", collector.collect()), "dev-gc"))

        keys = AccessKeys(compactor.storage.oxia, root=compactor.storage.root, sealer=sealer_from_env())
        kinesis_key = dev_kinesis_key(keys)
        print(banner(url, shown_front, oxia, s3, compaction_s, gc_s, first_start, env, kinesis_key), flush=True)
        while not signalled:
            time.sleep(0.2)
        log.info("%s: stopping", signalled[0])
    finally:
        stop.set()
        if stop_front is not None:
            stop_front()  # requests in flight finish first
        for thread in threads:
            thread.join(35)  # a compaction task's budget is 30 s
        for close in closers:
            close()
        s3.stop()
        oxia.stop()
        if PID_FILE.exists() and PID_FILE.read_text().strip() == str(os.getpid()):
            PID_FILE.unlink()
        log.info("stopped; data kept in %s", shown(DEV_DIR))
    return 0


if __name__ == "__main__":
    sys.exit(main())
