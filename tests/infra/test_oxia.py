"""The Oxia cluster: standalone and replicated task definitions, volumes, names and security groups."""

from __future__ import annotations

import itertools
import json
import os
import re
import shlex
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import aws_cdk as cdk
import pytest
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_logs as logs
from aws_cdk.assertions import Template

from devserver.devstack import find_oxia_binary, free_port, wait_until_serving
from infra.network import Network
from infra.oxia import OXIA_IMAGE, OXIA_VERSION, OxiaCluster
from infra.oxia_commands import (
    cluster_config,
    coordinator_command,
    health_probe,
    server_command,
    standalone_command,
)
from infra.settings import OXIA_SIZES
from infra.stack import LlogStack
from llog.config import OxiaConfig
from llog.store.oxia import OxiaStore
from tests.conftest import TOOLS_BIN, UNAVAILABLE_REASON, _oxia_unavailable
from tests.infra.helpers import make_app, resources

IMAGE = "oxia/oxia:0.17.1"
HEALTH = ["CMD", "oxia", "health", "--port=6649"]


def containers(template: Template) -> dict[str, dict[str, Any]]:
    """Task definition logical id -> its single container definition."""
    out = {}
    for task_id, task in resources(template, "AWS::ECS::TaskDefinition").items():
        (container,) = task["Properties"]["ContainerDefinitions"]
        out[task_id] = container
    return out


def efs_volume(template: Template, task_id: str) -> dict[str, Any]:
    task = resources(template, "AWS::ECS::TaskDefinition")[task_id]
    (volume,) = task["Properties"]["Volumes"]
    config: dict[str, Any] = volume["EFSVolumeConfiguration"]
    return config


def cloud_map_names(template: Template) -> dict[str, dict[str, Any]]:
    services = resources(template, "AWS::ServiceDiscovery::Service").values()
    return {s["Properties"]["Name"]: s["Properties"] for s in services}


def ingress_rules(template: Template) -> list[dict[str, Any]]:
    """Every ingress rule: standalone resources and rules inlined in security groups."""
    rules = [r["Properties"] for r in resources(template, "AWS::EC2::SecurityGroupIngress").values()]
    for sg_id, sg in resources(template, "AWS::EC2::SecurityGroup").items():
        for rule in sg["Properties"].get("SecurityGroupIngress", []):
            rules.append({**rule, "GroupId": {"Fn::GetAtt": [sg_id, "GroupId"]}})
    return rules


def sg_ref(logical_id: str) -> dict[str, Any]:
    return {"Fn::GetAtt": [logical_id, "GroupId"]}


def logical_id(stack: cdk.Stack, construct: Any) -> str:
    return stack.get_logical_id(construct.node.default_child)


def test_image_is_pinned() -> None:
    assert OXIA_IMAGE == IMAGE
    assert OXIA_VERSION == "0.17.1"


def coordinator_script_parts(script: str) -> tuple[dict[str, Any], dict[str, Any], list[str]]:
    """printf '%s' <cluster> > f1 && printf '%s' <settings> > f2 && exec oxia coordinator <args>."""
    words = shlex.split(script)
    assert words[:2] == ["printf", "%s"]
    assert words[3:8] == [">", "/tmp/oxia-cluster.yaml", "&&", "printf", "%s"]
    assert words[9:15] == [">", "/tmp/oxia-coordinator.yaml", "&&", "exec", "oxia", "coordinator"]
    return json.loads(words[2]), json.loads(words[8]), words[15:]


# -- standalone (development) ---------------------------------------------------------------


def test_standalone_runs_one_task_of_oxia_standalone(dev_template: Template) -> None:
    dev_template.resource_count_is("AWS::ECS::Service", 1)
    ((task_id, container),) = containers(dev_template).items()
    assert container["Image"] == IMAGE
    assert container["Command"][:2] == ["oxia", "standalone"]
    assert "--data-dir=/data/db" in container["Command"]
    assert "--wal-dir=/data/wal" in container["Command"]
    assert "--shards=1" in container["Command"]
    assert "--public-addr=0.0.0.0:6648" in container["Command"]
    # v0.17.1 standalone serves the gRPC health service on its public port.
    assert container["HealthCheck"]["Command"] == ["CMD", "oxia", "health", "--port=6648"]
    assert container["MountPoints"] == [{"ContainerPath": "/data", "ReadOnly": False, "SourceVolume": "data"}]
    assert container["PortMappings"] == [{"ContainerPort": 6648, "Protocol": "tcp"}]
    assert container["LogConfiguration"]["LogDriver"] == "awslogs"
    task = resources(dev_template, "AWS::ECS::TaskDefinition")[task_id]["Properties"]
    assert task["RuntimePlatform"] == {"CpuArchitecture": "ARM64", "OperatingSystemFamily": "LINUX"}
    assert (task["Cpu"], task["Memory"]) == (str(OXIA_SIZES["small"].cpu), str(OXIA_SIZES["small"].memory_mib))


