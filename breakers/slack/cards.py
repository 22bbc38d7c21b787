"""An incident's card as it should read now, from the database: the fleet rows, who
acknowledged, who forced, who silenced, and the ledger's figures once it is over."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from decimal import Decimal

from django.utils import timezone

from breakers.alerts.facts import incident_cost, incident_url
from breakers.alerts.ledger import incident_ledger
from breakers.alerts.silences import active_silence
from breakers.models import (
    Incident,
    OperatorAction,
    SlackIncidentMessage,
)
from breakers.transports.slack_cards import IncidentCard
from breakers.transports.slack_messages import format_usd
from runs.models import ToolCall

__all__ = ("actor_name", "incident_card", "ledger_figures")


def actor_name(action: OperatorAction) -> str:
    """Who did it, as a card names them: "@alice via Slack", else the audit actor."""
    if action.via.startswith("Slack (") and action.via.endswith(")"):
        return f"{action.via[len('Slack (') : -1]} via Slack"
    return action.actor


def ledger_figures(incident: Incident) -> Sequence[tuple[str, str]]:
    """The outage ledger's figures for a finished incident (label, value): the incident page's
    own measures, then the ledger's lines (``runs.outage_ledger``); its method is written out
    on the incident page the card links to."""
    if incident.closed_at is None:
        return ()
    cost = incident_cost(
        tool_name=incident.tool.name, start=incident.opened_at, end=incident.closed_at
    )
    ledger = incident_ledger(incident=incident, end=incident.closed_at)
    per_run = ledger.spend_per_hidden_run_usd
    figures = [
        ("Runs affected", f"{cost.runs:,}"),
        ("Model spend during the incident", format_usd(cost.model_spend_usd)),
        ("Vendor calls during the incident", f"{cost.vendor_calls:,}"),
        (
            "Runs that hit the failure",
            f"{ledger.discovery_runs:,}, {format_usd(ledger.discovery_spend_usd)}",
        ),
        (
            "Runs while it was hidden",
            f"{ledger.hidden_runs:,}"
            + (f", {format_usd(per_run)} per run" if per_run is not None else ""),
        ),
    ]
    if ledger.avoided_usd is not None:
        low, high = ledger.avoided_low_usd or 0.0, ledger.avoided_high_usd or 0.0
        figures.append(
            (
                "Spend avoided (estimate)",
                f"{format_usd(_usd(ledger.avoided_usd))} (range {format_usd(_usd(low))} to "
                f"{format_usd(_usd(high))}; {ledger.failing_run.method}, method on the "
                "incident page)",
            )
        )
    return tuple(figures)


def _usd(value: float) -> Decimal:
    return Decimal(repr(value))


def _last_error(incident: Incident) -> str:
    cause = incident.opened_by.cause if isinstance(incident.opened_by.cause, dict) else {}
    events = [str(e) for e in (cause.get("events") or [])][:200]
    if not events:
        return ""
    calls = ToolCall.objects.filter(event_id__in=events).exclude(error="").order_by("-ts")
    return calls.values_list("error", flat=True).first() or ""


def _forcing(incident: Incident) -> OperatorAction | None:
    """The newest force action on the tool since the incident opened (what holds it now)."""
    return (
        OperatorAction.objects.filter(
            tool_id=incident.tool_id,
            at__gte=incident.opened_at,
            action__in=["force_open", "force_close"],
        )
        .order_by("-at", "-pk")
        .first()
    )


def incident_card(
    incident: Incident, *, now: datetime | None = None, light: bool = False
) -> IncidentCard:
    """``light``: without the last error and the ledger's figures (a press's checks need only
    the state, within Slack's 3 s)."""
    now = now or timezone.now()
    tool = incident.tool
    message = SlackIncidentMessage.objects.filter(incident=incident).first()
    forcing = _forcing(incident) if tool.forced else None
    silence = active_silence(tool.pk, now=now)
    return IncidentCard(
        incident_id=incident.pk,
        tool=tool.name,
        state=tool.state,
        opened_at=incident.opened_at,
        closed_at=incident.closed_at,
        reason=incident.reason or incident.opened_by.reason,
        last_error="" if light else _last_error(incident),
        acknowledged_by=message.acknowledged_by if message else "",
        acknowledged_at=message.acknowledged_at if message else None,
        forced_by=actor_name(forcing) if forcing else "",
        forced_reason=forcing.reason if forcing else "",
        silenced_by=silence.set_by if silence else "",
        silenced_until=silence.until if silence else None,
        silenced_until_recovery=bool(silence and silence.until is None),
        figures=() if light else ledger_figures(incident),
        dashboard_url=incident_url(incident.pk),
        now=now,
    )
