"""Oxia's data servers on EBS (``llog:oxiaStorage=ebs``): volumes, instances, capacity providers, snapshots.

The production shape with three known AZs is synthesized as ``cdk deploy`` would with an account
and region (the AZs come from the context cache, as after a lookup); offline synthesis knows only
two AZs, where data servers 0 and 2 share one (checked too).
"""

from __future__ import annotations

import itertools
import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import aws_cdk as cdk
import pytest
from aws_cdk.assertions import Annotations, Match, Template

from infra.oxia_ebs import (
    ARM64_INSTANCES,
    EBS_VOLUME_GIB,
    OXIA_INSTANCES,
    SERVER_TAG,
    attach_volume_commands,
    data_mount_point,
)
from infra.settings import LlogSettings, SettingsError
from infra.stack import LlogStack
from tests.infra.helpers import make_stack, resources

AZS = ["eu-west-1a", "eu-west-1b", "eu-west-1c"]
ENV = cdk.Environment(account="123456789012", region="eu-west-1")
NAG = Match.string_like_regexp("AwsSolutions-.*")


def settings(**context: Any) -> LlogSettings:
    return LlogSettings.from_context(lambda key: context.get(key.removeprefix("llog:")))


@pytest.fixture(scope="module")
def stack() -> LlogStack:
    return make_stack({"llog:stage": "prod", "availability-zones:account=123456789012:region=eu-west-1": AZS}, env=ENV)


@pytest.fixture(scope="module")
def template(stack: LlogStack) -> Template:
    return Template.from_stack(stack)


def logical_id(stack: cdk.Stack, construct: Any) -> str:
    return stack.get_logical_id(construct.node.default_child)


def tag(resource: dict[str, Any], key: str) -> Any:
    (value,) = [t["Value"] for t in resource["Properties"].get("Tags", []) if t["Key"] == key]
    return value


def user_data(template: Template, group: dict[str, Any]) -> str:
    """The ASG's launch template's user data, with CloudFormation references written as ``<Ref:id>``."""
    templates = resources(template, "AWS::EC2::LaunchTemplate")
    data = templates[group["Properties"]["LaunchTemplate"]["LaunchTemplateId"]["Ref"]]["Properties"]
    parts = data["LaunchTemplateData"]["UserData"]["Fn::Base64"]["Fn::Join"][1]
    return "".join(p if isinstance(p, str) else f"<Ref:{p['Ref']}>" for p in parts)


# -- the setting --------------------------------------------------------------------------------


def test_ebs_is_the_default_of_replicated_stages_and_efs_of_standalone() -> None:
    assert settings(stage="prod").oxia_storage == "ebs"
    assert settings(stage="dev").oxia_storage == "efs"
    assert settings(stage="dev", oxiaMode="replicated").oxia_storage == "ebs"
    assert settings(stage="prod", oxiaStorage="efs").oxia_storage == "efs"
    assert settings(stage="prod", oxiaStorage="auto").oxia_storage == "ebs"


def test_standalone_on_ebs_and_unknown_storages_are_refused() -> None:
    with pytest.raises(SettingsError, match=r'llog:oxiaStorage: expected "efs" with llog:oxiaMode=standalone'):
        settings(stage="dev", oxiaStorage="ebs")
    with pytest.raises(SettingsError, match=r"llog:oxiaStorage: expected one of efs, ebs, got 'gp3'"):
        settings(stage="prod", oxiaStorage="gp3")


def test_efs_stacks_have_no_instances_or_volumes(dev_template: Template) -> None:
    efs_prod = Template.from_stack(make_stack({"llog:stage": "prod", "llog:oxiaStorage": "efs"}))
    for t in (dev_template, efs_prod):
        for kind in ("AWS::EC2::Volume", "AWS::AutoScaling::AutoScalingGroup", "AWS::ECS::CapacityProvider",
                     "AWS::DLM::LifecyclePolicy", "AWS::EC2::LaunchTemplate"):  # fmt: skip
            t.resource_count_is(kind, 0)


