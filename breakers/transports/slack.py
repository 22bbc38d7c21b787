"""Slack incoming webhooks through ``slack_sdk``'s ``WebhookClient``: one POST per ``notify()``,
always with a timeout, the answer mapped to success or a ``TransportError``. The webhook URL is a
secret: only ``mask_webhook_url`` shows it. Why: docs/adr/0008-keep-the-slack-webhook-url-out.md.
"""

from __future__ import annotations

import http.client
import ipaddress
import logging
import math
from collections.abc import Mapping
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from typing import TYPE_CHECKING
from urllib.error import URLError
from urllib.parse import urlsplit

from slack_sdk.errors import SlackRequestError
from slack_sdk.webhook import WebhookClient

from breakers.transports import Transport, TransportError

if TYPE_CHECKING:
    from breakers.transports.slack_messages import SlackMessage

__all__ = (
    "CHANNEL_ERRORS",
    "MAX_RETRY_AFTER_SECONDS",
    "SlackTransport",
    "mask_webhook_url",
    "parse_retry_after",
    "validate_webhook_url",
)

logger = logging.getLogger(__name__)

# slack_sdk logs every request with its URL at DEBUG. Its own logger, pinned above DEBUG, keeps
# the secret out of the logs even when the root logger runs at DEBUG.
_sdk_logger = logging.getLogger("breakers.transports.slack.sdk")
_sdk_logger.setLevel(logging.WARNING)

# Slack's error strings that say the webhook or its channel is gone or refuses us.
CHANNEL_ERRORS = frozenset(
    {
        "invalid_token",
        "no_service",
        "no_service_id",
        "no_team",
        "team_disabled",
        "no_active_hooks",
        "channel_not_found",
        "channel_is_archived",
        "action_prohibited",
        "posting_to_general_channel_denied",
        "user_not_found",
    }
)
_CHANNEL_STATUSES = frozenset({401, 403, 404, 410})
# Honour Retry-After, but a broken or hostile header must not park an alert for days.
MAX_RETRY_AFTER_SECONDS = 3600.0
_BODY_SHOWN = 200


def validate_webhook_url(url: str) -> str:
    """``url`` stripped if it can be a webhook URL; ``ValueError`` saying why not otherwise.

    https only, except plain http to a loopback address (the local stand-in for Slack in tests
    and demos); no credentials in the URL, and a path (the secret lives there).
    """
    url = url.strip()
    try:
        parts = urlsplit(url)
        _ = parts.port  # reading the port is what rejects junk like "host:abc"
    except ValueError as exc:
        raise ValueError(f"not a URL: {exc}") from None
    if parts.scheme not in ("https", "http") or not parts.hostname:
        raise ValueError("a webhook URL must start with https:// and name a host")
    if parts.username is not None or parts.password is not None:
        raise ValueError("a webhook URL must not carry a user name or password")
    if parts.scheme == "http" and not _is_loopback(parts.hostname):
        raise ValueError("plain http is only allowed to a loopback address; use https")
    if parts.path.strip("/") == "":
        raise ValueError("a webhook URL needs its path (https://hooks.slack.com/services/…)")
    return url


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def mask_webhook_url(url: str) -> str:
    """The URL for display with its secret hidden: ``https://hooks.slack.com/services/T0/B0/…xyz``.

    Keeps the scheme, host and every path segment but the last (team and hook ids, useful to
    tell channels apart); of the last segment, the secret, only its last 3 characters and only
    when it is long enough that they give nothing away. Query, fragment and credentials are
    dropped, since any of them could hold a token too.
    """
    try:
        parts = urlsplit(url.strip())
        host = parts.hostname or ""
        port = parts.port
    except ValueError:
        return "…"
    if not parts.scheme or not host:
        return "…"
    netloc = f"{host}:{port}" if port else host
    segments = [s for s in parts.path.split("/") if s]
    if not segments:
        return f"{parts.scheme}://{netloc}/…"
    secret = segments[-1]
    tail = secret[-3:] if len(secret) >= 12 else ""
    shown = "/".join([*segments[:-1], f"…{tail}"])
    return f"{parts.scheme}://{netloc}/{shown}"


def parse_retry_after(value: str | None, *, now: datetime | None = None) -> float | None:
    """Seconds to wait from a ``Retry-After`` header (delta-seconds or an HTTP date).

    None when it is missing or unreadable (the caller falls back to its own backoff); clamped
    to ``0..MAX_RETRY_AFTER_SECONDS``.
    """
    if value is None or not value.strip():
        return None
    value = value.strip()
    try:
        seconds = float(value)
    except ValueError:
        try:
            when = parsedate_to_datetime(value)
        except (TypeError, ValueError):
            return None
        if when.tzinfo is None:
            when = when.replace(tzinfo=UTC)
        seconds = (when - (now or datetime.now(UTC))).total_seconds()
    if not math.isfinite(seconds):
        return None
    return min(max(seconds, 0.0), MAX_RETRY_AFTER_SECONDS)