def test_standalone_data_lives_on_an_encrypted_efs_volume(dev_template: Template) -> None:
    ((task_id, _),) = containers(dev_template).items()
    volume = efs_volume(dev_template, task_id)
    assert volume["TransitEncryption"] == "ENABLED"
    assert volume["AuthorizationConfig"]["IAM"] == "ENABLED"
    (fs_id,) = resources(dev_template, "AWS::EFS::FileSystem")
    assert volume["FilesystemId"] == {"Ref": fs_id}
    fs = resources(dev_template, "AWS::EFS::FileSystem")[fs_id]["Properties"]
    assert fs["Encrypted"] is True
    assert fs["BackupPolicy"] == {"Status": "ENABLED"}
    (ap_id,) = resources(dev_template, "AWS::EFS::AccessPoint")
    assert volume["AuthorizationConfig"]["AccessPointId"] == {"Ref": ap_id}


def test_one_task_at_a_time_per_volume(
    dev_template: Template, prod_template: Template, efs_prod_template: Template
) -> None:
    for template in (dev_template, prod_template, efs_prod_template):
        for service in resources(template, "AWS::ECS::Service").values():
            props = service["Properties"]
            assert props["DesiredCount"] == 1
            assert props["DeploymentConfiguration"]["MinimumHealthyPercent"] == 0
            assert props["DeploymentConfiguration"]["MaximumPercent"] == 100
            assert props["NetworkConfiguration"]["AwsvpcConfiguration"]["AssignPublicIp"] == "DISABLED"


def test_standalone_has_a_stable_name_and_service_address(dev_stack: LlogStack, dev_template: Template) -> None:
    dev_template.has_resource_properties("AWS::ServiceDiscovery::PrivateDnsNamespace", {"Name": "llog-dev.internal"})
    names = cloud_map_names(dev_template)
    assert set(names) == {"oxia"}
    assert names["oxia"]["DnsConfig"]["DnsRecords"] == [{"TTL": 10, "Type": "A"}]
    assert dev_stack.oxia.service_address == "oxia.llog-dev.internal:6648"
    dev_template.has_output("OxiaServiceAddress", {"Value": "oxia.llog-dev.internal:6648"})


# -- replicated (production) ------------------------------------------------------------------
# Production defaults to the data servers on EBS (tests/infra/test_oxia_ebs.py); the EFS shape of
# every process is checked here on a production stack with llog:oxiaStorage=efs.


@pytest.fixture(scope="module")
def efs_prod_template(efs_prod_stack: LlogStack) -> Template:
    return Template.from_stack(efs_prod_stack)


def test_replicated_runs_a_coordinator_and_three_data_servers(prod_stack: LlogStack, prod_template: Template) -> None:
    prod_template.resource_count_is("AWS::ECS::Service", 4)
    commands = [c["Command"] for c in containers(prod_template).values()]
    servers = [c for c in commands if c[:2] == ["oxia", "server"]]
    coordinators = [c for c in commands if c[:2] == ["bash", "-c"] and "exec oxia coordinator" in c[2]]
    assert (len(servers), len(coordinators)) == (3, 1)
    for c in containers(prod_template).values():
        assert c["Image"] == IMAGE
        assert c["HealthCheck"]["Command"] == HEALTH
    for command in servers:
        assert "--public-addr=0.0.0.0:6648" in command
        assert "--internal-addr=0.0.0.0:6649" in command
        assert "--data-dir=/data/db" in command
        assert "--wal-dir=/data/wal" in command
    assert [n.name for n in prod_stack.oxia.nodes] == ["oxia-0", "oxia-1", "oxia-2", "oxia-coordinator"]


