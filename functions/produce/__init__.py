"""``POST /produce``."""
