"""Operators force open, force close, release and reset fleet-wide, with a reason, audited."""

from __future__ import annotations

from typing import Any

import pytest
import redis
from django.contrib.auth.models import Group, User
from django.db import DatabaseError, connection
from django.test import Client

from breakers.fleet.rules import OperatorActionKind
from breakers.fleet_service import fleet_operator_action, fleet_store
from breakers.models import FleetTransition, Incident, OperatorAction, Tool
from runs.models import AgentToken
from tests.fleet.support import Report

pytestmark = pytest.mark.django_db


def act(client: Client, token: str, tool: str, action: str, body: Any = None) -> Any:
    return client.post(
        f"/api/v1/tools/{tool}/{action}",
        {"reason": "vendor status page says down"} if body is None else body,
        content_type="application/json",
        headers={"Authorization": f"Bearer {token}"},
    )


@pytest.fixture
def known_tool(report: Report) -> str:
    report("w1", "web_search", "success")
    return "web_search"


def test_force_open_takes_the_tool_out_for_everyone_and_is_audited(
    client: Client, operator_token: str, known_tool: str, report: Report
) -> None:
    response = act(client, operator_token, known_tool, "force-open")
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["state"] == "forced_open"
    assert body["before"]["state"] == "closed" and body["after"]["state"] == "forced_open"
    assert body["actor"].startswith("token:ops-bot")
    fleet = report("w1", known_tool, "success")["fleet"]["tools"][known_tool]
    assert fleet == {
        "state": "forced_open",
        "since": fleet["since"],
        "reason": "forced open by an operator: vendor status page says down",
        "forced": True,
    }
    audit = OperatorAction.objects.get()
    assert (audit.action, audit.reason, audit.token is not None) == (
        "force_open",
        "vendor status page says down",
        True,
    )
    transition = FleetTransition.objects.get()
    assert transition.cause_kind == "operator" and transition.operator_action == audit
    assert transition.cause["actor"] == audit.actor
    assert Incident.objects.get().opened_by == transition


def test_a_forced_state_overrides_the_breaker_until_released(
    client: Client, operator_token: str, report: Report
) -> None:
    report("w1", "web_search", "retryable", "retryable", "retryable")
    report("w2", "web_search", "retryable", "retryable")
    assert act(client, operator_token, "web_search", "force-close").json()["state"] == (
        "forced_closed"
    )
    assert Incident.objects.get().closed_at is not None  # back in the toolsets
    report("w1", "web_search", "retryable", "retryable")
    assert Tool.objects.get(name="web_search").state == "forced_closed"
    released = act(client, operator_token, "web_search", "release").json()
    assert released["state"] == "open"  # what the automatic breaker says now


def test_reset_clears_the_automatic_breaker(
    client: Client, operator_token: str, report: Report
) -> None:
    report("w1", "web_search", "retryable", "retryable", "retryable")
    report("w2", "web_search", "retryable", "retryable")
    body = act(client, operator_token, "web_search", "reset").json()
    assert (body["before"]["state"], body["state"]) == ("open", "closed")
    assert Tool.objects.get(name="web_search").auto_reason.startswith("reset by an operator")


@pytest.mark.parametrize(
    ("body", "status", "message"),
    [
        ({"reason": "   "}, 400, "a reason is required"),
        ({"reason": "x" * 1001}, 422, "at most 1000"),
        ({}, 422, "reason"),
        ({"reason": 42}, 422, "string"),
    ],
)
def test_an_action_without_a_usable_reason_is_refused_and_writes_nothing(
    client: Client,
    operator_token: str,
    known_tool: str,
    body: dict[str, Any],
    status: int,
    message: str,
) -> None:
    response = act(client, operator_token, known_tool, "force-open", body)
    assert response.status_code == status
    assert message in response.content.decode()
    assert not OperatorAction.objects.exists()
    assert fleet_store().details(known_tool).state.forced == ""  # type: ignore[union-attr]


def test_unknown_tools_and_releasing_an_unforced_tool_are_clear_errors(
    client: Client, operator_token: str, known_tool: str
) -> None:
    missing = act(client, operator_token, "no_such_tool", "force-open")
    assert missing.status_code == 404 and "no_such_tool" in missing.json()["detail"]
    release = act(client, operator_token, known_tool, "release")
    assert release.status_code == 409
    assert release.json()["detail"] == "'web_search' is not forced: there is nothing to release"
    assert not OperatorAction.objects.exists()


@pytest.mark.parametrize("action", ["trial", "force-open"])
def test_a_post_to_a_path_no_route_matches_is_a_json_404(operator_token: str, action: str) -> None:
    # `path:` does not match a newline, so this reaches the API's catch-all; the CSRF middleware
    # used to answer it with Django's HTML 403 page (found by the fuzz pass).
    reply = act(Client(enforce_csrf_checks=True), operator_token, "a%0Ab", action)
    assert reply.status_code == 404
    assert reply["Content-Type"] == "application/json"
    assert reply.json() == {"detail": "Not Found: no such API path"}


def test_agent_tokens_and_anonymous_callers_cannot_act(
    client: Client, agent_token: str, known_tool: str
) -> None:
    assert act(client, agent_token, known_tool, "force-open").status_code == 403
    anonymous = client.post(
        f"/api/v1/tools/{known_tool}/force-open",
        {"reason": "x"},
        content_type="application/json",
    )
    assert anonymous.status_code == 401
    assert not OperatorAction.objects.exists()


