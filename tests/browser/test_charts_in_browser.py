"""The charts draw in a real browser from the local plotly.min.js, with no request leaving the
machine: every request the page makes is recorded, and any that is not to the live server is
refused before it could reach the network."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from urllib.parse import urlsplit

import pytest
from django.contrib.auth.models import User
from playwright.sync_api import Page, Route, expect

from tests.browser.support import PageWatch
from tests.dashboard.factories import T0
from tests.dashboard.outage_story import make_incident_story, make_replay_batch

pytestmark = pytest.mark.browser

LOCAL_HOSTS = {"localhost", "127.0.0.1", "[::1]", "::1"}


def offline(page: Page) -> list[str]:
    """Record every request; refuse any that would leave the machine (and remember it)."""
    seen: list[str] = []

    def guard(route: Route) -> None:
        url = route.request.url
        parts = urlsplit(url)
        if parts.scheme in ("data", "blob") or parts.hostname in LOCAL_HOSTS:
            route.continue_()
        else:
            route.abort()

    page.on("request", lambda request: seen.append(request.url))
    page.route("**/*", guard)
    return seen


def left_the_machine(urls: list[str]) -> list[str]:
    return [
        url
        for url in urls
        if urlsplit(url).scheme not in ("data", "blob")
        and urlsplit(url).hostname not in LOCAL_HOSTS
    ]


def test_outage_comparison_charts_render_offline(
    page: Page, viewer: User, log_in_as: Callable[[User], None], watch: PageWatch
) -> None:
    replays = make_replay_batch(started_at=T0, window_runs=40)
    requests = offline(page)
    log_in_as(viewer)
    page.goto("/outages/")
    plots = page.locator(".js-plotly-plot")
    # The mode bars, the scatter, and one duration/spend figure per mode.
    expect(plots).to_have_count(2 + len(replays))
    for i in range(2 + len(replays)):
        expect(plots.nth(i).locator("svg.main-svg").first).to_be_visible()
    bars = page.locator("#mode-bars")
    expect(bars).to_contain_text("Model spend: $ per run")
    expect(bars).to_contain_text("Mean run duration: seconds (simulated)")
    expect(bars).to_contain_text("fail-fast")
    scatter = page.locator("#outage-scatter")
    expect(scatter).to_contain_text("tool removed")
    expect(scatter).to_contain_text("refused fast")
    expect(scatter).to_contain_text("failed through")
    fleet = page.locator(f"#mode-{replays[-1].pk}")
    expect(fleet).to_contain_text("Mode fleet: run duration and model spend per run")
    expect(fleet).to_contain_text("Model spend ($ per run)")
    expect(fleet).to_contain_text("Run duration (seconds)")
    # Two panels side by side: two plot areas in the same figure.
    assert fleet.locator("g.cartesianlayer g.subplot").count() == 2
    assert page.locator(".chart-fallback").count() == 0
    assert any(url.endswith("/static/vendor/plotly.min.js") for url in requests)
    assert left_the_machine(requests) == []
    assert watch.errors == []


def test_incident_charts_render_offline(
    page: Page, viewer: User, log_in_as: Callable[[User], None], watch: PageWatch
) -> None:
    incident = make_incident_story(opened_at=T0 - timedelta(hours=1))
    requests = offline(page)
    log_in_as(viewer)
    page.goto(f"/incidents/{incident.pk}/")
    section = page.locator("#incident-charts")
    expect(section.locator(".js-plotly-plot")).to_have_count(2)
    expect(section.locator("#incident-timeline svg.main-svg").first).to_be_visible()
    expect(section.locator("#incident-timeline")).to_contain_text("incident")
    expect(section.locator("#incident-timeline")).to_contain_text("baseline")
    expect(section.locator("#incident-scatter")).to_contain_text("healthy tool (30 runs)")
    expect(section.locator("p.headline")).to_contain_text("slower; model spend per run changed")
    # The incident and its baseline shaded in both panels, the baseline means dashed in each.
    shapes = section.locator("#incident-timeline g.shapelayer path")
    expect(shapes).to_have_count(6)
    assert left_the_machine(requests) == []
    assert watch.errors == []
