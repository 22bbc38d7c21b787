"""Ingest feeds the fleet breaker: accepted tool calls update Redis, transitions become rows."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import pytest
import redis
from django.db import DatabaseError, connection
from django.test import Client
from pytest_django.fixtures import Settings

from breakers.fleet_service import fleet_store
from breakers.fleet_service.backlog import apply_fleet_backlog
from breakers.models import FleetTransition, Incident, Tool
from runs.models import FleetBacklog, Run, ToolCall
from runs.services import ingest_batch
from scripts.testing.processes import free_port
from tests.fleet.support import Report, run_started, tool_call

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
    assert _consecutive("web_search") == 3


def test_a_resent_batch_is_applied_once(report: Report) -> None:
    events = [
        run_started("r-resend"),
        *(tool_call("r-resend", "web_search", "retryable") for _ in range(3)),
    ]
    for _ in range(3):
        reply = report("w1", "web_search", events=events)
    assert reply["duplicates"] == 4
    assert _consecutive("web_search") == 3


@contextmanager
def tool_call_inserts_fail() -> Iterator[None]:
    """A real fault inside the ingest transaction: the database refuses tool-call rows."""
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute(
                "CREATE FUNCTION refuse_row() RETURNS trigger LANGUAGE plpgsql AS"
                " $$BEGIN RAISE EXCEPTION 'injected fault'; END$$"
            )
            cursor.execute(
                "CREATE TRIGGER refuse_tool_calls BEFORE INSERT ON runs_toolcall"
                " FOR EACH ROW EXECUTE FUNCTION refuse_row()"
            )
        else:
            cursor.execute(
                "CREATE TRIGGER refuse_tool_calls BEFORE INSERT ON runs_toolcall"
                " BEGIN SELECT RAISE(ABORT, 'injected fault'); END"
            )
    try:
        yield
    finally:
        with connection.cursor() as cursor:
            cursor.execute(
                "DROP TRIGGER refuse_tool_calls"
                + (" ON runs_toolcall" if connection.vendor == "postgresql" else "")
            )
            if connection.vendor == "postgresql":
                cursor.execute("DROP FUNCTION refuse_row()")


def test_a_batch_whose_transaction_rolled_back_never_reaches_the_fleet(report: Report) -> None:
    # Redis is updated only after the database commits: a batch that failed (answered 500 and
    # never resent) must leave no trace in the fleet, not even a count; resent, it counts once.
    report("w2", "web_search", "retryable", "retryable", "retryable")
    events = [
        run_started("r-lost"),
        *(tool_call("r-lost", "web_search", "retryable") for _ in range(2)),
    ]
    with tool_call_inserts_fail(), pytest.raises(DatabaseError):
        ingest_batch(worker_id="w1", events=events)
    details = fleet_store().details("web_search")
    assert details.state is not None
    assert (details.state.consecutive, details.workers) == (3, {"w2": 3})
    assert not ToolCall.objects.filter(run__run_id="r-lost").exists()

    reply = report("w1", "web_search", events=events)  # the agent resends it: 3 + 2 = 5
    assert reply["accepted"] == 3
    assert reply["fleet"]["tools"]["web_search"]["state"] == "open"
    again = report("w1", "web_search", events=events)
    assert (again["accepted"], again["duplicates"]) == (0, 3)
    assert FleetTransition.objects.filter(tool__name="web_search", to_state="open").count() == 1


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


def test_a_fleet_store_failure_after_commit_keeps_the_rows_and_the_tick_catches_up(
    report: Report, fleet_redis: redis.Redis
) -> None:
    # A real fault in Redis after the database committed: the tool's state key holds the wrong
    # type, so the fleet script fails. The batch is answered 200 (its rows are committed, a
    # resend could not fix anything), and the calls wait in the backlog for the tick.
    state_key = fleet_store().tool_keys("web_search")[0]
    fleet_redis.set(state_key, "not a hash")
    events = [
        run_started("r-late"),
        *(tool_call("r-late", "web_search", "retryable") for _ in range(2)),
    ]

    reply = report("w1", "web_search", events=events)

    assert reply["accepted"] == 3
    assert ToolCall.objects.filter(run__run_id="r-late").count() == 2
    assert FleetBacklog.objects.count() == 1
    assert apply_fleet_backlog() == 0  # still failing: the rows wait
    fleet_redis.delete(state_key)
    assert apply_fleet_backlog() == 1
    assert not FleetBacklog.objects.exists()
    assert _consecutive("web_search") == 2
    assert apply_fleet_backlog() == 0


def _consecutive(tool: str) -> int:
    state = fleet_store().details(tool).state
    return state.consecutive if state is not None else 0
