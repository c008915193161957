"""scripts/soak.py's reading of a pytest run: fuzzed inputs per test, outcome, skip reasons."""

from __future__ import annotations

from scripts import soak

OUTPUT = """\
============================ Hypothesis Statistics =============================

tests/unit/test_codec.py::test_property_round_trip:

  - during reuse phase (0.01 seconds):
    - 3 passing, 0 failing, and 0 invalid examples
  - during generate phase (0.62 seconds):
    - 197 passing, 0 failing, and 22 invalid test cases

tests/unit/test_wal.py::test_arbitrary_bytes_are_a_blob_or_corrupt:

  - during generate phase (0.30 seconds):
    - 299 passing, 1 failing, and 0 invalid test cases

===================== skipped tests (not run, not passed) ======================
41 skipped: no Oxia server: the reason
================= 1 failed, 586 passed, 41 skipped in 405.51s (0:06:45) ==================
"""


def test_fuzzed_inputs_are_summed_per_test_over_phases() -> None:
    assert soak.fuzzed_per_test(OUTPUT) == {
        "tests/unit/test_codec.py::test_property_round_trip": 200,
        "tests/unit/test_wal.py::test_arbitrary_bytes_are_a_blob_or_corrupt": 300,
    }


def test_outcome_and_skip_reasons() -> None:
    assert soak.outcome(OUTPUT) == {"failed": 1, "passed": 586, "skipped": 41}
    assert soak.SKIPPED.findall(OUTPUT) == [("41", "no Oxia server: the reason")]
