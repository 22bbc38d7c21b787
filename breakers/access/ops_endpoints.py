"""Who may read the operational endpoints (``/readyz``, ``/metrics``): a network or a token;
and who a request came from, the same rule for every route that asks (login throttling too).

The client is the peer, or behind a proxy in TRUSTED_PROXIES the address its one configured
header (CLIENT_ADDRESS_HEADER) names. A forwarding header from any other peer, or another
forwarding header than the configured one, makes the client unknown: no network rule passes.
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

__all__ = (
    "FORWARDING_HEADERS",
    "bearer_token_matches",
    "client_address",
    "client_in_networks",
    "forwarded_client",
    "ops_redis",
)

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
Network = ipaddress.IPv4Network | ipaddress.IPv6Network
# The headers a proxy names the client with (lower-case) and their WSGI keys.
FORWARDING_HEADERS = {
    "x-forwarded-for": "HTTP_X_FORWARDED_FOR",
    "forwarded": "HTTP_FORWARDED",
    "x-real-ip": "HTTP_X_REAL_IP",
}


@lru_cache(maxsize=16)
def _networks(cidrs: tuple[str, ...]) -> tuple[Network, ...]:
    return tuple(ipaddress.ip_network(cidr, strict=False) for cidr in cidrs)


def _in(address: IPAddress, cidrs: Sequence[str]) -> bool:
    return any(address in net for net in _networks(tuple(cidrs)) if net.version == address.version)


def _address(text: str) -> IPAddress | None:
    try:
        address = ipaddress.ip_address(text.strip())
    except ValueError:
        return None
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped
    return address


def _forwarded_for(element: str) -> str:
    """The address of one RFC 7239 ``Forwarded`` element's ``for=`` (no quotes, port or [])."""
    for pair in element.split(";"):
        name, _, value = pair.strip().partition("=")
        if name.strip().lower() == "for":
            value = value.strip().strip('"')
            if value.startswith("["):
                inside, bracket, _port = value[1:].partition("]")
                return inside if bracket else ""
            return value.rpartition(":")[0] if value.count(":") == 1 else value
    return ""


def _hops(header: str, value: str) -> list[str]:
    """The addresses a header names, the client first and the nearest proxy last."""
    if header == "x-real-ip":
        return [value]
    if header == "forwarded":
        return [_forwarded_for(element) for element in value.split(",")]
    return value.split(",")


def forwarded_client(request: HttpRequest) -> IPAddress | None:
    """The client's address, or None when it cannot be known (see the module's docstring)."""
    peer = _address(str(request.META.get("REMOTE_ADDR", "")))
    present = [key for key in FORWARDING_HEADERS.values() if key in request.META]
    if peer is None or not present:
        return peer
    header = settings.CLIENT_ADDRESS_HEADER.lower()
    if not _in(peer, settings.TRUSTED_PROXIES) or present != [FORWARDING_HEADERS[header]]:
        return None
    # Right to left past our own proxies: what a trusted proxy appended is the first hop it saw.
    for hop in reversed(_hops(header, str(request.META[FORWARDING_HEADERS[header]]))):
        address = _address(hop)
        if address is None or not _in(address, settings.TRUSTED_PROXIES):
            return address
    return None


def client_address(request: HttpRequest) -> str:
    """The client's address for counting (login throttling); the peer's when it is unknown."""
    address = forwarded_client(request)
    return str(address) if address is not None else str(request.META.get("REMOTE_ADDR", ""))


def client_in_networks(request: HttpRequest, cidrs: Sequence[str]) -> bool:
    """The request's client is known and inside one of ``cidrs``."""
    address = forwarded_client(request)
    return address is not None and _in(address, cidrs)


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
