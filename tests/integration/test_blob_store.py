"""The S3 adapter against a real moto S3 server."""

from __future__ import annotations

import multiprocessing
import os
import time
import uuid

import pytest

from devserver.devstack import free_port
from llog.config import S3Config
from llog.errors import BlobNotFound, BlobStoreUnavailable, ConfigurationError, CorruptData, InvalidArgument
from llog.format.keys import S3Location
from llog.store.s3 import BlobStore
from tests.conftest import BUCKET


@pytest.fixture
def location(root: str) -> S3Location:
    return S3Location(BUCKET, f"{root}/test/{uuid.uuid4()}")


def test_put_get_and_range_get_return_exact_bytes(blob_store: BlobStore, location: S3Location) -> None:
    body = bytes(range(256)) * 40
    blob_store.put(location, body)

    assert blob_store.get(location) == body
    assert blob_store.get_range(location, 0, 1) == body[:1]
    assert blob_store.get_range(location, 1000, 517) == body[1000:1517]
    assert blob_store.get_range(location, len(body) - 3, 3) == body[-3:]


def test_range_past_the_end_is_an_error_never_a_short_read(blob_store: BlobStore, location: S3Location) -> None:
    blob_store.put(location, b"0123456789")

    with pytest.raises(CorruptData, match="returned 5 bytes, expected 10"):
        blob_store.get_range(location, 5, 10)
    with pytest.raises(CorruptData, match="shorter than the requested range"):
        blob_store.get_range(location, 50, 10)
    with pytest.raises(InvalidArgument):
        blob_store.get_range(location, 0, 0)


def test_missing_object_is_blob_not_found(blob_store: BlobStore, location: S3Location) -> None:
    with pytest.raises(BlobNotFound, match=location.key):
        blob_store.get(location)
    with pytest.raises(BlobNotFound):
        blob_store.get_range(location, 0, 10)


def test_missing_bucket_is_a_configuration_error(blob_store: BlobStore) -> None:
    with pytest.raises(ConfigurationError, match="NoSuchBucket"):
        blob_store.put(S3Location("no-such-bucket-llog", "k"), b"x")


def test_list_and_delete(blob_store: BlobStore, root: str) -> None:
    prefix = f"{root}/list-{uuid.uuid4().hex}/"
    keys = [f"{prefix}{i:03d}" for i in range(5)]
    for i, key in enumerate(keys):
        blob_store.put(S3Location(BUCKET, key), b"x" * i)

    listed = list(blob_store.list(BUCKET, prefix))
    assert [o.key for o in listed] == keys
    assert [o.size for o in listed] == [0, 1, 2, 3, 4]
    assert all(o.last_modified_ms > 0 for o in listed)

    blob_store.delete(BUCKET, [*keys[:3], f"{prefix}never-existed"])
    assert [o.key for o in blob_store.list(BUCKET, prefix)] == keys[3:]


def test_counters_record_operations_and_bytes(s3_config: S3Config, location: S3Location) -> None:
    store = BlobStore(s3_config)
    store.put(location, b"a" * 100)
    store.get_range(location, 10, 20)
    store.get(location)

    stats = store.counters.snapshot()
    assert (stats["put"].calls, stats["put"].bytes) == (1, 100)
    assert (stats["range_get"].calls, stats["range_get"].bytes) == (1, 20)
    assert (stats["get"].calls, stats["get"].bytes) == (1, 100)
    assert all(s.errors == 0 for s in stats.values())


def test_unreachable_endpoint_fails_promptly_with_a_retriable_error(location: S3Location) -> None:
    store = BlobStore(S3Config(bucket=BUCKET, endpoint_url=f"http://127.0.0.1:{free_port()}", region_name="us-east-1",
                               access_key_id="x", secret_access_key="x", max_attempts=2, connect_timeout_s=1))
    start = time.monotonic()
    with pytest.raises(BlobStoreUnavailable) as excinfo:
        store.put(location, b"x")
    assert excinfo.value.retriable
    assert time.monotonic() - start < 10
    assert store.counters.snapshot()["put"].errors == 1


def _put_in_child(store: BlobStore, location: S3Location) -> None:
    store.put(location, b"from the child")


def test_a_forked_child_puts_through_clients_of_its_own(blob_store: BlobStore, location: S3Location) -> None:
    """The AWS Common Runtime's threads do not survive a fork: a child's PUTs must not wait on its parent's."""
    blob_store.put(location, b"from the parent")  # the parent's CRT client and event loop threads now exist
    child_location = S3Location(location.bucket, location.key + "-child")
    child = multiprocessing.get_context("fork").Process(target=_put_in_child, args=(blob_store, child_location))
    child.start()
    child.join(60)
    if child.is_alive():
        child.kill()
    assert child.exitcode == 0
    assert blob_store.get(child_location) == b"from the child"
    blob_store.put(location, b"the parent again")
    assert blob_store.get(location) == b"the parent again"


def test_stores_of_one_setting_share_one_client_of_the_aws_common_runtime(
    s3_config: S3Config, location: S3Location
) -> None:
    """A CRT client holds threads and buffers for good: one per process and setting, not one per store."""

    def threads() -> int:
        return len(os.listdir("/proc/self/task"))

    BlobStore(s3_config).put(location, b"first")  # this setting's client exists from here
    before = threads()
    for _ in range(20):
        BlobStore(s3_config).put(location, b"again")
    assert threads() <= before + 2


def test_put_if_absent_creates_once_and_never_overwrites(blob_store: BlobStore, location: S3Location) -> None:
    assert blob_store.put_if_absent(location, b"first") is True
    assert blob_store.put_if_absent(location, b"second") is False
    assert blob_store.get(location) == b"first"
