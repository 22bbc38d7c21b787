"""Rows as agents would have reported them, made straight through the ORM.

The ingest service owns how events become rows; these factories only give the dashboard tests
realistic rows to show. Times are passed in, never read from a clock the test does not control.
"""

from __future__ import annotations

import itertools
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

from django.db.models import Max

from breakers.models import (
    Alert,
    AlertChannel,
    FleetTransition,
    Incident,
    OperatorAction,
    Probe,
    Tool,
)
from runs.models import (
    ModelCall,
    ReportedTransition,
    Run,
    RunStatus,
    ToolCall,
    Worker,
)

T0 = datetime(2026, 11, 29, 9, 12, 4, tzinfo=UTC)
HOSTILE_NAME = "<img src=x onerror=alert(1)>"
HOSTILE_SCRIPT = "<script>alert('pwned')</script>"

_ids = itertools.count(1)


def _event_id() -> str:
    return f"ev-{next(_ids)}"


def make_worker(worker_id: str = "research-worker-1") -> Worker:
    worker, _ = Worker.objects.get_or_create(
        worker_id=worker_id, defaults={"first_seen_at": T0, "last_seen_at": T0}
    )
    return worker


def make_run(
    run_id: str,
    *,
    agent: str = "research",
    worker: Worker | None = None,
    status: str = RunStatus.COMPLETED,
    degraded: bool = False,
    started_at: datetime = T0,
    **fields: Any,
) -> Run:
    finished = status != RunStatus.RUNNING
    defaults: dict[str, Any] = {
        "step_budget": 20,
        "steps": 9 if finished else None,
        "finished_at": started_at + timedelta(minutes=1) if finished else None,
        "duration_ms": 60_000 if finished else None,
    }
    defaults.update(fields)
    return Run.objects.create(
        run_id=run_id,
        agent=agent,
        worker=worker or make_worker(),
        status=status,
        degraded=degraded,
        started_at=started_at,
        **defaults,
    )


def make_model_call(run: Run, *, step: int, ts: datetime, **fields: Any) -> ModelCall:
    values: dict[str, Any] = {
        "model": "gpt-test",
        "input_tokens": 5200,
        "output_tokens": 310,
        "cost_usd": Decimal("0.061"),
        "duration_ms": 2300,
    }
    values.update(fields)
    return ModelCall.objects.create(event_id=_event_id(), run=run, ts=ts, step=step, **values)


def make_tool_call(
    run: Run,
    *,
    step: int,
    ts: datetime,
    tool: str = "web_search",
    outcome: str = "success",
    **fields: Any,
) -> ToolCall:
    values: dict[str, Any] = {"attempts": 1, "duration_ms": 800, "error": ""}
    values.update(fields)
    return ToolCall.objects.create(
        event_id=_event_id(),
        run=run,
        worker=run.worker,
        ts=ts,
        step=step,
        tool=tool,
        outcome=outcome,
        **values,
    )


def make_transition(
    *,
    worker: Worker,
    ts: datetime,
    run: Run | None = None,
    tool: str = "web_search",
    scope: str = "run",
    state: str = "open",
    reason: str = "5 consecutive retryable failures",
) -> ReportedTransition:
    return ReportedTransition.objects.create(
        event_id=_event_id(),
        run=run,
        worker=worker,
        ts=ts,
        scope=scope,
        tool=tool,
        state=state,
        reason=reason,
    )


def make_outage_run(run_id: str = "r-118", *, tool: str = "web_search", **fields: Any) -> Run:
    """A degraded run: one good search, five retryable failures, the run breaker opens."""
    run = make_run(run_id, degraded=True, **fields)
    ts = run.started_at
    make_model_call(run, step=1, ts=ts + timedelta(seconds=1))
    make_tool_call(run, step=1, ts=ts + timedelta(seconds=3), tool=tool)
    for step in range(2, 7):
        at = ts + timedelta(seconds=10 * step)
        make_model_call(run, step=step, ts=at)
        make_tool_call(
            run,
            step=step,
            ts=at + timedelta(seconds=2),
            tool=tool,
            outcome="retryable",
            attempts=5,
            duration_ms=31_000,
            error="ToolFailure: 503 from vendor",
        )
    make_transition(
        worker=run.worker,
        run=run,
        tool=tool,
        ts=ts + timedelta(seconds=62, milliseconds=1),
    )
    make_model_call(run, step=7, ts=ts + timedelta(seconds=70))
    Run.objects.filter(pk=run.pk).update(
        model_calls=7,
        tool_calls=6,
        tool_attempts=26,
        tool_failures=5,
        model_spend_usd=Decimal("0.427"),
        input_tokens=36_400,
        output_tokens=2170,
    )
    run.refresh_from_db()
    return run


