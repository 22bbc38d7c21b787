"""Helpers for the fleet tests (fixtures in this package's conftest; the root conftest's fleet_redis
uses ``delete_fleet_keys``): made-up events for ``POST /api/v1/events``, the ``report`` type."""

from __future__ import annotations

import itertools
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import redis

T0 = datetime(2026, 11, 29, 9, 0, 0, tzinfo=UTC)
_ids = itertools.count(1)


def delete_fleet_keys(client: redis.Redis) -> None:
    keys = list(client.scan_iter(match="bp:*", count=1000))
    if keys:
        client.delete(*keys)


def next_id() -> int:
    return next(_ids)


def iso(moment: datetime) -> str:
    return moment.isoformat().replace("+00:00", "Z")


def tool_call(run_id: str, tool: str, outcome: str, **fields: Any) -> dict[str, Any]:
    return {
        "id": f"tc-{next(_ids)}",
        "type": "tool.call",
        "ts": iso(T0),
        "run_id": run_id,
        "step": 1,
        "tool": tool,
        "outcome": outcome,
        "attempts": 1,
        "error": "" if outcome == "success" else "ToolFailure: 503 from vendor",
        **fields,
    }


def run_started(run_id: str) -> dict[str, Any]:
    return {
        "id": f"rs-{next(_ids)}",
        "type": "run.started",
        "ts": iso(T0),
        "run_id": run_id,
        "agent": "research",
        "step_budget": 20,
    }


Report = Callable[..., dict[str, Any]]


def bound_token(worker: str) -> str:
    """A new agent token bound to ``worker``: with the default token quorum, each counts once."""
    from runs.models import AgentToken  # a Django model: imported once the test has a database

    return AgentToken.issue(name=f"agent {worker}", worker_id=worker)[1]
