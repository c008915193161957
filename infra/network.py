"""The VPC: private subnets for the functions, Oxia and Glue, and an S3 gateway endpoint.

* Public subnets hold only the NAT gateway(s); nothing of llog runs there.
* Private subnets with egress (``PRIVATE_WITH_EGRESS``) run the Oxia tasks, the functions and
  Glue. Egress through NAT is needed to pull the ``oxia/oxia`` image from Docker Hub and to
  reach AWS APIs that have no gateway endpoint (SQS, STS, CloudWatch, X-Ray, ECS, …).
* The S3 **gateway** endpoint (free) is added to the private route tables, so record bytes
  between the functions (or Glue) and S3 never cross a NAT gateway (no NAT data charge).
* ``llog:natGateways`` (default 1) keeps cost low; one NAT gateway makes egress depend on one
  AZ, which affects image pulls and AWS API calls, not S3 traffic. Production can set one per AZ.
* Flow logs (all traffic) go to CloudWatch Logs with the stage's log retention.
"""

from __future__ import annotations

from typing import cast

from aws_cdk import CfnResource, RemovalPolicy
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_logs as logs
from constructs import Construct

from infra.lint import REDUNDANT_ROLE_DEPENDENCY, ignore_checks_of_provider, ignore_literal_zone


class Network(Construct):
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        max_azs: int,
        nat_gateways: int,
        log_retention: logs.RetentionDays,
        removal_policy: RemovalPolicy,
    ) -> None:
        super().__init__(scope, construct_id)
        self.flow_log_group = logs.LogGroup(self, "FlowLogs", retention=log_retention, removal_policy=removal_policy)
        self.vpc = ec2.Vpc(
            self,
            "Vpc",
            ip_addresses=ec2.IpAddresses.cidr("10.40.0.0/16"),
            max_azs=max_azs,
            nat_gateways=nat_gateways,
            subnet_configuration=[
                ec2.SubnetConfiguration(name="public", subnet_type=ec2.SubnetType.PUBLIC, cidr_mask=24),
                ec2.SubnetConfiguration(name="private", subnet_type=ec2.SubnetType.PRIVATE_WITH_EGRESS, cidr_mask=20),
            ],
            gateway_endpoints={
                "S3": ec2.GatewayVpcEndpointOptions(service=ec2.GatewayVpcEndpointAwsService.S3),
            },
            flow_logs={
                "All": ec2.FlowLogOptions(
                    destination=ec2.FlowLogDestination.to_cloud_watch_logs(self.flow_log_group),
                    traffic_type=ec2.FlowLogTrafficType.ALL,
                )
            },
            restrict_default_security_group=True,
        )
        # The custom resource that empties the default security group runs on a function of CDK's.
        ignore_checks_of_provider(self, "Custom::VpcRestrictDefaultSGCustomResourceProvider", REDUNDANT_ROLE_DEPENDENCY)
        for subnet in [*self.vpc.public_subnets, *self.vpc.private_subnets]:
            ignore_literal_zone(cast(CfnResource, subnet.node.default_child), subnet.availability_zone,
                                "A subnet is in one AZ.")  # fmt: skip

    @property
    def private_subnets(self) -> ec2.SubnetSelection:
        return ec2.SubnetSelection(subnet_type=ec2.SubnetType.PRIVATE_WITH_EGRESS)