# -- volumes and instances ----------------------------------------------------------------------


def test_one_encrypted_gp3_volume_per_data_server_each_in_its_own_az(stack: LlogStack, template: Template) -> None:
    volumes = resources(template, "AWS::EC2::Volume")
    servers = stack.oxia.servers
    assert [s.name for s in servers] == ["oxia-0", "oxia-1", "oxia-2"]
    for i, server in enumerate(servers):
        assert server.host is not None
        volume = volumes[logical_id(stack, server.host.volume)]
        props = volume["Properties"]
        assert props["AvailabilityZone"] == AZS[i]
        assert (props["Encrypted"], props["VolumeType"], props["Size"]) == (True, "gp3", EBS_VOLUME_GIB)
        assert (volume["DeletionPolicy"], volume["UpdateReplacePolicy"]) == ("Retain", "Retain")
        assert tag(volume, SERVER_TAG) == f"llog-prod/oxia-{i}"
    assert len(volumes) == 3


def test_a_development_stage_on_ebs_deletes_its_volumes() -> None:
    t = Template.from_stack(make_stack({"llog:stage": "ebsdev", "llog:oxiaMode": "replicated"}))
    volumes = resources(t, "AWS::EC2::Volume").values()
    assert [v["DeletionPolicy"] for v in volumes] == ["Delete"] * 3


def test_one_instance_per_data_server_in_its_volumes_az(stack: LlogStack, template: Template) -> None:
    groups = resources(template, "AWS::AutoScaling::AutoScalingGroup")
    subnets = resources(template, "AWS::EC2::Subnet")
    launch_templates = resources(template, "AWS::EC2::LaunchTemplate")
    assert len(groups) == 3
    for i, server in enumerate(stack.oxia.servers):
        assert server.host is not None
        group = groups[logical_id(stack, server.host.auto_scaling_group)]
        props = group["Properties"]
        assert (props["MinSize"], props["MaxSize"], props.get("DesiredCapacity", props["MinSize"])) == ("1",) * 3
        (subnet,) = props["VPCZoneIdentifier"]
        assert subnets[subnet["Ref"]]["Properties"]["AvailabilityZone"] == AZS[i]
        assert subnets[subnet["Ref"]]["Properties"]["MapPublicIpOnLaunch"] is False
        assert {"Key": SERVER_TAG, "PropagateAtLaunch": True, "Value": f"llog-prod/oxia-{i}"} in props["Tags"]
        data = launch_templates[props["LaunchTemplate"]["LaunchTemplateId"]["Ref"]]["Properties"]["LaunchTemplateData"]
        assert data["InstanceType"] == OXIA_INSTANCES["medium"].instance_type == "c7g.medium"
        assert data["MetadataOptions"]["HttpTokens"] == "required"
        assert data["BlockDeviceMappings"][0]["Ebs"]["Encrypted"] is True
        # The server tag stays off the root volume, so DLM snapshots only the data volume.
        for spec in data["TagSpecifications"]:
            assert SERVER_TAG not in [t["Key"] for t in spec["Tags"]]
        image = data["ImageId"]["Ref"]
        assert template.to_json()["Parameters"][image]["Default"] == (
            "/aws/service/ecs/optimized-ami/amazon-linux-2023/arm64/recommended/image_id"
        )


def test_instances_admit_nothing(stack: LlogStack, template: Template) -> None:
    groups = resources(template, "AWS::EC2::SecurityGroup")
    ingress = resources(template, "AWS::EC2::SecurityGroupIngress").values()
    for server in stack.oxia.servers:
        assert server.host is not None
        (sg,) = server.host.auto_scaling_group.connections.security_groups
        sg_id = logical_id(stack, sg)
        assert "SecurityGroupIngress" not in groups[sg_id]["Properties"]
        assert not [r for r in ingress if r["Properties"]["GroupId"] == {"Fn::GetAtt": [sg_id, "GroupId"]}]


