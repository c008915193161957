"""The names of llog's Lambda functions, and the namespace of their metrics.

A function's name is its directory (handler ``functions.<name>.app.handler``),
its Powertools service (the ``service`` key of its logs and the ``service``
dimension of its EMF metrics, which infra's dashboard and alarms select on)
and its key in infra's ``FunctionSpec`` table. No imports: infra, bench and
devserver read this without loading Powertools.
"""

PRODUCE = "produce"
CONSUME = "consume"
ADMIN = "admin"
COMPACTION_PLANNER = "compaction_planner"
COMPACTION_WORKER = "compaction_worker"
GC = "gc"
GC_WAL_EVENT = {"steps": "wal"}  # what GC's frequent schedule sends: the WAL blobs alone (docs/GC.md, "Schedules")
VERIFY = "verify"  # scheduled: checks partitions against the protocol's invariants (docs/RECOVERY.md)
BACKUP = "backup"  # scheduled: backs the Oxia state up to S3 (docs/RECOVERY.md)
KINESIS = "kinesis"  # the Kinesis Data Streams API, on its one path (``routes.KINESIS_PATH``; docs/KINESIS.md)

NATIVE_API_FUNCTIONS = (PRODUCE, CONSUME, ADMIN)  # llog's own HTTP API (``routes.ROUTES``)
API_FUNCTIONS = (*NATIVE_API_FUNCTIONS, KINESIS)  # behind the front door: none with llog serve, which answers both
FUNCTIONS = (*API_FUNCTIONS, COMPACTION_PLANNER, COMPACTION_WORKER, GC, VERIFY, BACKUP)

METRIC_NAMESPACE = "llog"
SERVE = "serve"  # the service dimension of llog serve's own request metrics (server/emf.py)