def _header(headers: Mapping[str, object], name: str) -> str | None:
    wanted = name.lower()
    for key, value in headers.items():
        if key.lower() == wanted:
            return str(value)
    return None


def _shown_body(body: str) -> str:
    """A response body fit for an error message: one line, short."""
    text = " ".join(body.split())
    return text if len(text) <= _BODY_SHOWN else text[: _BODY_SHOWN - 1] + "…"


class SlackTransport(Transport):
    """Posts a message to one Slack incoming webhook, once.

    Its answers::

        200 ok                                        delivered
        429                                           retry, after Retry-After seconds
        5xx, 408, timeouts, refused/reset connections retry with backoff
        401/403/404/410 (invalid_token, no_service,   permanent, the channel is broken
          channel_not_found, channel_is_archived, …)
        other 4xx (invalid_payload, invalid_blocks …) permanent for this message only
        any other answer, other 2xx bodies included   permanent: not a Slack webhook, and a
                                                      retry could post the message twice
    """

    def __init__(self, webhook_url: str, *, timeout: float | None = None) -> None:
        if timeout is None:
            from django.conf import settings

            timeout = float(settings.SLACK_TIMEOUT_SECONDS)
        if not (math.isfinite(timeout) and timeout > 0):
            raise ValueError(f"timeout must be a positive number of seconds, got {timeout!r}")
        self.webhook_url = validate_webhook_url(webhook_url)
        self.timeout = timeout
        self.client = WebhookClient(
            self.webhook_url,
            # urllib applies it to the connect and to each read; Slack's answer is a few bytes.
            timeout=timeout,  # type: ignore[arg-type]  # annotated int, used as a float
            logger=_sdk_logger,
            # One attempt: retries, backoff and attempt counting belong to the delivery task.
            retry_handlers=[],
        )

    def __repr__(self) -> str:
        return f"SlackTransport({mask_webhook_url(self.webhook_url)!r}, timeout={self.timeout})"

    def notify(self, message: SlackMessage) -> None:
        payload = message.as_payload()
        try:
            response = self.client.send_dict(payload)
        except TimeoutError:
            raise TransportError(
                f"Slack did not answer within {self.timeout:g} s", code="timeout"
            ) from None
        except URLError as exc:
            raise self._network_error(exc.reason) from None
        except (OSError, http.client.HTTPException) as exc:
            # Reset or dropped connections, half-sent answers: the network, so retry.
            raise TransportError(
                f"connection to Slack failed: {type(exc).__name__}", code="connection"
            ) from None
        except SlackRequestError as exc:  # the client refused the URL: configuration
            raise TransportError(f"invalid webhook URL: {exc}", permanent=True) from None
        self._check(response.status_code, response.body or "", response.headers or {})

    def _network_error(self, reason: object) -> TransportError:
        if isinstance(reason, TimeoutError):
            return TransportError(f"Slack did not answer within {self.timeout:g} s", code="timeout")
        detail = type(reason).__name__ if isinstance(reason, BaseException) else "URL error"
        return TransportError(f"could not reach Slack: {detail}", code="connection")

    def _check(self, status: int, body: str, headers: Mapping[str, object]) -> None:
        answer = body.strip()
        shown = _shown_body(body)
        if status == 200 and answer == "ok":
            return
        if status == 429:
            retry_after = parse_retry_after(_header(headers, "Retry-After"))
            wait = f", retry after {retry_after:g} s" if retry_after is not None else ""
            raise TransportError(
                f"rate limited by Slack (429){wait}", retry_after=retry_after, code="rate_limited"
            )
        if status >= 500 or status == 408:
            raise TransportError(f"Slack answered {status} {shown}".rstrip(), code=f"http_{status}")
        code = answer if answer.replace("_", "").isalnum() and len(answer) <= 64 else ""
        if status in _CHANNEL_STATUSES or code in CHANNEL_ERRORS:
            raise TransportError(
                f"Slack refused the webhook: {status} {shown}".rstrip(),
                channel_broken=True,
                code=code or f"http_{status}",
            )
        if 400 <= status < 500:
            raise TransportError(
                f"Slack rejected the message: {status} {shown}".rstrip(),
                permanent=True,
                code=code or f"http_{status}",
            )
        # A 2xx that is not "ok", a 3xx, a 1xx: whatever answered is not a Slack webhook, and
        # it may have taken the message, so a retry could post it twice.
        raise TransportError(
            f"unexpected answer from the webhook: {status} {shown}".rstrip(),
            permanent=True,
            code=f"http_{status}",
        )