def test_every_process_has_its_own_persistent_volume(efs_prod_template: Template) -> None:
    file_systems = resources(efs_prod_template, "AWS::EFS::FileSystem")
    assert len(file_systems) == 4
    volumes = [efs_volume(efs_prod_template, task_id) for task_id in containers(efs_prod_template)]
    assert sorted(v["FilesystemId"]["Ref"] for v in volumes) == sorted(file_systems)
    assert len({v["AuthorizationConfig"]["AccessPointId"]["Ref"] for v in volumes}) == 4
    for container in containers(efs_prod_template).values():
        assert container["MountPoints"] == [{"ContainerPath": "/data", "ReadOnly": False, "SourceVolume": "data"}]


def test_each_task_may_mount_only_its_own_volume(efs_prod_template: Template) -> None:
    policies = resources(efs_prod_template, "AWS::IAM::Policy")
    for task_id in containers(efs_prod_template):
        task = resources(efs_prod_template, "AWS::ECS::TaskDefinition")[task_id]["Properties"]
        role = task["TaskRoleArn"]["Fn::GetAtt"][0]
        fs_id = efs_volume(efs_prod_template, task_id)["FilesystemId"]["Ref"]
        statements = [
            s
            for p in policies.values()
            if {"Ref": role} in p["Properties"]["Roles"]
            for s in p["Properties"]["PolicyDocument"]["Statement"]
        ]
        assert statements, task_id
        for s in statements:
            assert s["Resource"] == {"Fn::GetAtt": [fs_id, "Arn"]}
            assert set(s["Action"]) <= {"elasticfilesystem:ClientMount", "elasticfilesystem:ClientWrite",
                                        "elasticfilesystem:ClientRootAccess"}  # fmt: skip


def test_each_volume_admits_only_its_own_task_role(efs_prod_template: Template) -> None:
    file_systems = resources(efs_prod_template, "AWS::EFS::FileSystem")
    for task_id in containers(efs_prod_template):
        task = resources(efs_prod_template, "AWS::ECS::TaskDefinition")[task_id]["Properties"]
        fs_id = efs_volume(efs_prod_template, task_id)["FilesystemId"]["Ref"]
        (statement,) = file_systems[fs_id]["Properties"]["FileSystemPolicy"]["Statement"]
        assert statement["Effect"] == "Allow"
        assert statement["Principal"] == {"AWS": task["TaskRoleArn"]}
        assert statement["Condition"] == {"Bool": {"elasticfilesystem:AccessedViaMountTarget": "true"}}


def test_data_servers_have_stable_names_in_the_coordinator_config(
    prod_stack: LlogStack, prod_template: Template
) -> None:
    names = cloud_map_names(prod_template)
    assert set(names) == {"oxia", "oxia-0", "oxia-1", "oxia-2"}
    for i in range(3):
        assert names[f"oxia-{i}"]["DnsConfig"]["DnsRecords"] == [{"TTL": 10, "Type": "A"}]
    (coordinator,) = [c for c in containers(prod_template).values() if c["Command"][0] == "bash"]
    config, _, _ = coordinator_script_parts(coordinator["Command"][2])
    assert config == {
        "namespaces": [{"name": "default", "initialShardCount": 3, "replicationFactor": 3}],
        "servers": [
            {
                "name": f"oxia-{i}",
                "public": f"oxia-{i}.llog-prod.internal:6648",
                "internal": f"oxia-{i}.llog-prod.internal:6649",
            }
            for i in range(3)
        ],
        # v0.17.1 data servers refuse clients that dialled a name not in the config.
        "allowExtraAuthorities": [prod_stack.oxia.service_address],
    }
    assert config == prod_stack.oxia.cluster_config


def test_coordinator_takes_its_settings_from_a_config_file_not_deprecated_flags(prod_template: Template) -> None:
    (coordinator,) = [c for c in containers(prod_template).values() if c["Command"][0] == "bash"]
    _, settings, args = coordinator_script_parts(coordinator["Command"][2])
    # No deprecated flags (--conf and the like): every setting is in the file.
    assert args == ["--sconfig=/tmp/oxia-coordinator.yaml", "--log-json"]
    assert settings == {
        "metadata": {
            "providerName": "file",
            "file": {"statusName": "/data/cluster-status.json", "configName": "/tmp/oxia-cluster.yaml"},
        },
        "server": {
            "internal": {"bindAddress": "0.0.0.0:6649"},
            # v0.17.1's new admin API (default 0.0.0.0:6651) stays inside the task.
            "public": {"bindAddress": "127.0.0.1:6651"},
        },
        "observability": {"metric": {"bindAddress": "0.0.0.0:8080"}},
    }
    assert coordinator["PortMappings"] == [{"ContainerPort": 6649, "Protocol": "tcp"}]


