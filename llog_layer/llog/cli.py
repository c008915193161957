"""The ``llog`` command: maintenance of a log from any machine with its ``LLOG_*`` settings.

``llog compact --topic T --partition P [--budget-s S]``
    Compact one partition until caught up, as the compaction worker does,
    printing one JSON line per ``compact_once``.

``llog gc``
    One garbage collection pass (docs/GC.md), printing its report as JSON.

``llog migrate --topic T --partition P``
    Switch one partition to the sequential append protocol, one way.

``llog verify [--topic T [--partition P]] [--json] [--no-data]``
    Check partitions against the protocol's invariants, reading only
    (docs/RECOVERY.md, "Verify a partition"); exit status 1 on any problem.

``llog backup [--topic T]...``, ``llog restore [--backup ID] [--topic T]...``, ``llog rebuild --topic T``
    Back up the Oxia state to S3, restore a backup into an empty namespace,
    rebuild a topic from S3 after its Oxia data is lost (docs/RECOVERY.md);
    each prints its report as JSON.

``llog adopt-namespace``
    After every topic is rebuilt or restored, write S3's namespace identity
    into the new Oxia, so that garbage collection runs again (docs/RECOVERY.md).

``llog keys create --name N [--streams P ...] [--read] [--write] [--admin] [--json]``, ``llog keys list [--json]``,
``llog keys revoke ID``
    The access keys of the Kinesis API (``llog.service.keys``): create one and print its secret, the one time
    it is shown; list them (no secrets); revoke one (every process refuses it within seconds).

Other packages add commands through the ``llog.commands`` entry point group
(an entry point names a ``register(subparsers)`` function): the repository's
``devserver`` package adds ``llog serve`` and ``llog invoke``.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from importlib.metadata import entry_points

from llog.config import root_prefix_from_env
from llog.errors import LlogError
from llog.protocol.append import LogWriter
from llog.protocol.backup import back_up_topics, restore_backup
from llog.protocol.compaction import Compactor, compact_until_caught_up
from llog.protocol.gc import GarbageCollector
from llog.protocol.namespace import adopt_namespace
from llog.protocol.rebuild import rebuild_topic
from llog.protocol.verify import Verifier, VerifyReport
from llog.service.keys import ACTIONS, AccessKey, AccessKeys, KeyPermissions
from llog.store.oxia import OxiaStore
from llog.store.sealing import sealer_from_env
from llog.store.storage import Storage

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
        report = collector.collect(wal_only=args.wal_only)
    except LlogError as exc:
        print(f"llog gc: {exc.error_type}: {exc}", file=sys.stderr)
        return 1
    finally:
        collector.close()
    print(json.dumps(dataclasses.asdict(report)))
    return 0


def _verify(args: argparse.Namespace) -> int:
    """Verify partitions (docs/RECOVERY.md, "Verify a partition"): a summary and the first problems; 1 on any."""
    if args.partition is not None and args.topic is None:
        print("llog verify: --partition needs --topic", file=sys.stderr)
        return 2
    verifier = Verifier.from_env(read_data=not args.no_data)
    try:
        report = verifier.verify(None if args.topic is None else [args.topic], args.partition)
    except LlogError as exc:
        print(f"llog verify: {exc.error_type}: {exc}", file=sys.stderr)
        return 1
    finally:
        verifier.close()
    print(json.dumps(report.to_json()) if args.json else _verify_table(report))
    return 0 if report.ok else 1


def _verify_table(report: VerifyReport, shown: int = 20) -> str:
    lines = [f"{s.topic}/{s.partition}{f' (topic id {s.topic_id})' if s.topic_id else ''}: {s.protocol}, "
             f"offsets [{s.log_start}, {s.high_watermark}], cursor {s.cursor}, "
             f"{s.entries} entries, {s.compacted_ranges} compacted, {s.manifests} manifests, {s.objects_checked} "
             f"objects, {s.orphans} orphans, {s.problems} problems" for s in report.partitions]  # fmt: skip
    lines.append(f"{len(report.partitions)} partition(s) verified, {report.problem_count} problem(s), "
                 f"{report.orphans} orphaned object(s)")  # fmt: skip
    lines += [f"{p.kind.value}\t{p.topic}/{p.partition}\t{p.key}\t{p.detail}" for p in report.problems[:shown]]
    return "\n".join(lines)


def _recovery(args: argparse.Namespace) -> int:
    """``backup``, ``restore``, ``rebuild`` or ``adopt-namespace`` (docs/RECOVERY.md): print the report as JSON;
    1 on a refusal or error."""
    storage = Storage.from_env()
    try:
        if args.command == "backup":
            report = back_up_topics(storage, args.topic)
            print(json.dumps(report.to_json()))
            return 0 if report.ok else 1
        if args.command == "restore":
            print(json.dumps(restore_backup(storage, args.backup, args.topic).to_json()))
        elif args.command == "adopt-namespace":
            print(json.dumps(adopt_namespace(storage).to_json()))
        else:
            print(json.dumps([r.to_json() for r in rebuild_topic(storage, args.topic)], indent=2))
    except LlogError as exc:
        print(f"llog {args.command}: {exc.error_type}: {exc}", file=sys.stderr)
        return 1
    finally:
        storage.close()
    return 0


def _add_recovery_commands(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    backup = sub.add_parser("backup", help="back up topics' Oxia state, groups and producer ids to S3")
    backup.add_argument("--topic", action="append", help="only this topic (repeatable; default: every topic)")
    restore = sub.add_parser("restore", help="write a backup into a namespace where its topics have no state")
    restore.add_argument("--backup", help="the backup's id (default: the newest complete one)")
    restore.add_argument("--topic", action="append", help="only this topic (repeatable; default: every topic)")
    rebuild = sub.add_parser("rebuild", help="rebuild a topic's Oxia state from S3 after the Oxia data is lost")
    rebuild.add_argument("--topic", required=True)
    adopt = sub.add_parser("adopt-namespace", help="after rebuilding or restoring every topic, let GC run again")
    for command in (backup, restore, rebuild, adopt):
        command.set_defaults(run=_recovery)


def _key_json(key: AccessKey) -> dict[str, object]:
    permissions = key.permissions
    return {"access_key_id": key.access_key_id, "name": key.name, "streams": list(permissions.streams),
            "read": permissions.read, "write": permissions.write, "admin": permissions.admin,
            "created_ms": key.created_ms}  # fmt: skip


def _key_line(key: AccessKey) -> str:
    created = datetime.fromtimestamp(key.created_ms / 1000, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    actions = ",".join(a for a in ACTIONS if getattr(key.permissions, a))
    return f"{key.access_key_id}\t{created}\t{actions}\t{','.join(key.permissions.streams)}\t{key.name}"


def _keys(args: argparse.Namespace) -> int:
    """``llog keys create|list|revoke``: the Kinesis API's access keys."""
    sealer = sealer_from_env()
    with OxiaStore.from_env() as oxia:
        keys = AccessKeys(oxia, root=root_prefix_from_env(), sealer=sealer)
        if args.keys_command == "create":
            chosen = {a: getattr(args, a) for a in ACTIONS}
            if not any(chosen.values()):  # no action named: read and write
                chosen = {a: a != "admin" for a in ACTIONS}
            key, secret = keys.create(args.name, KeyPermissions(tuple(args.streams), **chosen))
            if args.json:
                print(json.dumps({**_key_json(key), "secret_access_key": secret}))
            else:
                print(f"access key id      {key.access_key_id}\nsecret access key  {secret}")
                print("The secret is shown this once: llog keeps it sealed and cannot show it again.", file=sys.stderr)
        elif args.keys_command == "list":
            listed = keys.list()
            print(json.dumps([_key_json(k) for k in listed]) if args.json else "\n".join(map(_key_line, listed)))
        elif not keys.revoke(args.access_key_id):
            print(f"llog keys revoke: no access key {args.access_key_id!r}", file=sys.stderr)
            return 1
        else:
            print(f"revoked {args.access_key_id}")
    return 0


