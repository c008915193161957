"""``KmsSealer``: secrets sealed with AWS KMS (``llog.store.sealing``), the key named by ``LLOG_KEYS_KMS_KEY_ID``.

KMS Encrypt takes up to 4 KB of plaintext, far more than a secret; its ciphertext names the key, and Decrypt
is told the key as well, so a ciphertext of another key is refused rather than opened. A botocore client,
created (and botocore imported) on the first call: see ``llog.store.s3`` for why not boto3. It finds its region
and credentials the standard way (``AWS_REGION``, the Lambda's or task's role).

KMS's answers become llog's errors in one place (``_kms_error``): a ciphertext that does not open is
``SealingFailed``, a key that cannot be used (missing, disabled, not allowed) ``ConfigurationError``, and
throttling or a KMS out of reach ``SealerUnavailable`` (retriable).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from llog.errors import ConfigurationError, LlogError, SealerUnavailable, SealingFailed

_NOT_OPENED = frozenset({"InvalidCiphertextException", "IncorrectKeyException"})
_KEY_UNUSABLE = frozenset(
    {
        "NotFoundException",
        "DisabledException",
        "KMSInvalidStateException",
        "InvalidKeyUsageException",
        "AccessDeniedException",
        "AccessDeniedExceptionType",
        "InvalidGrantTokenException",
        "UnrecognizedClientException",
        "ValidationException",
    }
)


def _client_config() -> Any:
    import botocore.config

    return botocore.config.Config(connect_timeout=5, read_timeout=10, retries={"mode": "standard", "max_attempts": 3})


def _kms_error(exc: Exception, key_id: str, what: str) -> LlogError:
    import botocore.exceptions

    if isinstance(exc, botocore.exceptions.ClientError):
        code = exc.response.get("Error", {}).get("Code", "")
        message = exc.response.get("Error", {}).get("Message", "")
        if code in _NOT_OPENED:
            return SealingFailed(
                f"KMS cannot open a sealed secret with key {key_id} ({code}): it was altered, or sealed under "
                "another key (LLOG_KEYS_KMS_KEY_ID changed?)"
            )
        if code in _KEY_UNUSABLE:
            return ConfigurationError(f"KMS key {key_id} (LLOG_KEYS_KMS_KEY_ID) cannot {what}: {code}: {message}")
        return SealerUnavailable(f"KMS {what} with key {key_id} failed: {code}: {message}")
    if isinstance(exc, botocore.exceptions.NoRegionError | botocore.exceptions.NoCredentialsError):
        return ConfigurationError(f"KMS key {key_id} (LLOG_KEYS_KMS_KEY_ID): {exc}")
    return SealerUnavailable(f"KMS {what} with key {key_id} failed: {type(exc).__name__}: {exc}")


class KmsSealer:
    """Seals with KMS Encrypt under ``key_id`` (an id, ARN or alias) and opens with Decrypt."""

    def __init__(self, key_id: str, client: Any = None) -> None:
        self.key_id = key_id
        self._client = client
        self._lock = threading.Lock()

    def _kms(self) -> Any:
        with self._lock:
            if self._client is None:
                import botocore.session

                self._client = botocore.session.Session().create_client("kms", config=_client_config())
            return self._client

    def _call(self, what: str, call: Callable[[Any], dict[str, Any]]) -> dict[str, Any]:
        import botocore.exceptions

        try:
            return call(self._kms())
        except (botocore.exceptions.BotoCoreError, botocore.exceptions.ClientError) as exc:
            raise _kms_error(exc, self.key_id, what) from exc

    def seal(self, plain: bytes) -> bytes:
        answer = self._call("encrypt", lambda kms: kms.encrypt(KeyId=self.key_id, Plaintext=plain))
        return bytes(answer["CiphertextBlob"])

    def open(self, sealed: bytes) -> bytes:
        answer = self._call("decrypt", lambda kms: kms.decrypt(KeyId=self.key_id, CiphertextBlob=sealed))
        return bytes(answer["Plaintext"])
