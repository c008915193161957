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

This module holds the construct (``OxiaCluster``: security groups, ECS services, task definitions,
EFS file systems, names); the processes' commands and configuration files are in
``infra/oxia_commands.py``, the data servers' volumes, instances and snapshots on EBS in
``infra/oxia_ebs.py``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal, cast

from aws_cdk import Aspects, Duration, RemovalPolicy, Stack, Token
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_ecs as ecs
from aws_cdk import aws_efs as efs
from aws_cdk import aws_iam as iam
from aws_cdk import aws_logs as logs
from aws_cdk import aws_servicediscovery as servicediscovery
from constructs import Construct

from infra.oxia_commands import (
    DATA_DIR,
    INTERNAL_PORT,
    OXIA_UID,
    PUBLIC_PORT,
    cluster_config,
    coordinator_command,
    health_probe,
    server_command,
    standalone_command,
)
from infra.oxia_ebs import ARM64_INSTANCES, OXIA_INSTANCES, AfterCapacityProviders, OxiaHost, add_host, add_snapshots
from infra.settings import OxiaMode, OxiaSize, OxiaStorage

# Published by Oxia's release workflow (.github/workflows/ci-release.yaml: semver tags, linux/amd64
# and linux/arm64). A data directory written by v0.17.1 cannot be opened by v0.14.4: no way back.
OXIA_VERSION = "0.17.1"
OXIA_IMAGE = f"oxia/oxia:{OXIA_VERSION}"
DATA_SERVERS = 3
COORDINATOR_SIZE = OxiaSize("coordinator", 256, 512)

Role = Literal["standalone", "server", "coordinator"]


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
                host = add_host(
                    self,
                    name,
                    size,
                    subnet,
                    vpc=self._vpc,
                    cluster=self.cluster,
                    removal_policy=self._removal_policy,
                )
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
            self.snapshot_policy = add_snapshots(self, hosts)
            Aspects.of(self).add(AfterCapacityProviders(self.cluster, [s.service for s in servers]))

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
