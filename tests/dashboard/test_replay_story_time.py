"""The Outages page draws a replay on its own clock: the time it stood still, waiting for the
control plane or for runs that were due, is not the story's time, so a 22-minute outage is drawn
22 minutes wide however long the replay paused."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest

from breakers.replay.outage import ReplayClock, group_replays, minutes_since
from controlplane.dashboard.charts import OUTAGE_FILL
from controlplane.dashboard.economics import outage_comparison
from runs.models import OutageReplay
from tests.dashboard.factories import T0
from tests.dashboard.outage_story import make_replay_batch

pytestmark = pytest.mark.django_db


def _pause(replay: OutageReplay, *, at_s: float, real_s: float) -> None:
    """Stop the replay's clock ``real_s`` real seconds at ``at_s`` real seconds after its start,
    as the governor does: the outage's wall times move later by as much."""
    start = replay.started_at.timestamp() + at_s
    replay.pauses = [[start, start + real_s]]
    replay.outage_started_at += timedelta(seconds=real_s)
    replay.outage_ended_at += timedelta(seconds=real_s)
    replay.save(update_fields=["pauses", "outage_started_at", "outage_ended_at"])


def test_the_outage_band_is_as_wide_as_the_outage_however_long_the_clock_paused() -> None:
    (fleet,) = make_replay_batch(started_at=T0, modes=("fleet",), window_runs=10)
    # 78 real seconds paused in the baseline: 78 simulated minutes at 60x.
    _pause(fleet, at_s=2.0, real_s=78.0)
    comparison = outage_comparison(batch=group_replays([fleet])[0])
    figure = json.loads(comparison.modes[0].figure)
    bands = [s for s in figure["layout"]["shapes"] if s.get("fillcolor") == OUTAGE_FILL]
    assert bands
    for band in bands:
        assert band["x0"] == pytest.approx(4.0)
        assert band["x1"] == pytest.approx(26.0)
    # Nothing is drawn out past the story's 32 minutes.
    assert figure["layout"]["xaxis"]["range"][1] < 33


def test_story_seconds_leave_out_the_pauses_between_two_moments() -> None:
    clock = ReplayClock.from_record(speed=60.0, pauses=[[T0.timestamp() + 10, T0.timestamp() + 70]])
    later = T0 + timedelta(seconds=100)
    assert clock.story_seconds(T0, later) == pytest.approx(40 * 60)
    assert clock.story_seconds(T0 + timedelta(seconds=5), T0 + timedelta(seconds=8)) == 180
    # Inside the pause the clock stands still.
    inside = T0 + timedelta(seconds=40)
    assert clock.story_seconds(T0, inside) == pytest.approx(10 * 60)


def test_minutes_since_a_replay_began_are_the_story_s() -> None:
    (none,) = make_replay_batch(started_at=T0, modes=("none",), window_runs=4)
    _pause(none, at_s=1.0, real_s=30.0)
    assert minutes_since(none, none.outage_started_at) == pytest.approx(4.0)
    assert minutes_since(none, none.outage_ended_at) == pytest.approx(26.0)
