"""Incidents: the list, and one incident's timeline with what it cost next to a baseline.

The timeline merges what the fleet recorded about one stretch of a tool being out: the first
failure of the streak that opened it, each worker's failures (grouped per worker), the opening,
the alerts sent, each probe, each other transition, manual actions and the close. The comparison
puts the incident's runs, model spend and vendor calls next to the same measures over the same
length of time just before it, so "what did this outage cost" has a denominator.

Every part is capped; a tool that fails for days still gives a page of bounded size.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Literal

from django.db.models import Count, Max, Min, Q, Sum
from django.utils import timezone

from breakers.alerts.ledger import incident_ledger
from breakers.fleet.rules import CauseKind
from breakers.models import Alert, FleetTransition, Incident, OperatorAction, Probe
from breakers.replay.outage import ReplayResult, mode_order, replay_speed
from controlplane.dashboard.queries import WindowPage, page_window
from runs.cache_rules import CacheRule, cache_rules_for_models
from runs.incident_runs import IncidentMeasures, incident_measures, runs_affected
from runs.models import ModelCall, OutageReplay, Outcome, Run, ToolCall
from runs.outage_ledger import OutageLedger

INCIDENTS_PER_PAGE = 50
MAX_WORKER_GROUPS = 30
MAX_TIMELINE_TRANSITIONS = 200
MAX_TIMELINE_PROBES = 200
MAX_TIMELINE_ACTIONS = 100
MAX_TIMELINE_ALERTS = 100
MAX_AFFECTED_RUNS = 50
MAX_RULE_MODELS = 20  # models whose provider's caching rule is shown

EntryKind = Literal[
    "first_failure", "worker_failures", "open", "transition", "alert", "probe", "action", "close"
]
# Within one instant the story reads: failure, workers, open, then what followed; an alert
# always comes after the event it is about.
_KIND_ORDER: dict[str, int] = {
    "first_failure": 0,
    "worker_failures": 1,
    "open": 2,
    "action": 3,
    "probe": 4,
    "transition": 5,
    "close": 6,
    "alert": 7,
}


@dataclass(frozen=True)
class IncidentFilters:
    tool: str = ""
    status: str = ""  # "", "open" or "closed"

    @property
    def active(self) -> bool:
        return bool(self.tool or self.status)


def incidents_page(*, filters: IncidentFilters, page: int = 1) -> WindowPage[Incident]:
    incidents = Incident.objects.select_related("tool", "opened_by", "closed_by")
    if filters.tool:
        incidents = incidents.filter(tool__name=filters.tool)
    if filters.status == "open":
        incidents = incidents.filter(closed_at__isnull=True)
    elif filters.status == "closed":
        incidents = incidents.filter(closed_at__isnull=False)
    return page_window(
        incidents.order_by("-opened_at", "-id"), page=page, per_page=INCIDENTS_PER_PAGE
    )


@dataclass(frozen=True)
class WorkerFailures:
    worker_id: str
    failures: int
    attempts: int
    first_at: datetime
    last_at: datetime
    degraded: int = 0  # of `failures`, results that failed a result check


@dataclass(frozen=True)
class TimelineEntry:
    at: datetime
    kind: EntryKind
    row: Any = None  # the ToolCall, FleetTransition, Probe, OperatorAction or alert shown
    workers: WorkerFailures | None = None
    order: int = 0

    @property
    def sort_key(self) -> tuple[datetime, int, int]:
        return (self.at, _KIND_ORDER[self.kind], self.order)


# What happened around one tool in one window of time, [start, end).
Measures = IncidentMeasures


@dataclass(frozen=True)
class Comparison:
    during: Measures
    before: Measures

    def rows(self) -> list[tuple[str, Any, Any, str, bool]]:
        """(label, during, before, format, is a sub-measure) for the template."""
        d, b = self.during, self.before
        return [
            ("Runs affected (called the tool or had it removed)", d.runs, b.runs, "num", False),
            ("of which degraded", d.degraded_runs, b.degraded_runs, "num", True),
            ("Model calls of those runs", d.model_calls, b.model_calls, "num", False),
            ("Model spend of those runs", d.model_spend_usd, b.model_spend_usd, "usd", False),
            ("cached share of their input", d.cached_share, b.cached_share, "share", True),
            ("model calls with no known price", d.unpriced_calls, b.unpriced_calls, "num", True),
            ("Calls to the tool", d.tool_calls, b.tool_calls, "num", False),
            ("that reached the vendor", d.vendor_calls, b.vendor_calls, "num", True),
            ("HTTP attempts at the vendor", d.vendor_attempts, b.vendor_attempts, "num", True),
            ("failures (retryable or degraded)", d.failures, b.failures, "num", True),
            ("refused by a breaker (blocked)", d.blocked, b.blocked, "num", True),
        ]


@dataclass(frozen=True)
class IncidentPage:
    incident: Incident
    end: datetime  # closed_at, or now for an ongoing incident
    first_failure: ToolCall | None
    streak_consecutive: int | None
    streak_events_kept: int
    streak_workers: dict[str, int]
    worker_failures: list[WorkerFailures]
    timeline: list[TimelineEntry]
    comparison: Comparison
    affected_runs: list[Run]
    capped: list[str] = field(default_factory=list)  # the parts that hit their cap
    # The outage replay (simulate_outage) that was playing when the incident opened: the
    # comparison and the charts stay inside it (see ``replay_window``).
    replay: OutageReplay | None = None
    window: ReplayWindow | None = None
    ledger: OutageLedger | None = None
    cache_rules: list[CacheRule] = field(default_factory=list)

    @property
    def duration(self) -> timedelta:
        return self.end - self.incident.opened_at

    @property
    def replay_figures(self) -> dict[str, Any] | None:
        """What the replay's own table says of its mode, for the note beside the measures."""
        replay = self.replay
        if replay is None:
            return None
        result = ReplayResult.of(replay)
        return {
            "mode": replay.mode,
            "agent": result.agent,
            "speed": replay_speed(replay),
            "finished": replay.finished_at is not None,
            "runs": result.runs,
            "spend": result.model_spend_usd,
            "vendor_calls": result.web_search_calls,
            "batch": _batch_key(replay),
        }

    @property
    def baseline_clipped(self) -> bool:
        """The "before" window is shorter than the incident: it starts with the replay."""
        before = self.comparison.before
        return before.end - before.start < self.comparison.during.end - self.comparison.during.start


