"""docs/SCALE.md's tables: the scale model of the background jobs from 1 to 10,000 produce requests/s.

    .venv/bin/python bench/scale_model.py

Deterministic arithmetic on the cost model's assumptions (bench/scale/tables.py says what each column is);
``tests/unit/test_scale_tables.py`` checks that docs/SCALE.md holds exactly what this prints.
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # run as a script: make `bench` importable
    sys.path.insert(0, str(ROOT))

from bench.scale.tables import SIZE_OR_AGE, SIZE_OR_AGE_RATES, render, rows  # noqa: E402


def main() -> int:
    print(render(rows(), rows(SIZE_OR_AGE, rates=SIZE_OR_AGE_RATES)), end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
