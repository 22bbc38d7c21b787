"""Redis keeps nothing on disk: when it loses its data, the fleet comes back from the database."""

from __future__ import annotations

from datetime import timedelta

import pytest
import redis
from django.test import Client
from django.utils import timezone

from breakers.fleet.store import FleetStore
from breakers.fleet_service import (
    fleet_rebuild,
    fleet_state,
    fleet_state_from_database,
    fleet_store,
    fleet_tick,
)
from breakers.models import FleetTransition, Incident, Tool, datetime_to_ms
from scripts.testing.fleet_calls import fleet_call
from tests.fleet.support import Report

pytestmark = pytest.mark.django_db


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def open_breaker(report: Report, tool: str) -> None:
    report("w1", tool, "retryable", "retryable", "retryable")
    report("w2", tool, "retryable", "retryable")


@pytest.fixture
def fleet_before_the_loss(
    redis_client: redis.Redis,  # first, so that its own flush happens before, not after
    client: Client,
    report: Report,
    operator_token: str,
    agent_token: str,
) -> dict[str, object]:
    open_breaker(report, "web_search")
    report("w1", "calculator", "success")
    report("w1", "maps", "success")
    client.post(
        "/api/v1/tools/maps/force-open",
        {"reason": "vendor migration"},
        content_type="application/json",
        headers=bearer(operator_token),
    )
    response = client.get("/api/v1/fleet", headers=bearer(agent_token))
    return {"etag": response["ETag"], "tools": response.json()["tools"]}


def test_open_and_forced_breakers_come_back_after_redis_is_flushed(
    client: Client,
    agent_token: str,
    fleet_before_the_loss: dict[str, object],
    redis_client: redis.Redis,
) -> None:
    redis_client.flushdb()
    response = client.get("/api/v1/fleet", headers=bearer(agent_token))
    assert response.json()["tools"] == fleet_before_the_loss["tools"]
    assert response.json()["tools"]["web_search"]["state"] == "open"
    assert response.json()["tools"]["maps"]["state"] == "forced_open"
    # A new generation: no client can mistake the rebuilt state for an older snapshot.
    assert response["ETag"] != fleet_before_the_loss["etag"]


def test_a_report_after_the_loss_does_not_readmit_an_open_tool(
    report: Report, fleet_before_the_loss: dict[str, object], redis_client: redis.Redis
) -> None:
    redis_client.flushdb()
    reply = report("w3", "web_search", "retryable")
    assert reply["fleet"]["tools"]["web_search"]["state"] == "open"
    assert Tool.objects.get(name="web_search").seq == 1


def test_celerys_tick_rebuilds_and_keeps_the_cooldown(
    fleet_before_the_loss: dict[str, object], redis_client: redis.Redis
) -> None:
    redis_client.flushdb()
    fleet_tick(now=timezone.now())
    store = fleet_store()
    assert store.generation() is not None
    assert _auto(store) == "open"
    fleet_tick(now=timezone.now() + timedelta(seconds=31))
    assert _auto(store) == "half_open"


def test_a_tools_policy_comes_back_too(
    client: Client, operator_token: str, report: Report, redis_client: redis.Redis
) -> None:
    report("w1", "flaky", "success")
    client.put(
        "/api/v1/tools/flaky/policy",
        {"threshold": 2},
        content_type="application/json",
        headers=bearer(operator_token),
    )
    redis_client.flushdb()
    report("w1", "flaky", "retryable")
    reply = report("w2", "flaky", "retryable")
    assert reply["fleet"]["tools"]["flaky"]["state"] == "open"


def test_a_rebuild_never_overwrites_newer_state(
    report: Report, fleet_before_the_loss: dict[str, object]
) -> None:
    # The database is one transition behind Redis (say its transaction was still running).
    Tool.objects.filter(name="web_search").update(seq=0, state="closed", auto_state="closed")
    assert fleet_rebuild() == 0
    assert _auto(fleet_store()) == "open"


def test_a_transition_redis_made_but_the_database_lacks_is_recorded_by_the_tick(
    report: Report,
) -> None:
    # Redis opened the breaker, and the process died before the database recorded it: no row,
    # no incident, and a rebuild would bring back "closed". Celery's tick catches up.
    report("w1", "web_search", "retryable", "retryable", "retryable")
    lost = [fleet_call(f"lost-{i}", "web_search", "w2", "retryable") for i in range(2)]
    fleet_store().apply("web_search", lost, now=datetime_to_ms(timezone.now()))
    assert not FleetTransition.objects.exists()
    fleet_tick(now=timezone.now())  # too early: its transaction might still be committing
    assert not FleetTransition.objects.exists()
    fleet_tick(now=timezone.now() + timedelta(seconds=61))
    row = FleetTransition.objects.get(seq=1)
    assert (row.cause_kind, row.from_state, row.to_state, row.seq) == (
        "reconcile",
        "closed",
        "open",
        1,
    )
    assert Incident.objects.get().opened_by == row
    # The same tick then moved it on as usual: the cooldown had elapsed too.
    assert Tool.objects.get(name="web_search").state == "half_open"


def test_the_tick_opens_the_missing_incident_of_a_tool_that_never_had_one(
    report: Report,
) -> None:
    # Out of service with its opening transition recorded but no incident row at all (say the
    # transitions were persisted out of order): the repair must find tools with no incident.
    open_breaker(report, "web_search")
    opening = FleetTransition.objects.get(to_state="open")
    Incident.objects.all().delete()
    fleet_tick(now=timezone.now())
    incident = Incident.objects.get()
    assert (incident.tool.name, incident.opened_by, incident.closed_at) == (
        "web_search",
        opening,
        None,
    )
    fleet_tick(now=timezone.now())  # and only one
    assert Incident.objects.count() == 1


def _auto(store: FleetStore) -> str:
    state = store.details("web_search").state
    return state.auto.value if state is not None else ""


def test_the_databases_view_of_a_half_open_tool_reads_as_redis_does(
    fleet_before_the_loss: dict[str, object],
) -> None:
    # Ingest answers from the database's view while Redis is away. A half-open entry that read
    # differently there (no `trial`) looked like a new window to the SDK, which forgot the trial
    # it had made and asked for (and got) a second one.
    fleet_tick(now=timezone.now() + timedelta(seconds=31))
    from_redis = fleet_state().as_json()["tools"]["web_search"]
    assert from_redis["state"] == "half_open" and from_redis["trial"] == "lease"
    assert fleet_state_from_database().as_json()["tools"]["web_search"] == from_redis
