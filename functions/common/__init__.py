"""Code shared by the produce, consume and admin functions (deployed with each of them).

* ``routes``: the route table (which function serves which path and methods);
* ``errors``: the one mapping from errors to HTTP statuses and bodies;
* ``http``: Powertools resolver with JSON 404/405/error answers;
* ``telemetry``: Logger, Metrics (EMF) and Tracer per function;
* ``lazy``: services created once per execution environment, on first use;
* ``events``: API Gateway REST proxy events from plain HTTP requests.

``routes`` and ``events`` do not import Powertools.
"""
