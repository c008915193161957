"""The KMS key that seals the Kinesis API's access keys (``llog keys``; docs/DEPLOY.md, "Kinesis endpoint").

An access key's secret is stored in Oxia sealed with KMS Encrypt under this key (``llog.store.kms``), and so is
the one secret that signs shard iterators; whatever checks a signature or signs an iterator opens them with
Decrypt. So ``Encrypt`` and ``Decrypt`` on this key alone, and nothing wider, go to what answers the Kinesis API
(the kinesis function, or the serve fleet's tasks) through ``grant_sealing``; an operator who runs ``llog keys
create`` needs ``kms:Encrypt`` on it too. Rotation is on; the key is retained in production stages, as the
data is: without it no issued key verifies.
"""

from __future__ import annotations

from aws_cdk import RemovalPolicy
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from constructs import Construct

KEYS_KMS_KEY_ENV = "LLOG_KEYS_KMS_KEY_ID"  # read by llog.store.sealing.sealer_from_env
SEALING_ACTIONS = ("kms:Encrypt", "kms:Decrypt")


class AccessKeySealing(Construct):
    def __init__(self, scope: Construct, construct_id: str, *, stage: str, removal_policy: RemovalPolicy) -> None:
        super().__init__(scope, construct_id)
        self.key = kms.Key(
            self,
            "Key",
            description=f"llog {stage}: seals the Kinesis API's access keys and its shard-iterator secret in Oxia",
            enable_key_rotation=True,
            removal_policy=removal_policy,
        )

    @property
    def environment(self) -> dict[str, str]:
        """What makes llog seal with this key."""
        return {KEYS_KMS_KEY_ENV: self.key.key_arn}

    def grant_sealing(self, grantee: iam.IGrantable) -> None:
        """Seal and open secrets with the key: exactly Encrypt and Decrypt."""
        self.key.grant(grantee, *SEALING_ACTIONS)
