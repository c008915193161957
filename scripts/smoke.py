"""`make smoke URL=...`: checks a running llog HTTP API end to end, as a platform engineer would right after
``cdk deploy`` (docs/DEPLOY.md), or ``make dev``'s (``URL=http://127.0.0.1:8080``).

Each step prints one line with its time once it ends:

1. ``produce (README)``, ``consume (README)``: the first ``POST /produce`` and ``POST /consume`` of README.md's
   first ``bash`` block under "## The HTTP API" (read at every run, so that the README and this check cannot
   drift), on a fresh topic ``smoke-<random>`` instead of the README's; both answer 200 and the consume
   reads the values the produce wrote.
2. ``create topic``, ``produce (client)``, ``consume (client)``: a second fresh topic of ``PARTITIONS``
   partitions (``POST /topics``); llog_client's ``Producer`` sends ``--records`` keyed records to it and a
   ``Consumer`` of a fresh group reads them back: every record, on its key's partition, in the order sent.
3. ``commit, lag 0``: that consumer commits, and ``GET /groups/<group>`` shows lag 0 on every partition.
4. ``delete topics``: ``DELETE /topics/<topic>`` of both (not with ``--keep``).

With an API key the topic writes are IAM-only (docs/DEPLOY.md, "Calling the deployed API"): ``POST
/topics`` answers 403, and the produce creates the topic (one partition); the delete's 403 is reported
with the topics left behind rather than as a failure. Groups have no delete route: the smoke group
expires by itself (``LLOG_GROUP_EXPIRY_MS``, docs/GROUPS.md).

Auth is chosen as ``llog produce`` chooses it: ``--sigv4-region`` (botocore's credentials), else
``--api-key`` or ``$LLOG_API_KEY``, else none. Exit 0 when every step passed; 1 naming the failed step
and the answer, with a hint for the usual causes (wrong URL, missing or refused auth, a URL that is not
the stage's); 2 for bad usage, missing credentials, or README.md examples this script can no longer read.

    .venv/bin/python scripts/smoke.py --url https://<api-id>.execute-api.<region>.amazonaws.com/<stage>/ \\
        [--sigv4-region REGION | --api-key KEY] [--records N] [--keep]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import re
import secrets
import sys
import time
from collections import defaultdict
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from llog_client.auth import ApiKeyAuth, Auth
from llog_client.cli import API_KEY_VARIABLE, auth_from_args
from llog_client.consumer import Consumer
from llog_client.errors import LlogClientError, OutcomeUnknownError, TransportError
from llog_client.partitioner import partition_for_key
from llog_client.producer import Producer
from llog_client.transport import Transport, path
from llog_client.wire import decode_bytes

README = Path(__file__).resolve().parents[1] / "README.md"
README_SECTION = "## The HTTP API"
PARTITIONS = 3
KEYS = 10  # distinct keys of the client's records: several per partition
TIMEOUT_S = 30.0  # for a request, for the producer's deliveries, and for the consumer to read everything back
# A `curl -X POST .../produce` or `.../consume` command of the README and its `-d '<body>'`, within one command.
CURL_POST = re.compile(
    r"curl -X POST \S*/(?P<route>produce|consume)\b(?:(?!\ncurl ).)*?-d '(?P<body>[^']*)'", re.DOTALL
)

# (offset, key, value) of the client's records, per partition
PartitionRecords = dict[int, list[tuple[int, bytes | None, bytes]]]


class ReadmeDrift(ValueError):
    """README.md's HTTP API examples are not where, or not what, this script reads."""


class StepFailed(Exception):
    """What a step expected and what the API answered, with a hint when the cause is a usual one."""

    def __init__(self, message: str, hint: str | None = None) -> None:
        super().__init__(message)
        self.hint = hint
        self.step = ""


