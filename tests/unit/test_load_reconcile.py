"""Unit tests of the load test's pure parts: reconciliation (bench/reconcile.py), the classification of
produce answers, percentiles, pacing and the summary (bench/load.py).

The HTTP side of bench/load.py runs against ``llog serve`` in tests/integration/test_load.py.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable, Iterator
from typing import Any

import pytest

from bench import load
from bench.load import BatchOutcome, Pacer, classify_produce, decode_bytes, percentile
from bench.reconcile import (
    ConsumedRecord,
    Outcome,
    ReconcileReport,
    RecordId,
    SentBatch,
    make_value,
    parse_record_id,
    reconcile,
)

RUN = "r1"
SIZE = 40


def value(client: int, seq: int) -> bytes:
    return make_value(RUN, RecordId(client, seq), SIZE)


def acked(partition: int, client: int, first_seq: int, count: int, start: int) -> SentBatch:
    return SentBatch(partition, client, first_seq, count, Outcome.ACKED, start)


def read_back(batch: SentBatch) -> list[ConsumedRecord]:
    """The records of an acknowledged batch exactly where the API said they are."""
    return [ConsumedRecord(batch.partition, batch.offset_of(s), value(batch.client, s))
            for s in range(batch.first_seq, batch.first_seq + batch.count)]


def check(batches: list[SentBatch], consumed: Iterable[ConsumedRecord], **kwargs: Any) -> ReconcileReport:
    return reconcile(batches, consumed, run_id=RUN, record_size=SIZE, **kwargs)


# --- record identity ---------------------------------------------------------------------------


def test_a_value_names_its_run_client_and_sequence_and_has_the_record_size():
    v = make_value("abc", RecordId(3, 1234), 64)
    assert len(v) == 64
    assert v.startswith(b"llog-load:abc:3:1234:")
    assert parse_record_id("abc", v) == RecordId(3, 1234)
    assert parse_record_id("other", v) is None
    assert parse_record_id("abc", b"alpha") is None


def test_a_value_is_never_cut_below_its_identity():
    v = make_value("abc", RecordId(3, 1234), 5)
    assert parse_record_id("abc", v) == RecordId(3, 1234)


def test_a_damaged_identity_of_this_run_is_an_error():
    with pytest.raises(ValueError, match="damaged"):
        parse_record_id("abc", b"llog-load:abc:3x:1:....")


# --- reconciliation ------------------------------------------------------------------------------


def test_all_acknowledged_records_found_is_ok():
    batches = [acked(0, 0, 0, 3, 1), acked(1, 0, 3, 3, 1), acked(0, 1, 0, 3, 4)]
    consumed = [r for b in batches for r in read_back(b)]
    report = check(batches, reversed(consumed))
    assert report.ok
    assert (report.acked, report.found, report.consumed) == (9, 9, 9)
    assert report.to_json()["examples"] == {}


def test_a_missing_acknowledged_record_fails():
    batch = acked(0, 0, 0, 3, 1)
    consumed = read_back(batch)
    del consumed[1]
    report = check([batch], consumed)
    assert not report.ok
    assert report.missing == 1
    assert report.found == 2
    assert report.examples["missing"] == ["client 0 seq 1, acknowledged at p0@2, was not read back"]


def test_a_record_read_twice_is_a_duplicate():
    batch = acked(0, 0, 0, 2, 1)
    consumed = [*read_back(batch), ConsumedRecord(0, 3, value(0, 1))]
    report = check([batch], consumed)
    assert not report.ok
    assert report.duplicates == 1
    assert report.found == 2


def test_a_record_at_another_offset_or_partition_is_misplaced():
    batches = [acked(0, 0, 0, 1, 1), acked(0, 0, 1, 1, 2)]
    swapped = [ConsumedRecord(0, 1, value(0, 1)), ConsumedRecord(1, 2, value(0, 0))]
    report = check(batches, swapped)
    assert not report.ok
    assert report.misplaced == 2
    assert report.missing == 0, "each was read once, only elsewhere"
    assert "acknowledged at p0@2" in report.examples["misplaced"][0]


def test_altered_bytes_fail_even_with_an_intact_identity():
    batch = acked(0, 0, 0, 2, 1)
    first, second = read_back(batch)
    tampered = ConsumedRecord(0, 2, second.value[:-1] + b"!")
    report = check([batch], [first, tampered])
    assert not report.ok
    assert report.altered == 1
    assert report.found == 1


def test_an_identity_damaged_in_the_log_is_altered():
    batch = acked(0, 0, 0, 1, 1)
    damaged = ConsumedRecord(0, 1, b"llog-load:" + RUN.encode() + b":?:0:" + b"." * 20)
    report = check([batch], [damaged])
    assert (report.altered, report.missing) == (1, 1)


def test_a_record_never_sent_is_invented():
    batch = acked(0, 0, 0, 1, 1)
    consumed = [*read_back(batch), ConsumedRecord(0, 2, value(7, 0)), ConsumedRecord(0, 3, value(0, 1))]
    report = check([batch], consumed)
    assert not report.ok
    assert report.invented == 2
    assert "was never sent" in report.examples["invented"][0]


def test_a_record_of_a_rejected_request_in_the_log_is_invented():
    rejected = SentBatch(0, 0, 0, 2, Outcome.REJECTED, error="409 LogFenced")
    report = check([rejected], [ConsumedRecord(0, 1, value(0, 0))])
    assert not report.ok
    assert report.invented == 1
    assert report.rejected_absent == 1
    assert "409 LogFenced" in report.examples["invented"][0]


def test_a_rejected_request_that_is_absent_is_ok():
    rejected = SentBatch(0, 0, 0, 2, Outcome.REJECTED, error="400 InvalidRequest")
    report = check([rejected], [])
    assert report.ok
    assert (report.acked, report.rejected_absent) == (0, 2)


@pytest.mark.parametrize(
    ("error", "consumed", "present_absent"),
    [
        ("transport Timeout", [ConsumedRecord(1, 5, value(0, 0)), ConsumedRecord(1, 6, value(0, 1))], (2, 0)),
        ("504 Gateway: Endpoint request timed out", [], (0, 2)),
    ],
    ids=["written", "not-written"],
)
def test_an_ambiguous_request_written_or_not_is_not_a_failure(
    error: str, consumed: list[ConsumedRecord], present_absent: tuple[int, int]
) -> None:
    ambiguous = SentBatch(1, 0, 0, 2, Outcome.AMBIGUOUS, error=error)
    report = check([ambiguous], consumed)
    assert report.ok
    assert (report.ambiguous_present, report.ambiguous_absent) == present_absent


def test_an_ambiguous_request_written_twice_is_a_duplicate():
    ambiguous = SentBatch(1, 0, 0, 1, Outcome.AMBIGUOUS, error="transport Timeout")
    report = check([ambiguous], [ConsumedRecord(1, 1, value(0, 0)), ConsumedRecord(1, 2, value(0, 0))])
    assert not report.ok
    assert report.duplicates == 1


def test_records_of_other_runs_are_counted_not_judged():
    batch = acked(0, 0, 0, 1, 2)
    other = ConsumedRecord(0, 1, make_value("another-run", RecordId(0, 0), SIZE))
    report = check([batch], [other, ConsumedRecord(0, 3, b"alpha"), *read_back(batch)])
    assert report.ok
    assert report.foreign == 2


def test_a_partition_that_could_not_be_read_makes_the_result_incomplete():
    errors: list[str] = []

    def stream() -> Iterator[ConsumedRecord]:
        yield from read_back(acked(0, 0, 0, 1, 1))
        errors.append("partition 1 at offset 1: OxiaUnavailable")  # filled while streaming, as the reader does

    report = check([acked(0, 0, 0, 1, 1)], stream(), read_errors=errors)
    assert not report.complete
    assert not report.ok
    assert report.to_json()["read_errors"] == ["partition 1 at offset 1: OxiaUnavailable"]


def test_examples_are_bounded():
    batch = acked(0, 0, 0, 50, 1)
    report = check([batch], [], max_examples=3)
    assert report.missing == 50
    assert len(report.examples["missing"]) == 3


def test_the_same_sequence_number_sent_twice_is_a_bug_of_the_caller():
    with pytest.raises(ValueError, match="twice"):
        check([acked(0, 0, 0, 2, 1), acked(0, 0, 1, 2, 3)], [])


def test_only_acknowledged_batches_have_offsets():
    with pytest.raises(ValueError, match="start offset"):
        SentBatch(0, 0, 0, 1, Outcome.ACKED)
    with pytest.raises(ValueError, match="start offset"):
        SentBatch(0, 0, 0, 1, Outcome.AMBIGUOUS, 3)


# --- produce answers ----------------------------------------------------------------------------


def body(doc: object) -> bytes:
    return json.dumps(doc).encode()


def test_a_200_acknowledges_with_the_offsets():
    answer = body({"results": [{"ok": True, "count": 3, "start_offset": 7, "end_offset": 9}]})
    assert classify_produce(200, answer, [3]) == [BatchOutcome(Outcome.ACKED, 7)]


def test_a_409_decides_per_partition():
    answer = body({"results": [
        {"ok": True, "count": 2, "start_offset": 1, "end_offset": 2},
        {"ok": False, "count": 1, "error_type": "LogFenced", "retriable": False},
        {"ok": False, "count": 1, "error_type": "OxiaUnavailable", "retriable": True},
        {"ok": False, "count": 1, "error_type": "AppendOutcomeUnknown", "retriable": True},
    ]})
    assert classify_produce(409, answer, [2, 1, 1, 1]) == [
        BatchOutcome(Outcome.ACKED, 1),
        BatchOutcome(Outcome.REJECTED, error="409 LogFenced"),
        BatchOutcome(Outcome.REJECTED, error="409 OxiaUnavailable"),
        BatchOutcome(Outcome.AMBIGUOUS, error="409 AppendOutcomeUnknown"),
    ]


def test_a_503_of_back_pressure_is_a_rejection_per_partition():
    answer = body({"results": [{"ok": False, "count": 1, "error_type": "BackPressureRejected"}]})
    assert classify_produce(503, answer, [1]) == [BatchOutcome(Outcome.REJECTED, error="503 BackPressureRejected")]


REJECTED, AMBIGUOUS = Outcome.REJECTED, Outcome.AMBIGUOUS


@pytest.mark.parametrize(
    ("status", "doc", "outcome", "key"),
    [
        (400, {"error": "bad", "error_type": "InvalidRequest"}, REJECTED, "400 InvalidRequest"),
        (413, {"error": "big", "error_type": "PayloadTooLarge"}, REJECTED, "413 PayloadTooLarge"),
        (403, {"message": "Forbidden"}, REJECTED, "403 Gateway: Forbidden"),
        (429, {"message": "Too Many Requests"}, REJECTED, "429 Gateway: Too Many Requests"),
        (503, {"error": "x", "error_type": "OxiaUnavailable"}, AMBIGUOUS, "503 OxiaUnavailable"),
        (500, {"error": "x", "error_type": "InternalError"}, AMBIGUOUS, "500 InternalError"),
        (504, {"message": "Endpoint request timed out"}, AMBIGUOUS, "504 Gateway: Endpoint request timed out"),
        (502, "not json", AMBIGUOUS, "502 HTTP"),
    ],
)
def test_a_request_level_answer_decides_for_every_batch(status, doc, outcome, key):
    raw = doc.encode() if isinstance(doc, str) else body(doc)
    assert classify_produce(status, raw, [5, 5]) == [BatchOutcome(outcome, error=key)] * 2


def test_an_acknowledgement_with_the_wrong_count_is_not_trusted():
    answer = body({"results": [{"ok": True, "count": 3, "start_offset": 7, "end_offset": 8}]})
    assert classify_produce(200, answer, [3]) == [BatchOutcome(Outcome.AMBIGUOUS, error="200 MalformedResult")]


@pytest.mark.parametrize("values", [[value(0, 1), value(0, 2)], [value(3, 4)], []])
def test_a_produce_body_is_the_json_of_its_values(values):
    doc = {"topic_partitions": [{"topic": "load-a1", "partition": 2, "records": [v.decode() for v in values]}]}
    assert load.produce_body("load-a1", 2, values) == json.dumps(doc).encode()


@pytest.mark.parametrize("bad", [b'a"b', b"a\\b", "\u00e9".encode()])
def test_a_produce_body_refuses_a_value_that_needs_json_escapes(bad):
    with pytest.raises(ValueError, match="JSON escapes"):
        load.produce_body("load-a1", 0, [value(0, 1), bad])


def test_consumed_values_are_strings_or_base64():
    assert decode_bytes("alpha") == b"alpha"
    assert decode_bytes({"base64": "AAE="}) == b"\x00\x01"
    with pytest.raises(ValueError, match="not a value"):
        decode_bytes(3)


# --- percentiles and pacing -----------------------------------------------------------------------


def test_percentiles_are_nearest_rank():
    values = [float(v) for v in range(1, 101)]
    assert percentile(values, 0.50) == 50
    assert percentile(values, 0.90) == 90
    assert percentile(values, 0.99) == 99
    assert percentile(values, 1.0) == 100
    assert percentile([3.0], 0.99) == 3
    assert math.isnan(percentile([], 0.5))


def test_latency_summary_in_milliseconds():
    summary = load.latency_summary_ms([0.001, 0.002, 0.010])
    assert summary == {"count": 3, "mean": 4.333, "p50": 2.0, "p90": 10.0, "p99": 10.0, "max": 10.0}
    assert load.latency_summary_ms([]) == {"count": 0, "mean": None, "p50": None, "p90": None, "p99": None,
                                           "max": None}  # fmt: skip


def test_the_pacer_spaces_requests_by_their_records_over_the_rate():
    pacer = Pacer(rate=100, start=10.0, duration=1.0, clock=lambda: 0.0)
    slots = []
    while (slot := pacer.next_slot(10)) is not None:
        slots.append(slot)
    assert slots == pytest.approx([10.0 + 0.1 * i for i in range(10)])


def test_the_pacer_shares_one_schedule_between_clients():
    pacer = Pacer(rate=50, start=0.0, duration=10.0, clock=lambda: 0.0)
    # two clients asking in turn get consecutive slots: the rate is the total, not per client
    assert [pacer.next_slot(5) for _ in range(4)] == pytest.approx([0.0, 0.1, 0.2, 0.3])


def test_the_pacer_without_a_rate_only_enforces_the_duration():
    now = [0.0]
    pacer = Pacer(rate=0, start=0.0, duration=2.0, clock=lambda: now[0])
    assert pacer.next_slot(100) == 0.0
    now[0] = 1.5
    assert pacer.next_slot(100) == 1.5
    now[0] = 2.0
    assert pacer.next_slot(100) is None


def test_the_pacer_stops_at_the_duration_even_behind_schedule():
    now = [0.0]
    pacer = Pacer(rate=10, start=0.0, duration=2.0, clock=lambda: now[0])
    assert pacer.next_slot(10) == 0.0
    now[0] = 2.5  # the clients fell behind: the slot at 1.0 was never taken in time
    assert pacer.next_slot(10) is None


# --- summary ---------------------------------------------------------------------------------------


def test_the_summary_and_its_table():
    config = load.LoadConfig(url="http://x", topic="t", run_id=RUN, partitions=1, clients=1, rate=10, duration=2,
                             record_size=SIZE, batch=2, timeout=5)
    stats = load.Stats()
    good = acked(0, 0, 0, 2, 1)
    stats.record(200, 0.004, good, 2 * SIZE)
    stats.record(409, 0.002, SentBatch(0, 0, 2, 2, Outcome.REJECTED, error="409 LogFenced"), 2 * SIZE)
    stats.record(None, None, SentBatch(0, 0, 4, 2, Outcome.AMBIGUOUS, error="transport Timeout"), 2 * SIZE)
    report = reconcile(stats.batches, read_back(good), run_id=RUN, record_size=SIZE)

    summary = load.summarize(config, stats, 2.0, report, 0.5)

    assert summary["requests"] == {"sent": 3, "ok": 1, "failed": 2, "by_status": {"200": 1, "409": 1, "transport": 1}}
    assert summary["records"] == {"sent": 6, "acked": 2, "rejected": 2, "ambiguous": 2}
    assert summary["throughput"] == {"records_per_s": 1.0, "mb_per_s": 0.0, "requests_per_s": 1.5}
    assert summary["latency_ms"]["p50"] == 2.0
    assert summary["latency_ms"]["max"] == 4.0
    assert summary["errors"] == {"409 LogFenced": 1, "transport Timeout": 1}
    assert summary["reconciliation"]["ok"] is True
    assert summary["reconciliation"]["ambiguous_absent"] == 2
    json.dumps(summary)  # serializable as it is

    table = load.render_table(summary)
    assert re.search(r"^reconciliation +OK$", table, re.M)
    assert "409 LogFenced: 1 batches" in table
    assert load.reconciliation_verdict({**summary, "reconciliation": None}).startswith("not run")


def test_bad_arguments_exit_with_2(capsys, monkeypatch):
    monkeypatch.delenv(load.API_KEY_ENV, raising=False)
    assert load.main(["--auth", "api-key"]) == 2
    assert "--api-key" in capsys.readouterr().err
    assert load.main(["--url", "ftp://example.com"]) == 2
    with pytest.raises(SystemExit):
        load.main(["--clients", "0"])


def test_the_region_comes_from_an_execute_api_url():
    assert load.region_from_url("https://abc123.execute-api.eu-west-1.amazonaws.com/prod/") == "eu-west-1"
    assert load.region_from_url("http://127.0.0.1:8080") is None


def test_sigv4_signs_for_execute_api(monkeypatch):
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIDEXAMPLE")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "secret")
    monkeypatch.delenv("AWS_SESSION_TOKEN", raising=False)
    monkeypatch.delenv("AWS_PROFILE", raising=False)
    sign = load.sigv4_signer("https://abc.execute-api.us-east-2.amazonaws.com/dev", None)
    headers = sign("POST", "https://abc.execute-api.us-east-2.amazonaws.com/dev/produce", b"{}")
    assert headers["Authorization"].startswith("AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/")
    assert "/us-east-2/execute-api/aws4_request" in headers["Authorization"]
    assert "X-Amz-Date" in headers
