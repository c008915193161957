"""`make dev`: run the local backing services (Oxia standalone and a moto S3 server).

Oxia keeps its data under .dev/oxia, so a restart keeps the log's metadata.
The moto S3 server is in memory (moto has no disk persistence): its objects
are gone when this process stops. Prints the environment that points the
library at both, then serves until interrupted.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
from pathlib import Path

from llog.devstack import MotoS3, OxiaProcess, find_oxia_binary
from llog.errors import LlogError

ROOT = Path(__file__).resolve().parents[1]
OXIA_PORT = int(os.environ.get("LLOG_DEV_OXIA_PORT", "6648"))
S3_PORT = int(os.environ.get("LLOG_DEV_S3_PORT", "4566"))
BUCKET = os.environ.get("LLOG_S3_BUCKET", "leaderless-log-wal")


def main() -> int:
    binary = find_oxia_binary([ROOT / ".tools" / "bin"])
    if binary is None:
        reason_file = ROOT / ".tools" / "oxia-unavailable"
        reason = reason_file.read_text().strip() if reason_file.exists() else "run make setup"
        print(f"make dev needs the Oxia server: {reason}", file=sys.stderr)
        return 1

    oxia = OxiaProcess(binary, ROOT / ".dev" / "oxia", port=OXIA_PORT, fsync=True)
    s3 = MotoS3(port=S3_PORT)
    try:
        oxia.start()
        s3.start()
        s3.create_bucket(BUCKET)
    except LlogError as exc:
        print(f"could not start the local stack: {exc}", file=sys.stderr)
        oxia.stop()
        return 1

    print(f"""
llog local stack is up.
  Oxia standalone  {oxia.address}   (data: .dev/oxia, log: {oxia.log_path})
  S3 (moto)        {s3.endpoint_url}   bucket {BUCKET} (in memory)

Point the library at it:
  export LLOG_OXIA_SERVICE_ADDRESS={oxia.address}
  export LLOG_S3_BUCKET={BUCKET} LLOG_S3_ENDPOINT_URL={s3.endpoint_url} LLOG_S3_REGION_NAME=us-east-1
  export LLOG_S3_ACCESS_KEY_ID=testing LLOG_S3_SECRET_ACCESS_KEY=testing

then try the quickstart in README.md. Ctrl-C stops everything.
""", flush=True)

    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    try:
        stop.wait()
    except KeyboardInterrupt:
        pass
    finally:
        s3.stop()
        oxia.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
