"""The S3-facing code against a real S3-compatible server (VersityGW), beside moto; make dev's round trip.

The rest of the suite talks to moto, an in-memory model of S3. VersityGW
(POSIX backend: objects are files) is make dev's S3 server, so the blob store
contract runs here against both servers, and the protocols that list and
delete objects (append and read, garbage collection, compaction) against
VersityGW. What differs is written up in docs/S3_COMPATIBILITY.md.

VersityGW comes from ``make setup`` (``.tools/bin/versitygw``),
``$VERSITYGW_BIN`` or ``PATH``; without it these tests are skipped with the
reason, and ``LLOG_REQUIRE_VERSITYGW=1`` makes that a failure.
"""

from __future__ import annotations

import base64
import hashlib
import json
import logging
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import urllib.request
import uuid
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any, NamedTuple, NoReturn

import boto3
import google_crc32c
import pytest

from devserver.devstack import VersityGW, find_oxia_binary, find_versitygw_binary, free_port
from llog.errors import BlobNotFound, BlobStoreUnavailable, ConfigurationError, CorruptData
from llog.format.codec import Record
from llog.format.keys import PartitionKeys, S3Location
from llog.protocol.append import LogWriter, SharedAppendGroup
from llog.protocol.compaction import Compactor
from llog.protocol.faults import WRITER_AFTER_BLOB_PUT as AFTER_BLOB_PUT
from llog.protocol.manifest import ManifestStore
from llog.protocol.read import LogReader
from llog.store import s3 as s3_module
from llog.store.s3 import BlobStore, crc32c_checksum
from llog.store.storage import Storage
from tests.conftest import BUCKET
from tests.faults import SimulatedCrash, crash_at
from tests.integration.test_gc import collector, wal_keys
from tests.s3_proxy import S3Proxy, s3_proxy

ROOT = Path(__file__).resolve().parents[2]
TOOLS_BIN = ROOT / ".tools" / "bin"


def _unavailable(what: str, require_var: str, reason_file: Path) -> NoReturn:
    reason = reason_file.read_text().strip() if reason_file.exists() else "run make setup"
    if os.environ.get(require_var):
        pytest.fail(f"{what} is required ({require_var} is set): {reason}")
    pytest.skip(f"no {what}: {reason}")


def versitygw_binary() -> str:
    binary = find_versitygw_binary([TOOLS_BIN])
    if binary is None:
        _unavailable("VersityGW", "LLOG_REQUIRE_VERSITYGW", ROOT / ".tools" / "versitygw-unavailable")
    return binary


@pytest.fixture(scope="session")
def versitygw(tmp_path_factory: pytest.TempPathFactory) -> Iterator[VersityGW]:
    server = VersityGW(versitygw_binary(), tmp_path_factory.mktemp("versitygw"))
    server.start()
    try:
        server.create_bucket(BUCKET)
        yield server
    finally:
        server.stop()


@pytest.fixture
def blob_store(versitygw: VersityGW) -> BlobStore:
    """VersityGW in place of conftest's moto: this module's stores, writers and readers talk to it."""
    return BlobStore(versitygw.config(BUCKET))


class S3Server(NamedTuple):
    name: str  # "moto" or "versitygw"
    blobs: BlobStore


@pytest.fixture(params=["moto", "versitygw"])
def s3_server(request: pytest.FixtureRequest) -> S3Server:
    """The same blob store contract against both servers: a difference fails on one of them."""
    if request.param == "moto":
        return S3Server("moto", BlobStore(request.getfixturevalue("s3_config")))
    return S3Server("versitygw", BlobStore(request.getfixturevalue("versitygw").config(BUCKET)))


@pytest.fixture
def any_blobs(s3_server: S3Server) -> BlobStore:
    return s3_server.blobs


# --- the blob store contract, on both servers ----------------------------------------------------