def test_user_data_attaches_formats_once_and_mounts_before_the_ecs_agent(stack: LlogStack, template: Template) -> None:
    groups = resources(template, "AWS::AutoScaling::AutoScalingGroup")
    for i, server in enumerate(stack.oxia.servers):
        assert server.host is not None
        script = user_data(template, groups[logical_id(stack, server.host.auto_scaling_group)])
        volume = logical_id(stack, server.host.volume)
        assert f"VOLUME=<Ref:{volume}>" in script
        mount = f"/data/oxia-{i}"
        lines = script.splitlines()
        order = [
            next(n for n, line in enumerate(lines) if needle in line)
            for needle in (
                f"RequiresMountsFor=%s\\n' {mount}",
                "aws ec2 attach-volume",
                "aws ec2 wait volume-in-use",
                "blkid -p",
                f"mount {mount}",
                "ECS_CLUSTER=",
            )  # fmt: skip
        ]
        assert order == sorted(order), script
        assert "nvme-Amazon_Elastic_Block_Store_${VOLUME/-/}" in script
        assert "ECS_AWSVPC_BLOCK_IMDS=true" in script


def test_the_user_data_is_valid_bash(tmp_path: Path) -> None:
    script = tmp_path / "user-data.sh"
    script.write_text("\n".join(attach_volume_commands("vol-0123456789abcdef0", data_mount_point("oxia-1"))) + "\n")
    bash = shutil.which("bash")
    assert bash is not None
    subprocess.run([bash, "-n", str(script)], check=True, timeout=30)


def test_the_format_step_formats_only_a_device_without_a_file_system(tmp_path: Path) -> None:
    """The one-liner, run by bash with blkid and mkfs.xfs replaced by scripts that record the call."""
    commands = attach_volume_commands("vol-1", "/data/oxia-0")
    (probe,) = [i for i, c in enumerate(commands) if "blkid" in c]
    step = "; ".join(commands[probe : probe + 2])
    assert "mkfs.xfs" in step
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "mkfs.xfs").write_text(f'#!/bin/sh\necho "$@" >> {tmp_path}/formatted\n')
    outcomes = {}
    for blkid_status in (0, 2, 4):  # a file system, none, a probe error
        (tmp_path / "formatted").unlink(missing_ok=True)
        (bin_dir / "blkid").write_text(f"#!/bin/sh\nexit {blkid_status}\n")
        for tool in bin_dir.iterdir():
            tool.chmod(0o755)
        done = subprocess.run(
            ["bash", "-c", f"set -euo pipefail; DEVICE=/dev/x; {step}; echo ok"],
            env={"PATH": f"{bin_dir}:/usr/bin:/bin"}, capture_output=True, text=True, timeout=30,
        )  # fmt: skip
        formatted = (tmp_path / "formatted").read_text() if (tmp_path / "formatted").exists() else ""
        outcomes[blkid_status] = (done.returncode, formatted.strip())
    assert outcomes == {0: (0, ""), 2: (0, "/dev/x"), 4: (4, "")}  # a probe error stops the script


# -- IAM: the attach permission ------------------------------------------------------------------


