"""The board in a real browser: a tool turns open while agents report, an operator forces it
closed with a reason, the audit log shows it; a viewer cannot act; hostile names stay text.

Events go to the live server's real ingest API (``POST /api/v1/events`` with an agent token) from
two worker ids, so the fleet breaker opens in Redis exactly as in production.
"""

from __future__ import annotations

import itertools
import json
import re
import urllib.request
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from typing import Any

import pytest
import redis
from django.contrib.auth.models import User
from playwright.sync_api import Page, Response, expect

from breakers.access.operators import operators_group
from breakers.fleet_service import fleet_store, fleet_tool_details
from breakers.models import OperatorAction, Tool
from runs.models import AgentToken
from tests.browser.support import PageWatch
from tests.dashboard.factories import HOSTILE_NAME, HOSTILE_SCRIPT

pytestmark = pytest.mark.browser

_ids = itertools.count(1)
# The board polls every 2 s; a change must show within a few polls.
LIVE_TIMEOUT_MS = 10_000


def _delete_fleet_keys(client: redis.Redis) -> None:
    keys = list(client.scan_iter(match="bp:*", count=1000))
    if keys:
        client.delete(*keys)


@pytest.fixture
def fleet_redis(transactional_db: None) -> Iterator[redis.Redis]:
    client = fleet_store().client
    _delete_fleet_keys(client)
    fleet_store().start_generation()
    yield client
    _delete_fleet_keys(client)


@pytest.fixture
def operator(transactional_db: None) -> User:
    user = User.objects.create_user("operator", password="operator-pass-123")
    user.groups.add(operators_group())
    return user


Agent = Callable[..., dict[str, Any]]


@pytest.fixture
def agent(live_server: Any, fleet_redis: redis.Redis) -> Agent:
    """Report one run of tool calls from a worker through the live server's ingest API, each
    worker with its own token bound to it (the default quorum counts tokens)."""
    tokens: dict[str, str] = {}

    def report(worker_id: str, tool: str, *outcomes: str) -> dict[str, Any]:
        if worker_id not in tokens:
            tokens[worker_id] = AgentToken.issue(name=f"agent {worker_id}", worker_id=worker_id)[1]
        token = tokens[worker_id]
        run_id = f"r-browser-{next(_ids)}"
        now = datetime.now(UTC).isoformat().replace("+00:00", "Z")
        events: list[dict[str, Any]] = [
            {"id": f"{run_id}-s", "type": "run.started", "ts": now, "run_id": run_id,
             "agent": "research", "step_budget": 20},
        ]  # fmt: skip
        for step, outcome in enumerate(outcomes, start=1):
            events.append(
                {"id": f"{run_id}-t{step}", "type": "tool.call", "ts": now, "run_id": run_id,
                 "step": step, "tool": tool, "outcome": outcome,
                 "attempts": 5 if outcome == "retryable" else 1,
                 "error": "ToolFailure: 503 from vendor" if outcome == "retryable" else ""}
            )  # fmt: skip
        request = urllib.request.Request(
            live_server.url + "/api/v1/events",
            data=json.dumps({"worker_id": worker_id, "events": events}).encode(),
            headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
            method="POST",
        )
        with urllib.request.urlopen(request, timeout=10) as response:
            reply: dict[str, Any] = json.load(response)
        assert reply["accepted"] == len(events) and not reply["rejected"], reply
        return reply

    return report


def log_in_with_the_form(page: Page, username: str, password: str) -> None:
    page.goto("/")
    page.get_by_label("Username").fill(username)
    page.get_by_label("Password").fill(password)
    page.get_by_role("button", name="Log in").click()
    expect(page.get_by_role("heading", name="Board")).to_be_visible()


def board_row(page: Page, tool: str) -> Any:
    return page.locator("#board-live tr.tool-row").filter(
        has=page.get_by_role("link", name=tool, exact=True)
    )


