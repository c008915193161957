"""The APIs llog speaks, each a module over ``llog.service``: ``native`` (docs/HTTP_API.md)."""
