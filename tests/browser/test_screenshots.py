"""Screenshots of the main pages for docs/screenshots/, made on demand:

    make screenshots   # BP_SCREENSHOTS=1 make test PYTEST_ARGS=tests/browser/test_screenshots.py

The board, a tool, an incident and Outages are taken again at a phone's 390 px (``*-390.png``).

To look at the pages at another width without touching docs/ (the README's set is 1440 px wide):

    BP_SCREENSHOTS=1 BP_SCREENSHOTS_WIDTH=1280 BP_SCREENSHOTS_DIR=/tmp/shots .venv/bin/pytest ...

It seeds a small, realistic data set (a search outage in the middle of ordinary traffic, a fleet of
tools in every state) and saves one PNG per page. Skipped unless BP_SCREENSHOTS=1, so the suite
never rewrites docs/. The fleet states are made through the real services (ingest, operator
actions, the Celery tick's function), so Redis holds them as it would in production; the closed
incident shown in full is written as rows, at fixed times, so its numbers are stable.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from datetime import timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
import redis
from django.contrib.auth.models import User
from django.db.models import Count, Sum
from django.utils import timezone
from playwright.sync_api import Page, expect

from breakers.access.operators import operators_group
from breakers.fleet.rules import OperatorActionKind
from breakers.fleet_service import fleet_operator_action, fleet_store, fleet_tick
from breakers.models import Incident, Tool
from runs.models import Run, Worker
from tests.browser import support
from tests.dashboard.factories import (
    HOSTILE_NAME,
    T0,
    make_alert,
    make_fleet_transition,
    make_incident,
    make_model_call,
    make_operator_action,
    make_outage_run,
    make_probe,
    make_run,
    make_tool,
    make_tool_call,
    make_worker,
)
from tests.dashboard.live import calls, event_id, iso, run_started, send
from tests.dashboard.outage_story import make_incident_story, make_replay_batch

SCREENSHOTS_DIR = Path(os.environ.get("BP_SCREENSHOTS_DIR") or support.SCREENSHOTS_DIR)
WIDTH = int(os.environ.get("BP_SCREENSHOTS_WIDTH") or 1440)
PHONE = 390

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(
        os.environ.get("BP_SCREENSHOTS") != "1", reason="set BP_SCREENSHOTS=1 to refresh docs/"
    ),
]

HEALTHY_TOOLS = [
    "calendar_lookup", "crm_search", "send_email", "sql_query", "translate", "weather",
    "stock_quote", "jira_search", "wiki_lookup", "image_caption", "maps_route",
]  # fmt: skip


@pytest.fixture
def fleet_redis(transactional_db: None) -> Iterator[redis.Redis]:
    client = fleet_store().client
    keys = list(client.scan_iter(match="bp:*", count=1000))
    if keys:
        client.delete(*keys)
    fleet_store().start_generation()
    yield client
    keys = list(client.scan_iter(match="bp:*", count=1000))
    if keys:
        client.delete(*keys)


def seed_demo_traffic() -> Run:
    """Ordinary runs on four workers, then a search outage that degrades some of them."""
    workers = [make_worker(f"research-worker-{i}") for i in range(1, 4)]
    workers.append(make_worker("support-worker-1"))
    agents = ["research", "writer", "support"]
    for i in range(36):
        started = T0 - timedelta(minutes=3 * (36 - i))
        run = make_run(
            f"r-{1000 + i}",
            agent=agents[i % 3],
            worker=workers[i % 4],
            started_at=started,
            status="failed" if i % 11 == 5 else "completed",
            steps=4 + i % 7,
            duration_ms=20_000 + 3_100 * (i % 9),
        )
        make_model_call(run, step=1, ts=started + timedelta(seconds=1))
        make_tool_call(run, step=1, ts=started + timedelta(seconds=3), tool="web_search")
        Run.objects.filter(pk=run.pk).update(
            model_calls=4 + i % 7,
            model_spend_usd=Decimal("0.061") * (4 + i % 7),
            input_tokens=5200 * (4 + i % 7),
            output_tokens=310 * (4 + i % 7),
            tool_calls=3 + i % 4,
            tool_attempts=3 + i % 4,
        )
    make_run(HOSTILE_NAME, agent="<script>alert(1)</script>", worker=workers[3], started_at=T0)
    outage = make_outage_run("r-1118", worker=workers[0], started_at=T0 + timedelta(minutes=1))
    for i in range(3):
        make_run(
            f"r-{1120 + i}",
            agent="research",
            worker=workers[i],
            status="running",
            started_at=T0 + timedelta(minutes=2, seconds=20 * i),
        )
    return outage


def seed_live_fleet(operator: User) -> None:
    """Every state on the board, made by the real fleet: ingest, the tick, operator actions."""
    tools = [*HEALTHY_TOOLS, "vector_db", "pdf_reader", "geocode", "legacy_search", "web_search"]
    for i, name in enumerate(tools):
        make_tool(name, first_seen_at=timezone.now() - timedelta(days=3, hours=5 * i))
    for i, tool in enumerate(HEALTHY_TOOLS):
        calls(tool, f"research-worker-{1 + i % 3}", "success", "success")
    calls("vector_db", "research-worker-2", "retryable", "retryable", "retryable")
    calls("pdf_reader", "research-worker-1", "retryable", "retryable", "retryable")
    calls("pdf_reader", "research-worker-3", "retryable", "retryable")
    # pdf_reader's cooldown elapses: the tick moves it to half-open, one trial allowed.
    fleet_tick(now=timezone.now() + timedelta(seconds=31))
    calls("geocode", "support-worker-1", "success")
    fleet_operator_action(
        tool_name="geocode",
        action=OperatorActionKind.FORCE_CLOSE,
        reason="EU proxy throws false 503s; vendor status page is green",
        user=operator,
    )
    calls("legacy_search", "research-worker-1", "success")
    fleet_operator_action(
        tool_name="legacy_search",
        action=OperatorActionKind.FORCE_OPEN,
        reason="decommissioned: answers are stale since the index migration",
        user=operator,
    )
    # The search outage: two workers fail in turn, the fleet breaker opens.
    for worker in ["research-worker-1", "research-worker-2"] * 3:
        calls("web_search", worker, "retryable")
    report_removals("web_search")


def report_removals(tool: str) -> None:
    """Workers and running runs report their own breakers removing the tool."""
    now = timezone.now()
    for worker in ("research-worker-1", "research-worker-2"):
        run_id = event_id("r-live")
        send(
            worker,
            run_started(run_id, at=now - timedelta(seconds=40)),
            {"id": event_id("bt"), "type": "breaker.transition", "ts": iso(now), "scope": "worker",
             "tool": tool, "state": "open", "reason": "5 consecutive retryable failures"},
            {"id": event_id("bt"), "type": "breaker.transition", "ts": iso(now), "run_id": run_id,
             "scope": "run", "tool": tool, "state": "open",
             "reason": "5 consecutive retryable failures"},
        )  # fmt: skip


def record_totals(run: Run) -> None:
    """What ingest keeps on the run row, from the rows the factories wrote."""
    models = run.model_call_rows.aggregate(n=Count("id"), spend=Sum("cost_usd"))
    tools = run.tool_call_rows.aggregate(n=Count("id"), attempts=Sum("attempts"))
    Run.objects.filter(pk=run.pk).update(
        model_calls=models["n"],
        model_spend_usd=models["spend"] or 0,
        input_tokens=5200 * models["n"],
        output_tokens=310 * models["n"],
        tool_calls=tools["n"],
        tool_attempts=tools["attempts"] or 0,
        tool_failures=run.tool_call_rows.filter(outcome="retryable").count(),
        duration_ms=2000 * models["n"] + 1000,
    )


def seed_incident_story() -> Incident:
    """A closed 6-minute outage of ``maps_route`` with everything a timeline can show."""
    tool = make_tool("maps_route")
    workers = [make_worker(f"research-worker-{i}") for i in range(1, 4)]
    opened, closed = T0 + timedelta(seconds=47), T0 + timedelta(minutes=6, seconds=12)
    # Before: healthy runs, a few steps each.
    for i in range(9):
        started = T0 - timedelta(minutes=6) + timedelta(seconds=40 * i)
        run = make_run(f"r-map-{i}", worker=workers[i % 3], started_at=started, steps=5)
        make_tool_call(run, step=2, ts=started + timedelta(seconds=4), tool="maps_route")
        for step in range(1, 6):
            make_model_call(run, step=step, ts=started + timedelta(seconds=2 * step))
    # During: each run rediscovers the outage until the fleet opens, then runs without it.
    events = []
    for i in range(14):
        started = T0 + timedelta(seconds=25 * i)
        run = make_run(
            f"r-map-{100 + i}",
            worker=workers[i % 3],
            started_at=started,
            degraded=True,
            steps=11,
        )
        if started < opened:
            for step in range(1, 4):
                call = make_tool_call(
                    run,
                    step=step,
                    ts=started + timedelta(seconds=8 * step),
                    tool="maps_route",
                    outcome="retryable",
                    attempts=5,
                    duration_ms=31_000,
                    error="ToolFailure: 503 Service Unavailable from routes.example",
                )
                events.append(call.event_id)
        else:
            make_tool_call(
                run,
                step=1,
                ts=started + timedelta(seconds=1),
                tool="maps_route",
                outcome="blocked",
                attempts=0,
                error="removed by the fleet breaker",
            )
        for step in range(1, 12):
            make_model_call(run, step=step, ts=started + timedelta(seconds=2 * step))
    for run in Run.objects.filter(run_id__startswith="r-map-"):
        record_totals(run)
    incident = make_incident(
        tool,
        opened_at=opened,
        closed_at=closed,
        cause={
            "consecutive": 5,
            "workers": {"research-worker-1": 3, "research-worker-2": 2},
            "events": events[:5],
        },
        reason="5 consecutive retryable failures from 2 workers",
    )
    make_fleet_transition(
        tool, at=opened + timedelta(seconds=30), from_state="open", to_state="half_open",
        cause_kind="cooldown", cause={"cooldown_ms": 30_000, "window": 1, "trial": "probe"},
        reason="cooldown of 30 s elapsed; one trial probe",
    )  # fmt: skip
    make_probe(tool, at=opened + timedelta(seconds=31), ok=False)
    make_fleet_transition(
        tool, at=opened + timedelta(seconds=31), from_state="half_open", to_state="open",
        cause_kind="trial", cause={"window": 1, "holder": "probe", "outcome": "failure"},
        reason="trial probe failed; next cooldown 60 s",
    )  # fmt: skip
    make_operator_action(
        tool,
        at=opened + timedelta(minutes=2),
        action="force_open",
        reason="vendor incident INC-4821: keep it out until they confirm",
        before="open",
        after="forced_open",
    )
    make_operator_action(
        tool,
        at=closed - timedelta(seconds=45),
        action="release",
        reason="vendor confirmed recovery",
        before="forced_open",
        after="half_open",
    )
    make_probe(tool, at=closed - timedelta(seconds=1), ok=True)
    make_alert(incident, at=opened + timedelta(seconds=1, milliseconds=340))
    make_alert(incident, at=closed + timedelta(milliseconds=410), kind="closed")
    return incident


def test_take_screenshots_of_the_main_pages(
    page: Page, live_server: Any, log_in_as: Callable[[User], None], fleet_redis: redis.Redis
) -> None:
    SCREENSHOTS_DIR.mkdir(parents=True, exist_ok=True)
    page.set_viewport_size({"width": WIDTH, "height": 900})
    page.goto("/accounts/login/")
    page.screenshot(path=SCREENSHOTS_DIR / "login.png")

    user = User.objects.create_user("oncall", password="oncall-pass-123", is_staff=True)
    user.groups.add(operators_group())
    outage = seed_demo_traffic()
    seed_live_fleet(user)
    incident = seed_incident_story()
    Worker.objects.update(last_seen_at=timezone.now())
    log_in_as(user)

    page.goto("/")
    expect(page.locator("#board-live tr.tool-row").first).to_contain_text("legacy_search")
    page.screenshot(path=SCREENSHOTS_DIR / "board.png", full_page=True)
    search = Tool.objects.get(name="web_search")
    page.locator(f'a[href="/tools/{search.pk}/act/"]').click()
    expect(page.locator("#action-panel textarea")).to_be_visible()
    page.locator("#action-panel").get_by_label("Force close").check()
    page.locator("#action-panel textarea").fill("vendor says the fix is deployed; watching")
    page.screenshot(path=SCREENSHOTS_DIR / "board-action.png")

    page.goto(f"/tools/{search.pk}/")
    page.screenshot(path=SCREENSHOTS_DIR / "tool.png", full_page=True)
    page.goto("/incidents/")
    page.screenshot(path=SCREENSHOTS_DIR / "incidents.png")
    page.goto(f"/incidents/{incident.pk}/")
    page.screenshot(path=SCREENSHOTS_DIR / "incident.png", full_page=True)
    page.goto("/audit/")
    page.screenshot(path=SCREENSHOTS_DIR / "audit-log.png")
    page.goto("/runs/")
    page.screenshot(path=SCREENSHOTS_DIR / "runs.png", full_page=True)
    page.goto("/runs/?degraded=yes")
    page.screenshot(path=SCREENSHOTS_DIR / "runs-degraded.png")
    page.goto(f"/runs/{outage.pk}/")
    page.screenshot(path=SCREENSHOTS_DIR / "run-detail.png", full_page=True)
    # Outage economics: a replay of the 22-minute story in every mode, and a 22-minute incident.
    make_replay_batch(started_at=T0 - timedelta(hours=20), window_runs=120, workers=8)
    story = make_incident_story()
    page.goto("/outages/")
    expect(page.locator(".js-plotly-plot")).to_have_count(7)
    page.screenshot(path=SCREENSHOTS_DIR / "outages.png", full_page=True)
    page.goto(f"/incidents/{story.pk}/")
    expect(page.locator("#incident-charts .js-plotly-plot")).to_have_count(2)
    page.screenshot(path=SCREENSHOTS_DIR / "incident-charts.png", full_page=True)
    # The same pages on a phone: the menu folded, the columns that matter, charts in a column.
    page.set_viewport_size({"width": PHONE, "height": 844})
    phone = {
        "board": "/",
        "tool": f"/tools/{search.pk}/",
        "incident": f"/incidents/{story.pk}/",
        "outages": "/outages/",
    }
    for name, path in phone.items():
        page.goto(path)
        if path == "/outages/":
            expect(page.locator(".js-plotly-plot")).to_have_count(7)
        page.screenshot(path=SCREENSHOTS_DIR / f"{name}-{PHONE}.png", full_page=True)
    page.goto("/")
    page.get_by_role("button", name="Menu").click()
    expect(page.get_by_role("link", name="Audit log")).to_be_visible()
    page.screenshot(path=SCREENSHOTS_DIR / f"menu-{PHONE}.png")
    names = (
        "login", "board", "board-action", "tool", "incidents", "incident", "audit-log", "runs",
        "runs-degraded", "run-detail", "outages", "incident-charts",
        *(f"{name}-{PHONE}" for name in [*phone, "menu"]),
    )  # fmt: skip
    for name in names:
        assert (SCREENSHOTS_DIR / f"{name}.png").stat().st_size > 10_000
