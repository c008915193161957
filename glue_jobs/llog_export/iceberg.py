"""The export as an Iceberg table: rows and cursors commit in one Iceberg snapshot.

Each append carries the export's cursors as the snapshot property
``llog.export.cursors``; the next run reads them back from the newest snapshot
of the table's current lineage that has them. Iceberg's atomic commit makes the
rows and the cursor one step: a run that dies before it leaves only
unreferenced files (Iceberg's ``remove_orphan_files`` clears them), a run that
dies after it is complete.

Table maintenance can leave no snapshot with cursors: ``rewrite_data_files``
commits a snapshot of its own, and ``expire_snapshots`` (Glue's table
optimizers) then removes the export's. The rows survive any maintenance, and
they committed with the cursors, so the cursors are then read from the rows:
one past the greatest offset of each incarnation's partition (``topic_id``
names the incarnation). Ranges a run skipped after its last row (expired or
lost, ``llog_export.job``) are found and skipped again by the next plan.
Expiration removes the oldest snapshots first, so a snapshot with cursors that
is still there is the newest export's. Two runs at once are refused by the run
lease (``llog_export.lease``): Iceberg accepts two concurrent appends, which
would export a range twice.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable

from pyspark.sql import DataFrame, SparkSession

from llog.errors import InvalidArgument
from llog.format.keys import PartitionKeys
from llog.protocol.faults import FaultHook
from llog.store.s3 import BlobStore
from llog_export.catalog import COLUMNS, add_topic_id_column
from llog_export.job import Export, ExportOptions, cursor_name
from llog_export.state import Cursors, FileSystem, cursors_from_json, cursors_to_json

CURSORS_PROPERTY = "llog.export.cursors"
ATTEMPT_PROPERTY = "llog.export.attempt"
DEFAULT_CATALOG = "glue_catalog"
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,254}")


class IcebergExport(Export):
    def __init__(
        self,
        spark: SparkSession,
        options: ExportOptions,
        *,
        catalog: str = DEFAULT_CATALOG,
        blobs: BlobStore | None = None,
        fs: FileSystem | None = None,
        fault_hook: FaultHook | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        super().__init__(spark, options, blobs=blobs, fs=fs, fault_hook=fault_hook, clock=clock)
        names = (catalog, options.database or "", options.table)
        for name in names:
            if not _IDENTIFIER.fullmatch(name):
                raise InvalidArgument(f"an Iceberg export needs --database and --table identifiers, got {names}")
        self.table = ".".join(f"`{n}`" for n in names)

    def _ensure_table(self) -> None:
        namespace = self.table.rsplit(".", 1)[0]
        self.spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {namespace}")
        self.spark.sql(
            f"CREATE TABLE IF NOT EXISTS {self.table} ({COLUMNS}) USING iceberg PARTITIONED BY (`topic`, `date`)"
        )
        add_topic_id_column(self.spark, self.table)

    def committed_cursors(self) -> tuple[Cursors, str | None]:
        self._ensure_table()
        rows = self.spark.sql(
            f"SELECT s.summary FROM {self.table}.snapshots s JOIN {self.table}.history h "
            "ON s.snapshot_id = h.snapshot_id WHERE h.is_current_ancestor ORDER BY s.committed_at DESC"
        ).collect()
        for row in rows:
            summary = row["summary"] or {}
            if CURSORS_PROPERTY in summary:
                return cursors_from_json(json.loads(summary[CURSORS_PROPERTY])), None
        return self._cursors_from_rows(), None  # maintenance expired every export snapshot, or nothing exported yet

    def _cursors_from_rows(self) -> Cursors:
        """One past the greatest exported offset of each incarnation's partition (the module docstring)."""
        cursors: Cursors = {}
        for row in self.spark.sql(
            f"SELECT `topic`, `topic_id`, `partition`, max(`offset`) AS last FROM {self.table} "
            "GROUP BY `topic`, `topic_id`, `partition`"
        ).collect():
            keys = PartitionKeys(row["topic"], row["partition"], self.options.llog_root_prefix, row["topic_id"])
            cursors.setdefault(cursor_name(keys), {})[keys.partition] = row["last"] + 1
        return cursors

    def commit(self, rows: DataFrame, attempt: str, cursors: Cursors) -> int:
        # Decoding and writing happen inside the append, before its commit: the lease must outlast them.
        self._check_lease()
        (
            rows.writeTo(self.table)
            .option(f"snapshot-property.{CURSORS_PROPERTY}", json.dumps(cursors_to_json(cursors), sort_keys=True))
            .option(f"snapshot-property.{ATTEMPT_PROPERTY}", attempt)
            .append()
        )
        self._stage("decode_and_commit")
        added = self.spark.sql(
            f"SELECT summary['added-data-files'] AS files FROM {self.table}.snapshots "
            f"WHERE summary['{ATTEMPT_PROPERTY}'] = '{attempt}'"
        ).collect()
        return int(added[0]["files"]) if added and added[0]["files"] else 0
