"""No page is wider than the window at 1280 and 1920 px, with the long names a replay makes
(worker ids that differ only at the end, long operator reasons and errors): no table scrolls
sideways inside its box, no column heading is cut, no fact is cut short, and no two texts of a
chart (titles, axis titles, legend, notes) overlap."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from decimal import Decimal
from typing import Any

import pytest
from django.contrib.auth.models import User
from playwright.sync_api import Page, expect

from breakers.access.operators import operators_group
from runs.models import Run
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
from tests.dashboard.outage_story import make_replay_batch

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
        # Every column of the runs list at its widest: long agent, spend, tokens, failures.
        run = make_run(
            f"{PREFIX}{n:02d}-run-000{n}", agent="research-agent-with-a-long-name-v2",
            worker=worker, degraded=True, model_spend_usd=Decimal("12.3456"),
            input_tokens=1_234_567, output_tokens=234_567, tool_calls=12_345, tool_failures=1_234,
        )  # fmt: skip
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
    # An outage replay batch (the outages page and its charts), one of whose runs is shown too.
    replays = make_replay_batch(started_at=T0 - timedelta(hours=20), window_runs=60, workers=4)
    replayed = Run.objects.filter(worker__worker_id__startswith=replays[0].worker_prefix).first()
    assert replayed is not None
    return {"tool": tool.pk, "run": runs[0].pk, "incident": incident.pk, "replayed": replayed.pk}


# What is cut or overlaps on the page, as the browser laid it out (an empty list when nothing).
LAYOUT_PROBLEMS = """() => {
  const problems = [];
  const name = (e) => e.tagName.toLowerCase() + (e.className && e.className.baseVal === undefined
    ? '.' + String(e.className).trim().split(/\\s+/).join('.') : '');
  for (const e of document.querySelectorAll('.table-wrap, .panel, .facts, .scopes > *')) {
    if (e.scrollWidth > e.clientWidth + 1) {
      problems.push(`${name(e)} scrolls: ${e.scrollWidth} > ${e.clientWidth}`);
    }
  }
  for (const e of document.querySelectorAll('table.data thead th, .facts dt, .facts dd')) {
    if (e.scrollWidth > e.clientWidth + 1) {
      problems.push(`${name(e)} cut: "${e.textContent.trim().slice(0, 40)}"`);
    }
  }
  const texts = '.gtitle, .g-xtitle text, .g-ytitle text, .g-x2title text, .g-y2title text, '
    + '.annotation-text, .legendtext';
  for (const plot of document.querySelectorAll('.js-plotly-plot')) {
    const boxes = [...plot.querySelectorAll(texts)]
      .map((t) => [t.textContent.trim(), t.getBoundingClientRect()])
      .filter(([text, r]) => text && r.width > 0 && r.height > 0);
    for (let i = 0; i < boxes.length; i++) {
      for (let j = i + 1; j < boxes.length; j++) {
        const [ta, a] = boxes[i], [tb, b] = boxes[j];
        const overlap = Math.min(a.right, b.right) - Math.max(a.left, b.left) > 2
          && Math.min(a.bottom, b.bottom) - Math.max(a.top, b.top) > 2;
        if (overlap) {
          problems.push(`chart ${plot.id}: "${ta.slice(0, 30)}" overlaps "${tb.slice(0, 30)}"`);
        }
      }
    }
  }
  return problems;
}"""


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
        f"/runs/{replay_like['replayed']}/",
        "/runs/",
        "/incidents/",
        f"/incidents/{replay_like['incident']}/",
        "/audit/",
        "/alerts/",
        "/outages/",
    ]
    too_wide, problems = {}, {}
    for path in pages:
        page.goto(path, wait_until="load")
        if path == "/outages/":
            expect(page.locator(".js-plotly-plot")).to_have_count(7)
        scroll = page.evaluate("document.documentElement.scrollWidth")
        if scroll > width:
            too_wide[path] = scroll
        found = page.evaluate(LAYOUT_PROBLEMS)
        if found:
            problems[path] = found
    assert not too_wide, too_wide
    assert not problems, problems
    # Worker ids are told apart by their end: it stays visible.
    page.goto(f"/tools/{replay_like['tool']}/")
    assert page.get_by_text("worker-03", exact=False).first.is_visible()
