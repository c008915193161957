"""Request-level services behind the HTTP API, with no HTTP framework."""
