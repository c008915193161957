"""The APIs llog speaks, each a module over ``llog.service``: ``native`` (docs/HTTP_API.md) and ``kinesis``
(the Kinesis Data Streams API of issue 41; its pure core so far, not yet routed)."""
