"""Which alerts a fleet event makes (inside the transaction that records it); their enqueueing."""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from functools import partial
from typing import Any

from celery import current_app
from django.conf import settings
from django.db import IntegrityError, transaction
from django.utils import timezone

from breakers.alerts.facts import incident_of, is_announced, is_opening, iso, transition_facts
from breakers.alerts.silences import active_silence
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
from breakers.transports.slack import validate_webhook_url

logger = logging.getLogger(__name__)


SETTINGS_CHANNEL_NAME = "SLACK_WEBHOOK_URL"


DELIVER_ALERT_TASK = "breakers.deliver_alert"
SYNC_CARD_TASK = "breakers.slack_sync_incident"


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


@dataclass(frozen=True, slots=True)
class FlapRule:
    count: int
    window: timedelta


def flap_rule() -> FlapRule:
    return FlapRule(
        count=max(2, int(settings.ALERT_FLAP_COUNT)),
        window=timedelta(seconds=float(settings.ALERT_FLAP_WINDOW_SECONDS)),
    )


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
    announced = [row for row in transitions if is_announced(row)]
    if not announced and operator_action is None:
        return []
    if bot_mode():
        sync_cards_on_commit(tool, announced, operator_action)
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


def bot_mode() -> bool:
    """Bot mode (breakers.slack): a bot token and a channel to post each incident's card in."""
    return bool(settings.SLACK_BOT_TOKEN.strip() and settings.SLACK_CHANNEL.strip())


def action_card_incident(tool: Tool) -> Incident | None:
    """The incident whose card an audited action on ``tool`` updates: the open one, else the
    newest (a forced tool's card stays live after its incident closed)."""
    open_incident = Incident.objects.filter(tool=tool, closed_at__isnull=True).first()
    return open_incident or Incident.objects.filter(tool=tool).order_by("-opened_at").first()


def sync_cards_on_commit(
    tool: Tool, announced: Sequence[FleetTransition], action: OperatorAction | None
) -> None:
    """Bring the incident cards these events touch up to date once they are committed."""
    incidents = {incident.pk for row in announced if (incident := incident_of(row)) is not None}
    if action is not None:
        latest = action_card_incident(tool)
        if latest is not None:
            incidents.add(latest.pk)
    for incident_id in sorted(incidents):
        send = partial(
            current_app.send_task,
            SYNC_CARD_TASK,
            args=(incident_id,),
            queue=settings.SLACK_TASK_QUEUE or None,
        )
        transaction.on_commit(send, robust=True)


def enqueue_on_commit(alert_ids: Sequence[int]) -> None:
    """Send one delivery task per alert once the transaction commits (at once outside one).

    ``robust``: a broker that is down at that moment must not turn a committed ingest into an
    error; the sweep finds the pending rows and enqueues them again.
    """
    if alert_ids:
        transaction.on_commit(partial(_enqueue, list(alert_ids)), robust=True)


def _enqueue(alert_ids: Iterable[int]) -> None:
    # By name (breakers.tasks sits above this module), and sent rather than looked up: a web
    # process never imports breakers.tasks, so the task is not in its registry.
    for alert_id in alert_ids:
        current_app.send_task(DELIVER_ALERT_TASK, args=(alert_id,))


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
        "incident": incident_of(row),
        "created_at": timezone.now(),
    }
    if opening and active_silence(tool.pk, now=row.at) is not None:
        # Silenced from Slack: recorded (the alerts page shows it), never sent.
        return _bulk(
            channels, kind=kind, state=AlertState.SILENCED, payload=transition_facts(row), **common
        )
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
            payload=transition_facts(row),
            **common,
        )
    if opening:
        openings = _recent_openings(tool, row, rule.window)
        if len(openings) >= rule.count:
            payload = {
                "reopen_count": len(openings),
                "window_seconds": rule.window.total_seconds(),
                "first_opened_at": iso(openings[0]),
                "last_opened_at": iso(row.at),
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
    return _bulk(channels, kind=kind, payload=transition_facts(row), **common)


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
        payload["last_opened_at"] = iso(row.at)
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
        "at": iso(action.at),
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