def test_operator_watches_a_tool_open_forces_it_closed_and_finds_it_in_the_audit_log(
    page: Page, operator: User, agent: Agent, watch: PageWatch
) -> None:
    agent("w-1", "web_search", "success")
    log_in_with_the_form(page, "operator", "operator-pass-123")
    row = board_row(page, "web_search")
    expect(row.locator(".badge")).to_have_text(re.compile("Closed"))
    expect(page.locator("#live-status")).to_contain_text(re.compile(r"updated \d\d:\d\d:\d\d UTC"))

    # Agents on two workers start failing; the board shows the streak, then the trip.
    agent("w-1", "web_search", "retryable", "retryable")
    expect(row.locator("td").nth(2)).to_contain_text("2 / 5", timeout=LIVE_TIMEOUT_MS)
    agent("w-2", "web_search", "retryable", "retryable")
    agent("w-1", "web_search", "retryable")
    expect(row.locator(".badge")).to_have_text(re.compile("Open"), timeout=LIVE_TIMEOUT_MS)
    expect(row).to_contain_text("5 consecutive retryable failures from 2 workers")
    expect(page.get_by_role("link", name=re.compile("1 out of service"))).to_be_visible()

    # Force it closed with a reason, from the board.
    row.get_by_role("link", name="Act on web_search").click()
    panel = page.locator("#action-panel")
    expect(panel.get_by_role("heading")).to_contain_text("web_search")
    panel.get_by_label(re.compile("Force close")).check()
    panel.get_by_label(re.compile("^Reason")).fill("vendor confirmed the fix at 03:10")
    panel.get_by_role("button", name="Apply").click()
    expect(panel).to_contain_text("Force close")
    expect(panel).to_contain_text("Forced closed")
    expect(row.locator(".badge")).to_have_text(re.compile("Forced closed"))
    assert fleet_tool_details(tool_name="web_search")["state"] == "forced_closed"

    page.get_by_role("navigation", name="Main").get_by_role("link", name="Audit log").click()
    audit = page.locator("#audit-table tbody tr")
    expect(audit).to_have_count(1)
    expect(audit.first).to_contain_text("user:operator")
    expect(audit.first).to_contain_text("Force close")
    expect(audit.first).to_contain_text("vendor confirmed the fix at 03:10")
    assert watch.errors == [] and watch.dialogs == []


def test_the_server_refuses_an_action_without_a_reason(
    page: Page, operator: User, agent: Agent, log_in_as: Callable[[User], None]
) -> None:
    agent("w-1", "web_search", "success")
    log_in_as(operator)
    page.goto("/")
    board_row(page, "web_search").get_by_role("link", name="Act on web_search").click()
    panel = page.locator("#action-panel")
    panel.get_by_label(re.compile("Force open")).check()
    # Get past the browser's own check, as a crafted request would.
    panel.locator("textarea").evaluate("el => el.removeAttribute('required')")
    panel.get_by_label(re.compile("^Reason")).fill("   ")
    panel.get_by_role("button", name="Apply").click()
    expect(panel.get_by_role("alert")).to_contain_text("A reason is required")
    assert not OperatorAction.objects.exists()


def test_board_polls_answer_304_while_nothing_changes(
    page: Page, operator: User, agent: Agent, log_in_as: Callable[[User], None]
) -> None:
    agent("w-1", "web_search", "success")
    statuses: list[int] = []

    def on_response(response: Response) -> None:
        if response.request.headers.get("hx-request") and response.url.endswith("/"):
            statuses.append(response.status)

    page.on("response", on_response)
    log_in_as(operator)
    page.goto("/")
    with page.expect_response(lambda r: r.status == 304, timeout=LIVE_TIMEOUT_MS):
        pass
    expect(board_row(page, "web_search")).to_be_visible()  # a 304 leaves the board in place
    assert 304 in statuses


