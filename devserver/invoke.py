"""Run one handler on an event file (API Gateway, SQS, EventBridge) and print its response.

    python -m devserver.invoke produce events/produce.json
    llog invoke produce events/produce.json
    make invoke FN=produce EVENT=events/produce.json

The handler runs in this process, as Lambda would run it, against the
``LLOG_*`` environment; variables left unset default to the ``make dev``
stack (Oxia on 127.0.0.1:6648, VersityGW S3 on 127.0.0.1:4566, bucket
``leaderless-log-wal``). Prints ``{"statusCode", "headers", "body"}`` with a
JSON body decoded (other handlers' results as they are). Exit status 0 when
the handler answered (whatever the HTTP status), 1 when it raised, 2 for bad
arguments.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from functions.common import names
from functions.common.telemetry import LocalContext

LOCAL_STACK = {
    "LLOG_OXIA_SERVICE_ADDRESS": "127.0.0.1:6648",
    "LLOG_S3_BUCKET": "leaderless-log-wal",
    "LLOG_S3_ENDPOINT_URL": "http://127.0.0.1:4566",
    "LLOG_S3_REGION_NAME": "us-east-1",
    "LLOG_S3_ACCESS_KEY_ID": "testing",
    "LLOG_S3_SECRET_ACCESS_KEY": "testing",
}


def apply_local_defaults(env: dict[str, str] | os._Environ[str] = os.environ) -> list[str]:
    """Set the ``make dev`` values of unset variables; returns the names it set."""
    applied = []
    for name, value in LOCAL_STACK.items():
        if not env.get(name):
            env[name] = value
            applied.append(name)
    return applied


def printable(response: Any) -> Any:
    """An API Gateway response with its headers flattened and a JSON body decoded; anything else as is."""
    if not isinstance(response, dict) or "statusCode" not in response:
        return response
    raw_headers = response.get("multiValueHeaders") or response.get("headers") or {}
    headers = {k: v[0] if isinstance(v, list) and len(v) == 1 else v for k, v in raw_headers.items()}
    body: Any = response.get("body")
    if isinstance(body, str) and not response.get("isBase64Encoded"):
        with contextlib.suppress(ValueError):
            body = json.loads(body)
    return {"statusCode": response.get("statusCode"), "headers": headers, "body": body}


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """``llog invoke`` (an entry point of the ``llog.commands`` group)."""
    invoke = commands.add_parser("invoke", help="run one Lambda handler on an event file")
    add_arguments(invoke)
    invoke.set_defaults(run=run)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("function", choices=names.FUNCTIONS, help="a function of the functions package")
    parser.add_argument("event", type=Path, help="an event file, e.g. events/produce.json")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m devserver.invoke", description=__doc__.splitlines()[0])
    add_arguments(parser)
    return run(parser.parse_args(argv))


def run(args: argparse.Namespace) -> int:
    try:
        event = json.loads(args.event.read_text())
    except (OSError, ValueError) as exc:
        print(f"cannot read the event {args.event}: {exc}", file=sys.stderr)
        return 2
    applied = apply_local_defaults()
    if applied:
        print(f"using the make dev stack for unset {', '.join(applied)}", file=sys.stderr)

    module = importlib.import_module(f"functions.{args.function}.app")
    request_id = (event.get("requestContext") or {}).get("requestId") if isinstance(event, dict) else None
    try:
        response = module.handler(event, LocalContext(f"llog-{args.function}", request_id=request_id))
    except Exception as exc:
        print(f"the handler raised {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    finally:
        reset = getattr(module, "reset", None)
        if callable(reset):
            reset()  # flush and close what the handler created (Oxia client)
    print(json.dumps(printable(response), indent=2, ensure_ascii=False))
    return 0


if __name__ == "__main__":
    sys.exit(main())
