"""bench/gc_scale.py with tiny sizes against a real Oxia and moto: every run deletes what it must, by the path
it is named after, and the report sets each measured operation beside the cost model's assumption."""

from __future__ import annotations

import pytest

from bench import gc_scale

pytestmark = pytest.mark.oxia


def test_measures_each_operation_and_each_wal_run() -> None:
    result = gc_scale.run(partitions=3, blobs=100, runs=1, s3_server="moto", page_keys=100)

    assert set(result["operations"]) == set(gc_scale.OPERATIONS)
    assert all(op["ms"] > 0 and op["client_cpu_ms"] >= 0 for op in result["operations"].values())
    assert result["operations"]["partition_references"]["oxia_reads"] == 3  # control, cursor, index scan
    runs = {(r["run"], r["read_concurrency"]): r for r in result["wal_runs"]}
    assert set(runs) == {("unread", 1), ("unread", 16), ("by header", 16), ("nothing to delete", 1),
                         ("nothing to delete", 16)}  # fmt: skip
    assert all(r["partitions_read"] == 3 for r in runs.values())
    assert (runs["unread", 16]["blobs_deleted"], runs["unread", 16]["headers_read"]) == (100, 0)
    # By header: the copies, and the log's own blobs (written before the identity too, referenced: kept).
    header = runs["by header", 16]
    assert (header["blobs_deleted"], header["headers_read"]) == (100, 100 + gc_scale.APPENDS_PER_PARTITION + 1)
    assert runs["nothing to delete", 16]["blobs_deleted"] == 0

    table = gc_scale.report(result)
    assert "| one DeleteObjects of 100 keys |" in table
    assert "| 300 (`s3_delete_objects_ms`) |" in table
    assert table.count("| unread |") == 2


def test_the_modelled_rate_is_the_slower_of_the_listing_and_the_deletes() -> None:
    assert gc_scale.modelled_blobs_per_s(100, 300, 1) == pytest.approx(1000 / 0.3)
    assert gc_scale.modelled_blobs_per_s(100, 300, 16) == pytest.approx(10_000)
