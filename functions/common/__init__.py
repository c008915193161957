"""Code shared by llog's functions (deployed with each of them).

For all eight:

* ``names``: the functions' names and their metric namespace (no imports: infra reads it);
* ``telemetry``: Logger, Metrics (EMF) and Tracer per function, one handler decorator;
* ``lazy``: services created once per execution environment, on first use.

For the three behind the REST API:

* ``routes``: the route table (which function serves which path and methods);
* ``http``: Powertools resolver with JSON 404/405/error answers (the answers themselves, and the
  mapping from errors to statuses, are ``llog.api.native``'s).

``names``, ``routes`` and ``lazy`` do not import Powertools.
"""
