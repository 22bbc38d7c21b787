"""Deliver one alert: claim it once, wait for the channel's rate limit, send, decide what next."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from functools import lru_cache
from typing import Literal

from django.conf import settings
from django.db.models import F, Q, QuerySet
from django.utils import timezone

from breakers.alerts.facts import build_alert_message, stored_message
from breakers.alerts.ratelimit import ChannelRateLimiter, limiter_from_settings
from breakers.models import Alert, AlertChannel, AlertState
from breakers.transports import Transport, TransportError
from breakers.transports.slack import SlackTransport
from breakers.transports.slack_messages import SlackMessage

MAX_ERROR_CHARS = 2000


# The code SlackTransport gives a 429 (breakers/transports/slack.py).
RATE_LIMITED = "rate_limited"


Clock = Callable[[], datetime]


DeliveryOutcome = Literal["sent", "retry", "failed", "skipped"]


@dataclass(frozen=True, slots=True)
class Delivery:
    """What one delivery attempt did; ``retry_in``: ask again after that many seconds."""

    outcome: DeliveryOutcome
    retry_in: float | None = None
    detail: str = ""


def retry_delay(attempts: int) -> float:
    """Backoff after the ``attempts``-th failed attempt: base, 2x base, 4x base… capped."""
    base = float(settings.SLACK_RETRY_BASE_SECONDS)
    cap = float(settings.SLACK_RETRY_MAX_SECONDS)
    return float(min(base * 2 ** max(attempts - 1, 0), cap))


@lru_cache(maxsize=4)
def _limiter(redis_url: str, interval: float) -> ChannelRateLimiter:
    return limiter_from_settings(interval=interval)


def channel_limiter() -> ChannelRateLimiter:
    return _limiter(settings.REDIS_URL, float(settings.SLACK_MIN_INTERVAL_SECONDS))


def slack_transport(channel: AlertChannel) -> Transport:
    return SlackTransport(channel.webhook_url)


def _clip(text: str) -> str:
    return text if len(text) <= MAX_ERROR_CHARS else text[: MAX_ERROR_CHARS - 1] + "…"


@dataclass(slots=True)
class _Claim:
    alert: Alert
    claimed_at: datetime

    def rows(self) -> QuerySet[Alert]:
        """This claim's row, only while the claim is still ours (the sweep may have reset it)."""
        return Alert.objects.filter(
            pk=self.alert.pk, state=AlertState.SENDING, claimed_at=self.claimed_at
        )


def deliver_alert(
    *,
    alert_id: int,
    clock: Clock = timezone.now,
    limiter: ChannelRateLimiter | None = None,
    transport_for: Callable[[AlertChannel], Transport] = slack_transport,
) -> Delivery:
    """Claim the alert, wait for its channel's slot, send it once and record what happened."""
    claimed_at = clock()
    due = Q(next_attempt_at__isnull=True) | Q(next_attempt_at__lte=claimed_at)
    won = (
        Alert.objects.filter(due, pk=alert_id, state=AlertState.PENDING)
        .update(state=AlertState.SENDING, claimed_at=claimed_at)
    )  # fmt: skip
    if not won:
        return _not_claimed(alert_id, claimed_at)
    alert = Alert.objects.select_related(
        "channel", "tool", "transition", "operator_action", "incident"
    ).get(pk=alert_id)
    claim = _Claim(alert, claimed_at)
    channel = alert.channel
    if not channel.enabled:
        return _fail(claim, "the channel is disabled", clock())
    if channel.broken_at is not None:
        return _fail(claim, f"the channel is broken: {channel.last_error}", clock())
    limiter = limiter or channel_limiter()
    wait = limiter.try_acquire(channel.webhook_url)
    if wait > 0:
        # Pacing is not a failed attempt: back to pending, no attempt counted.
        claim.rows().update(
            state=AlertState.PENDING, next_attempt_at=claimed_at + timedelta(seconds=wait)
        )
        return Delivery("retry", wait, "waiting for the channel's send slot")
    return _send(claim, clock, transport_for, limiter)


