"""How requests authenticate: none (``make dev``), an API key, or AWS SigV4 (a deployment with IAM auth, or an
``llog serve`` fleet that checks signatures made with the keys llog issues: ``SigV4Auth.with_key``).

An ``Auth`` returns the headers to add to one request. SigV4 needs botocore (``pip install
'llog-client[sigv4]'``), imported only when a :class:`SigV4Auth` is made; credentials come from
botocore's usual chain (environment, profile, instance or task role) and are re-read per request so
that refreshed temporary credentials are used.
"""

from __future__ import annotations

from typing import Any, Protocol


class Auth(Protocol):
    def headers(self, method: str, url: str, headers: dict[str, str], body: bytes) -> dict[str, str]:
        """The headers that authenticate this request (added to ``headers``)."""
        ...


class ApiKeyAuth:
    """API Gateway's API key, sent as ``x-api-key``."""

    def __init__(self, api_key: str) -> None:
        if not api_key:
            raise ValueError("the API key is empty")
        self.api_key = api_key

    def headers(self, method: str, url: str, headers: dict[str, str], body: bytes) -> dict[str, str]:
        return {"x-api-key": self.api_key}


class SigV4Auth:
    """AWS Signature Version 4 over the whole request (``execute-api`` for API Gateway)."""

    def __init__(self, region: str, service: str = "execute-api", *, credentials: Any = None) -> None:
        try:
            from botocore.auth import SigV4Auth as BotocoreSigV4Auth
            from botocore.awsrequest import AWSRequest
            from botocore.session import get_session
        except ImportError as exc:  # pragma: no cover - depends on the installation
            raise ImportError("SigV4 signing needs botocore: pip install 'llog-client[sigv4]'") from exc
        self.region = region
        self.service = service
        self._signer = BotocoreSigV4Auth
        self._request = AWSRequest
        found = credentials if credentials is not None else get_session().get_credentials()
        if found is None:
            raise ValueError("no AWS credentials found (environment, profile or role) for SigV4 signing")
        self._credentials = found

    @classmethod
    def with_key(cls, access_key_id: str, secret_access_key: str, *, region: str = "us-east-1") -> SigV4Auth:
        """Signing with a key llog issued (``llog keys create``), for an ``llog serve`` whose ``LLOG_SERVE_AUTH``
        is ``sigv4`` (service ``llog``; any region)."""
        from botocore.credentials import Credentials

        return cls(region, "llog", credentials=Credentials(access_key_id, secret_access_key))

    def headers(self, method: str, url: str, headers: dict[str, str], body: bytes) -> dict[str, str]:
        credentials = self._credentials.get_frozen_credentials()
        request = self._request(method=method, url=url, data=body, headers=dict(headers))
        self._signer(credentials, self.service, self.region).add_auth(request)
        return {name: value for name, value in request.headers.items() if name not in headers}
