"""Fixtures shared by the whole suite. Tests talk to the real Redis and PostgreSQL."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest
import redis
from django.conf import settings

import tests.vendor_server
from breakers.fleet_service import fleet_store
from scripts.testing import processes
from tests.fleet.support import delete_fleet_keys

# The tests' vendors live on loopback: outbound HTTP may reach it here (and in the server
# processes the tests start, which inherit this environment). Production refuses it by default.
os.environ.setdefault("BREAKER_HTTP_ALLOWED_NETWORKS", "127.0.0.0/8,::1/128")


@pytest.fixture(autouse=True, scope="session")
def _loopback_vendors_allowed() -> None:
    """The same allow-list in this process (settings were read before this module)."""
    settings.BREAKER_HTTP_ALLOWED_NETWORKS = os.environ["BREAKER_HTTP_ALLOWED_NETWORKS"].split(",")


# The fake Slack server fixture (``slack_server``) for every test package.
pytest_plugins = ["tests.fakes.fixtures", "tests.fakes.slack_fixtures"]


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


@pytest.fixture
def fleet_redis() -> Iterator[redis.Redis]:
    """This session's Redis with every fleet key (``bp:*``) deleted before and after the test.

    Not FLUSHDB: the Celery broker lives in the same database and its bindings must survive.
    """
    client = fleet_store().client
    delete_fleet_keys(client)
    yield client
    delete_fleet_keys(client)


@pytest.fixture(scope="session")
def celery_worker_process(
    django_db_setup: None,
) -> Iterator[processes.CeleryWorkerProcess]:
    """One real ``celery -A controlplane worker`` for the whole session (see ``celery_worker``)."""
    try:
        processes.database_url_of_test_db()
    except LookupError as exc:
        pytest.skip(str(exc))
    worker = processes.CeleryWorkerProcess(pool="threads", concurrency=4)
    worker.start()
    yield worker
    worker.stop()


@pytest.fixture
def celery_worker(
    celery_worker_process: processes.CeleryWorkerProcess, transactional_db: None
) -> Iterator[processes.CeleryWorkerProcess]:
    """A real Celery worker process consuming this session's broker (REDIS_URL).

    It runs ``celery -A controlplane worker`` (thread pool, 4 threads) with DATABASE_URL set to
    the pytest-django test database and the same REDIS_URL, started once per session after a
    ping answered, and stopped at the end. Tasks are sent the normal way (``task.delay()``);
    wait for their effects by polling the database or Redis with a deadline.

    Using it implies ``transactional_db``: the worker is another process and only sees committed
    rows. The broker's queue bindings are declared again before each test, because tests that
    flush the Redis database (``redis_client``) also delete them; after the test the fixture
    waits (with a deadline) until the queue is empty and the worker idle. Need a second worker
    process (say, to show that two of them cannot both run a job)? Start a
    ``scripts.testing.processes.CeleryWorkerProcess`` in the test and stop it at the end.
    """
    if not celery_worker_process.alive:
        pytest.fail("the session's Celery worker has died:\n" + celery_worker_process.log_tail())
    processes.declare_celery_queues()
    yield celery_worker_process
    # Let the worker finish what the test sent before the tables are emptied for the next one.
    celery_worker_process.wait_idle()


@pytest.fixture
def vendor_server() -> Iterator[tests.vendor_server.VendorServer]:
    """A real local HTTP server standing in for a tool's vendor: ``down()``, ``up()``,
    ``slow()``, and every request it got in ``requests``."""
    with tests.vendor_server.VendorServer() as server:
        yield server


@pytest.fixture
def no_model_requests() -> Iterator[None]:
    """Pydantic AI may not reach a real model: FunctionModel plays it, offline."""
    from pydantic_ai import models

    allowed = models.ALLOW_MODEL_REQUESTS
    models.ALLOW_MODEL_REQUESTS = False
    yield
    models.ALLOW_MODEL_REQUESTS = allowed
