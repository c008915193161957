"""The VPC: private subnets, one NAT gateway, the S3 gateway endpoint on the private routes, flow logs."""

from __future__ import annotations

from aws_cdk.assertions import Template

from tests.infra.helpers import resources


def test_one_vpc_with_two_public_and_two_private_subnets(dev_template: Template) -> None:
    dev_template.resource_count_is("AWS::EC2::VPC", 1)
    subnets = resources(dev_template, "AWS::EC2::Subnet")
    private = [s for s in subnets.values() if s["Properties"]["MapPublicIpOnLaunch"] is False]
    public = [s for s in subnets.values() if s["Properties"]["MapPublicIpOnLaunch"] is True]
    assert (len(private), len(public)) == (2, 2)
    azs = {str(s["Properties"]["AvailabilityZone"]) for s in private}
    assert len(azs) == 2


def test_private_subnets_route_to_one_nat_gateway(dev_template: Template) -> None:
    dev_template.resource_count_is("AWS::EC2::NatGateway", 1)
    private_tables = {k for k in resources(dev_template, "AWS::EC2::RouteTable") if "private" in k}
    nat_routes = [
        r["Properties"]
        for r in resources(dev_template, "AWS::EC2::Route").values()
        if "NatGatewayId" in r["Properties"]
    ]
    assert {r["RouteTableId"]["Ref"] for r in nat_routes} == private_tables


def test_s3_gateway_endpoint_serves_the_private_route_tables(dev_template: Template) -> None:
    (endpoint,) = resources(dev_template, "AWS::EC2::VPCEndpoint").values()
    props = endpoint["Properties"]
    assert props["VpcEndpointType"] == "Gateway"
    assert props["ServiceName"] == {"Fn::Join": ["", ["com.amazonaws.", {"Ref": "AWS::Region"}, ".s3"]]}
    private_tables = {k for k in resources(dev_template, "AWS::EC2::RouteTable") if "private" in k}
    assert len(private_tables) == 2
    assert private_tables <= {t["Ref"] for t in props["RouteTableIds"]}


def test_flow_logs_capture_all_traffic_into_a_retained_log_group(dev_template: Template) -> None:
    (flow_log,) = resources(dev_template, "AWS::EC2::FlowLog").values()
    props = flow_log["Properties"]
    assert props["TrafficType"] == "ALL"
    assert props["ResourceType"] == "VPC"
    assert props["LogDestinationType"] == "cloud-watch-logs"
    group = resources(dev_template, "AWS::Logs::LogGroup")[props["LogGroupName"]["Ref"]]
    assert group["Properties"]["RetentionInDays"] == 14


def test_default_security_group_is_restricted(dev_template: Template) -> None:
    dev_template.resource_count_is("Custom::VpcRestrictDefaultSG", 1)


def test_production_uses_its_longer_log_retention(prod_template: Template) -> None:
    for group in resources(prod_template, "AWS::Logs::LogGroup").values():
        assert group["Properties"]["RetentionInDays"] == 90
        assert group["DeletionPolicy"] == "Retain"
