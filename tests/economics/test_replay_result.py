"""``ReplayResult``: an outage replay's row as the pages read it, whatever the row holds (rows are
written by the replay, may be older than the pages, or corrupt)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.utils import timezone

from breakers.replay.outage import ReplayResult, Scenario
from runs.models import OutageReplay
from tests.dashboard.factories import make_incident, make_tool

pytestmark = pytest.mark.django_db


def test_a_corrupt_row_reads_as_missing_figures_never_as_an_error() -> None:
    replay = OutageReplay(
        mode="fleet",
        scenario=["not", "a", "dict"],
        summary={
            "runs": "many",
            "model_spend_usd": "inf",
            "mean_run_duration_s": "7.5",
            "spend_by_wrap_up_steps": {"2": "1.5", "x": 3, "5": None, "1": 0.25},
        },
    )
    result = ReplayResult.of(replay)
    assert (result.runs, result.model_spend_usd, result.mean_run_duration_s) == (None, None, 7.5)
    assert result.spend_by_wrap_up_steps == {1: 0.25, 2: 1.5}
    assert result.floor_spend_by_wrap_up_steps == {}
    assert (result.agent, result.batch, result.wrap_up_steps) == ("hand-written", None, None)
    assert result.scenario == Scenario()


def test_a_row_reads_back_the_story_it_recorded() -> None:
    record = {"batch": "b1", "agent": "pydantic-ai", "wrap_up_steps": 5, "runs_in_window": 12}
    result = ReplayResult.of(OutageReplay(mode="run", scenario=record, summary=["bad"]))
    assert (result.agent, result.batch, result.wrap_up_steps) == ("pydantic-ai", "b1", 5)
    assert result.scenario == Scenario(wrap_up_steps=5, runs_in_window=12)
    assert result.figures == {}


def test_the_incident_page_of_a_replay_with_a_corrupt_summary_still_renders(
    client: Client,
) -> None:
    # Before ReplayResult the page printed the summary's raw "runs" through the num filter,
    # which raised on a non-number: a 500.
    began = timezone.now() - timedelta(minutes=10)
    OutageReplay.objects.create(
        mode="fleet",
        speed=60.0,
        worker_prefix="research-replay-x-fleet-",
        started_at=began,
        outage_started_at=began + timedelta(seconds=4),
        outage_ended_at=began + timedelta(seconds=26),
        finished_at=began + timedelta(seconds=32),
        scenario={"batch": "b1"},
        summary={"runs": "many", "model_spend_usd": 20.8, "web_search_calls": 35},
    )
    incident = make_incident(make_tool(), opened_at=began + timedelta(seconds=6))
    client.force_login(User.objects.create_user("v", password="v-pass-123456"))
    response = client.get(f"/incidents/{incident.pk}/")
    assert response.status_code == 200
    page = response.content.decode()
    assert "Opened during an outage replay: mode <strong>fleet</strong>" in page
    assert "The replay's table" not in page  # it has no figures to quote
