"""The development server: ``llog serve`` (the HTTP API from one process), ``llog invoke``, and ``make dev``'s stack.

None of it ships in the Lambda layer or the Glue zip. It runs the same
handlers (``functions``) on the same library (``llog``), adding what only a
long-lived process needs: a batching producer, the S3 billing estimate,
Prometheus output, and the local Oxia and S3 servers of ``make dev``.
"""
