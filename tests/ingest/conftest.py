"""Fixtures for ingest tests: a real agent token and a helper that posts a batch (helpers in
``support``)."""

from __future__ import annotations

import json
from typing import Any

import pytest
import redis
from django.db import connection
from django.test import Client

import runs.services
from runs.models import AgentToken
from runs.writers import OrmWriter
from tests.ingest.support import EVENTS_URL, PostBatch


@pytest.fixture(autouse=True)
def _clean_redis(redis_client: redis.Redis) -> None:
    """Accepted tool calls also reach the fleet counters in Redis (this session's own db)."""


@pytest.fixture
def agent_token(db: None) -> str:
    _, raw = AgentToken.issue(name="test-agent")
    return raw


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
