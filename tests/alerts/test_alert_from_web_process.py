"""An alert made by a web process (gunicorn, as deployed) is handed to Celery at once.

A web process never imports ``breakers.tasks``, so the delivery task is not in its Celery
registry; the alert must still reach the worker without waiting for the sweep (no beat runs
here, so only the immediate hand-off can deliver it).
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from breaker_panel import ToolFailure
from breaker_panel.client import ControlPlane
from breakers.models import Alert, AlertChannel, AlertKind, AlertState
from runs.models import AgentToken
from scripts.testing.fake_slack import FakeSlackServer
from scripts.testing.processes import CeleryWorkerProcess, WebServerProcess
from tests.waiting import wait_for

pytestmark = [pytest.mark.celery, pytest.mark.django_db(transaction=True)]
DOWN = ToolFailure("503 from vendor", retryable=True)


@pytest.fixture(scope="module")
def web_server(django_db_setup: None) -> Iterator[WebServerProcess]:
    with WebServerProcess(workers=1, threads=4) as server:
        yield server.start()


def test_a_fleet_opening_in_a_web_process_reaches_slack_without_the_sweep(
    web_server: WebServerProcess,
    celery_worker: CeleryWorkerProcess,
    channel: AlertChannel,
    slack_server: FakeSlackServer,
) -> None:
    # One token per worker, bound to it: the default quorum counts tokens.
    planes = [
        ControlPlane(
            web_server.url,
            token=AgentToken.issue(name=f"agent w{i}", worker_id=f"w{i}")[1],
            worker_id=f"w{i}",
        )
        for i in (1, 2)
    ]
    try:
        for plane, failures in zip(planes, (3, 2), strict=True):
            run = plane.start_run(agent="research", step_budget=20)
            for _ in range(failures):
                run.record_failure("web_search", DOWN)
            assert plane.flush()
    finally:
        for plane in planes:
            plane.close()
    opened = Alert.objects.get(kind=AlertKind.OPENED)
    wait_for(
        lambda: Alert.objects.get(pk=opened.pk).state == AlertState.SENT,
        "the opened alert to reach Slack",
    )
    assert any("web_search" in str(request.json) for request in slack_server.requests)