@pytest.fixture
def operator_user(db: None) -> User:
    user = User.objects.create_user("olga", password="pw-olga-123456")
    group, _ = Group.objects.get_or_create(name="operators")
    user.groups.add(group)
    return user


def session_post(client: Client, path: str, *, csrf: bool) -> Any:
    client.get("/accounts/login/")  # sets the CSRF cookie
    headers = {"X-CSRFToken": client.cookies["csrftoken"].value} if csrf else {}
    return client.post(
        path, {"reason": "seen on the board"}, content_type="application/json", headers=headers
    )


def test_a_logged_in_operator_acts_with_the_csrf_token(
    operator_user: User, known_tool: str
) -> None:
    client = Client(enforce_csrf_checks=True)
    client.force_login(operator_user)
    path = f"/api/v1/tools/{known_tool}/force-open"
    refused = session_post(client, path, csrf=False)
    assert refused.status_code == 403 and "CSRF" in refused.json()["detail"]
    response = session_post(client, path, csrf=True)
    assert response.status_code == 200, response.content
    audit = OperatorAction.objects.get()
    assert (audit.user, audit.actor) == (operator_user, "user:olga")


def test_a_logged_in_user_who_is_not_an_operator_is_refused(known_tool: str) -> None:
    client = Client(enforce_csrf_checks=True)
    client.force_login(User.objects.create_user("vic", password="pw-vic-123456"))
    response = session_post(client, f"/api/v1/tools/{known_tool}/force-open", csrf=True)
    assert response.status_code == 403
    assert response.json()["detail"] == "only operators can act on breakers"


def test_an_operator_changes_a_tools_policy(
    client: Client, operator_token: str, report: Report
) -> None:
    report("w1", "web_search", "success")
    response = client.put(
        "/api/v1/tools/web_search/policy",
        {"threshold": 2, "min_workers": 1},
        content_type="application/json",
        headers={"Authorization": f"Bearer {operator_token}"},
    )
    assert response.status_code == 200, response.content
    assert response.json()["policy"]["threshold"] == 2
    reply = report("w1", "web_search", "retryable", "retryable")
    assert reply["fleet"]["tools"]["web_search"]["state"] == "open"
    bad = client.put(
        "/api/v1/tools/web_search/policy",
        {"probe_kind": "http"},
        content_type="application/json",
        headers={"Authorization": f"Bearer {operator_token}"},
    )
    assert bad.status_code == 400
    assert "probe_url" in bad.json()["errors"]


def test_operators_see_the_streak_behind_a_tool(
    client: Client, operator_token: str, agent_token: str, report: Report
) -> None:
    report("w1", "web_search", "retryable", "retryable")
    report("w2", "web_search", "retryable")
    url = "/api/v1/tools/web_search"
    assert client.get(url, headers={"Authorization": f"Bearer {agent_token}"}).status_code == 403
    details = client.get(url, headers={"Authorization": f"Bearer {operator_token}"}).json()
    assert (details["state"], details["consecutive"]) == ("closed", 3)
    assert details["workers"] == {"w1": 2, "w2": 1}
    assert len(details["streak_events"]) == 3
    assert details["policy"] == {
        "threshold": 5,
        "min_workers": 2,
        "cooldown_ms": 30_000,
        "max_cooldown_ms": 300_000,
        "trial": "lease",
        "spend_amount_usd": 0.0,  # the spend rule is off unless configured
        "spend_window_seconds": 600.0,
    }


def test_an_action_whose_redis_step_fails_writes_no_audit_row_and_changes_nothing(
    known_tool: str,
) -> None:
    store = fleet_store()
    state_key = store.tool_keys(known_tool)[0]
    # A state key of the wrong type makes the real script fail (WRONGTYPE) inside Redis.
    store.client.delete(state_key)
    store.client.set(state_key, "not a hash")
    with pytest.raises(redis.ResponseError):
        fleet_operator_action(
            tool_name=known_tool,
            action=OperatorActionKind.FORCE_OPEN,
            reason="vendor down",
            token=AgentToken.issue(name="ops", is_operator=True)[0],
        )
    assert not OperatorAction.objects.exists()
    assert store.client.get(state_key) == b"not a hash"
    assert Tool.objects.get(name=known_tool).state == "closed"


def test_an_action_whose_audit_row_cannot_be_written_leaves_redis_unchanged(
    known_tool: str,
) -> None:
    with connection.cursor() as cursor:
        cursor.execute(
            "CREATE FUNCTION bp_test_refuse_audit() RETURNS trigger LANGUAGE plpgsql AS "
            "$$ BEGIN RAISE EXCEPTION 'audit table refuses'; END $$;"
            "CREATE TRIGGER bp_test_refuse_audit BEFORE INSERT ON breakers_operatoraction "
            "FOR EACH ROW EXECUTE FUNCTION bp_test_refuse_audit();"
        )  # rolled back with the test's transaction
    before = fleet_store().details(known_tool).state
    with pytest.raises(DatabaseError, match="audit table refuses"):
        fleet_operator_action(
            tool_name=known_tool,
            action=OperatorActionKind.FORCE_OPEN,
            reason="vendor down",
            token=AgentToken.issue(name="ops", is_operator=True)[0],
        )
    assert fleet_store().details(known_tool).state == before
    assert before is not None and before.forced == ""
