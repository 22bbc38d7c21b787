"""Several agent workers, several threads each, hammer one tool through two web processes.

gunicorn runs the control plane in two processes (four threads each) on the test database; the
fleet state they share lives only in Redis. The breaker must open exactly once when two workers
fail together, and never for one worker failing alone, however hard it hammers.
"""

from __future__ import annotations

import itertools
import json
import threading
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest
import redis

from breakers.fleet_service import fleet_store
from breakers.models import FleetTransition, Incident, Tool
from runs.models import AgentToken, ToolCall
from scripts.testing.processes import WebServerProcess
from tests.fleet.support import run_started, tool_call

pytestmark = pytest.mark.django_db(transaction=True)
THREADS_PER_WORKER = 4
CALLS_PER_THREAD = 8
_runs = itertools.count()


@pytest.fixture(scope="module")
def web_server(django_db_setup: None) -> Iterator[WebServerProcess]:
    with WebServerProcess(workers=2, threads=4) as server:
        yield server.start()


def post(url: str, token: str, body: dict[str, Any]) -> dict[str, Any]:
    request = urllib.request.Request(
        url + "/api/v1/events",
        data=json.dumps(body).encode(),
        headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
        method="POST",
    )
    with urllib.request.urlopen(request, timeout=20) as response:
        result: dict[str, Any] = json.loads(response.read())
    return result


def hammer(server: WebServerProcess, workers: list[str], tool: str) -> list[str]:
    """Every thread starts a run, then reports its failures one request at a time; each worker
    has its own token, bound to it (so each counts once in the default token quorum)."""
    tokens = {w: AgentToken.issue(name=f"hammer {w}", worker_id=w)[1] for w in workers}
    errors: list[str] = []
    barrier = threading.Barrier(len(workers) * THREADS_PER_WORKER)

    def agent(worker: str) -> None:
        run_id = f"r-{worker}-{next(_runs)}"
        token = tokens[worker]
        try:
            post(server.url, token, {"worker_id": worker, "events": [run_started(run_id)]})
            barrier.wait(timeout=30)
            for _ in range(CALLS_PER_THREAD):
                event = tool_call(run_id, tool, "retryable")
                reply = post(server.url, token, {"worker_id": worker, "events": [event]})
                if reply["accepted"] != 1:
                    errors.append(repr(reply))
        except Exception as exc:  # noqa: BLE001 - reported by the test
            errors.append(f"{worker}: {exc!r}")

    threads = [
        threading.Thread(target=agent, args=(worker,))
        for worker in workers
        for _ in range(THREADS_PER_WORKER)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    return errors


@pytest.fixture
def fleet(transactional_db: None, fleet_redis: redis.Redis) -> None:
    """A fresh database and fleet store."""


def test_two_workers_hammering_one_tool_open_it_exactly_once(
    web_server: WebServerProcess, fleet: None
) -> None:
    assert hammer(web_server, ["w1", "w2"], "web_search") == []
    calls = 2 * THREADS_PER_WORKER * CALLS_PER_THREAD
    assert ToolCall.objects.filter(tool="web_search").count() == calls
    opening = FleetTransition.objects.get(tool__name="web_search")
    assert (opening.from_state, opening.to_state, opening.seq) == ("closed", "open", 1)
    assert set(opening.cause["workers"]) == {"w1", "w2"}
    assert opening.cause["consecutive"] == 5
    assert Tool.objects.get(name="web_search").state == "open"
    assert Incident.objects.count() == 1
    assert fleet_store().details("web_search").state.seq == 1  # type: ignore[union-attr]


def test_one_worker_alone_never_opens_it(web_server: WebServerProcess, fleet: None) -> None:
    assert hammer(web_server, ["misconfigured"], "web_search") == []
    calls = THREADS_PER_WORKER * CALLS_PER_THREAD
    details = fleet_store().details("web_search")
    assert details.state is not None
    assert (details.state.auto, details.state.consecutive, details.workers) == (
        "closed",
        calls,
        {"misconfigured": calls},
    )
    assert not FleetTransition.objects.exists()