def test_put_get_range_head_and_metadata(any_blobs: BlobStore) -> None:
    location = S3Location(BUCKET, f"llog-s3/{uuid.uuid4()}")
    body = bytes(range(256)) * 40
    any_blobs.put(location, body, metadata={"llog-kind": "wal", "Mixed-Case": "Value"})

    assert any_blobs.get(location) == body
    assert any_blobs.get_range(location, 0, 1) == body[:1]
    assert any_blobs.get_range(location, 1000, 517) == body[1000:1517]
    assert any_blobs.get_range(location, len(body) - 3, 3) == body[-3:]
    info = any_blobs.head(location)
    assert (info.key, info.size) == (location.key, len(body))
    assert abs(info.last_modified_ms - time.time() * 1000) < 60_000
    # S3 lower-cases user metadata names (HTTP headers); values are kept as they are.
    assert info.metadata == {"llog-kind": "wal", "mixed-case": "Value"}

    with pytest.raises(CorruptData, match="returned 3 bytes, expected 10"):
        any_blobs.get_range(location, len(body) - 3, 10)
    with pytest.raises(CorruptData, match="shorter than the requested range"):
        any_blobs.get_range(location, len(body) + 5, 10)

    empty = S3Location(BUCKET, f"llog-s3/{uuid.uuid4()}")
    any_blobs.put(empty, b"")
    assert any_blobs.get(empty) == b""
    assert any_blobs.head(empty).size == 0


@pytest.fixture
def proxied_blobs(any_blobs: BlobStore) -> Iterator[tuple[BlobStore, S3Proxy]]:
    """``any_blobs``'s server behind a recording proxy (``tests/s3_proxy.py``): PUTs as they went on the wire."""
    assert any_blobs.config.endpoint_url
    with s3_proxy(any_blobs.config.endpoint_url) as proxy:
        yield BlobStore(replace(any_blobs.config, endpoint_url=proxy.endpoint_url)), proxy


def test_a_put_sends_its_body_without_waiting_for_100_continue(proxied_blobs: tuple[BlobStore, S3Proxy]) -> None:
    """Waiting for ``Expect: 100-continue`` costs a round trip per WAL write; a body here is one WAL blob."""
    blobs, proxy = proxied_blobs
    location = S3Location(BUCKET, f"llog-s3/{uuid.uuid4()}")
    blobs.put(location, b"x" * 5000)
    [put] = proxy.requests("PUT")
    assert "expect" not in put.headers
    assert put.body == b"x" * 5000
    assert blobs.get(location) == b"x" * 5000


def test_a_put_carries_the_crc32c_of_its_body_and_nothing_else(proxied_blobs: tuple[BlobStore, S3Proxy]) -> None:
    blobs, proxy = proxied_blobs
    body = bytes(range(256)) * 40
    location = S3Location(BUCKET, f"llog-s3/{uuid.uuid4()}")
    blobs.put(location, body, metadata={"first-offset": "7"})
    [put] = proxy.requests("PUT")
    independent = base64.b64encode(google_crc32c.value(body).to_bytes(4, "big")).decode()
    assert put.headers["x-amz-checksum-crc32c"] == independent
    assert [h for h in put.headers if h.startswith("x-amz-checksum-")] == ["x-amz-checksum-crc32c"]
    assert "x-amz-trailer" not in put.headers  # the body is sent as it is, not in chunks with a trailing checksum
    assert put.headers["content-length"] == str(len(body))
    # Over plain HTTP the signature covers the body as well (over TLS it is UNSIGNED-PAYLOAD: tests/unit).
    assert put.headers["x-amz-content-sha256"] == hashlib.sha256(body).hexdigest()
    assert put.path == f"/{BUCKET}/{location.key}"
    assert blobs.head(location).metadata == {"first-offset": "7"}
    assert blobs.get(location) == body


def test_a_key_is_escaped_in_the_put_and_read_back_as_it_was(any_blobs: BlobStore) -> None:
    location = S3Location(BUCKET, f"llog-s3/{uuid.uuid4()}/a b+c%d=e~f")
    any_blobs.put(location, b"escaped")
    assert any_blobs.get(location) == b"escaped"
    assert [o.key for o in any_blobs.list(BUCKET, location.key)] == [location.key]


