"""Long-poll for ``GET /api/v1/fleet?wait=N``: one watcher thread per server process.

A waiting request sleeps on a condition. While anyone waits, a single daemon thread reads the
fleet's ETag from Redis every ``interval`` seconds and wakes every waiter when it changes, so the
Redis load does not grow with the number of waiting agents
(docs/adr/0083-one-watcher-thread-per-server-process.md). With ``subscribe``, the thread also
listens for the store's change announcements (Redis pub/sub) and reads the ETag at once when one
arrives, in every server process; the poll stays as a fallback.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

import redis

__all__ = ("FleetWatch",)

logger = logging.getLogger("breakers.fleet_api.long_poll")


class FleetWatch[T]:
    """Wakes waiters when ``read()`` returns a new ETag; ``latest()`` is what came with it."""

    def __init__(
        self,
        read: Callable[[], tuple[str, T]],
        *,
        interval: float = 0.025,
        subscribe: Callable[[], redis.client.PubSub] | None = None,
    ) -> None:
        self._read = read
        self._value: T | None = None
        self._interval = interval
        self._subscribe = subscribe
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
        pubsub = None
        try:
            while True:
                with self._changed:
                    if not self._waiters:
                        self._watching, self._etag, self._value = False, None, None
                        return
                if pubsub is None and self._subscribe is not None:
                    pubsub = self._listen()
                try:
                    etag, value = self._read()
                except redis.RedisError as exc:
                    # Waiters time out and answer from the request thread, which reports it.
                    logger.warning("fleet watch cannot read Redis: %s", exc)
                    time.sleep(max(self._interval, 0.5))
                    continue
                with self._changed:
                    if etag != self._etag:
                        self._etag, self._value = etag, value
                        self._changed.notify_all()
                pubsub = self._pause(pubsub)
        finally:
            if pubsub is not None:
                pubsub.close()

    def latest(self, etag: str) -> T | None:
        """What the watcher read with its current ETag, if that differs from ``etag`` (None
        when it does not, or when nobody is being watched for)."""
        with self._changed:
            if self._etag is None or self._etag == etag:
                return None
            return self._value

    def _listen(self) -> redis.client.PubSub | None:
        assert self._subscribe is not None
        try:
            return self._subscribe()
        except redis.RedisError as exc:
            logger.warning("fleet watch cannot subscribe, polling only: %s", exc)
            return None

    def _pause(self, pubsub: redis.client.PubSub | None) -> redis.client.PubSub | None:
        """Until the next poll, or less if a change is announced; the subscription to keep."""
        if pubsub is None:
            time.sleep(self._interval)
            return None
        try:
            if pubsub.get_message(timeout=self._interval) is not None:
                while pubsub.get_message(timeout=0) is not None:
                    pass  # one read of the ETag answers every announcement so far
        except redis.RedisError as exc:
            logger.warning("fleet watch lost its subscription, polling: %s", exc)
            pubsub.close()
            return None
        return pubsub
