"""The Slack loop in a real browser: an open alert appears in the stand-in's #agent-tools, an
operator presses Force close there, gives the reason in the modal, and the board shows the tool
forced closed. The stand-in signs the presses like Slack; a Celery worker does the action."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.utils import timezone
from playwright.sync_api import Page, expect

from breakers.access.operators import operators_group
from breakers.models import OperatorAction, SlackUser
from breakers.transports.slack_cards import COLORS, Phase
from scripts.slack_standin import TEAM_ID, SlackStandIn
from tests.alerts.steps import open_tool
from tests.browser.support import PageWatch
from tests.waiting import wait_for

pytestmark = [pytest.mark.browser, pytest.mark.celery]

# Polled, not timed: the board polls every 2 s and the worker acts within milliseconds here.
LIVE_TIMEOUT_MS = 10_000
FORCED_CLOSED_ROW = re.compile(r"\brow-forcedclosed\b")


@pytest.fixture
def slack_operator(transactional_db: None) -> User:
    user = User.objects.create_user("operator", password="operator-pass-123")
    user.groups.add(operators_group())
    SlackUser.objects.create(
        team_id=TEAM_ID, slack_user_id="U0OPERATOR", slack_name="operator", user=user
    )
    return user


def test_force_close_from_the_slack_standin_closes_the_tool_on_the_board(
    page: Page,
    bot: SlackStandIn,
    slack_operator: User,
    log_in_as: Callable[[User], None],
    live_server: Any,
    watch: PageWatch,
) -> None:
    open_tool("web_search", timezone.now())
    wait_for(lambda: bot.bot_messages(), "the alert in the stand-in")

    page.goto(f"{bot.url}/?as=U0OPERATOR")
    message = page.locator("article.message").first
    expect(message).to_contain_text("Breaker open: web_search")
    expect(message.locator(f'.attachment[data-color="{COLORS[Phase.OPEN]}"]')).to_have_count(1)
    message.get_by_role("button", name="Force close").click()

    expect(page.get_by_role("dialog")).to_contain_text("Force close")
    page.get_by_label("Reason").fill("vendor confirmed the fix")
    page.get_by_role("dialog").get_by_role("button", name="Force close").click()

    board = page.context.new_page()
    log_in_as(slack_operator)
    board.goto(live_server.url + "/")
    row = board.locator('tr.tool-row[data-tool="web_search"]')
    expect(row).to_have_class(FORCED_CLOSED_ROW, timeout=LIVE_TIMEOUT_MS)

    page.goto(f"{bot.url}/?as=U0OPERATOR")
    card = page.locator("article.message").first
    expect(card).to_contain_text("Forced closed by @operator via Slack", timeout=LIVE_TIMEOUT_MS)
    expect(card.get_by_role("button", name="Release")).to_be_visible()
    action = OperatorAction.objects.get(action="force_close")
    assert (action.reason, action.via) == ("vendor confirmed the fix", "Slack (@operator)")
    assert not watch.errors


def test_the_standin_reads_well_on_a_phone(page: Page, bot: SlackStandIn) -> None:
    open_tool("web_search", timezone.now())
    wait_for(lambda: bot.bot_messages(), "the alert in the stand-in")
    page.set_viewport_size({"width": 375, "height": 740})
    page.goto(f"{bot.url}/")
    expect(page.locator("h1")).to_have_text("# agent-tools")
    assert page.locator('meta[name="viewport"]').count() == 1
    overflow = page.evaluate("document.documentElement.scrollWidth - window.innerWidth")
    assert overflow <= 0, f"the page is {overflow}px wider than a phone"
    expect(page.get_by_role("button", name="Acknowledge")).to_be_visible()
