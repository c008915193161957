"""Oxia's data servers on EBS (``storage="ebs"``): each data server's gp3 volume, its EC2 instance (an Auto
Scaling group of one, attaching the volume at boot) and ECS capacity provider, the volumes' daily snapshots.
"""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from dataclasses import dataclass
from typing import cast

import jsii
from aws_cdk import CfnResource, CfnTag, IAspect, RemovalPolicy, Size, Stack, Tags
from aws_cdk import aws_autoscaling as autoscaling
from aws_cdk import aws_dlm as dlm
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_ecs as ecs
from aws_cdk import aws_iam as iam
from cdk_nag import NagPackSuppression, NagSuppressions, RegexAppliesTo
from constructs import Construct, IConstruct

from infra.lint import ignore_literal_zone
from infra.oxia_commands import OXIA_UID
from infra.settings import OxiaSize

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


def add_host(
    parent: Construct,
    name: str,
    size: OxiaSize,
    subnet: ec2.ISubnet,
    *,
    vpc: ec2.IVpc,
    cluster: ecs.Cluster,
    removal_policy: RemovalPolicy,
) -> OxiaHost:
    """Data server ``name``'s volume and its one instance, both in ``subnet``'s AZ, and its capacity provider.

    They are created in a scope ``name`` under ``parent`` (the ``OxiaCluster``), where the data server's task
    definition and service join them.
    """
    scope = Construct(parent, name)
    stack = Stack.of(parent)
    server_tag = f"{stack.stack_name}/{name}"
    volume = ec2.Volume(
        scope,
        "DataVolume",  # not "Volume", the EFS file system's id: CloudFormation cannot change a type
        availability_zone=subnet.availability_zone,
        size=Size.gibibytes(EBS_VOLUME_GIB),
        volume_type=ec2.EbsDeviceVolumeType.GP3,
        encrypted=True,
        removal_policy=removal_policy,
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
        vpc=vpc,
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
        vpc=vpc,
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
    cluster.add_asg_capacity_provider(capacity_provider)
    _suppress_instance_findings(group)
    return OxiaHost(
        volume=volume,
        auto_scaling_group=group,
        capacity_provider=capacity_provider,
        subnet=subnet,
        mount_point=mount_point,
        server_tag=server_tag,
    )


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


def add_snapshots(scope: Construct, hosts: Sequence[OxiaHost]) -> dlm.CfnLifecyclePolicy:
    """Daily snapshots of the data servers' volumes (in place of the EFS file systems' AWS Backup)."""
    role = iam.Role(
        scope,
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
    return dlm.CfnLifecyclePolicy(
        scope,
        "Snapshots",
        description=f"{Stack.of(scope).stack_name} Oxia data volumes daily",
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


@jsii.implements(IAspect)
class AfterCapacityProviders:
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