def test_each_instance_may_attach_only_its_own_volume_from_an_instance_tagged_for_it(
    stack: LlogStack, template: Template
) -> None:
    policies = resources(template, "AWS::IAM::Policy")
    roles = resources(template, "AWS::IAM::Role")
    for i, server in enumerate(stack.oxia.servers):
        assert server.host is not None
        role = logical_id(stack, server.host.auto_scaling_group.role)
        statements = [
            s
            for p in policies.values()
            if {"Ref": role} in p["Properties"]["Roles"]
            for s in p["Properties"]["PolicyDocument"]["Statement"]
        ]
        attach = [s for s in statements if "ec2:AttachVolume" in json.dumps(s["Action"])]
        assert {s["Sid"] for s in attach} == {"AttachOwnVolume", "FromOwnInstance"}
        for s in attach:
            assert s["Action"] == "ec2:AttachVolume"
        (own_volume,) = [s for s in attach if s["Sid"] == "AttachOwnVolume"]
        assert "Condition" not in own_volume
        arn = json.dumps(own_volume["Resource"])
        assert ":volume/" in arn
        assert {"Ref": logical_id(stack, server.host.volume)} in own_volume["Resource"]["Fn::Join"][1]
        other_volumes = [logical_id(stack, s.host.volume) for s in stack.oxia.servers if s is not server and s.host]
        assert not [v for v in other_volumes if v in arn]
        (from_instance,) = [s for s in attach if s["Sid"] == "FromOwnInstance"]
        assert json.dumps(from_instance["Resource"]).endswith(':instance/*"')  # any instance, by its tag
        assert from_instance["Condition"] == {"StringEquals": {f"aws:ResourceTag/{SERVER_TAG}": f"llog-prod/oxia-{i}"}}
        managed = json.dumps(roles[role]["Properties"]["ManagedPolicyArns"])
        assert "AmazonSSMManagedInstanceCore" in managed


# -- ECS: capacity providers, task definitions, services ------------------------------------------


def test_each_data_server_has_its_own_capacity_provider(stack: LlogStack, template: Template) -> None:
    providers = resources(template, "AWS::ECS::CapacityProvider")
    (association_id, association) = next(
        iter(resources(template, "AWS::ECS::ClusterCapacityProviderAssociations").items())
    )
    services = resources(template, "AWS::ECS::Service")
    assert len(providers) == 3
    assert sorted(p["Ref"] for p in association["Properties"]["CapacityProviders"]) == sorted(providers)
    for server in stack.oxia.servers:
        assert server.host is not None
        provider_id = stack.resolve(server.host.capacity_provider.capacity_provider_name)["Ref"]
        provider = providers[provider_id]["Properties"]["AutoScalingGroupProvider"]
        assert provider["AutoScalingGroupArn"] == {"Ref": logical_id(stack, server.host.auto_scaling_group)}
        assert provider["ManagedTerminationProtection"] == "DISABLED"
        assert provider["ManagedDraining"] == "ENABLED"
        service = services[logical_id(stack, server.service)]
        props = service["Properties"]
        assert props["CapacityProviderStrategy"] == [{"CapacityProvider": {"Ref": provider_id}, "Weight": 1}]
        assert "LaunchType" not in props
        assert association_id in service["DependsOn"]  # ECS refuses a provider not yet associated
        assert (props["DesiredCount"], props["DeploymentConfiguration"]["MinimumHealthyPercent"],
                props["DeploymentConfiguration"]["MaximumPercent"]) == (1, 0, 100)  # fmt: skip
        # The task's network interface in the instance's subnet; its groups and name as on Fargate.
        network = props["NetworkConfiguration"]["AwsvpcConfiguration"]
        groups = resources(template, "AWS::AutoScaling::AutoScalingGroup")
        assert (
            network["Subnets"]
            == groups[logical_id(stack, server.host.auto_scaling_group)]["Properties"]["VPCZoneIdentifier"]
        )
        assert network["SecurityGroups"] == [{"Fn::GetAtt": [logical_id(stack, stack.oxia.server_security_group),
                                                             "GroupId"]}]  # fmt: skip
        assert len(props["ServiceRegistries"]) == 1


def test_data_server_tasks_run_on_ec2_with_the_volume_as_their_data_directory(
    stack: LlogStack, template: Template
) -> None:
    tasks = resources(template, "AWS::ECS::TaskDefinition")
    for i, server in enumerate(stack.oxia.servers):
        props = tasks[logical_id(stack, server.task_definition)]["Properties"]
        assert props["RequiresCompatibilities"] == ["EC2"]
        assert props["NetworkMode"] == "awsvpc"
        assert props["PlacementConstraints"] == [{"Expression": ARM64_INSTANCES, "Type": "memberOf"}]
        assert props["Volumes"] == [{"Host": {"SourcePath": f"/data/oxia-{i}"}, "Name": "data"}]
        (container,) = props["ContainerDefinitions"]
        assert container["MountPoints"] == [{"ContainerPath": "/data", "ReadOnly": False, "SourceVolume": "data"}]
        assert container["Command"][:2] == ["oxia", "server"]
        assert container["MemoryReservation"] == OXIA_INSTANCES["medium"].task_memory_mib == 1536


