"""The replay's clock maps a simulated moment back to the wall clock, pauses included, so the
database's outage window (the pages) holds the same runs as the replay's table; and the pages
measure a replay's runs on that clock, its pauses taken out."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from runs.economics import ReplayClock
from runs.models import OutageReplay
from runs.simulation.replay import _SimClock


def test_a_simulated_moment_maps_to_its_wall_time_around_pauses() -> None:
    clock = _SimClock(speed=60.0)
    clock.origin, clock.wall_origin = 100.0, 1_000.0
    clock._pauses = [(101.0, 104.0), (106.0, 107.0)]  # monotonic seconds: paused 3 s, then 1 s

    def wall(sim_s: float) -> float:
        return (clock.wall_time_of(sim_s) - datetime.fromtimestamp(0, UTC)).total_seconds()

    assert wall(30.0) == 1_000.5  # before any pause: sim / speed
    assert wall(60.0) == 1_001.0  # the moment the first pause began
    assert wall(90.0) == 1_004.5  # 0.5 s of running after the first pause
    assert wall(240.0) == 1_008.0  # 1 + 2 + 1 running seconds, around both pauses
    assert wall(300.0) == 1_009.0


def test_a_run_is_measured_on_its_replay_s_clock_without_the_pauses_it_overlapped() -> None:
    pauses = [[1_006.0, 1_007.0], [1_001.0, 1_004.0], "12", [5, "x"], [9, 8]]  # bad ones ignored
    replay = OutageReplay(speed=60.0, pauses=pauses)
    clock = ReplayClock.of(replay)

    def story_s(started: float, real_s: float) -> float:
        return clock.run_seconds(datetime.fromtimestamp(started, UTC), real_s * 1000)

    assert story_s(1_000.0, 0.5) == 30.0  # before any pause: real x speed
    assert story_s(1_000.0, 2.0) == 60.0  # 1 s of its 2 s paused
    assert story_s(1_002.0, 1.0) == 0.0  # entirely inside a pause
    assert story_s(1_000.0, 9.0) == 300.0  # around both: 9 - 3 - 1 running seconds
    assert story_s(1_006.5, 2.5) == 120.0
    # A replay recorded before its pauses were: real x speed, as before.
    assert ReplayClock.of(OutageReplay(speed=60.0)).run_seconds(
        datetime.fromtimestamp(1_000.0, UTC), 2_000
    ) == pytest.approx(120.0)
