"""The Alerts page: channel health and alert delivery states; webhook secrets never shown."""

from __future__ import annotations

import pytest
from django.test import Client
from django.utils import timezone

from breakers.models import Alert, AlertChannel, AlertState, OperatorAction, Tool

SECRET_URL = "https://hooks.slack.com/services/T000/B000/supersecretvalue123"


@pytest.fixture
def broken_channel(db: None) -> AlertChannel:
    return AlertChannel.objects.create(
        name="on-call",
        webhook_url=SECRET_URL,
        broken_at=timezone.now(),
        last_error="404 no_service: the webhook was removed",
    )


def test_a_broken_channel_shows_its_error_and_never_its_secret(
    viewer_client: Client, broken_channel: AlertChannel
) -> None:
    page = viewer_client.get("/alerts/").content.decode()
    assert "broken since" in page
    assert "404 no_service: the webhook was removed" in page
    assert "supersecretvalue123" not in page
    assert broken_channel.masked_url in page


def test_every_alert_shows_its_state_attempts_and_last_error(
    viewer_client: Client, broken_channel: AlertChannel
) -> None:
    tool = Tool.objects.create(name="<b>web_search</b>")
    action = OperatorAction.objects.create(
        tool=tool,
        action="force_open",
        reason="vendor down",
        actor="oncall",
        before={"state": "closed"},
        after={"state": "forced_open"},
    )
    Alert.objects.create(
        kind="manual",
        operator_action=action,
        tool=tool,
        channel=broken_channel,
        state=AlertState.FAILED,
        attempts=3,
        last_error="500 from Slack, then 404",
    )
    page = viewer_client.get("/alerts/?state=failed").content.decode()
    assert "500 from Slack, then 404" in page
    assert "&lt;b&gt;web_search&lt;/b&gt;" in page and "<b>web_search</b>" not in page
    assert viewer_client.get("/alerts/?state=sent").content.decode().count("500 from Slack") == 0


def test_an_unknown_state_filter_is_a_clear_400(viewer_client: Client) -> None:
    response = viewer_client.get("/alerts/?state=lost")
    assert response.status_code == 400
    assert "Unknown alert state" in response.content.decode()


def test_the_alerts_page_needs_a_login(client: Client, db: None) -> None:
    response = client.get("/alerts/")
    assert response.status_code == 302 and "/accounts/login/" in response["Location"]
