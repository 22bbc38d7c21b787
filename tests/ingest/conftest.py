"""Fixtures for ingest tests: a real agent token and a helper that posts a batch."""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
import redis
from django.db import connection
from django.test import Client

import runs.services
from runs.models import AgentToken
from runs.writers import OrmWriter

T0 = datetime(2026, 11, 29, 9, 12, 4, tzinfo=UTC)
EVENTS_URL = "/api/v1/events"

_ids = itertools.count(1)


def iso(offset_s: float = 0) -> str:
    return (T0 + timedelta(seconds=offset_s)).isoformat().replace("+00:00", "Z")


def event(kind: str, **fields: Any) -> dict[str, Any]:
    """A valid event of ``kind`` with made-up defaults; ``fields`` override them."""
    base: dict[str, Any] = {"id": f"ev-{next(_ids)}", "type": kind, "ts": iso()}
    defaults: dict[str, dict[str, Any]] = {
        "run.started": {"run_id": "r-1", "agent": "research", "step_budget": 20},
        "model.call": {
            "run_id": "r-1",
            "step": 1,
            "model": "gpt-test",
            "input_tokens": 5200,
            "output_tokens": 310,
            "cost_usd": 0.061,
            "duration_ms": 2300,
        },
        "tool.call": {
            "run_id": "r-1",
            "step": 1,
            "tool": "web_search",
            "outcome": "retryable",
            "attempts": 5,
            "duration_ms": 31000,
            "error": "ToolFailure: 503 from vendor",
        },
        "breaker.transition": {
            "run_id": "r-1",
            "scope": "run",
            "tool": "web_search",
            "state": "open",
            "reason": "5 consecutive retryable failures",
        },
        "run.finished": {"run_id": "r-1", "status": "completed", "degraded": True, "steps": 9},
    }
    return base | defaults.get(kind, {}) | fields


@pytest.fixture(autouse=True)
def _clean_redis(redis_client: redis.Redis) -> None:
    """Accepted tool calls also reach the fleet counters in Redis (this session's own db)."""


@pytest.fixture
def agent_token(db: None) -> str:
    _, raw = AgentToken.issue(name="test-agent")
    return raw


PostBatch = Callable[..., Any]


@pytest.fixture
def post_batch(client: Client, agent_token: str) -> PostBatch:
    """POST a batch (a dict, or raw bytes as the body) with the agent token."""

    def post(body: dict[str, Any] | bytes, *, token: str | None = agent_token, **extra: Any) -> Any:
        data = body if isinstance(body, bytes) else json.dumps(body).encode()
        meta: dict[str, Any] = dict(extra)
        if token is not None:
            meta["HTTP_AUTHORIZATION"] = f"Bearer {token}"
        return client.post(EVENTS_URL, data=data, content_type="application/json", **meta)

    return post


@pytest.fixture(params=["postgres", "orm"])
def writer(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Run a test with each writer: the PostgreSQL fast path, and the portable ORM path (the
    one SQLite uses) on the same database, so both are held to the same answers."""
    if request.param == "orm":
        monkeypatch.setattr(runs.services, "batch_writer", OrmWriter)
    elif connection.vendor != "postgresql":
        pytest.skip("the fast path is PostgreSQL's")
    return str(request.param)
