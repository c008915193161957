"""The server: ``llog serve``, the HTTP API from one process, and what the serve fleet's image runs.

It runs the same handlers (``functions``) on the same library (``llog``), adding what only a long-lived
process needs: an HTTP/1.1 server on an event loop, a batching producer (group commit), the S3 billing
estimate, Prometheus and EMF metrics, and the console. None of it ships in the Lambda layer or the Glue zip;
the development tools are ``devserver``.
"""
