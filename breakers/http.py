"""The one place outbound HTTP goes through (healthchecks' ``hc/lib/curl.py`` role).

The timeout is a required argument: no call can forget it. Redirects are not followed (a probe
that lands on a login page must not read as healthy) and at most ``max_body`` bytes are read.
"""

from __future__ import annotations

import time
import urllib.error
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass
from urllib.parse import urlsplit

__all__ = ["HttpError", "HttpResponse", "http_request"]


class HttpError(Exception):
    """No HTTP answer at all: refused, reset, DNS failure, timeout, bad URL."""


@dataclass(frozen=True, slots=True)
class HttpResponse:
    status: int
    body: bytes
    elapsed_ms: int


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args: object, **kwargs: object) -> None:
        return None  # the 3xx comes back as the answer


_OPENER = urllib.request.build_opener(_NoRedirect)


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