# -- fleet rows (what breakers.fleet_service writes), for pages that show history -----------------


def make_tool(name: str = "web_search", *, state: str = "closed", **fields: Any) -> Tool:
    tool, _ = Tool.objects.get_or_create(
        name=name, defaults={"first_seen_at": T0 - timedelta(days=1), "state": state, **fields}
    )
    return tool


def make_fleet_transition(
    tool: Tool,
    *,
    at: datetime,
    from_state: str,
    to_state: str,
    cause_kind: str = "failures",
    cause: dict[str, Any] | None = None,
    reason: str = "",
    **fields: Any,
) -> FleetTransition:
    seq = (tool.transitions.aggregate(seq=Max("seq"))["seq"] or 0) + 1
    auto = {"forced_open": "open", "forced_closed": "closed"}
    return FleetTransition.objects.create(
        tool=tool,
        seq=seq,
        at=at,
        from_state=from_state,
        to_state=to_state,
        auto_from=auto.get(from_state, from_state),
        auto_to=auto.get(to_state, to_state),
        cause_kind=cause_kind,
        cause=cause or {},
        reason=reason,
        **fields,
    )


def make_operator_action(
    tool: Tool,
    *,
    at: datetime,
    action: str = "force_close",
    reason: str = "vendor confirmed the fix",
    actor: str = "user:alice",
    before: str = "open",
    after: str = "forced_closed",
) -> OperatorAction:
    return OperatorAction.objects.create(
        tool=tool,
        action=action,
        reason=reason,
        at=at,
        actor=actor,
        before={"state": before},
        after={"state": after},
    )


def make_probe(tool: Tool, *, at: datetime, ok: bool, **fields: Any) -> Probe:
    values: dict[str, Any] = {
        "window": 1,
        "kind": "http",
        "started_at": at,
        "finished_at": at + timedelta(milliseconds=120),
        "ok": ok,
        "status_code": 200 if ok else 503,
        "latency_ms": 120,
        "error": "" if ok else "HTTP 503 from vendor",
        "decided": True,
    }
    values.update(fields)
    return Probe.objects.create(tool=tool, **values)


def make_incident(
    tool: Tool,
    *,
    opened_at: datetime,
    closed_at: datetime | None = None,
    cause: dict[str, Any] | None = None,
    reason: str = "5 consecutive retryable failures from 2 workers",
) -> Incident:
    opened_by = make_fleet_transition(
        tool, at=opened_at, from_state="closed", to_state="open", cause=cause, reason=reason
    )
    closed_by = None
    if closed_at is not None:
        closed_by = make_fleet_transition(
            tool,
            at=closed_at,
            from_state="half_open",
            to_state="closed",
            cause_kind="trial",
            cause={"window": 1, "holder": "probe", "outcome": "success"},
            reason="trial probe succeeded",
        )
    return Incident.objects.create(
        tool=tool,
        opened_at=opened_at,
        closed_at=closed_at,
        opened_by=opened_by,
        closed_by=closed_by,
        reason=reason,
    )


def make_alert(
    incident: Incident,
    *,
    at: datetime,
    kind: str = "opened",
    state: str = "sent",
    channel: str = "#oncall-tools",
    filed_under_incident: bool = True,
    **fields: Any,
) -> Alert:
    slack, _ = AlertChannel.objects.get_or_create(
        name=channel,
        defaults={"webhook_url": f"https://hooks.slack.com/services/T0/B0/{channel.strip('#')}"},
    )
    return Alert.objects.create(
        kind=kind,
        tool=incident.tool,
        transition=incident.opened_by if kind == "opened" else incident.closed_by,
        incident=incident if filed_under_incident else None,
        channel=slack,
        state=state,
        attempts=fields.pop("attempts", 1),
        created_at=at,
        sent_at=at if state == "sent" else None,
        **fields,
    )
