"""Linking Slack users to dashboard users: by an admin, or once by the user from a signed link;
never by an email match alone. And bot mode refuses to start half-configured."""

from __future__ import annotations

import re
from datetime import timedelta
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.core import checks
from django.test import Client
from django.utils import timezone

from breakers.models import Alert, AlertChannel, AlertState, SlackUser, Tool, ToolSilence
from breakers.slack.linking import SlackIdentity, link_token
from scripts.testing.fake_slack import FakeSlackServer
from tests.alerts.steps import open_tool

pytestmark = pytest.mark.django_db

ANA = SlackIdentity(team_id="T0BREAKERS", user_id="U0ANA00001", name="ana")


@pytest.fixture
def ana(client: Client) -> User:
    user = User.objects.create_user("ana", password="ana-pass-123456789")
    client.force_login(user)
    return user


def test_a_user_links_their_slack_account_once_after_confirming(client: Client, ana: User) -> None:
    token = link_token(ANA)
    page = " ".join(
        re.sub(r"<[^>]+>", " ", client.get(f"/slack/link/?t={token}").content.decode()).split()
    )
    assert "Link the Slack user @ ana" in page or "Link the Slack user @ana" in page
    assert not SlackUser.objects.exists(), "opening the link makes nothing"
    response = client.post("/slack/link/", {"t": token})
    assert response.status_code == 303
    link = SlackUser.objects.get()
    assert (link.user, link.slack_user_id, link.linked_by) == (ana, "U0ANA00001", "self")

    other = SlackIdentity(team_id="T0BREAKERS", user_id="U0OTHER001", name="other")
    again = client.post("/slack/link/", {"t": link_token(other)})
    assert again.status_code == 400
    assert "already linked to a Slack account in this workspace" in again.content.decode()
    assert SlackUser.objects.count() == 1


def test_a_slack_account_linked_to_someone_else_is_refused(client: Client, ana: User) -> None:
    bob = User.objects.create_user("bob")
    SlackUser.objects.create(team_id=ANA.team_id, slack_user_id=ANA.user_id, user=bob)
    response = client.post("/slack/link/", {"t": link_token(ANA)})
    assert response.status_code == 400
    assert SlackUser.objects.get().user == bob


@pytest.mark.parametrize("token", ["garbage", link_token(ANA)[:-4]])
def test_a_bad_token_links_nothing(client: Client, ana: User, token: str) -> None:
    response = client.post("/slack/link/", {"t": token})
    assert response.status_code == 400
    assert "not valid" in response.content.decode()
    assert not SlackUser.objects.exists()


def test_an_expired_link_says_so(
    client: Client, ana: User, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("breakers.slack.linking.LINK_MAX_AGE_SECONDS", -1)
    response = client.post("/slack/link/", {"t": link_token(ANA)})
    assert response.status_code == 400
    assert "expired" in response.content.decode()
    assert not SlackUser.objects.exists()


def test_the_link_page_needs_a_login() -> None:
    response = Client().get(f"/slack/link/?t={link_token(ANA)}")
    assert response.status_code == 302 and "/accounts/login/" in response["Location"]


def test_admins_link_anyone_and_are_recorded(client: Client) -> None:
    admin = User.objects.create_superuser("root", password="root-pass-123456789")
    client.force_login(admin)
    target = User.objects.create_user("carol")
    response = client.post(
        "/admin/breakers/slackuser/add/",
        {"team_id": "T0BREAKERS", "slack_user_id": "U0CAROL001", "slack_name": "carol",
         "user": target.pk},
    )  # fmt: skip
    assert response.status_code == 302, response.content.decode()[:2000]
    assert SlackUser.objects.get().linked_by == "admin:root"


def test_bot_mode_without_a_signing_secret_or_channel_is_a_check_error(settings: Any) -> None:
    settings.SLACK_BOT_TOKEN = "xoxb-1"
    settings.SLACK_SIGNING_SECRET = ""
    settings.SLACK_CHANNEL = ""
    settings.SLACK_API_URL = "http://slack.example.com/api/"
    ids = {message.id for message in checks.run_checks()}
    assert {"breakers.E010", "breakers.E011", "breakers.E012"} <= ids
    settings.SLACK_SIGNING_SECRET, settings.SLACK_CHANNEL = "s3cret", "#agent-tools"
    settings.SLACK_API_URL = "https://slack.com/api/"
    assert not {"breakers.E010", "breakers.E011", "breakers.E012"} & {
        message.id for message in checks.run_checks()
    }


def test_a_silenced_tool_opening_again_is_recorded_not_sent(
    slack_server: FakeSlackServer, fleet_redis: Any
) -> None:
    AlertChannel.objects.create(name="oncall", webhook_url=slack_server.webhook_url)
    tool = Tool.objects.create(name="web_search")
    ToolSilence.objects.create(
        tool=tool, until=timezone.now() + timedelta(hours=1), set_by="@ana via Slack"
    )
    open_tool("web_search", timezone.now())
    assert list(Alert.objects.values_list("kind", "state")) == [("opened", AlertState.SILENCED)]
