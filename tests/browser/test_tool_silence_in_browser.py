"""The tool page's silence panel at a phone's and a desktop's width: it fits, says until when and
who set it (agent text escaped), and its button ends the silence in a real browser."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta

import pytest
from django.contrib.auth.models import User
from django.utils import timezone
from playwright.sync_api import Page, expect

from breakers.access.operators import operators_group
from breakers.models import OperatorAction, ToolSilence
from tests.browser.support import PageWatch
from tests.dashboard.factories import HOSTILE_SCRIPT, make_tool

pytestmark = pytest.mark.browser

LONG_NAME = "@" + "on-call-engineer-for-the-research-agents-platform-" * 2


@pytest.mark.parametrize("width", [390, 1440])
def test_the_silence_panel_fits_and_its_button_ends_the_silence(
    page: Page,
    log_in_as: Callable[[User], None],
    watch: PageWatch,
    transactional_db: None,
    width: int,
) -> None:
    tool = make_tool("web_search", state="open")
    ToolSilence.objects.create(
        tool=tool,
        until=timezone.now() + timedelta(hours=8),
        set_by=f"{LONG_NAME[:70]}{HOSTILE_SCRIPT} via Slack",
        via="Slack (@on-call)",
    )
    user = User.objects.create_user("ops", password="ops-pass-1234567")
    user.groups.add(operators_group())
    log_in_as(user)
    page.set_viewport_size({"width": width, "height": 900})
    page.goto(f"/tools/{tool.pk}/")
    panel = page.locator("#silence")
    expect(panel).to_contain_text("Repeat alerts of this tool are held until")
    expect(panel).to_contain_text("on-call-engineer")
    assert page.evaluate("document.documentElement.scrollWidth") <= width
    assert panel.evaluate("e => e.scrollWidth <= e.clientWidth + 1")
    box = page.get_by_role("button", name="End silence now").bounding_box()
    assert box is not None and box["x"] >= 0 and box["x"] + box["width"] <= width

    page.get_by_role("button", name="End silence now").click()
    expect(page.get_by_role("status").first).to_contain_text("The silence of web_search has ended")
    expect(page.locator("#silence")).to_have_count(0)
    assert ToolSilence.objects.get().ended_by == "user:ops"
    assert OperatorAction.objects.filter(action="unsilence").count() == 1
    assert watch.dialogs == [] and watch.errors == []  # the name's script never ran
