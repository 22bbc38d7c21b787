"""The outage replay's governor: it stops the replay's clock while the control plane is behind
the agents, so a slow machine slows the story down instead of changing its figures."""

from __future__ import annotations

import threading
import time

from breaker_panel import ControlPlane
from breakers.replay.clock import SimClock

__all__ = ("Governor",)


class Governor:
    """Pauses the replay's clock while the control plane is behind the agents: a worker's batch
    unanswered for longer than ``lag_s`` (real seconds), more than ``high`` events waiting, or
    (with ``push``) a worker still without a fleet change another has heard of; resumes once
    every batch is answered, at most ``low`` events wait and every worker has the newest fleet
    state (docs/adr/0162-a-held-moment-maps-to-the.md).

    It reads the SDK sender's in-flight count and acknowledged-batch counter: a replay of the
    product, in the product's repository, may look at its own client's internals.
    """

    def __init__(
        self,
        clock: SimClock,
        planes: list[ControlPlane],
        *,
        high: int,
        low: int,
        lag_s: float,
        push: bool = False,
    ):
        self.clock, self.planes, self.high, self.low, self.lag_s = clock, planes, high, low, lag_s
        self.push = push
        self.pauses = 0
        self._since: dict[int, tuple[int, float]] = {}  # plane -> (acknowledged, in flight since)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="replay-governor", daemon=True)

    def __enter__(self) -> Governor:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
        self.clock.resume()

    def _oldest_unanswered(self, now: float) -> float:
        """Real seconds the oldest unanswered batch of any worker has been in flight."""
        oldest = 0.0
        for index, plane in enumerate(self.planes):
            acknowledged = plane.stats.sent_batches
            if not plane._in_flight:
                self._since.pop(index, None)
                continue
            seen = self._since.get(index)
            if seen is None or seen[0] != acknowledged:
                self._since[index] = seen = (acknowledged, now)
            oldest = max(oldest, now - seen[1])
        return oldest

    def _unheard(self) -> bool:
        """A worker has not yet got a fleet change that another has (from its ingest reply or
        its long-poll): pushed in real milliseconds, which at 60x are simulated seconds."""
        if not self.push:
            return False
        versions = [plane.fleet_sync.version for plane in self.planes]
        return min(versions) < max(versions)

    def _run(self) -> None:
        paused = False
        while not self._stop.wait(0.005):
            now = time.monotonic()
            backlog = max(plane.pending() for plane in self.planes)
            unheard = self._unheard()
            behind = self._oldest_unanswered(now) > self.lag_s or backlog > self.high or unheard
            if not paused and behind:
                self.clock.pause()
                self.pauses += 1
                paused = True
            elif (
                paused
                and not unheard
                and not any(p._in_flight for p in self.planes)
                and backlog <= self.low
            ):
                self.clock.resume()
                paused = False