def readme_bodies(readme: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """The JSON bodies of the first ``POST /produce`` and ``POST /consume`` in README.md's first ``bash`` block
    under "## The HTTP API"; :class:`ReadmeDrift` if either is missing, not JSON, or lacks what this script uses
    (entries with ``partition``, and ``records`` or ``fetch_offset``)."""
    _, heading, section = readme.partition(f"\n{README_SECTION}\n")
    block = re.search(r"```bash\n(.*?)```", section, re.DOTALL)
    if not heading or block is None:
        raise ReadmeDrift(f'README.md has no bash block under "{README_SECTION}"')
    bodies: dict[str, dict[str, Any]] = {}
    for command in CURL_POST.finditer(block.group(1)):
        route = command["route"]
        if route in bodies:
            continue
        try:
            body = json.loads(command["body"])
        except ValueError as exc:
            raise ReadmeDrift(f"README.md's POST /{route} body is not JSON: {exc}") from exc
        entries = body.get("topic_partitions") if isinstance(body, dict) else None
        needed = "records" if route == "produce" else "fetch_offset"
        if not entries or not all(isinstance(e, dict) and "partition" in e and needed in e for e in entries):
            raise ReadmeDrift(f"README.md's POST /{route} body has no topic_partitions with partition and {needed}")
        bodies[route] = body
    missing = [route for route in ("produce", "consume") if route not in bodies]
    if missing:
        raise ReadmeDrift(f"README.md's first bash block under \"{README_SECTION}\" has no POST /{missing[0]} -d '...'")
    return bodies["produce"], bodies["consume"]


def on_topic(body: dict[str, Any], topic: str) -> dict[str, Any]:
    """``body`` with every entry's topic replaced by ``topic``."""
    return {**body, "topic_partitions": [{**entry, "topic": topic} for entry in body["topic_partitions"]]}


def record_value(record: Any) -> bytes:
    """The value of a produce record: a string, ``{"base64": ...}``, or an object with ``value``."""
    return decode_bytes(record["value"] if isinstance(record, dict) and "value" in record else record)


def status_hint(status: int | None, answer: Any, auth: Auth | None) -> str | None:
    """What usually causes an answer llog did not give itself (API Gateway's: no ``error_type``); None otherwise."""
    if not isinstance(answer, dict) or "error_type" in answer:
        return None
    message = answer.get("message")
    if status == 404 or (status == 403 and auth is not None and message == "Missing Authentication Token"):
        return (f"{status} {message or 'Not Found'}: is --url the stage URL, the stack's ApiUrl output "
                "(https://<api-id>.execute-api.<region>.amazonaws.com/<stage>/)?")  # fmt: skip
    if status in (401, 403):
        if auth is None:
            return (f"{status} {message or 'Forbidden'}: the API needs SigV4 (pass --sigv4-region REGION with "
                    "credentials allowed execute-api:Invoke) or an API key (--api-key)")  # fmt: skip
        if isinstance(auth, ApiKeyAuth):
            return (f"{status} {message or 'Forbidden'}: the API key was refused; pass the value of the stack's key "
                    "(aws apigateway get-api-key --api-key <ApiKeyId> --include-value), or --sigv4-region REGION "
                    "for a stack with llog:apiAuth=iam (the default)")  # fmt: skip
        return (f"{status} {message or 'Forbidden'}: the signed request was refused; check --sigv4-region (the "
                "URL's region), the credentials (aws sts get-caller-identity) and that they are allowed "
                "execute-api:Invoke on this API")  # fmt: skip
    if status == 429:
        return "429: API Gateway throttled the requests (the stage's or the usage plan's rate); try again later"
    if status in (502, 504):
        return f"{status}: the gateway got no answer from the function (it failed or timed out); see its log group"
    return None


def unreachable(url: str, error: TransportError) -> StepFailed:
    """No answer from ``url``: why (DNS, connection refused, timeout), and where the right URL is."""
    reason = getattr(error.__cause__, "reason", None) or error.__cause__ or error
    why = re.sub(r"^(<[^>]*>|\w+\([^)]*\)): ", "", str(reason))  # urllib3 names its connection object first
    request = error.message.partition(": ")[0]
    return StepFailed(f"{request}: no answer: {why}", f"cannot reach {url} ({why}): check --url (the stack's "
                      "ApiUrl output; make dev's is http://127.0.0.1:8080) and that the API is up")  # fmt: skip


class Step:
    """What a step's line says besides its name and time: a note, and ``warn`` instead of ``ok`` when it left
    something behind."""

    def __init__(self) -> None:
        self.note = ""
        self.warning = False


class Smoke:
    """The checks against one API, and what they left to clean up."""

    def __init__(self, url: str, auth: Auth | None, records: int) -> None:
        self.url = url
        self.auth = auth
        self.records = records
        self.transport = Transport(url, auth, read_timeout_s=TIMEOUT_S)
        run = secrets.token_hex(4)
        self.readme_topic = f"smoke-{run}"
        self.client_topic = f"smoke-{run}-keyed"
        self.group = f"smoke-{run}"
        self.partitions = PARTITIONS
        self.written_topics: list[str] = []  # what the delete step removes
        self.consumer: Consumer | None = None

    @contextlib.contextmanager
    def step(self, name: str) -> Iterator[Step]:
        """Times the step and prints its line; a client error becomes :class:`StepFailed` with a hint."""
        step = Step()
        started = time.monotonic()
        try:
            try:
                yield step
            except OutcomeUnknownError as exc:
                raise self.failure(exc.last_error) from exc
            except LlogClientError as exc:
                raise self.failure(exc) from exc
        except StepFailed as failure:
            failure.step = name
            self.report("FAIL", name, started)
            raise
        self.report("warn" if step.warning else "ok", name, started, step.note)

    @staticmethod
    def report(outcome: str, name: str, started: float, note: str = "") -> None:
        elapsed_ms = (time.monotonic() - started) * 1000
        print(f"{outcome:<5}{name:<22}{elapsed_ms:>7.0f} ms" + (f"  {note}" if note else ""), flush=True)

    def failure(self, error: LlogClientError) -> StepFailed:
        if isinstance(error, TransportError):
            return unreachable(self.url, error)
        # error_from names an answer without llog's error_type after its status
        answer = {} if error.error_type == f"HTTP{error.status}" else {"error_type": error.error_type}
        return StepFailed(str(error), status_hint(error.status, answer, self.auth))

    def call(self, method: str, request_path: str, body: dict[str, Any] | None, expected: int) -> Any:
        """The answer of a request that must answer ``expected``."""
        status, answer = self.transport.exchange(method, request_path, body)
        self.expect(method, request_path, status, answer, expected)
        return answer

    def expect(self, method: str, request_path: str, status: int, answer: Any, expected: int) -> None:
        if status != expected:
            raise StepFailed(f"{method} {request_path} answered {status}, not {expected}: {json.dumps(answer)[:500]}",
                             status_hint(status, answer, self.auth))  # fmt: skip

    # -- the steps --

    def check(self, produce: dict[str, Any], consume: dict[str, Any]) -> None:
        """Steps 1 to 3, on the README's produce and consume bodies."""
        with self.step("produce (README)") as step:
            step.note = self.readme_topic
            self.produce_readme(on_topic(produce, self.readme_topic))
        with self.step("consume (README)"):
            self.consume_readme(on_topic(produce, self.readme_topic), on_topic(consume, self.readme_topic))
        with self.step("create topic") as step:
            self.create_client_topic(step)
        with self.step("produce (client)") as step:
            sent = self.produce_client()
            step.note = f"{self.records} records, partitions {sorted(sent)}"
        with self.step("consume (client)"):
            self.consume_client(sent)
        with self.step("commit, lag 0"):
            self.commit_and_check_lag()

    def produce_readme(self, body: dict[str, Any]) -> None:
        status, answer = self.transport.exchange("POST", "/produce", body)
        if status < 300 or (isinstance(answer, dict) and "error_type" in answer):  # llog answered: the topic may exist
            self.written_topics.append(self.readme_topic)
        self.expect("POST", "/produce", status, answer, 200)
        for entry, result in zip(body["topic_partitions"], answer["results"], strict=True):
            if not result.get("ok") or result.get("count") != len(entry["records"]):
                raise StepFailed(
                    f"partition {entry['partition']}: {len(entry['records'])} records sent, answered {result}"
                )

    def consume_readme(self, produce: dict[str, Any], consume: dict[str, Any]) -> None:
        written = {e["partition"]: [record_value(r) for r in e["records"]] for e in produce["topic_partitions"]}
        answer = self.call("POST", "/consume", consume, 200)
        results = {result["partition"]: result for result in answer["results"]}
        for entry in consume["topic_partitions"]:
            partition, fetch_offset = entry["partition"], entry["fetch_offset"]
            expected = written.get(partition, [])[fetch_offset - 1 :]  # a fresh topic's offsets start at 1
            result = results.get(partition, {})
            read = [decode_bytes(r["value"]) for r in result.get("records", [])] if result.get("ok") else result
            if read != expected:
                raise StepFailed(f"partition {partition} from offset {fetch_offset}: read {read!r}, "
                                 f"the produce wrote {expected!r}")  # fmt: skip

    def create_client_topic(self, step: Step) -> None:
        body = {"topic": self.client_topic, "partitions": PARTITIONS}
        status, answer = self.transport.exchange("POST", "/topics", body)
        if status == 403 and isinstance(self.auth, ApiKeyAuth):
            self.partitions = 1
            step.note = "403: IAM-only with an API key; the produce creates it with one partition"
        else:
            self.expect("POST", "/topics", status, answer, 201)
            step.note = f"{self.client_topic}, {PARTITIONS} partitions"
        self.written_topics.append(self.client_topic)

    def produce_client(self) -> PartitionRecords:
        """Sends the keyed records; checks each went to its key's partition, in the order sent."""
        records = [(f"key-{i % KEYS}".encode(), f"record-{i}".encode()) for i in range(self.records)]
        with Producer(self.url, self.auth, delivery_timeout_ms=TIMEOUT_S * 1000,
                      request_timeout_ms=TIMEOUT_S * 1000) as producer:  # fmt: skip
            futures = [producer.send(self.client_topic, value, key=key) for key, value in records]
        sent: PartitionRecords = defaultdict(list)
        for (key, value), future in zip(records, futures, strict=True):
            written = future.result()
            if written.partition != partition_for_key(key, self.partitions):
                raise StepFailed(f"key {key!r} went to partition {written.partition}, not its key's "
                                 f"{partition_for_key(key, self.partitions)} of {self.partitions}")  # fmt: skip
            earlier = sent[written.partition]
            if earlier and written.offset <= earlier[-1][0]:
                raise StepFailed(f"{value!r} written at {written.partition}@{written.offset}, not after the record "
                                 f"sent before it ({written.partition}@{earlier[-1][0]})")  # fmt: skip
            earlier.append((written.offset, key, value))
        return sent

    def consume_client(self, sent: PartitionRecords) -> None:
        """Reads the topic as a fresh group's member until every record came back; checks them all."""
        self.consumer = Consumer(self.url, self.group, [self.client_topic], self.auth, enable_auto_commit=False,
                                 request_timeout_ms=TIMEOUT_S * 1000)  # fmt: skip
        read: PartitionRecords = defaultdict(list)
        deadline = time.monotonic() + TIMEOUT_S
        while sum(map(len, read.values())) < self.records and time.monotonic() < deadline:
            for record in self.consumer.poll(1.0):
                read[record.partition].append((record.offset, record.key, record.value))
        for partition in sorted(sent.keys() | read.keys()):
            got, want = read[partition], sent[partition]
            if got != want:
                first = next(i for i in range(len(got) + 1) if got[i : i + 1] != want[i : i + 1])
                raise StepFailed(f"partition {partition}: read {len(got)} records, sent {len(want)}; from #{first} "
                                 f"read {got[first : first + 1]}, sent {want[first : first + 1]}")  # fmt: skip

    def commit_and_check_lag(self) -> None:
        assert self.consumer is not None
        self.consumer.commit()
        group = self.call("GET", path("groups", self.group), None, 200)
        lags = {o["partition"]: o["lag"] for o in group.get("offsets", []) if o["topic"] == self.client_topic}
        if lags != dict.fromkeys(range(self.partitions), 0):
            raise StepFailed(f"GET /groups/{self.group}: lag per partition of {self.client_topic} is {lags}, "
                             f"expected 0 on each of its {self.partitions}")  # fmt: skip

    # -- cleanup --

    def clean_up(self, keep: bool) -> None:
        """The consumer leaves its group; the topics are deleted unless ``keep``."""
        if self.consumer is not None:
            self.consumer.close()
        if not self.written_topics:
            return
        if keep:
            print(f"kept {', '.join(self.written_topics)} (--keep); group {self.group}", flush=True)
            return
        with self.step("delete topics") as step:
            refused = []
            for topic in self.written_topics:
                status, answer = self.transport.exchange("DELETE", path("topics", topic))
                if status == 403 and isinstance(self.auth, ApiKeyAuth):
                    refused.append(topic)
                else:
                    self.expect("DELETE", path("topics", topic), status, answer, 200)
            step.note = f"group {self.group} expires by itself (groups have no delete)"
            if refused:
                step.warning = True
                step.note = (f"403: topic delete is IAM-only with an API key; left behind: {', '.join(refused)} "
                             "(sign DELETE /topics/<topic> with awscurl); " + step.note)  # fmt: skip


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)  # fmt: skip
    parser.add_argument("--url", required=True, help="the API's base URL: the stack's ApiUrl output, or make dev's")
    auth = parser.add_mutually_exclusive_group()
    auth.add_argument("--api-key", default=None, help=f"send this API key (default: ${API_KEY_VARIABLE})")
    auth.add_argument("--sigv4-region", default=None, metavar="REGION",
                      help="sign requests with SigV4 for API Gateway in REGION (botocore's credentials)")  # fmt: skip
    parser.add_argument("--records", type=int, default=100, help="records the client sends (default 100)")
    parser.add_argument("--keep", action="store_true", help="leave the smoke topics in place")
    args = parser.parse_args(argv)
    if args.records < 1:
        parser.error("--records must be at least 1")
    if not args.url:
        parser.error("--url is empty: pass the API's URL (make smoke URL=https://...)")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        produce, consume = readme_bodies(README.read_text(encoding="utf-8"))
        auth = auth_from_args(args)
    except ValueError as exc:  # README.md's examples changed shape; no AWS credentials for SigV4; an empty key
        print(f"smoke: {exc}", file=sys.stderr)
        return 2
    smoke = Smoke(args.url, auth, args.records)
    started = time.monotonic()
    failures = []
    try:
        smoke.check(produce, consume)
    except StepFailed as failure:
        failures.append(failure)
    try:
        smoke.clean_up(args.keep)
    except StepFailed as failure:
        failures.append(failure)
    if failures:
        first = failures[0]
        print(f"smoke test FAILED at step '{first.step}' against {args.url}: {first}", file=sys.stderr)
        if first.hint:
            print(f"hint: {first.hint}", file=sys.stderr)
        return 1
    print(f"smoke test passed against {args.url} in {time.monotonic() - started:.1f} s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
