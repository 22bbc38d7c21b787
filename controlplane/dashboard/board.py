"""The board: every tool's fleet state with the live counters behind it, in a bounded read.

Whatever the number of tools, workers, runs and calls stored, one board costs six database
queries (tools with their policies; the worker-scope states of live workers; the run-scope
removals in active runs; the silences in force; two counts) and one Redis round trip (a
pipeline over every shown tool).

Redis decides the fleet state; the ``Tool`` rows mirror it as of the newest persisted transition.
The board reads the state, the consecutive count and the streak's workers from Redis. When Redis
cannot be reached, or has lost its data and is being rebuilt, the board shows the database's copy
of the states and says plainly that the live counters are unknown, instead of failing.
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Any

import redis
from django.db.models import (
    Case,
    CharField,
    Count,
    F,
    IntegerField,
    OuterRef,
    Subquery,
    Value,
    When,
    Window,
)
from django.db.models.functions import RowNumber
from django.utils import timezone

from breaker_panel.classify import DEGRADED_PREFIX
from breakers.fleet.rules import OUT_STATES, TrialMode
from breakers.fleet.store import ToolState
from breakers.fleet_service import fleet_store
from breakers.models import Tool, ToolSilence, effective_policy, ms_to_datetime
from runs.models import (
    BreakerState,
    Outcome,
    ReportedTransition,
    Run,
    RunStatus,
    Scope,
    ToolCall,
    Worker,
)

# A worker is live if it sent a batch in the last five minutes: agents report as they work, so a
# worker silent for longer has stopped (or lost the control plane) and its in-process worker
# breakers no longer decide anyone's toolset.
WORKER_LIVE_WINDOW = timedelta(minutes=5)
# A run still "running" hours after it started was abandoned (its agent died before
# run.finished); counting it as active would keep a tool "removed" on the board forever.
ACTIVE_RUN_WINDOW = timedelta(hours=6)
# More tools than this and the board shows the most severe first and asks for a search.
BOARD_MAX_TOOLS = 1000
# Worker-scope breakers that keep a tool out of a worker's runs (half-open lets one trial in).
WORKER_OUT_STATES = (BreakerState.OPEN, BreakerState.HALF_OPEN)
# Order of the board: what is out of service first, operator overrides next, then streaks.
_SEVERITY = {
    BreakerState.FORCED_OPEN: 0,
    BreakerState.OPEN: 1,
    BreakerState.HALF_OPEN: 2,
    BreakerState.FORCED_CLOSED: 3,
}
_CLOSED_WITH_STREAK, _CLOSED = 4, 5


class Counters(StrEnum):
    LIVE = "live"
    UNAVAILABLE = "unavailable"  # Redis cannot be reached
    REBUILDING = "rebuilding"  # Redis answers but has lost the fleet's state


class StateFilter(StrEnum):
    ANY = ""
    OUT = "out"  # out of the agents' toolsets: open, half-open, forced open
    CLOSED = BreakerState.CLOSED.value
    OPEN = BreakerState.OPEN.value
    HALF_OPEN = BreakerState.HALF_OPEN.value
    FORCED_OPEN = BreakerState.FORCED_OPEN.value
    FORCED_CLOSED = BreakerState.FORCED_CLOSED.value


@dataclass(frozen=True)
class BoardFilters:
    state: StateFilter = StateFilter.ANY
    q: str = ""

    @property
    def active(self) -> bool:
        return bool(self.state or self.q)

    def matches(self, row: BoardRow) -> bool:
        if self.q and self.q.casefold() not in row.name.casefold():
            return False
        if self.state == StateFilter.OUT:
            return row.state in OUT_STATES
        return not self.state or row.state == self.state


@dataclass(frozen=True)
class LiveTool:
    """One tool as Redis holds it right now."""

    state: str
    since: datetime | None
    reason: str
    consecutive: int
    streak_workers: dict[str, int]
    # Half-open for an agent's trial (no probe) and no agent holds the lease: since when.
    waiting_since: datetime | None = None


@dataclass(frozen=True)
class BoardRow:
    pk: int
    name: str
    state: str
    since: datetime | None
    reason: str
    # None when the live counters are unknown (Redis down or rebuilding).
    consecutive: int | None
    threshold: int
    streak_workers: tuple[str, ...] | None
    min_workers: int
    workers_open: tuple[str, ...]
    runs_removed: int
    # Half-open, waiting for a run that offers the tool to make its trial call: since when.
    waiting_since: datetime | None = None
    # Its repeat alerts are silenced (from Slack): by whom, until when (None: until recovery).
    silenced_by: str = ""
    silenced_until: datetime | None = None
    # Out of service after results that failed a check: the newest check's reason (agent text).
    degraded: str = ""

    @property
    def severity(self) -> int:
        if self.state in _SEVERITY:
            return _SEVERITY[BreakerState(self.state)]
        return _CLOSED_WITH_STREAK if self.consecutive else _CLOSED

    @property
    def is_out(self) -> bool:
        return self.state in OUT_STATES

    @property
    def is_forced(self) -> bool:
        return self.state in (BreakerState.FORCED_OPEN, BreakerState.FORCED_CLOSED)

    @property
    def streak_near_threshold(self) -> bool:
        return bool(self.consecutive) and (self.consecutive or 0) * 2 >= self.threshold

    def fingerprint(self) -> list[Any]:
        since = self.since.isoformat() if self.since else None
        return [
            self.pk, self.name, self.state, since, self.reason, self.consecutive, self.threshold,
            self.streak_workers, self.min_workers, self.workers_open, self.runs_removed,
            self.waiting_since.isoformat() if self.waiting_since else None,
            self.silenced_by, self.silenced_until.isoformat() if self.silenced_until else None,
            self.degraded,
        ]  # fmt: skip


@dataclass(frozen=True)
class Board:
    rows: list[BoardRow]  # after the filters
    state_counts: dict[str, int]  # the whole fleet, before the filters
    tools_total: int
    truncated: bool
    live_workers: int
    active_runs: int
    counters: Counters
    generated_at: datetime

    @property
    def out_of_service(self) -> int:
        return sum(self.state_counts.get(state, 0) for state in OUT_STATES)

    def fingerprint(self) -> list[Any]:
        """Everything the board shows, except the time it was made (see ``board_etag``)."""
        return [
            [row.fingerprint() for row in self.rows],
            sorted(self.state_counts.items()),
            self.tools_total,
            self.truncated,
            self.live_workers,
            self.active_runs,
            self.counters.value,
        ]


def board_etag(board: Board, *, filters: BoardFilters, variant: str) -> str:
    """A strong ETag of what the board shows to this kind of user with these filters.

    Made from the data, not the rendered HTML, so an unchanged board is answered with a 304
    without rendering it. Durations ("open for 3 m") are not in it: the page counts them up
    from the absolute ``since`` times, so the board does not change every second.
    """
    payload = json.dumps(
        [board.fingerprint(), filters.state.value, filters.q, variant], default=str
    ).encode()
    return '"b-' + hashlib.sha256(payload).hexdigest()[:32] + '"'


def fleet_board(*, filters: BoardFilters, now: datetime | None = None) -> Board:
    now = now or timezone.now()
    tools = list(
        Tool.objects.select_related("policy")
        .annotate(last_degraded=_last_degraded())
        .order_by(_db_severity(), "name")[: BOARD_MAX_TOOLS + 1]
    )
    truncated = len(tools) > BOARD_MAX_TOOLS
    tools = tools[:BOARD_MAX_TOOLS]
    counters, live = read_live_tools((tool.name for tool in tools), now=now)
    workers_open = worker_scope_open(now=now)
    runs_removed = run_removals(now=now)
    silences = active_silences(now=now)
    rows = [
        _row(tool, live.get(tool.name), counters, workers_open, runs_removed, silences.get(tool.pk))
        for tool in tools
    ]
    rows.sort(key=lambda row: (row.severity, row.name))
    return Board(
        rows=[row for row in rows if filters.matches(row)],
        state_counts=dict(Counter(row.state for row in rows)),
        tools_total=len(rows),
        truncated=truncated,
        live_workers=Worker.objects.filter(last_seen_at__gte=now - WORKER_LIVE_WINDOW).count(),
        active_runs=active_runs(now=now).count(),
        counters=counters,
        generated_at=now,
    )


# The calls that opened a tool were made (by the agents' clocks) shortly before it opened.
DEGRADED_MARGIN = timedelta(minutes=15)


def _last_degraded() -> Case:
    """For a tool out of service, the error of its newest degraded call since it went out (the
    result check's reason): in the tools query itself, looked up only for tools that are out."""
    newest = ToolCall.objects.filter(
        tool=OuterRef("name"),
        outcome=Outcome.DEGRADED,
        ts__gte=OuterRef("since") - DEGRADED_MARGIN,
    ).order_by("-ts")
    return Case(
        When(state__in=list(OUT_STATES), then=Subquery(newest.values("error")[:1])),
        default=Value(""),
        output_field=CharField(),
    )


def _db_severity() -> Case:
    # Mirrors _SEVERITY on the database's copy of the state, so a capped board keeps the tools
    # that are out of service (Redis and the mirror agree but for a transaction in flight).
    return Case(
        *(When(state=state, then=Value(rank)) for state, rank in _SEVERITY.items()),
        default=Value(_CLOSED),
        output_field=IntegerField(),
    )


def _row(
    tool: Tool,
    live: LiveTool | None,
    counters: Counters,
    workers_open: Mapping[str, tuple[str, ...]],
    runs_removed: Mapping[str, int],
    silence: ToolSilence | None = None,
) -> BoardRow:
    policy = effective_policy(getattr(tool, "policy", None))
    if live is None:
        state, since, reason = tool.state, tool.since, tool.reason
        consecutive, streak = None, None
    else:
        state, since, reason = live.state, live.since, live.reason
        consecutive, streak = live.consecutive, tuple(sorted(live.streak_workers))
    return BoardRow(
        pk=tool.pk,
        name=tool.name,
        state=state,
        since=since or tool.first_seen_at,
        reason=reason,
        consecutive=consecutive if counters == Counters.LIVE else None,
        threshold=policy.threshold,
        streak_workers=streak if counters == Counters.LIVE else None,
        min_workers=policy.min_workers,
        workers_open=workers_open.get(tool.name, ()),
        runs_removed=runs_removed.get(tool.name, 0),
        waiting_since=None if live is None else live.waiting_since,
        silenced_by=silence.set_by if silence else "",
        silenced_until=silence.until if silence else None,
        degraded=(getattr(tool, "last_degraded", "") or "").removeprefix(DEGRADED_PREFIX)
        if state in OUT_STATES
        else "",
    )


def active_silences(*, now: datetime) -> dict[int, ToolSilence]:
    """Each tool's silence in force now (the newest), in one query."""
    rows = ToolSilence.objects.in_force(now).order_by("tool_id", "-set_at", "-pk")
    found: dict[int, ToolSilence] = {}
    for row in rows[:BOARD_MAX_TOOLS]:
        found.setdefault(row.tool_id, row)
    return found


def read_live_tools(
    names: Iterable[str], *, now: datetime | None = None
) -> tuple[Counters, dict[str, LiveTool]]:
    """Every named tool's state, consecutive count and streak workers: one pipelined round trip.

    ``(UNAVAILABLE, {})`` when Redis cannot be reached (its client has a socket timeout), and
    ``(REBUILDING, …)`` when Redis has lost the fleet's state and Celery's tick is restoring it
    from the database; tools missing from the result are shown from the database's copy.
    """
    store = fleet_store()
    try:
        generation, tools = store.live(list(names))
    except redis.RedisError:
        return Counters.UNAVAILABLE, {}
    now_ms = int((now or timezone.now()).timestamp() * 1000)
    default_trial = store.defaults.trial.value
    live = {
        name: LiveTool(
            state=tool.state.state.value,
            since=ms_to_datetime(tool.state.since),
            reason=tool.state.reason,
            consecutive=tool.state.consecutive,
            streak_workers=tool.workers,
            waiting_since=waiting_for_trial(tool.state, default_trial=default_trial, now=now_ms),
        )
        for name, tool in tools.items()
    }
    return (Counters.REBUILDING if generation is None else Counters.LIVE), live


def waiting_for_trial(state: ToolState, *, default_trial: str, now: int) -> datetime | None:
    """Since when a half-open tool without a probe has waited for an agent's trial call: no
    run that offers it holds the lease (since it went half-open, or the last lease lapsed).
    No Celery probe retries such a tool, so the board says how long it has waited."""
    if state.state != BreakerState.HALF_OPEN or (state.trial or default_trial) != TrialMode.LEASE:
        return None
    if state.lease_holder and now < state.lease_until:
        return None  # a worker holds the lease: its run's call is on its way
    return ms_to_datetime(max(state.since, state.lease_until))


def worker_scope_open(*, now: datetime) -> dict[str, tuple[str, ...]]:
    """Per tool, the live workers whose own (worker-scope) breaker has it open or half-open.

    A worker's breaker state is the newest worker-scope transition it reported for the tool;
    only live workers count, because a stopped worker's breakers no longer decide anything.
    """
    newest = (
        # run__isnull: the worker's own transitions; the per-run copies of a worker-scope removal
        # (reported with a run id) must not take part in the newest-per-worker ranking.
        ReportedTransition.objects.filter(
            scope=Scope.WORKER,
            run__isnull=True,
            worker__last_seen_at__gte=now - WORKER_LIVE_WINDOW,
        )
        .annotate(
            rank=Window(
                RowNumber(),
                partition_by=[F("worker_id"), F("tool")],
                order_by=[F("ts").desc(), F("id").desc()],
            )
        )
        .filter(rank=1)
        .values("pk")
    )
    # The state is tested on the newest row, outside the ranking: filtering it inside would
    # rank only the "out" rows and miss a worker whose breaker has closed again since.
    latest = ReportedTransition.objects.filter(
        pk__in=newest, state__in=WORKER_OUT_STATES
    ).values_list("tool", "worker__worker_id")
    by_tool: dict[str, list[str]] = defaultdict(list)
    for tool, worker_id in latest:
        by_tool[tool].append(worker_id)
    return {tool: tuple(sorted(workers)) for tool, workers in by_tool.items()}


def active_runs(*, now: datetime) -> Any:
    return Run.objects.filter(status=RunStatus.RUNNING, started_at__gte=now - ACTIVE_RUN_WINDOW)


def run_removals(*, now: datetime) -> dict[str, int]:
    """Per tool, the active runs in which it is removed, whichever breaker removed it.

    The SDK reports every per-run removal (the run's own breaker, its worker's, the fleet's) as an
    ``open`` transition carrying that run's id, so a run counts once here whatever the scope. A
    tool removed from a run stays removed for the rest of that run, so one ``open`` is enough.
    """
    rows = (
        ReportedTransition.objects.filter(
            state=BreakerState.OPEN,
            run__isnull=False,
            run__status=RunStatus.RUNNING,
            run__started_at__gte=now - ACTIVE_RUN_WINDOW,
        )
        .values("tool")
        .annotate(runs=Count("run_id", distinct=True))
        .values_list("tool", "runs")
    )
    return dict(rows)
