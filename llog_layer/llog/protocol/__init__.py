"""The log's state machines (docs/PROTOCOL.md)."""
