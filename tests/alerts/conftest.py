"""Fixtures for the Slack alert tests.

``slack_server`` (a real local HTTP server playing Slack's webhook endpoint) comes from
``tests.fakes.fixtures``, registered as a plugin by the root conftest.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import redis

from breakers.fleet_service import fleet_store
from breakers.models import AlertChannel
from scripts.testing.fake_slack import FakeSlackServer


def _delete_our_keys(client: redis.Redis) -> None:
    # Fleet state and the Slack rate limiter (bp:slack:rate:*); not FLUSHDB, which would also
    # drop the Celery broker's queue bindings.
    keys = list(client.scan_iter(match="bp:*", count=1000))
    if keys:
        client.delete(*keys)


@pytest.fixture
def fleet_keys() -> Iterator[redis.Redis]:
    """This session's Redis with every fleet and rate-limit key deleted before and after."""
    client = fleet_store().client
    _delete_our_keys(client)
    yield client
    _delete_our_keys(client)


@pytest.fixture
def channel(slack_server: FakeSlackServer, fleet_keys: redis.Redis) -> AlertChannel:
    """One enabled channel whose webhook is the fake Slack server."""
    return AlertChannel.objects.create(name="oncall", webhook_url=slack_server.webhook_url)
