"""A replay clock for tests: simulated time that moves only when the replay sleeps."""

from __future__ import annotations

from breakers.replay.clock import SimClock


class SteppedClock(SimClock):
    """No real waiting and no timing: ``sleep`` adds to ``now``."""

    def __init__(self) -> None:
        super().__init__(speed=1.0)
        self.at = 0.0

    def now(self) -> float:
        return self.at

    def sleep(self, sim_seconds: float) -> None:
        self.at += sim_seconds
