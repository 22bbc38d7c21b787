"""Alerts delivered by real Celery workers to the real fake Slack server, through real Redis.

Every test drives transitions through the services in this process; their alerts are enqueued
when the transaction commits and a worker process (two, where it matters) sends them. The
worker runs with the default settings: 1 message a second per channel, retries from 1 s.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from datetime import datetime, timedelta

import pytest
import redis
from django.utils import timezone

from breakers.models import Alert, AlertChannel, AlertKind, AlertState
from breakers.tasks import deliver_alert, sweep_alerts
from scripts.testing.fake_slack import NO_SERVICE, SERVER_ERROR, FakeSlackServer, rate_limited
from scripts.testing.processes import CeleryWorkerProcess
from tests.alerts.steps import COOLDOWN, cycle, half_open, open_tool, trial
from tests.waiting import wait_for

pytestmark = [pytest.mark.celery, pytest.mark.django_db(transaction=True)]


def state_of(alert_id: int) -> str:
    return Alert.objects.values_list("state", flat=True).get(pk=alert_id)


def headers(server: FakeSlackServer) -> list[str]:
    return [r.json["blocks"][0]["text"]["text"] for r in server.requests]


def recent(minutes: float) -> datetime:
    """A moment in the recent past: the sweep compares spells with the real clock."""
    return timezone.now() - timedelta(minutes=minutes)


@pytest.fixture
def second_worker(celery_worker: CeleryWorkerProcess) -> Iterator[CeleryWorkerProcess]:
    worker = CeleryWorkerProcess(pool="threads", concurrency=2).start()
    yield worker
    worker.stop()


def test_each_transition_reaches_slack_once_with_two_workers_and_duplicated_tasks(
    celery_worker: CeleryWorkerProcess,
    second_worker: CeleryWorkerProcess,
    channel: AlertChannel,
    slack_server: FakeSlackServer,
) -> None:
    start = recent(30)
    open_tool("web_search", start)
    opened = Alert.objects.get(kind=AlertKind.OPENED)
    for _ in range(6):  # a duplicated enqueue, spread over both worker processes
        deliver_alert.delay(opened.pk)
    wait_for(lambda: state_of(opened.pk) == AlertState.SENT, "the opened alert to be sent")

    half_open("web_search", start + COOLDOWN)
    trial("web_search", "success", start + COOLDOWN)
    closed = Alert.objects.get(kind=AlertKind.CLOSED)
    for _ in range(6):
        deliver_alert.delay(closed.pk)
    wait_for(lambda: state_of(closed.pk) == AlertState.SENT, "the closed alert to be sent")
    celery_worker.wait_idle()
    second_worker.wait_idle()

    assert headers(slack_server) == ["🔴 Breaker open: web_search", "🟢 Breaker closed: web_search"]
    assert Alert.objects.filter(attempts=1, state=AlertState.SENT).count() == 2


def test_a_server_error_then_ok_is_retried_after_the_backoff_and_sent(
    celery_worker: CeleryWorkerProcess, channel: AlertChannel, slack_server: FakeSlackServer
) -> None:
    slack_server.enqueue(SERVER_ERROR)
    open_tool("web_search", recent(30))
    alert = Alert.objects.get()
    wait_for(lambda: state_of(alert.pk) == AlertState.SENT, "the alert to be sent")
    first, second = slack_server.requests
    assert (first.reply.status, second.reply.status) == (500, 200)
    assert second.received_at - first.received_at >= 1.0  # SLACK_RETRY_BASE_SECONDS
    assert first.json == second.json
    alert.refresh_from_db()
    assert (alert.attempts, alert.last_error) == (2, "")


def test_a_429_holds_every_alert_of_the_channel_for_retry_after_and_is_no_attempt(
    celery_worker: CeleryWorkerProcess, channel: AlertChannel, slack_server: FakeSlackServer
) -> None:
    slack_server.enqueue(rate_limited(2))
    open_tool("web_search", recent(30))
    open_tool("vector_db", recent(30))
    alerts = list(Alert.objects.values_list("pk", flat=True))
    assert len(alerts) == 2
    wait_for(
        lambda: all(state_of(pk) == AlertState.SENT for pk in alerts), "both alerts to be sent"
    )
    refused, *later = slack_server.requests
    assert [r.reply.status for r in (refused, *later)] == [429, 200, 200]
    # Neither alert went out again before Retry-After, not only the one Slack refused.
    assert all(r.received_at - refused.received_at >= 2.0 for r in later)
    assert sorted(Alert.objects.values_list("attempts", flat=True)) == [1, 1]


def test_a_dead_webhook_fails_once_breaks_the_channel_and_nothing_more_is_tried(
    celery_worker: CeleryWorkerProcess, channel: AlertChannel, slack_server: FakeSlackServer
) -> None:
    slack_server.enqueue(NO_SERVICE)
    start = recent(30)
    open_tool("web_search", start)
    opened = Alert.objects.get()
    wait_for(lambda: state_of(opened.pk) == AlertState.FAILED, "the alert to fail")
    half_open("web_search", start + COOLDOWN)
    trial("web_search", "success", start + COOLDOWN)
    closed = Alert.objects.get(kind=AlertKind.CLOSED)
    wait_for(lambda: state_of(closed.pk) == AlertState.FAILED, "the next alert to fail")
    deliver_alert.delay(opened.pk)  # even asked again, a failed alert is not retried
    celery_worker.wait_idle()

    assert len(slack_server.requests) == 1
    channel.refresh_from_db()
    assert channel.broken_at is not None
    assert channel.last_error == "no_service: Slack refused the webhook: 404 no_service"
    opened.refresh_from_db()
    closed.refresh_from_db()
    assert (opened.attempts, opened.last_error) == (1, channel.last_error)
    assert closed.attempts == 0
    assert closed.last_error == f"the channel is broken: {channel.last_error}"


def test_a_flapping_tool_is_one_grouped_message_paced_per_channel_then_its_last_word(
    celery_worker: CeleryWorkerProcess, channel: AlertChannel, slack_server: FakeSlackServer
) -> None:
    start = recent(60)
    for i in range(5):
        cycle("web_search", start + timedelta(seconds=60 * i))
    # open, close, open, close, then the third opening is the flapping alert; the rest grouped.
    slack_server.wait_for_requests(5, timeout=20)
    celery_worker.wait_idle()
    assert sorted(headers(slack_server)) == sorted(
        ["🔴 Breaker open: web_search", "🟢 Breaker closed: web_search"] * 2
        + ["⚠️ Flapping: web_search"]
    )
    assert Alert.objects.filter(state=AlertState.GROUPED).count() == 5
    arrivals = sorted(r.received_at for r in slack_server.requests)
    gaps = [b - a for a, b in itertools.pairwise(arrivals)]
    # About one message a second on one channel. The limiter spaces the *sends* exactly 1 s
    # apart; an arrival also carries that send's own build and HTTP time, which a loaded
    # machine can stretch for one message and not the next, hence the margins. Unpaced, the
    # five would arrive within milliseconds.
    assert min(gaps) >= 0.5 and arrivals[-1] - arrivals[0] >= 3.5, gaps

    sweep_alerts.delay()  # the spell (one 10-minute window) is over: its last word goes out
    slack_server.wait_for_requests(6, timeout=20)
    celery_worker.wait_idle()
    assert headers(slack_server)[-1] == "🟢 Breaker closed: web_search"
    assert len(slack_server.requests) == 6
    flapping = Alert.objects.get(kind=AlertKind.FLAPPING)
    assert flapping.payload["reopen_count"] == 5 and flapping.payload["settled"] is True


def test_the_sweep_enqueues_an_alert_whose_task_was_lost(
    celery_worker: CeleryWorkerProcess, slack_server: FakeSlackServer, fleet_keys: redis.Redis
) -> None:
    row = open_tool("web_search", recent(30))  # no channel yet: no alert, nothing enqueued
    channel = AlertChannel.objects.create(name="oncall", webhook_url=slack_server.webhook_url)
    lost = Alert.objects.create(
        kind=AlertKind.OPENED,
        tool=row.tool,
        transition=row,
        channel=channel,
        created_at=timezone.now() - timedelta(minutes=5),
    )
    sweep_alerts.delay()
    wait_for(lambda: state_of(lost.pk) == AlertState.SENT, "the lost alert to be sent")
    assert len(slack_server.requests) == 1
