"""Degraded calls (results that failed a check) from two workers open the fleet breaker; the
check's reason reaches the board, the incident timeline and the Slack alert, and the fleet's
own reason (read by every agent) carries no agent text."""

from __future__ import annotations

from typing import Any

import pytest
import redis
from django.test import Client
from django.utils import timezone

from breakers.alerts.facts import build_alert_message
from breakers.models import Alert, AlertChannel, Incident, Tool
from scripts.testing.fake_slack import FakeSlackServer
from tests.fleet.support import bound_token, run_started, tool_call

pytestmark = pytest.mark.django_db
REASON = "returns empty results for every query"


def report(client: Client, worker: str, token: str, run: str, outcomes: list[str]) -> Any:
    now = timezone.now().isoformat()
    events = [run_started(run)] + [
        tool_call(run, "web_search", outcome, error=f"Degraded: {REASON}", ts=now)
        for outcome in outcomes
    ]
    response = client.post(
        "/api/v1/events",
        {"worker_id": worker, "events": events},
        content_type="application/json",
        headers={"Authorization": f"Bearer {token}"},
    )
    assert response.status_code == 200, response.content
    return response.json()


def test_a_degraded_outage_reaches_the_board_the_incident_and_slack(
    client: Client,
    operator_client: Client,
    fleet_redis: redis.Redis,
    slack_server: FakeSlackServer,
) -> None:
    AlertChannel.objects.create(name="oncall", webhook_url=slack_server.webhook_url)
    report(client, "w1", bound_token("w1"), "r1", ["degraded"] * 3)
    reply = report(client, "w2", bound_token("w2"), "r2", ["degraded"] * 2)
    fleet = reply["fleet"]["tools"]["web_search"]
    assert fleet["state"] == "open"
    assert fleet["reason"] == "5 consecutive failures from 2 workers, the last a degraded result"
    assert REASON not in fleet["reason"]  # agent text never goes into the fleet state

    board = operator_client.get("/").content.decode()
    assert (
        f'<span class="degraded-reason">degraded: <span class="agent-text " title="{REASON}">'
        in board
    )

    incident = Incident.objects.get()
    page = operator_client.get(f"/incidents/{incident.pk}/").content.decode()
    assert "3 degraded results" in page and "2 degraded results" in page
    assert f"Degraded: {REASON}" in page  # the first failure of the streak

    alert = Alert.objects.get(kind="opened")
    message = build_alert_message(alert)
    assert REASON in message.text or any(REASON in str(block) for block in message.blocks)
    assert Tool.objects.get(name="web_search").state == "open"


def test_a_tool_that_went_out_for_transport_failures_shows_no_degraded_line(
    client: Client, operator_client: Client, fleet_redis: redis.Redis
) -> None:
    for worker, run in (("w1", "r1"), ("w2", "r2")):
        token = bound_token(worker)
        events = [run_started(run)]
        now = timezone.now().isoformat()
        events += [tool_call(run, "web_search", "retryable", ts=now) for _ in range(3)]
        response = client.post(
            "/api/v1/events",
            {"worker_id": worker, "events": events},
            content_type="application/json",
            headers={"Authorization": f"Bearer {token}"},
        )
        assert response.status_code == 200
    assert Tool.objects.get(name="web_search").state == "open"
    assert "degraded-reason" not in operator_client.get("/").content.decode()
