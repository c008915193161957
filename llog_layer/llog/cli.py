"""The ``llog`` command: maintenance of a log from any machine with its ``LLOG_*`` settings.

``llog compact --topic T --partition P [--budget-s S]``
    Compact one partition until caught up, as the compaction worker does,
    printing one JSON line per ``compact_once``.

``llog gc``
    One garbage collection pass (docs/GC.md), printing its report as JSON.

``llog migrate --topic T --partition P``
    Switch one partition to the sequential append protocol, one way.

Other packages add commands through the ``llog.commands`` entry point group
(an entry point names a ``register(subparsers)`` function): the repository's
``devserver`` package adds ``llog serve`` and ``llog invoke``.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from collections.abc import Callable, Sequence
from importlib.metadata import entry_points

from llog.client.writer import LogWriter
from llog.errors import LlogError
from llog.protocol.compaction import Compactor, compact_until_caught_up
from llog.protocol.gc import GarbageCollector

COMMAND_GROUP = "llog.commands"


def _compact(args: argparse.Namespace) -> int:
    """One partition by hand: compact until caught up (or the budget is spent), print what was done."""
    compactor = Compactor.from_env()
    try:
        results = compact_until_caught_up(compactor, args.topic, args.partition, budget_s=args.budget_s)
    except LlogError as exc:
        print(f"llog compact: {exc.error_type}: {exc}", file=sys.stderr)
        return 1
    finally:
        compactor.close()
    for result in results:
        print(json.dumps(dataclasses.asdict(result)))
    return 0


def _migrate(args: argparse.Namespace) -> int:
    """Switch one partition to the sequential append protocol, one way (docs/SEQUENTIAL_APPEND.md)."""
    writer = LogWriter.from_env()
    try:
        control = writer.migrate_to_sequential(args.topic, args.partition)
    except LlogError as exc:
        print(f"llog migrate: {exc.error_type}: {exc}", file=sys.stderr)
        return 1
    finally:
        writer.close()
    print(json.dumps({"topic": args.topic, "partition": args.partition, "control": json.loads(control.encode())}))
    return 0


def _gc(args: argparse.Namespace) -> int:
    """One garbage collection pass (docs/GC.md), printing its report."""
    collector = GarbageCollector.from_env()
    try:
        report = collector.collect()
    except LlogError as exc:
        print(f"llog gc: {exc.error_type}: {exc}", file=sys.stderr)
        return 1
    finally:
        collector.close()
    print(json.dumps(dataclasses.asdict(report)))
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="llog",
        description="llog: a diskless, leaderless log on Oxia and S3",
        epilog="llog serve and llog invoke come with the repository's devserver package (pip install .).",
    )
    sub = parser.add_subparsers(dest="command", required=True)
    compact = sub.add_parser("compact", help="compact one partition now (what the compaction worker does)")
    compact.add_argument("--budget-s", type=float, default=300.0, help="stop after this many seconds (default 300)")
    gc = sub.add_parser("gc", help="delete S3 objects nothing references any more (docs/GC.md)")
    migrate = sub.add_parser(
        "migrate", help="switch a partition to the sequential append protocol, one way (docs/SEQUENTIAL_APPEND.md)"
    )
    for command in (compact, migrate):
        command.add_argument("--topic", required=True)
        command.add_argument("--partition", type=int, required=True)
    compact.set_defaults(run=_compact)
    gc.set_defaults(run=_gc)
    migrate.set_defaults(run=_migrate)
    for plugin in sorted(entry_points(group=COMMAND_GROUP), key=lambda e: e.name):
        plugin.load()(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    run: Callable[[argparse.Namespace], int] = args.run
    return run(args)


if __name__ == "__main__":
    sys.exit(main())
