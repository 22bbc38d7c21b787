"""No page is wider than the window at 1280 and 1920 px, with the long names a replay makes
(worker ids that differ only at the end, long operator reasons and errors): no table scrolls
sideways inside its box, no column heading is cut, no fact is cut short, and no two texts of a
chart (titles, axis titles, legend, notes) overlap."""

from __future__ import annotations

import os
from collections.abc import Callable
from datetime import timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings
from django.contrib.auth.models import User
from django.test import Client
from playwright.sync_api import Page, expect

from breakers.access.operators import operators_group
from breakers.models import ToolSilence
from runs.models import Run
from tests.dashboard.factories import (
    T0,
    make_fleet_transition,
    make_incident,
    make_model_call,
    make_operator_action,
    make_run,
    make_tool,
    make_tool_call,
    make_transition,
    make_worker,
)
from tests.dashboard.outage_story import make_incident_story, make_replay_batch, make_ways_replay

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
    # The run page's cache figures and an unpriced call, at their widest.
    Run.objects.filter(pk=runs[0].pk).update(
        cache_read_tokens=1_100_000, cache_write_tokens=100_000, cache_input_tokens=1_234_567,
        unpriced_calls=12,
    )  # fmt: skip
    make_model_call(
        # Before the removals: a call after them would add a notice row (a tall one on a phone).
        runs[0], step=0, ts=T0 - timedelta(seconds=1), model="claude-opus-4-5",
        input_tokens=123_456, cache_read_tokens=100_000, cache_write_tokens=20_000,
        cost_source="unknown", cost_usd=Decimal(0),
        problem="not priced: cache_read_tokens + cache_write_tokens (1,100,000) exceed "
        "input_tokens (1,000,000), which include them",
    )  # fmt: skip
    make_fleet_transition(tool, at=T0, from_state="closed", to_state="open", reason=LONG_REASON)
    make_operator_action(tool, at=T0 + timedelta(minutes=1), reason=LONG_REASON)
    incident = make_incident(tool, opened_at=T0)
    # Its repeat alerts silenced from Slack by someone with a long name: the tool page's panel
    # and the board's marker at their widest.
    ToolSilence.objects.create(
        tool=tool, incident=incident, until=None, set_by=f"@{PREFIX}on-call via Slack",
        via="Slack (@on-call)",
    )  # fmt: skip
    # An outage replay batch (the outages page and its charts), one of whose runs is shown too.
    replays = make_replay_batch(started_at=T0 - timedelta(hours=20), window_runs=60, workers=4)
    # Prompt-caching figures in the mode table, and a ways record (the ways section, its chart).
    for replay in replays:
        replay.summary = {
            **replay.summary,
            "caching": {"anthropic": {"spend_usd": 12_345.678}, "openai": {"spend_usd": 9_876.54}},
        }
        replay.save(update_fields=["summary"])
    make_ways_replay()
    replayed = Run.objects.filter(worker__worker_id__startswith=replays[0].worker_prefix).first()
    assert replayed is not None
    story = make_incident_story()
    return {
        "tool": tool.pk,
        "run": runs[0].pk,
        "incident": incident.pk,
        "replayed": replayed.pk,
        "story": story.pk,
    }


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
            expect(page.locator(".js-plotly-plot")).to_have_count(9)  # 7, ledgers, ways
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


# --- Every page at a phone's, a tablet's and a desktop's width (issue 28) ---------------------

AXE = Path(__file__).resolve().parent / "node_modules" / "axe-core" / "axe.min.js"

# Taller than three lines of text: a row whose cells wrap narrowly (the rows of 150-400 px).
TALL_ROWS = """() => {
  const tall = [];
  for (const row of document.querySelectorAll('table.data tbody tr')) {
    const box = row.getBoundingClientRect();
    if (!box.height || row.closest('details:not([open])')) continue;
    const style = getComputedStyle(row.querySelector('td, th') || row);
    const line = parseFloat(style.lineHeight) || 20;
    if (box.height > 3 * line + 14) {
      const text = row.textContent.trim().replace(/\\s+/g, ' ').slice(0, 50);
      tall.push(`${Math.round(box.height)} px: "${text}"`);
    }
  }
  return tall;
}"""

# Any two texts of one chart (titles, axis titles and ticks, legend, notes, bar labels) that
# overlap, and any cut by the chart's edge.
CHART_OVERLAPS = """() => {
  const problems = [];
  const texts = '.gtitle, .g-gtitle text, .g-xtitle text, .g-ytitle text, .g-x2title text, '
    + '.g-y2title text, .g-x3title text, .g-y3title text, .annotation-text, .legendtext, '
    + '.xtick text, .ytick text, .x2tick text, .y2tick text, .x3tick text, .y3tick text, '
    + '.textpoint text';
  for (const plot of document.querySelectorAll('.js-plotly-plot')) {
    const boxes = [...plot.querySelectorAll(texts)]
      .map((t) => [t.textContent.trim(), t.getBoundingClientRect()])
      .filter(([text, r]) => text && r.width > 0 && r.height > 0);
    const frame = plot.getBoundingClientRect();
    for (const [text, r] of boxes) {
      if (r.left < frame.left - 1 || r.right > frame.right + 1) {
        problems.push(`chart ${plot.id}: "${text.slice(0, 30)}" is cut by the chart's edge`);
      }
    }
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

# The outermost elements that reach past the window's right edge, to say what made a page too wide.
WIDE_ELEMENTS = """(width) => [...document.querySelectorAll('body *')]
  .filter((e) => e.getBoundingClientRect().right > width + 1
    && !(e.parentElement && e.parentElement.getBoundingClientRect().right > width + 1))
  .slice(0, 4)
  .map((e) => e.tagName.toLowerCase()
    + (e.className ? '.' + String(e.className).split(' ')[0] : ''))
