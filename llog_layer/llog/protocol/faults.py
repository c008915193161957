"""Named crash points, so tests can stop a component between any two storage steps.

A component calls ``self._fault("writer.after_reserve")`` between steps. In
production the hook is ``None`` and nothing happens; tests pass a hook that
raises at a chosen point (``tests/faults.py``), and the component's remaining
steps never run, as if its process had died there.
"""

from __future__ import annotations

from collections.abc import Callable

FaultHook = Callable[[str], None]
