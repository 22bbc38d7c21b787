"""What an alert says: the facts of its transition or operator action, and its Slack message."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any

from django.conf import settings
from django.db.models import Q
from django.urls import NoReverseMatch, reverse
from django.utils import timezone

from breakers.alerts.ledger import incident_ledger
from breakers.fleet.rules import OUT_STATES, CauseKind
from breakers.models import Alert, AlertKind, FleetTransition, Incident
from breakers.transports.slack_messages import (
    ClosedAlert,
    FlappingAlert,
    LedgerLine,
    ManualActionAlert,
    OpenedAlert,
    SlackMessage,
    build_closed_message,
    build_flapping_message,
    build_manual_action_message,
    build_opened_message,
)
from runs.incident_runs import IncidentMeasures, incident_measures
from runs.models import BreakerState, ToolCall


def is_opening(row: FleetTransition) -> bool:
    return row.from_state not in OUT_STATES and row.to_state in OUT_STATES


def is_closing(row: FleetTransition) -> bool:
    return row.from_state in OUT_STATES and row.to_state not in OUT_STATES


def is_announced(row: FleetTransition) -> bool:
    """Starts or ends an incident by itself (an operator's transitions have their own alert)."""
    return row.cause_kind != CauseKind.OPERATOR and (is_opening(row) or is_closing(row))


def incident_of(row: FleetTransition) -> Incident | None:
    incident = Incident.objects.filter(Q(opened_by=row) | Q(closed_by=row)).first()
    if incident is None:  # an opening that found its incident already open (out-of-order rows)
        incident = Incident.objects.filter(tool_id=row.tool_id, closed_at__isnull=True).first()
    return incident


def iso(value: datetime) -> str:
    return value.isoformat()


def transition_facts(row: FleetTransition) -> dict[str, Any]:
    return {
        "from_state": row.from_state,
        "to_state": row.to_state,
        "reason": row.reason,
        "at": iso(row.at),
        "cause_kind": row.cause_kind,
    }


def incident_cost(*, tool_name: str, start: datetime, end: datetime) -> IncidentMeasures:
    """Runs affected, their model spend and the tool's calls that reached the vendor, over
    [start, end): the same measure as the incident page (runs.incident_runs)."""
    return incident_measures(tool=tool_name, start=start, end=end)


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
            **_spend_evidence(row),
        )
    )


def _spend_evidence(row: FleetTransition) -> dict[str, Any]:
    """The spend rule's figures for the alert, when the spend rule opened the tool."""
    if row.cause_kind != CauseKind.SPEND:
        return {}
    cause = row.cause or {}
    spend = cause.get("spend_usd")
    runs = cause.get("runs")
    return {
        "spend_usd": Decimal(str(spend)) if isinstance(spend, int | float) and spend >= 0 else None,
        "spend_runs": runs if isinstance(runs, int) and runs >= 0 else 0,
    }


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
            ledger=_ledger_line(incident, closed_at) if incident is not None else None,
        )
    )


def _ledger_line(incident: Incident, closed_at: datetime) -> LedgerLine:
    ledger = incident_ledger(incident=incident, end=closed_at)

    def usd(value: float | None) -> Decimal | None:
        return None if value is None else Decimal(repr(value)).quantize(Decimal("0.01"))

    return LedgerLine(
        discovery_runs=ledger.discovery_runs,
        discovery_spend_usd=ledger.discovery_spend_usd,
        discovery_duration_s=ledger.discovery_duration_s,
        hidden_runs=ledger.hidden_runs,
        spend_per_hidden_run_usd=ledger.spend_per_hidden_run_usd,
        avoided_usd=usd(ledger.avoided_usd),
        avoided_low_usd=usd(ledger.avoided_low_usd),
        avoided_high_usd=usd(ledger.avoided_high_usd),
        method=ledger.method_text,
    )


def _manual_message(alert: Alert) -> SlackMessage:
    action = alert.operator_action
    assert action is not None
    state_after = str(action.after.get("state", ""))
    return build_manual_action_message(
        ManualActionAlert(
            tool=alert.tool.name,
            action=action.action,
            actor=f"{action.actor} via {action.via}" if action.via else action.actor,
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


def stored_message(message: dict[str, Any]) -> SlackMessage:
    return SlackMessage(text=message["text"], blocks=tuple(message["blocks"]))
