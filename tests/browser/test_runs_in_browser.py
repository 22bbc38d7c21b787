"""The runs list and a run page, clicked in a real browser."""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import timedelta

import pytest
from django.contrib.auth.models import User
from playwright.sync_api import Page, expect

from runs.models import Run
from tests.browser.support import PageWatch
from tests.dashboard.factories import (
    HOSTILE_NAME,
    HOSTILE_SCRIPT,
    T0,
    make_model_call,
    make_outage_run,
    make_run,
    make_tool_call,
    make_transition,
    make_worker,
)

pytestmark = pytest.mark.browser


def test_filtering_by_agent_updates_the_table_and_the_url(
    page: Page, viewer: User, log_in_as: Callable[[User], None]
) -> None:
    worker = make_worker("w-1")
    for i in range(3):
        make_run(f"r-research-{i}", agent="research", worker=worker, started_at=T0 + timedelta(i))
    make_run("r-writer-0", agent="writer", worker=worker, status="failed")
    log_in_as(viewer)
    page.goto("/runs/")
    rows = page.locator("#runs-table tbody tr")
    expect(rows).to_have_count(4)
    page.get_by_label("Agent").fill("writer")
    expect(rows).to_have_count(1)
    expect(rows.first).to_contain_text("r-writer-0")
    expect(page).to_have_url(re.compile(r"agent=writer"))
    page.get_by_label("Agent").fill("")
    page.get_by_label("Status").select_option("failed")
    expect(rows).to_have_count(1)
    page.get_by_label("Status").select_option("")
    page.get_by_label("Degraded").select_option("yes")
    expect(page.locator("#runs-table")).to_contain_text("No runs match these filters")


def test_run_page_shows_every_step_and_the_removed_tool(
    page: Page, viewer: User, log_in_as: Callable[[User], None]
) -> None:
    run = make_outage_run()
    log_in_as(viewer)
    page.goto("/runs/")
    page.get_by_role("link", name="r-118").click()
    expect(page.get_by_role("heading", name=re.compile("Run r-118"))).to_be_visible()
    steps = page.locator("table.steps tbody tr.step")
    expect(steps).to_have_count(14)  # 7 model calls, 6 tool calls, 1 breaker transition
    expect(page.locator("tr.step-notice")).to_contain_text("unavailable for the rest of this task")
    expect(page.locator("tr.step-removed")).to_contain_text("Removed")
    expect(page.locator("tr.step-removed")).to_contain_text("run scope")
    removed = page.locator("section[aria-labelledby=removed-title]")
    expect(removed).to_contain_text("web_search")
    expect(removed).to_contain_text("5 consecutive retryable failures")
    # The full error is one click away.
    page.locator("tr.step-failed details summary").first.click()
    expect(page.locator("tr.step-failed details pre").first).to_be_visible()
    assert run.tool_failures == 5
    expect(page.locator(".facts")).to_contain_text("$0.4270")


def _hostile_run() -> Run:
    worker = make_worker(HOSTILE_NAME)
    run = make_run(HOSTILE_NAME, agent=HOSTILE_SCRIPT, worker=worker, degraded=True)
    make_model_call(run, step=1, ts=run.started_at, model=HOSTILE_SCRIPT)
    make_tool_call(
        run, step=1, ts=run.started_at, tool=HOSTILE_NAME, outcome="retryable", error=HOSTILE_SCRIPT
    )
    make_transition(
        worker=worker, run=run, tool=HOSTILE_NAME, ts=run.started_at, reason=HOSTILE_SCRIPT
    )
    return run


def test_hostile_names_render_as_text(
    page: Page, viewer: User, log_in_as: Callable[[User], None], watch: PageWatch
) -> None:
    run = _hostile_run()
    log_in_as(viewer)
    page.goto("/runs/")
    table = page.locator("#runs-table")
    expect(table).to_contain_text(HOSTILE_NAME)
    # Long agent text is clipped in the table; its full value is in the tooltip, as text.
    expect(table.get_by_title(HOSTILE_SCRIPT)).to_contain_text("<script>alert(")
    page.goto(f"/runs/{run.pk}/")
    expect(page.locator("table.steps")).to_contain_text(HOSTILE_NAME)
    expect(page.locator("table.steps")).to_contain_text(HOSTILE_SCRIPT)
    # Nothing the agent sent became an element, and no script ran.
    assert page.locator("main img, main script").count() == 0
    assert watch.dialogs == []
    assert watch.errors == []
