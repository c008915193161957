"""The serve fleet front door (llog:frontDoor=serve): llog serve on ECS Fargate behind an internal load balancer.

Template tests: ARM64 tasks on Oxia's cluster with the functions' environment, an internal load balancer that
admits only the client security group, health checks on ``GET /health``, object grants on the root prefix
only, no API Gateway. The image test (marked ``bundling``: pip downloads the pins) takes the build context
``cdk synth`` stages for the image, installs ``infra/serve-requirements.txt`` for CPython 3.13 as the
Dockerfile does, and runs ``llog serve`` from that context and those packages alone against the session's
Oxia and S3: what the container would run, short of Docker (there is no Docker daemon here).
"""

from __future__ import annotations

import json
import re
import signal
import subprocess
import time
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from aws_cdk import aws_cloudwatch as cw
from aws_cdk.assertions import Annotations, Match, Template

from devserver.devstack import free_port
from functions.common import names
from functions.common.browser import ALLOWED_HOSTS_ENV
from infra.layer import PipLayerBundler
from infra.serve_fleet import CONTAINER_PORT, DNS_NAME, DOCKERFILE, LISTENER_PORT, ServeFleet
from infra.settings import LlogSettings, SettingsError
from infra.stack import LlogStack
from llog.config import Limits
from server.serve import IDLE_CONNECTION_TIMEOUT_S
from tests.conftest import serve_env
from tests.infra.helpers import FLEET_CONTEXT as CONTEXT
from tests.infra.helpers import find_python313, make_app, make_stack, resources

NAG = Match.string_like_regexp("AwsSolutions-.*")


@pytest.fixture(scope="module")
def fleet_template(fleet_stack: LlogStack) -> Template:
    return Template.from_stack(fleet_stack)


def serve_task(template: Template) -> dict[str, Any]:
    tasks = [
        t["Properties"]
        for t in resources(template, "AWS::ECS::TaskDefinition").values()
        if t["Properties"]["ContainerDefinitions"][0]["Name"] == "serve"
    ]
    assert len(tasks) == 1
    task: dict[str, Any] = tasks[0]
    return task


def test_tasks_are_arm64_fargate_with_the_functions_environment(
    fleet_stack: LlogStack, fleet_template: Template
) -> None:
    task = serve_task(fleet_template)
    assert task["RequiresCompatibilities"] == ["FARGATE"]
    assert task["RuntimePlatform"] == {"CpuArchitecture": "ARM64", "OperatingSystemFamily": "LINUX"}
    assert (task["Cpu"], task["Memory"]) == ("1024", "2048")
    (container,) = task["ContainerDefinitions"]
    environment = {e["Name"]: e["Value"] for e in container["Environment"]}
    assert set(environment) == {*fleet_stack.function_environment(), *fleet_stack.kinesis_environment(),
                                "LLOG_SERVE_EMF_INTERVAL_S", "LLOG_SERVE_AUTH", ALLOWED_HOSTS_ENV}  # fmt: skip
    assert environment["LLOG_SERVE_EMF_INTERVAL_S"] == "60"  # each task reports its metrics every minute
    assert environment["LLOG_APPEND_PROTOCOL"] == "sequential"
    assert environment["LLOG_ROOT_PREFIX"] == "llog"
    assert container["PortMappings"] == [{"ContainerPort": CONTAINER_PORT, "Protocol": "tcp"}]
    assert container["StopTimeout"] == 60  # SIGTERM drains: in-flight requests answered, the batcher flushed
    assert container["LogConfiguration"]["LogDriver"] == "awslogs"
    assert "ecr" in json.dumps(container["Image"]).lower()  # the image asset, not a public registry's
    services = [
        s["Properties"]
        for s in resources(fleet_template, "AWS::ECS::Service").values()
        if s["Properties"].get("LoadBalancers")
    ]
    assert len(services) == 1
    service = services[0]
    assert service["DesiredCount"] == 2
    assert service["LaunchType"] == "FARGATE"
    assert service["DeploymentConfiguration"]["MinimumHealthyPercent"] == 50
    assert service["DeploymentConfiguration"]["DeploymentCircuitBreaker"] == {"Enable": True, "Rollback": True}
    network = service["NetworkConfiguration"]["AwsvpcConfiguration"]
    assert network["AssignPublicIp"] == "DISABLED"
    oxia_clients = fleet_stack.get_logical_id(fleet_stack.oxia.client_security_group.node.default_child)  # type: ignore[arg-type]
    assert oxia_clients in json.dumps(network["SecurityGroups"])  # reaches Oxia's public port


