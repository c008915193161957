"""The Oxia processes' container commands and configuration files (pure functions: the tests run exactly these
against a real Oxia binary, with only the addresses and directories changed to loopback ports and temp dirs).
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Sequence
from typing import Any

PUBLIC_PORT = 6648
INTERNAL_PORT = 6649
METRICS_PORT = 8080
# The coordinator's admin API (v0.15+, unauthenticated: create/delete namespaces and data servers).
# Bound to loopback: nothing outside the task reaches it, as before the port existed.
ADMIN_PORT = 6651
DATA_DIR = "/data"
# Written by the coordinator's container command at each start (JSON is YAML).
CONFIG_DIR = "/tmp"
CLUSTER_CONFIG_FILE = "oxia-cluster.yaml"
COORDINATOR_CONFIG_FILE = "oxia-coordinator.yaml"
# The access point's POSIX identity: every file operation on EFS happens as this user.
OXIA_UID = "1000"


def standalone_command(
    *,
    shards: int,
    db_cache_mib: int,
    data_dir: str = DATA_DIR,
    public_addr: str = f"0.0.0.0:{PUBLIC_PORT}",
    metrics_addr: str = f"0.0.0.0:{METRICS_PORT}",
) -> list[str]:
    return [
        "oxia",
        "standalone",
        f"--public-addr={public_addr}",
        f"--metrics-addr={metrics_addr}",
        f"--data-dir={data_dir}/db",
        f"--wal-dir={data_dir}/wal",
        f"--shards={shards}",
        f"--db-cache-size-mb={db_cache_mib}",
        "--log-json",
    ]


def server_command(
    *,
    db_cache_mib: int,
    data_dir: str = DATA_DIR,
    public_addr: str = f"0.0.0.0:{PUBLIC_PORT}",
    internal_addr: str = f"0.0.0.0:{INTERNAL_PORT}",
    metrics_addr: str = f"0.0.0.0:{METRICS_PORT}",
) -> list[str]:
    return [
        "oxia",
        "server",
        f"--public-addr={public_addr}",
        f"--internal-addr={internal_addr}",
        f"--metrics-addr={metrics_addr}",
        f"--data-dir={data_dir}/db",
        f"--wal-dir={data_dir}/wal",
        f"--db-cache-size-mb={db_cache_mib}",
        "--log-json",
    ]


def health_probe(port: int = INTERNAL_PORT) -> list[str]:
    """The gRPC health probe (``oxia health`` dials localhost): internal port, or standalone's public."""
    return ["oxia", "health", f"--port={port}"]


def cluster_config(
    namespace: str, shards: int, servers: Sequence[tuple[str, str, str]], *, bootstrap_addresses: Sequence[str] = ()
) -> dict[str, Any]:
    """The coordinator's cluster config; ``servers`` are ``(name, public, internal)`` addresses.

    Since v0.15 a data server rejects a client whose gRPC authority (the ``host:port`` it dialled)
    is neither a server's address from this config nor in ``allowExtraAuthorities``
    (``PERMISSION_DENIED: oxia: unexpected authority``). Clients bootstrap through a name of
    their own (``bootstrap_addresses``), so it is listed there.
    """
    config: dict[str, Any] = {
        "namespaces": [
            {"name": namespace, "initialShardCount": shards, "replicationFactor": len(servers)},
        ],
        "servers": [{"name": n, "public": public, "internal": internal} for n, public, internal in servers],
    }
    if bootstrap_addresses:
        config["allowExtraAuthorities"] = list(bootstrap_addresses)
    return config


def coordinator_config(
    *,
    cluster_config_path: str,
    status_path: str,
    internal_addr: str = f"0.0.0.0:{INTERNAL_PORT}",
    admin_addr: str = f"127.0.0.1:{ADMIN_PORT}",
    metrics_addr: str = f"0.0.0.0:{METRICS_PORT}",
) -> dict[str, Any]:
    """The coordinator's ``--sconfig`` file (v0.17.1 ``oxiad/coordinator/option``).

    The cluster config is named by ``metadata.file.configName``, which has no flag (``--conf`` is
    deprecated). With ``--sconfig`` the file is the whole configuration (a reload reads only the
    file), so it holds every setting: metadata, status path, internal and metrics addresses.
    """
    return {
        "server": {
            "internal": {"bindAddress": internal_addr},
            "public": {"bindAddress": admin_addr},
        },
        "metadata": {
            "providerName": "file",
            "file": {"statusName": status_path, "configName": cluster_config_path},
        },
        "observability": {"metric": {"bindAddress": metrics_addr}},
    }


def _json(value: dict[str, Any]) -> str:
    return json.dumps(value, separators=(",", ":"), sort_keys=True)


def coordinator_command(
    config: dict[str, Any],
    *,
    data_dir: str = DATA_DIR,
    config_dir: str = CONFIG_DIR,
    internal_addr: str = f"0.0.0.0:{INTERNAL_PORT}",
    admin_addr: str = f"127.0.0.1:{ADMIN_PORT}",
    metrics_addr: str = f"0.0.0.0:{METRICS_PORT}",
) -> list[str]:
    """Writes the cluster config and the coordinator's config, then execs ``oxia coordinator``."""
    cluster_path = f"{config_dir}/{CLUSTER_CONFIG_FILE}"
    coordinator_path = f"{config_dir}/{COORDINATOR_CONFIG_FILE}"
    settings = coordinator_config(
        cluster_config_path=cluster_path,
        status_path=f"{data_dir}/cluster-status.json",
        internal_addr=internal_addr,
        admin_addr=admin_addr,
        metrics_addr=metrics_addr,
    )
    q = shlex.quote
    return [
        "bash",
        "-c",
        f"printf '%s' {q(_json(config))} > {q(cluster_path)}"
        f" && printf '%s' {q(_json(settings))} > {q(coordinator_path)}"
        f" && exec oxia coordinator --sconfig={q(coordinator_path)} --log-json",
    ]
