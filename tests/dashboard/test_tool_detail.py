"""A tool's page: the three scopes side by side, recent calls, transitions, probes, incidents."""

from __future__ import annotations

import re
from datetime import timedelta

import redis
from django.test import Client, override_settings
from django.utils import timezone
from pytest_django import DjangoAssertNumQueries

from breakers.models import Tool
from controlplane.dashboard.tool_page import RECENT_CALLS
from runs.models import RunStatus, ToolCall, Worker
from tests.dashboard.factories import (
    HOSTILE_NAME,
    HOSTILE_SCRIPT,
    make_operator_action,
    make_probe,
    make_run,
    make_tool_call,
    make_transition,
    make_worker,
)
from tests.dashboard.live import calls, open_fleet_breaker


def section(html: str, title_id: str) -> str:
    start = html.index(f'aria-labelledby="{title_id}"')
    return html[start : html.index("</section>", start)]


def test_three_scopes_side_by_side(viewer_client: Client, fleet_redis: redis.Redis) -> None:
    now = timezone.now()
    calls("web_search", "w-1", "retryable", "retryable")
    calls("web_search", "w-2", "retryable")
    tool = Tool.objects.get(name="web_search")
    w1 = Worker.objects.get(worker_id="w-1")
    make_transition(worker=w1, scope="worker", ts=now, reason="5 consecutive on this worker")
    run = make_run("r-running", worker=w1, status=RunStatus.RUNNING, started_at=now)
    make_transition(worker=w1, run=run, scope="run", ts=now)
    html = viewer_client.get(f"/tools/{tool.pk}/").content.decode()
    fleet = section(html, "fleet-title")
    assert "state-closed" in fleet
    assert '3 <span class="muted">of 5 consecutive retryable failures' in fleet
    assert "w-1 (2), w-2 (1)" in fleet
    workers = section(html, "worker-title")
    assert re.search(r"Open or half-open on <strong[^>]*>1</strong> live worker\.", workers)
    assert workers.index("w-1") < workers.index("w-2")  # the worker holding it open first
    runs = section(html, "run-title")
    assert "r-running" in runs and f'href="/runs/{run.pk}/"' in runs


def test_recent_calls_and_transitions_with_their_causes(
    viewer_client: Client, fleet_redis: redis.Redis
) -> None:
    open_fleet_breaker("web_search")
    tool = Tool.objects.get(name="web_search")
    html = viewer_client.get(f"/tools/{tool.pk}/").content.decode()
    recent = section(html, "calls-title")
    assert recent.count("outcome-retryable") == 5
    assert "ToolFailure: 503 from vendor" in recent
    transitions = section(html, "transitions-title")
    assert "failures" in transitions
    assert "5 consecutive retryable failures from 2 workers: w-1 (3), w-2 (2)" in transitions
    incidents = section(html, "incidents-title")
    assert "ongoing" in incidents


def test_probes_and_operator_actions_are_listed(
    viewer_client: Client, fleet_redis: redis.Redis
) -> None:
    open_fleet_breaker("web_search")
    tool = Tool.objects.get(name="web_search")
    now = timezone.now()
    make_probe(tool, at=now, ok=False)
    make_probe(tool, at=now + timedelta(seconds=30), ok=True)
    make_operator_action(tool, at=now, reason="vendor confirmed")
    html = viewer_client.get(f"/tools/{tool.pk}/").content.decode()
    probes = section(html, "probes-title")
    assert probes.index(">ok<") < probes.index(">failed<")  # newest first
    assert "HTTP 503 from vendor" in probes
    actions = section(html, "actions-title")
    assert "Force close" in actions and "vendor confirmed" in actions and "user:alice" in actions


def test_recent_calls_are_capped(
    viewer_client: Client,
    fleet_redis: redis.Redis,
    django_assert_max_num_queries: DjangoAssertNumQueries,
) -> None:
    calls("web_search", "w-1", "success")
    tool = Tool.objects.get(name="web_search")
    run = make_run("r-big", worker=make_worker("w-1"))
    now = timezone.now()
    ToolCall.objects.bulk_create(
        ToolCall(
            event_id=f"bulk-{i}",
            run=run,
            worker=run.worker,
            ts=now - timedelta(seconds=i),
            tool="web_search",
            outcome="success",
        )
        for i in range(500)
    )
    with django_assert_max_num_queries(16):
        html = viewer_client.get(f"/tools/{tool.pk}/").content.decode()
    assert section(html, "calls-title").count("outcome-success") == RECENT_CALLS


def test_viewer_sees_no_action_form_and_operator_does(
    client: Client, viewer: object, operator: object, fleet_redis: redis.Redis
) -> None:
    open_fleet_breaker("web_search")
    tool = Tool.objects.get(name="web_search")
    client.force_login(viewer)  # type: ignore[arg-type]
    html = client.get(f"/tools/{tool.pk}/").content.decode()
    assert "needs membership of the <strong>operators</strong> group" in html
    assert "/act/" not in html and "/policy/" not in html
    client.force_login(operator)  # type: ignore[arg-type]
    html = client.get(f"/tools/{tool.pk}/").content.decode()
    assert f'action="/tools/{tool.pk}/act/"' in html
    assert 'name="next" value="tool"' in html
    assert f'action="/tools/{tool.pk}/policy/"' in html


def test_redis_down_shows_the_database_state(
    viewer_client: Client, fleet_redis: redis.Redis
) -> None:
    open_fleet_breaker("web_search")
    tool = Tool.objects.get(name="web_search")
    with override_settings(REDIS_URL="redis://127.0.0.1:1/0", REDIS_SOCKET_TIMEOUT=0.5):
        response = viewer_client.get(f"/tools/{tool.pk}/")
    html = response.content.decode()
    assert response.status_code == 200
    assert "Live counters unavailable" in html
    assert "state-open" in section(html, "fleet-title")


def test_unknown_tool_is_a_404(viewer_client: Client) -> None:
    assert viewer_client.get("/tools/123456/").status_code == 404


def test_hostile_names_render_as_text(viewer_client: Client, fleet_redis: redis.Redis) -> None:
    calls(HOSTILE_NAME, HOSTILE_SCRIPT, "retryable")
    tool = Tool.objects.get(name=HOSTILE_NAME)
    worker = Worker.objects.get(worker_id=HOSTILE_SCRIPT)
    run = make_run(HOSTILE_SCRIPT + "-run", worker=worker)
    make_tool_call(run, step=1, ts=timezone.now(), tool=HOSTILE_NAME, error=HOSTILE_SCRIPT)
    html = viewer_client.get(f"/tools/{tool.pk}/").content.decode()
    assert "<img src=x" not in html
    assert "<script>alert" not in html
    assert "&lt;img src=x onerror=alert(1)&gt;" in html
