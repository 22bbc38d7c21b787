"""Drive one tool's fleet breaker through the real services (Redis scripts + database), with
time passed in: open it, move it to half-open, decide its trial."""

from __future__ import annotations

import itertools
from datetime import UTC, datetime, timedelta

from breakers.fleet.rules import OperatorActionKind
from breakers.fleet_service import (
    fleet_operator_action,
    fleet_record_tool_calls,
    fleet_tick,
    fleet_trial_acquire,
)
from breakers.models import FleetTransition, OperatorAction, Tool
from runs.models import AgentToken
from scripts.testing.fleet_calls import fleet_call

T0 = datetime(2026, 11, 29, 9, 0, 0, tzinfo=UTC)
COOLDOWN = timedelta(seconds=30)  # settings.BREAKER_COOLDOWN_SECONDS
_ids = itertools.count(1)


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def open_tool(tool: str, when: datetime) -> FleetTransition:
    """Five retryable failures from two workers: the fleet breaker opens."""
    calls = [fleet_call(f"ev-{next(_ids)}", tool, f"w{i % 2}", "retryable") for i in range(5)]
    rows = fleet_record_tool_calls(calls=calls, now=when)
    assert [r.to_state for r in rows] == ["open"], rows
    return rows[0]


def half_open(tool: str, when: datetime) -> None:
    fleet_tick(now=when)
    assert Tool.objects.get(name=tool).state == "half_open"


def trial(tool: str, outcome: str, when: datetime) -> FleetTransition:
    """The half-open trial call by an agent worker: success closes, retryable re-opens."""
    assert fleet_trial_acquire(tool_name=tool, worker_id="w-trial", now=when).granted
    [row] = fleet_record_tool_calls(
        calls=[fleet_call(f"ev-{next(_ids)}", tool, "w-trial", outcome, trial=True)], now=when
    )
    return row


def cycle(tool: str, start: datetime) -> tuple[FleetTransition, FleetTransition]:
    """Open, half-open after the cooldown, close on a good trial: one incident."""
    opened = open_tool(tool, start)
    half_open(tool, start + COOLDOWN)
    closed = trial(tool, "success", start + COOLDOWN)
    assert closed.to_state == "closed"
    return opened, closed


def operator(tool: str, action: str, reason: str, when: datetime) -> OperatorAction:
    token, _ = AgentToken.issue(name="ops-bot", is_operator=True)
    return fleet_operator_action(
        tool_name=tool, action=OperatorActionKind(action), reason=reason, token=token, now=when
    )