@dataclass(frozen=True)
class ReplayWindow:
    """Bounds for the measures of an incident opened during an outage replay.

    ``simulate_outage`` plays its modes one after another on one control plane, so "the same
    length of time before the incident" would reach into the previous mode's replay (its
    outage, its breaker) and an incident still open at a replay's end into the next one's. The
    measures and the charts are therefore kept within the replay's own run: its healthy
    baseline period is the reference, as on the Outages page.
    """

    not_before: datetime
    not_after: datetime | None
    replay: OutageReplay | None = None  # its runs are measured on its clock (pauses taken out)


def replay_of(incident: Incident) -> OutageReplay | None:
    """The outage replay that was playing when ``incident`` opened, if one was."""
    return (
        OutageReplay.objects.filter(started_at__lte=incident.opened_at)
        .filter(Q(finished_at__isnull=True) | Q(finished_at__gte=incident.opened_at))
        .order_by("-started_at", "-id")
        .first()
    )


def _batch_key(replay: OutageReplay) -> int:
    """The Outages page's ``?batch=`` of the replay's invocation (``ReplayBatch``)."""
    label = ReplayResult.of(replay).batch
    if label is None:
        return replay.pk
    same = OutageReplay.objects.filter(scenario__batch=label).only("pk", "mode")
    return min(same, key=lambda r: (mode_order(r.mode), r.pk), default=replay).pk


def replay_window(replay: OutageReplay | None) -> ReplayWindow | None:
    if replay is None:
        return None
    return ReplayWindow(not_before=replay.started_at, not_after=replay.finished_at, replay=replay)


