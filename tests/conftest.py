"""Fixtures shared by the whole suite. Tests talk to the real Redis and PostgreSQL."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import redis
from django.conf import settings


@pytest.fixture
def redis_client() -> Iterator[redis.Redis]:
    """The Redis database named by REDIS_URL, emptied before and after the test."""
    client = redis.Redis.from_url(
        settings.REDIS_URL,
        socket_timeout=settings.REDIS_SOCKET_TIMEOUT,
        socket_connect_timeout=settings.REDIS_SOCKET_TIMEOUT,
    )
    client.flushdb()
    yield client
    client.flushdb()
    client.close()
