"""``POST /consume``."""
