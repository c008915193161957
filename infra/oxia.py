"""A real Oxia cluster (image ``oxia/oxia`` at the project's pinned version) on ECS, on EFS or EBS.

Hosting choice (docs/DEPLOY.md, "Oxia"): every Oxia process is an ECS service of exactly one
task (ARM64) with a persistent data directory of its own; each service deploys with
``minHealthyPercent=0``/``maxHealthyPercent=100``: two processes never share a data directory.

* ``storage="efs"``: a Fargate task whose data directory is its **own EFS file system**
  (encrypted, IAM authorized, through an access point). EFS is regional: a replacement task in any
  AZ finds its data again, so a task or AZ failure costs a restart, not the data.
* ``storage="ebs"`` (replicated mode only; the coordinator stays on Fargate with EFS): data server
  *N* runs on an Auto Scaling group of exactly one EC2 instance in AZ *N*, its own ECS capacity
  provider. The instance attaches server *N*'s encrypted gp3 volume at boot, formats it on first
  use only and mounts it on the host path the task mounts. The volume outlives tasks and instances
  (ECS-managed Fargate volumes do not: a replacement task would start empty, which Oxia 0.17.1
  does not recover from). Data Lifecycle Manager snapshots the volumes daily.

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
security groups, and each file system's policy admits only its own task's role. The EC2 instances'
group admits nothing: tasks use ``awsvpc`` networking, with network interfaces of their own.
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal, cast

import jsii
from aws_cdk import Aspects, CfnResource, CfnTag, Duration, IAspect, RemovalPolicy, Size, Stack, Tags, Token
from aws_cdk import aws_autoscaling as autoscaling
from aws_cdk import aws_dlm as dlm
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_ecs as ecs
from aws_cdk import aws_efs as efs
from aws_cdk import aws_iam as iam
from aws_cdk import aws_logs as logs
from aws_cdk import aws_servicediscovery as servicediscovery
from cdk_nag import NagPackSuppression, NagSuppressions, RegexAppliesTo
from constructs import Construct, IConstruct

from infra.lint import ignore_literal_zone
from infra.settings import OxiaMode, OxiaSize, OxiaStorage

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

# -- data servers on EBS (storage="ebs") ----------------------------------------------------------
EBS_VOLUME_GIB = 20
# Left to the OS and the ECS agent on the instance: the task reserves the instance's memory minus this.
INSTANCE_OVERHEAD_MIB = 512


@dataclass(frozen=True)
class OxiaInstance:
    """The EC2 instance of one data server on EBS."""

    instance_type: str
    memory_mib: int

    @property
    def task_memory_mib(self) -> int:
        """The task's memory reservation: all the instance has, but what the OS and the ECS agent need."""
        return self.memory_mib - INSTANCE_OVERHEAD_MIB


# The instance of each llog:oxiaSize: Graviton c7g has the Fargate sizes' 2 GiB per vCPU; "small"
# (half a vCPU) has no instance of its own, so it gets the smallest, as "medium" does.
OXIA_INSTANCES: dict[str, OxiaInstance] = {
    "small": OxiaInstance("c7g.medium", 2048),
    "medium": OxiaInstance("c7g.medium", 2048),
    "large": OxiaInstance("c7g.large", 4096),
    "xlarge": OxiaInstance("c7g.xlarge", 8192),
}
# Tags naming a data server (on its volume and, propagated by its Auto Scaling group, its instance):
# the instance role may attach the volume only from an instance with this tag; DLM snapshots by it.
SERVER_TAG = "llog:oxia-server"
SNAPSHOT_TIME_UTC = "03:00"
SNAPSHOTS_KEPT = 7

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


def data_mount_point(name: str) -> str:
    """The host path of a data server's EBS volume on its instance (the task's host volume)."""
    return f"/data/{name}"


# The ECS agent's attribute of an instance's CPU architecture.
ARM64_INSTANCES = "attribute:ecs.cpu-architecture == arm64"
# A systemd drop-in of the ECS agent's unit: the agent (so any task) starts only with the data volume mounted.
ECS_DROP_IN = "/etc/systemd/system/ecs.service.d/oxia-data.conf"


