"""The shaded bands' labels of the duration and spend charts ("baseline", "outage",
"incident") never print on top of each other, on a phone or a desktop: a 4-minute baseline
before a 22-minute outage is a few pixels wide at 390 px."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta

import pytest
from django.contrib.auth.models import User
from playwright.sync_api import Page, expect

from runs.models import Worker
from tests.dashboard.factories import T0
from tests.dashboard.outage_story import (
    HEALTHY,
    make_incident_story,
    make_replay_batch,
    make_story_run,
)

pytestmark = pytest.mark.browser

BAND_LABELS = ("baseline", "outage", "incident", "incident (ongoing)")

# The boxes of the band labels of every chart, as the browser laid them out.
LABEL_BOXES = """(labels) => [...document.querySelectorAll('.js-plotly-plot')].map((plot) =>
  [plot.id, [...plot.querySelectorAll('.annotation-text')]
    .filter((t) => labels.includes(t.textContent.trim()))
    .map((t) => { const r = t.getBoundingClientRect();
      return [t.textContent.trim(), r.left, r.top, r.right, r.bottom]; })])"""


def overlapping(page: Page) -> list[str]:
    found = []
    for plot, boxes in page.evaluate(LABEL_BOXES, list(BAND_LABELS)):
        for i, (a, *ra) in enumerate(boxes):
            for b, *rb in boxes[i + 1 :]:
                across = min(ra[2], rb[2]) - max(ra[0], rb[0])
                down = min(ra[3], rb[3]) - max(ra[1], rb[1])
                if across > 1 and down > 1:
                    found.append(f"{plot}: {a!r} overlaps {b!r}")
    return found


@pytest.mark.parametrize("width", [390, 1440])
def test_band_labels_never_overlap(
    page: Page, viewer: User, log_in_as: Callable[[User], None], width: int
) -> None:
    _none, fleet = make_replay_batch(started_at=T0, window_runs=20, modes=("none", "fleet"))
    # A run long after the story (the replay plays on until the tool recovers) stretches every
    # mode's axis to 110 minutes: the 4-minute baseline is then narrower than its label.
    worker = Worker.objects.filter(worker_id__startswith=fleet.worker_prefix).first()
    assert worker is not None
    late = fleet.started_at + timedelta(minutes=110 / fleet.speed)
    make_story_run(worker=worker, started_at=late, shape=HEALTHY, speed=fleet.speed)
    incident = make_incident_story(opened_at=T0 - timedelta(hours=1))
    log_in_as(viewer)
    page.set_viewport_size({"width": width, "height": 900})
    for path, charts in (("/outages/", 4), (f"/incidents/{incident.pk}/", 2)):
        page.goto(path)
        expect(page.locator(".js-plotly-plot svg.main-svg").nth(2 * charts - 1)).to_be_visible()
        labels = page.locator(".annotation-text", has_text="baseline")
        expect(labels.first).to_be_visible()
        assert overlapping(page) == [], path
