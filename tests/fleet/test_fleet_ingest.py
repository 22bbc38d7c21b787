"""Ingest feeds the fleet breaker: accepted tool calls update Redis, transitions become rows."""

from __future__ import annotations

import pytest
from django.db import transaction
from django.test import Client
from pytest_django.fixtures import Settings

from breakers.models import FleetTransition, Incident, Tool
from breakers.services import fleet_store
from runs.models import Run, ToolCall
from runs.services import ingest_batch
from tests.fleet.conftest import Report, run_started, tool_call
from tests.processes import free_port

pytestmark = pytest.mark.django_db


def test_the_failure_that_opens_the_breaker_comes_back_open_in_its_own_reply(
    report: Report,
) -> None:
    report("w1", "web_search", "retryable", "retryable", "retryable")
    reply = report("w2", "web_search", "retryable", "retryable")
    tool = reply["fleet"]["tools"]["web_search"]
    assert tool["state"] == "open"
    assert tool["forced"] is False
    assert tool["reason"] == "5 consecutive retryable failures from 2 workers"
    assert tool["since"].endswith("Z")


def test_one_worker_failing_alone_never_opens_it(report: Report) -> None:
    for _ in range(6):
        reply = report("lonely", "web_search", *["retryable"] * 10)
    assert reply["fleet"]["tools"]["web_search"]["state"] == "closed"
    assert not FleetTransition.objects.exists()
    assert Tool.objects.get(name="web_search").state == "closed"


def test_the_opening_is_stored_with_the_failures_and_workers_that_caused_it(
    report: Report,
) -> None:
    first = report("w1", "web_search", "retryable", "retryable", "retryable")
    report("w2", "web_search", "retryable", "retryable")
    transition = FleetTransition.objects.get()
    assert (transition.from_state, transition.to_state, transition.cause_kind) == (
        "closed",
        "open",
        "failures",
    )
    assert transition.cause["workers"] == {"w1": 3, "w2": 2}
    assert len(transition.cause["events"]) == 5
    incident = Incident.objects.get()
    assert incident.is_open and incident.opened_by == transition
    tool = Tool.objects.get(name="web_search")
    assert (tool.state, tool.seq) == ("open", 1)
    assert first["accepted"] == 4


def test_a_success_resets_and_semantic_outcomes_are_ignored(report: Report) -> None:
    report("w1", "web_search", "retryable", "retryable", "retryable", "retryable")
    report("w2", "web_search", "success")
    report("w2", "web_search", "retryable", "semantic", "semantic", "retryable", "retryable")
    reply = report("w1", "web_search", "semantic", "blocked")
    assert reply["fleet"]["tools"]["web_search"]["state"] == "closed"
    assert fleet_store().details("web_search")[0]["consec"] == "3"


def test_a_resent_batch_is_applied_once(report: Report) -> None:
    events = [
        run_started("r-resend"),
        *(tool_call("r-resend", "web_search", "retryable") for _ in range(3)),
    ]
    for _ in range(3):
        reply = report("w1", "web_search", events=events)
    assert reply["duplicates"] == 4
    assert fleet_store().details("web_search")[0]["consec"] == "3"


def test_a_batch_whose_transaction_rolled_back_is_counted_once_when_resent(
    report: Report,
) -> None:
    # The fleet counted the batch, then its database transaction failed: the client resends
    # it, the database applies it, and the fleet must recognise the ids it already counted.
    events = [
        run_started("r-lost"),
        *(tool_call("r-lost", "web_search", "retryable") for _ in range(2)),
    ]
    with pytest.raises(RuntimeError), transaction.atomic():
        ingest_batch(worker_id="w1", events=events)
        raise RuntimeError("the commit failed")
    assert fleet_store().details("web_search")[0]["consec"] == "2"
    reply = report("w1", "web_search", events=events)
    assert reply["accepted"] == 3
    assert fleet_store().details("web_search")[0]["consec"] == "2"


def test_without_redis_a_batch_is_refused_whole_with_retry_after(
    client: Client, agent_token: str, settings: Settings
) -> None:
    settings.REDIS_URL = f"redis://127.0.0.1:{free_port()}/0"  # nothing listens there
    events = [run_started("r-down"), tool_call("r-down", "web_search", "retryable")]
    response = client.post(
        "/api/v1/events",
        {"worker_id": "w1", "events": events},
        content_type="application/json",
        headers={"Authorization": f"Bearer {agent_token}"},
    )
    assert response.status_code == 503
    assert response["Retry-After"] == "2"
    assert "Redis" in response.json()["detail"]
    assert not ToolCall.objects.exists() and not Run.objects.exists()