def test_clients_bootstrap_through_a_name_over_all_data_servers(prod_stack: LlogStack, prod_template: Template) -> None:
    bootstrap = cloud_map_names(prod_template)["oxia"]
    assert bootstrap["DnsConfig"]["RoutingPolicy"] == "WEIGHTED"
    assert bootstrap["DnsConfig"]["DnsRecords"] == [{"TTL": 10, "Type": "CNAME"}]
    cnames = sorted(
        i["Properties"]["InstanceAttributes"]["AWS_INSTANCE_CNAME"]
        for i in resources(prod_template, "AWS::ServiceDiscovery::Instance").values()
    )
    assert cnames == [f"oxia-{i}.llog-prod.internal" for i in range(3)]
    assert prod_stack.oxia.service_address == "oxia.llog-prod.internal:6648"
    assert prod_stack.oxia.server_addresses == [f"oxia-{i}.llog-prod.internal:6648" for i in range(3)]


def test_deploys_roll_one_process_at_a_time(prod_stack: LlogStack, prod_template: Template) -> None:
    services = resources(prod_template, "AWS::ECS::Service")
    ids = [logical_id(prod_stack, n.service) for n in prod_stack.oxia.nodes]
    for previous, current in itertools.pairwise(ids):
        assert previous in services[current]["DependsOn"], (current, previous)


# -- security groups --------------------------------------------------------------------------


def _check_security_groups(stack: LlogStack, template: Template) -> None:
    oxia = stack.oxia
    client = logical_id(stack, oxia.client_security_group)
    server = logical_id(stack, oxia.server_security_group)
    coordinator = logical_id(stack, oxia.coordinator_security_group) if oxia.coordinator_security_group else server
    node_sgs = {n.name: (coordinator if n.role == "coordinator" else server) for n in oxia.nodes}
    efs_sgs = {
        n.name: logical_id(stack, n.file_system.connections.security_groups[0])
        for n in oxia.nodes
        if n.file_system is not None
    }
    rules = ingress_rules(template)
    assert rules
    for rule in rules:
        assert "CidrIp" not in rule, rule  # nothing is open to an address range
        assert "CidrIpv6" not in rule, rule
        port = (rule["FromPort"], rule["ToPort"])
        if port == (6648, 6648):
            assert rule["GroupId"] == sg_ref(server)
            assert rule["SourceSecurityGroupId"] == sg_ref(client)
        elif port == (6649, 6649):
            assert rule["GroupId"] == sg_ref(server)
            assert rule["SourceSecurityGroupId"] in (sg_ref(server), sg_ref(coordinator))
        elif port == (2049, 2049):
            owner = next(name for name, sg in efs_sgs.items() if rule["GroupId"] == sg_ref(sg))
            assert rule["SourceSecurityGroupId"] == sg_ref(node_sgs[owner])
        else:
            raise AssertionError(f"unexpected ingress rule {rule}")
    assert not [r for r in rules if r["GroupId"] == sg_ref(client)], "the client group admits nothing"
    if coordinator != server:
        assert not [r for r in rules if r["GroupId"] == sg_ref(coordinator)], "the coordinator admits nothing"
    for service in resources(template, "AWS::ECS::Service").values():
        groups = service["Properties"]["NetworkConfiguration"]["AwsvpcConfiguration"]["SecurityGroups"]
        assert groups in ([sg_ref(server)], [sg_ref(coordinator)])


def test_standalone_security_groups(dev_stack: LlogStack, dev_template: Template) -> None:
    _check_security_groups(dev_stack, dev_template)
    assert not [r for r in ingress_rules(dev_template) if r["FromPort"] == 6649]


