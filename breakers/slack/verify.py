"""Is this request from Slack, now, and the first time we see it? ``slack_sdk``'s verifier checks
the v0 HMAC in constant time and the 5-minute window; a replay inside the window is ours to
refuse: each signature is remembered in Redis for as long as the window lasts.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass

import redis
from slack_sdk.signature import SignatureVerifier

__all__ = ("MAX_SKEW_SECONDS", "RequestRefused", "verify_slack_request")

MAX_SKEW_SECONDS = 300
SEEN_PREFIX = "bp:slack:seen:"


@dataclass(frozen=True)
class RequestRefused(Exception):
    """Not a request we act on: ``status`` to answer with and ``why`` in words."""

    status: int
    why: str

    def __str__(self) -> str:
        return self.why


class _Clock:
    def __init__(self, now: Callable[[], float]) -> None:
        self._now = now

    def now(self) -> float:
        return self._now()


def verify_slack_request(
    *,
    body: bytes,
    headers: Mapping[str, str],
    signing_secret: str,
    seen: redis.Redis,
    now: Callable[[], float] = time.time,
) -> None:
    """Return when the request is Slack's and new; raise :class:`RequestRefused` saying why not."""
    if not signing_secret.strip():
        raise RequestRefused(503, "Slack actions are off: SLACK_SIGNING_SECRET is not set")
    lowered = {k.lower(): v for k, v in headers.items()}
    timestamp = lowered.get("x-slack-request-timestamp")
    signature = lowered.get("x-slack-signature")
    if not timestamp or not signature:
        raise RequestRefused(401, "missing X-Slack-Signature or X-Slack-Request-Timestamp")
    if not (timestamp.isascii() and timestamp.isdigit() and len(timestamp) <= 12):
        raise RequestRefused(400, "X-Slack-Request-Timestamp is not a Unix time")
    if abs(now() - int(timestamp)) > MAX_SKEW_SECONDS:
        raise RequestRefused(401, "the request's timestamp is more than 5 minutes off")
    verifier = SignatureVerifier(signing_secret, clock=_Clock(now))  # type: ignore[arg-type]
    try:
        valid = verifier.is_valid(body=body, timestamp=timestamp, signature=signature)
    except ValueError:  # a body that is not UTF-8, a timestamp the verifier cannot read
        raise RequestRefused(400, "the request cannot be verified: malformed") from None
    if not valid:
        raise RequestRefused(401, "the signature does not match (X-Slack-Signature)")
    key = SEEN_PREFIX + hashlib.sha256(f"{timestamp}:{signature}".encode()).hexdigest()[:40]
    try:
        first = seen.set(key, "1", nx=True, ex=MAX_SKEW_SECONDS + 5)
    except (redis.ConnectionError, redis.TimeoutError):
        # Without the memory of what was seen a replay cannot be told apart: refuse (secure by
        # default); Slack shows the user an error and they can press again.
        raise RequestRefused(
            503, "cannot check for a replay right now (Redis unavailable)"
        ) from None
    if not first:
        raise RequestRefused(401, "this request was already received (a replay)")