"""

AXE_RUN = """async () => {
  const result = await axe.run(document, {resultTypes: ['violations']});
  return result.violations
    .filter((v) => v.impact === 'serious' || v.impact === 'critical')
    .map((v) => `${v.impact} ${v.id}: `
      + v.nodes.slice(0, 3).map((n) => n.target.join(' ')).join(', '));
}"""


def axe_source() -> str:
    if not AXE.exists():
        pytest.skip(
            "the accessibility checks need axe-core: npm ci --prefix tests/browser "
            "(`make test` runs it)"
        )
    return AXE.read_text()


def every_page(ids: dict[str, int]) -> list[str]:
    return [
        "/",
        f"/tools/{ids['tool']}/",
        f"/runs/{ids['run']}/",
        f"/runs/{ids['replayed']}/",
        "/runs/",
        "/incidents/",
        f"/incidents/{ids['incident']}/",
        f"/incidents/{ids['story']}/",
        "/audit/",
        "/alerts/",
        "/outages/",
    ]


def page_problems(page: Page, *, width: int, axe: str) -> list[str]:
    """What is wrong with the page as laid out at this width (an empty list when nothing)."""
    problems: list[str] = []
    scroll = page.evaluate("document.documentElement.scrollWidth")
    if scroll > width:
        problems.append(f"the page is {scroll} px wide: {page.evaluate(WIDE_ELEMENTS, width)}")
    problems += page.evaluate(CHART_OVERLAPS)
    if width <= 800:
        problems += page.evaluate(TALL_ROWS)
    # axe runs in the page through the DevTools protocol: the page's CSP stays as it is.
    if not page.evaluate("typeof axe !== 'undefined'"):
        page.evaluate(axe)
    problems += page.evaluate(AXE_RUN)
    return problems


# A dozen pages, each laid out and checked by axe: longer than the suite's 120 s on a busy machine.
@pytest.mark.timeout(600)
@pytest.mark.parametrize("width", [390, 768, 1440])
def test_every_page_fits_and_passes_axe_at_every_width(
    browser: Any, live_server: Any, replay_like: dict[str, int], width: int
) -> None:
    axe = axe_source()
    context = browser.new_context(
        base_url=live_server.url, viewport={"width": width, "height": 844}
    )
    context.set_default_timeout(30_000)
    page = context.new_page()
    console: list[str] = []
    page.on("console", lambda m: console.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda error: console.append(str(error)))
    found: dict[str, list[str]] = {}
    try:
        page.goto("/accounts/login/")
        found["/accounts/login/"] = page_problems(page, width=width, axe=axe)
        user = User.objects.create_user("ops", password="ops-pass-1234567", is_staff=True)
        user.groups.add(operators_group())
        client = Client()
        client.force_login(user)
        cookie = client.cookies[settings.SESSION_COOKIE_NAME]
        context.add_cookies([{"name": cookie.key, "value": cookie.value, "url": live_server.url}])
        for path in every_page(replay_like):
            page.goto(path, wait_until="load")
            if path == "/outages/":
                expect(page.locator(".js-plotly-plot")).to_have_count(9)  # 7, ledgers, ways
            if path == f"/incidents/{replay_like['story']}/":
                expect(page.locator("#incident-charts .js-plotly-plot")).to_have_count(2)
            found[path] = page_problems(page, width=width, axe=axe)
    finally:
        context.close()
    bad = [f"{path}: {problem}" for path, problems in found.items() for problem in problems]
    assert not bad, "\n".join(bad)
    assert console == []


WEIGHT = """() => {
  const kb = {html: 0, js: 0, css: 0};
  const nav = performance.getEntriesByType('navigation')[0];
  kb.html = nav.decodedBodySize / 1024;
  for (const e of performance.getEntriesByType('resource')) {
    if (e.name.endsWith('.js')) kb.js += e.decodedBodySize / 1024;
    if (e.name.endsWith('.css')) kb.css += e.decodedBodySize / 1024;
  }
  return kb;
}"""


@pytest.mark.skipif(
    os.environ.get("BP_PAGE_WEIGHT") != "1", reason="set BP_PAGE_WEIGHT=1 to print page weights"
)
def test_print_page_weights(
    page: Page, log_in_as: Callable[[User], None], replay_like: dict[str, int]
) -> None:
    """Each page's HTML, JS and CSS (uncompressed KB) for docs/benchmarks.md: run with -s."""
    user = User.objects.create_user("ops", password="ops-pass-1234567", is_staff=True)
    user.groups.add(operators_group())
    log_in_as(user)
    rows = ["| page | HTML KB | JS KB | CSS KB | total KB |", "|---|---|---|---|---|"]
    for path in every_page(replay_like):
        page.goto(path, wait_until="load")
        kb = page.evaluate(WEIGHT)
        total = kb["html"] + kb["js"] + kb["css"]
        rows.append(
            f"| `{path}` | {kb['html']:.1f} | {kb['js']:.1f} | {kb['css']:.1f} | {total:.1f} |"
        )
    print("\n" + "\n".join(rows))
    assert len(rows) == 2 + len(every_page(replay_like))