def measured_windows(
    *, incident: Incident, end: datetime, window: ReplayWindow | None
) -> tuple[datetime, datetime, datetime]:
    """(before start, opened, during end): the incident's window and the same length of time
    just before it, both kept inside ``window`` when the incident belongs to a replay."""
    opened = incident.opened_at
    if window is not None and window.not_after is not None:
        end = max(opened, min(end, window.not_after))
    length = max(end - opened, timedelta(seconds=1))
    start = opened - length
    if window is not None:
        start = min(opened, max(start, window.not_before))
    return start, opened, end


def incident_page(*, incident: Incident, now: datetime | None = None) -> IncidentPage:
    now = now or timezone.now()
    tool = incident.tool
    end = incident.closed_at or now
    opened_by = incident.opened_by
    cause = opened_by.cause if isinstance(opened_by.cause, dict) else {}
    by_failures = opened_by.cause_kind == CauseKind.FAILURES
    events = [str(e) for e in cause.get("events", [])] if by_failures else []
    first_failure = _first_failure(tool.name, events)
    streak_start = first_failure.ts if first_failure is not None else incident.opened_at
    worker_failures = failures_by_worker(tool_name=tool.name, start=streak_start, end=end)

    entries: list[TimelineEntry] = []
    if first_failure is not None:
        entries.append(TimelineEntry(first_failure.ts, "first_failure", row=first_failure))
    entries += [
        TimelineEntry(group.first_at, "worker_failures", workers=group, order=i)
        for i, group in enumerate(worker_failures)
    ]
    entries.append(TimelineEntry(incident.opened_at, "open", row=opened_by))
    folded_actions = {opened_by.operator_action_id}
    if incident.closed_by is not None:
        entries.append(TimelineEntry(incident.closed_by.at, "close", row=incident.closed_by))
        folded_actions.add(incident.closed_by.operator_action_id)
    transitions = _transitions_during(incident, end)
    entries += [TimelineEntry(t.at, "transition", row=t, order=t.seq) for t in transitions]
    probes = list(
        Probe.objects.filter(
            tool=tool, started_at__gte=incident.opened_at, started_at__lte=end
        ).order_by("started_at", "id")[:MAX_TIMELINE_PROBES]
    )
    entries += [TimelineEntry(p.started_at, "probe", row=p, order=p.pk) for p in probes]
    actions = [
        action
        for action in OperatorAction.objects.filter(
            tool=tool, at__gte=incident.opened_at, at__lte=end
        ).order_by("at", "id")[:MAX_TIMELINE_ACTIONS]
        if action.pk not in folded_actions
    ]
    entries += [TimelineEntry(a.at, "action", row=a, order=a.pk) for a in actions]
    alerts = incident_alerts(incident=incident)
    entries += [TimelineEntry(a.at, "alert", row=a, order=i) for i, a in enumerate(alerts)]
    entries.sort(key=lambda entry: entry.sort_key)

    replay = replay_of(incident)
    window = replay_window(replay)
    before_start, opened, measured_end = measured_windows(incident=incident, end=end, window=window)
    capped = {
        "alerts": len(alerts) >= MAX_TIMELINE_ALERTS,
        "transitions": len(transitions) >= MAX_TIMELINE_TRANSITIONS,
        "probes": len(probes) >= MAX_TIMELINE_PROBES,
        "manual actions": len(actions) >= MAX_TIMELINE_ACTIONS,
        "workers": len(worker_failures) >= MAX_WORKER_GROUPS,
    }
    return IncidentPage(
        incident=incident,
        end=end,
        first_failure=first_failure,
        streak_consecutive=int(cause["consecutive"]) if "consecutive" in cause else None,
        streak_events_kept=len(events),
        streak_workers={str(k): int(v) for k, v in (cause.get("workers") or {}).items()},
        worker_failures=worker_failures,
        timeline=entries,
        comparison=Comparison(
            during=measures(tool_name=tool.name, start=opened, end=measured_end),
            before=measures(tool_name=tool.name, start=before_start, end=opened),
        ),
        affected_runs=list(
            runs_affected(tool=tool.name, start=incident.opened_at, end=end)
            .select_related("worker")
            .order_by("-started_at", "-id")[:MAX_AFFECTED_RUNS]
        ),
        capped=[what for what, hit in capped.items() if hit],
        replay=replay,
        window=window,
        ledger=incident_ledger(incident=incident, end=measured_end, baseline_start=before_start),
        cache_rules=_cache_rules(tool.name, opened, measured_end),
    )


