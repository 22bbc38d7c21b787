"""The admin for alert channels and alerts: the webhook URL is never shown back in full."""

from __future__ import annotations

import pytest
import redis
from django.test import Client

from breakers.models import Alert, AlertChannel, AlertKind, AlertState
from tests.alerts.steps import at, open_tool

pytestmark = pytest.mark.django_db

SECRET = "abcdefghijklmnopqrstuvwx"
WEBHOOK = f"https://hooks.slack.com/services/T0AAAA/B0BBBB/{SECRET}"


def test_the_channel_pages_show_only_the_masked_url(admin_client: Client) -> None:
    channel = AlertChannel.objects.create(name="oncall", webhook_url=WEBHOOK)
    for url in (
        "/admin/breakers/alertchannel/",
        f"/admin/breakers/alertchannel/{channel.pk}/change/",
    ):
        page = admin_client.get(url)
        assert page.status_code == 200
        html = page.content.decode()
        assert SECRET not in html
        assert "https://hooks.slack.com/services/T0AAAA/B0BBBB/…vwx" in html


def test_a_channel_is_added_with_a_valid_url_and_kept_when_the_field_is_left_empty(
    admin_client: Client,
) -> None:
    bad = admin_client.post(
        "/admin/breakers/alertchannel/add/",
        {"name": "oncall", "webhook_url": "http://hooks.example.com/x", "enabled": "on"},
    )
    assert bad.status_code == 200
    assert "plain http is only allowed to a loopback address" in bad.content.decode()
    assert not AlertChannel.objects.exists()

    added = admin_client.post(
        "/admin/breakers/alertchannel/add/",
        {"name": "oncall", "webhook_url": f"  {WEBHOOK} ", "enabled": "on"},
    )
    assert added.status_code == 302
    channel = AlertChannel.objects.get()
    assert (channel.webhook_url, channel.source) == (WEBHOOK, "admin")

    AlertChannel.objects.filter(pk=channel.pk).update(broken_at=at(0), last_error="no_service")
    renamed = admin_client.post(
        f"/admin/breakers/alertchannel/{channel.pk}/change/",
        {"name": "sre-oncall", "webhook_url": "", "enabled": "on"},
    )
    assert renamed.status_code == 302
    channel.refresh_from_db()
    assert (channel.name, channel.webhook_url) == ("sre-oncall", WEBHOOK)
    assert channel.broken_at is not None  # same webhook: still broken

    new_url = WEBHOOK.replace(SECRET, "z" * 24)
    admin_client.post(
        f"/admin/breakers/alertchannel/{channel.pk}/change/",
        {"name": "sre-oncall", "webhook_url": new_url, "enabled": "on"},
    )
    channel.refresh_from_db()
    assert (channel.webhook_url, channel.broken_at, channel.last_error) == (new_url, None, "")


def test_the_alert_list_shows_each_alerts_state(
    admin_client: Client, fleet_keys: redis.Redis
) -> None:
    AlertChannel.objects.create(name="oncall", webhook_url=WEBHOOK)
    open_tool("web_search", at(0))
    Alert.objects.update(state=AlertState.FAILED, attempts=3, last_error="http_500: boom")
    page = admin_client.get("/admin/breakers/alert/")
    html = page.content.decode()
    assert page.status_code == 200
    assert "http_500: boom" in html and "failed" in html and SECRET not in html
    assert Alert.objects.get().kind == AlertKind.OPENED


def test_the_settings_channel_can_be_muted_but_its_url_comes_from_the_environment(
    admin_client: Client,
) -> None:
    channel = AlertChannel.objects.create(
        name="SLACK_WEBHOOK_URL", webhook_url=WEBHOOK, source="settings"
    )
    page = admin_client.get(f"/admin/breakers/alertchannel/{channel.pk}/change/").content.decode()
    assert SECRET not in page and 'name="webhook_url"' not in page
    muted = admin_client.post(f"/admin/breakers/alertchannel/{channel.pk}/change/", {})
    assert muted.status_code == 302
    channel.refresh_from_db()
    assert (channel.enabled, channel.webhook_url, channel.name) == (
        False,
        WEBHOOK,
        "SLACK_WEBHOOK_URL",
    )