@pytest.mark.parametrize("storage", ["ebs", "efs"])
def test_replicated_security_groups(
    storage: str,
    prod_stack: LlogStack,
    prod_template: Template,
    efs_prod_stack: LlogStack,
    efs_prod_template: Template,
) -> None:
    stack, template = (prod_stack, prod_template) if storage == "ebs" else (efs_prod_stack, efs_prod_template)
    _check_security_groups(stack, template)
    internal = [r for r in ingress_rules(template) if r["FromPort"] == 6649]
    assert len(internal) == 2  # from the data servers themselves and from the coordinator
    nfs = [r for r in ingress_rules(template) if r["FromPort"] == 2049]
    assert len(nfs) == (1 if storage == "ebs" else 4)  # EBS: only the coordinator's file system


# -- placement --------------------------------------------------------------------------------


def test_with_three_known_azs_each_data_server_is_pinned_to_its_own_az() -> None:
    azs = ["eu-west-1a", "eu-west-1b", "eu-west-1c"]
    app = make_app({"availability-zones:account=123456789012:region=eu-west-1": azs})
    stack = cdk.Stack(app, "Placement", env=cdk.Environment(account="123456789012", region="eu-west-1"))
    vpc = Network(
        stack, "Network", max_azs=3, nat_gateways=1, log_retention=logs.RetentionDays.ONE_WEEK,
        removal_policy=cdk.RemovalPolicy.DESTROY,
    ).vpc  # fmt: skip
    oxia = OxiaCluster(
        stack,
        "Oxia",
        vpc=vpc,
        subnets=ec2.SubnetSelection(subnet_type=ec2.SubnetType.PRIVATE_WITH_EGRESS),
        stage="test",
        mode="replicated",
        size=OXIA_SIZES["small"],
        storage="efs",
        shards=3,
        namespace="default",
        log_retention=logs.RetentionDays.ONE_WEEK,
        removal_policy=cdk.RemovalPolicy.DESTROY,
    )
    template = Template.from_stack(stack)
    subnet_az = {k: s["Properties"]["AvailabilityZone"] for k, s in resources(template, "AWS::EC2::Subnet").items()}
    services = resources(template, "AWS::ECS::Service")
    placed = []
    for node in oxia.nodes:
        subnets = services[logical_id(stack, node.service)]["Properties"]["NetworkConfiguration"][
            "AwsvpcConfiguration"
        ]["Subnets"]
        placed.append(sorted(subnet_az[s["Ref"]] for s in subnets))
    assert placed == [["eu-west-1a"], ["eu-west-1b"], ["eu-west-1c"], azs]  # coordinator: anywhere


# -- the commands against the real Oxia binary (no CDK synth) ---------------------------------
# A whole coordinator + 3 data servers is checked by hand (docs/DEPLOY.md, "Oxia"), not here: a
# v0.17.1 coordinator that pushes shard assignments before a data server's handshake retries only
# after 5-15 s, so a fresh cluster takes up to ~15 s to serve every shard.


@pytest.fixture(scope="module")
def oxia_bin() -> str:
    binary = find_oxia_binary([TOOLS_BIN])
    if binary is None:
        _oxia_unavailable(UNAVAILABLE_REASON.read_text().strip() if UNAVAILABLE_REASON.exists() else "run make setup")
    assert binary is not None
    return binary


def _env(oxia_bin: str) -> dict[str, str]:
    """The task definitions call ``oxia`` by name, as on the image's PATH."""
    return {**os.environ, "PATH": f"{Path(oxia_bin).parent}{os.pathsep}{os.environ.get('PATH', '')}"}


def _listed_flags(oxia_bin: str, subcommand: str) -> set[str]:
    """The flags ``oxia <subcommand> --help`` lists (cobra hides deprecated ones)."""
    out = subprocess.run([oxia_bin, subcommand, "--help"], capture_output=True, text=True, timeout=30, check=True)
    return set(re.findall(r"^\s+(?:-\w, )?(--[a-z0-9-]+)", out.stdout, re.MULTILINE))


def _flags(args: list[str]) -> list[str]:
    return [a.split("=", 1)[0] for a in args if a.startswith("-")]


