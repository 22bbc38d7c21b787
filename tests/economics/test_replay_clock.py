"""The replay's clock maps a simulated moment back to the wall clock, pauses included, so the
database's outage window (the pages) holds the same runs as the replay's table."""

from __future__ import annotations

from datetime import UTC, datetime

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
