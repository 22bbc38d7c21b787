"""GET /api/v1/fleet with ETag, and the agents' half-open trial lease."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
from django.test import Client
from django.utils import timezone

from breakers.fleet.rules import OperatorActionKind
from breakers.fleet_service import fleet_operator_action, fleet_tick
from breakers.models import Tool
from runs.models import AgentToken
from tests.fleet.support import Report, iso

pytestmark = pytest.mark.django_db
FLEET = "/api/v1/fleet"


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def open_breaker(report: Report, tool: str = "web_search") -> None:
    report("w1", tool, "retryable", "retryable", "retryable")
    report("w2", tool, "retryable", "retryable")


def test_the_fleet_needs_a_token(client: Client) -> None:
    assert client.get(FLEET).status_code == 401
    assert client.get(FLEET, headers=bearer("bp_wrong")).status_code == 401


def test_the_fleet_lists_every_tool_with_its_state(
    client: Client, agent_token: str, report: Report
) -> None:
    report("w1", "calculator", "success")
    open_breaker(report)
    response = client.get(FLEET, headers=bearer(agent_token))
    assert response.status_code == 200
    body = response.json()
    assert body["version"] == 1
    assert body["tools"]["calculator"] == {
        "state": "closed",
        "since": None,
        "reason": "",
        "forced": False,
    }
    assert body["tools"]["web_search"]["state"] == "open"


def test_an_unchanged_fleet_answers_304_to_its_etag(
    client: Client, agent_token: str, report: Report
) -> None:
    report("w1", "web_search", "retryable")
    first = client.get(FLEET, headers=bearer(agent_token))
    etag = first["ETag"]
    # Counting failures changes no state: the agents' copy is still right.
    report("w2", "web_search", "retryable")
    again = client.get(FLEET, headers={**bearer(agent_token), "If-None-Match": etag})
    assert again.status_code == 304
    assert again.content == b""
    assert again["ETag"] == etag
    report("w2", "web_search", "retryable", "retryable", "retryable")
    changed = client.get(FLEET, headers={**bearer(agent_token), "If-None-Match": etag})
    assert changed.status_code == 200
    assert changed["ETag"] != etag
    assert changed.json()["tools"]["web_search"]["state"] == "open"


def test_half_open_says_who_makes_the_trial(
    client: Client, agent_token: str, report: Report
) -> None:
    open_breaker(report)
    fleet_tick(now=timezone.now() + timedelta(seconds=31))
    tool = client.get(FLEET, headers=bearer(agent_token)).json()["tools"]["web_search"]
    assert (tool["state"], tool["trial"]) == ("half_open", "lease")
    assert tool["reason"] == "cooldown of 30 s elapsed; one trial call"


def test_one_worker_gets_the_trial_lease_and_its_call_decides(
    client: Client, worker_token: Callable[[str], str], report: Report
) -> None:
    open_breaker(report)
    fleet_tick(now=timezone.now() + timedelta(seconds=31))
    url = "/api/v1/tools/web_search/trial"

    def ask(worker: str) -> Any:
        headers = bearer(worker_token(worker))
        body = {"worker_id": worker}
        return client.post(url, body, content_type="application/json", headers=headers).json()

    first, second = ask("w3"), ask("w4")
    assert first["granted"] is True and first["expires_at"] is not None
    assert second == {"granted": False, "window": 1, "expires_at": None}
    report("w4", "web_search", "success", trial=True)  # not the lease holder: decides nothing
    assert Tool.objects.get(name="web_search").state == "half_open"
    report("w3", "web_search", "retryable")  # the holder's late call, not the trial
    assert Tool.objects.get(name="web_search").state == "half_open"
    # The trial call happens after the half-open transition (ticked 31 s ahead): an outcome that
    # happened before the breaker's last change is stale and ignored.
    after_half_open = iso(timezone.now() + timedelta(seconds=32))
    reply = report("w3", "web_search", "success", trial=True, ts=after_half_open)
    assert reply["fleet"]["tools"]["web_search"]["state"] == "closed"


def test_an_outcome_from_before_the_last_transition_is_stale(
    client: Client, agent_token: str, report: Report
) -> None:
    open_breaker(report)
    tool = Tool.objects.get(name="web_search")
    operator = AgentToken.issue(name="ops", is_operator=True)[0]
    fleet_operator_action(
        tool_name="web_search", action=OperatorActionKind.RESET, reason="recovered", token=operator
    )
    closed_at = Tool.objects.get(name="web_search").since
    assert closed_at is not None and tool.state == "open"
    # Failures that happened during the outage but arrive after the close change nothing...
    before = iso(closed_at - timedelta(seconds=10))
    for worker in ("w1", "w2", "w1", "w2", "w1"):
        report(worker, "web_search", "retryable", ts=before)
    assert Tool.objects.get(name="web_search").state == "closed"
    # ...while fresh ones still open it.
    fresh = iso(closed_at + timedelta(seconds=1))
    for worker in ("w1", "w2", "w1", "w2", "w1"):
        report(worker, "web_search", "retryable", ts=fresh)
    assert Tool.objects.get(name="web_search").state == "open"


def test_a_trial_of_an_unknown_tool_is_404(client: Client, agent_token: str) -> None:
    response = client.post(
        "/api/v1/tools/nope/trial",
        {"worker_id": "w1"},
        content_type="application/json",
        headers=bearer(agent_token),
    )
    assert response.status_code == 404
    assert "nope" in response.json()["detail"]
