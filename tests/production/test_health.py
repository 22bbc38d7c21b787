"""``/healthz`` and ``/readyz``: outside the login, each with its own access rule."""

from __future__ import annotations

import time

import pytest
import redis
from django.test import Client
from pytest_django.fixtures import Settings

from breakers.observability.health import BEAT_HEARTBEAT_KEY, beat_heartbeat
from breakers.tasks import fleet_tick

pytestmark = pytest.mark.django_db


def test_healthz_answers_without_a_login(client: Client) -> None:
    response = client.get("/healthz")
    assert response.status_code == 200
    assert response.json() == {"status": "ok"}
    assert client.post("/healthz").status_code == 405


def test_readyz_needs_a_fresh_beat_heartbeat(client: Client, redis_client: redis.Redis) -> None:
    response = client.get("/readyz")
    assert response.status_code == 503
    assert response.json()["checks"]["beat"].startswith("no heartbeat yet")
    assert response.json()["checks"]["database"] == "ok"

    fleet_tick()  # what the worker does each time beat sends the fleet tick
    response = client.get("/readyz")
    assert response.status_code == 200, response.json()
    assert response.json()["status"] == "ready"
    assert response.json()["checks"]["redis"] == "ok"


def test_readyz_is_not_ready_when_the_heartbeat_is_stale(
    client: Client, redis_client: redis.Redis, settings: Settings
) -> None:
    redis_client.set(BEAT_HEARTBEAT_KEY, repr(time.time() - 3600))
    response = client.get("/readyz")
    assert response.status_code == 503
    assert response.json()["checks"]["beat"].startswith("stale")


def test_readyz_refuses_requests_through_a_proxy_or_from_outside(
    client: Client, redis_client: redis.Redis
) -> None:
    assert client.get("/readyz", REMOTE_ADDR="203.0.113.9").status_code == 403
    # A forwarding header from a peer that is not a trusted proxy: the client is unknown.
    proxied = client.get("/readyz", REMOTE_ADDR="10.0.0.2", HTTP_X_FORWARDED_FOR="203.0.113.9")
    assert proxied.status_code == 403


def test_readyz_reports_redis_down(client: Client, settings: Settings) -> None:
    settings.REDIS_URL = "redis://127.0.0.1:9/0"
    response = client.get("/readyz")
    assert response.status_code == 503
    assert response.json()["checks"]["redis"].startswith("error: ConnectionError")


def test_beat_sends_no_heartbeat_task_of_its_own(
    client: Client, redis_client: redis.Redis, settings: Settings
) -> None:
    """The tick writes the heartbeat (one task per tick, not two); a heartbeat message queued by
    an older beat still counts."""
    tasks = {entry["task"] for entry in settings.CELERY_BEAT_SCHEDULE.values()}
    assert "breakers.fleet_tick" in tasks
    assert "breakers.beat_heartbeat" not in tasks
    beat_heartbeat()
    assert client.get("/readyz").status_code == 200
