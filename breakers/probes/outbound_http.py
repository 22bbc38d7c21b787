"""The one place outbound HTTP goes through (healthchecks' ``hc/lib/curl.py`` role).

The timeout is a required argument: no call can forget it. Redirects are not followed (a probe
that lands on a login page must not read as healthy) and at most ``max_body`` bytes are read.
Connections to internal addresses (loopback, private, link-local, cloud metadata, ...) are
refused unless ``BREAKER_HTTP_ALLOWED_NETWORKS`` names them; the check is made on the address the
name resolves to when connecting, and that same address is the one connected to (no rebinding).
"""

from __future__ import annotations

import http.client
import ipaddress
import socket
import time
import urllib.error
import urllib.request
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from django.conf import settings

__all__ = ["BlockedAddress", "HttpError", "HttpResponse", "address_allowed", "http_request"]

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network


class HttpError(Exception):
    """No HTTP answer at all: refused, reset, DNS failure, timeout, bad URL, internal address."""


class BlockedAddress(OSError):
    """The name resolved only to addresses outbound HTTP may not reach."""


def address_allowed(address: IPAddress, allowed: Iterable[IPNetwork]) -> bool:
    """Public addresses always; internal ones only inside an allowed network."""
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    if any(address in network for network in allowed if network.version == address.version):
        return True
    return address.is_global and not address.is_multicast


def _allowed_networks() -> list[IPNetwork]:
    return [ipaddress.ip_network(n, strict=False) for n in settings.BREAKER_HTTP_ALLOWED_NETWORKS]


def _guarded_create_connection(
    address: tuple[str, int], timeout: Any = None, source_address: Any = None, **_: Any
) -> socket.socket:
    """``socket.create_connection`` that vets every resolved address before connecting to it."""
    host, port = address
    allowed = _allowed_networks()
    refused: list[str] = []
    last_error: OSError | None = None
    resolved = socket.getaddrinfo(host, port, 0, socket.SOCK_STREAM)
    for family, kind, proto, _name, sockaddr in resolved:
        ip = ipaddress.ip_address(str(sockaddr[0]).split("%", 1)[0])
        if not address_allowed(ip, allowed):
            refused.append(str(ip))
            continue
        sock = socket.socket(family, kind, proto)
        try:
            if timeout is not None:
                sock.settimeout(timeout)
            if source_address:
                sock.bind(source_address)
            sock.connect(sockaddr)
            return sock
        except OSError as exc:
            sock.close()
            last_error = exc
    if last_error is not None:
        raise last_error
    raise BlockedAddress(
        f"{host} resolves to internal address {', '.join(refused) or '(none)'}; "
        "add it to BREAKER_HTTP_ALLOWED_NETWORKS to allow it"
    )


class _GuardedHTTPConnection(http.client.HTTPConnection):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._create_connection = _guarded_create_connection


class _GuardedHTTPSConnection(http.client.HTTPSConnection):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._create_connection = _guarded_create_connection


class _GuardedHTTPHandler(urllib.request.HTTPHandler):
    def http_open(self, req: urllib.request.Request) -> Any:
        return self.do_open(_GuardedHTTPConnection, req)


class _GuardedHTTPSHandler(urllib.request.HTTPSHandler):
    def https_open(self, req: urllib.request.Request) -> Any:
        context = getattr(self, "_context", None)  # what HTTPSHandler.https_open passes
        return self.do_open(_GuardedHTTPSConnection, req, context=context)


@dataclass(frozen=True, slots=True)
class HttpResponse:
    status: int
    body: bytes
    elapsed_ms: int


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args: object, **kwargs: object) -> None:
        return None  # the 3xx comes back as the answer


# No proxy from the environment: the guard must see the address really connected to.
_OPENER = urllib.request.build_opener(
    urllib.request.ProxyHandler({}), _NoRedirect, _GuardedHTTPHandler, _GuardedHTTPSHandler
)


def http_request(
    method: str,
    url: str,
    *,
    timeout: float,
    headers: Mapping[str, str] | None = None,
    body: bytes | None = None,
    max_body: int = 65_536,
) -> HttpResponse:
    """One request; any HTTP status is an answer, anything else raises ``HttpError``."""
    if timeout <= 0:
        raise ValueError("timeout must be positive")
    if urlsplit(url).scheme not in ("http", "https"):
        raise HttpError(f"only http and https URLs are allowed, not {url!r}")
    request = urllib.request.Request(url, data=body, method=method, headers=dict(headers or {}))
    started = time.monotonic()
    try:
        with _OPENER.open(request, timeout=timeout) as response:
            status, content = response.status, response.read(max_body)
    except urllib.error.HTTPError as exc:  # a 4xx/5xx/3xx answer, not a failure to connect
        status, content = exc.code, exc.read(max_body) if exc.fp is not None else b""
        exc.close()
    except (urllib.error.URLError, TimeoutError, OSError, ValueError) as exc:
        reason = getattr(exc, "reason", exc)
        raise HttpError(f"{type(reason).__name__}: {reason}") from exc
    return HttpResponse(status, content, round((time.monotonic() - started) * 1000))
