"""The compose stack's processes without containers: gunicorn (production config), two Celery
workers and one beat on PostgreSQL. An outage replay goes through end to end, /readyz is ready,
Slack gets the alerts, and /metrics agrees with the database."""

from __future__ import annotations

import json
import time
import urllib.request
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
from django.db.models import Count
from prometheus_client.parser import text_string_to_metric_families

from breakers.models import Alert, AlertState, FleetTransition, Tool
from breakers.replay.outage import Scenario, play_outage
from runs.models import IngestedEvent, Run, RunStatus, ToolCall
from scripts.testing.fake_slack import FakeSlackServer
from scripts.testing.processes import (
    CeleryBeatProcess,
    CeleryWorkerProcess,
    database_url_of_test_db,
)
from tests.production.servers import ProductionWebServer

pytestmark = [pytest.mark.celery, pytest.mark.django_db(transaction=True)]

SMALL = Scenario(
    runs_in_window=30, baseline_s=60, baseline_runs=4, tail_s=600, tail_runs=20, workers=4
)
SPEED = 150.0


@pytest.fixture
def stack(
    static_root: Path,
    slack_server: FakeSlackServer,
    redis_client: object,
    monkeypatch: pytest.MonkeyPatch,
) -> Iterator[ProductionWebServer]:
    try:
        database_url_of_test_db()
    except LookupError as exc:
        pytest.skip(str(exc))
    # Every process of the stack reads these (child_env in scripts/testing/processes.py copies
    # os.environ).
    monkeypatch.setenv("BREAKER_TICK_SECONDS", "0.2")
    monkeypatch.setenv("BREAKER_TRIAL_LEASE_SECONDS", str(120 / SPEED))
    monkeypatch.setenv("SLACK_MIN_INTERVAL_SECONDS", "0.05")
    monkeypatch.setenv("SLACK_WEBHOOK_URL", slack_server.webhook_url)
    processes: list = []
    try:
        web = ProductionWebServer(workers=2)
        processes.append(web)
        web.start(STATIC_ROOT=str(static_root))
        for _ in range(2):
            worker = CeleryWorkerProcess(pool="threads", concurrency=2)
            processes.append(worker)
            worker.start()
        beat = CeleryBeatProcess()
        processes.append(beat)
        beat.start()
        yield web
    finally:
        for process in reversed(processes):
            process.stop()


def _get(url: str) -> tuple[int, bytes]:
    try:
        with urllib.request.urlopen(url, timeout=10) as reply:
            return reply.status, reply.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


def _wait_ready(web: ProductionWebServer, timeout: float = 60) -> dict:
    deadline = time.monotonic() + timeout
    while True:
        status, body = _get(web.url + "/readyz")
        if status == 200 or time.monotonic() > deadline:
            return {"http_status": status, **json.loads(body)}
        time.sleep(0.2)


def _scrape(web: ProductionWebServer) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    status, body = _get(web.url + "/metrics")
    assert status == 200, body
    samples = {}
    for family in text_string_to_metric_families(body.decode()):
        for sample in family.samples:
            samples[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return samples


def test_a_replay_runs_end_to_end_and_metrics_match_the_database(
    stack: ProductionWebServer, slack_server: FakeSlackServer
) -> None:
    web = stack
    ready = _wait_ready(web)
    assert ready["http_status"] == 200, ready

    [result] = play_outage(modes=["fleet"], scenario=SMALL, speed=SPEED, url=web.url)
    summary = result.figures
    runs = Run.objects.all()
    assert runs.count() == len(SMALL.run_starts()) + summary["recovery_runs"]
    assert not runs.filter(status=RunStatus.RUNNING).exists()
    assert summary["degraded_runs"] > 0

    # The fleet breaker opened during the outage and Celery (probes, alerts) did its part.
    assert FleetTransition.objects.filter(to_state="open").exists()
    deadline = time.monotonic() + 60
    while Alert.objects.exclude(state__in=[AlertState.SENT, AlertState.GROUPED]).exists():
        assert time.monotonic() < deadline, list(Alert.objects.values("state", "last_error"))
        time.sleep(0.2)
    sent = Alert.objects.filter(state=AlertState.SENT).count()
    assert sent > 0 and len(slack_server.requests) >= sent

    samples = _scrape(web)
    by_tool_outcome = Counter(
        {
            (r["tool"], r["outcome"]): r["n"]
            for r in ToolCall.objects.values("tool", "outcome").annotate(n=Count("id"))
        }
    )
    kinds = {"success": "successful", "retryable": "failed", "semantic": "ignored"}
    for (tool, outcome), n in by_tool_outcome.items():
        if outcome == "blocked":
            key = ("resilience4j_circuitbreaker_not_permitted_calls_total", (("name", tool),))
        else:
            key = (
                "resilience4j_circuitbreaker_calls_total",
                (("kind", kinds[outcome]), ("name", tool)),
            )
        assert samples.get(key) == n, (tool, outcome, n, samples.get(key))
    assert samples[("breakerpanel_ingest_events_total", (("result", "accepted"),))] == (
        IngestedEvent.objects.count()
    )
    batches = samples[("breakerpanel_ingest_batch_duration_seconds_count", ())]
    assert batches == samples[("breakerpanel_ingest_batches_total", (("status", "200"),))]
    for tool in Tool.objects.all():
        for state in ("closed", "open", "half_open", "forced_open", "forced_closed"):
            key = ("resilience4j_circuitbreaker_state", (("name", tool.name), ("state", state)))
            assert samples[key] == (1.0 if tool.state == state else 0.0)
    opened = FleetTransition.objects.filter(to_state="open", tool__name="web_search").count()
    key = (
        "resilience4j_circuitbreaker_transitions_total",
        (("name", "web_search"), ("to_state", "open")),
    )
    assert samples[key] == opened
    assert samples[("breakerpanel_alerts_sent_total", ())] == sent
