"""Fixtures for the fleet tests: Redis with fleet keys cleared, tokens, an ingest helper."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
import redis
from django.test import Client

from breakers.fleet.store import FleetStore
from breakers.fleet_service import fleet_store
from runs.models import AgentToken

T0 = datetime(2026, 11, 29, 9, 0, 0, tzinfo=UTC)
_ids = itertools.count(1)


def delete_fleet_keys(client: redis.Redis) -> None:
    keys = list(client.scan_iter(match="bp:*", count=1000))
    if keys:
        client.delete(*keys)


@pytest.fixture
def fleet_redis() -> Iterator[redis.Redis]:
    """This session's Redis with every fleet key (``bp:*``) deleted before and after the test.

    Not FLUSHDB: the Celery broker lives in the same database and its bindings must survive.
    """
    client = fleet_store().client
    delete_fleet_keys(client)
    yield client
    delete_fleet_keys(client)


@pytest.fixture
def store(fleet_redis: redis.Redis) -> FleetStore:
    return fleet_store()


@pytest.fixture
def agent_token(db: None) -> str:
    return AgentToken.issue(name="agents")[1]


@pytest.fixture
def operator_token(db: None) -> str:
    return AgentToken.issue(name="ops-bot", is_operator=True)[1]


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


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


@pytest.fixture
def report(client: Client, agent_token: str, fleet_redis: redis.Redis) -> Report:
    """Post ``tool.call`` outcomes for one tool from ``worker`` through ``POST /api/v1/events``
    (a fresh run per call of this helper; ``trial`` flags them as made under a trial lease);
    returns the JSON reply."""

    def post(
        worker: str,
        tool: str,
        *outcomes: str,
        events: list[Any] | None = None,
        trial: bool = False,
        ts: str | None = None,
    ) -> Any:
        run_id = f"r-{next(_ids)}"
        batch = (
            events
            if events is not None
            else [
                run_started(run_id),
                *(
                    tool_call(run_id, tool, outcome, trial=trial, **({"ts": ts} if ts else {}))
                    for outcome in outcomes
                ),
            ]
        )
        response = client.post(
            "/api/v1/events",
            {"worker_id": worker, "events": batch},
            content_type="application/json",
            headers={"Authorization": f"Bearer {agent_token}"},
        )
        assert response.status_code == 200, response.content
        return response.json()

    return post
