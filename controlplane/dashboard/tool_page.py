"""One tool, every scope side by side: the fleet breaker (Redis), each worker's breaker (what the
workers reported) and the active runs that removed it, with its recent calls and history.

Every list is capped: a page about one tool costs the same with 100 or 100 million calls stored.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import redis
from django.db.models import Count, F, Max, Q, Window
from django.db.models.functions import RowNumber
from django.utils import timezone

from breakers.alerts.silences import active_silence
from breakers.fleet.rules import OUT_STATES
from breakers.fleet_service import UnknownToolError, fleet_tool_details
from breakers.models import (
    FleetTransition,
    Incident,
    OperatorAction,
    Probe,
    Tool,
    ToolPolicy,
    ToolSilence,
    effective_policy,
)
from controlplane.dashboard.board import ACTIVE_RUN_WINDOW, WORKER_LIVE_WINDOW, WORKER_OUT_STATES
from runs.models import (
    BreakerState,
    Outcome,
    ReportedTransition,
    RunSource,
    RunStatus,
    Scope,
    ToolCall,
)

RECENT_CALLS = 25
RECENT_TRANSITIONS = 50
RECENT_PROBES = 20
RECENT_INCIDENTS = 20
RECENT_ACTIONS = 10
MAX_WORKER_ROWS = 50
MAX_RUN_ROWS = 50
# The worker table's call counts look back this far: long enough to see who is failing now.
WORKER_CALLS_WINDOW = timedelta(hours=1)


@dataclass(frozen=True)
class FleetScope:
    """The fleet breaker as Redis holds it, or None fields when Redis cannot be reached."""

    available: bool
    state: str
    consecutive: int | None
    streak_workers: dict[str, int] | None
    window: int | None
    open_until: datetime | None
    lease_holder: str


@dataclass(frozen=True)
class WorkerScopeRow:
    worker_id: str
    live: bool
    last_seen_at: datetime
    state: str | None  # its newest worker-scope transition for this tool, if any
    state_at: datetime | None
    reason: str
    calls: int  # in WORKER_CALLS_WINDOW
    failures: int
    last_call_at: datetime | None

    @property
    def is_out(self) -> bool:
        return self.state in WORKER_OUT_STATES


@dataclass(frozen=True)
class ToolPage:
    tool: Tool
    policy: ToolPolicy | None
    effective: Any  # FleetPolicy
    fleet: FleetScope
    workers: list[WorkerScopeRow]
    workers_out: int
    run_removals: list[ReportedTransition]
    recent_calls: list[ToolCall]
    transitions: list[FleetTransition]
    probes: list[Probe]
    incidents: list[Incident]
    actions: list[OperatorAction]
    generated_at: datetime
    # The silence holding its repeat alerts now (set from Slack), if any.
    silence: ToolSilence | None = None

    @property
    def is_forced(self) -> bool:
        return self.fleet.state in (BreakerState.FORCED_OPEN, BreakerState.FORCED_CLOSED)

    @property
    def is_out(self) -> bool:
        return self.fleet.state in OUT_STATES

    @property
    def otlp_calls(self) -> int:
        """Recent calls reported by OpenTelemetry traces, which cannot remove the tool."""
        return sum(1 for call in self.recent_calls if call.run.source == RunSource.OTLP)


def tool_page(*, tool: Tool, now: datetime | None = None) -> ToolPage:
    now = now or timezone.now()
    policy = getattr(tool, "policy", None)
    workers = worker_scope_rows(tool_name=tool.name, now=now)
    return ToolPage(
        tool=tool,
        policy=policy,
        effective=effective_policy(policy),
        fleet=fleet_scope(tool=tool),
        workers=workers,
        workers_out=sum(1 for row in workers if row.is_out and row.live),
        run_removals=run_scope_removals(tool_name=tool.name, now=now),
        recent_calls=list(
            ToolCall.objects.filter(tool=tool.name)
            .select_related("run", "worker")
            .order_by("-ts", "-id")[:RECENT_CALLS]
        ),
        transitions=list(
            tool.transitions.select_related("operator_action", "probe").order_by("-seq")[
                :RECENT_TRANSITIONS
            ]
        ),
        probes=list(tool.probes.order_by("-started_at", "-id")[:RECENT_PROBES]),
        incidents=list(tool.incidents.order_by("-opened_at", "-id")[:RECENT_INCIDENTS]),
        actions=list(tool.operator_actions.order_by("-at", "-id")[:RECENT_ACTIONS]),
        generated_at=now,
        silence=active_silence(tool.pk, now=now),
    )


def fleet_scope(*, tool: Tool) -> FleetScope:
    try:
        details = fleet_tool_details(tool_name=tool.name)
    except (redis.RedisError, UnknownToolError):
        return FleetScope(False, tool.state, None, None, None, tool.open_until, "")
    return FleetScope(
        available=True,
        state=details["state"],
        consecutive=details["consecutive"],
        streak_workers=details["workers"],
        window=details["window"],
        open_until=details["open_until"],
        lease_holder=details["lease_holder"],
    )


def worker_scope_rows(*, tool_name: str, now: datetime) -> list[WorkerScopeRow]:
    """Every worker that reported a worker-scope state for the tool or called it lately.

    Two grouped queries (newest state per worker; calls per worker in the last hour), merged;
    workers holding the tool out come first, then live ones, then by their last call.
    """
    latest = (
        ReportedTransition.objects.filter(scope=Scope.WORKER, tool=tool_name)
        .annotate(
            newest=Window(
                RowNumber(),
                partition_by=[F("worker_id")],
                order_by=[F("ts").desc(), F("id").desc()],
            )
        )
        .filter(newest=1)
        .values_list("worker__worker_id", "worker__last_seen_at", "state", "ts", "reason")
        .order_by("-ts")[: MAX_WORKER_ROWS * 2]
    )
    calls = (
        ToolCall.objects.filter(tool=tool_name, ts__gte=now - WORKER_CALLS_WINDOW)
        .values("worker__worker_id", "worker__last_seen_at")
        .annotate(
            calls=Count("id"),
            failures=Count("id", filter=Q(outcome__in=(Outcome.RETRYABLE, Outcome.DEGRADED))),
            last_call=Max("ts"),
        )
        .order_by("-last_call")[: MAX_WORKER_ROWS * 2]
    )
    merged: dict[str, dict[str, Any]] = {}
    for worker_id, seen, state, at, reason in latest:
        merged[worker_id] = {"seen": seen, "state": state, "at": at, "reason": reason}
    for row in calls:
        entry = merged.setdefault(row["worker__worker_id"], {"seen": row["worker__last_seen_at"]})
        entry.update(calls=row["calls"], failures=row["failures"], last_call=row["last_call"])
    live_since = now - WORKER_LIVE_WINDOW
    rows = [
        WorkerScopeRow(
            worker_id=worker_id,
            live=entry["seen"] >= live_since,
            last_seen_at=entry["seen"],
            state=entry.get("state"),
            state_at=entry.get("at"),
            reason=entry.get("reason", ""),
            calls=entry.get("calls", 0),
            failures=entry.get("failures", 0),
            last_call_at=entry.get("last_call"),
        )
        for worker_id, entry in merged.items()
    ]
    rows.sort(
        key=lambda r: (
            not (r.is_out and r.live),
            not r.live,
            -(r.last_call_at or r.last_seen_at).timestamp(),
            r.worker_id,
        )
    )
    return rows[:MAX_WORKER_ROWS]


def run_scope_removals(*, tool_name: str, now: datetime) -> list[ReportedTransition]:
    """Active runs whose own breaker removed the tool: it stays out for the rest of each."""
    return list(
        ReportedTransition.objects.filter(
            tool=tool_name,
            scope=Scope.RUN,
            state=BreakerState.OPEN,
            run__status=RunStatus.RUNNING,
            run__started_at__gte=now - ACTIVE_RUN_WINDOW,
        )
        .select_related("run", "worker")
        .order_by("-ts", "-id")[:MAX_RUN_ROWS]
    )
