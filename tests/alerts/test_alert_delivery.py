"""Delivering one alert: claim once, the channel's rate limit, retries, permanent failures, the
sweep; and what each message says. The service runs in this process against the real fake Slack
server, real Redis and PostgreSQL, with time passed in (the Celery path is in
``test_alert_delivery_celery.py``)."""

from __future__ import annotations

import itertools
import threading
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

import pytest
import redis
from django.contrib.auth.models import User
from django.utils import timezone
from pytest_django.fixtures import Settings

from breakers.alerts import Delivery, deliver_alert, retry_delay, sweep_alerts
from breakers.alerts.ratelimit import ChannelRateLimiter
from breakers.fleet.rules import OperatorActionKind
from breakers.fleet_service import fleet_operator_action, fleet_tick
from breakers.models import Alert, AlertChannel, AlertKind, AlertState, Incident, Tool
from breakers.transports.slack_messages import format_duration
from runs.services import ingest_batch
from scripts.testing.fake_slack import (
    INVALID_PAYLOAD,
    NO_SERVICE,
    SERVER_ERROR,
    FakeSlackServer,
    rate_limited,
)
from tests.alerts.steps import at, cycle, open_tool, trial

pytestmark = pytest.mark.django_db

_ids = itertools.count(1)


class Clock:
    def __init__(self, start: datetime) -> None:
        self.now = start

    def __call__(self) -> datetime:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += timedelta(seconds=seconds)


@pytest.fixture
def clock() -> Clock:
    return Clock(at(3600))


@pytest.fixture
def unlimited(fleet_keys: redis.Redis, clock: Clock) -> ChannelRateLimiter:
    """A limiter that never makes a test wait (the pacing has its own test), on the test's
    clock (a 429 holds the channel in it)."""
    return ChannelRateLimiter(
        fleet_keys, interval=1.0, burst=10_000, clock=lambda: clock.now.timestamp()
    )


Deliver = Callable[[Alert], Delivery]


@pytest.fixture
def deliver(clock: Clock, unlimited: ChannelRateLimiter) -> Deliver:
    return lambda alert: deliver_alert(alert_id=alert.pk, clock=clock, limiter=unlimited)


def opened_alert(tool: str = "web_search") -> Alert:
    open_tool(tool, at(0))
    return Alert.objects.get(tool__name=tool, kind=AlertKind.OPENED)


def reload(alert: Alert) -> Alert:
    alert.refresh_from_db()
    return alert


# -- claim once --------------------------------------------------------------------------


def test_an_alert_is_sent_once_however_often_it_is_delivered(
    channel: AlertChannel, slack_server: FakeSlackServer, deliver: Deliver
) -> None:
    alert = opened_alert()
    assert deliver(alert).outcome == "sent"
    assert deliver(alert) == Delivery("skipped", detail="alert is sent")
    assert len(slack_server.requests) == 1
    alert = reload(alert)
    assert (alert.state, alert.attempts, alert.last_error) == ("sent", 1, "")
    assert alert.sent_at is not None and alert.claimed_at is not None
    channel.refresh_from_db()
    assert channel.last_sent_at == alert.sent_at