def test_on_a_phone_the_menu_folds_and_opens_from_the_keyboard(
    page: Page, log_in_as: Callable[[User], None], replay_like: dict[str, int]
) -> None:
    user = User.objects.create_user("ops", password="ops-pass-1234567", is_staff=True)
    log_in_as(user)
    page.set_viewport_size({"width": 390, "height": 844})
    page.goto("/outages/")
    audit = page.get_by_role("link", name="Audit log")
    expect(audit).to_be_hidden()
    # The mode bars are laid out again as a column: three panels one above the other.
    expect(page.locator("#mode-bars")).to_have_attribute("data-layout", "column")
    tops = page.eval_on_selector_all(
        "#mode-bars g.cartesianlayer g.subplot",
        "els => els.map(e => e.getBoundingClientRect().top)",
    )
    assert len(tops) == 3 and tops == sorted(tops) and len(set(tops)) == 3
    page.keyboard.press("Tab")
    page.keyboard.press("Tab")
    menu = page.get_by_role("button", name="Menu")
    expect(menu).to_be_focused()
    outline = page.evaluate("getComputedStyle(document.activeElement).outlineStyle")
    assert outline != "none"  # the focus is visible
    page.keyboard.press("Enter")
    expect(audit).to_be_visible()
    expect(page.get_by_role("link", name="Admin")).to_be_visible()
    page.keyboard.press("Tab")
    expect(page.get_by_role("link", name="Board")).to_be_focused()
    page.keyboard.press("Escape")
    expect(audit).to_be_hidden()
    # At a desktop's width the same links are in the bar, and there is no Menu button.
    page.set_viewport_size({"width": 1440, "height": 900})
    expect(audit).to_be_visible()
    expect(menu).to_be_hidden()
    expect(page.locator("#mode-bars")).to_have_attribute("data-layout", "wide")


def test_on_a_phone_a_calls_error_has_the_row_s_second_line(
    page: Page, log_in_as: Callable[[User], None], replay_like: dict[str, int]
) -> None:
    """At 390 px the error was a column a few characters wide that broke words: it is now the
    row's second line, across the whole row, cut with an ellipsis (the full text in its title)."""
    user = User.objects.create_user("ops", password="ops-pass-1234567")
    log_in_as(user)
    page.set_viewport_size({"width": 390, "height": 844})
    page.goto(f"/tools/{replay_like['tool']}/")
    boxes = page.eval_on_selector(
        "table.t-calls tbody tr",
        """row => {
          const box = (e) => { const r = e.getBoundingClientRect();
            return {top: r.top, bottom: r.bottom, width: r.width}; };
          const error = row.querySelector('td.wide .agent-text');
          return {row: box(row), time: box(row.cells[0]), error: box(row.querySelector('td.wide')),
                  clipped: error.scrollWidth > error.clientWidth, title: error.title};
        }""",
    )
    assert boxes["error"]["top"] >= boxes["time"]["bottom"] - 1  # under the first line
    assert boxes["error"]["width"] >= 0.9 * boxes["row"]["width"]
    assert boxes["title"].startswith("ToolFailure: 503 from vendor")


ADMIN_PAGES = ["/admin/", "/admin/breakers/tool/", "/admin/runs/run/"]


@pytest.mark.parametrize("width", [390, 1440])
def test_the_admin_passes_axe(
    browser: Any, live_server: Any, replay_like: dict[str, int], width: int
) -> None:
    """The admin is reachable from the nav: its index and two changelists pass axe-core too,
    with no rule turned off (Django 5's admin markup passes as it is)."""
    axe = axe_source()
    context = browser.new_context(
        base_url=live_server.url, viewport={"width": width, "height": 844}
    )
    context.set_default_timeout(30_000)
    page = context.new_page()
    found: dict[str, list[str]] = {}
    try:
        user = User.objects.create_superuser("root", password="root-pass-1234567")
        client = Client()
        client.force_login(user)
        cookie = client.cookies[settings.SESSION_COOKIE_NAME]
        context.add_cookies([{"name": cookie.key, "value": cookie.value, "url": live_server.url}])
        for path in ADMIN_PAGES:
            response = page.goto(path, wait_until="load")
            assert response is not None and response.status == 200, path
            page.evaluate(axe)
            found[path] = page.evaluate(AXE_RUN)
    finally:
        context.close()
    bad = [f"{path}: {problem}" for path, problems in found.items() for problem in problems]
    assert not bad, "\n".join(bad)