def _cache_rules(tool_name: str, start: datetime, end: datetime) -> list[CacheRule]:
    """The caching rules of the providers of the models the incident's runs called."""
    affected = runs_affected(tool=tool_name, start=start, end=end).values("pk")
    models = (
        ModelCall.objects.filter(run_id__in=affected, ts__gte=start, ts__lt=end)
        .filter(Q(cache_read_tokens__isnull=False) | Q(cache_write_tokens__isnull=False))
        .values_list("model", flat=True)
        .distinct()[:MAX_RULE_MODELS]
    )
    return cache_rules_for_models(models)


def _first_failure(tool_name: str, events: list[str]) -> ToolCall | None:
    """The first failure of the streak that opened the breaker (the oldest id it kept)."""
    if not events:
        return None
    return (
        ToolCall.objects.filter(tool=tool_name, event_id__in=events[:1])
        .select_related("run", "worker")
        .first()
    )


def failures_by_worker(*, tool_name: str, start: datetime, end: datetime) -> list[WorkerFailures]:
    """Counted failures (retryable or degraded) of the tool per worker, from the streak's start
    to the incident's end.

    One grouped query on the (tool, ts) index; the workers with most failures first, capped.
    """
    rows = (
        ToolCall.objects.filter(
            tool=tool_name,
            outcome__in=(Outcome.RETRYABLE, Outcome.DEGRADED),
            ts__gte=start,
            ts__lte=end,
        )
        .values("worker__worker_id")
        .annotate(
            n=Count("id"),
            degraded=Count("id", filter=Q(outcome=Outcome.DEGRADED)),
            attempts=Sum("attempts"),
            first=Min("ts"),
            last=Max("ts"),
        )
        .order_by("-n", "first")[:MAX_WORKER_GROUPS]
    )
    return [
        WorkerFailures(
            r["worker__worker_id"],
            r["n"],
            r["attempts"] or 0,
            r["first"],
            r["last"],
            r["degraded"],
        )
        for r in rows
    ]


def _transitions_during(incident: Incident, end: datetime) -> list[FleetTransition]:
    # The opening and the close have entries of their own; operator transitions are shown as
    # the operator's action (who and why), so neither is repeated here.
    skip = [incident.opened_by_id, incident.closed_by_id]
    return list(
        FleetTransition.objects.filter(tool=incident.tool, at__gte=incident.opened_at, at__lte=end)
        .exclude(pk__in=[pk for pk in skip if pk is not None])
        .exclude(cause_kind=CauseKind.OPERATOR)
        .select_related("probe")
        .order_by("seq")[:MAX_TIMELINE_TRANSITIONS]
    )


# -- alerts -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class AlertEntry:
    """One alert about the incident, as the timeline shows it (never the webhook URL)."""

    at: datetime
    kind: str
    channel: str
    state: str
    attempts: int
    error: str


def incident_alerts(*, incident: Incident) -> list[AlertEntry]:
    """The alerts made about this incident, oldest first: those filed under it, and those of
    its opening and closing transitions (an alert made before the incident row existed)."""
    events = [pk for pk in (incident.opened_by_id, incident.closed_by_id) if pk is not None]
    alerts = (
        Alert.objects.filter(Q(incident=incident) | Q(transition_id__in=events))
        .select_related("channel")
        .order_by("created_at", "id")[:MAX_TIMELINE_ALERTS]
    )
    return [
        AlertEntry(
            at=alert.sent_at or alert.created_at,
            kind=alert.kind,
            channel=alert.channel.name,
            state=alert.state,
            attempts=alert.attempts,
            error=alert.last_error,
        )
        for alert in alerts
    ]


# -- comparison -----------------------------------------------------------------------------------


def measures(*, tool_name: str, start: datetime, end: datetime) -> Measures:
    """What happened around the tool over [start, end) (shared: ``runs.incident_runs``)."""
    return incident_measures(tool=tool_name, start=start, end=end)
