"""Workers sharing one unbound token are one voter but each its own trial-lease holder: exactly one
of them gets the half-open trial, and only its trial call decides (real API, real Redis)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.test import Client
from django.utils import timezone

from breakers.fleet_service import fleet_tick
from breakers.models import FleetTransition, Tool
from tests.fleet.support import Report, iso, next_id, run_started, tool_call

pytestmark = pytest.mark.django_db
TOOL = "web_search"


def ask_for_trial(client: Client, token: str, worker: str) -> Any:
    response = client.post(
        f"/api/v1/tools/{TOOL}/trial",
        {"worker_id": worker},
        content_type="application/json",
        headers={"Authorization": f"Bearer {token}"},
    )
    assert response.status_code == 200, response.content
    return response.json()


def report_trial_call(client: Client, token: str, worker: str, outcome: str) -> Any:
    run_id = f"r-{next_id()}"
    # After the half-open transition (ticked 31 s ahead): an older outcome would be stale.
    after_half_open = iso(timezone.now() + timedelta(seconds=32))
    events = [run_started(run_id), tool_call(run_id, TOOL, outcome, trial=True, ts=after_half_open)]
    response = client.post(
        "/api/v1/events",
        {"worker_id": worker, "events": events},
        content_type="application/json",
        headers={"Authorization": f"Bearer {token}"},
    )
    assert response.status_code == 200, response.content
    return response.json()


def half_open(report: Report) -> None:
    report("w1", TOOL, "retryable", "retryable", "retryable")  # two bound tokens open it
    report("w2", TOOL, "retryable", "retryable")
    fleet_tick(now=timezone.now() + timedelta(seconds=31))
    assert Tool.objects.get(name=TOOL).state == "half_open"


def test_two_workers_on_one_unbound_token_get_one_trial_lease(
    client: Client, agent_token: str, report: Report
) -> None:
    half_open(report)
    first = ask_for_trial(client, agent_token, "shared-a")
    second = ask_for_trial(client, agent_token, "shared-b")
    assert first["granted"] is True
    assert second == {"granted": False, "window": 1, "expires_at": None}
    assert ask_for_trial(client, agent_token, "shared-a")["granted"] is True  # the holder, again


def test_only_the_holders_trial_call_decides_when_workers_share_a_token(
    client: Client, agent_token: str, report: Report
) -> None:
    half_open(report)
    assert ask_for_trial(client, agent_token, "shared-a")["granted"] is True
    report_trial_call(client, agent_token, "shared-b", "retryable")  # not the holder
    assert Tool.objects.get(name=TOOL).state == "half_open"
    reply = report_trial_call(client, agent_token, "shared-a", "success")
    assert reply["fleet"]["tools"][TOOL]["state"] == "closed"
    closing = FleetTransition.objects.get(tool__name=TOOL, to_state="closed")
    assert closing.cause["holder"].endswith("/shared-a")
