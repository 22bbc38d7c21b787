"""Long-poll for ``GET /api/v1/fleet?wait=N``: one watcher thread per server process.

A waiting request sleeps on a condition. While anyone waits, a single daemon thread reads the
fleet's ETag from Redis every ``interval`` seconds and wakes every waiter when it changes, so the
Redis load does not grow with the number of waiting agents (docs/decisions.md, issue 14).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

import redis

__all__ = ("FleetWatch",)

logger = logging.getLogger("breakers.fleet_watch")


class FleetWatch:
    """Wakes waiters when ``read_etag()`` returns something new."""

    def __init__(self, read_etag: Callable[[], str], *, interval: float = 0.025) -> None:
        self._read_etag = read_etag
        self._interval = interval
        self._changed = threading.Condition()
        self._etag: str | None = None  # the last one read; None while nobody watches
        self._waiters = 0
        self._watching = False

    def wait_for_change(self, etag: str, *, timeout: float, max_waiters: int) -> bool | None:
        """Block until the fleet's ETag is no longer ``etag`` (True) or ``timeout`` passes
        (False); None at once when ``max_waiters`` requests of this process already wait."""
        deadline = time.monotonic() + timeout
        with self._changed:
            if self._waiters >= max_waiters:
                return None
            self._waiters += 1
            if not self._watching:
                self._watching = True
                threading.Thread(target=self._watch, name="fleet-watch", daemon=True).start()
            try:
                while self._etag is None or self._etag == etag:
                    left = deadline - time.monotonic()
                    if left <= 0:
                        return False
                    self._changed.wait(left)
                return True
            finally:
                self._waiters -= 1

    def _watch(self) -> None:
        while True:
            with self._changed:
                if not self._waiters:
                    self._watching, self._etag = False, None
                    return
            try:
                etag = self._read_etag()
            except redis.RedisError as exc:
                # Waiters time out and answer from the request thread, which reports the error.
                logger.warning("fleet watch cannot read Redis: %s", exc)
                time.sleep(max(self._interval, 0.5))
                continue
            with self._changed:
                if etag != self._etag:
                    self._etag = etag
                    self._changed.notify_all()
            time.sleep(self._interval)