def test_the_serve_front_door_deploys_no_api_functions_and_its_tasks_take_the_cors_origins() -> None:
    stack = make_stack({**CONTEXT, "llog:stage": "fleetcors", "llog:corsOrigins": "https://console.example.com"})
    assert set(stack.functions.by_name) == set(names.FUNCTIONS) - set(names.API_FUNCTIONS)
    template = Template.from_stack(stack)
    handlers = {f["Properties"]["Handler"] for f in resources(template, "AWS::Lambda::Function").values()
                if "Handler" in f["Properties"]}  # fmt: skip
    assert not {h for h in handlers if h.split(".")[1] in names.API_FUNCTIONS}
    assert {f"functions.{n}.app.handler" for n in names.FUNCTIONS if n not in names.API_FUNCTIONS} <= handlers
    (container,) = serve_task(template)["ContainerDefinitions"]
    environment = {e["Name"]: e["Value"] for e in container["Environment"]}
    assert environment["LLOG_CORS_ORIGINS"] == "https://console.example.com"


def test_the_fleets_tasks_check_signatures_unless_told_not_to(fleet_template: Template) -> None:
    (container,) = serve_task(fleet_template)["ContainerDefinitions"]
    environment = {e["Name"]: e["Value"] for e in container["Environment"]}
    assert environment["LLOG_SERVE_AUTH"] == "sigv4"
    assert environment["LLOG_KEYS_KMS_KEY_ID"]  # the tasks open the keys the signatures are checked against
    assert LlogSettings.from_context({**CONTEXT, "llog:serveAuth": "none"}.get).serve_auth == "none"
    with pytest.raises(SettingsError, match="llog:serveAuth"):
        LlogSettings.from_context({**CONTEXT, "llog:frontDoor": "rest", "llog:serveAuth": "none"}.get)


def test_serve_settings() -> None:
    settings = LlogSettings.from_context(CONTEXT.get)
    assert (settings.serve_tasks, settings.serve_endpoint) == (2, "balancer")
    settings = LlogSettings.from_context({**CONTEXT, "llog:serveTasks": 4, "llog:serveEndpoint": "dns"}.get)
    assert (settings.serve_tasks, settings.serve_endpoint) == (4, "dns")


def test_internal_load_balancer_admits_only_the_client_security_group(
    fleet_stack: LlogStack, fleet_template: Template
) -> None:
    (balancer,) = resources(fleet_template, "AWS::ElasticLoadBalancingV2::LoadBalancer").values()
    assert balancer["Properties"]["Scheme"] == "internal"
    attributes = {a["Key"]: a["Value"] for a in balancer["Properties"]["LoadBalancerAttributes"]}
    assert attributes["routing.http.drop_invalid_header_fields.enabled"] == "true"
    # The balancer closes idle connections before llog serve does (else a request races the task's close into a
    # 502), and never during a long-poll.
    idle = int(attributes["idle_timeout.timeout_seconds"])
    assert Limits().max_wait_ms / 1000 < idle < IDLE_CONNECTION_TIMEOUT_S
    (listener,) = resources(fleet_template, "AWS::ElasticLoadBalancingV2::Listener").values()
    assert (listener["Properties"]["Port"], listener["Properties"]["Protocol"]) == (LISTENER_PORT, "HTTP")
    (target_group,) = resources(fleet_template, "AWS::ElasticLoadBalancingV2::TargetGroup").values()
    props = target_group["Properties"]
    assert (props["Port"], props["Protocol"], props["TargetType"]) == (CONTAINER_PORT, "HTTP", "ip")
    assert props["HealthCheckPath"] == "/health"
    attributes = {a["Key"]: a["Value"] for a in props["TargetGroupAttributes"]}
    assert attributes["deregistration_delay.timeout_seconds"] == "30"

    fleet = fleet_stack.api
    assert isinstance(fleet, ServeFleet)
    group_id = {
        name: fleet_stack.get_logical_id(group.node.default_child)  # type: ignore[arg-type]
        for name, group in (
            ("clients", fleet.client_security_group),
            ("balancer", fleet.balancer_security_group),
            ("tasks", fleet.task_security_group),
        )
    }
    ingress = [r["Properties"] for r in resources(fleet_template, "AWS::EC2::SecurityGroupIngress").values()]
    into = {name: [r for r in ingress if group_id[name] in json.dumps(r["GroupId"])] for name in ("balancer", "tasks")}

    def sources(rules: list[dict[str, Any]], source: str) -> list[tuple[int, bool]]:
        return [(r["FromPort"], group_id[source] in json.dumps(r["SourceSecurityGroupId"])) for r in rules]

    assert sources(into["balancer"], "clients") == [(LISTENER_PORT, True)]
    assert sources(into["tasks"], "balancer") == [(CONTAINER_PORT, True)]
    assert "0.0.0.0/0" not in json.dumps(
        [g for k, g in resources(fleet_template, "AWS::EC2::SecurityGroup").items() if k == group_id["balancer"]]
    )


