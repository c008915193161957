"""The library's entry points: ``LogWriter`` and ``LogReader``."""
