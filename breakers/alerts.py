"""Slack alerts on fleet breaker events: which alerts an event makes, and their delivery.

**Making alerts** (``alerts_for_fleet_changes``, called by ``services._persist`` inside the
transaction that records the event, so an event and its alerts commit or roll back together):

=========================================================  ========================================
event                                                      alert (one row per enabled channel)
=========================================================  ========================================
a tool leaves the toolsets (closed -> open/half_open/      ``opened`` (or ``flapping``, see below)
forced_open), not by an operator
it comes back (-> closed/forced_closed), not by an operator ``closed``
an operator action (force open/close, release, reset)      ``manual``, even when it changed nothing;
                                                           the transitions it caused get no
                                                           opened/closed alert (one message each)
open -> half_open, half_open -> open (a failed trial)      none: still the same incident
=========================================================  ========================================

**Flapping.** When an opening is the ``ALERT_FLAP_COUNT``-th within ``ALERT_FLAP_WINDOW_SECONDS``
(operator actions not counted), it gets one ``flapping`` alert instead of an ``opened`` one and
starts a *spell* that lasts one window. Every opening and closing of the tool inside the spell
is recorded as a ``grouped`` alert (never sent on its own) and counted on the flapping alert.
When the spell is over, the sweep sends the tool's last word (the newest grouped opening or
closing, if it was grouped), so on-call learns how the spell ended; a tool that is still
flapping then starts a new spell: at most about two messages per window, never a storm.

**Delivery** (``deliver_alert``, run by the ``breakers.deliver_alert`` Celery task enqueued with
``transaction.on_commit``): each row is claimed once with a conditional UPDATE
(``pending`` -> ``sending``, healthchecks' ``sendalerts`` shape), so two workers or a duplicated
task never send it twice; then the per-channel rate limiter (GCRA in Redis) either gives the slot
or a wait, the message is built once and stored, and the transport's answer decides: sent,
retry (network, 5xx: exponential backoff, counted toward ``SLACK_MAX_ATTEMPTS``; 429: the
whole channel is held for ``Retry-After`` in the rate limiter and no attempt is counted), or
failed (permanent; a broken webhook also marks its channel broken, and nothing more is sent to
it).

**Sweep** (``sweep_alerts``, on beat): claims stuck in ``sending`` (a worker died mid-send) go
back to ``pending``; overdue ``pending`` rows (an enqueue lost after commit, a retry task lost
with its worker) are enqueued again; spells that are over are settled.

Webhooks have no idempotency key: a worker that dies after Slack took a message but before the
row says ``sent`` causes one duplicate when the sweep retries it. That is the accepted cost;
the claim rule still means two live workers never send the same alert.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from functools import lru_cache, partial
from typing import Any, Literal

from celery import current_app
from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import F, Q, QuerySet
from django.urls import NoReverseMatch, reverse
from django.utils import timezone

from breakers.alert_messages import (
    ClosedAlert,
    FlappingAlert,
    ManualActionAlert,
    OpenedAlert,
    SlackMessage,
    build_closed_message,
    build_flapping_message,
    build_manual_action_message,
    build_opened_message,
)
from breakers.fleet.rules import OUT_STATES, CauseKind
from breakers.models import (
    Alert,
    AlertChannel,
    AlertKind,
    AlertState,
    ChannelSource,
    FleetTransition,
    Incident,
    OperatorAction,
    Tool,
)
from breakers.ratelimit import ChannelRateLimiter, limiter_from_settings
from breakers.transports import Transport, TransportError
from breakers.transports.slack import SlackTransport, validate_webhook_url
from runs.models import BreakerState, ToolCall
from runs.queries import IncidentMeasures, incident_measures

__all__ = [
    "SETTINGS_CHANNEL_NAME",
    "Delivery",
    "SweepResult",
    "alert_channels",
    "alerts_for_fleet_changes",
    "build_alert_message",
    "deliver_alert",
    "enqueue_on_commit",
    "ensure_settings_channel",
    "incident_cost",
    "retry_delay",
    "sweep_alerts",
]

logger = logging.getLogger(__name__)

SETTINGS_CHANNEL_NAME = "SLACK_WEBHOOK_URL"
# A delivery holds its claim for at most one HTTP call (SLACK_TIMEOUT_SECONDS) plus a few
# queries; a claim this much older than that belongs to a worker that died mid-send.
STUCK_GRACE_SECONDS = 60.0
# An enqueued alert is normally claimed within milliseconds; one still pending this long after
# it was due lost its task (broker down at commit, worker lost with a countdown retry).
OVERDUE_SECONDS = 30.0
MAX_ERROR_CHARS = 2000
# The code SlackTransport gives a 429 (breakers/transports/slack.py).
RATE_LIMITED = "rate_limited"
SWEEP_BATCH = 500
DELIVER_ALERT_TASK = "breakers.deliver_alert"

Clock = Callable[[], datetime]


# -- channels --------------------------------------------------------------------------------


def ensure_settings_channel() -> AlertChannel | None:
    """The channel of ``SLACK_WEBHOOK_URL``, created or brought in step with the setting.

    Called lazily whenever alerts are made (not at start-up: Django discourages queries in
    ``AppConfig.ready``, and a process may start before the database is migrated). None when the
    setting is empty or invalid (the system check ``breakers.E001`` reports an invalid one), or
    when an admin channel already has that URL (it gets the alerts then). A settings channel
    that an admin disabled stays disabled; a changed URL is a new webhook, so its broken flag is
    cleared.
    """
    raw = settings.SLACK_WEBHOOK_URL
    if not raw.strip():
        return None
    try:
        url = validate_webhook_url(raw)
    except ValueError as exc:
        logger.error("SLACK_WEBHOOK_URL is not usable, no alerts go to it: %s", exc)
        return None
    channel = AlertChannel.objects.filter(source=ChannelSource.SETTINGS).first()
    if channel is None:
        try:
            with transaction.atomic():
                return AlertChannel.objects.create(
                    name=SETTINGS_CHANNEL_NAME, webhook_url=url, source=ChannelSource.SETTINGS
                )
        except IntegrityError:
            # Made meanwhile by another process, or the URL or name is an admin channel's.
            return AlertChannel.objects.filter(source=ChannelSource.SETTINGS).first()
    if channel.webhook_url != url:
        try:
            with transaction.atomic():
                AlertChannel.objects.filter(pk=channel.pk).update(
                    webhook_url=url, broken_at=None, last_error=""
                )
        except IntegrityError:
            return None  # an admin channel has the new URL: it gets the alerts
        channel.webhook_url, channel.broken_at, channel.last_error = url, None, ""
    return channel


def alert_channels() -> list[AlertChannel]:
    """The channels an event is announced to: every enabled one (a broken one included, so its
    alerts show as failed instead of silently missing) and the settings channel only while
    ``SLACK_WEBHOOK_URL`` names it."""
    settings_channel = ensure_settings_channel()
    channels = AlertChannel.objects.filter(enabled=True).order_by("pk")
    if settings_channel is None:
        channels = channels.exclude(source=ChannelSource.SETTINGS)
    return list(channels)


# -- making alerts ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class FlapRule:
    count: int
    window: timedelta


def flap_rule() -> FlapRule:
    return FlapRule(
        count=max(2, int(settings.ALERT_FLAP_COUNT)),
        window=timedelta(seconds=float(settings.ALERT_FLAP_WINDOW_SECONDS)),
    )


def is_opening(row: FleetTransition) -> bool:
    return row.from_state not in OUT_STATES and row.to_state in OUT_STATES


def is_closing(row: FleetTransition) -> bool:
    return row.from_state in OUT_STATES and row.to_state not in OUT_STATES


def _announced(row: FleetTransition) -> bool:
    """Starts or ends an incident by itself (an operator's transitions have their own alert)."""
    return row.cause_kind != CauseKind.OPERATOR and (is_opening(row) or is_closing(row))


def alerts_for_fleet_changes(
    *,
    tool: Tool,
    transitions: Sequence[FleetTransition],
    operator_action: OperatorAction | None = None,
) -> list[Alert]:
    """Make the alerts of freshly written transitions and operator action; enqueue on commit.

    Must run inside the transaction that wrote them. Transitions that announce nothing (most of
    them: half-open steps) cost no query.
    """
    announced = [row for row in transitions if _announced(row)]
    if not announced and operator_action is None:
        return []
    channels = alert_channels()
    if not channels:
        return []
    made: list[Alert] = []
    if operator_action is not None:
        made += _manual_alerts(tool, operator_action, transitions, channels)
    if announced:
        # One tool's openings are counted and grouped one event at a time: two processes
        # recording transitions of the same tool wait for each other here.
        Tool.objects.select_for_update().filter(pk=tool.pk).first()
        rule = flap_rule()
        for row in announced:
            made += _transition_alerts(tool, row, channels, rule)
    enqueue_on_commit([a.pk for a in made if a.state == AlertState.PENDING])
    return made


def enqueue_on_commit(alert_ids: Sequence[int]) -> None:
    """Send one delivery task per alert once the transaction commits (at once outside one).

    ``robust``: a broker that is down at that moment must not turn a committed ingest into an
    error; the sweep finds the pending rows and enqueues them again.
    """
    if alert_ids:
        transaction.on_commit(partial(_enqueue, list(alert_ids)), robust=True)


def _enqueue(alert_ids: Iterable[int]) -> None:
    # By name, from Celery's registry: breakers.tasks sits above this module (it imports it).
    deliver_alert = current_app.tasks[DELIVER_ALERT_TASK]
    for alert_id in alert_ids:
        deliver_alert.delay(alert_id)


def _incident_of(row: FleetTransition) -> Incident | None:
    incident = Incident.objects.filter(Q(opened_by=row) | Q(closed_by=row)).first()
    if incident is None:  # an opening that found its incident already open (out-of-order rows)
        incident = Incident.objects.filter(tool_id=row.tool_id, closed_at__isnull=True).first()
    return incident


def _iso(value: datetime) -> str:
    return value.isoformat()


def _transition_facts(row: FleetTransition) -> dict[str, Any]:
    return {
        "from_state": row.from_state,
        "to_state": row.to_state,
        "reason": row.reason,
        "at": _iso(row.at),
        "cause_kind": row.cause_kind,
    }


def _bulk(
    channels: Sequence[AlertChannel],
    *,
    state: str = AlertState.PENDING,
    groups: dict[int, Alert] | None = None,
    **fields: Any,
) -> list[Alert]:
    rows = [
        Alert(
            channel=channel,
            state=state,
            group=(groups or {}).get(channel.pk),
            **fields,
        )
        for channel in channels
    ]
    return Alert.objects.bulk_create(rows)


def _transition_alerts(
    tool: Tool, row: FleetTransition, channels: Sequence[AlertChannel], rule: FlapRule
) -> list[Alert]:
    opening = is_opening(row)
    kind = AlertKind.OPENED if opening else AlertKind.CLOSED
    common: dict[str, Any] = {
        "tool": tool,
        "transition": row,
        "incident": _incident_of(row),
        "created_at": timezone.now(),
    }
    spell = _active_spell(tool, row.at)
    if spell:
        if opening:
            _fold_opening(spell, row)
        groups = {alert.channel_id: alert for alert in spell}
        return _bulk(
            channels,
            kind=kind,
            state=AlertState.GROUPED,
            groups=groups,
            payload=_transition_facts(row),
            **common,
        )
    if opening:
        openings = _recent_openings(tool, row, rule.window)
        if len(openings) >= rule.count:
            payload = {
                "reopen_count": len(openings),
                "window_seconds": rule.window.total_seconds(),
                "first_opened_at": _iso(openings[0]),
                "last_opened_at": _iso(row.at),
                "last_reason": row.reason,
                "settled": False,
            }
            return _bulk(
                channels,
                kind=AlertKind.FLAPPING,
                payload=payload,
                group_until=row.at + rule.window,
                **common,
            )
    return _bulk(channels, kind=kind, payload=_transition_facts(row), **common)


def _active_spell(tool: Tool, at: datetime) -> list[Alert]:
    """The flapping alerts (one per channel) of the tool's spell that covers ``at``, if any."""
    newest = (
        Alert.objects.filter(tool=tool, kind=AlertKind.FLAPPING, group_until__gt=at)
        .order_by("-group_until", "-pk")
        .values_list("transition_id", flat=True)
        .first()
    )
    if newest is None:
        return []
    return list(
        Alert.objects.select_for_update().filter(transition_id=newest, kind=AlertKind.FLAPPING)
    )


def _fold_opening(spell: Sequence[Alert], row: FleetTransition) -> None:
    for alert in spell:
        payload = dict(alert.payload)
        payload["reopen_count"] = int(payload.get("reopen_count", 0)) + 1
        payload["last_opened_at"] = _iso(row.at)
        payload["last_reason"] = row.reason
        fields: dict[str, Any] = {"payload": payload}
        if alert.state == AlertState.PENDING:
            fields["message"] = None  # not sent yet: it will say the newest count
        Alert.objects.filter(pk=alert.pk).update(**fields)


def _recent_openings(tool: Tool, row: FleetTransition, window: timedelta) -> list[datetime]:
    """When the tool left the toolsets by itself within ``window`` up to ``row`` (included)."""
    rows = (
        FleetTransition.objects.filter(
            tool=tool, at__gt=row.at - window, at__lte=row.at, seq__lte=row.seq
        )
        .exclude(cause_kind=CauseKind.OPERATOR)
        .filter(to_state__in=OUT_STATES)
        .exclude(from_state__in=OUT_STATES)
        .order_by("at")
    )
    return list(rows.values_list("at", flat=True))


def _manual_alerts(
    tool: Tool,
    action: OperatorAction,
    transitions: Sequence[FleetTransition],
    channels: Sequence[AlertChannel],
) -> list[Alert]:
    incident = Incident.objects.filter(tool=tool, closed_at__isnull=True).first()
    if incident is None and transitions:
        incident = Incident.objects.filter(closed_by__in=list(transitions)).first()
    payload = {
        "action": action.action,
        "actor": action.actor,
        "reason": action.reason,
        "at": _iso(action.at),
        "state_before": action.before.get("state", ""),
        "state_after": action.after.get("state", ""),
    }
    return _bulk(
        channels,
        kind=AlertKind.MANUAL,
        tool=tool,
        operator_action=action,
        incident=incident,
        payload=payload,
        created_at=timezone.now(),
    )


# -- what an incident cost -------------------------------------------------------------------


def incident_cost(*, tool_name: str, start: datetime, end: datetime) -> IncidentMeasures:
    """Runs affected, their model spend and the tool's calls that reached the vendor, over
    [start, end): the same measure as the incident page (runs.queries)."""
    return incident_measures(tool=tool_name, start=start, end=end)


# -- messages --------------------------------------------------------------------------------


def _site_link(route: str, pk: int | None) -> str:
    if pk is None:
        return ""
    try:
        path = reverse(route, args=[pk])
    except NoReverseMatch:
        return ""
    return settings.SITE_URL.rstrip("/") + path


def incident_url(incident_id: int | None) -> str:
    return _site_link("dashboard:incident", incident_id)


def tool_url(tool_id: int) -> str:
    return _site_link("dashboard:tool", tool_id)


def _streak_start(events: Sequence[str]) -> tuple[datetime | None, str]:
    """The first failure of the streak that opened the breaker, and its newest error."""
    calls = ToolCall.objects.filter(event_id__in=list(events)[:200]).order_by("ts")
    first = calls.values_list("ts", flat=True).first()
    last_error = calls.exclude(error="").order_by("-ts").values_list("error", flat=True).first()
    return first, last_error or ""


def _opened_message(alert: Alert, now: datetime) -> SlackMessage:
    row = alert.transition
    assert row is not None
    cause = row.cause or {}
    workers_failures: dict[str, Any] = cause.get("workers") or {}
    workers = sorted(workers_failures, key=lambda w: (-int(workers_failures[w] or 0), w))
    first_failure, last_error = _streak_start(cause.get("events") or [])
    start = min(first_failure or row.at, row.at)
    cost = incident_cost(tool_name=alert.tool.name, start=start, end=max(now, row.at))
    return build_opened_message(
        OpenedAlert(
            tool=alert.tool.name,
            state=row.to_state,
            reason=row.reason or "the fleet breaker opened",
            since=row.at,
            consecutive_failures=int(cause.get("consecutive") or 0),
            workers=workers,
            runs_affected=cost.runs,
            incident_url=incident_url(alert.incident_id),
            last_error=last_error,
        )
    )


def _closed_message(alert: Alert) -> SlackMessage:
    row = alert.transition
    assert row is not None
    incident = alert.incident
    opened_at = incident.opened_at if incident is not None else row.at
    closed_at = max(row.at, opened_at)
    cost = incident_cost(tool_name=alert.tool.name, start=opened_at, end=closed_at)
    return build_closed_message(
        ClosedAlert(
            tool=alert.tool.name,
            opened_at=opened_at,
            closed_at=closed_at,
            runs_affected=cost.runs,
            model_spend_usd=cost.model_spend_usd,
            vendor_calls=cost.vendor_calls,
            reason=row.reason,
            incident_url=incident_url(alert.incident_id),
        )
    )


def _manual_message(alert: Alert) -> SlackMessage:
    action = alert.operator_action
    assert action is not None
    state_after = str(action.after.get("state", ""))
    return build_manual_action_message(
        ManualActionAlert(
            tool=alert.tool.name,
            action=action.action,
            actor=action.actor,
            reason=action.reason,
            at=action.at,
            state_after=state_after if state_after in BreakerState.values else "",
            tool_url=tool_url(alert.tool_id),
        )
    )


def _flapping_message(alert: Alert, now: datetime) -> SlackMessage:
    payload = alert.payload
    first = datetime.fromisoformat(payload["first_opened_at"])
    last = datetime.fromisoformat(payload["last_opened_at"])
    cost = incident_cost(tool_name=alert.tool.name, start=first, end=max(now, last))
    return build_flapping_message(
        FlappingAlert(
            tool=alert.tool.name,
            reopen_count=int(payload["reopen_count"]),
            window=timedelta(seconds=float(payload["window_seconds"])),
            first_opened_at=first,
            last_opened_at=last,
            last_reason=str(payload.get("last_reason", "")),
            runs_affected=cost.runs,
            incident_url=incident_url(alert.incident_id),
        )
    )


def build_alert_message(alert: Alert, *, now: datetime | None = None) -> SlackMessage:
    """The Slack message of an alert, from its rows and what the database knows ``now``.

    Raises ValueError (``MessageLimitError`` included) when the rows cannot make a message.
    """
    now = now or timezone.now()
    if alert.kind == AlertKind.OPENED:
        return _opened_message(alert, now)
    if alert.kind == AlertKind.CLOSED:
        return _closed_message(alert)
    if alert.kind == AlertKind.MANUAL:
        return _manual_message(alert)
    if alert.kind == AlertKind.FLAPPING:
        return _flapping_message(alert, now)
    raise ValueError(f"unknown alert kind {alert.kind!r}")


def _stored_message(message: dict[str, Any]) -> SlackMessage:
    return SlackMessage(text=message["text"], blocks=tuple(message["blocks"]))


# -- delivery --------------------------------------------------------------------------------

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
        return _stored_message(alert.message)
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


# -- sweep -----------------------------------------------------------------------------------


@dataclass(slots=True)
class SweepResult:
    unstuck: int = 0
    requeued: list[int] = field(default_factory=list)
    settled: int = 0


def sweep_alerts(*, now: datetime | None = None) -> SweepResult:
    """Beat's sweep: unstick dead claims, re-enqueue lost deliveries, settle finished spells."""
    now = now or timezone.now()
    result = SweepResult()
    stuck_before = now - timedelta(
        seconds=float(settings.SLACK_TIMEOUT_SECONDS) + STUCK_GRACE_SECONDS
    )
    stuck = list(
        Alert.objects.filter(state=AlertState.SENDING, claimed_at__lt=stuck_before)
        .order_by("pk")
        .values_list("pk", flat=True)[:SWEEP_BATCH]
    )
    # Still conditional on the old claim: a claim that finished meanwhile is left alone.
    result.unstuck = Alert.objects.filter(
        pk__in=stuck, state=AlertState.SENDING, claimed_at__lt=stuck_before
    ).update(state=AlertState.PENDING, next_attempt_at=now)
    overdue = now - timedelta(seconds=OVERDUE_SECONDS)
    lost = (
        Alert.objects.filter(state=AlertState.PENDING)
        .filter(
            Q(next_attempt_at__lte=overdue)
            | Q(next_attempt_at__isnull=True, created_at__lte=overdue)
            | Q(pk__in=stuck)
        )
        .order_by("pk")
        .values_list("pk", flat=True)[:SWEEP_BATCH]
    )
    result.requeued = list(lost)
    enqueue_on_commit(result.requeued)
    result.settled = settle_spells(now=now)
    return result


def settle_spells(*, now: datetime) -> int:
    """End the flapping spells that are over: send the tool's last word if it was grouped."""
    spells = (
        Alert.objects.filter(kind=AlertKind.FLAPPING, group_until__lte=now, payload__settled=False)
        .values_list("transition_id", "tool_id")
        .order_by("transition_id")
        .distinct()[:SWEEP_BATCH]
    )
    settled = 0
    for transition_id, tool_id in list(spells):
        with transaction.atomic():
            Tool.objects.select_for_update().filter(pk=tool_id).first()
            rows = list(
                Alert.objects.select_for_update().filter(
                    transition_id=transition_id, kind=AlertKind.FLAPPING
                )
            )
            if not rows or rows[0].payload.get("settled"):
                continue  # another sweep did it
            _send_last_word(tool_id, spell_transition_id=transition_id)
            for alert in rows:
                payload = {**alert.payload, "settled": True}
                Alert.objects.filter(pk=alert.pk).update(payload=payload)
            settled += 1
    return settled


def _send_last_word(tool_id: int, *, spell_transition_id: int) -> None:
    spell_seq = FleetTransition.objects.filter(pk=spell_transition_id).values("seq")
    newer_spell = Alert.objects.filter(
        tool_id=tool_id, kind=AlertKind.FLAPPING, transition__seq__gt=spell_seq[:1]
    ).exists()
    if newer_spell:
        return  # the tool flapped on into a new spell, which will have the last word
    latest = _latest_state_change(tool_id)
    if latest is None or latest.cause_kind == CauseKind.OPERATOR:
        return  # an operator had the last word, and it was announced
    ids = list(
        Alert.objects.filter(transition=latest, state=AlertState.GROUPED).values_list(
            "pk", flat=True
        )
    )
    Alert.objects.filter(pk__in=ids).update(state=AlertState.PENDING, next_attempt_at=None)
    enqueue_on_commit(ids)


def _latest_state_change(tool_id: int) -> FleetTransition | None:
    """The tool's newest transition that moved it into or out of the toolsets."""
    for row in FleetTransition.objects.filter(tool_id=tool_id).order_by("-seq")[:200]:
        if is_opening(row) or is_closing(row):
            return row
    return None