def test_tasks_may_read_and_write_objects_under_the_root_prefix_only(fleet_template: Template) -> None:
    fleet_template.has_resource_properties("AWS::IAM::Policy", {"PolicyDocument": {"Statement": Match.array_with([
        Match.object_like({"Sid": "ListRootPrefix", "Action": "s3:ListBucket",
                           "Condition": {"StringLike": {"s3:prefix": ["llog/*"]}}}),
    ])}})  # fmt: skip
    statements = [
        s
        for p in resources(fleet_template, "AWS::IAM::Policy").values()
        if "ServeFleet" in json.dumps(p["Properties"]["Roles"])
        for s in p["Properties"]["PolicyDocument"]["Statement"]
        if s.get("Sid") == "GetPutObjects"
    ]
    assert len(statements) == 1
    (statement,) = statements
    assert statement["Action"] == ["s3:GetObject", "s3:PutObject"]
    assert json.dumps(statement["Resource"]).endswith('"/llog/*"]]}')
    policies = resources(fleet_template, "AWS::IAM::Policy").values()
    actions = json.dumps([p["Properties"]["PolicyDocument"] for p in policies
                          if "ServeFleet" in json.dumps(p["Properties"]["Roles"])])  # fmt: skip
    assert "s3:DeleteObject" not in actions
    assert "s3:*" not in actions


def test_no_api_gateway_and_the_outputs_name_the_load_balancer(fleet_template: Template) -> None:
    assert resources(fleet_template, "AWS::ApiGateway::RestApi") == {}
    assert resources(fleet_template, "AWS::ApiGatewayV2::Api") == {}
    outputs = fleet_template.to_json()["Outputs"]
    assert "DNSName" in json.dumps(outputs["ApiUrl"]["Value"])
    assert json.dumps(outputs["ApiUrl"]["Value"]).startswith('{"Fn::Join": ["", ["http://"')
    assert "ServeClientSecurityGroupId" in outputs
    (api_alarm,) = [a["Properties"] for a in resources(fleet_template, "AWS::CloudWatch::Alarm").values()
                    if "the API answered" in a["Properties"]["AlarmDescription"]]  # fmt: skip
    alarmed = {m["MetricStat"]["Metric"]["MetricName"] for m in api_alarm["Metrics"] if "MetricStat" in m}
    assert alarmed == {"HTTPCode_Target_5XX_Count", "HTTPCode_ELB_5XX_Count"}


