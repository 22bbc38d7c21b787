"""A replay batch stopped half-played (Ctrl-C, SIGTERM, a killed process) is marked interrupted
and is never the Outages page's default: the page shows the newest batch played through."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.utils import timezone

from breakers.replay.orchestration import mark_interrupted
from breakers.replay.outage import recent_replay_batches, replay_interrupted
from controlplane.dashboard.economics import outages_page
from runs.models import OutageReplay
from tests.dashboard.outage_story import make_replay_batch

pytestmark = pytest.mark.django_db

MODES = ["none", "fail-fast", "run", "worker", "fleet"]


def _played(label: str, *, started: timedelta, modes: tuple[str, ...]) -> list[OutageReplay]:
    replays = make_replay_batch(
        started_at=timezone.now() - started, window_runs=4, modes=modes, label=label
    )
    for replay in replays:
        replay.scenario = {**replay.scenario, "batch": label, "modes_planned": MODES}
        replay.save(update_fields=["scenario"])
    return replays


def test_a_batch_stopped_by_its_command_is_not_the_default(client: Client) -> None:
    complete = _played("done", started=timedelta(hours=3), modes=tuple(MODES))
    stopped = _played("stopped", started=timedelta(minutes=10), modes=("none",))
    mark_interrupted(stopped[0], why="KeyboardInterrupt")
    stopped[0].refresh_from_db()
    assert replay_interrupted(stopped[0])
    page = outages_page()
    assert page.selected is not None and page.selected.key == complete[0].pk
    assert [batch.status() for batch in page.batches] == ["interrupted", "complete"]
    client.force_login(User.objects.create_user("v", password="v-pass-123456"))
    html = client.get("/outages/").content.decode()
    assert "none (interrupted)" in html
    shown = client.get(f"/outages/?batch={stopped[0].pk}").content.decode()
    assert "This batch was <strong>interrupted</strong>" in shown


def test_a_killed_replay_counts_as_interrupted_once_it_is_stale() -> None:
    complete = _played("done", started=timedelta(hours=5), modes=tuple(MODES))
    killed = _played("killed", started=timedelta(hours=2), modes=("none",))
    OutageReplay.objects.filter(pk=killed[0].pk).update(finished_at=None, summary={})
    batches = recent_replay_batches()
    assert [batch.status() for batch in batches] == ["interrupted", "complete"]
    assert outages_page().selected.key == complete[0].pk  # type: ignore[union-attr]


def test_a_batch_that_stopped_between_modes_is_interrupted() -> None:
    _played("done", started=timedelta(hours=3), modes=tuple(MODES))
    _played("short", started=timedelta(minutes=10), modes=("none", "fail-fast"))
    assert [batch.status() for batch in recent_replay_batches()] == ["interrupted", "complete"]


def test_a_batch_still_playing_is_shown_until_one_is_complete() -> None:
    playing = _played("now", started=timedelta(minutes=1), modes=("none",))
    OutageReplay.objects.filter(pk=playing[0].pk).update(finished_at=None)
    page = outages_page()
    assert page.selected is not None and page.selected.status() == "playing"
