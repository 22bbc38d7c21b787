"""The outage ledger of one incident (``runs.outage_ledger``), from the incident's own facts:
where its streak began, when it ended, and the failed probes the runs did not see."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from django.db.models import Max, Q
from django.utils import timezone

from breakers.fleet.rules import CauseKind
from breakers.models import Incident, Probe
from runs.models import ToolCall
from runs.outage_ledger import LedgerWindow, OutageLedger, outage_ledgers

__all__ = ("incident_ledger", "incident_ledgers", "streak_start", "streak_starts")


def streak_start(incident: Incident) -> datetime:
    """The first failure of the streak that opened the incident, or its opening."""
    return streak_starts([incident])[0]


def _streak_events(incident: Incident) -> list[str]:
    opened_by = incident.opened_by
    if opened_by.cause_kind != CauseKind.FAILURES:
        return []
    cause = opened_by.cause if isinstance(opened_by.cause, dict) else {}
    return [str(e) for e in cause.get("events", [])][:200]


def streak_starts(incidents: Sequence[Incident]) -> list[datetime]:
    """``streak_start`` of each incident, in one query for all of them."""
    events = {incident.pk: _streak_events(incident) for incident in incidents}
    wanted = Q()
    for incident in incidents:
        if events[incident.pk]:
            wanted |= Q(tool=incident.tool.name, event_id__in=events[incident.pk])
    first: dict[tuple[str, str], datetime] = {}
    if wanted:
        calls = ToolCall.objects.filter(wanted).values_list("tool", "event_id", "ts")
        # An event id is unique per worker only: the earliest of the rows that share one.
        for tool, event_id, ts in calls:
            key = (tool, event_id)
            first[key] = min(ts, first.get(key, ts))
    starts = []
    for incident in incidents:
        times = [
            first[key]
            for key in ((incident.tool.name, e) for e in events[incident.pk])
            if key in first
        ]
        starts.append(min([*times, incident.opened_at]))
    return starts


def incident_ledger(
    *,
    incident: Incident,
    end: datetime | None = None,
    baseline_start: datetime | None = None,
) -> OutageLedger:
    """The ledger from the streak's start to ``end`` (the close, or now); healthy runs are looked
    for from ``baseline_start`` (default: as long before the streak as the incident lasted)."""
    return incident_ledgers([incident], ends=[end], baseline_starts=[baseline_start])[0]


def incident_ledgers(
    incidents: Sequence[Incident],
    *,
    ends: Sequence[datetime | None] | None = None,
    baseline_starts: Sequence[datetime | None] | None = None,
) -> list[OutageLedger]:
    """``incident_ledger`` of each incident, in as many queries for any number of them."""
    ends = ends or [None] * len(incidents)
    baseline_starts = baseline_starts or [None] * len(incidents)
    now = timezone.now()
    windows = []
    for incident, start, end, baseline_start in zip(
        incidents, streak_starts(incidents), ends, baseline_starts, strict=True
    ):
        end = max(end or incident.closed_at or now, start)
        if baseline_start is None:
            baseline_start = start - (end - start)
        windows.append((incident, start, end, min(baseline_start, start)))
    # The last failed probe of each window, as one aggregate per window in a single query: the
    # probes themselves are never loaded (a days-long incident may have thousands).
    probes = Q()
    last_failed = {}
    for i, (incident, start, end, _) in enumerate(windows):
        window = Q(tool_id=incident.tool_id, started_at__gte=start, started_at__lt=end)
        probes |= window
        last_failed[f"w{i}"] = Max("started_at", filter=window)
    seen_until = Probe.objects.filter(probes, ok=False).aggregate(**last_failed) if windows else {}
    return outage_ledgers(
        [
            LedgerWindow(
                tool=incident.tool.name,
                start=start,
                end=end,
                baseline_start=baseline_start,
                failures_seen_until=seen_until[f"w{i}"],
            )
            for i, (incident, start, end, baseline_start) in enumerate(windows)
        ]
    )