@pytest.mark.parametrize("which", ["balancer", "dns"])
def test_an_alarm_fires_when_fewer_tasks_run_than_asked(which: str, fleet_stack: LlogStack, dns_stack: LlogStack
                                                        ) -> None:  # fmt: skip
    template = Template.from_stack(fleet_stack if which == "balancer" else dns_stack)
    alarms = [a["Properties"] for a in resources(template, "AWS::CloudWatch::Alarm").values()
              if "serve fleet" in a["Properties"]["AlarmDescription"]]  # fmt: skip
    # Behind the balancer one service of 2 tasks; by DNS one service of 1 task in each of the 2 zones.
    assert sorted(a["Threshold"] for a in alarms) == ([2] if which == "balancer" else [1, 1])
    for alarm in alarms:
        assert alarm["MetricName"] == "RunningTaskCount"
        assert (alarm["Namespace"], alarm["Statistic"]) == ("ECS/ContainerInsights", "Minimum")
        assert (alarm["ComparisonOperator"], alarm["TreatMissingData"]) == ("LessThanThreshold", "breaching")


def test_dns_endpoint_registers_each_zones_healthy_tasks_in_the_oxia_namespace(dns_stack: LlogStack) -> None:
    template = Template.from_stack(dns_stack)
    assert resources(template, "AWS::ElasticLoadBalancingV2::LoadBalancer") == {}
    discovery = {s["Properties"]["Name"]: s["Properties"]
                 for s in resources(template, "AWS::ServiceDiscovery::Service").values()}  # fmt: skip
    zones = [f"{DNS_NAME}-0", f"{DNS_NAME}-1"]  # the dev shape's two availability zones
    assert sorted(n for n in discovery if n.startswith(DNS_NAME)) == zones
    namespace = dns_stack.get_logical_id(dns_stack.oxia.dns_namespace.node.default_child)  # type: ignore[arg-type]
    for name in zones:
        assert discovery[name]["DnsConfig"]["DnsRecords"] == [{"TTL": 10, "Type": "A"}]
        assert discovery[name]["HealthCheckCustomConfig"] == {"FailureThreshold": 1}  # ECS reports task health
        assert namespace in json.dumps(discovery[name]["NamespaceId"])
    # One ECS service per zone, each in that zone's subnet only, one task each (2 tasks over 2 zones).
    services = [s["Properties"] for s in resources(template, "AWS::ECS::Service").values()
                if s["Properties"].get("ServiceRegistries") and "ServeFleet" in json.dumps(s)]  # fmt: skip
    assert len(services) == 2
    subnets = [json.dumps(s["NetworkConfiguration"]["AwsvpcConfiguration"]["Subnets"]) for s in services]
    assert all(len(s["NetworkConfiguration"]["AwsvpcConfiguration"]["Subnets"]) == 1 for s in services)
    assert subnets[0] != subnets[1]
    assert [s["DesiredCount"] for s in services] == [1, 1]
    outputs = template.to_json()["Outputs"]
    for i in (0, 1):
        assert f"http://{DNS_NAME}-{i}." in json.dumps(outputs[f"ServeZone{i}Url"]["Value"])
        assert "Fn::GetAZs" in json.dumps(outputs[f"ServeZone{i}"]["Value"])
    # The Python client's LLOG_URL: "<zone 0>=<url 0>,<zone 1>=<url 1>" (llog_client/zones.py).
    pairs = outputs["ServeZoneUrls"]["Value"]["Fn::Join"]
    assert pairs[0] == ","
    assert [p["Fn::Join"][0] for p in pairs[1]] == ["=", "="]
    for i, pair in enumerate(pairs[1]):
        zone, url = pair["Fn::Join"][1]
        assert zone == outputs[f"ServeZone{i}"]["Value"]
        assert url == outputs[f"ServeZone{i}Url"]["Value"]
    (container,) = serve_task(template)["ContainerDefinitions"]
    assert "/health" in " ".join(container["HealthCheck"]["Command"])  # Cloud Map lists only healthy tasks
    fleet = dns_stack.api
    assert isinstance(fleet, ServeFleet)
    metrics = fleet.metrics()  # what the tasks report themselves (server/emf.py)
    assert isinstance(metrics.count, cw.Metric)
    assert (metrics.count.namespace, metrics.count.metric_name, metrics.count.dimensions) == (
        "llog", "Requests", {"service": "serve"}
    )  # fmt: skip
    tasks = dns_stack.get_logical_id(fleet.task_security_group.node.default_child)  # type: ignore[arg-type]
    clients = dns_stack.get_logical_id(fleet.client_security_group.node.default_child)  # type: ignore[arg-type]
    ingress = [r["Properties"] for r in resources(template, "AWS::EC2::SecurityGroupIngress").values()
               if tasks in json.dumps(r["Properties"]["GroupId"])]  # fmt: skip
    assert [(r["FromPort"], clients in json.dumps(r["SourceSecurityGroupId"])) for r in ingress] == [
        (CONTAINER_PORT, True)
    ]
    url = json.dumps(template.to_json()["Outputs"]["ApiUrl"]["Value"])
    assert f"http://{DNS_NAME}-0." in url
    assert f":{CONTAINER_PORT}/" in url
    # No load balancer: the API 5xx alarm counts the 5xx answers the tasks report.
    (api_alarm,) = [a["Properties"] for a in resources(template, "AWS::CloudWatch::Alarm").values()
                    if "the API answered" in a["Properties"]["AlarmDescription"]]  # fmt: skip
    assert (api_alarm["Namespace"], api_alarm["MetricName"], api_alarm["Period"]) == ("llog", "ServerErrors", 300)
    assert api_alarm["Dimensions"] == [{"Name": "service", "Value": "serve"}]
    widgets = json.dumps(template.to_json())
    assert '\\"llog\\",\\"Latency\\",\\"service\\",\\"serve\\"' in widgets  # the dashboard's latency row


