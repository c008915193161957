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

API_FUNCTIONS = (PRODUCE, CONSUME, ADMIN)  # behind the REST API (``routes``)
FUNCTIONS = (*API_FUNCTIONS, COMPACTION_PLANNER, COMPACTION_WORKER, GC, VERIFY, BACKUP)

METRIC_NAMESPACE = "llog"
SERVE = "serve"  # the service dimension of llog serve's own request metrics (server/emf.py)
