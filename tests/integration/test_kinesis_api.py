"""The Kinesis Data Streams API of ``llog serve`` driven by an unchanged boto3 ``kinesis`` client (real Oxia).

Only ``endpoint_url`` and the credentials differ from a client of Amazon Kinesis: the key is one llog
issued (``AccessKeys``), the endpoint ``llog serve``'s ``/kinesis``. Each test has a stream of its own.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import os
import subprocess
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import boto3
import cbor2
import pytest
from botocore import UNSIGNED
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.config import Config
from botocore.credentials import Credentials
from botocore.exceptions import ClientError

from llog.api.kinesis import wire
from llog.api.kinesis.shards import MAX_HASH_KEY
from llog.config import S3Config
from llog.service.keys import KeyPermissions
from server.serve import LlogServer
from tests.conftest import ROOT, OxiaServer, keyed_serve_env, serving

REGION = "eu-west-1"


@pytest.fixture(scope="module")
def server(
    s3_config: S3Config, oxia_server: OxiaServer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[LlogServer]:
    env = keyed_serve_env(
        s3_config, oxia_server.address, f"kin-{uuid.uuid4().hex[:12]}", tmp_path_factory.mktemp("keys")
    )
    with serving({**env, "LLOG_KINESIS_ACCOUNT_ID": "123456789012"}) as srv:
        yield srv


def _client(srv: LlogServer, key_id: str, secret: str, **config: Any) -> Any:
    return boto3.client(
        "kinesis",
        endpoint_url=f"{srv.url}/kinesis",
        region_name=REGION,
        aws_access_key_id=key_id,
        aws_secret_access_key=secret,
        config=Config(retries={"max_attempts": 1}, **config),
    )


def _issue(srv: LlogServer, **permissions: Any) -> tuple[str, str]:
    granted = {"streams": ("*",), "read": True, "write": True, "admin": True, **permissions}
    key, secret = srv.services.access_keys().create(f"test-{uuid.uuid4().hex[:6]}", KeyPermissions(**granted))
    return key.access_key_id, secret


@pytest.fixture(scope="module")
def kinesis(server: LlogServer) -> Any:
    return _client(server, *_issue(server))


@pytest.fixture
def stream(kinesis: Any) -> str:
    name = f"s-{uuid.uuid4().hex[:10]}"
    kinesis.create_stream(StreamName=name, ShardCount=2)
    return name


def _code(exc: pytest.ExceptionInfo[ClientError]) -> str:
    return str(exc.value.response["Error"]["Code"])


def _read_all(kinesis: Any, stream: str, shard: str, kind: str = "TRIM_HORIZON", **where: Any) -> list[dict[str, Any]]:
    iterator = kinesis.get_shard_iterator(StreamName=stream, ShardId=shard, ShardIteratorType=kind, **where)
    records: list[dict[str, Any]] = []
    answer = kinesis.get_records(ShardIterator=iterator["ShardIterator"])
    while answer["Records"]:
        records += answer["Records"]
        answer = kinesis.get_records(ShardIterator=answer["NextShardIterator"])
    assert answer["MillisBehindLatest"] == 0
    return records


def _native(srv: LlogServer, path: str, body: dict[str, Any]) -> dict[str, Any]:
    request = urllib.request.Request(srv.url + path, data=json.dumps(body).encode(), method="POST",
                                     headers={"Content-Type": "application/json"})  # fmt: skip
    with urllib.request.urlopen(request, timeout=30) as answer:
        result: dict[str, Any] = json.load(answer)
    return result


def _native_get(srv: LlogServer, path: str) -> dict[str, Any]:
    with urllib.request.urlopen(srv.url + path, timeout=30) as answer:
        result: dict[str, Any] = json.load(answer)
    return result


def test_the_readme_curl_example_signs_and_puts_a_record(server: LlogServer, kinesis: Any) -> None:
    readme = (ROOT / "README.md").read_text()
    section = readme[readme.index("## The Kinesis API") : readme.index("## Kinesis access keys")]
    block = section[section.index("```bash\n") + len("```bash\n") : section.index("\n```", section.index("```bash"))]
    command = "\n".join(line for line in block.splitlines() if not line.startswith(("KEY=", "#")))
    answer = json.loads(block.splitlines()[-1].removeprefix("# "))
    kinesis.create_stream(StreamName="payments", ShardCount=6)
    key_id, secret = _issue(server)
    env = {**os.environ, "KEY": key_id, "SECRET": secret}
    command = command.replace("http://127.0.0.1:8080", server.url)
    ran = subprocess.run(["bash", "-c", command], check=True, capture_output=True, text=True, env=env)
    assert json.loads(ran.stdout) == answer
    (record,) = _read_all(kinesis, "payments", answer["ShardId"])
    assert (record["Data"], record["PartitionKey"]) == (b'{"amount": 5}', "customer-42")


# --- streams -------------------------------------------------------------------------------------------------------


def test_a_created_stream_is_described_listed_and_deleted(kinesis: Any, server: LlogServer) -> None:
    name = f"s-{uuid.uuid4().hex[:10]}"
    kinesis.create_stream(StreamName=name, ShardCount=3)
    kinesis.get_waiter("stream_exists").wait(StreamName=name, WaiterConfig={"Delay": 1, "MaxAttempts": 5})
    description = kinesis.describe_stream(StreamName=name)["StreamDescription"]
    assert description["StreamStatus"] == "ACTIVE"
    assert description["StreamARN"] == f"arn:aws:kinesis:{REGION}:123456789012:stream/{name}"
    shards = description["Shards"]
    assert [s["ShardId"] for s in shards] == ["shardId-000000000000", "shardId-000000000001", "shardId-000000000002"]
    assert shards[0]["HashKeyRange"]["StartingHashKey"] == "0"
    assert shards[-1]["HashKeyRange"]["EndingHashKey"] == str(MAX_HASH_KEY)
    for before, after in itertools.pairwise(shards):
        assert int(before["HashKeyRange"]["EndingHashKey"]) + 1 == int(after["HashKeyRange"]["StartingHashKey"])
    assert abs(description["StreamCreationTimestamp"] - datetime.now(UTC)) < timedelta(minutes=1)
    summary = kinesis.describe_stream_summary(StreamARN=description["StreamARN"])["StreamDescriptionSummary"]
    assert (summary["StreamName"], summary["OpenShardCount"]) == (name, 3)
    assert name in kinesis.list_streams(Limit=10_000)["StreamNames"]
    assert [s["ShardId"] for s in kinesis.list_shards(StreamName=name)["Shards"]] == [s["ShardId"] for s in shards]

    with pytest.raises(ClientError) as exists:
        kinesis.create_stream(StreamName=name, ShardCount=3)
    assert _code(exists) == "ResourceInUseException"

    kinesis.delete_stream(StreamName=name)
    with pytest.raises(ClientError) as gone:
        kinesis.describe_stream(StreamName=name)
    assert _code(gone) == "ResourceNotFoundException"
    assert name not in kinesis.list_streams(Limit=10_000)["StreamNames"]


def test_list_shards_pages_with_its_next_token(kinesis: Any) -> None:
    name = f"s-{uuid.uuid4().hex[:10]}"
    kinesis.create_stream(StreamName=name, ShardCount=5)
    first = kinesis.list_shards(StreamName=name, MaxResults=2)
    second = kinesis.list_shards(NextToken=first["NextToken"], MaxResults=2)
    third = kinesis.list_shards(NextToken=second["NextToken"], MaxResults=2)
    ids = [s["ShardId"] for page in (first, second, third) for s in page["Shards"]]
    assert ids == [f"shardId-{i:012d}" for i in range(5)]
    assert "NextToken" not in third
    after = kinesis.list_shards(StreamName=name, ShardFilter={"Type": "AFTER_SHARD_ID", "ShardId": ids[2]})
    assert [s["ShardId"] for s in after["Shards"]] == ids[3:]


def test_an_on_demand_stream_has_four_shards(kinesis: Any) -> None:
    name = f"s-{uuid.uuid4().hex[:10]}"
    kinesis.create_stream(StreamName=name, StreamModeDetails={"StreamMode": "ON_DEMAND"})
    assert kinesis.describe_stream_summary(StreamName=name)["StreamDescriptionSummary"]["OpenShardCount"] == 4


def test_unknown_streams_and_operations_get_kinesis_errors(kinesis: Any) -> None:
    with pytest.raises(ClientError) as missing:
        kinesis.put_record(StreamName="no-such-stream", Data=b"x", PartitionKey="k")
    assert _code(missing) == "ResourceNotFoundException"
    with pytest.raises(ClientError) as unsupported:
        kinesis.split_shard(StreamName="s", ShardToSplit="shardId-000000000000", NewStartingHashKey="1")
    assert _code(unsupported) == "UnknownOperationException"
    limits = kinesis.describe_limits()
    assert limits["OpenShardCount"] >= 0


# --- records -------------------------------------------------------------------------------------------------------


def test_every_byte_value_and_the_largest_record_round_trip(kinesis: Any, stream: str) -> None:
    every_byte = bytes(range(256))
    key = "k" * 256
    largest = b"\xff" * (1024 * 1024 - len(key))
    first = kinesis.put_record(StreamName=stream, Data=every_byte, PartitionKey=key, ExplicitHashKey="0")
    second = kinesis.put_record(StreamName=stream, Data=largest, PartitionKey=key, ExplicitHashKey="0")
    assert first["ShardId"] == second["ShardId"] == "shardId-000000000000"
    assert int(first["SequenceNumber"]) < int(second["SequenceNumber"])
    records = _read_all(kinesis, stream, "shardId-000000000000")
    assert [(r["Data"], r["PartitionKey"], r["SequenceNumber"]) for r in records] == [
        (every_byte, key, first["SequenceNumber"]),
        (largest, key, second["SequenceNumber"]),
    ]
    with pytest.raises(ClientError) as too_large:
        kinesis.put_record(StreamName=stream, Data=largest + b"x", PartitionKey=key)
    assert _code(too_large) == "ValidationException"
    assert len(_read_all(kinesis, stream, "shardId-000000000000")) == 2  # the refused record wrote nothing


def test_records_go_to_the_shard_of_their_hash_key_in_order(kinesis: Any, stream: str) -> None:
    keys = [f"key-{i}" for i in range(40)]
    entries = [{"Data": f"r{i}".encode(), "PartitionKey": key} for i, key in enumerate(keys)]
    answer = kinesis.put_records(StreamName=stream, Records=entries)
    assert answer["FailedRecordCount"] == 0
    shards = kinesis.describe_stream(StreamName=stream)["StreamDescription"]["Shards"]
    by_shard: dict[str, list[bytes]] = {}
    for i, (key, result) in enumerate(zip(keys, answer["Records"], strict=True)):
        hash_key = int.from_bytes(hashlib.md5(key.encode()).digest(), "big")
        (owner,) = [s["ShardId"] for s in shards if int(s["HashKeyRange"]["StartingHashKey"]) <= hash_key
                    <= int(s["HashKeyRange"]["EndingHashKey"])]  # fmt: skip
        assert result["ShardId"] == owner
        by_shard.setdefault(owner, []).append(f"r{i}".encode())
    for shard, data in by_shard.items():
        records = _read_all(kinesis, stream, shard)
        assert [r["Data"] for r in records] == data
        sequences = [int(r["SequenceNumber"]) for r in records]
        assert sequences == sorted(sequences)


def test_every_iterator_type_starts_where_kinesis_starts(kinesis: Any, stream: str) -> None:
    shard = "shardId-000000000001"
    put = [kinesis.put_record(StreamName=stream, Data=f"v{i}".encode(), PartitionKey="p",
                              ExplicitHashKey=str(MAX_HASH_KEY)) for i in range(3)]  # fmt: skip
    latest = kinesis.get_shard_iterator(StreamName=stream, ShardId=shard, ShardIteratorType="LATEST")
    assert kinesis.get_records(ShardIterator=latest["ShardIterator"])["Records"] == []
    middle = put[1]["SequenceNumber"]
    at = _read_all(kinesis, stream, shard, "AT_SEQUENCE_NUMBER", StartingSequenceNumber=middle)
    after = _read_all(kinesis, stream, shard, "AFTER_SEQUENCE_NUMBER", StartingSequenceNumber=middle)
    assert [r["Data"] for r in at] == [b"v1", b"v2"]
    assert [r["Data"] for r in after] == [b"v2"]
    arrival = _read_all(kinesis, stream, shard)[2]["ApproximateArrivalTimestamp"]
    assert [r["Data"] for r in _read_all(kinesis, stream, shard, "AT_TIMESTAMP", Timestamp=arrival)][-1] == b"v2"
    future = datetime.now(UTC) + timedelta(hours=1)
    assert _read_all(kinesis, stream, shard, "AT_TIMESTAMP", Timestamp=future) == []
    kinesis.put_record(StreamName=stream, Data=b"new", PartitionKey="p", ExplicitHashKey=str(MAX_HASH_KEY))
    assert [r["Data"] for r in kinesis.get_records(ShardIterator=latest["ShardIterator"])["Records"]] == [b"new"]


def test_bad_sequence_numbers_and_iterators_are_refused(kinesis: Any, stream: str) -> None:
    sequence = kinesis.put_record(StreamName=stream, Data=b"x", PartitionKey="p", ExplicitHashKey="0")["SequenceNumber"]
    with pytest.raises(ClientError) as other_shard:
        kinesis.get_shard_iterator(StreamName=stream, ShardId="shardId-000000000001",
                                   ShardIteratorType="AT_SEQUENCE_NUMBER", StartingSequenceNumber=sequence)  # fmt: skip
    assert _code(other_shard) == "InvalidArgumentException"
    with pytest.raises(ClientError) as not_a_number:
        kinesis.get_shard_iterator(StreamName=stream, ShardId="shardId-000000000000",
                                   ShardIteratorType="AT_SEQUENCE_NUMBER", StartingSequenceNumber="12345")  # fmt: skip
    assert _code(not_a_number) == "InvalidArgumentException"
    iterator = kinesis.get_shard_iterator(StreamName=stream, ShardId="shardId-000000000000",
                                          ShardIteratorType="TRIM_HORIZON")["ShardIterator"]  # fmt: skip
    with pytest.raises(ClientError) as altered:
        kinesis.get_records(ShardIterator=iterator[:-2] + ("AA" if not iterator.endswith("AA") else "BB"))
    assert _code(altered) == "InvalidArgumentException"
    with pytest.raises(ClientError) as no_shard:
        kinesis.get_shard_iterator(StreamName=stream, ShardId="shardId-000000000009", ShardIteratorType="LATEST")
    assert _code(no_shard) == "ResourceNotFoundException"


def test_an_iterator_of_a_deleted_stream_reads_nothing_of_its_successor(kinesis: Any) -> None:
    name = f"s-{uuid.uuid4().hex[:10]}"
    kinesis.create_stream(StreamName=name, ShardCount=1)
    kinesis.put_record(StreamName=name, Data=b"old", PartitionKey="p")
    iterator = kinesis.get_shard_iterator(StreamName=name, ShardId="shardId-000000000000",
                                          ShardIteratorType="TRIM_HORIZON")["ShardIterator"]  # fmt: skip
    kinesis.delete_stream(StreamName=name)
    with pytest.raises(ClientError) as gone:
        kinesis.get_records(ShardIterator=iterator)
    assert _code(gone) == "ResourceNotFoundException"


def test_put_records_over_kinesis_limits_write_nothing(kinesis: Any, stream: str) -> None:
    with pytest.raises(ClientError) as too_many:
        kinesis.put_records(StreamName=stream, Records=[{"Data": b"x", "PartitionKey": "p"}] * 501)
    assert _code(too_many) == "ValidationException"
    big = [{"Data": b"x" * (1000 * 1024), "PartitionKey": "p"}] * 6  # 6 MB: over the 5 MiB of a request
    with pytest.raises(ClientError) as too_big:
        kinesis.put_records(StreamName=stream, Records=big)
    assert _code(too_big) == "InvalidArgumentException"
    huge = [{"Data": b"x" * (1024 * 1024 - 1), "PartitionKey": "p"}] * 7  # a body over the 8 MiB llog reads
    with pytest.raises(ClientError) as unread:
        kinesis.put_records(StreamName=stream, Records=huge)
    assert _code(unread) == "InvalidArgumentException"
    assert _read_all(kinesis, stream, "shardId-000000000000") == []
    assert _read_all(kinesis, stream, "shardId-000000000001") == []


def test_put_records_says_which_records_failed_and_writes_the_others(
    kinesis: Any, stream: str, server: LlogServer
) -> None:
    _native(server, f"/topics/{stream}/partitions/1/fence", {})
    entries = [{"Data": f"r{i}".encode(), "PartitionKey": "p", "ExplicitHashKey": "0" if i % 2 else str(MAX_HASH_KEY)}
               for i in range(6)]  # fmt: skip
    answer = kinesis.put_records(StreamName=stream, Records=entries)
    assert answer["FailedRecordCount"] == 3
    for i, result in enumerate(answer["Records"]):
        if i % 2:
            assert result["ShardId"] == "shardId-000000000000"
            assert "ErrorCode" not in result
        else:
            assert result["ErrorCode"] in ("InternalFailure", "ProvisionedThroughputExceededException")
            assert "SequenceNumber" not in result
    assert [r["Data"] for r in _read_all(kinesis, stream, "shardId-000000000000")] == [b"r1", b"r3", b"r5"]
    _native(server, f"/topics/{stream}/partitions/1/unfence", {})
    assert _read_all(kinesis, stream, "shardId-000000000001") == []


# --- the native API sees the same records ---------------------------------------------------------------------------


def test_kinesis_and_native_records_are_the_same_records(kinesis: Any, stream: str, server: LlogServer) -> None:
    put = kinesis.put_record(StreamName=stream, Data=b"\x00kinesis", PartitionKey="order-7", ExplicitHashKey="0")
    native = _native(server, "/consume", {"topic_partitions": [{"topic": stream, "partition": 0, "fetch_offset": 1}]})
    (record,) = native["results"][0]["records"]
    assert (record["key"], record["value"]) == ("order-7", {"base64": "AGtpbmVzaXM="})
    assert put["SequenceNumber"].endswith(f"{record['offset']:020d}")

    _native(server, "/produce", {"topic_partitions": [{"topic": stream, "partition": 0, "records": ["from native"]}]})
    records = _read_all(kinesis, stream, "shardId-000000000000")
    assert [(r["Data"], r["PartitionKey"]) for r in records] == [(b"\x00kinesis", "order-7"), (b"from native", "")]


# --- authentication ------------------------------------------------------------------------------------------------


def test_requests_without_a_good_signature_are_refused_and_write_nothing(server: LlogServer, kinesis: Any,
                                                                         stream: str) -> None:  # fmt: skip
    key_id, secret = _issue(server)
    attempts = {
        "MissingAuthenticationTokenException": _client(server, key_id, secret, signature_version=UNSIGNED),
        "InvalidSignatureException": _client(server, key_id, secret[:-1] + ("A" if secret[-1] != "A" else "B")),
        "UnrecognizedClientException": _client(server, "LLOGUNKNOWNKEY000000", secret),
    }
    for code, client in attempts.items():
        with pytest.raises(ClientError) as refused:
            client.put_record(StreamName=stream, Data=b"x", PartitionKey="p")
        assert _code(refused) == code
    assert _read_all(kinesis, stream, "shardId-000000000000") == []
    assert _read_all(kinesis, stream, "shardId-000000000001") == []


def test_a_key_may_do_only_what_it_was_granted(server: LlogServer, kinesis: Any, stream: str) -> None:
    reader = _client(server, *_issue(server, write=False, admin=False))
    reader.describe_stream(StreamName=stream)
    with pytest.raises(ClientError) as denied:
        reader.put_record(StreamName=stream, Data=b"x", PartitionKey="p")
    assert _code(denied) == "AccessDeniedException"
    with pytest.raises(ClientError) as no_admin:
        reader.delete_stream(StreamName=stream)
    assert _code(no_admin) == "AccessDeniedException"
    other = _client(server, *_issue(server, streams=("other-*",)))
    with pytest.raises(ClientError) as elsewhere:
        other.describe_stream(StreamName=stream)
    assert _code(elsewhere) == "AccessDeniedException"
    assert stream not in other.list_streams(Limit=10_000)["StreamNames"]
    assert _read_all(kinesis, stream, "shardId-000000000000") == []


def test_a_revoked_key_is_refused(server: LlogServer, stream: str) -> None:
    key_id, secret = _issue(server)
    client = _client(server, key_id, secret)
    client.describe_stream(StreamName=stream)
    keys = server.services.access_keys()
    assert keys.revoke(key_id)  # seen at once by the process that revoked it; by others within the cache's life
    with pytest.raises(ClientError) as refused:
        client.describe_stream(StreamName=stream)
    assert _code(refused) == "UnrecognizedClientException"


# --- retention and tags --------------------------------------------------------------------------------------------


def test_retention_changes_in_the_direction_its_call_names(kinesis: Any, stream: str, server: LlogServer) -> None:
    def hours() -> int:
        return int(
            kinesis.describe_stream_summary(StreamName=stream)["StreamDescriptionSummary"]["RetentionPeriodHours"]
        )

    assert hours() == 8760  # unlimited reads as Kinesis's longest
    kinesis.increase_stream_retention_period(StreamName=stream, RetentionPeriodHours=8760)
    kinesis.decrease_stream_retention_period(StreamName=stream, RetentionPeriodHours=48)
    assert hours() == 48
    described = _native_get(server, f"/topics/{stream}")
    assert described["config"]["retention_ms"] == 48 * 3_600_000  # the native API and retention see it
    with pytest.raises(ClientError) as shorter:
        kinesis.increase_stream_retention_period(StreamName=stream, RetentionPeriodHours=24)
    assert _code(shorter) == "InvalidArgumentException"
    with pytest.raises(ClientError) as longer:
        kinesis.decrease_stream_retention_period(StreamName=stream, RetentionPeriodHours=72)
    assert _code(longer) == "InvalidArgumentException"
    with pytest.raises(ClientError) as too_short:
        kinesis.decrease_stream_retention_period(StreamName=stream, RetentionPeriodHours=23)
    assert _code(too_short) == "InvalidArgumentException"
    kinesis.increase_stream_retention_period(StreamName=stream, RetentionPeriodHours=168)
    assert hours() == 168


def test_tags_are_added_listed_paged_and_removed(kinesis: Any) -> None:
    name = f"s-{uuid.uuid4().hex[:10]}"
    kinesis.create_stream(StreamName=name, ShardCount=1, Tags={"team": "payments"})
    kinesis.add_tags_to_stream(StreamName=name, Tags={"env": "dev", "cost-centre": "42"})
    listed = kinesis.list_tags_for_stream(StreamName=name)
    assert listed["Tags"] == [{"Key": "cost-centre", "Value": "42"}, {"Key": "env", "Value": "dev"},
                              {"Key": "team", "Value": "payments"}]  # fmt: skip
    assert listed["HasMoreTags"] is False
    first = kinesis.list_tags_for_stream(StreamName=name, Limit=2)
    rest = kinesis.list_tags_for_stream(StreamName=name, ExclusiveStartTagKey=first["Tags"][-1]["Key"])
    assert (first["HasMoreTags"], [t["Key"] for t in rest["Tags"]]) == (True, ["team"])
    kinesis.remove_tags_from_stream(StreamName=name, TagKeys=["env", "absent"])
    assert [t["Key"] for t in kinesis.list_tags_for_stream(StreamName=name)["Tags"]] == ["cost-centre", "team"]
    for i in range(4):
        kinesis.add_tags_to_stream(StreamName=name, Tags={f"k{i}-{j}": "v" for j in range(10)})
    with pytest.raises(ClientError) as over:
        kinesis.add_tags_to_stream(StreamName=name, Tags={f"x{j}": "v" for j in range(9)})
    assert _code(over) == "LimitExceededException"
    assert len(kinesis.list_tags_for_stream(StreamName=name)["Tags"]) == 42  # the refused call added nothing
    kinesis.add_tags_to_stream(StreamName=name, Tags={"team": "risk"})  # a new value for a key: no new tag
    assert {"Key": "team", "Value": "risk"} in kinesis.list_tags_for_stream(StreamName=name)["Tags"]


# --- what a review found (each failed before its fix) ---------------------------------------------------------------


def _signed(srv: LlogServer, key: tuple[str, str], target: str, body: bytes, content_type: str = wire.JSON_CONTENT_TYPE
            ) -> tuple[int, bytes]:  # fmt: skip
    """A request as an SDK would sign it, with a body no SDK would send."""
    url = f"{srv.url}/kinesis"
    headers = {"Content-Type": content_type, "X-Amz-Target": f"Kinesis_20131202.{target}"}
    request = AWSRequest(method="POST", url=url, data=body, headers=headers)
    SigV4Auth(Credentials(*key), "kinesis", REGION).add_auth(request)
    sent = urllib.request.Request(url, data=body, method="POST", headers=dict(request.headers.items()))
    try:
        with urllib.request.urlopen(sent, timeout=30) as answer:
            return answer.status, answer.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


def test_a_record_with_a_far_timestamp_does_not_block_get_records(server: LlogServer, kinesis: Any) -> None:
    name = f"s-{uuid.uuid4().hex[:10]}"
    kinesis.create_stream(StreamName=name, ShardCount=1)
    far = {"value": "far", "timestamp_ms": 2**63 - 1}
    _native(server, "/produce", {"topic_partitions": [{"topic": name, "partition": 0, "records": [far]}]})
    after = kinesis.put_record(StreamName=name, Data=b"after", PartitionKey="k")
    records = _read_all(kinesis, name, "shardId-000000000000")
    assert [r["Data"] for r in records] == [b"far", b"after"]
    assert records[-1]["SequenceNumber"] == after["SequenceNumber"]


def test_a_deleted_stream_name_is_in_use_until_it_is_reclaimed(kinesis: Any) -> None:
    name = f"s-{uuid.uuid4().hex[:10]}"
    kinesis.create_stream(StreamName=name, ShardCount=1)
    kinesis.delete_stream(StreamName=name)
    with pytest.raises(ClientError) as again:
        kinesis.create_stream(StreamName=name, ShardCount=1)
    assert _code(again) == "ResourceInUseException"


@pytest.mark.parametrize("name", [".", "..", "wal-shared", "__catalog"])
def test_reserved_names_are_refused_as_kinesis_errors(kinesis: Any, name: str) -> None:
    with pytest.raises(ClientError) as refused:
        kinesis.create_stream(StreamName=name, ShardCount=1)
    assert _code(refused) == "InvalidArgumentException"


def test_a_tag_value_that_is_not_unicode_is_refused(server: LlogServer, stream: str) -> None:
    key = _issue(server)
    status, _ = _signed(
        server, key, "AddTagsToStream", b'{"StreamName":"%s","Tags":{"team":"\\ud800"}}' % stream.encode()
    )
    assert status == 400
    status, body = _signed(
        server, key, "ListTagsForStream", cbor2.dumps({"StreamName": stream}), wire.CBOR_CONTENT_TYPE
    )
    assert (status, cbor2.loads(body)["Tags"]) == (200, [])


@pytest.mark.parametrize(
    ("target", "body"),
    [
        ("CreateStream", {"StreamName": "x-mode", "StreamModeDetails": "ON_DEMAND"}),
        ("ListShards", {"StreamName": "STREAM", "ShardFilter": "AFTER_SHARD_ID"}),
        ("ListShards", {"StreamName": "STREAM", "ShardFilter": {"Type": "AFTER_SHARD_ID", "ShardId": 5}}),
        (
            "GetShardIterator",
            {
                "StreamName": "STREAM",
                "ShardId": "shardId-000000000000",
                "ShardIteratorType": "AT_TIMESTAMP",
                "Timestamp": 1e306,
            },
        ),  # fmt: skip
        ("DescribeStream", {"StreamName": "STREAM", "Limit": 0}),
        ("DescribeStream", {"StreamName": "STREAM", "Limit": -1}),
        (
            "GetShardIterator",
            {
                "StreamName": "STREAM",
                "ShardId": "shardId-\u0660\u0660\u0660\u0660\u0660\u0660\u0660\u0660\u0660\u0660\u0660\u0660",
                "ShardIteratorType": "LATEST",
            },
        ),  # fmt: skip
    ],
)
def test_malformed_members_are_400s(server: LlogServer, stream: str, target: str, body: dict[str, Any]) -> None:
    document = json.loads(json.dumps(body).replace("STREAM", stream))
    status, answer = _signed(server, _issue(server), target, json.dumps(document).encode())
    assert status == 400, answer


def test_a_cbor_decimal_is_a_serialization_error(server: LlogServer, stream: str) -> None:
    document = (
        b"\xa2" + cbor2.dumps("StreamName") + cbor2.dumps(stream) + cbor2.dumps("Limit") + bytes.fromhex("c482016161")
    )
    status, answer = _signed(server, _issue(server), "DescribeStream", document, wire.CBOR_CONTENT_TYPE)
    assert (status, cbor2.loads(answer)["__type"]) == (400, "SerializationException")


def test_describe_limits_needs_a_read_permission(server: LlogServer) -> None:
    writer = _client(server, *_issue(server, streams=("nothing-*",), read=False, write=True, admin=False))
    with pytest.raises(ClientError) as denied:
        writer.describe_limits()
    assert _code(denied) == "AccessDeniedException"


def test_list_shards_next_token_does_not_tell_which_streams_exist(server: LlogServer, stream: str) -> None:
    reader = _client(server, *_issue(server, streams=("only-this",), read=True, write=False, admin=False))
    codes = []
    for name in (stream, f"missing-{uuid.uuid4().hex[:6]}"):
        with pytest.raises(ClientError) as refused:
            reader.list_shards(NextToken=f"{name}|shardId-000000000000")
        codes.append(_code(refused))
    assert codes == ["AccessDeniedException", "AccessDeniedException"]


def test_a_put_record_reads_its_stream_not_every_shard(server: LlogServer, kinesis: Any) -> None:
    name = f"s-{uuid.uuid4().hex[:10]}"
    kinesis.create_stream(StreamName=name, ShardCount=200)
    kinesis.put_record(StreamName=name, Data=b"x", PartitionKey="k")
    reads = ("get", "get_lower", "range_scan", "list")

    def counted() -> int:
        oxia = server.metrics()["oxia"]
        return sum(oxia[op]["calls"] for op in reads if op in oxia)

    before = counted()
    kinesis.put_record(StreamName=name, Data=b"x", PartitionKey="k")
    iterator = kinesis.get_shard_iterator(StreamName=name, ShardId="shardId-000000000007", ShardIteratorType="LATEST")
    kinesis.get_records(ShardIterator=iterator["ShardIterator"])
    assert counted() - before < 20
