"""Fixtures of the replay tests that play against a live control plane."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest
import redis
from django.db import connection

from breakers.fleet_service import fleet_state, fleet_tick


@pytest.fixture
def ticking(redis_client: redis.Redis) -> Iterator[None]:
    """What Celery beat does in production: the fleet tick, here every 50 ms."""
    fleet_state()  # rebuild the flushed fleet store now, before anything else touches it
    stop = threading.Event()

    def tick() -> None:
        while not stop.wait(0.05):
            fleet_tick()
        connection.close()

    thread = threading.Thread(target=tick, daemon=True)
    thread.start()
    yield
    stop.set()
    thread.join(timeout=5)
