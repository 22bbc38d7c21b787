"""The incident page says one figure for the change in model spend per run: the chart's
headline ("+N%") and the sentence under the table ("rose by N%") are the same computation over
the same runs."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.contrib.auth.models import User
from django.test import Client

from runs.models import Worker
from runs.outage_economics import percent_change, percent_text
from tests.dashboard.factories import T0
from tests.dashboard.outage_story import FAILED, make_incident_story, make_story_run

pytestmark = pytest.mark.django_db


def test_the_chart_and_the_sentence_give_one_spend_change(client: Client) -> None:
    incident = make_incident_story(opened_at=T0 - timedelta(hours=3))
    # A long run that began before the incident and failed through into it: the table splits
    # its model calls at the opening, the chart counts it whole, among the runs during it.
    worker = Worker.objects.get(worker_id="news-worker-1")
    make_story_run(
        worker=worker,
        started_at=incident.opened_at - timedelta(seconds=200),
        shape=FAILED,
        tool="news_search",
    )
    client.force_login(User.objects.create_user("v", password="v-pass-123456"))
    page = client.get(f"/incidents/{incident.pk}/").content.decode()
    chart = re.search(r"model spend per run changed by ([+-][\d,.]+)%", page)
    sentence = re.search(r"Model spend per (?:affected )?run (rose|fell) by ([\d,.]+)%", page)
    assert chart is not None and sentence is not None, page
    signed = ("+" if sentence.group(1) == "rose" else "-") + sentence.group(2)
    assert chart.group(1) == signed


@pytest.mark.parametrize(
    ("before", "after", "text"),
    [(1.0, 6.2, "+520%"), (2.0, 1.91, "-4.5%"), (1.0, 1.0, "0%"), (0.5, 0.501, "+0.2%")],
)
def test_one_change_one_rounding(before: float, after: float, text: str) -> None:
    change = percent_change(before, after)
    assert change is not None and percent_text(change) == text


def test_no_change_against_nothing() -> None:
    assert percent_change(0.0, 3.0) is None