def test_versitygw_keeps_the_crc32c_and_refuses_a_body_that_does_not_match_it(
    blob_store: BlobStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    body = b"a WAL blob" * 100
    location = S3Location(BUCKET, f"llog-s3/{uuid.uuid4()}")
    blob_store.put(location, body)
    head = blob_store._client.head_object(Bucket=BUCKET, Key=location.key, ChecksumMode="ENABLED")
    assert head["ChecksumCRC32C"] == crc32c_checksum(body)

    # A bit flipped after llog computed the checksum: the checksum sent is of other bytes than the body.
    monkeypatch.setattr(s3_module, "crc32c_checksum", lambda sent: crc32c_checksum(b"b" + sent[1:]))
    corrupted = S3Location(BUCKET, f"llog-s3/{uuid.uuid4()}")
    with pytest.raises(BlobStoreUnavailable, match="BadDigest"):
        blob_store.put(corrupted, body)
    with pytest.raises(BlobNotFound):
        blob_store.head(corrupted)


def test_versitygw_a_full_read_of_an_object_changed_on_disk_is_corrupt_data(
    versitygw: VersityGW, blob_store: BlobStore
) -> None:
    body = b"a WAL blob" * 100
    location = S3Location(BUCKET, f"llog-s3/{uuid.uuid4()}")
    blob_store.put(location, body)
    path = versitygw.root_dir / BUCKET / location.key
    path.write_bytes(b"b" + path.read_bytes()[1:])  # a bit rotted on the server's disk, its CRC32C kept
    with pytest.raises(CorruptData, match="does not match its CRC32C"):
        blob_store.get(location)
    assert blob_store.get_range(location, 1, 9) == body[1:10]  # a range is checked by the codec, not here


def test_versitygw_keeps_connections_open(versitygw: VersityGW, caplog: pytest.LogCaptureFixture) -> None:
    """As S3 does (make dev and the benchmarks start it so): a client's calls reuse its one connection."""
    blobs = BlobStore(versitygw.config(BUCKET))
    location = S3Location(BUCKET, f"llog-s3/{uuid.uuid4()}")
    blobs.put(location, b"x" * 100)
    with caplog.at_level(logging.DEBUG, logger="urllib3.connectionpool"):
        for _ in range(4):
            assert blobs.get(location) == b"x" * 100
    connects = [r.getMessage() for r in caplog.records if "connection" in r.getMessage().lower()]
    assert len(connects) == 1, connects
    assert connects[0].startswith("Starting new HTTP connection")


def test_missing_objects_and_buckets(any_blobs: BlobStore) -> None:
    missing = S3Location(BUCKET, f"llog-s3/{uuid.uuid4()}")
    with pytest.raises(BlobNotFound):
        any_blobs.get(missing)
    with pytest.raises(BlobNotFound):
        any_blobs.get_range(missing, 0, 10)
    with pytest.raises(BlobNotFound):
        any_blobs.head(missing)
    # a "folder" of existing keys is not an object either
    any_blobs.put(S3Location(BUCKET, f"{missing.key}/inside"), b"x")
    with pytest.raises(BlobNotFound):
        any_blobs.get(missing)

    with pytest.raises(ConfigurationError, match="NoSuchBucket"):
        any_blobs.put(S3Location("no-such-bucket-llog", "k"), b"x")
    with pytest.raises(ConfigurationError, match="NoSuchBucket"):
        list(any_blobs.list("no-such-bucket-llog", "llog/"))
    any_blobs.create_bucket(BUCKET)  # exists already: fine (VersityGW answers BucketAlreadyOwnedByYou)


def small_pages(blobs: BlobStore, max_keys: int = 2) -> None:
    """Make every listing page ``max_keys`` long, so continuation tokens are exercised."""

    def limit(params: dict[str, Any], **_: Any) -> None:
        params["MaxKeys"] = max_keys

    blobs.events.register("provide-client-params.s3.ListObjectsV2", limit)


def test_listing_is_in_key_order_across_folders_with_start_after_and_pages(any_blobs: BlobStore) -> None:
    small_pages(any_blobs)
    prefix = f"llog-s3/{uuid.uuid4().hex}/"
    # '-' and '.' sort before '/', '0' and '_' after it: a folder walk in name order would get these wrong.
    names = [
        "orders/partitions/0/a",
        "orders/partitions/0/b",
        "orders-eu/partitions/0/a",
        "orders.x/partitions/1/a",
        "orders0/partitions/0/a",
        "orders_z/partitions/0/a",
        "Orders/partitions/0/a",
        "wal-shared/0192",
    ]
    keys = [prefix + n for n in names]
    for key in keys:
        any_blobs.put(S3Location(BUCKET, key), b"x")

    assert [o.key for o in any_blobs.list(BUCKET, prefix)] == sorted(keys)
    after = prefix + "orders-eu/partitions/0/a"
    assert [o.key for o in any_blobs.list(BUCKET, prefix, start_after=after)] == [k for k in sorted(keys) if k > after]
    # start_after need not be a key that exists
    between = prefix + "orders/partitions/0/a0"
    assert [o.key for o in any_blobs.list(BUCKET, prefix, start_after=between)] == [
        k for k in sorted(keys) if k > between
    ]
    # a prefix that ends inside a name, not at a '/'
    assert [o.key for o in any_blobs.list(BUCKET, prefix + "orders")] == sorted(
        k for k in keys if k.startswith(prefix + "orders")
    )
    assert list(any_blobs.list_prefixes(BUCKET, prefix)) == sorted({prefix + n.split("/")[0] + "/" for n in names})


def test_delete_batch_and_emptied_folders_disappear(any_blobs: BlobStore) -> None:
    prefix = f"llog-s3/{uuid.uuid4().hex}/"
    keys = [f"{prefix}t{i}/partitions/0/{j:03d}" for i in range(2) for j in range(3)]
    for key in keys:
        any_blobs.put(S3Location(BUCKET, key), b"x")

    any_blobs.delete(BUCKET, [*keys[:3], f"{prefix}never-existed", f"{prefix}t0"])  # missing keys are fine

    assert [o.key for o in any_blobs.list(BUCKET, prefix)] == keys[3:]
    assert list(any_blobs.list_prefixes(BUCKET, prefix)) == [f"{prefix}t1/"]  # no empty t0/ left behind
    any_blobs.delete(BUCKET, keys)  # again, with everything already gone or going
    assert list(any_blobs.list(BUCKET, prefix)) == []
    assert list(any_blobs.list_prefixes(BUCKET, prefix)) == []


def test_a_key_that_is_another_keys_folder(s3_server: S3Server) -> None:
    """S3 keys are flat names; VersityGW's are paths: ``a/b`` cannot be a file and a folder at once.

    llog's key layout never needs both (docs/S3_COMPATIBILITY.md), so this
    only pins the difference down.
    """
    blobs = s3_server.blobs
    base = f"llog-s3/{uuid.uuid4().hex}/a"
    blobs.put(S3Location(BUCKET, f"{base}/b"), b"inside")
    folder_as_object = S3Location(BUCKET, base)
    if s3_server.name == "versitygw":
        with pytest.raises(BlobStoreUnavailable, match="ExistingObjectIsDirectory"):
            blobs.put(folder_as_object, b"beside")
    else:
        blobs.put(folder_as_object, b"beside")
        assert blobs.get(folder_as_object) == b"beside"


def test_wrong_credentials(s3_server: S3Server) -> None:
    """moto accepts any credentials; VersityGW checks them, with an error code of its own for an unknown key."""
    location = S3Location(BUCKET, f"llog-s3/{uuid.uuid4()}")
    wrong_secret = replace(s3_server.blobs.config, secret_access_key="not-the-secret", max_attempts=1)
    unknown_key = replace(s3_server.blobs.config, access_key_id="nobody", max_attempts=1)
    if s3_server.name == "moto":
        BlobStore(wrong_secret).put(location, b"x")
        BlobStore(unknown_key).put(location, b"x")
        return
    with pytest.raises(ConfigurationError, match="SignatureDoesNotMatch"):
        BlobStore(wrong_secret).put(location, b"x")
    # AWS says InvalidAccessKeyId, VersityGW XAdminUserNotFound: both are a configuration error, not retried.
    with pytest.raises(ConfigurationError, match="XAdminUserNotFound"):
        BlobStore(unknown_key).put(location, b"x")


# --- the protocols on VersityGW (and a real Oxia server) -----------------------------------------


@pytest.mark.oxia
def test_append_and_read(writer: LogWriter, reader: LogReader, topic: str) -> None:
    other = f"{topic}-b"
    for t in (topic, other):
        writer.initialize_partition(t, 0)
    records = [Record(b"plain"), Record(b"\x00\xff binary", key=b"k", headers=(("h", b"v"),), timestamp_ms=7)]
    assert (writer.append(topic, 0, records).end_offset) == 2
    writer.append_shared([SharedAppendGroup(topic, 0, [b"s1", b"s2"]), SharedAppendGroup(other, 0, [b"o1"])])

    got = [(r.offset, r.value, r.key, r.timestamp_ms) for r in reader.iter_from(topic, 0, 1)]
    assert got[:2] == [(1, b"plain", None, got[0][3]), (2, b"\x00\xff binary", b"k", 7)]
    assert [v for _, v, _, _ in got[2:]] == [b"s1", b"s2"]
    assert reader.read_offset(topic, 0, 4).value == b"s2"  # a range GET inside the shared blob
    assert [r.value for r in reader.iter_from(other, 0, 1)] == [b"o1"]
    assert reader.high_watermark(topic, 0) == 4


@pytest.mark.oxia
def test_compaction_then_gc(
    writer: LogWriter,
    reader: LogReader,
    compactor: Compactor,
    blob_store: BlobStore,
    topic: str,
    root: str,
    storage: Storage,
) -> None:
    other = f"{topic}-x"
    for t in (topic, other):
        writer.initialize_partition(t, 0)
    for i in range(3):
        writer.append_shared(
            [
                SharedAppendGroup(topic, 0, [f"a{i}-{j}".encode() for j in range(i + 1)]),
                SharedAppendGroup(other, 0, [f"o{i}".encode()]),
            ]
        )
    with pytest.raises(SimulatedCrash):  # an orphaned WAL blob: written, never committed
        LogWriter(storage, fault_hook=crash_at(AFTER_BLOB_PUT)).append(topic, 0, [b"never committed"])
    before = [(r.offset, r.value) for r in reader.iter_from(topic, 0, 1)]
    wal = wal_keys(blob_store, root)
    assert len(before) == 6
    assert len(wal) == 4

    result = compactor.compact_once(topic, 0)
    assert (result.outcome, result.start_offset, result.end_offset) == ("compacted", 1, 6)
    assert [(r.offset, r.value) for r in reader.iter_from(topic, 0, 1)] == before
    manifests = ManifestStore(blob_store, bucket=BUCKET, root=root)
    assert [(m.start_offset, m.end_offset) for m in manifests.ranges(PartitionKeys(topic, 0, root))] == [(1, 6)]
    assert manifests.topics() == [topic]  # a listing with a delimiter: only compacted topics have S3 folders
    keys = PartitionKeys(topic, 0, root)
    assert len(list(blob_store.list(BUCKET, keys.compacted_prefix))) == 1

    # The other partition still reads the WAL blobs: only the orphan may go.
    report = collector(storage).collect()
    remaining = wal_keys(blob_store, root)
    assert len(remaining) == 3
    assert report.wal_blobs_deleted == 1

    compactor.compact_once(other, 0)
    assert manifests.topics() == [other, topic]  # key order of the folders: "t-x/" sorts before "t/"
    collector(storage).collect()
    assert wal_keys(blob_store, root) == set()
    assert [(r.offset, r.value) for r in reader.iter_from(topic, 0, 1)] == before
    assert [r.value for r in reader.iter_from(other, 0, 1)] == [b"o0", b"o1", b"o2"]


# --- make dev: stop, start again, every record is still there ------------------------------------


def oxia_binary() -> str:
    binary = find_oxia_binary([TOOLS_BIN])
    if binary is None:
        _unavailable("Oxia server", "LLOG_REQUIRE_OXIA", ROOT / ".tools" / "oxia-unavailable")
    return binary


class DevStack:
    """``scripts/dev.py`` as a subprocess on free ports, its data in ``dev_dir``."""

    def __init__(self, dev_dir: Path) -> None:
        self.dev_dir = dev_dir
        self.http_port = free_port()
        self.env = {
            **os.environ,
            "LLOG_DEV_DIR": str(dev_dir),
            "LLOG_DEV_OXIA_PORT": str(free_port()),
            "LLOG_DEV_S3_PORT": str(free_port()),
            "LLOG_DEV_HTTP_PORT": str(self.http_port),
            "LLOG_DEV_COMPACTION_INTERVAL_S": "3600",
            "LLOG_BATCH_MAX_DELAY_MS": "10",
        }
        self.runs = 0
        self.proc: subprocess.Popen[bytes] | None = None
        self.log_path = dev_dir.parent / "dev.log"

    def start(self, timeout_s: float = 60) -> str:
        self.runs += 1
        marker = f"--- run {self.runs} ---\n"
        with open(self.log_path, "a") as f:
            f.write(marker)
        with open(self.log_path, "ab") as log_file:
            self.proc = subprocess.Popen(
                [sys.executable, str(ROOT / "scripts" / "dev.py")],
                cwd=ROOT,
                env=self.env,
                stdout=log_file,
                stderr=subprocess.STDOUT,
            )
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            output = self.log_path.read_text().split(marker, 1)[1]
            if "llog is up" in output:
                return output
            if self.proc.poll() is not None:
                pytest.fail(f"scripts/dev.py exited with {self.proc.returncode}:\n{output}")
            time.sleep(0.2)
        self.stop(signal.SIGKILL)
        pytest.fail(f"scripts/dev.py did not come up in {timeout_s:.0f} s:\n{self.log_path.read_text()}")

    def stop(self, sig: signal.Signals = signal.SIGINT) -> int:
        """As a user would: Ctrl-C (SIGINT) or SIGTERM; the exit status."""
        proc, self.proc = self.proc, None
        assert proc is not None
        proc.send_signal(sig)
        try:
            return proc.wait(60)
        except subprocess.TimeoutExpired:
            proc.kill()
            raise

    def post(self, path: str, body: dict[str, Any]) -> Any:
        request = urllib.request.Request(
            f"http://127.0.0.1:{self.http_port}{path}",
            data=json.dumps(body).encode(),
            headers={"content-type": "application/json"},
            method="POST",
        )
        with urllib.request.urlopen(request, timeout=30) as response:
            return json.loads(response.read())


@pytest.fixture
def dev_stack(tmp_path: Path) -> Iterator[DevStack]:
    oxia_binary()
    versitygw_binary()
    stack = DevStack(tmp_path / "dev")
    try:
        yield stack
    finally:
        if stack.proc is not None:
            stack.stop(signal.SIGTERM)


@pytest.mark.oxia
def test_make_dev_keeps_every_record_across_a_restart(dev_stack: DevStack) -> None:
    banner = dev_stack.start()
    assert "VersityGW" in banner
    assert "new, empty" in banner
    produced = dev_stack.post(
        "/produce",
        {
            "topic_partitions": [
                {"topic": "orders", "partition": 0, "records": ["alpha", "beta"]},
                {"topic": "orders", "partition": 1, "records": [{"base64": "AAE="}]},
            ]
        },
    )
    assert produced["error_count"] == 0
    dev_stack.post("/produce", {"topic_partitions": [{"topic": "orders", "partition": 0, "records": ["gamma"]}]})
    assert dev_stack.stop(signal.SIGINT) == 0
    assert not (dev_stack.dev_dir / "dev.pid").exists()

    assert "kept from the last run" in dev_stack.start()
    consumed = dev_stack.post(
        "/consume",
        {
            "topic_partitions": [
                {"topic": "orders", "partition": 0, "fetch_offset": 1},
                {"topic": "orders", "partition": 1, "fetch_offset": 1},
            ],
            "max_wait_ms": 0,
        },
    )
    by_partition = {r["partition"]: [(x["offset"], x["value"]) for x in r["records"]] for r in consumed["results"]}
    assert by_partition == {0: [(1, "alpha"), (2, "beta"), (3, "gamma")], 1: [(1, {"base64": "AAE="})]}
    assert dev_stack.stop(signal.SIGTERM) == 0


def _kinesis_key(banner: str) -> tuple[str, str, str]:
    """The Kinesis endpoint, key id and secret make dev printed."""
    found = re.search(r"Kinesis API +(\S+)/kinesis +key (\S+), secret (\S+)", banner)
    assert found is not None, banner
    return f"{found.group(1)}/kinesis", found.group(2), found.group(3)


@pytest.mark.oxia
def test_make_dev_prints_a_kinesis_key_that_works_and_keeps_it_across_a_restart(dev_stack: DevStack) -> None:
    endpoint, key_id, secret = _kinesis_key(dev_stack.start())
    kinesis = boto3.client("kinesis", endpoint_url=endpoint, region_name="us-east-1", aws_access_key_id=key_id,
                           aws_secret_access_key=secret)  # fmt: skip
    kinesis.create_stream(StreamName="clicks", ShardCount=1)
    sequence = kinesis.put_record(StreamName="clicks", Data=b"\x00hello", PartitionKey="user-1")["SequenceNumber"]
    assert dev_stack.stop(signal.SIGINT) == 0
    assert _kinesis_key(dev_stack.start())[1:] == (key_id, secret)
    at_sequence = {"ShardIteratorType": "AT_SEQUENCE_NUMBER", "StartingSequenceNumber": sequence}
    iterator = kinesis.get_shard_iterator(StreamName="clicks", ShardId="shardId-000000000000", **at_sequence)
    records = kinesis.get_records(ShardIterator=iterator["ShardIterator"])["Records"]
    assert [(r["Data"], r["PartitionKey"]) for r in records] == [(b"\x00hello", "user-1")]
    assert dev_stack.stop(signal.SIGTERM) == 0


@pytest.mark.oxia
@pytest.mark.bundling
def test_make_dev_with_the_lambda_front_serves_the_same_log_through_the_functions(dev_stack: DevStack) -> None:
    """LLOG_DEV_FRONT=lambda: the records llog serve took are read, and new ones written, through the dev
    stage's REST API and its functions under the emulator (tests/functions/test_lambda_front.py tests the
    front itself); Ctrl-C stops it cleanly."""
    dev_stack.start()
    dev_stack.post("/produce", {"topic_partitions": [{"topic": "orders", "partition": 0, "records": ["alpha"]}]})
    assert dev_stack.stop(signal.SIGINT) == 0

    dev_stack.env["LLOG_DEV_FRONT"] = "lambda"
    banner = dev_stack.start(timeout_s=300)  # the first start synthesizes the stack and bundles its layer
    assert "under aws-lambda-rie" in banner
    assert "  console  " not in banner
    dev_stack.post("/produce", {"topic_partitions": [{"topic": "orders", "partition": 0, "records": ["beta"]}]})
    consumed = dev_stack.post("/consume", {"topic_partitions": [
        {"topic": "orders", "partition": 0, "fetch_offset": 1}], "max_wait_ms": 0})  # fmt: skip
    assert [(x["offset"], x["value"]) for x in consumed["results"][0]["records"]] == [(1, "alpha"), (2, "beta")]
    assert dev_stack.stop(signal.SIGINT) == 0
    assert "Traceback" not in dev_stack.log_path.read_text()


@pytest.mark.oxia
def test_make_dev_refuses_a_front_it_does_not_know(dev_stack: DevStack) -> None:
    dev_stack.env["LLOG_DEV_FRONT"] = "lamda"
    result = subprocess.run([sys.executable, str(ROOT / "scripts" / "dev.py")], cwd=ROOT, env=dev_stack.env,
                            capture_output=True, text=True, timeout=60)  # fmt: skip
    assert result.returncode == 2, result.stderr
    assert "LLOG_DEV_FRONT must be one of serve, lambda, not 'lamda'" in result.stderr


@pytest.mark.oxia
def test_make_dev_refuses_an_index_without_its_objects(dev_stack: DevStack) -> None:
    (dev_stack.dev_dir / "oxia").mkdir(parents=True)  # as a make dev that kept S3 in memory left it
    result = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "dev.py")],
        cwd=ROOT,
        env=dev_stack.env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 1
    assert "oxia exists but" in result.stderr
    assert "make dev-reset" in result.stderr
    assert not (dev_stack.dev_dir / "s3").exists()


