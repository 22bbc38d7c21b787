"""The outage comparison page and the incident page's charts, as the server renders them."""

from __future__ import annotations

import html as html_lib
import json
import re
from datetime import timedelta
from typing import Any

from django.test import Client
from django.utils import timezone
from pytest_django import DjangoAssertNumQueries

from runs.models import OutageReplay
from runs.outage_economics import TIMES
from tests.dashboard.factories import T0, make_incident, make_tool
from tests.dashboard.outage_story import make_incident_story, make_replay_batch


def figures(html: str) -> dict[str, dict[str, Any]]:
    """Every figure on the page, by the id of the element it is drawn in."""
    found = re.findall(r'<script type="application/json" id="([\w-]+)-data">(.*?)</script>', html)
    return {element: json.loads(data) for element, data in found}


def test_outages_page_compares_the_newest_batch(
    viewer_client: Client, django_assert_max_num_queries: DjangoAssertNumQueries
) -> None:
    make_replay_batch(started_at=T0 - timedelta(days=1), label="old", window_runs=4)
    replays = make_replay_batch(started_at=T0, label="new")
    # session, user, replays, one aggregate, one list, the ways records
    with django_assert_max_num_queries(7):
        response = viewer_client.get("/outages/")
    assert response.status_code == 200
    html = response.content.decode()
    assert html.count('src="/static/vendor/plotly.min.js"') == 1
    assert 'src="/static/js/charts.js"' in html
    assert 'aria-current="page">Outages</a>' in html
    charts = figures(html)
    assert set(charts) == {"mode-bars", "outage-scatter"} | {f"mode-{r.pk}" for r in replays}
    assert f'<option value="{replays[0].pk}" selected>' in html
    # The headline per mode, computed from the runs.
    assert "runs got " in html and "against mode none (no breaker)" in html
    fleet = charts[f"mode-{replays[-1].pk}"]
    assert fleet["layout"]["title"]["text"] == "Mode fleet: run duration and model spend per run"
    assert "model spend per run changed by -" in fleet["layout"]["title"]["subtitle"]["text"]
    # Every mode has the same scales, so their panels can be read against each other.
    ranges = {json.dumps(charts[f"mode-{r.pk}"]["layout"]["yaxis"]["range"]) for r in replays}
    assert len(ranges) == 1
    assert "http" not in "".join(json.dumps(figure) for figure in charts.values())


def test_outages_page_shows_an_older_batch_when_asked(viewer_client: Client) -> None:
    old = make_replay_batch(started_at=T0 - timedelta(days=1), label="old", window_runs=4)
    make_replay_batch(started_at=T0, label="new", window_runs=4)
    html = viewer_client.get(f"/outages/?batch={old[0].pk}").content.decode()
    assert f'<option value="{old[0].pk}" selected>' in html
    assert f'id="mode-{old[0].pk}"' in html


def test_outages_page_refuses_a_bad_batch(viewer_client: Client) -> None:
    make_replay_batch(started_at=T0, window_runs=2, modes=("none",))
    bad = viewer_client.get("/outages/?batch=<script>")
    assert bad.status_code == 400
    assert "is not a replay batch" in bad.content.decode()
    assert "<script>" not in bad.content.decode().split("<main", 1)[1]
    assert viewer_client.get("/outages/?batch=999999").status_code == 404


def test_outages_page_without_replays_says_how_to_make_them(viewer_client: Client) -> None:
    html = viewer_client.get("/outages/").content.decode()
    assert "No outage replays yet" in html and "simulate_outage" in html
    assert figures(html) == {}


def test_a_running_replay_without_summary_has_no_bars_yet(viewer_client: Client) -> None:
    # Begun a minute ago: an unfinished replay much older than that was interrupted.
    make_replay_batch(
        started_at=timezone.now() - timedelta(minutes=1), window_runs=3, with_summary=False
    )
    OutageReplay.objects.filter(mode="fleet").update(finished_at=None)
    html = viewer_client.get("/outages/").content.decode()
    assert "mode-bars" not in figures(html)
    assert "No replay of this batch has a summary yet" in html
    assert "(playing)" in html


def test_outages_page_needs_a_login(client: Client) -> None:
    response = client.get("/outages/")
    assert response.status_code == 302 and "/accounts/login/" in response["Location"]


def test_incident_page_draws_duration_and_spend_against_its_baseline(
    viewer_client: Client,
) -> None:
    incident = make_incident_story()
    html = viewer_client.get(f"/incidents/{incident.pk}/").content.decode()
    assert html.count('src="/static/vendor/plotly.min.js"') == 1
    section = html.split('<section id="incident-charts"', 1)[1].split("</section>", 1)[0]
    assert f"Runs got 1.4{TIMES} slower; model spend per run changed by -39%" in html_lib.unescape(
        section
    )
    assert "against the 22 minutes before it" in section
    charts = figures(html)
    assert set(charts) == {"incident-timeline", "incident-scatter"}
    timeline = charts["incident-timeline"]
    assert timeline["layout"]["yaxis"]["title"]["text"] == "Run duration (seconds)"
    assert timeline["layout"]["yaxis2"]["title"]["text"] == "Model spend ($ per run)"
    names = [t["name"] for t in charts["incident-scatter"]["data"]]
    assert names == ["healthy tool (30 runs)", "tool removed (40 runs)"]


def test_incident_without_runs_has_charts_that_say_so(viewer_client: Client) -> None:
    incident = make_incident(make_tool("quiet_tool"), opened_at=T0, closed_at=T0 + timedelta(1))
    html = viewer_client.get(f"/incidents/{incident.pk}/").content.decode()
    assert "No finished runs in the outage window to compare." in html
    assert set(figures(html)) == {"incident-timeline", "incident-scatter"}


def test_incident_page_stays_bounded_with_charts(
    viewer_client: Client, django_assert_max_num_queries: DjangoAssertNumQueries
) -> None:
    incident = make_incident_story()
    # The outage ledger takes about a dozen aggregate queries of its own, however many runs.
    with django_assert_max_num_queries(32):
        assert viewer_client.get(f"/incidents/{incident.pk}/").status_code == 200
