"""The native HTTP API of docs/HTTP_API.md: its bodies, and parsing and answering them."""