def attach_volume_commands(volume_id: str, mount_point: str, *, owner_uid: str = OXIA_UID) -> list[str]:
    """User data (bash, as root, before the ECS agent starts) that puts ``volume_id`` at ``mount_point``.

    Fails closed: the ECS agent requires the mount before anything else happens, so a failed attach
    leaves the instance without a running agent (and Oxia without a task) instead of letting Oxia
    start on an empty directory of the root disk, which a data server does not recover from.
    """
    q = shlex.quote
    token = "$(curl -sf -X PUT -H 'X-aws-ec2-metadata-token-ttl-seconds: 60' http://169.254.169.254/latest/api/token)"
    return [
        "set -euo pipefail",
        "mkdir -p /etc/systemd/system/ecs.service.d",
        f"printf '[Unit]\\nRequiresMountsFor=%s\\n' {q(mount_point)} > {ECS_DROP_IN}",
        "systemctl daemon-reload",
        f'imds() {{ curl -sf -H "X-aws-ec2-metadata-token: {token}" "http://169.254.169.254/latest/meta-data/$1"; }}',
        "INSTANCE=$(imds instance-id)",
        "REGION=$(imds placement/region)",
        'export AWS_DEFAULT_REGION="$REGION"',
        f"VOLUME={volume_id}",
        "command -v aws >/dev/null || dnf install -y awscli-2",
        # A replaced instance may still hold the volume while it shuts down: retry until it is free.
        'until aws ec2 attach-volume --volume-id "$VOLUME" --instance-id "$INSTANCE" --device /dev/xvdf;'
        " do sleep 10; done",
        'aws ec2 wait volume-in-use --volume-ids "$VOLUME"'
        ' --filters Name=attachment.instance-id,Values="$INSTANCE" Name=attachment.status,Values=attached',
        # Nitro instances show EBS volumes as NVMe devices named after the volume id (without its "-").
        'DEVICE="/dev/disk/by-id/nvme-Amazon_Elastic_Block_Store_${VOLUME/-/}"',
        'until [ -e "$DEVICE" ]; do sleep 1; done',
        # blkid exits 2 when the device holds no file system: format only then (first use), never on error.
        'PROBE=0; blkid -p "$DEVICE" || PROBE=$?',
        'if [ "$PROBE" -eq 2 ]; then mkfs.xfs "$DEVICE"; elif [ "$PROBE" -ne 0 ]; then exit "$PROBE"; fi',
        f"mkdir -p {q(mount_point)}",
        f'echo "$DEVICE {mount_point} xfs defaults,nofail 0 2" >> /etc/fstab',
        "systemctl daemon-reload",
        f"mount {q(mount_point)}",
        f"chown {owner_uid}:{owner_uid} {q(mount_point)}",
    ]


@dataclass(frozen=True)
class OxiaHost:
    """The EC2 side of a data server on EBS: its volume and its instance (an ASG of one, a capacity provider)."""

    volume: ec2.Volume
    auto_scaling_group: autoscaling.AutoScalingGroup
    capacity_provider: ecs.AsgCapacityProvider
    subnet: ec2.ISubnet
    mount_point: str
    server_tag: str  # the value of SERVER_TAG on the volume and the instance