@pytest.mark.parametrize("which", ["balancer", "dns"])
def test_no_unsuppressed_findings(which: str, fleet_stack: LlogStack, dns_stack: LlogStack) -> None:
    annotations = Annotations.from_stack(fleet_stack if which == "balancer" else dns_stack)
    assert annotations.find_error("*", NAG) == []
    assert annotations.find_warning("*", NAG) == []


# --- the image ----------------------------------------------------------------------------------


def staged_image_context(outdir: Path) -> tuple[Path, dict[str, Any]]:
    """``cdk synth`` of the fleet stage into ``outdir``: the image's staged build context and its asset entry."""
    app = make_app(CONTEXT, outdir=str(outdir))
    settings = LlogSettings.from_context(app.node.try_get_context)
    LlogStack(app, settings.stack_name, settings=settings)
    app.synth()
    manifest = json.loads((outdir / f"{settings.stack_name}.assets.json").read_text())
    (image,) = manifest["dockerImages"].values()
    return outdir / image["source"]["directory"], image["source"]


def context_files(context: Path) -> set[str]:
    return {p.relative_to(context).as_posix() for p in context.rglob("*") if p.is_file()}


@pytest.mark.bundling
def test_image_context_holds_what_the_dockerfile_copies_and_nothing_else(tmp_path: Path) -> None:
    context, source = staged_image_context(tmp_path / "cdk.out")
    assert source["dockerFile"] == DOCKERFILE
    assert source["platform"] == "linux/arm64"
    files = context_files(context)
    assert {f.split("/")[0] for f in files} == {"infra", "llog_layer", "client", "functions", "server"}
    assert {f for f in files if f.startswith("infra/")} == {
        DOCKERFILE,
        "infra/layer-requirements.txt",
        "infra/serve-requirements.txt",
    }
    assert not [f for f in files if "__pycache__" in f or f.endswith(".pyc")]
    for module in ("server/serve.py", "functions/produce/app.py", "llog_layer/llog/service/produce.py",
                   "client/llog_client/partitioner.py"):  # fmt: skip
        assert module in files
    dockerfile = (context / DOCKERFILE).read_text()
    for line in dockerfile.splitlines():
        if line.startswith("COPY "):
            *sources, _ = line.split()[1:]
            for copied in sources:
                assert (context / copied).exists(), f"{copied} is not in the build context"


