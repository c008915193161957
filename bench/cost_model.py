"""Cost model of the deployed llog stack next to Kinesis Data Streams (docs/COST.md).

    .venv/bin/python bench/cost_model.py [--json] [--consumers N] [--partitions N] [--retention-hours H]
                                         [--peak-factor F] [--latency-factor F] [--efs-batching F]
                                         [--first-append-share F]

Arithmetic on stated inputs only, standard library only. Every table is
printed for both append protocols (``LLOG_APPEND_PROTOCOL``: ``cas``, the
deployed default, and ``sequential``, docs/SEQUENTIAL_APPEND.md) wherever
they differ:

* ``Prices``: us-east-1 list prices, transcribed by hand (``PRICES_AS_OF``);
  they are assumptions, not read from AWS.
* ``Code``: constants of llog and of the CDK app that the operation counts
  follow from (function memory, compaction and consume limits, schedules).
  ``tests/unit/test_cost_model.py`` checks them against the source.
* The operation counts per request (``produce_part`` ... ``gc_part``): the S3
  counts of produce, consume and compaction reads are measured with moto by
  ``tests/integration/test_cost_model_counts.py``; the Oxia counts (``Code``
  for what both protocols share, ``ProtocolOxia`` for what differs) are
  measured on a real Oxia server by
  ``tests/integration/test_cost_model_oxia_counts.py``, which runs the real
  code for each and asserts that it issues exactly these counts (and that the
  server logs one WAL write per Oxia write); the S3 writes of compaction and
  GC are derived from the code.
* ``Latency``: assumed latencies inside a Lambda function, from which billed
  durations are built (nothing was deployed, so none is measured); the
  sensitivity table scales them.
* ``FrontDoor`` (REST API, HTTP API, function URLs), ``OxiaStorage`` (EBS gp3 on
  ECS on EC2, production's default, or EFS) and ``records_per_request``
  (small records batched by the client into ``CLIENT_BATCH_BYTES`` requests):
  the deployed defaults in every table but the last two, which price the
  production shape with each and state issue 15's targets as met or not.
  Each shape is priced on the storage the stack gives it (``on_shape``): the
  production shape on ``Assumptions.oxia_storage``, the dev shape (standalone)
  always on EFS.

Every table of docs/COST.md is printed by this script; ``--json`` gives the same numbers.
The model is in ``bench/cost/``: ``inputs.py`` (``Prices``, ``Code``,
``ProtocolOxia``, ``Latency``, ``FrontDoor``, ``OxiaStorage``, the shapes,
``Assumptions``), ``operations.py`` (the counts per request, ``Part``),
``money.py`` (USD by bill line, fixed and monthly costs), ``kinesis.py``,
``comparisons.py`` (break-even, configurations, targets), ``report.py`` (every
number as data) and ``tables.py`` (the Markdown); this script reads the options.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from collections.abc import Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # run as a script: make `bench` importable
    sys.path.insert(0, str(ROOT))

from bench.cost.inputs import Assumptions  # noqa: E402
from bench.cost.report import build  # noqa: E402
from bench.cost.tables import render  # noqa: E402


def parse_args(argv: Sequence[str] | None) -> tuple[argparse.Namespace, Assumptions]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", action="store_true", help="print the numbers as JSON instead of tables")
    defaults = Assumptions()
    parser.add_argument("--consumers", type=int, default=defaults.consumers, help="consumer groups reading everything")
    parser.add_argument("--partitions", type=int, default=defaults.partitions, help="active partitions")
    parser.add_argument("--retention-hours", type=float, default=defaults.retention_hours)
    parser.add_argument("--peak-factor", type=float, default=defaults.peak_factor, help="peak/average (Kinesis shards)")
    parser.add_argument("--latency-factor", type=float, default=1.0, help="scale every assumed latency")
    parser.add_argument("--efs-batching", type=float, default=defaults.efs_batching, help="Oxia writes per EFS write")
    parser.add_argument(
        "--first-append-share",
        type=float,
        default=defaults.first_append_share,
        help="share of produce requests that are a writer's first to their partition (sequential)",
    )
    args = parser.parse_args(argv)
    a = dataclasses.replace(
        defaults,
        consumers=args.consumers,
        partitions=args.partitions,
        retention_hours=args.retention_hours,
        peak_factor=args.peak_factor,
        latency=defaults.latency.scaled(args.latency_factor),
        efs_batching=args.efs_batching,
        first_append_share=args.first_append_share,
    )
    return args, a


def main(argv: Sequence[str] | None = None) -> int:
    args, a = parse_args(argv)
    doc = build(a)
    print(json.dumps(doc, indent=2) if args.json else render(doc, a), end="" if not args.json else "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
