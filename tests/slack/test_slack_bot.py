"""``SlackBot`` through the real ``slack_sdk`` WebClient against the stand-in: what Slack answers
becomes a delivered message or a TransportError that says whether trying again can help."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from breakers.transports import TransportError
from breakers.transports.slack_bot import PostedMessage, SlackBot, validate_api_url
from breakers.transports.slack_cards import IncidentCard, build_incident_card
from scripts.slack_standin import SlackStandIn
from scripts.testing.processes import free_port
from tests.slack.support import TOKEN

CARD = build_incident_card(
    IncidentCard(incident_id=1, tool="web_search", state="open", opened_at=datetime.now(UTC))
)


def test_post_then_update_in_place(slack_standin: SlackStandIn) -> None:
    slack_standin.reset()
    bot = SlackBot(TOKEN, base_url=slack_standin.api_url, timeout=5)
    posted = bot.post("#agent-tools", CARD)
    assert posted.channel == "C0AGENTS01"
    bot.update(posted, CARD)
    message = slack_standin.message(posted.ts)
    assert message is not None and message.edits == 1
    assert message.payload["attachments"][0]["color"] == "#E01E5A"
    assert [m for m, _ in slack_standin.calls] == ["chat.postMessage", "chat.update"]


@pytest.mark.parametrize(
    ("token", "channel", "code", "broken"),
    [
        ("xoxb-wrong", "#agent-tools", "invalid_auth", True),
        (TOKEN, "#no-such-channel", "channel_not_found", True),
    ],
)
def test_refusals_are_permanent_and_say_why(
    slack_standin: SlackStandIn, token: str, channel: str, code: str, broken: bool
) -> None:
    with pytest.raises(TransportError) as caught:
        SlackBot(token, base_url=slack_standin.api_url, timeout=5).post(channel, CARD)
    assert caught.value.code == code and caught.value.permanent
    assert caught.value.channel_broken is broken


def test_an_update_of_a_deleted_message_says_message_not_found(slack_standin: SlackStandIn) -> None:
    bot = SlackBot(TOKEN, base_url=slack_standin.api_url, timeout=5)
    with pytest.raises(TransportError) as caught:
        bot.update(PostedMessage(channel="C0AGENTS01", ts="1.000000"), CARD)
    assert caught.value.code == "message_not_found"


def test_nothing_listening_is_a_retryable_connection_error() -> None:
    bot = SlackBot(TOKEN, base_url=f"http://127.0.0.1:{free_port()}/api/", timeout=1)
    with pytest.raises(TransportError) as caught:
        bot.post("#agent-tools", CARD)
    assert caught.value.code == "connection" and not caught.value.permanent


def test_the_api_url_is_https_or_loopback_and_the_token_never_shows() -> None:
    assert validate_api_url("https://slack.com/api") == "https://slack.com/api/"
    with pytest.raises(ValueError, match="loopback"):
        validate_api_url("http://slack.example.com/api/")
    assert TOKEN not in repr(SlackBot(TOKEN, base_url="https://slack.com/api/", timeout=1))