@pytest.mark.oxia
def test_every_flag_the_task_definitions_pass_is_a_current_one(oxia_bin: str) -> None:
    config = cluster_config("default", 3, [(f"oxia-{i}", f"h{i}:6648", f"h{i}:6649") for i in range(3)])
    _, _, coordinator_args = coordinator_script_parts(coordinator_command(config)[2])
    commands = {
        "standalone": standalone_command(shards=1, db_cache_mib=100)[2:],
        "server": server_command(db_cache_mib=100)[2:],
        "coordinator": coordinator_args,
        "health": health_probe()[2:],
    }
    for subcommand, args in commands.items():
        listed = _listed_flags(oxia_bin, subcommand)
        assert listed, subcommand
        assert set(_flags(args)) <= listed, (subcommand, set(_flags(args)) - listed)
    assert "--conf" not in _listed_flags(oxia_bin, "coordinator")  # deprecated: hidden


@pytest.fixture
def processes() -> Iterator[list[subprocess.Popen[bytes]]]:
    started: list[subprocess.Popen[bytes]] = []
    try:
        yield started
    finally:
        for p in started:
            p.terminate()
        for p in started:
            try:
                p.wait(10)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()


def _wait_healthy(oxia_bin: str, port: int, timeout_s: float = 15.0) -> None:
    deadline = time.monotonic() + timeout_s
    while True:
        probe = subprocess.run(
            [*health_probe(port), "--timeout=1s"], env=_env(oxia_bin), capture_output=True, text=True, timeout=10
        )
        if probe.returncode == 0:
            return
        assert time.monotonic() < deadline, probe.stderr
        time.sleep(0.1)


@pytest.mark.oxia
def test_standalone_command_serves_and_passes_its_health_probe(
    oxia_bin: str, tmp_path: Path, processes: list[subprocess.Popen[bytes]]
) -> None:
    port = free_port()
    command = standalone_command(
        shards=1,
        db_cache_mib=64,
        data_dir=str(tmp_path),
        public_addr=f"127.0.0.1:{port}",
        metrics_addr=f"127.0.0.1:{free_port()}",
    )
    with (tmp_path / "oxia.log").open("wb") as log:
        processes.append(subprocess.Popen(command, env=_env(oxia_bin), stdout=log, stderr=subprocess.STDOUT))
    wait_until_serving(f"127.0.0.1:{port}")
    _wait_healthy(oxia_bin, port, timeout_s=5)  # the task definition's probe, on the public port
    with OxiaStore(OxiaConfig(f"127.0.0.1:{port}")) as store:
        version = store.put("llog/t/probe", b"v", partition_key="t")
        got = store.get("llog/t/probe", partition_key="t")
    assert got is not None
    assert (got.value, got.version_id) == (b"v", version)


@pytest.mark.oxia
def test_coordinator_command_starts_with_its_config_files(
    oxia_bin: str, tmp_path: Path, processes: list[subprocess.Popen[bytes]]
) -> None:
    servers = [(f"oxia-{i}", f"127.0.0.1:{free_port()}", f"127.0.0.1:{free_port()}") for i in range(3)]
    config = cluster_config("default", 3, servers, bootstrap_addresses=["localhost:6648"])
    internal, admin = free_port(), free_port()
    command = coordinator_command(
        config,
        data_dir=str(tmp_path / "data"),
        config_dir=str(tmp_path),
        internal_addr=f"127.0.0.1:{internal}",
        admin_addr=f"127.0.0.1:{admin}",
        metrics_addr=f"127.0.0.1:{free_port()}",
    )
    (tmp_path / "data").mkdir()
    log_path = tmp_path / "coordinator.log"
    with log_path.open("wb") as out:
        processes.append(subprocess.Popen(command, env=_env(oxia_bin), stdout=out, stderr=subprocess.STDOUT))
    _wait_healthy(oxia_bin, internal)  # the task definition's probe
    assert json.loads((tmp_path / "oxia-cluster.yaml").read_text()) == config
    log = log_path.read_text()
    assert "deprecated" not in log.lower(), log
    (started,) = [json.loads(line) for line in log.splitlines() if '"Starting Oxia coordinator"' in line]
    options = started["options"]
    assert options["metadata"]["providerName"] == "file"
    assert options["metadata"]["file"] == {
        "statusName": str(tmp_path / "data" / "cluster-status.json"),
        "configName": str(tmp_path / "oxia-cluster.yaml"),
    }
    assert options["server"]["internal"]["bindAddress"] == f"127.0.0.1:{internal}"
    assert options["server"]["public"]["bindAddress"] == f"127.0.0.1:{admin}"
