"""Lambda functions of llog and their shared code.

Three answer the REST API (``produce``, ``consume``, ``admin``: API Gateway
proxy handlers), five run in the background (``compaction_planner``, ``gc``,
``verify`` and ``backup`` on schedules, ``compaction_worker`` on the
compaction queue); ``functions.common.names`` names them. Each handler validates its
input, calls the library (``llog.service``, ``llog.protocol``) and reports
through ``functions.common.telemetry``.

Deployment: each function is packaged with this package's ``__init__.py``, the
shared ``functions/common`` package and its own directory, keeping the
``functions.`` prefix, so the handler is ``functions.<name>.app.handler``. The
``llog`` library comes from the layer. ``llog serve`` runs the three API
handlers in one process; ``llog invoke`` runs any of them on an event file.
"""
