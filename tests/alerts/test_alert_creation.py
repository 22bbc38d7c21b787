"""Which alerts a fleet event makes: one row per (event, channel), written with the event.

Transitions are driven through the real services (Redis scripts + PostgreSQL) with time passed
in; nothing is sent here (on-commit callbacks do not run inside a test's transaction, and the
tests that look at the enqueue capture them).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
import redis
from django.db import transaction
from pytest_django.fixtures import Settings

from breakers.alerts import alert_channels, ensure_settings_channel, sweep_alerts
from breakers.alerts.facts import build_alert_message
from breakers.models import (
    Alert,
    AlertChannel,
    AlertKind,
    AlertState,
    ChannelSource,
    FleetTransition,
    Incident,
)
from scripts.testing.fake_slack import FakeSlackServer
from tests.alerts.steps import COOLDOWN, at, cycle, half_open, open_tool, operator, trial

pytestmark = pytest.mark.django_db

WEBHOOK = "https://hooks.slack.com/services/T0AAAA/B0BBBB/abcdefghijklmnopqrstuvwx"


def kinds(**filters: Any) -> list[tuple[str, str]]:
    return list(
        Alert.objects.filter(**filters).order_by("pk").values_list("kind", "state")
    )  # fmt: skip


def test_an_opening_makes_one_pending_opened_alert_per_enabled_channel(
    channel: AlertChannel, slack_server: FakeSlackServer
) -> None:
    second = AlertChannel.objects.create(name="sre", webhook_url=slack_server.url_for("/s/T/B/2"))
    AlertChannel.objects.create(
        name="muted", webhook_url=slack_server.url_for("/s/T/B/3"), enabled=False
    )
    row = open_tool("web_search", at(0))
    alerts = list(Alert.objects.order_by("channel__name"))
    assert [(a.channel, a.kind, a.state, a.attempts) for a in alerts] == [
        (channel, "opened", "pending", 0),
        (second, "opened", "pending", 0),
    ]
    incident = Incident.objects.get()
    assert all(a.transition == row and a.incident == incident for a in alerts)
    assert alerts[0].payload["to_state"] == "open"
    assert alerts[0].message is None  # built at the first attempt


def test_the_half_open_step_and_a_failed_trial_make_no_alert(channel: AlertChannel) -> None:
    open_tool("web_search", at(0))
    half_open("web_search", at(0) + COOLDOWN)
    reopened = trial("web_search", "retryable", at(0) + COOLDOWN)
    assert (reopened.from_state, reopened.to_state) == ("half_open", "open")
    half_open("web_search", at(0) + 4 * COOLDOWN)
    assert kinds() == [("opened", "pending")]
    assert FleetTransition.objects.count() == 4


def test_a_closing_makes_a_closed_alert_for_the_incident(channel: AlertChannel) -> None:
    _, closed = cycle("web_search", at(0))
    incident = Incident.objects.get()
    assert not incident.is_open
    alert = Alert.objects.get(kind=AlertKind.CLOSED)
    assert (alert.transition, alert.incident, alert.state) == (closed, incident, "pending")


def test_every_operator_action_is_one_manual_alert_and_its_transitions_no_other(
    channel: AlertChannel,
) -> None:
    cycle("web_search", at(0))  # the tool exists and is closed again
    Alert.objects.all().delete()
    forced = operator("web_search", "force_open", "vendor status page says down", at(100))
    reset = operator("web_search", "reset", "clear the counters", at(110))  # changes no state
    released = operator("web_search", "release", "vendor is back", at(120))
    assert kinds() == [("manual", "pending")] * 3
    by_action = {a.operator_action: a for a in Alert.objects.all()}
    assert set(by_action) == {forced, reset, released}
    assert by_action[forced].payload["state_after"] == "forced_open"
    assert by_action[forced].incident == Incident.objects.get(opened_at=at(100))
    assert by_action[released].incident == by_action[forced].incident
    assert by_action[reset].payload["actor"].startswith("token:ops-bot")


def test_the_third_opening_in_the_window_is_one_flapping_alert_and_later_ones_are_grouped(
    channel: AlertChannel,
) -> None:
    for i in range(5):
        cycle("web_search", at(60 * i))
    alerts = list(Alert.objects.order_by("transition__seq"))
    assert [(a.kind, a.state) for a in alerts] == [
        ("opened", "pending"),
        ("closed", "pending"),
        ("opened", "pending"),
        ("closed", "pending"),
        ("flapping", "pending"),
        ("closed", "grouped"),
        ("opened", "grouped"),
        ("closed", "grouped"),
        ("opened", "grouped"),
        ("closed", "grouped"),
    ]
    flapping = alerts[4]
    assert all(a.group == flapping for a in alerts[5:])
    assert flapping.group_until == at(120) + timedelta(minutes=10)
    assert flapping.payload["reopen_count"] == 5
    assert flapping.payload["first_opened_at"] == at(0).isoformat()
    assert flapping.payload["last_opened_at"] == at(240).isoformat()


def test_openings_further_apart_than_the_window_are_not_flapping(
    channel: AlertChannel, settings: Settings
) -> None:
    settings.ALERT_FLAP_WINDOW_SECONDS = 100
    for i in range(4):
        cycle("web_search", at(60 * i))  # openings at 0, 60, 120, 180: never three in 100 s
    assert kinds() == [("opened", "pending"), ("closed", "pending")] * 4


def test_operator_openings_do_not_count_toward_flapping(channel: AlertChannel) -> None:
    cycle("web_search", at(0))
    for i in range(3):
        operator("web_search", "force_open", "maintenance", at(100 + 20 * i))
        operator("web_search", "release", "done", at(110 + 20 * i))
    open_tool("web_search", at(200))
    assert [k for k, _ in kinds()][-1] == "opened"
    assert not Alert.objects.filter(kind=AlertKind.FLAPPING).exists()


def test_when_a_spell_ends_the_sweep_sends_the_last_word_once(
    channel: AlertChannel, django_capture_on_commit_callbacks: Callable[..., Any]
) -> None:
    for i in range(4):
        cycle("web_search", at(60 * i))
    last_close = Alert.objects.filter(kind=AlertKind.CLOSED).latest("transition__seq")
    assert last_close.state == AlertState.GROUPED
    spell_ends = Alert.objects.get(kind=AlertKind.FLAPPING).group_until
    assert spell_ends is not None and spell_ends == at(120) + timedelta(minutes=10)
    assert sweep_alerts(now=spell_ends - timedelta(seconds=1)).settled == 0

    with django_capture_on_commit_callbacks() as callbacks:
        result = sweep_alerts(now=spell_ends)
    assert result.settled == 1
    last_close.refresh_from_db()
    assert last_close.state == AlertState.PENDING
    assert len(callbacks) == 1  # its delivery is enqueued
    assert Alert.objects.filter(state=AlertState.GROUPED).count() == 2
    assert sweep_alerts(now=spell_ends + timedelta(minutes=1)).settled == 0
    # The tool is quiet again: its next opening is announced on its own.
    open_tool("web_search", at(2000))
    assert kinds()[-1] == ("opened", "pending")


def test_alerts_are_enqueued_on_commit_and_vanish_with_a_rollback(
    channel: AlertChannel, django_capture_on_commit_callbacks: Callable[..., Any]
) -> None:
    with django_capture_on_commit_callbacks() as callbacks:
        open_tool("web_search", at(0))
    assert len(callbacks) == 1
    assert Alert.objects.count() == 1

    class Boom(Exception):
        pass

    with pytest.raises(Boom), transaction.atomic():
        open_tool("other_tool", at(0))
        assert Alert.objects.count() == 2
        raise Boom
    assert Alert.objects.count() == 1


def test_without_channels_nothing_is_made(fleet_keys: redis.Redis) -> None:
    open_tool("web_search", at(0))
    assert not Alert.objects.exists()


def test_the_settings_channel_is_made_lazily_and_follows_the_setting(
    settings: Settings, fleet_keys: redis.Redis
) -> None:
    settings.SLACK_WEBHOOK_URL = ""
    assert ensure_settings_channel() is None
    assert not AlertChannel.objects.exists()

    settings.SLACK_WEBHOOK_URL = WEBHOOK
    open_tool("web_search", at(0))
    made = AlertChannel.objects.get()
    assert (made.name, made.source, made.enabled) == ("SLACK_WEBHOOK_URL", "settings", True)
    assert made.masked_url == "https://hooks.slack.com/services/T0AAAA/B0BBBB/…vwx"
    assert str(made) == "SLACK_WEBHOOK_URL"
    assert Alert.objects.get().channel == made

    AlertChannel.objects.filter(pk=made.pk).update(broken_at=at(0), last_error="no_service")
    settings.SLACK_WEBHOOK_URL = WEBHOOK.replace("abcdef", "zzzzzz")
    channel = ensure_settings_channel()
    assert channel is not None and channel.pk == made.pk
    made.refresh_from_db()
    assert made.webhook_url == settings.SLACK_WEBHOOK_URL and made.broken_at is None

    AlertChannel.objects.filter(pk=made.pk).update(enabled=False)  # an admin muted it
    assert alert_channels() == []
    settings.SLACK_WEBHOOK_URL = "http://hooks.example.com/not-https"
    assert ensure_settings_channel() is None  # invalid: logged, and check breakers.E001
    settings.SLACK_WEBHOOK_URL = ""
    AlertChannel.objects.filter(pk=made.pk).update(enabled=True)
    assert alert_channels() == []  # the row stays, but the setting no longer names it


def test_a_settings_url_that_an_admin_channel_has_is_not_duplicated(
    settings: Settings, fleet_keys: redis.Redis
) -> None:
    admin = AlertChannel.objects.create(name="oncall", webhook_url=WEBHOOK)
    settings.SLACK_WEBHOOK_URL = WEBHOOK
    assert ensure_settings_channel() is None
    assert alert_channels() == [admin]
    assert not AlertChannel.objects.filter(source=ChannelSource.SETTINGS).exists()


def test_the_recovery_message_of_a_real_incident_carries_its_ledger(channel: AlertChannel) -> None:
    cycle("web_search", at(0))
    alert = Alert.objects.get(kind=AlertKind.CLOSED)
    message = build_alert_message(alert, now=at(0) + 2 * COOLDOWN)
    body = "\n".join(
        block["text"]["text"]
        for block in message.blocks
        if block.get("type") == "section" and "text" in block
    )
    assert "*Outage ledger*" in body and "_Method:_" in body