def test_deploys_still_roll_one_data_server_at_a_time(stack: LlogStack, template: Template) -> None:
    services = resources(template, "AWS::ECS::Service")
    ids = [logical_id(stack, n.service) for n in stack.oxia.nodes]
    for previous, current in itertools.pairwise(ids):
        assert previous in services[current]["DependsOn"], (current, previous)


def test_the_coordinator_stays_on_fargate_with_efs_and_aws_backup(stack: LlogStack, template: Template) -> None:
    (coordinator,) = [n for n in stack.oxia.nodes if n.role == "coordinator"]
    assert coordinator.host is None
    assert coordinator.file_system is not None
    service = resources(template, "AWS::ECS::Service")[logical_id(stack, coordinator.service)]["Properties"]
    assert service["LaunchType"] == "FARGATE"
    task = resources(template, "AWS::ECS::TaskDefinition")[logical_id(stack, coordinator.task_definition)]
    assert task["Properties"]["RequiresCompatibilities"] == ["FARGATE"]
    (volume,) = task["Properties"]["Volumes"]
    file_systems = resources(template, "AWS::EFS::FileSystem")
    assert list(file_systems) == [volume["EFSVolumeConfiguration"]["FilesystemId"]["Ref"]]
    assert next(iter(file_systems.values()))["Properties"]["BackupPolicy"] == {"Status": "ENABLED"}


# -- snapshots ------------------------------------------------------------------------------------


def test_dlm_snapshots_the_three_volumes_daily_by_their_tag(stack: LlogStack, template: Template) -> None:
    ((_, policy),) = resources(template, "AWS::DLM::LifecyclePolicy").items()
    props = policy["Properties"]
    details = props["PolicyDetails"]
    assert props["State"] == "ENABLED"
    assert (details["PolicyType"], details["ResourceTypes"]) == ("EBS_SNAPSHOT_MANAGEMENT", ["VOLUME"])
    volumes = resources(template, "AWS::EC2::Volume").values()
    assert sorted(t["Value"] for t in details["TargetTags"]) == sorted(tag(v, SERVER_TAG) for v in volumes)
    assert {t["Key"] for t in details["TargetTags"]} == {SERVER_TAG}
    (schedule,) = details["Schedules"]
    assert schedule["CreateRule"] == {"Interval": 24, "IntervalUnit": "HOURS", "Times": ["03:00"]}
    assert schedule["RetainRule"] == {"Count": 7}
    assert schedule["CopyTags"] is True
    role = resources(template, "AWS::IAM::Role")[props["ExecutionRoleArn"]["Fn::GetAtt"][0]]["Properties"]
    assert role["AssumeRolePolicyDocument"]["Statement"][0]["Principal"] == {"Service": "dlm.amazonaws.com"}


# -- offline synthesis (two AZs) and cdk-nag ------------------------------------------------------


def test_offline_two_az_synthesis_puts_servers_0_and_2_in_one_az(prod_template: Template) -> None:
    zones = [v["Properties"]["AvailabilityZone"] for v in resources(prod_template, "AWS::EC2::Volume").values()]
    assert [z["Fn::Select"][0] for z in zones] == [0, 1, 0]


def test_the_three_az_shape_passes_cdk_nag(stack: LlogStack) -> None:
    annotations = Annotations.from_stack(stack)
    assert annotations.find_error("*", NAG) == []
    assert annotations.find_warning("*", NAG) == []