@pytest.mark.bundling
def test_serve_runs_from_the_image_context_with_the_image_pins_alone(
    tmp_path: Path, oxia_server: Any, s3_config: Any
) -> None:
    """The container's command, its PYTHONPATH and its packages, on CPython 3.13 (-I -S: nothing else)."""
    python = find_python313()
    if python is None:
        pytest.skip("no CPython 3.13 here (set LLOG_PYTHON313 to one)")
    context, _ = staged_image_context(tmp_path / "cdk.out")
    dockerfile = (context / DOCKERFILE).read_text()
    (pythonpath,) = re.findall(r"PYTHONPATH=(\S+)", dockerfile)
    (command,) = re.findall(r"^CMD (\[.*\])$", dockerfile, re.MULTILINE)
    argv = json.loads(command)
    assert argv[:3] == ["python", "-m", "server.serve"]
    site = PipLayerBundler(
        requirements=context / "infra" / "serve-requirements.txt", packages=(), architecture="x86_64"
    ).bundle(tmp_path / "site")
    paths = [str(context / Path(p).relative_to("/opt/llog")) for p in pythonpath.split(":")] + [str(site)]
    port = free_port()
    args = [a if a != str(CONTAINER_PORT) else str(port) for a in argv[3:]]
    args = [a if a != "0.0.0.0" else "127.0.0.1" for a in args]
    code = (
        "import runpy, sys\n"
        f"sys.path[:0] = {paths!r}\n"
        "import boto3, server.serve, grpc, llog, llog_client\n"
        "for m in (boto3, server.serve, grpc, llog, llog_client):\n"
        "    assert m.__file__.startswith(tuple(sys.path[:4])), m.__file__\n"
        f"sys.argv = ['serve', *{args!r}]\n"
        "runpy.run_module('server.serve', run_name='__main__')\n"
    )
    env = {**serve_env(s3_config, "serveimage"), "LLOG_OXIA_SERVICE_ADDRESS": oxia_server.address}
    process = subprocess.Popen([python, "-I", "-S", "-c", code], env=env, cwd=tmp_path,
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                with urllib.request.urlopen(url + "/health", timeout=2) as answer:
                    assert answer.status == 200
                    break
            except OSError:
                assert process.poll() is None, process.communicate()[0]
                assert time.monotonic() < deadline, "llog serve did not answer /health within 60 s"
                time.sleep(0.2)

        def post(path: str, doc: dict[str, Any]) -> dict[str, Any]:
            request = urllib.request.Request(url + path, data=json.dumps(doc).encode(), method="POST",
                                             headers={"Content-Type": "application/json"})  # fmt: skip
            with urllib.request.urlopen(request, timeout=30) as answer:
                result: dict[str, Any] = json.loads(answer.read())
                return result

        produced = post("/produce", {"topic_partitions": [{"topic": "image", "partition": 0, "records": ["one"]}]})
        (result,) = produced["results"]
        assert result["ok"] is True, result
        offset = result["start_offset"]
        consumed = post("/consume", {"topic_partitions": [{"topic": "image", "partition": 0, "fetch_offset": offset}]})
        assert [(r["offset"], r["value"]) for r in consumed["results"][0]["records"]] == [(offset, "one")]
    finally:
        process.send_signal(signal.SIGTERM)
        output, _ = process.communicate(timeout=30)
    assert process.returncode == 0, output
    assert "llog serve: shutting down" in output


def test_tasks_answer_to_the_names_their_clients_reach_them_by(fleet_template: Template, dns_stack: LlogStack) -> None:
    """llog serve refuses any other Host (421, against DNS rebinding): the load balancer's name, or each zone's."""
    (container,) = serve_task(fleet_template)["ContainerDefinitions"]
    hosts = {e["Name"]: e["Value"] for e in container["Environment"]}[ALLOWED_HOSTS_ENV]
    (balancer,) = resources(fleet_template, "AWS::ElasticLoadBalancingV2::LoadBalancer")
    assert hosts == {"Fn::GetAtt": [balancer, "DNSName"]}
    (container,) = serve_task(Template.from_stack(dns_stack))["ContainerDefinitions"]
    hosts = json.dumps({e["Name"]: e["Value"] for e in container["Environment"]}[ALLOWED_HOSTS_ENV])
    assert f"{DNS_NAME}-0." in hosts
    assert f",{DNS_NAME}-1." in hosts
