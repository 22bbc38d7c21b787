"""No page is wider than the window at 1280 and 1920 px, with the long names a replay makes
(worker ids that differ only at the end, long operator reasons and errors)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
from django.contrib.auth.models import User
from playwright.sync_api import Page

from dashboard.permissions import operators_group
from tests.dashboard.factories import (
    T0,
    make_fleet_transition,
    make_incident,
    make_operator_action,
    make_run,
    make_tool,
    make_tool_call,
    make_transition,
    make_worker,
)

pytestmark = pytest.mark.browser

PREFIX = "replay-20261201-2148-fleet-mode-research-agent-worker-"
LONG_REASON = (
    "vendor status page says degraded in eu-west-1, forcing it open until their incident "
    "INC-48213 is resolved and we have checked the error rate on the canary ourselves"
)


@pytest.fixture
def replay_like(transactional_db: None) -> dict[str, int]:
    tool = make_tool("web_search", state="open", since=T0)
    runs = []
    for n in range(4):
        worker = make_worker(f"{PREFIX}{n:02d}")
        run = make_run(f"{PREFIX}{n:02d}-run-000{n}", worker=worker, degraded=True)
        for step in range(1, 6):
            make_tool_call(
                run, step=step, ts=T0 + timedelta(seconds=step), outcome="retryable",
                attempts=5, duration_ms=31_000, error="ToolFailure: 503 from vendor " * 6,
            )  # fmt: skip
        make_transition(worker=worker, ts=T0, scope="worker", reason=LONG_REASON)
        make_transition(worker=worker, ts=T0, run=run, scope="run", reason=LONG_REASON)
        runs.append(run)
    make_fleet_transition(tool, at=T0, from_state="closed", to_state="open", reason=LONG_REASON)
    make_operator_action(tool, at=T0 + timedelta(minutes=1), reason=LONG_REASON)
    incident = make_incident(tool, opened_at=T0)
    return {"tool": tool.pk, "run": runs[0].pk, "incident": incident.pk}


@pytest.mark.parametrize("width", [1280, 1920])
def test_no_page_is_wider_than_the_window(
    page: Page,
    log_in_as: Callable[[User], None],
    replay_like: dict[str, int],
    width: int,
    live_server: Any,
) -> None:
    user = User.objects.create_user("ops", password="ops-pass-1234567")
    user.groups.add(operators_group())
    log_in_as(user)
    page.set_viewport_size({"width": width, "height": 900})
    pages = [
        "/",
        f"/tools/{replay_like['tool']}/",
        f"/runs/{replay_like['run']}/",
        "/runs/",
        "/incidents/",
        f"/incidents/{replay_like['incident']}/",
        "/audit/",
        "/alerts/",
    ]
    too_wide = {}
    for path in pages:
        page.goto(path, wait_until="domcontentloaded")
        scroll = page.evaluate("document.documentElement.scrollWidth")
        if scroll > width:
            too_wide[path] = scroll
    assert not too_wide, too_wide
    # Worker ids are told apart by their end: it stays visible.
    page.goto(f"/tools/{replay_like['tool']}/")
    assert page.get_by_text("worker-03", exact=False).first.is_visible()
