"""End to end: two agent workers with the real SDK client against the control plane (gunicorn).

One worker's failures (with another's) open the fleet breaker; the other worker's runs drop the
tool from their toolsets through the client's fleet poll. An operator's force close brings the
tool back for new runs only: a tool removed from a run stays removed for that run.
"""

from __future__ import annotations

import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest
import redis

from breaker_panel import ToolFailure
from breaker_panel.client import ControlPlane
from runs.models import AgentToken
from scripts.testing.processes import WebServerProcess
from tests.fleet.support import bound_token
from tests.waiting import wait_for

pytestmark = pytest.mark.django_db(transaction=True)
TOOLS: list[dict[str, Any]] = [
    {"type": "function", "function": {"name": "web_search"}},
    {"type": "function", "function": {"name": "calculator"}},
]


@pytest.fixture(scope="module")
def web_server(django_db_setup: None) -> Iterator[WebServerProcess]:
    with WebServerProcess(workers=2, threads=4) as server:
        yield server.start()


def names(tools: list[dict[str, Any]]) -> list[str]:
    return [tool["function"]["name"] for tool in tools]


def test_a_fleet_opening_reaches_another_workers_runs(
    web_server: WebServerProcess, transactional_db: None, fleet_redis: redis.Redis
) -> None:
    operator_token = AgentToken.issue(name="ops", is_operator=True)[1]
    # One token per worker, bound to it: the default quorum counts tokens.
    plane_a = ControlPlane(web_server.url, token=bound_token("worker-a"), worker_id="worker-a")
    plane_b = ControlPlane(web_server.url, token=bound_token("worker-b"), worker_id="worker-b")
    plane_c = ControlPlane(web_server.url, token=bound_token("worker-c"), worker_id="worker-c")
    try:
        run_a = plane_a.start_run(agent="research", step_budget=20)
        run_c = plane_c.start_run(agent="research", step_budget=20)
        run_b = plane_b.start_run(agent="research", step_budget=20)
        for _ in range(3):
            run_c.record_failure("web_search", ToolFailure("503 from vendor", retryable=True))
        assert plane_c.flush()
        for _ in range(2):
            run_a.record_failure("web_search", ToolFailure("503 from vendor", retryable=True))
        assert plane_a.flush()
        # Neither A nor C had five failures of its own: the fleet removed it (A learnt it
        # from the reply to its own batch).
        assert names(run_a.available(TOOLS)) == ["calculator"]
        assert run_a.removals()["web_search"].scope == "fleet"
        assert plane_a.worker.state("web_search") == "closed"

        wait_for(lambda: names(run_b.available(TOOLS)) == ["calculator"], "B to drop the tool")
        notice = run_b.notice()
        assert notice is not None and "web_search" in notice

        request = urllib.request.Request(
            web_server.url + "/api/v1/tools/web_search/force-close",
            data=b'{"reason": "vendor says it is fixed"}',
            headers={
                "Authorization": f"Bearer {operator_token}",
                "Content-Type": "application/json",
            },
            method="POST",
        )
        with urllib.request.urlopen(request, timeout=10) as response:
            assert response.status == 200
        new_run = plane_b.start_run(agent="research", step_budget=20)
        wait_for(
            lambda: plane_b.fleet.snapshot()["web_search"].state == "forced_closed",
            "B to see the force close",
        )
        assert names(new_run.available(TOOLS)) == ["web_search", "calculator"]
        assert names(run_b.available(TOOLS)) == ["calculator"]  # removed for that run for good
    finally:
        for plane in (plane_a, plane_b, plane_c):
            plane.close()
