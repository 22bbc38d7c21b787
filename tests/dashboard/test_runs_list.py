"""The runs list: newest first, exact filters, paged windows, htmx fragments, bounded queries."""

from __future__ import annotations

import re
from datetime import timedelta
from html import unescape

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from pytest_django import DjangoAssertNumQueries

from controlplane.dashboard.queries import RUNS_PER_PAGE
from tests.dashboard.factories import (
    HOSTILE_NAME,
    HOSTILE_SCRIPT,
    T0,
    make_run,
    make_worker,
)


def agent_spans(html: str) -> list[tuple[str, str]]:
    """(title, visible text) of every piece of agent-sent text on the page."""
    return re.findall(r'<span class="agent-text[^"]*" title="([^"]*)">([^<]*)</span>', html)


def run_ids(html: str) -> list[str]:
    # Run ids are the text of the links into run pages.
    return re.findall(r'href="/runs/\d+/"><span class="agent-text mono" title="([^"]*)"', html)


@pytest.fixture
def mixed_runs(db: None) -> None:
    w1, w2 = make_worker("w-1"), make_worker("w-2")
    make_run("r-1", agent="research", worker=w1, started_at=T0)
    make_run("r-2", agent="research", worker=w2, status="failed", started_at=T0 + timedelta(1))
    make_run("r-3", agent="writer", worker=w1, degraded=True, started_at=T0 + timedelta(2))
    make_run("r-4", agent="writer", worker=w2, status="running", started_at=T0 + timedelta(3))


def test_empty_state_says_where_runs_come_from(viewer_client: Client) -> None:
    html = viewer_client.get("/runs/").content.decode()
    assert "No runs reported yet" in html


@pytest.mark.usefixtures("mixed_runs")
def test_lists_runs_newest_first(viewer_client: Client) -> None:
    html = viewer_client.get("/runs/").content.decode()
    assert run_ids(html) == ["r-4", "r-3", "r-2", "r-1"]


@pytest.mark.usefixtures("mixed_runs")
@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("agent=research", ["r-2", "r-1"]),
        ("worker=w-2", ["r-4", "r-2"]),
        ("status=failed", ["r-2"]),
        ("status=running", ["r-4"]),
        ("degraded=yes", ["r-3"]),
        ("degraded=no", ["r-4", "r-2", "r-1"]),
        ("agent=writer&worker=w-1", ["r-3"]),
        ("run=r-2", ["r-2"]),
        ("agent=resea", []),  # exact match, not substring
    ],
)
def test_filters_narrow_the_list(viewer_client: Client, query: str, expected: list[str]) -> None:
    response = viewer_client.get(f"/runs/?{query}")
    assert response.status_code == 200
    assert run_ids(response.content.decode()) == expected


@pytest.mark.usefixtures("mixed_runs")
def test_no_match_says_so(viewer_client: Client) -> None:
    html = viewer_client.get("/runs/?agent=nobody").content.decode()
    assert "No runs match these filters" in html


@pytest.mark.usefixtures("mixed_runs")
@pytest.mark.parametrize("query", ["status=exploded", "degraded=maybe", "page=0", "page=abc"])
def test_bad_filter_is_a_clear_400(viewer_client: Client, query: str) -> None:
    response = viewer_client.get(f"/runs/?{query}")
    assert response.status_code == 400
    assert "These filters cannot be used" in response.content.decode()


def test_pages_are_windows_with_older_and_newer_links(viewer_client: Client) -> None:
    worker = make_worker()
    for i in range(RUNS_PER_PAGE + 3):
        make_run(f"r-{i:03d}", worker=worker, started_at=T0 + timedelta(seconds=i))
    first = viewer_client.get("/runs/").content.decode()
    assert len(run_ids(first)) == RUNS_PER_PAGE
    assert "Older →" in first and "← Newer" not in first
    second = viewer_client.get("/runs/?page=2").content.decode()
    assert run_ids(second) == ["r-002", "r-001", "r-000"]
    assert "Older →" not in second and "← Newer" in second


@pytest.mark.usefixtures("mixed_runs")
def test_htmx_request_gets_only_the_table(viewer_client: Client) -> None:
    response = viewer_client.get("/runs/?agent=writer", headers={"HX-Request": "true"})
    html = response.content.decode()
    assert html.lstrip().startswith('<section id="runs-table"')
    assert "<html" not in html and '<nav class="nav"' not in html
    assert run_ids(html) == ["r-4", "r-3"]
    assert "HX-Request" in response["Vary"]


@pytest.mark.usefixtures("mixed_runs")
def test_history_restore_gets_the_whole_page(viewer_client: Client) -> None:
    response = viewer_client.get(
        "/runs/?agent=writer",
        headers={"HX-Request": "true", "HX-History-Restore-Request": "true"},
    )
    assert "<html" in response.content.decode()


def test_filter_keeps_other_filters_in_page_links(viewer_client: Client) -> None:
    worker = make_worker()
    for i in range(RUNS_PER_PAGE + 1):
        make_run(f"r-{i:03d}", agent="research", worker=worker, started_at=T0 + timedelta(i))
    html = viewer_client.get("/runs/?agent=research").content.decode()
    assert 'href="?agent=research&amp;page=2"' in html


def test_agent_text_is_escaped_and_clipped(viewer_client: Client) -> None:
    worker = make_worker(HOSTILE_SCRIPT)
    make_run(HOSTILE_NAME, agent=HOSTILE_SCRIPT + "x" * 160, worker=worker)
    html = viewer_client.get("/runs/").content.decode()
    assert "<img src=x" not in html
    assert "<script>alert" not in html
    assert "&lt;img src=x onerror=alert(1)&gt;" in html
    assert "&lt;script&gt;alert(&#x27;pwned&#x27;)&lt;/script&gt;" in html
    # The long name is clipped in the layout; the full (escaped) value is in the title.
    agent = next(v for t, v in agent_spans(html) if t.startswith("&lt;script&gt;") and "x" in t)
    assert unescape(agent).endswith("…") and len(unescape(agent)) <= 24


def test_query_count_does_not_grow_with_rows(
    viewer_client: Client, django_assert_max_num_queries: DjangoAssertNumQueries
) -> None:
    workers = [make_worker(f"w-{i}") for i in range(10)]
    make_run("r-first", worker=workers[0])
    with CaptureQueriesContext(connection) as one_row:
        viewer_client.get("/runs/")
    for i in range(120):
        make_run(f"r-{i}", worker=workers[i % 10], started_at=T0 + timedelta(minutes=i))
    with django_assert_max_num_queries(len(one_row.captured_queries)):
        response = viewer_client.get("/runs/?page=2")
    assert len(run_ids(response.content.decode())) == RUNS_PER_PAGE


def test_a_run_with_unpriced_calls_shows_its_spend_as_a_lower_bound(
    db: None, viewer_client: Client
) -> None:
    from decimal import Decimal

    make_run("r-priced", model_spend_usd=Decimal("0.50"))
    make_run("r-unpriced", model_spend_usd=Decimal("0.25"), unpriced_calls=2)
    html = viewer_client.get("/runs/").content.decode()
    assert "≥ $0.2500" in html and "2 not priced</span>" in html
    assert html.count("data-unpriced") == 1
