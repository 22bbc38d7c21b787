"""GET /api/v1/fleet?wait=N: the fleet state pushed to agents by long-poll, and the fallback.

The SDK's own client against gunicorn (gthread). Polling is set so slow (an hour) that only the
long-poll can explain a worker seeing another worker's opening within the test.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import redis
from django.test import Client

from breaker_panel import ToolFailure
from breaker_panel.client import ControlPlane, PlaneConfig
from breakers import fleet_service
from breakers.fleet_api.long_poll import FleetWatch
from runs.models import AgentToken
from scripts.testing.processes import WebServerProcess
from tests.fleet.support import bound_token

TOOLS: list[dict[str, Any]] = [
    {"type": "function", "function": {"name": "web_search"}},
    {"type": "function", "function": {"name": "calculator"}},
]
AN_HOUR = 3600.0


@pytest.fixture(scope="module")
def pushing_server(django_db_setup: None) -> Iterator[WebServerProcess]:
    with WebServerProcess(workers=1, threads=8) as server:
        yield server.start(BREAKER_FLEET_MAX_WAITERS="4")


@pytest.fixture(scope="module")
def polling_server(django_db_setup: None) -> Iterator[WebServerProcess]:
    with WebServerProcess(workers=1, threads=4) as server:
        yield server.start(BREAKER_FLEET_WAIT_MAX_SECONDS="0")


def eventually(condition: Callable[[], bool], what: str, timeout: float = 15) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.005)
    raise AssertionError(f"timed out after {timeout:g} s waiting for {what}")


def names(tools: list[dict[str, Any]]) -> list[str]:
    return [tool["function"]["name"] for tool in tools]


def _open_from_two_workers(url: str) -> None:
    for worker, failures in (("worker-a", 3), ("worker-c", 2)):
        plane = ControlPlane(
            url, token=bound_token(worker), worker_id=worker, config=PlaneConfig(fleet_wait=0)
        )
        run = plane.start_run(agent="research", step_budget=20)
        for _ in range(failures):
            run.record_failure("web_search", ToolFailure("503 from vendor", retryable=True))
        assert plane.close()


@pytest.mark.django_db(transaction=True)
def test_an_opening_is_pushed_to_a_waiting_worker(
    pushing_server: WebServerProcess, fleet_redis: redis.Redis
) -> None:
    token = AgentToken.issue(name="agents")[1]
    plane_b = ControlPlane(
        pushing_server.url,
        token=token,
        worker_id="worker-b",
        config=PlaneConfig(fleet_poll_interval=AN_HOUR, fleet_wait=20),
    )
    try:
        run_b = plane_b.start_run(agent="research", step_budget=20)
        assert plane_b.flush()
        eventually(lambda: plane_b.fleet_sync.server_waits, "B's first long-poll to be held")
        assert names(run_b.available(TOOLS)) == ["web_search", "calculator"]
        _open_from_two_workers(pushing_server.url)
        eventually(lambda: names(run_b.available(TOOLS)) == ["calculator"], "B to drop the tool")
        assert run_b.removals()["web_search"].scope == "fleet"
    finally:
        plane_b.close()


@pytest.mark.django_db(transaction=True)
def test_a_server_that_does_not_hold_requests_is_polled(
    polling_server: WebServerProcess, fleet_redis: redis.Redis
) -> None:
    token = AgentToken.issue(name="agents")[1]
    plane_b = ControlPlane(
        polling_server.url,
        token=token,
        worker_id="worker-b",
        config=PlaneConfig(fleet_poll_interval=0.05, fleet_wait=20),
    )
    try:
        run_b = plane_b.start_run(agent="research", step_budget=20)
        eventually(lambda: plane_b.stats.fleet_polls >= 2, "B to poll")
        assert not plane_b.fleet_sync.server_waits
        assert plane_b.fleet_sync.next_poll_delay() == 0.05
        _open_from_two_workers(polling_server.url)
        eventually(lambda: names(run_b.available(TOOLS)) == ["calculator"], "B to drop the tool")
    finally:
        plane_b.close()


def test_a_server_process_holds_at_most_max_waiters() -> None:
    etag = ["v1"]
    watch = FleetWatch(lambda: (etag[0], etag[0]), interval=0.001)
    results: list[bool | None] = []

    def wait() -> None:
        results.append(watch.wait_for_change("v1", timeout=30, max_waiters=2))

    waiters = [threading.Thread(target=wait) for _ in range(2)]
    for thread in waiters:
        thread.start()
    eventually(lambda: watch._waiters == 2, "two held requests")
    assert watch.wait_for_change("v1", timeout=30, max_waiters=2) is None  # the third: at once
    etag[0] = "v2"
    for thread in waiters:
        thread.join(timeout=30)
    assert results == [True, True]
    # What the watcher read comes with the wake-up, for requests that still have an old ETag.
    assert watch.latest("v1") in ("v2", None) and watch.latest("v2") is None
    assert watch.wait_for_change("v1", timeout=0, max_waiters=2) is False or not watch._waiters


def test_an_announced_change_wakes_the_waiters_before_the_next_poll(
    redis_client: redis.Redis,
) -> None:
    # Polling once an hour: only the store's announcement (Redis pub/sub, which every server
    # process's watcher hears) can wake the waiter within the test.
    store = fleet_service.fleet_store()
    etag = ["v1"]
    watch = FleetWatch(
        lambda: (etag[0], f"state {etag[0]}"),
        interval=AN_HOUR,
        subscribe=store.subscribe_to_changes,
    )
    results: list[bool | None] = []
    waiter = threading.Thread(
        target=lambda: results.append(watch.wait_for_change("v1", timeout=60, max_waiters=2))
    )
    waiter.start()
    eventually(lambda: watch._etag == "v1", "the watcher's first read, after it subscribed")
    etag[0] = "v2"
    store.announce_change()
    waiter.join(timeout=60)
    assert results == [True]
    assert watch.latest("v1") in ("state v2", None)  # None once the watcher has stopped


def test_a_wait_that_has_run_out_answers_false() -> None:
    watch = FleetWatch(lambda: ("v1", None), interval=0.001)
    assert watch.wait_for_change("v1", timeout=0.01, max_waiters=1) is False


@pytest.mark.django_db
@pytest.mark.parametrize("wait", ["abc", "-1", "nan", "99999"])
def test_a_bad_wait_is_refused_naming_the_field(client: Client, wait: str) -> None:
    token = AgentToken.issue(name="agents")[1]
    response = client.get(
        f"/api/v1/fleet?wait={wait}", headers={"Authorization": f"Bearer {token}"}
    )
    assert response.status_code == 422
    assert "wait" in response.content.decode()


@pytest.mark.django_db(transaction=True)
def test_closing_a_plane_cuts_its_held_request(
    pushing_server: WebServerProcess, fleet_redis: redis.Redis
) -> None:
    token = AgentToken.issue(name="agents")[1]
    plane = ControlPlane(
        pushing_server.url,
        token=token,
        worker_id="worker-d",
        config=PlaneConfig(fleet_poll_interval=AN_HOUR),
    )
    eventually(
        lambda: plane.transport.held is not None and plane.fleet_sync.server_waits,
        "a held long-poll",
    )
    plane.close()
    # Held for up to 20 s otherwise. close() joins only for what is left of its timeout, so the
    # cut thread may still be unwinding when it returns: it must end well before the hold would.
    eventually(
        lambda: not any(thread.is_alive() for thread in plane.threads()),
        "the held request to be cut",
        timeout=10,
    )
