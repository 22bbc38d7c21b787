"""The board: every tool's fleet state, its streak, and how many workers and runs hold it out."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
import redis
from django.conf import settings
from django.contrib.auth.models import User
from django.test import Client, override_settings
from django.utils import timezone
from pytest_django import DjangoAssertNumQueries

from breakers.fleet.rules import OperatorActionKind
from breakers.fleet_service import (
    fleet_operator_action,
    fleet_rebuild,
    fleet_tick,
    fleet_trial_acquire,
    tool_policy_update,
)
from breakers.models import Tool
from controlplane.dashboard.board import BoardFilters, fleet_board
from runs.models import RunStatus, Worker
from tests.dashboard.factories import (
    HOSTILE_NAME,
    HOSTILE_SCRIPT,
    make_run,
    make_tool,
    make_transition,
    make_worker,
)
from tests.dashboard.live import calls, open_fleet_breaker

HTMX = {"HX-Request": "true"}


def rows_of(html: str) -> list[str]:
    return re.findall(r'<tr class="tool-row[^"]*" data-tool="([^"]*)"', html)


def row_html(html: str, tool: str) -> str:
    start = html.index(f'data-tool="{tool}"')
    return html[start : html.index("</tr>", start)]


def test_open_tool_is_listed_first_with_its_streak_workers_and_reason(
    viewer_client: Client, fleet_redis: redis.Redis
) -> None:
    calls("calendar", "w-1", "success")
    calls("web_search", "w-1", "retryable", "retryable")  # one worker: a streak, no trip
    open_fleet_breaker("vector_db")
    html = viewer_client.get("/").content.decode()
    assert rows_of(html) == ["vector_db", "web_search", "calendar"]
    opened = row_html(html, "vector_db")
    assert "state-open" in opened
    assert "5 consecutive retryable failures from 2 workers" in opened
    streak = row_html(html, "web_search")
    assert "state-closed" in streak
    # 2 consecutive of 5, from 1 distinct worker of the 2 needed.
    assert re.search(r">2</span><span class=\"muted\"> / 5<", streak)
    assert re.search(r'title="w-1"[^>]*>1</span><span class="muted"> / 2<', streak)
    assert "1 out of service" in re.sub(r"<[^>]+>", "", html).replace("\n", " ")


def test_forced_state_is_shown_and_counted(operator: User, fleet_redis: redis.Redis) -> None:
    calls("web_search", "w-1", "success")
    fleet_operator_action(
        tool_name="web_search",
        action=OperatorActionKind.FORCE_OPEN,
        reason="vendor down",
        user=operator,
    )
    board = fleet_board(filters=BoardFilters())
    assert [row.state for row in board.rows] == ["forced_open"]
    assert board.rows[0].reason == "forced open by an operator: vendor down"
    assert board.out_of_service == 1


def test_open_on_workers_counts_live_workers_whose_newest_worker_state_is_out(
    viewer_client: Client, fleet_redis: redis.Redis
) -> None:
    now = timezone.now()
    calls("web_search", "w-live-open", "success")
    live_open = Worker.objects.get(worker_id="w-live-open")
    live_closed_again = make_worker("w-live-reclosed")
    stale_open = make_worker("w-stale-open")
    Worker.objects.filter(pk__in=[live_closed_again.pk]).update(last_seen_at=now)
    Worker.objects.filter(pk=stale_open.pk).update(last_seen_at=now - timedelta(hours=1))
    for worker in (live_open, live_closed_again, stale_open):
        make_transition(worker=worker, scope="worker", ts=now - timedelta(minutes=2))
    make_transition(
        worker=live_closed_again, scope="worker", state="closed", ts=now - timedelta(minutes=1)
    )
    row = fleet_board(filters=BoardFilters()).rows[0]
    assert row.workers_open == ("w-live-open",)
    html = viewer_client.get("/").content.decode()
    assert re.search(r'<span class="text-bad" title="w-live-open">1</span>', html)


def test_removed_in_runs_counts_active_runs_with_the_tool_removed_by_any_breaker(
    viewer_client: Client, fleet_redis: redis.Redis
) -> None:
    now = timezone.now()
    calls("web_search", "w-1", "success")
    worker = make_worker("w-1")
    running = [
        make_run(f"r-live-{i}", worker=worker, status=RunStatus.RUNNING, started_at=now)
        for i in range(5)
    ]
    finished = make_run("r-done", worker=worker, started_at=now)
    abandoned = make_run(
        "r-abandoned", worker=worker, status=RunStatus.RUNNING, started_at=now - timedelta(days=1)
    )
    # Removed by the run's own, its worker's and the fleet's breaker: three runs.
    for run, scope in ((running[0], "run"), (running[1], "worker"), (running[2], "fleet")):
        make_transition(worker=worker, run=run, scope=scope, ts=now)
    for run in (finished, abandoned):
        make_transition(worker=worker, run=run, scope="run", ts=now)
    # Reported twice by one run (two scopes): still one run.
    make_transition(worker=worker, run=running[0], scope="fleet", ts=now)
    # Not a removal in a run: a worker's own transition, and a run whose breaker only half-opened.
    make_transition(worker=worker, scope="worker", ts=now)
    make_transition(worker=worker, run=running[3], scope="run", state="half_open", ts=now)
    board = fleet_board(filters=BoardFilters())
    assert board.rows[0].runs_removed == 3
    assert board.active_runs == 5
    html = viewer_client.get("/").content.decode()
    assert '<span class="text-bad">3</span>' in row_html(html, "web_search")
    assert "whichever breaker (run, worker or fleet) removed it" in html


def test_open_on_workers_ignores_the_per_run_copies_of_worker_removals(
    fleet_redis: redis.Redis,
) -> None:
    now = timezone.now()
    calls("web_search", "w-1", "success")
    worker = Worker.objects.get(worker_id="w-1")
    run = make_run("r-1", worker=worker, status=RunStatus.RUNNING, started_at=now)
    make_transition(worker=worker, scope="worker", ts=now - timedelta(minutes=3))
    make_transition(worker=worker, scope="worker", state="closed", ts=now - timedelta(minutes=2))
    # The run still reports the tool removed (its copy of the worker removal), newer than the
    # worker's own "closed": the worker's breaker is closed all the same.
    make_transition(worker=worker, run=run, scope="worker", ts=now - timedelta(minutes=1))
    assert fleet_board(filters=BoardFilters()).rows[0].workers_open == ()


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("?state=open", ["vector_db"]),
        ("?state=out", ["vector_db"]),
        ("?state=closed", ["web_search", "calendar"]),
        ("?q=SEARCH", ["web_search"]),
        ("?q=cal&state=closed", ["calendar"]),
        ("?q=cal&state=open", []),
        ("?q=nothing-like-it", []),
    ],
)
def test_filter_by_state_and_search_by_name(
    viewer_client: Client, fleet_redis: redis.Redis, query: str, expected: list[str]
) -> None:
    calls("calendar", "w-1", "success")
    calls("web_search", "w-1", "retryable")
    open_fleet_breaker("vector_db")
    html = viewer_client.get("/" + query).content.decode()
    assert rows_of(html) == expected
    if not expected:
        assert "No tool matches these filters" in html


def test_filters_are_kept_in_the_poll_url(viewer_client: Client, fleet_redis: redis.Redis) -> None:
    calls("web_search", "w-1", "success")
    html = viewer_client.get("/?q=web&state=closed").content.decode()
    assert 'hx-get="/?q=web&amp;state=closed"' in html


def test_invalid_filter_is_a_400_that_says_why(viewer_client: Client, db: None) -> None:
    response = viewer_client.get("/?state=sideways")
    assert response.status_code == 400
    assert "These filters cannot be used" in response.content.decode()


def test_empty_fleet_says_how_tools_appear(viewer_client: Client, fleet_redis: redis.Redis) -> None:
    html = viewer_client.get("/").content.decode()
    assert "No tools yet" in html and "tool.call" in html


def test_poll_returns_only_the_live_partial(
    viewer_client: Client, fleet_redis: redis.Redis
) -> None:
    calls("web_search", "w-1", "success")
    response = viewer_client.get("/", headers=HTMX)
    html = response.content.decode()
    assert html.lstrip().startswith('<section id="board-live"')
    assert "<html" not in html
    assert response["Cache-Control"] == "no-cache, private"
    assert "HX-Request" in response["Vary"]


def test_unchanged_board_poll_is_a_304_and_a_change_is_a_200(
    viewer_client: Client, fleet_redis: redis.Redis
) -> None:
    calls("web_search", "w-1", "success")
    first = viewer_client.get("/", headers=HTMX)
    etag = first["ETag"]
    assert first.status_code == 200 and etag.startswith('"b-')
    # The partial carries its own ETag for the next poll.
    assert "If-None-Match" in first.content.decode()
    again = viewer_client.get("/", headers={**HTMX, "If-None-Match": etag})
    assert again.status_code == 304
    assert again.content == b""
    assert again["ETag"] == etag
    calls("web_search", "w-2", "retryable")  # the streak moves: the board changed
    changed = viewer_client.get("/", headers={**HTMX, "If-None-Match": etag})
    assert changed.status_code == 200
    assert changed["ETag"] != etag


def test_etag_differs_between_filters_and_between_viewers_and_operators(
    client: Client, viewer: User, operator: User, fleet_redis: redis.Redis
) -> None:
    calls("web_search", "w-1", "success")
    client.force_login(viewer)
    as_viewer = client.get("/", headers=HTMX)["ETag"]
    filtered = client.get("/?q=web", headers=HTMX)["ETag"]
    client.force_login(operator)
    as_operator = client.get("/", headers=HTMX)["ETag"]
    assert len({as_viewer, filtered, as_operator}) == 3
    # An operator's poll with a viewer's ETag gets the operator's board (with buttons).
    response = client.get("/", headers={**HTMX, "If-None-Match": as_viewer})
    assert response.status_code == 200 and "Act…" in response.content.decode()


def test_full_page_is_never_a_304(viewer_client: Client, fleet_redis: redis.Redis) -> None:
    calls("web_search", "w-1", "success")
    etag = viewer_client.get("/", headers=HTMX)["ETag"]
    response = viewer_client.get("/", headers={"If-None-Match": etag})
    assert response.status_code == 200
    assert "<html" in response.content.decode()


def test_board_polls_every_2s_only_while_visible(
    viewer_client: Client, fleet_redis: redis.Redis
) -> None:
    html = viewer_client.get("/").content.decode()
    # Paused while hidden by panel.js (data-poll-visible-only): htmx filters need eval, which
    # the Content-Security-Policy forbids.
    assert "every 2s, visibilitychange from:document" in html
    assert "data-poll-visible-only" in html
    assert 'id="live-status"' in html and "UTC" in html
    # A 304 must not blank the board: htmx is told not to swap it.
    assert '{"code": "304", "swap": false}' in html


def test_viewer_sees_state_but_no_action_buttons(
    viewer_client: Client, fleet_redis: redis.Redis
) -> None:
    open_fleet_breaker("web_search")
    html = viewer_client.get("/").content.decode()
    assert "state-open" in html
    assert "Act…" not in html
    assert "/act/" not in html
    assert 'id="action-panel"' not in html


def test_operator_sees_an_action_button_per_tool(
    operator_client: Client, fleet_redis: redis.Redis
) -> None:
    calls("calendar", "w-1", "success")
    open_fleet_breaker("web_search")
    html = operator_client.get("/").content.decode()
    assert html.count("Act…") == 2
    tool = Tool.objects.get(name="web_search")
    assert f'hx-get="/tools/{tool.pk}/act/"' in html


def test_hostile_tool_name_renders_as_text(viewer_client: Client, fleet_redis: redis.Redis) -> None:
    calls(HOSTILE_NAME, "w-1", "retryable")
    calls(HOSTILE_SCRIPT, HOSTILE_SCRIPT, "success")
    html = viewer_client.get("/").content.decode()
    assert "<img src=x" not in html
    assert "<script>alert" not in html
    assert "&lt;img src=x onerror=alert(1)&gt;" in html
    assert "&lt;script&gt;alert(&#x27;pwned&#x27;)&lt;/script&gt;" in html


def test_redis_down_shows_the_database_state_with_a_banner(
    viewer_client: Client, fleet_redis: redis.Redis
) -> None:
    open_fleet_breaker("web_search")
    with override_settings(REDIS_URL="redis://127.0.0.1:1/0", REDIS_SOCKET_TIMEOUT=0.5):
        response = viewer_client.get("/")
    html = response.content.decode()
    assert response.status_code == 200
    assert "Live counters unavailable" in html
    assert "cannot be reached" in html
    row = row_html(html, "web_search")
    assert "state-open" in row  # the database's copy of the state
    assert 'title="live counters unavailable">?<' in row


def test_redis_that_lost_its_data_shows_a_rebuilding_banner(
    viewer_client: Client, fleet_redis: redis.Redis
) -> None:
    open_fleet_breaker("web_search")
    fleet_redis.flushdb()
    html = viewer_client.get("/").content.decode()
    assert "being rebuilt from the database" in html
    assert "state-open" in row_html(html, "web_search")


def test_board_cost_is_bounded_with_200_tools_and_50_workers(
    viewer_client: Client,
    fleet_redis: redis.Redis,
    django_assert_max_num_queries: DjangoAssertNumQueries,
) -> None:
    now = timezone.now()
    Tool.objects.bulk_create(
        Tool(name=f"tool-{i:03d}", state="open" if i % 20 == 0 else "closed") for i in range(200)
    )
    fleet_rebuild()  # every tool gets its Redis state, as in production
    workers = [make_worker(f"w-{i:02d}") for i in range(50)]
    Worker.objects.update(last_seen_at=now)
    for i, worker in enumerate(workers):
        run = make_run(f"r-{i}", worker=worker, status=RunStatus.RUNNING, started_at=now)
        make_transition(worker=worker, scope="worker", tool=f"tool-{i:03d}", ts=now)
        make_transition(worker=worker, run=run, scope="run", tool=f"tool-{i % 7:03d}", ts=now)
    # Session, user, operator check; tools; worker scope; run scope; silences; two counts.
    with django_assert_max_num_queries(10):
        response = viewer_client.get("/")
    html = response.content.decode()
    assert len(rows_of(html)) == 200
    with django_assert_max_num_queries(10):
        poll = viewer_client.get("/", headers=HTMX)
    with django_assert_max_num_queries(10):
        assert (
            viewer_client.get("/", headers={**HTMX, "If-None-Match": poll["ETag"]}).status_code
            == 304
        )


def test_anonymous_poll_is_sent_to_login(client: Client, db: None) -> None:
    response = client.get("/", headers=HTMX)
    assert response["HX-Redirect"].startswith("/accounts/login/")


def test_make_tool_factory_tools_without_redis_state_show_the_database_copy(
    viewer_client: Client, fleet_redis: redis.Redis
) -> None:
    make_tool(
        "legacy_tool", state="forced_closed", forced="forced_closed", forced_reason="kept on by ops"
    )
    html = viewer_client.get("/").content.decode()
    row = row_html(html, "legacy_tool")
    assert "state-forced-closed" in row and "kept on by ops" in row


def test_a_half_open_tool_without_a_taker_says_how_long_it_has_waited_for_a_trial(
    viewer_client: Client, fleet_redis: redis.Redis
) -> None:
    # Issue 23: no probe, and no run that offers the tool has taken its lease. Nothing retries
    # it, so the board says so, and for how long.
    open_fleet_breaker("web_search")
    half_open_at = timezone.now() + timedelta(seconds=31)
    fleet_tick(now=half_open_at)
    later = half_open_at + timedelta(minutes=10)

    [row] = fleet_board(filters=BoardFilters(), now=later).rows
    assert (row.state, row.waiting_since) == ("half_open", Tool.objects.get().since)
    assert row.waiting_since is not None
    assert abs((row.waiting_since - half_open_at).total_seconds()) < 1
    html = viewer_client.get("/").content.decode()
    assert "waiting for a trial for" in row_html(html, "web_search")

    lease = fleet_trial_acquire(tool_name="web_search", worker_id="w-3", now=later)
    assert lease.granted
    [row] = fleet_board(filters=BoardFilters(), now=later + timedelta(seconds=1)).rows
    assert row.waiting_since is None  # a worker's run is about to make the call
    html = viewer_client.get("/").content.decode()
    assert "waiting for a trial" not in row_html(html, "web_search")

    lapsed = later + timedelta(seconds=settings.BREAKER_TRIAL_LEASE_SECONDS + 1)
    [row] = fleet_board(filters=BoardFilters(), now=lapsed).rows
    assert row.waiting_since is not None  # the lease lapsed unused: waiting again, since then
    assert abs((row.waiting_since - lapsed).total_seconds()) < 2


def test_a_closed_or_probed_tool_never_waits_for_a_trial(
    viewer_client: Client, fleet_redis: redis.Redis
) -> None:
    calls("calendar", "w-1", "success")
    open_fleet_breaker("web_search")
    probe = {"probe_kind": "http", "probe_url": "http://127.0.0.1:9/health"}
    tool_policy_update(tool_name="web_search", changes=probe, actor="test")
    fleet_tick(now=timezone.now() + timedelta(seconds=31))
    board = fleet_board(filters=BoardFilters(), now=timezone.now() + timedelta(minutes=10))
    assert {row.name: row.waiting_since for row in board.rows} == {
        "web_search": None,
        "calendar": None,
    }
    assert "waiting for a trial" not in viewer_client.get("/").content.decode()
