"""llog_export: turn llog's committed compacted objects into Parquet (or Iceberg) tables with Spark."""
