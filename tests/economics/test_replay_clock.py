"""The replay's clock: a simulated moment maps back to the wall clock, pauses included, so the
database's outage window (the pages) holds the same runs as the replay's table; the clock never
runs past a run that is due (a run starved of the CPU) and stops while the control plane is
behind; and the pages measure a replay's runs on that clock, its pauses taken out."""

from __future__ import annotations

import sys
import threading
import time
from datetime import UTC, datetime

import pytest

from breakers.replay.clock import CONTROL_PLANE, RUNS, SimClock
from breakers.replay.outage import ReplayClock
from runs.models import OutageReplay


def test_a_simulated_moment_maps_to_its_wall_time_around_pauses() -> None:
    clock = SimClock(speed=60.0)
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


def test_a_moment_the_clock_held_at_maps_to_the_start_of_the_hold() -> None:
    # The clock reached 1380 s (the outage's end) and held there for the runs due then: the
    # outage ends when the hold began, not when it ended, or a run that started during the hold
    # falls inside the outage on the pages. These floats made the sums miss by one ulp.
    clock = SimClock(speed=150.0)
    clock.origin, clock.wall_origin = 65194.13797500402, 1_000.0
    first = (65198.08370452619, 65198.17847025338)
    held_from = clock.origin + (first[1] - first[0]) + 1380.0 / clock.speed  # as _catch_up does
    clock._pauses = [first, (held_from, held_from + 0.003)]

    ends = clock.wall_time_of(1380.0).timestamp()
    assert ends == pytest.approx(1_000.0 + held_from - clock.origin, abs=1e-6)


def test_overlapping_holds_stop_the_clock_once_until_the_last_lets_go() -> None:
    clock = SimClock(speed=60.0)
    clock.pause()  # the control plane is behind
    clock.pause("other")
    clock.resume()
    assert clock._paused_at is not None  # still held
    stopped = clock.now()
    time.sleep(0.02)
    assert clock.now() == stopped
    clock.resume("other")
    assert clock._paused_at is None
    assert len(clock._pauses) == 1
    (paused, resumed) = clock._pauses[0]
    assert clock.paused_s == resumed - paused >= 0.02
    assert clock.held_s[CONTROL_PLANE] <= clock.paused_s  # the first to hold, counted once
    assert clock.held_s["other"] <= clock.paused_s


def _hog_the_gil(seconds: float) -> None:
    """Pure Python work that keeps the GIL: no other thread runs until it ends."""
    switch = sys.getswitchinterval()
    sys.setswitchinterval(10.0)  # no forced hand-over before the loop ends
    try:
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            pass
    finally:
        sys.setswitchinterval(switch)


def test_a_run_starved_of_the_cpu_finds_the_clock_where_it_was_due() -> None:
    """A run due at 6 simulated seconds (0.1 s real at 60x) cannot wake while another thread
    holds the GIL for 0.5 s: the clock holds at 6 s for it instead of running on to ~30 s, and
    runs again once the run sleeps on it again."""
    clock = SimClock(speed=60.0)
    seen: list[float] = []

    def run() -> None:
        clock.sleep_until(0.0)
        clock.sleep_until(6.0)
        seen.append(clock.now())  # what the run reads when it finally runs
        _busy(0.05)  # its own work: the clock waits for it too
        seen.append(clock.now())
        clock.sleep(6.0)
        seen.append(clock.now())
        clock.leave()

    thread = threading.Thread(target=run)
    thread.start()
    time.sleep(0.05)
    _hog_the_gil(0.5)
    thread.join(timeout=5)
    assert seen[0] == seen[1] == 6.0
    assert 12.0 <= seen[2] < 12.0 + 0.2 * 60  # then 6 s more, late by its wake-up at most
    assert clock.held_s[RUNS] >= 0.4  # the hog's time (less the 0.1 s before the run was due)
    assert clock.paused_s >= 0.4
    assert clock.now() > seen[2]  # nobody is due: the clock runs


def test_the_clock_runs_past_runs_that_are_asleep_or_gone() -> None:
    clock = SimClock(speed=60.0)
    asleep = threading.Thread(target=clock.sleep_until, args=(600.0,), daemon=True)
    asleep.start()
    time.sleep(0.1)
    assert 5.0 <= clock.now() < 600.0  # ran on: the sleeping run is not due
    clock.sleep_until(clock.now() + 1.0)  # this thread is due now, then leaves
    clock.leave()
    before = clock.now()
    time.sleep(0.05)
    assert clock.now() >= before + 2.0


def _busy(seconds: float) -> None:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        pass
