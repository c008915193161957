"""One URL per availability zone: a client talks to the llog serve tasks of its own zone.

The serve fleet reached by DNS (docs/DEPLOY.md) has a name per availability zone, and bytes that
cross zones are billed both ways (docs/COST.md). So ``LLOG_URL`` (or a client's ``url``) may map
zones to URLs, ``<zone>=<url>,<zone>=<url>``: the stack's ``ServeZoneUrls`` output. The client
then uses its own zone's URL. Its zone is ``$LLOG_ZONE``; else the ECS task metadata
(``$ECS_CONTAINER_METADATA_URI_V4/task``, field ``AvailabilityZone``: Fargate and ECS on EC2);
else the EC2 instance metadata (IMDSv2, ``placement/availability-zone``; its endpoint is
``$AWS_EC2_METADATA_SERVICE_ENDPOINT`` as for the AWS SDKs, and ``AWS_EC2_METADATA_DISABLED=true``
skips it; so does a Lambda function, which has none). A process asks once. Where the zone
cannot be learnt (a Lambda function, a laptop) or has no URL, the client uses the first zone's
URL and says so in a warning: it works, at the price of transfer between zones. A URL in the
map cannot contain a comma.
"""

from __future__ import annotations

import functools
import json
import logging
import os
from collections.abc import Mapping

import urllib3

from llog_client.errors import LlogClientError

log = logging.getLogger("llog_client")

ZONE_VARIABLE = "LLOG_ZONE"
ECS_METADATA_VARIABLE = "ECS_CONTAINER_METADATA_URI_V4"
IMDS_ENDPOINT_VARIABLE = "AWS_EC2_METADATA_SERVICE_ENDPOINT"
IMDS_DISABLED_VARIABLE = "AWS_EC2_METADATA_DISABLED"
LAMBDA_VARIABLE = "AWS_LAMBDA_FUNCTION_NAME"
IMDS_ENDPOINT = "http://169.254.169.254"
IMDS_TOKEN_TTL_S = 60
# Instance metadata answers in microseconds where it exists; elsewhere nothing listens and the
# connection times out, which must not hold up a client's start for long.
METADATA_TIMEOUT_S = 1.0


def parse_zone_urls(text: str) -> dict[str, str] | None:
    """The zone map of ``<zone>=<url>,...``, in its order; None for a single URL."""
    if "=" not in text.split("://", 1)[0]:
        return None
    urls: dict[str, str] = {}
    for entry in (e.strip() for e in text.split(",")):
        zone, sep, url = entry.partition("=")
        zone, url = zone.strip(), url.strip()
        if not sep or not zone or "://" not in url:
            raise LlogClientError(f"not <zone>=<url>: {entry!r} (in the zone map {text!r})", error_type="InvalidUrl")
        if zone in urls:
            raise LlogClientError(f"zone {zone!r} appears twice in the zone map {text!r}", error_type="InvalidUrl")
        urls[zone] = url
    return urls


def resolve_url(url: str, env: Mapping[str, str] | None = None) -> str:
    """``url`` itself, or from a zone map the URL of this machine's zone (else the first zone's)."""
    urls = parse_zone_urls(url)
    if urls is None:
        return url
    if len(urls) == 1:
        return next(iter(urls.values()))
    # This process's own environment: its metadata is asked once (LLOG_ZONE is read each time).
    zone = (os.environ.get(ZONE_VARIABLE) or _this_process_metadata_zone()) if env is None else current_zone(env)
    if zone in urls:
        return urls[zone]
    first_zone, first_url = next(iter(urls.items()))
    log.warning(
        "llog: %s; using %s's URL %s (requests cross zones)",
        f"zone {zone} has no URL in the zone map" if zone else "this machine's availability zone is unknown",
        first_zone,
        first_url,
    )
    return first_url


def current_zone(env: Mapping[str, str]) -> str | None:
    """This machine's availability zone, or None where no metadata tells it."""
    return env.get(ZONE_VARIABLE) or _metadata_zone(env)


@functools.cache
def _this_process_metadata_zone() -> str | None:
    """The metadata's answer for this process, asked once: every producer and consumer shares it."""
    return _metadata_zone(os.environ)


def _metadata_zone(env: Mapping[str, str]) -> str | None:
    http = urllib3.PoolManager(timeout=urllib3.Timeout(total=METADATA_TIMEOUT_S), retries=False)
    try:
        task_metadata = env.get(ECS_METADATA_VARIABLE)
        zone = _ecs_task_zone(http, task_metadata) if task_metadata else None
        # A Lambda function has no instance metadata: asking would only wait for the timeout.
        instance_metadata = env.get(IMDS_DISABLED_VARIABLE, "").lower() != "true" and not env.get(LAMBDA_VARIABLE)
        if zone is None and instance_metadata:
            zone = _instance_zone(http, env.get(IMDS_ENDPOINT_VARIABLE) or IMDS_ENDPOINT)
        return zone
    finally:
        http.clear()


def _ecs_task_zone(http: urllib3.PoolManager, base: str) -> str | None:
    try:
        response = http.request("GET", base.rstrip("/") + "/task")
        zone = json.loads(response.data).get("AvailabilityZone") if response.status == 200 else None
    except (urllib3.exceptions.HTTPError, ValueError, AttributeError):
        return None
    return zone if isinstance(zone, str) and zone else None


def _instance_zone(http: urllib3.PoolManager, endpoint: str) -> str | None:
    base = endpoint.rstrip("/")
    try:
        token = http.request("PUT", base + "/latest/api/token",
                             headers={"X-aws-ec2-metadata-token-ttl-seconds": str(IMDS_TOKEN_TTL_S)})  # fmt: skip
        if token.status != 200:
            return None
        session = token.data.decode("ascii", "replace")
        response = http.request("GET", base + "/latest/meta-data/placement/availability-zone",
                                headers={"X-aws-ec2-metadata-token": session})  # fmt: skip
    except urllib3.exceptions.HTTPError:
        return None
    zone = response.data.decode("utf-8", "replace").strip() if response.status == 200 else ""
    return zone or None