@pytest.mark.django_db(transaction=True)
def test_concurrent_deliveries_of_one_alert_send_it_once(
    slack_server: FakeSlackServer, fleet_keys: redis.Redis, unlimited: ChannelRateLimiter
) -> None:
    row = open_tool("web_search", at(0))  # no channel yet, so nothing is enqueued
    channel = AlertChannel.objects.create(name="oncall", webhook_url=slack_server.webhook_url)
    alert = Alert.objects.create(
        kind=AlertKind.OPENED, tool=row.tool, transition=row, channel=channel
    )
    barrier = threading.Barrier(8)
    outcomes: list[str] = []

    def race() -> None:
        barrier.wait()
        try:
            outcomes.append(deliver_alert(alert_id=alert.pk, limiter=unlimited).outcome)
        finally:
            from django.db import connection

            connection.close()

    threads = [threading.Thread(target=race) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert sorted(outcomes) == ["sent"] + ["skipped"] * 7
    assert len(slack_server.requests) == 1


# -- retries -----------------------------------------------------------------------------


def test_a_server_error_is_retried_with_exponential_backoff_and_the_same_message(
    channel: AlertChannel, slack_server: FakeSlackServer, deliver: Deliver, clock: Clock
) -> None:
    alert = opened_alert()
    slack_server.enqueue(SERVER_ERROR, SERVER_ERROR)
    first = deliver(alert)
    assert first == Delivery("retry", 1.0, "http_500: Slack answered 500 rollup_error")
    alert = reload(alert)
    assert (alert.state, alert.attempts) == ("pending", 1)
    assert alert.next_attempt_at == clock.now + timedelta(seconds=1)
    assert alert.last_error == "http_500: Slack answered 500 rollup_error"

    early = deliver(alert)  # a duplicate task, before the alert is due
    assert early.outcome == "retry" and early.retry_in == pytest.approx(1.0)
    assert len(slack_server.requests) == 1

    clock.advance(1)
    assert deliver(alert).retry_in == 2.0
    clock.advance(2)
    assert deliver(alert).outcome == "sent"
    alert = reload(alert)
    assert (alert.state, alert.attempts, alert.last_error) == ("sent", 3, "")
    bodies = [r.json for r in slack_server.requests]
    assert len(bodies) == 3 and bodies[0] == bodies[1] == bodies[2]
    assert [retry_delay(n) for n in (1, 2, 3, 4, 12)] == [1.0, 2.0, 4.0, 8.0, 300.0]


def test_a_429_waits_as_long_as_retry_after_says(
    channel: AlertChannel, slack_server: FakeSlackServer, deliver: Deliver, clock: Clock
) -> None:
    alert = opened_alert()
    slack_server.enqueue(rate_limited(7))
    assert deliver(alert).retry_in == 7.0
    alert = reload(alert)
    assert alert.next_attempt_at == clock.now + timedelta(seconds=7)
    assert alert.last_error.startswith("rate_limited: rate limited by Slack (429)")
    clock.advance(6.9)
    assert deliver(alert).outcome == "retry"
    clock.advance(0.1)
    assert deliver(alert).outcome == "sent"
    assert len(slack_server.requests) == 2


def test_an_alert_gives_up_after_the_last_attempt(
    channel: AlertChannel,
    slack_server: FakeSlackServer,
    deliver: Deliver,
    clock: Clock,
    settings: Settings,
) -> None:
    settings.SLACK_MAX_ATTEMPTS = 2
    alert = opened_alert()
    slack_server.enqueue(SERVER_ERROR, SERVER_ERROR)
    deliver(alert)
    clock.advance(1)
    result = deliver(alert)
    assert result.outcome == "failed" and result.retry_in is None
    alert = reload(alert)
    assert (alert.state, alert.attempts) == ("failed", 2)
    assert alert.last_error == "gave up after 2 attempts: http_500: Slack answered 500 rollup_error"
    channel.refresh_from_db()
    assert channel.broken_at is None


# -- permanent failures ------------------------------------------------------------------


def test_a_dead_webhook_fails_the_alert_breaks_the_channel_and_stops_sending(
    channel: AlertChannel, slack_server: FakeSlackServer, deliver: Deliver
) -> None:
    alert = opened_alert()
    slack_server.enqueue(NO_SERVICE)
    assert deliver(alert).outcome == "failed"
    alert = reload(alert)
    assert (alert.state, alert.attempts, alert.next_attempt_at) == ("failed", 1, None)
    assert alert.last_error == "no_service: Slack refused the webhook: 404 no_service"
    channel.refresh_from_db()
    assert channel.broken_at is not None and channel.last_error == alert.last_error

    later = opened_alert("other_tool")
    assert deliver(later).outcome == "failed"
    later = reload(later)
    assert later.attempts == 0
    assert later.last_error == f"the channel is broken: {channel.last_error}"
    assert len(slack_server.requests) == 1
    assert slack_server.webhook_url.split("/")[-1] not in channel.last_error


def test_a_rejected_message_fails_alone_and_the_channel_stays_usable(
    channel: AlertChannel, slack_server: FakeSlackServer, deliver: Deliver
) -> None:
    alert = opened_alert()
    slack_server.enqueue(INVALID_PAYLOAD)
    assert deliver(alert).outcome == "failed"
    assert reload(alert).last_error.startswith("invalid_payload: Slack rejected the message")
    channel.refresh_from_db()
    assert channel.broken_at is None
    assert deliver(opened_alert("other_tool")).outcome == "sent"


def test_a_disabled_channel_gets_nothing(
    channel: AlertChannel, slack_server: FakeSlackServer, deliver: Deliver
) -> None:
    alert = opened_alert()
    AlertChannel.objects.filter(pk=channel.pk).update(enabled=False)
    assert deliver(alert) == Delivery("failed", detail="the channel is disabled")
    assert slack_server.requests == []


# -- pacing ------------------------------------------------------------------------------


def test_the_channel_limit_defers_an_alert_without_counting_an_attempt(
    channel: AlertChannel,
    slack_server: FakeSlackServer,
    fleet_keys: redis.Redis,
    clock: Clock,
) -> None:
    seconds = iter(itertools.count(1_800_000_000.0, 0.25))
    limiter = ChannelRateLimiter(fleet_keys, interval=1.0, burst=1, clock=lambda: next(seconds))
    first, second = opened_alert("tool_a"), opened_alert("tool_b")
    assert deliver_alert(alert_id=first.pk, clock=clock, limiter=limiter).outcome == "sent"
    deferred = deliver_alert(alert_id=second.pk, clock=clock, limiter=limiter)
    assert deferred == Delivery("retry", 0.75, "waiting for the channel's send slot")
    second = reload(second)
    assert (second.state, second.attempts) == ("pending", 0)
    assert second.next_attempt_at == clock.now + timedelta(seconds=0.75)
    assert len(slack_server.requests) == 1


def test_a_429_holds_the_whole_channel_and_is_not_counted_as_an_attempt(
    channel: AlertChannel,
    slack_server: FakeSlackServer,
    fleet_keys: redis.Redis,
    clock: Clock,
    settings: Settings,
) -> None:
    settings.SLACK_MAX_ATTEMPTS = 1  # a 429 counted as an attempt would fail the alert
    limiter = ChannelRateLimiter(
        fleet_keys, interval=1.0, burst=1, clock=lambda: clock.now.timestamp()
    )

    def deliver(alert: Alert) -> Delivery:
        return deliver_alert(alert_id=alert.pk, clock=clock, limiter=limiter)

    first, second = opened_alert("tool_a"), opened_alert("tool_b")
    slack_server.enqueue(rate_limited(2))
    refused = deliver(first)
    assert (refused.outcome, refused.retry_in) == ("retry", 2.0)
    first = reload(first)
    assert (first.state, first.attempts) == ("pending", 0)
    assert first.next_attempt_at == clock.now + timedelta(seconds=2)
    # The other pending alert of the channel waits out the same Retry-After.
    assert deliver(second) == Delivery("retry", 2.0, "waiting for the channel's send slot")
    clock.advance(1.9)
    assert deliver(first).outcome == "retry"
    assert deliver(second).retry_in == pytest.approx(0.1)
    assert len(slack_server.requests) == 1
    assert (reload(first).attempts, reload(second).attempts) == (0, 0)

    clock.advance(0.1)
    assert deliver(first).outcome == "sent"
    assert reload(first).attempts == 1
    assert deliver(second).retry_in == 1.0  # then the ordinary pacing
    clock.advance(1.0)
    assert deliver(second).outcome == "sent"
    assert [r.reply.status for r in slack_server.requests] == [429, 200, 200]


# -- the sweep ---------------------------------------------------------------------------


def test_the_sweep_unsticks_dead_claims_and_requeues_lost_deliveries(
    channel: AlertChannel, django_capture_on_commit_callbacks: Callable[..., Any]
) -> None:
    now = timezone.now()
    stuck, lost, fresh, waiting = (opened_alert(f"tool_{i}") for i in range(4))
    Alert.objects.filter(pk=stuck.pk).update(
        state=AlertState.SENDING, claimed_at=now - timedelta(minutes=5)
    )
    Alert.objects.filter(pk=lost.pk).update(created_at=now - timedelta(minutes=5))
    Alert.objects.filter(pk=waiting.pk).update(next_attempt_at=now + timedelta(seconds=30))
    with django_capture_on_commit_callbacks() as callbacks:
        result = sweep_alerts(now=now)
    assert result.unstuck == 1
    assert result.requeued == [stuck.pk, lost.pk]
    assert len(callbacks) == 1
    assert reload(stuck).state == AlertState.PENDING
    assert reload(fresh).state == AlertState.PENDING  # made just now: its task is on its way

    claimed = timezone.now() - timedelta(seconds=5)
    Alert.objects.filter(pk=fresh.pk).update(state=AlertState.SENDING, claimed_at=claimed)
    assert sweep_alerts(now=timezone.now()).unstuck == 0  # a live claim is left alone


# -- what the messages say ---------------------------------------------------------------


def iso(moment: datetime) -> str:
    return moment.isoformat().replace("+00:00", "Z")


def ingest(worker: str, *events: dict[str, Any]) -> None:
    result = ingest_batch(worker_id=worker, events=list(events))
    assert not result.rejected, result.rejected


def ev(kind: str, ts: datetime, **fields: Any) -> dict[str, Any]:
    return {"id": f"{kind}-{next(_ids)}", "type": kind, "ts": iso(ts), **fields}


def started(run_id: str, ts: datetime) -> dict[str, Any]:
    return ev("run.started", ts, run_id=run_id, agent="research", step_budget=20)


def call(run_id: str, ts: datetime, outcome: str, error: str = "") -> dict[str, Any]:
    return ev(
        "tool.call", ts, run_id=run_id, step=1, tool="web_search", outcome=outcome, attempts=5,
        duration_ms=31000, error=error,
    )  # fmt: skip


def model_call(run_id: str, ts: datetime, cost: str) -> dict[str, Any]:
    return ev(
        "model.call", ts, run_id=run_id, step=1, model="m", input_tokens=10, output_tokens=5,
        cost_usd=float(cost), duration_ms=100,
    )  # fmt: skip


def blocks_text(body: dict[str, Any]) -> str:
    parts: list[str] = []
    for block in body["blocks"]:
        if isinstance(block.get("text"), dict):
            parts.append(block["text"]["text"])
        for item in block.get("fields", []) + block.get("elements", []):
            parts.append(item["text"])
    return "\n".join(parts)


def test_the_opened_message_says_what_who_since_and_links_the_incident(
    channel: AlertChannel, slack_server: FakeSlackServer, deliver: Deliver, settings: Settings
) -> None:
    settings.SITE_URL = "https://panel.example"
    t = timezone.now() - timedelta(seconds=20)
    error = "ToolFailure: 503 from vendor <!channel>"
    ingest("research-1", started("r1", t), *(call("r1", t, "retryable", error) for _ in range(3)))
    ingest("research-2", started("r2", t), call("r2", t, "retryable", error))
    ingest("research-2", call("r2", t + timedelta(seconds=1), "retryable", error))
    alert = Alert.objects.get(kind=AlertKind.OPENED)
    incident = Incident.objects.get()
    assert deliver(alert).outcome == "sent"
    [request] = slack_server.requests
    body = request.json
    text = blocks_text(body)
    link = f"https://panel.example/incidents/{incident.pk}/"
    assert body["text"].startswith("Breaker open: web_search (fleet). 5 consecutive retryable")
    assert f"<{link}|Open the incident>" in text and body["text"].endswith(link)
    assert "*Reason:* 5 consecutive retryable failures from 2 workers" in text
    assert "*Consecutive failures*\n5" in text
    assert "*Workers behind it*\n2 (`research-1`, `research-2`)" in text
    assert "*Runs affected so far*\n2" in text
    assert "*State*\n`open`" in text
    assert "ToolFailure: 503 from vendor &lt;!channel&gt;" in text  # inert, never a ping
    assert "<!channel>" not in str(body)
    assert reload(alert).message == {"text": body["text"], "blocks": body["blocks"]}


def test_the_closed_message_says_downtime_runs_spend_and_vendor_calls(
    channel: AlertChannel, slack_server: FakeSlackServer, deliver: Deliver, settings: Settings
) -> None:
    settings.SITE_URL = "https://panel.example/"
    t = timezone.now() - timedelta(seconds=5)
    ingest("w1", started("r1", t), *(call("r1", t, "retryable") for _ in range(3)))
    ingest("w2", started("r2", t), *(call("r2", t, "retryable") for _ in range(2)))
    opened_at = Incident.objects.get().opened_at
    during = opened_at + timedelta(seconds=5)
    ingest(
        "w1",
        started("r3", during),
        call("r3", during, "blocked"),
        model_call("r3", during, "0.40"),
        call("r3", during + timedelta(seconds=5), "retryable", "late failure"),
    )
    ingest(
        "w2",
        started("r4", during),
        ev(
            "breaker.transition",
            during,
            run_id="r4",
            scope="run",
            tool="web_search",
            state="open",
            reason="5 consecutive",
        ),
        model_call("r4", during, "0.10"),
    )
    fleet_tick(now=opened_at + timedelta(seconds=31))
    trial("web_search", "success", opened_at + timedelta(seconds=40))
    alert = Alert.objects.get(kind=AlertKind.CLOSED)
    incident = Incident.objects.get()
    assert deliver(alert).outcome == "sent"
    body = slack_server.requests[-1].json
    text = blocks_text(body)
    assert incident.closed_at is not None
    assert format_duration(incident.closed_at - incident.opened_at) == "40s"
    assert body["text"] == (
        "Breaker closed: web_search after 40s. 2 runs affected, $0.50 model spend and 1 vendor "
        "call during the incident. Spend avoided (estimate): $0.00. trial call succeeded "
        f"https://panel.example/incidents/{incident.pk}/"
    )
    # Neither run has finished: the ledger counts them and leaves them out of its estimate.
    assert "run(s) still going are left out" in text
    assert "*Runs affected*\n2" in text
    assert "*Model spend during the incident*\n$0.50" in text
    assert "*Vendor calls during the incident*\n1" in text
    assert "*Downtime*\n40s" in text


def test_the_manual_action_message_says_who_what_and_why(
    channel: AlertChannel, slack_server: FakeSlackServer, deliver: Deliver, settings: Settings
) -> None:
    settings.SITE_URL = "https://panel.example"
    cycle("web_search", at(0))
    Alert.objects.all().delete()
    alice = User.objects.create_user("alice")
    fleet_operator_action(
        tool_name="web_search",
        action=OperatorActionKind.FORCE_OPEN,
        reason="vendor status page says <down> @here",
        user=alice,
        now=at(500),
    )
    alert = Alert.objects.get()
    assert alert.kind == AlertKind.MANUAL
    assert deliver(alert).outcome == "sent"
    body = slack_server.requests[-1].json
    text = blocks_text(body)
    tool = Tool.objects.get(name="web_search")
    assert body["blocks"][0]["text"]["text"] == "🛠️ user:alice forced web_search open"
    assert "*Why:* vendor status page says &lt;down&gt; @\u2060here" in text
    assert "*State now*\n`forced_open`" in text
    assert "*Action*\n`force_open`" in text and "*Who*\nuser:alice" in text
    assert f"<https://panel.example/tools/{tool.pk}/|Open the tool>" in text


def test_the_flapping_message_counts_the_reopenings_in_the_window(
    channel: AlertChannel, slack_server: FakeSlackServer, deliver: Deliver, settings: Settings
) -> None:
    settings.SITE_URL = "https://panel.example"
    for i in range(3):
        cycle("web_search", at(60 * i))
    alert = Alert.objects.get(kind=AlertKind.FLAPPING)
    assert deliver(alert).outcome == "sent"
    body = slack_server.requests[-1].json
    assert body["text"] == (
        "Flapping: web_search re-opened 3 times within 10m (grouped into one alert). "
        "Last reason: 5 consecutive retryable failures from 2 workers "
        f"https://panel.example/incidents/{alert.incident_id}/"
    )
    text = blocks_text(body)
    assert "*Re-opens*\n3 in 10m" in text
    assert "Further re-opens inside this window are grouped here" in text
