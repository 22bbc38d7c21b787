"""Fixtures for the fleet tests: the store on a cleared Redis, tokens, an ingest helper (helpers in
``support``; ``fleet_redis`` is the root conftest's)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import redis
from django.test import Client

from breakers.fleet.store import FleetStore
from breakers.fleet_service import fleet_store
from runs.models import AgentToken
from tests.fleet.support import Report, bound_token, next_id, run_started, tool_call


@pytest.fixture
def store(fleet_redis: redis.Redis) -> FleetStore:
    return fleet_store()


@pytest.fixture
def agent_token(db: None) -> str:
    return AgentToken.issue(name="agents")[1]


@pytest.fixture
def operator_token(db: None) -> str:
    return AgentToken.issue(name="ops-bot", is_operator=True)[1]


@pytest.fixture
def worker_token(db: None) -> Callable[[str], str]:
    """The token of a worker, issued on first use and bound to it: one token per worker, as a
    deployment protected by the default token quorum has, so each counts once."""
    tokens: dict[str, str] = {}

    def token_of(worker: str) -> str:
        if worker not in tokens:
            tokens[worker] = bound_token(worker)
        return tokens[worker]

    return token_of


@pytest.fixture
def report(client: Client, worker_token: Callable[[str], str], fleet_redis: redis.Redis) -> Report:
    """Post ``tool.call`` outcomes for one tool from ``worker`` (with its own bound token)
    through ``POST /api/v1/events`` (a fresh run per call of this helper; ``trial`` flags them
    as made under a trial lease); returns the JSON reply."""

    def post(
        worker: str,
        tool: str,
        *outcomes: str,
        events: list[Any] | None = None,
        trial: bool = False,
        ts: str | None = None,
    ) -> Any:
        run_id = f"r-{next_id()}"
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
            headers={"Authorization": f"Bearer {worker_token(worker)}"},
        )
        assert response.status_code == 200, response.content
        return response.json()

    return post