def _not_claimed(alert_id: int, now: datetime) -> Delivery:
    row = Alert.objects.filter(pk=alert_id).values("state", "next_attempt_at").first()
    if row is None:
        return Delivery("skipped", detail="no such alert")
    due: datetime | None = row["next_attempt_at"]
    if row["state"] == AlertState.PENDING and due is not None and due > now:
        # This task came early (a duplicate, or a clock step): come back when it is due.
        return Delivery("retry", (due - now).total_seconds(), "not due yet")
    return Delivery("skipped", detail=f"alert is {row['state']}")


def _send(
    claim: _Claim,
    clock: Clock,
    transport_for: Callable[[AlertChannel], Transport],
    limiter: ChannelRateLimiter,
) -> Delivery:
    alert = claim.alert
    try:
        message = _message_for(claim, clock())
    except (ValueError, KeyError, TypeError) as exc:
        # A bug or bad rows, not the network: retrying cannot help.
        return _fail(claim, f"could not build the message: {exc}", clock())
    attempts = alert.attempts + 1
    claim.rows().update(attempts=F("attempts") + 1)
    try:
        transport = transport_for(alert.channel)
        transport.notify(message)
    except ValueError as exc:  # the stored URL is not a webhook URL (edited behind the admin)
        return _broken(claim, TransportError(f"invalid webhook URL: {exc}", code="invalid_url"))
    except TransportError as exc:
        if exc.code == RATE_LIMITED:
            return _rate_limited(claim, exc, limiter, clock())
        return _after_error(claim, exc, attempts, clock())
    now = clock()
    claim.rows().update(state=AlertState.SENT, sent_at=now, last_error="", next_attempt_at=None)
    AlertChannel.objects.filter(pk=alert.channel_id).update(last_sent_at=now)
    return Delivery("sent")


def _message_for(claim: _Claim, now: datetime) -> SlackMessage:
    """The stored message (a retry resends exactly what the first attempt tried), or a new one."""
    alert = claim.alert
    if alert.message:
        return stored_message(alert.message)
    message = build_alert_message(alert, now=now)
    claim.rows().update(message={"text": message.text, "blocks": list(message.blocks)})
    return message


def _after_error(claim: _Claim, exc: TransportError, attempts: int, now: datetime) -> Delivery:
    error = _clip(f"{exc.code}: {exc.message}" if exc.code else exc.message)
    if exc.channel_broken:
        return _broken(claim, exc)
    if exc.permanent:
        return _fail(claim, error, now)
    if attempts >= int(settings.SLACK_MAX_ATTEMPTS):
        return _fail(claim, f"gave up after {attempts} attempts: {error}", now)
    delay = exc.retry_after if exc.retry_after is not None else retry_delay(attempts)
    claim.rows().update(
        state=AlertState.PENDING,
        last_error=error,
        next_attempt_at=now + timedelta(seconds=delay),
    )
    return Delivery("retry", delay, error)


def _rate_limited(
    claim: _Claim, exc: TransportError, limiter: ChannelRateLimiter, now: datetime
) -> Delivery:
    """Slack's 429 is about the webhook, not this message: hold the whole channel for
    Retry-After (every pending alert of it then waits at its slot), and give back the attempt
    this send took, since the message itself was never refused."""
    error = _clip(f"{exc.code}: {exc.message}")
    hold = exc.retry_after if exc.retry_after is not None else retry_delay(1)
    delay = max(hold, limiter.hold(claim.alert.channel.webhook_url, hold))
    claim.rows().update(
        state=AlertState.PENDING,
        attempts=F("attempts") - 1,
        last_error=error,
        next_attempt_at=now + timedelta(seconds=delay),
    )
    return Delivery("retry", delay, error)


def _fail(claim: _Claim, error: str, now: datetime) -> Delivery:
    claim.rows().update(state=AlertState.FAILED, last_error=_clip(error), next_attempt_at=None)
    return Delivery("failed", detail=error)


def _broken(claim: _Claim, exc: TransportError) -> Delivery:
    """Slack refused the webhook itself: fail this alert and mark the channel broken."""
    now = timezone.now()
    error = _clip(f"{exc.code}: {exc.message}" if exc.code else exc.message)
    AlertChannel.objects.filter(pk=claim.alert.channel_id).update(broken_at=now, last_error=error)
    return _fail(claim, error, now)
