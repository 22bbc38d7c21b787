"""The outage replay's clock: simulated seconds that never run past a run that is due, and that
stop while the control plane is behind (``governor``)."""

from __future__ import annotations

import logging
import math
import threading
import time
from datetime import UTC, datetime

logger = logging.getLogger(__name__)

__all__ = ("CONTROL_PLANE", "RUNS", "SimClock")

# Who may hold the replay's clock stopped: the control plane falling behind (``Governor``) and
# a run that is due but has not got to run yet (``SimClock`` itself).
CONTROL_PLANE = "control plane"
RUNS = "runs"
# A due run holding the clock longer than this (real seconds) is taken to be stuck, not busy:
# the clock stops waiting for it until it sleeps on the clock again.
RUN_HOLD_LIMIT_S = 10.0
# Simulated seconds within which a reading is the moment a run is due (float round trips).
_SAME_MOMENT_S = 1e-6
_MIN_NAP_S = 0.0002


class SimClock:
    """Simulated seconds since the replay began: real elapsed time x speed, minus pauses.

    The clock never runs past a run that is due: each thread that sleeps on it is at the moment
    it last asked to wake, and until it asks again (or ``leave``s) the clock holds there, however
    long the thread waited for the GIL or a core (docs/adr/0157-the-replay-s-clock-never-runs.md).
    It also stops while the control plane is behind (``pause()``/``resume()``, ``Governor``).
    ``_pauses`` and ``paused_s`` are the stops, overlapping holds merged; ``held_s`` is each
    reason's own total.
    """

    def __init__(self, speed: float) -> None:
        self.speed = speed
        self.origin = time.monotonic()
        self.wall_origin = time.time() - (time.monotonic() - self.origin)
        # (stopped since, real seconds stopped before), replaced whole so that ``now`` reads a
        # consistent pair without the lock.
        self._state: tuple[float | None, float] = (None, 0.0)
        self._pauses: list[tuple[float, float]] = []  # (paused at, resumed at), monotonic
        self._holders: dict[str, float] = {}  # reason -> held since (monotonic)
        self.held_s: dict[str, float] = {}  # real seconds each reason held the clock
        self._resumed = threading.Condition()
        # Simulated moment each thread that sleeps on the clock is at, and the earliest of them.
        self._at: dict[int, float] = {}
        self._floor = math.inf
        self._held_at = 0.0  # the moment the clock is held at for runs

    @property
    def paused_s(self) -> float:
        """Real seconds the clock has been stopped, the current stop not included."""
        return self._state[1]

    @property
    def _paused_at(self) -> float | None:
        return self._state[0]

    def wall_time_of(self, sim_s: float) -> datetime:
        """When (wall clock) the replay's clock showed ``sim_s``, pauses included; for a
        moment already passed."""
        real = sim_s / self.speed  # running seconds since the origin
        # A stop that began at ``sim_s`` itself (a hold for the runs due then) counts as after
        # it, whatever the last bit of the float sums says: else the moment maps to the stop's
        # end, and the runs started during it fall on the wrong side of an outage boundary.
        same = _SAME_MOMENT_S / self.speed
        at = self.origin
        for paused, resumed in self._pauses:
            if paused - at >= real - same:
                break
            real -= paused - at
            at = resumed
        return datetime.fromtimestamp(self.wall_of(at + real), UTC)

    def wall_of(self, monotonic_s: float) -> float:
        """The Unix time of a moment of ``time.monotonic``."""
        return self.wall_origin + (monotonic_s - self.origin)

    def now(self) -> float:
        paused_at, paused_s = self._state
        real = (time.monotonic() if paused_at is None else paused_at) - self.origin
        sim = (real - paused_s) * self.speed
        if sim < self._floor - _SAME_MOMENT_S:
            return sim
        with self._resumed:
            return self._catch_up()

    def _catch_up(self) -> float:
        """The clock's reading; once it has reached a run that is due, it has been held there
        since that moment (nobody read a later time), until every run due then sleeps again or
        leaves. Called with the lock held."""
        floor = self._floor
        paused_at, paused_s = self._state
        real = (time.monotonic() if paused_at is None else paused_at) - self.origin
        if (sim := (real - paused_s) * self.speed) < floor - _SAME_MOMENT_S:
            return sim
        since = self._holders.get(RUNS)
        if since is None:
            since = self.origin + paused_s + floor / self.speed
            self._holders[RUNS] = since
            self._held_at = floor
            self._state = (since if paused_at is None else min(paused_at, since), paused_s)
        elif time.monotonic() - since > RUN_HOLD_LIMIT_S:
            stuck = [thread for thread, at in self._at.items() if at <= floor]
            logger.warning("the replay's clock stops waiting for %d stuck run(s)", len(stuck))
            for thread in stuck:
                del self._at[thread]
            self._moved_on()
            return self._catch_up()
        return floor

    def _moved_on(self) -> None:
        """A thread moved its moment on or left: the clock may run up to the next earliest one.
        Called with the lock held."""
        self._floor = min(self._at.values(), default=math.inf)
        if RUNS in self._holders and self._floor > self._held_at:
            self._release(RUNS)

    def sleep(self, sim_seconds: float) -> None:
        self.sleep_until(self.now() + sim_seconds)

    def sleep_until(self, sim_at: float) -> None:
        thread = threading.get_ident()
        with self._resumed:
            before = self._at.get(thread)
            # A moment already passed (a thread that started late) holds nothing back.
            at = self._at[thread] = max(sim_at, self._catch_up())
            if before is not None and before <= self._floor:
                self._moved_on()
            elif at < self._floor:
                self._floor = at
        while (left := sim_at - self.now()) > 0:
            if self._stopped_for_more_than_runs():
                with self._resumed:
                    self._resumed.wait_for(
                        lambda: not self._stopped_for_more_than_runs(), timeout=1.0
                    )
            else:
                # Held for runs, it runs again within milliseconds: a nap, not a wake-up of
                # every waiting thread at each release.
                time.sleep(max(left / self.speed, _MIN_NAP_S))

    def _stopped_for_more_than_runs(self) -> bool:
        return len(self._holders) > (RUNS in self._holders)

    def leave(self) -> None:
        """This thread sleeps on the clock no more (its run ended): the clock stops waiting
        for it."""
        with self._resumed:
            if self._at.pop(threading.get_ident(), None) is not None:
                self._moved_on()

    def pause(self, reason: str = CONTROL_PLANE) -> None:
        with self._resumed:
            self._catch_up()
            if reason in self._holders:
                return
            now = time.monotonic()
            self._holders[reason] = now
            paused_at, paused_s = self._state
            if paused_at is None:
                self._state = (now, paused_s)

    def resume(self, reason: str = CONTROL_PLANE) -> None:
        with self._resumed:
            self._catch_up()
            self._release(reason)

    def _release(self, reason: str) -> None:
        since = self._holders.pop(reason, None)
        if since is None:
            return
        now = time.monotonic()
        self.held_s[reason] = self.held_s.get(reason, 0.0) + now - since
        paused_at, paused_s = self._state
        if not self._holders and paused_at is not None:
            start = paused_at
            if self._pauses and self._pauses[-1][1] >= paused_at:  # adjoining: one stop
                start = self._pauses.pop()[0]
            self._pauses.append((start, now))
            self._state = (None, paused_s + now - paused_at)
        if reason != RUNS:  # threads wait on the condition only for the other holds
            self._resumed.notify_all()
