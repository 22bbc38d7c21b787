"""Fixtures for the dashboard's view tests: users with and without the operators group, and
this session's Redis with the fleet's keys cleared."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import redis
from django.contrib.auth.models import User
from django.test import Client

from breakers.access.operators import operators_group
from breakers.fleet_service import fleet_store


@pytest.fixture
def viewer(db: None) -> User:
    return User.objects.create_user("viewer", password="viewer-pass-123")


@pytest.fixture
def operator(db: None) -> User:
    user = User.objects.create_user("operator", password="operator-pass-123")
    user.groups.add(operators_group())
    return user


@pytest.fixture
def viewer_client(client: Client, viewer: User) -> Client:
    client.force_login(viewer)
    return client


@pytest.fixture
def operator_client(client: Client, operator: User) -> Client:
    client.force_login(operator)
    return client


def delete_fleet_keys(client: redis.Redis) -> None:
    keys = list(client.scan_iter(match="bp:*", count=1000))
    if keys:
        client.delete(*keys)


@pytest.fixture
def fleet_redis(db: None) -> Iterator[redis.Redis]:
    """The fleet's keys (``bp:*``) deleted before and after the test (not FLUSHDB: a Celery
    broker may share the database), and the generation marked, as a running fleet has it."""
    client = fleet_store().client
    delete_fleet_keys(client)
    fleet_store().start_generation()
    yield client
    delete_fleet_keys(client)