def _add_keys_command(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    keys = sub.add_parser("keys", help="the access keys of the Kinesis API: create, list, revoke")
    keys.set_defaults(run=_keys)
    commands = keys.add_subparsers(dest="keys_command", required=True)
    create = commands.add_parser("create", help="make a key and print its secret, the only time it is shown",
                                 description="Make an access key; without --read, --write or --admin it reads and "
                                 "writes.")  # fmt: skip
    create.add_argument("--name", required=True, help="what the key is for (1 to 128 printable characters)")
    create.add_argument("--streams", nargs="+", default=["*"], metavar="PATTERN",
                        help="fnmatch patterns of the streams (topics) it may use (default: every stream)")  # fmt: skip
    for action, meaning in (("read", "read records"), ("write", "write records"),
                            ("admin", "create, delete and describe streams")):  # fmt: skip
        create.add_argument(f"--{action}", action="store_true", help=meaning)
    create.add_argument("--json", action="store_true", help="print the key and its secret as one JSON object")
    listing = commands.add_parser("list", help="every key, oldest first, without secrets")
    listing.add_argument("--json", action="store_true", help="one JSON array")
    revoke = commands.add_parser("revoke", help="delete a key: every process refuses it within seconds")
    revoke.add_argument("access_key_id", metavar="ID")


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
    gc.add_argument("--wal-only", action="store_true", help="only the WAL blobs (what the frequent schedule runs)")
    migrate = sub.add_parser(
        "migrate", help="switch a partition to the sequential append protocol, one way (docs/SEQUENTIAL_APPEND.md)"
    )
    for command in (compact, migrate):
        command.add_argument("--topic", required=True)
        command.add_argument("--partition", type=int, required=True)
    verify = sub.add_parser("verify", help="check partitions against the protocol's invariants, reading only")
    verify.add_argument("--topic", help="only this topic (default: every topic)")
    verify.add_argument("--partition", type=int, help="only this partition of --topic")
    verify.add_argument("--json", action="store_true", help="print the whole report as one JSON document")
    verify.add_argument("--no-data", action="store_true", help="check objects' sizes, not their bytes' CRC32C")
    verify.set_defaults(run=_verify)
    compact.set_defaults(run=_compact)
    gc.set_defaults(run=_gc)
    migrate.set_defaults(run=_migrate)
    _add_recovery_commands(sub)
    _add_keys_command(sub)
    for plugin in sorted(entry_points(group=COMMAND_GROUP), key=lambda e: e.name):
        plugin.load()(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    run: Callable[[argparse.Namespace], int] = args.run
    try:
        return run(args)
    except LlogError as exc:  # a setting missing, Oxia out of reach, ...: one line, not a traceback
        print(f"llog {args.command}: {exc.error_type}: {exc}", file=sys.stderr)
        return 1
    except BrokenPipeError:  # the reader went away (| head): nothing more to say, nor to flush at exit
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0


if __name__ == "__main__":
    sys.exit(main())