@dataclass(frozen=True)
class OxiaNode:
    """One Oxia process: its ECS service, task definition and persistent volume (EFS, or EBS on ``host``)."""

    name: str
    role: Role
    service: ecs.BaseService
    task_definition: ecs.TaskDefinition
    file_system: efs.FileSystem | None
    access_point: efs.AccessPoint | None
    dns_name: str | None
    host: OxiaHost | None = None


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
        storage: OxiaStorage,
        shards: int,
        namespace: str,
        log_retention: logs.RetentionDays,
        removal_policy: RemovalPolicy,
    ) -> None:
        super().__init__(scope, construct_id)
        if mode == "standalone" and storage != "efs":
            raise ValueError("Oxia standalone runs on EFS only; EBS is built for the replicated data servers")
        self.mode = mode
        self.storage = storage
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
                # public port (checked against the real binary).
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
        private_subnets = self._vpc.select_subnets(subnet_type=ec2.SubnetType.PRIVATE_WITH_EGRESS).subnets
        servers: list[OxiaNode] = []
        for i in range(DATA_SERVERS):
            name = f"oxia-{i}"
            subnets = self._subnets
            host = None
            if self.storage == "ebs":
                # Data server N's instance and volume live in AZ N's private subnet (the VPC's subnets
                # follow the AZ order). With fewer than three AZs, two servers share one.
                subnet = private_subnets[i % len(private_subnets)]
                host = self._add_host(name, size, subnet)
                subnets = ec2.SubnetSelection(subnets=[subnet])
            elif zones is not None:
                # Three or more known AZs: one data server per AZ, so losing an AZ keeps a quorum.
                subnets = ec2.SubnetSelection(
                    subnet_type=ec2.SubnetType.PRIVATE_WITH_EGRESS, availability_zones=[zones[i % len(zones)]]
                )
            node = self._add_node(
                name,
                "server",
                size,
                self.server_security_group,
                command=server_command(db_cache_mib=size.db_cache_mib),
                health_command=["CMD", *health_probe()],
                ports=[PUBLIC_PORT, INTERNAL_PORT],
                register_dns=True,
                subnets=subnets,
                host=host,
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
        hosts = [s.host for s in servers if s.host is not None]
        if hosts:
            self._add_snapshots(hosts)
            Aspects.of(self).add(_AfterCapacityProviders(self.cluster, [s.service for s in servers]))

    def _fixed_zones(self) -> list[str] | None:
        zones = Stack.of(self).availability_zones
        if len(zones) < DATA_SERVERS or any(Token.is_unresolved(z) for z in zones):
            return None  # unknown or too few AZs: let each task use every private subnet
        private = {s.availability_zone for s in self._vpc.private_subnets}
        zones = [z for z in zones if z in private]
        return zones if len(zones) >= DATA_SERVERS else None

    # -- data servers on EBS ------------------------------------------------------------------

    def _add_host(self, name: str, size: OxiaSize, subnet: ec2.ISubnet) -> OxiaHost:
        """Data server ``name``'s volume and its one instance, both in ``subnet``'s AZ, and its capacity provider."""
        scope = Construct(self, name)
        stack = Stack.of(self)
        server_tag = f"{stack.stack_name}/{name}"
        volume = ec2.Volume(
            scope,
            "DataVolume",  # not "Volume", the EFS file system's id: CloudFormation cannot change a type
            availability_zone=subnet.availability_zone,
            size=Size.gibibytes(EBS_VOLUME_GIB),
            volume_type=ec2.EbsDeviceVolumeType.GP3,
            encrypted=True,
            removal_policy=self._removal_policy,
            volume_name=f"{name}-{stack.stack_name}",
        )
        Tags.of(volume).add(SERVER_TAG, server_tag)
        ignore_literal_zone(
            cast(CfnResource, volume.node.default_child),
            subnet.availability_zone,
            "An EBS volume is in one AZ: its data server's subnet's, where its instance runs.",
        )
        security_group = ec2.SecurityGroup(
            scope,
            "InstanceSecurityGroup",
            vpc=self._vpc,
            description=f"llog: instance of Oxia {name} (no ingress; its task has a network interface of its own)",
            allow_all_outbound=True,
        )
        mount_point = data_mount_point(name)
        user_data = ec2.UserData.for_linux()
        user_data.add_commands(*attach_volume_commands(volume.volume_id, mount_point))
        # The task's own network interface must not reach the instance role through the metadata service.
        user_data.add_commands("echo ECS_AWSVPC_BLOCK_IMDS=true >> /etc/ecs/ecs.config")
        group = autoscaling.AutoScalingGroup(
            scope,
            "Instances",
            vpc=self._vpc,
            vpc_subnets=ec2.SubnetSelection(subnets=[subnet]),
            instance_type=ec2.InstanceType(OXIA_INSTANCES[size.name].instance_type),
            machine_image=ecs.EcsOptimizedImage.amazon_linux2023(ecs.AmiHardwareType.ARM),
            # Exactly one instance: the volume attaches to one instance at a time.
            min_capacity=1,
            max_capacity=1,
            require_imdsv2=True,
            security_group=security_group,
            user_data=user_data,
            ssm_session_permissions=True,
            block_devices=[
                autoscaling.BlockDevice(
                    device_name="/dev/xvda",
                    volume=autoscaling.BlockDeviceVolume.ebs(
                        30, encrypted=True, volume_type=autoscaling.EbsDeviceVolumeType.GP3
                    ),
                )
            ],
        )
        # On the group alone, which propagates it to its instance at launch (a launch template tag would
        # reach the root volume too, and DLM would snapshot it).
        Tags.of(group).add(SERVER_TAG, server_tag, include_resource_types=["AWS::AutoScaling::AutoScalingGroup"])
        group.add_to_role_policy(
            iam.PolicyStatement(
                sid="AttachOwnVolume",
                actions=["ec2:AttachVolume"],
                resources=[stack.format_arn(service="ec2", resource="volume", resource_name=volume.volume_id)],
            )
        )
        group.add_to_role_policy(
            iam.PolicyStatement(
                sid="FromOwnInstance",
                actions=["ec2:AttachVolume"],
                resources=[stack.format_arn(service="ec2", resource="instance", resource_name="*")],
                conditions={"StringEquals": {f"aws:ResourceTag/{SERVER_TAG}": server_tag}},
            )
        )
        group.add_to_role_policy(
            iam.PolicyStatement(sid="WaitForAttachment", actions=["ec2:DescribeVolumes"], resources=["*"])
        )
        capacity_provider = ecs.AsgCapacityProvider(
            scope,
            "CapacityProvider",
            auto_scaling_group=group,
            # One instance, always: nothing to scale, and instance refresh must be able to replace it.
            enable_managed_scaling=False,
            enable_managed_termination_protection=False,
            # ECS stops the task before the instance terminates (no drain-hook function of CDK's).
            enable_managed_draining=True,
        )
        self.cluster.add_asg_capacity_provider(capacity_provider)
        self._suppress_instance_findings(group)
        return OxiaHost(
            volume=volume,
            auto_scaling_group=group,
            capacity_provider=capacity_provider,
            subnet=subnet,
            mount_point=mount_point,
            server_tag=server_tag,
        )

    @staticmethod
    def _suppress_instance_findings(group: autoscaling.AutoScalingGroup) -> None:
        NagSuppressions.add_resource_suppressions(
            group,
            [
                NagPackSuppression(
                    id="AwsSolutions-AS3",
                    reason="An Auto Scaling group of exactly one instance that never scales; a missing data "
                    "server shows as its ECS service without a running task, which has an alarm.",
                ),
                NagPackSuppression(
                    id="AwsSolutions-EC28",
                    reason="Basic EC2 monitoring is enough: the alarms watch the ECS service's running tasks "
                    "and Container Insights' CPU and memory of the Oxia task, not instance metrics.",
                ),
                NagPackSuppression(
                    id="AwsSolutions-EC29",
                    reason="The instance belongs to an Auto Scaling group of one, which replaces it (and the "
                    "volume moves with it); the data lives on the retained EBS volume, not the instance.",
                ),
                NagPackSuppression(
                    id="AwsSolutions-IAM4",
                    reason="AmazonSSMManagedInstanceCore lets operators open Session Manager shells on the "
                    "instance (no SSH, no inbound rule) to inspect the data volume's attachment and mount.",
                    applies_to=["Policy::arn:<AWS::Partition>:iam::aws:policy/AmazonSSMManagedInstanceCore"],
                ),
                NagPackSuppression(
                    id="AwsSolutions-IAM5",
                    reason="ec2:AttachVolume names the instance by instance/* with a condition on its "
                    "data-server tag (its id is known only at launch); ec2:DescribeVolumes and the ECS "
                    "agent's registration and ECR token calls support no resource-level permissions; "
                    "ecs:Submit* (the agent's state changes, scoped to the cluster) is CDK's ECS instance policy.",
                    applies_to=[
                        # <AWS::Partition>... offline, the account and region once they are known.
                        RegexAppliesTo(
                            regex=r"/^Resource::arn:(<AWS::Partition>|[a-z-]+):ec2:(<AWS::Region>|[a-z0-9-]+):"
                            r"(<AWS::AccountId>|[0-9]+):instance\/\*$/g"
                        ),
                        "Resource::*",
                        "Action::ecs:Submit*",
                    ],
                ),
            ],
            apply_to_children=True,
        )

    def _add_snapshots(self, hosts: Sequence[OxiaHost]) -> None:
        """Daily snapshots of the data servers' volumes (in place of the EFS file systems' AWS Backup)."""
        role = iam.Role(
            self,
            "SnapshotRole",
            assumed_by=iam.ServicePrincipal("dlm.amazonaws.com"),
            description="Data Lifecycle Manager: snapshots of the Oxia data volumes",
            managed_policies=[
                iam.ManagedPolicy.from_aws_managed_policy_name("service-role/AWSDataLifecycleManagerServiceRole")
            ],
        )
        NagSuppressions.add_resource_suppressions(
            role,
            [
                NagPackSuppression(
                    id="AwsSolutions-IAM4",
                    reason="AWSDataLifecycleManagerServiceRole is the AWS-managed policy made for Data "
                    "Lifecycle Manager's EBS snapshot policies; only the DLM service assumes this role.",
                    applies_to=[
                        "Policy::arn:<AWS::Partition>:iam::aws:policy/service-role/AWSDataLifecycleManagerServiceRole"
                    ],
                )
            ],
        )
        self.snapshot_policy = dlm.CfnLifecyclePolicy(
            self,
            "Snapshots",
            description=f"{Stack.of(self).stack_name} Oxia data volumes daily",
            state="ENABLED",
            execution_role_arn=role.role_arn,
            policy_details=dlm.CfnLifecyclePolicy.PolicyDetailsProperty(
                policy_type="EBS_SNAPSHOT_MANAGEMENT",
                resource_types=["VOLUME"],
                target_tags=[CfnTag(key=SERVER_TAG, value=h.server_tag) for h in hosts],
                schedules=[
                    dlm.CfnLifecyclePolicy.ScheduleProperty(
                        name="daily",
                        create_rule=dlm.CfnLifecyclePolicy.CreateRuleProperty(
                            interval=24, interval_unit="HOURS", times=[SNAPSHOT_TIME_UTC]
                        ),
                        retain_rule=dlm.CfnLifecyclePolicy.RetainRuleProperty(count=SNAPSHOTS_KEPT),
                        copy_tags=True,  # a snapshot names its data server
                    )
                ],
            ),
        )

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
        host: OxiaHost | None = None,
    ) -> OxiaNode:
        scope = cast(Construct, self.node.try_find_child(name)) if host else Construct(self, name)
        file_system: efs.FileSystem | None = None
        access_point: efs.AccessPoint | None = None
        task_definition: ecs.TaskDefinition
        runtime_platform = ecs.RuntimePlatform(
            cpu_architecture=ecs.CpuArchitecture.ARM64,
            operating_system_family=ecs.OperatingSystemFamily.LINUX,
        )
        if host is None:
            file_system, access_point = self._add_file_system(scope, name)
            task_definition = ecs.FargateTaskDefinition(
                scope,
                "Task",
                cpu=size.cpu,
                memory_limit_mib=size.memory_mib,
                runtime_platform=runtime_platform,
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
            self._admit_only(file_system, task_definition)
            memory_reservation = None
        else:
            # awsvpc: the task has its own network interface, so the security groups and the Cloud
            # Map A record work as on Fargate; the data directory is the instance's mounted volume.
            task_definition = ecs.TaskDefinition(
                scope,
                "Task",
                compatibility=ecs.Compatibility.EC2,
                network_mode=ecs.NetworkMode.AWS_VPC,
                # (EC2 tasks take no runtime platform: the Graviton instance makes it ARM64; this says so.)
                placement_constraints=[ecs.PlacementConstraint.member_of(ARM64_INSTANCES)],
                volumes=[ecs.Volume(name="data", host=ecs.Host(source_path=host.mount_point))],
            )
            memory_reservation = OXIA_INSTANCES[size.name].task_memory_mib
        container = task_definition.add_container(
            "oxia",
            image=ecs.ContainerImage.from_registry(OXIA_IMAGE),
            command=list(command),
            essential=True,
            memory_reservation_mib=memory_reservation,
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

        service_options: dict[str, Any] = {
            "cluster": self.cluster,
            "task_definition": task_definition,
            "desired_count": 1,
            # Never two tasks on one data directory: stop the old task before starting the new.
            "min_healthy_percent": 0,
            "max_healthy_percent": 100,
            "circuit_breaker": ecs.DeploymentCircuitBreaker(rollback=True),
            "security_groups": [security_group],
            "vpc_subnets": subnets,
            "assign_public_ip": False,
            "propagate_tags": ecs.PropagatedTagSource.SERVICE,
            "enable_ecs_managed_tags": True,
            "cloud_map_options": (
                ecs.CloudMapOptions(
                    name=name,
                    cloud_map_namespace=self.dns_namespace,
                    dns_record_type=servicediscovery.DnsRecordType.A,
                    dns_ttl=Duration.seconds(10),
                )
                if register_dns
                else None
            ),
        }
        service: ecs.BaseService
        if host is None:
            service = ecs.FargateService(
                scope, "Service", platform_version=ecs.FargatePlatformVersion.LATEST, **service_options
            )
        else:
            service = ecs.Ec2Service(
                scope,
                "Service",
                # Only on this server's own instance: the one its volume is attached to.
                capacity_provider_strategies=[
                    ecs.CapacityProviderStrategy(
                        capacity_provider=host.capacity_provider.capacity_provider_name, weight=1
                    )
                ],
                **service_options,
            )
        if file_system is not None:
            file_system.connections.allow_default_port_from(security_group, f"NFS from {name}")
        node = OxiaNode(
            name=name,
            role=role,
            service=service,
            task_definition=task_definition,
            file_system=file_system,
            access_point=access_point,
            dns_name=f"{name}.{self.dns_namespace.namespace_name}" if register_dns else None,
            host=host,
        )
        self.nodes.append(node)
        return node

    def _add_file_system(self, scope: Construct, name: str) -> tuple[efs.FileSystem, efs.AccessPoint]:
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
        return file_system, access_point

    @staticmethod
    def _admit_only(file_system: efs.FileSystem, task_definition: ecs.TaskDefinition) -> None:
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

    @property
    def servers(self) -> list[OxiaNode]:
        """The processes clients talk to (the standalone server or the data servers)."""
        return [n for n in self.nodes if n.role != "coordinator"]


@jsii.implements(IAspect)
class _AfterCapacityProviders:
    """Makes the data servers' services wait for the cluster's capacity provider associations.

    CDK creates the association resource in an aspect of its own at synthesis (so this one runs after
    it, at the default priority) and adds no dependency: CloudFormation could create a service whose
    capacity provider is not yet associated with the cluster, which ECS refuses.
    """

    def __init__(self, cluster: ecs.Cluster, services: Sequence[ecs.BaseService]) -> None:
        self._cluster = cluster
        self._services = list(services)

    def visit(self, node: IConstruct) -> None:
        if node is not self._cluster:
            return
        associations = [c for c in node.node.children if isinstance(c, ecs.CfnClusterCapacityProviderAssociations)]
        for service in self._services:
            for association in associations:
                service.node.add_dependency(association)
