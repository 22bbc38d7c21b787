"""Read-side functions for the dashboard's run pages.

Every function returns a bounded amount of data whatever the size of the tables: lists are
windows (LIMIT n+1 to know whether there is more, no COUNT(*) over a growing table), and a run's
timeline is capped per kind of step with the run's own totals saying how much was left out.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Literal

from django.db.models import (
    CharField,
    ExpressionWrapper,
    F,
    Model,
    OuterRef,
    QuerySet,
    Subquery,
)
from django.db.models.functions import Length
from django.db.models.lookups import StartsWith
from django.utils import timezone

from breakers.models import OperatorAction
from breakers.replay.outage import ReplayClock
from runs.models import (
    ModelCall,
    OutageReplay,
    ReportedTransition,
    Run,
    Scope,
    ToolCall,
)
from runs.notice_rebuild import REMOVING_STATES, NoticeReplay

RUNS_PER_PAGE = 50
# A run has a step budget of ~20; these caps only bite for a runaway or hostile agent.
TIMELINE_MAX_MODEL_CALLS = 500
TIMELINE_MAX_TOOL_CALLS = 1000
TIMELINE_MAX_TRANSITIONS = 200


@dataclass(frozen=True)
class RunFilters:
    run_id: str = ""
    agent: str = ""
    worker: str = ""
    status: str = ""
    degraded: bool | None = None

    @property
    def active(self) -> bool:
        return bool(self.run_id or self.agent or self.worker or self.status) or (
            self.degraded is not None
        )


@dataclass(frozen=True)
class RunsPage:
    runs: list[Run]
    number: int
    has_next: bool

    @property
    def has_previous(self) -> bool:
        return self.number > 1


def filtered_runs(*, filters: RunFilters) -> QuerySet[Run]:
    # Exact matches only: each one can use an index (run_id unique, agent, worker), where a
    # substring search would scan the whole table as it grows.
    runs = Run.objects.select_related("worker")
    if filters.run_id:
        runs = runs.filter(run_id=filters.run_id)
    if filters.agent:
        runs = runs.filter(agent=filters.agent)
    if filters.worker:
        runs = runs.filter(worker__worker_id=filters.worker)
    if filters.status:
        runs = runs.filter(status=filters.status)
    if filters.degraded is not None:
        runs = runs.filter(degraded=filters.degraded)
    # id breaks ties between runs that started in the same microsecond, so pages never overlap.
    return with_replay(runs).order_by("-started_at", "-id")


def with_replay(runs: QuerySet[Run]) -> QuerySet[Run]:
    """Each run with the outage replay that played it, or None: ``replay_pk``, ``replay_speed``.

    A replay's runs come from workers named with its prefix (the longest matching prefix wins, as
    on the outages page). Such a run's timestamps are real, compressed by the replay's speed, while
    its steps report the story's (simulated) durations: a page showing both must convert one.
    Two correlated lookups per shown run in the small replay table.
    """
    worker_name = ExpressionWrapper(OuterRef("worker__worker_id"), output_field=CharField())
    owner = OutageReplay.objects.filter(StartsWith(worker_name, F("worker_prefix"))).order_by(
        Length("worker_prefix").desc(), "-pk"
    )
    return runs.annotate(
        replay_pk=Subquery(owner.values("pk")[:1]),
        replay_speed=Subquery(owner.values("speed")[:1]),
    )


def runs_page(*, filters: RunFilters, page: int = 1, per_page: int = RUNS_PER_PAGE) -> RunsPage:
    window = page_window(filtered_runs(filters=filters), page=page, per_page=per_page)
    measure_replay_runs(window.items)
    return RunsPage(runs=window.items, number=page, has_next=window.has_next)


def measure_replay_runs(runs: Sequence[Run]) -> None:
    """Set ``replay_duration_ms`` on each run ``with_replay`` found a replay for: its
    start-to-finish in the story's time, on that replay's clock (``ReplayClock``: real x speed,
    less the time the clock stood still). Each replay's pauses, thousands of them, are read and
    merged once for all its runs on the page."""
    owners = {run.pk: getattr(run, "replay_pk", None) for run in runs}
    clocks = {
        replay.pk: ReplayClock.of(replay)
        for replay in OutageReplay.objects.filter(pk__in={pk for pk in owners.values() if pk}).only(
            "pk", "speed", "pauses"
        )
    }
    for run in runs:
        clock = clocks.get(owners[run.pk] or 0)
        run.replay_duration_ms = (  # type: ignore[attr-defined]
            None
            if clock is None or run.duration_ms is None
            else round(clock.run_seconds(run.started_at, run.duration_ms) * 1000)
        )


@dataclass(frozen=True)
class WindowPage[T]:
    """One page of a list, without counting the list: page size + 1 rows say if there is more."""

    items: list[T]
    number: int
    has_next: bool

    @property
    def has_previous(self) -> bool:
        return self.number > 1


def page_window[T: Model](queryset: QuerySet[T], *, page: int, per_page: int) -> WindowPage[T]:
    start = (page - 1) * per_page
    window = list(queryset[start : start + per_page + 1])
    return WindowPage(items=window[:per_page], number=page, has_next=len(window) > per_page)


StepKind = Literal["model", "tool", "transition"]
_KIND_ORDER: dict[StepKind, int] = {"model": 0, "tool": 1, "transition": 2}


@dataclass(frozen=True)
class TimelineEntry:
    kind: StepKind
    ts: datetime
    step: int | None
    model_call: ModelCall | None = None
    tool_call: ToolCall | None = None
    transition: ReportedTransition | None = None
    # A worker-scope transition of the run's worker, reported outside this run.
    worker_wide: bool = False
    # On a model call: the notice sent with it, when it differs from the previous call's.
    notice_changed: bool = False
    notice: str | None = None

    @property
    def removes_tool(self) -> bool:
        return self.transition is not None and self.transition.state in REMOVING_STATES


@dataclass(frozen=True)
class RemovedTool:
    tool: str
    scope: str
    state: str
    ts: datetime
    reason: str


@dataclass(frozen=True)
class RunTimeline:
    entries: list[TimelineEntry]
    removed_tools: list[RemovedTool]
    model_calls_shown: int
    tool_calls_shown: int
    transitions_shown: int
    # The notice sent with the run's last model call (rebuilt, see runs.notice_rebuild).
    last_notice: str | None = None
    omitted: dict[str, int] = field(default_factory=dict)


def _entry_sort_key(entry: TimelineEntry) -> tuple[datetime, int, int]:
    # Within one instant, a step reads model call -> tool call -> the breaker it tripped.
    row = entry.model_call or entry.tool_call or entry.transition
    return (entry.ts, _KIND_ORDER[entry.kind], row.pk if row is not None else 0)


def run_timeline(*, run: Run, now: datetime | None = None) -> RunTimeline:
    """Every step of a run in order: model calls, tool calls and breaker transitions.

    Worker-scope transitions reported outside this run (without a run id, or from a sibling run)
    are included when they happened on the run's worker while the run was going: the worker's
    breaker is shared by its runs, so it decided this run's toolset too.
    """
    end = run.finished_at or (now or timezone.now())
    model_calls = list(run.model_call_rows.order_by("ts", "id")[:TIMELINE_MAX_MODEL_CALLS])
    tool_calls = list(run.tool_call_rows.order_by("ts", "id")[:TIMELINE_MAX_TOOL_CALLS])
    own = list(run.transitions.order_by("ts", "id")[:TIMELINE_MAX_TRANSITIONS])
    worker_wide = list(
        ReportedTransition.objects.filter(
            worker_id=run.worker_id, scope=Scope.WORKER, ts__gte=run.started_at, ts__lte=end
        )
        .exclude(run=run)
        .order_by("ts", "id")[:TIMELINE_MAX_TRANSITIONS]
    )
    transitions = own + worker_wide
    entries = [TimelineEntry("model", m.ts, m.step, model_call=m) for m in model_calls]
    entries += [TimelineEntry("tool", t.ts, t.step, tool_call=t) for t in tool_calls]
    entries += [TimelineEntry("transition", r.ts, None, transition=r) for r in own]
    entries += [
        TimelineEntry("transition", r.ts, None, transition=r, worker_wide=True) for r in worker_wide
    ]
    entries.sort(key=_entry_sort_key)
    entries, last_notice = _with_notices(entries)
    omitted = {
        "model calls": max(run.model_calls - len(model_calls), 0),
        "tool calls": max(run.tool_calls - len(tool_calls), 0),
    }
    return RunTimeline(
        entries=entries,
        removed_tools=removed_tools(transitions=sorted(transitions, key=lambda r: (r.ts, r.pk))),
        model_calls_shown=len(model_calls),
        tool_calls_shown=len(tool_calls),
        transitions_shown=len(transitions),
        last_notice=last_notice,
        omitted={what: n for what, n in omitted.items() if n},
    )


def _with_notices(entries: list[TimelineEntry]) -> tuple[list[TimelineEntry], str | None]:
    """Mark each model call whose notice differs from the one before, replaying the run."""
    replay = NoticeReplay()
    shown: str | None = None
    marked: list[TimelineEntry] = []
    for entry in entries:
        if entry.tool_call is not None:
            replay.tool_call(entry.tool_call)
        elif entry.transition is not None:
            replay.transition(entry.transition)
        elif entry.model_call is not None:
            text = replay.text()
            if text != shown:
                entry = replace(entry, notice_changed=True, notice=text)
                shown = text
        marked.append(entry)
    return marked, shown


def removed_tools(*, transitions: list[ReportedTransition]) -> list[RemovedTool]:
    """The first moment each tool left the run's toolset, and which scope took it out.

    A tool removed from a run stays removed for the rest of the run (the breaker rules), so later
    transitions of the same tool do not give it back.
    """
    first: dict[str, RemovedTool] = {}
    for transition in transitions:
        if transition.state in REMOVING_STATES and transition.tool not in first:
            first[transition.tool] = RemovedTool(
                tool=transition.tool,
                scope=transition.scope,
                state=transition.state,
                ts=transition.ts,
                reason=transition.reason,
            )
    return sorted(first.values(), key=lambda removed: removed.ts)


AUDIT_PER_PAGE = 50


@dataclass(frozen=True)
class AuditFilters:
    tool: str = ""
    action: str = ""

    @property
    def active(self) -> bool:
        return bool(self.tool or self.action)


def audit_page(*, filters: AuditFilters, page: int = 1) -> WindowPage[OperatorAction]:
    """Operator actions, newest first; exact filters, each served by an index."""
    actions = OperatorAction.objects.select_related("tool")
    if filters.tool:
        actions = actions.filter(tool__name=filters.tool)
    if filters.action:
        actions = actions.filter(action=filters.action)
    return page_window(actions.order_by("-at", "-id"), page=page, per_page=AUDIT_PER_PAGE)