def test_viewer_sees_no_buttons_and_a_crafted_post_is_refused(
    page: Page, viewer: User, agent: Agent, log_in_as: Callable[[User], None]
) -> None:
    agent("w-1", "web_search", "retryable")
    tool = Tool.objects.get(name="web_search")
    log_in_as(viewer)
    page.goto("/")
    expect(board_row(page, "web_search")).to_be_visible()
    expect(page.get_by_role("link", name=re.compile("^Act on"))).to_have_count(0)
    page.goto(f"/tools/{tool.pk}/")
    expect(page.get_by_role("button", name="Apply")).to_have_count(0)
    expect(page.locator(".operator-note")).to_contain_text("operators")
    status = page.evaluate(
        """async (url) => {
            const token = JSON.parse(document.body.getAttribute('hx-headers'))['X-CSRFToken'];
            const response = await fetch(url, {
                method: 'POST',
                headers: {'X-CSRFToken': token, 'HX-Request': 'true',
                          'Content-Type': 'application/x-www-form-urlencoded'},
                body: 'action=force_open&reason=I+am+not+an+operator',
            });
            return response.status;
        }""",
        f"/tools/{tool.pk}/act/",
    )
    assert status == 403
    assert not OperatorAction.objects.exists()
    assert fleet_tool_details(tool_name="web_search")["state"] == "closed"


def test_hostile_tool_name_renders_as_text(
    page: Page, viewer: User, agent: Agent, log_in_as: Callable[[User], None], watch: PageWatch
) -> None:
    agent(HOSTILE_SCRIPT, HOSTILE_NAME, "retryable")
    log_in_as(viewer)
    page.goto("/")
    link = page.locator("#board-live").get_by_role("link", name=HOSTILE_NAME, exact=True)
    expect(link).to_be_visible()
    link.click()
    expect(page.get_by_role("heading", level=1)).to_have_text(HOSTILE_NAME)
    expect(page.locator("main")).to_contain_text(HOSTILE_SCRIPT[:20])
    assert page.locator("main img, main script").count() == 0
    assert watch.dialogs == []
    assert watch.errors == []


def test_board_says_loudly_when_updates_stop_arriving(
    page: Page, viewer: User, agent: Agent, log_in_as: Callable[[User], None]
) -> None:
    agent("w-1", "web_search", "success")
    log_in_as(viewer)
    page.goto("/")
    status = page.locator("#live-status")
    expect(status).to_contain_text("Live · updated")
    # The control plane goes away: every poll fails at the network level.
    page.route(
        "**/*",
        lambda route: (
            route.abort() if route.request.headers.get("hx-request") else route.continue_()
        ),
    )
    expect(status).to_contain_text("Not updating since", timeout=LIVE_TIMEOUT_MS)
    expect(status).to_have_attribute("data-state", "stale")
    page.unroute("**/*")
    expect(status).to_contain_text("Live · updated", timeout=LIVE_TIMEOUT_MS)


def test_polling_pauses_while_the_tab_is_hidden(
    page: Page, viewer: User, agent: Agent, log_in_as: Callable[[User], None]
) -> None:
    agent("w-1", "web_search", "success")
    polls: list[str] = []
    page.on("request", lambda r: polls.append(r.url) if r.headers.get("hx-request") else None)
    log_in_as(viewer)
    page.goto("/")
    with page.expect_request(lambda r: bool(r.headers.get("hx-request")), timeout=LIVE_TIMEOUT_MS):
        pass
    page.evaluate(
        """() => {
            Object.defineProperty(document, 'hidden', {value: true, configurable: true});
            document.dispatchEvent(new Event('visibilitychange'));
        }"""
    )
    expect(page.locator("#live-status")).to_contain_text("Paused while this tab is hidden")
    seen = len(polls)
    page.wait_for_timeout(5000)  # two and a half poll intervals: none may fire
    assert len(polls) == seen
    page.evaluate(
        """() => {
            Object.defineProperty(document, 'hidden', {value: false, configurable: true});
            document.dispatchEvent(new Event('visibilitychange'));
        }"""
    )
    expect(page.locator("#live-status")).to_contain_text("Live · updated", timeout=LIVE_TIMEOUT_MS)
    assert len(polls) > seen
