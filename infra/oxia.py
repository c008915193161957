"""A real Oxia cluster (image ``oxia/oxia`` at the project's pinned version) on ECS Fargate with EFS.

Hosting choice (docs/DEPLOY.md, "Oxia"): every Oxia process is an ECS Fargate service of
exactly one task (ARM64) whose data directory is its **own EFS file system** (encrypted, IAM
authorized, through an access point). EFS is regional: a replacement task in any AZ finds its
data again, so a task or AZ failure costs a restart, not the data. Each service deploys with
``minHealthyPercent=0``/``maxHealthyPercent=100``: two processes never share a data directory.

* ``standalone`` (development stages): one task ``oxia standalone``.
* ``replicated`` (production): one ``oxia coordinator`` (its cluster status on its own EFS file
  system; its settings in a ``--sconfig`` file, since v0.17.1 deprecated ``--conf``) and three
  ``oxia server`` data servers. Each data server has a stable DNS name from Cloud Map,
  ``oxia-N.<namespace>``, which the coordinator's cluster config advertises to clients (public
  port 6648) and peers (internal port 6649).

Clients bootstrap through ``service_address`` (``oxia.<namespace>:6648``): the standalone
server's name, or in replicated mode a weighted CNAME over the three data servers (any server
hands out the shard assignments; a lookup that lands on a stopped server fails and is retried).
The cluster config lists that name in ``allowExtraAuthorities``: v0.17.1 data servers refuse a
client that dialled a name they do not know.

Security groups: port 6648 admits only ``client_security_group`` (the functions and Glue join
it); 6649 admits only the data servers and the coordinator; EFS (2049) admits only the Oxia
security groups, and each file system's policy admits only its own task's role.
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from aws_cdk import Duration, RemovalPolicy, Stack, Token
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_ecs as ecs
from aws_cdk import aws_efs as efs
from aws_cdk import aws_iam as iam
from aws_cdk import aws_logs as logs
from aws_cdk import aws_servicediscovery as servicediscovery
from constructs import Construct

from infra.settings import OxiaMode, OxiaSize

# Published by Oxia's release workflow (.github/workflows/ci-release.yaml: semver tags, linux/amd64
# and linux/arm64). A data directory written by v0.17.1 cannot be opened by v0.14.4: no way back.
OXIA_VERSION = "0.17.1"
OXIA_IMAGE = f"oxia/oxia:{OXIA_VERSION}"
PUBLIC_PORT = 6648
INTERNAL_PORT = 6649
METRICS_PORT = 8080
# The coordinator's admin API (v0.15+, unauthenticated: create/delete namespaces and data servers).
# Bound to loopback: nothing outside the task reaches it, as before the port existed.
ADMIN_PORT = 6651
DATA_SERVERS = 3
DATA_DIR = "/data"
# Written by the coordinator's container command at each start (JSON is YAML).
CONFIG_DIR = "/tmp"
CLUSTER_CONFIG_FILE = "oxia-cluster.yaml"
COORDINATOR_CONFIG_FILE = "oxia-coordinator.yaml"
# The access point's POSIX identity: every file operation on EFS happens as this user.
OXIA_UID = "1000"
COORDINATOR_SIZE = OxiaSize("coordinator", 256, 512)

Role = Literal["standalone", "server", "coordinator"]


# -- container commands ------------------------------------------------------------------------
# Pure functions so the tests can run exactly these commands against a real Oxia binary, with only
# the addresses and directories changed to loopback ports and temp dirs.


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

    v0.14.4 took the same settings as flags: ``--conf`` (cluster config, deprecated in v0.17.1 in
    favour of ``metadata.file.configName``, which has no flag), ``--metadata=file``,
    ``--file-clusters-status-path``, ``--internal-addr`` and ``--metrics-addr``. With ``--sconfig``
    the file is the whole configuration (a reload reads only the file), so it holds all of them.
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


@dataclass(frozen=True)
class OxiaNode:
    """One Oxia process: its ECS service, task definition and persistent volume."""

    name: str
    role: Role
    service: ecs.FargateService
    task_definition: ecs.FargateTaskDefinition
    file_system: efs.FileSystem
    access_point: efs.AccessPoint
    dns_name: str | None


class OxiaCluster(Construct):
    """Runs Oxia in ``vpc``; exposes ``service_address`` and ``client_security_group``."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        vpc: ec2.IVpc,
        subnets: ec2.SubnetSelection,
        stage: str,
        mode: OxiaMode,
        size: OxiaSize,
        shards: int,
        namespace: str,
        log_retention: logs.RetentionDays,
        removal_policy: RemovalPolicy,
    ) -> None:
        super().__init__(scope, construct_id)
        self.mode = mode
        self._vpc = vpc
        self._subnets = subnets
        self._removal_policy = removal_policy

        self.client_security_group = ec2.SecurityGroup(
            self,
            "ClientSecurityGroup",
            vpc=vpc,
            description=f"llog {stage}: Oxia clients (functions, Glue); admitted to Oxia port {PUBLIC_PORT}",
            allow_all_outbound=True,
        )
        self.server_security_group = ec2.SecurityGroup(
            self,
            "ServerSecurityGroup",
            vpc=vpc,
            description=f"llog {stage}: Oxia data servers",
            allow_all_outbound=True,
        )
        self.server_security_group.add_ingress_rule(
            self.client_security_group, ec2.Port.tcp(PUBLIC_PORT), "Oxia public port from llog clients"
        )
        self.coordinator_security_group: ec2.SecurityGroup | None = None
        self.cluster_config: dict[str, Any] | None = None  # the coordinator's (replicated mode)
        self.service_address = ""  # host:port for LLOG_OXIA_SERVICE_ADDRESS, set below
        self.server_addresses: list[str] = []  # public host:port of each server

        self.cluster = ecs.Cluster(
            self,
            "Cluster",
            vpc=vpc,
            container_insights_v2=ecs.ContainerInsights.ENABLED,
        )
        self.dns_namespace = servicediscovery.PrivateDnsNamespace(
            self,
            "Namespace",
            name=f"llog-{stage}.internal",
            vpc=vpc,
            description=f"llog {stage}: stable names of the Oxia servers",
        )
        self.log_group = logs.LogGroup(self, "Logs", retention=log_retention, removal_policy=removal_policy)
        self.nodes: list[OxiaNode] = []

        if mode == "standalone":
            node = self._add_node(
                "oxia",
                "standalone",
                size,
                self.server_security_group,
                command=standalone_command(shards=shards, db_cache_mib=size.db_cache_mib),
                # Standalone has no internal port; v0.17.1 serves the gRPC health service on its
                # public port (checked against the real binary; v0.14.4 was probed with a TCP connect).
                health_command=["CMD", *health_probe(PUBLIC_PORT)],
                ports=[PUBLIC_PORT],
                register_dns=True,
                subnets=subnets,
            )
            self.server_addresses = [f"{node.dns_name}:{PUBLIC_PORT}"]
            self.service_address = self.server_addresses[0]
        else:
            self._build_replicated(size, shards, namespace)

    # -- replicated mode --------------------------------------------------------------------

    def _build_replicated(self, size: OxiaSize, shards: int, namespace: str) -> None:
        self.server_security_group.add_ingress_rule(
            self.server_security_group, ec2.Port.tcp(INTERNAL_PORT), "Oxia replication between data servers"
        )
        self.coordinator_security_group = ec2.SecurityGroup(
            self,
            "CoordinatorSecurityGroup",
            vpc=self._vpc,
            description="llog: Oxia coordinator (no ingress; it calls the data servers)",
            allow_all_outbound=True,
        )
        self.server_security_group.add_ingress_rule(
            self.coordinator_security_group, ec2.Port.tcp(INTERNAL_PORT), "Oxia coordinator to data servers"
        )

        zones = self._fixed_zones()
        servers: list[OxiaNode] = []
        for i in range(DATA_SERVERS):
            subnets = self._subnets
            if zones is not None:
                # Three or more known AZs: one data server per AZ, so losing an AZ keeps a quorum.
                subnets = ec2.SubnetSelection(
                    subnet_type=ec2.SubnetType.PRIVATE_WITH_EGRESS, availability_zones=[zones[i % len(zones)]]
                )
            node = self._add_node(
                f"oxia-{i}",
                "server",
                size,
                self.server_security_group,
                command=server_command(db_cache_mib=size.db_cache_mib),
                health_command=["CMD", *health_probe()],
                ports=[PUBLIC_PORT, INTERNAL_PORT],
                register_dns=True,
                subnets=subnets,
            )
            if servers:
                # Roll one data server at a time: CloudFormation updates a service only after the
                # previous one is stable again, so a deploy never restarts two replicas at once.
                node.service.node.add_dependency(servers[-1].service)
            servers.append(node)

        self.server_addresses = [f"{s.dns_name}:{PUBLIC_PORT}" for s in servers]
        self.service_address = f"oxia.{self.dns_namespace.namespace_name}:{PUBLIC_PORT}"
        self.cluster_config = cluster_config(
            namespace,
            shards,
            [(s.name, f"{s.dns_name}:{PUBLIC_PORT}", f"{s.dns_name}:{INTERNAL_PORT}") for s in servers],
            bootstrap_addresses=[self.service_address],
        )
        coordinator = self._add_node(
            "oxia-coordinator",
            "coordinator",
            COORDINATOR_SIZE,
            self.coordinator_security_group,
            command=coordinator_command(self.cluster_config),
            health_command=["CMD", *health_probe()],
            ports=[INTERNAL_PORT],
            register_dns=False,
            subnets=self._subnets,
        )
        coordinator.service.node.add_dependency(servers[-1].service)

        # Bootstrap name: one weighted CNAME per data server; each lookup returns one of them.
        bootstrap = self.dns_namespace.create_service(
            "Bootstrap",
            name="oxia",
            description="Oxia bootstrap name: any data server",
            dns_record_type=servicediscovery.DnsRecordType.CNAME,
            routing_policy=servicediscovery.RoutingPolicy.WEIGHTED,
            dns_ttl=Duration.seconds(10),
        )
        for s in servers:
            assert s.dns_name is not None
            bootstrap.register_cname_instance(f"Cname-{s.name}", instance_cname=s.dns_name)

    def _fixed_zones(self) -> list[str] | None:
        zones = Stack.of(self).availability_zones
        if len(zones) < DATA_SERVERS or any(Token.is_unresolved(z) for z in zones):
            return None  # unknown or too few AZs: let each task use every private subnet
        private = {s.availability_zone for s in self._vpc.private_subnets}
        zones = [z for z in zones if z in private]
        return zones if len(zones) >= DATA_SERVERS else None

    # -- one process ------------------------------------------------------------------------

    def _add_node(
        self,
        name: str,
        role: Role,
        size: OxiaSize,
        security_group: ec2.SecurityGroup,
        *,
        command: Sequence[str],
        health_command: Sequence[str],
        ports: Sequence[int],
        register_dns: bool,
        subnets: ec2.SubnetSelection,
    ) -> OxiaNode:
        scope = Construct(self, name)
        file_system = efs.FileSystem(
            scope,
            "Volume",
            vpc=self._vpc,
            vpc_subnets=self._subnets,
            encrypted=True,
            performance_mode=efs.PerformanceMode.GENERAL_PURPOSE,
            throughput_mode=efs.ThroughputMode.ELASTIC,
            enable_automatic_backups=True,
            # Not "anonymous access": this only keeps CDK from adding its allow-any-IAM-principal
            # statement. The policy below admits this node's task role alone, so no one else mounts.
            allow_anonymous_access=True,
            removal_policy=self._removal_policy,
            file_system_name=f"{name}-{Stack.of(self).stack_name}",
        )
        access_point = file_system.add_access_point(
            "AccessPoint",
            path="/oxia",
            create_acl=efs.Acl(owner_uid=OXIA_UID, owner_gid=OXIA_UID, permissions="750"),
            posix_user=efs.PosixUser(uid=OXIA_UID, gid=OXIA_UID),
        )
        task_definition = ecs.FargateTaskDefinition(
            scope,
            "Task",
            cpu=size.cpu,
            memory_limit_mib=size.memory_mib,
            runtime_platform=ecs.RuntimePlatform(
                cpu_architecture=ecs.CpuArchitecture.ARM64,
                operating_system_family=ecs.OperatingSystemFamily.LINUX,
            ),
            volumes=[
                ecs.Volume(
                    name="data",
                    efs_volume_configuration=ecs.EfsVolumeConfiguration(
                        file_system_id=file_system.file_system_id,
                        transit_encryption="ENABLED",
                        authorization_config=ecs.AuthorizationConfig(
                            access_point_id=access_point.access_point_id, iam="ENABLED"
                        ),
                    ),
                )
            ],
        )
        file_system.grant_read_write(task_definition.task_role)
        file_system.add_to_resource_policy(
            iam.PolicyStatement(
                # (An access-point condition would make the file system depend on its own access
                # point, a cycle; the task definition names the access point instead.)
                sid="OnlyThisOxiaTask",
                principals=[iam.ArnPrincipal(task_definition.task_role.role_arn)],
                actions=["elasticfilesystem:ClientMount", "elasticfilesystem:ClientWrite"],
                conditions={"Bool": {"elasticfilesystem:AccessedViaMountTarget": "true"}},
            )
        )
        container = task_definition.add_container(
            "oxia",
            image=ecs.ContainerImage.from_registry(OXIA_IMAGE),
            command=list(command),
            essential=True,
            logging=ecs.LogDrivers.aws_logs(stream_prefix=name, log_group=self.log_group),
            port_mappings=[ecs.PortMapping(container_port=p, protocol=ecs.Protocol.TCP) for p in ports],
            health_check=ecs.HealthCheck(
                command=list(health_command),
                interval=Duration.seconds(15),
                timeout=Duration.seconds(10),
                retries=3,
                start_period=Duration.seconds(60),
            ),
            ulimits=[ecs.Ulimit(name=ecs.UlimitName.NOFILE, soft_limit=65535, hard_limit=65535)],
            stop_timeout=Duration.seconds(30),
        )
        container.add_mount_points(ecs.MountPoint(container_path=DATA_DIR, source_volume="data", read_only=False))

        service = ecs.FargateService(
            scope,
            "Service",
            cluster=self.cluster,
            task_definition=task_definition,
            desired_count=1,
            # Never two tasks on one data directory: stop the old task before starting the new.
            min_healthy_percent=0,
            max_healthy_percent=100,
            circuit_breaker=ecs.DeploymentCircuitBreaker(rollback=True),
            security_groups=[security_group],
            vpc_subnets=subnets,
            assign_public_ip=False,
            platform_version=ecs.FargatePlatformVersion.LATEST,
            propagate_tags=ecs.PropagatedTagSource.SERVICE,
            enable_ecs_managed_tags=True,
            cloud_map_options=(
                ecs.CloudMapOptions(
                    name=name,
                    cloud_map_namespace=self.dns_namespace,
                    dns_record_type=servicediscovery.DnsRecordType.A,
                    dns_ttl=Duration.seconds(10),
                )
                if register_dns
                else None
            ),
        )
        file_system.connections.allow_default_port_from(security_group, f"NFS from {name}")
        node = OxiaNode(
            name=name,
            role=role,
            service=service,
            task_definition=task_definition,
            file_system=file_system,
            access_point=access_point,
            dns_name=f"{name}.{self.dns_namespace.namespace_name}" if register_dns else None,
        )
        self.nodes.append(node)
        return node

    @property
    def servers(self) -> list[OxiaNode]:
        """The processes clients talk to (the standalone server or the data servers)."""
        return [n for n in self.nodes if n.role != "coordinator"]
