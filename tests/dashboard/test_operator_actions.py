"""Force open, force close, release and reset from the dashboard: operators only, reason required,
audited, and applied to the real fleet store."""

from __future__ import annotations

import json

import pytest
import redis
from django.contrib.auth.models import User
from django.test import Client, override_settings

from breakers.fleet_service import fleet_tool_details
from breakers.models import OperatorAction, Tool, ToolPolicy
from tests.dashboard.live import calls, open_fleet_breaker

HTMX = {"HX-Request": "true"}
ACTIONS = ["force_open", "force_close", "release", "reset"]


@pytest.fixture
def tool(fleet_redis: redis.Redis) -> Tool:
    open_fleet_breaker("web_search")
    return Tool.objects.get(name="web_search")


def act(client: Client, tool: Tool, action: str, reason: str, **extra: str) -> object:
    return client.post(
        f"/tools/{tool.pk}/act/", {"action": action, "reason": reason, **extra}, headers=HTMX
    )


@pytest.mark.parametrize("action", ACTIONS)
def test_viewer_is_refused_every_action_even_with_a_crafted_request(
    viewer_client: Client, tool: Tool, action: str
) -> None:
    response = act(viewer_client, tool, action, "I am not an operator")
    assert response.status_code == 403  # type: ignore[attr-defined]
    assert not OperatorAction.objects.exists()
    assert fleet_tool_details(tool_name="web_search")["state"] == "open"


def test_viewer_cannot_open_the_action_form_or_change_the_policy(
    viewer_client: Client, tool: Tool
) -> None:
    assert viewer_client.get(f"/tools/{tool.pk}/act/").status_code == 403
    response = viewer_client.post(f"/tools/{tool.pk}/policy/", {"threshold": "1"})
    assert response.status_code == 403
    assert not ToolPolicy.objects.exists()


def test_anonymous_user_cannot_act(client: Client, tool: Tool) -> None:
    response = act(client, tool, "force_close", "who am I")
    assert response["HX-Redirect"].startswith("/accounts/login/")  # type: ignore[index]
    assert not OperatorAction.objects.exists()


def test_inactive_operator_is_refused(client: Client, operator: User, tool: Tool) -> None:
    client.force_login(operator)
    operator.is_active = False
    operator.save()
    response = act(client, tool, "force_close", "still here?")
    # Signed out by the deactivation: sent to the login page, nothing done.
    assert response["HX-Redirect"].startswith("/accounts/login/")  # type: ignore[index]
    assert not OperatorAction.objects.exists()


@pytest.mark.parametrize("reason", ["", "   ", "\n\t"])
def test_reason_is_required(operator_client: Client, tool: Tool, reason: str) -> None:
    response = act(operator_client, tool, "force_close", reason)
    assert response.status_code == 400  # type: ignore[attr-defined]
    assert "A reason is required" in response.content.decode()  # type: ignore[attr-defined]
    assert not OperatorAction.objects.exists()
    assert fleet_tool_details(tool_name="web_search")["state"] == "open"


def test_reason_longer_than_the_limit_is_refused(operator_client: Client, tool: Tool) -> None:
    response = act(operator_client, tool, "force_close", "x" * 1001)
    assert response.status_code == 400  # type: ignore[attr-defined]
    assert not OperatorAction.objects.exists()


def test_unknown_action_is_refused(operator_client: Client, tool: Tool) -> None:
    response = act(operator_client, tool, "explode", "why not")
    assert response.status_code == 400  # type: ignore[attr-defined]
    assert not OperatorAction.objects.exists()


def test_operator_forces_a_tool_closed_from_the_board(
    operator_client: Client, operator: User, tool: Tool
) -> None:
    response = act(operator_client, tool, "force_close", "vendor says it is fixed")
    assert response.status_code == 200  # type: ignore[attr-defined]
    # The board polls at once instead of waiting for its next tick.
    assert json.loads(response["HX-Trigger"]) == {"fleet-changed": {}}  # type: ignore[index]
    html = response.content.decode()  # type: ignore[attr-defined]
    assert "Force close" in html and "state-forced-closed" in html and "state-open" in html
    row = OperatorAction.objects.get()
    assert (row.action, row.reason, row.user, row.actor) == (
        "force_close",
        "vendor says it is fixed",
        operator,
        "user:operator",
    )
    assert (row.before["state"], row.after["state"]) == ("open", "forced_closed")
    assert fleet_tool_details(tool_name="web_search")["state"] == "forced_closed"
    board = operator_client.get("/").content.decode()
    assert "state-forced-closed" in board
    assert "forced closed by an operator: vendor says it is fixed" in board


def test_each_action_reaches_the_fleet_store(operator_client: Client, tool: Tool) -> None:
    expected = {
        "force_open": "forced_open",
        "release": "open",
        "reset": "closed",
        "force_close": "forced_closed",
    }
    for action, state in expected.items():
        assert act(operator_client, tool, action, f"step {action}").status_code == 200  # type: ignore[attr-defined]
        assert fleet_tool_details(tool_name="web_search")["state"] == state
    assert list(OperatorAction.objects.order_by("id").values_list("action", flat=True)) == list(
        expected
    )


