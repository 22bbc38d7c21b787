"""Who may read the operational endpoints (``/readyz``, ``/metrics``): a network or a token.

A request that came through a proxy (it carries ``X-Forwarded-For``) never passes the network
rule: behind a TLS proxy every client would otherwise look like the proxy's private address.
"""

from __future__ import annotations

import hmac
import ipaddress
from collections.abc import Sequence
from functools import lru_cache

import redis
from django.conf import settings
from django.http import HttpRequest

from breakers.fleet.store import redis_client

__all__ = ("bearer_token_matches", "direct_from_networks", "ops_redis")


@lru_cache(maxsize=16)
def _networks(
    cidrs: tuple[str, ...],
) -> tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, ...]:
    return tuple(ipaddress.ip_network(cidr, strict=False) for cidr in cidrs)


def direct_from_networks(request: HttpRequest, cidrs: Sequence[str]) -> bool:
    """The request came straight from an address inside one of ``cidrs`` (not via a proxy)."""
    if "HTTP_X_FORWARDED_FOR" in request.META:
        return False
    try:
        address = ipaddress.ip_address(request.META.get("REMOTE_ADDR", ""))
    except ValueError:
        return False
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    return any(address in net for net in _networks(tuple(cidrs)) if net.version == address.version)


def bearer_token_matches(request: HttpRequest, expected: str) -> bool:
    if not expected:
        return False
    header = request.META.get("HTTP_AUTHORIZATION", "")
    scheme, _, token = header.partition(" ")
    return scheme.lower() == "bearer" and hmac.compare_digest(token.strip(), expected)


@lru_cache(maxsize=4)
def _client(url: str, timeout: float) -> redis.Redis:
    return redis_client(url, timeout=timeout)


def ops_redis() -> redis.Redis:
    """The process's Redis client for health and metrics (every call bounded by a timeout)."""
    return _client(settings.REDIS_URL, settings.REDIS_SOCKET_TIMEOUT)