@pytest.mark.oxia
def test_make_devs_offered_rebuild_brings_back_the_compacted_records_of_objects_without_their_index(
    dev_stack: DevStack,
) -> None:
    """The way that keeps the data, which make dev offers when it refuses objects without their index
    (scripts/dev.py, broken_data), followed as printed: the compacted records are served again, and the
    uncompacted one after them is lost without its offset being given to a new record."""
    orders = {"topic": "orders", "partition": 0}
    dev_stack.start()
    dev_stack.post("/produce", {"topic_partitions": [{**orders, "records": ["alpha", "beta"]}]})
    assert dev_stack.post("/topics/orders/partitions/0/compact", {})["caught_up"] is True
    dev_stack.post("/produce", {"topic_partitions": [{**orders, "records": ["gamma"]}]})  # offset 3, in the WAL only
    assert dev_stack.stop(signal.SIGINT) == 0
    shutil.rmtree(dev_stack.dev_dir / "oxia")  # the index is lost

    refused = subprocess.run([sys.executable, str(ROOT / "scripts" / "dev.py")], cwd=ROOT, env=dev_stack.env,
                             capture_output=True, text=True, timeout=60)  # fmt: skip
    assert refused.returncode == 1
    steps = [line.strip() for line in refused.stderr.splitlines()]
    step1 = next(line for line in steps if line.startswith("1. mkdir "))
    mkdir, settings = step1.removeprefix("1. mkdir ").removesuffix(" make dev").split(" && ")
    assert steps[steps.index(next(line for line in steps if line.startswith("2. "))) + 1] == "(orders):"

    Path(mkdir).mkdir()  # 1.
    for setting in settings.split():
        name, _, value = setting.partition("=")
        dev_stack.env[name] = value
    banner = dev_stack.start()
    exports = dict(line.strip().removeprefix("export ").split("=", 1) for line in banner.splitlines()
                   if line.strip().startswith("export "))  # fmt: skip
    llog = [sys.executable, "-c", "import sys; from llog.cli import main; sys.exit(main())"]
    step2 = steps[steps.index(next(line for line in steps if line.startswith("2. "))) : steps.index(
        next(line for line in steps if line.startswith("3. ")))]  # fmt: skip
    commands = [line.split(".venv/bin/llog ", 1)[1].replace("TOPIC", "orders").split()
                for line in step2 if ".venv/bin/llog " in line]  # fmt: skip
    assert commands == [["rebuild", "--topic", "orders"]]  # no GC ran yet: no namespace identity to adopt
    for command in commands:  # 2.
        done = subprocess.run([*llog, *command], env={**os.environ, **exports}, capture_output=True, text=True,
                              timeout=120, check=False)  # fmt: skip
        assert done.returncode == 0, done.stderr
    assert dev_stack.stop(signal.SIGINT) == 0  # 3.
    for setting in settings.split():
        del dev_stack.env[setting.split("=", 1)[0]]
    dev_stack.start()

    consumed = dev_stack.post("/consume", {"topic_partitions": [{**orders, "fetch_offset": 1}], "max_wait_ms": 0})
    assert [(r["offset"], r["value"]) for r in consumed["results"][0]["records"]][:2] == [(1, "alpha"), (2, "beta")]
    produced = dev_stack.post("/produce", {"topic_partitions": [{**orders, "records": ["delta"]}]})
    # Gamma's offset 3 stays lost, never reused (the rebuild places the next offset past every WAL record it
    # cannot place, here alpha's and beta's slices too: docs/RECOVERY.md, "Rebuild from S3").
    assert produced["results"][0]["start_offset"] > 3
