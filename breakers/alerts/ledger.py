"""The outage ledger of one incident (``runs.outage_ledger``), from the incident's own facts:
where its streak began, when it ended, and the failed probes the runs did not see."""

from __future__ import annotations

from datetime import datetime

from django.db.models import Max
from django.utils import timezone

from breakers.fleet.rules import CauseKind
from breakers.models import Incident, Probe
from runs.models import ToolCall
from runs.outage_ledger import OutageLedger, outage_ledger

__all__ = ("incident_ledger", "streak_start")


def streak_start(incident: Incident) -> datetime:
    """The first failure of the streak that opened the incident, or its opening."""
    opened_by = incident.opened_by
    cause = opened_by.cause if isinstance(opened_by.cause, dict) else {}
    events = [str(e) for e in cause.get("events", [])][:200]
    first = None
    if opened_by.cause_kind == CauseKind.FAILURES and events:
        first = (
            ToolCall.objects.filter(tool=incident.tool.name, event_id__in=events)
            .order_by("ts")
            .values_list("ts", flat=True)
            .first()
        )
    return min(first, incident.opened_at) if first is not None else incident.opened_at


def incident_ledger(
    *,
    incident: Incident,
    end: datetime | None = None,
    baseline_start: datetime | None = None,
) -> OutageLedger:
    """The ledger from the streak's start to ``end`` (the close, or now); healthy runs are looked
    for from ``baseline_start`` (default: as long before the streak as the incident lasted)."""
    start = streak_start(incident)
    end = end or incident.closed_at or timezone.now()
    end = max(end, start)
    if baseline_start is None:
        baseline_start = start - (end - start)
    failed_probe = Probe.objects.filter(
        tool=incident.tool, ok=False, started_at__gte=start, started_at__lt=end
    ).aggregate(at=Max("started_at"))["at"]
    return outage_ledger(
        tool=incident.tool.name,
        start=start,
        end=end,
        baseline_start=min(baseline_start, start),
        failures_seen_until=failed_probe,
    )