def test_release_of_a_tool_that_is_not_forced_is_a_409(operator_client: Client, tool: Tool) -> None:
    response = act(operator_client, tool, "release", "nothing to release")
    assert response.status_code == 409  # type: ignore[attr-defined]
    assert "not forced" in response.content.decode()  # type: ignore[attr-defined]
    assert not OperatorAction.objects.exists()


def test_plain_form_post_redirects_to_the_board_with_a_message(
    operator_client: Client, tool: Tool
) -> None:
    response = operator_client.post(
        f"/tools/{tool.pk}/act/", {"action": "force_open", "reason": "kill switch"}
    )
    assert response.status_code == 303
    assert response["Location"] == "/"
    page = operator_client.get("/").content.decode()
    assert "Force open of web_search: now forced open." in page


def test_action_from_the_tool_page_refreshes_the_tool_page(
    operator_client: Client, tool: Tool
) -> None:
    response = act(operator_client, tool, "force_open", "kill switch", next="tool")
    assert response["HX-Refresh"] == "true"  # type: ignore[index]
    page = operator_client.get(f"/tools/{tool.pk}/").content.decode()
    assert "Force open of web_search: now forced open." in page
    assert "state-forced-open" in page


def test_the_action_form_needs_csrf(operator: User, tool: Tool) -> None:
    client = Client(enforce_csrf_checks=True)
    client.force_login(operator)
    response = client.post(f"/tools/{tool.pk}/act/", {"action": "reset", "reason": "no token"})
    assert response.status_code == 403
    assert not OperatorAction.objects.exists()


def test_the_pages_send_csrf_with_every_htmx_request(operator_client: Client, tool: Tool) -> None:
    html = operator_client.get(f"/tools/{tool.pk}/act/", headers=HTMX).content.decode()
    assert html.lstrip().startswith('<section class="panel action-panel"')
    assert 'name="csrfmiddlewaretoken"' in html
    board = operator_client.get("/").content.decode()
    assert 'hx-headers=\'{"X-CSRFToken": "' in board


def test_action_form_without_htmx_is_a_whole_page(operator_client: Client, tool: Tool) -> None:
    html = operator_client.get(f"/tools/{tool.pk}/act/?action=reset").content.decode()
    assert "<html" in html
    assert 'value="reset" required checked' in html


def test_redis_down_refuses_the_action_and_writes_nothing(
    operator_client: Client, tool: Tool
) -> None:
    with override_settings(REDIS_URL="redis://127.0.0.1:1/0", REDIS_SOCKET_TIMEOUT=0.5):
        response = act(operator_client, tool, "force_open", "kill switch")
    assert response.status_code == 503  # type: ignore[attr-defined]
    assert "cannot be reached" in response.content.decode()  # type: ignore[attr-defined]
    assert not OperatorAction.objects.exists()
    assert Tool.objects.get(pk=tool.pk).state == "open"


def test_unknown_tool_is_a_404(operator_client: Client, fleet_redis: redis.Redis) -> None:
    response = operator_client.post("/tools/999999/act/", {"action": "reset", "reason": "x"})
    assert response.status_code == 404


def test_operator_changes_the_policy(operator_client: Client, tool: Tool) -> None:
    response = operator_client.post(
        f"/tools/{tool.pk}/policy/",
        {"threshold": "3", "min_workers": "", "cooldown_seconds": "10", "max_cooldown_seconds": ""},
    )
    assert response.status_code == 303
    policy = ToolPolicy.objects.get(tool=tool)
    assert (policy.threshold, policy.min_workers, policy.cooldown_seconds) == (3, None, 10.0)
    assert policy.updated_by == "user:operator"
    details = fleet_tool_details(tool_name="web_search")
    assert details["policy"]["threshold"] == 3
    assert details["policy"]["cooldown_ms"] == 10_000
    page = operator_client.get(f"/tools/{tool.pk}/").content.decode()
    assert "Policy of web_search saved." in page
    assert "3 consecutive retryable failures" in page


def test_inconsistent_policy_is_refused_with_the_reason(
    operator_client: Client, tool: Tool
) -> None:
    response = operator_client.post(
        f"/tools/{tool.pk}/policy/",
        {"threshold": "0", "cooldown_seconds": "600", "max_cooldown_seconds": "60"},
    )
    assert response.status_code == 400
    html = response.content.decode()
    assert "Ensure this value is greater than or equal to 1" in html
    assert not ToolPolicy.objects.exists()
    response = operator_client.post(
        f"/tools/{tool.pk}/policy/", {"cooldown_seconds": "600", "max_cooldown_seconds": "60"}
    )
    assert response.status_code == 400
    assert "cooldown" in response.content.decode()
    assert ToolPolicy.objects.filter(threshold__isnull=False).count() == 0


def test_calls_keep_counting_after_an_action(operator_client: Client, tool: Tool) -> None:
    act(operator_client, tool, "reset", "vendor fixed, start over")
    calls("web_search", "w-1", "retryable")
    assert fleet_tool_details(tool_name="web_search")["consecutive"] == 1
