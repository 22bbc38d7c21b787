"""Answer one Slack user alone: an ephemeral message through the press's ``response_url``."""

from __future__ import annotations

import logging
from collections.abc import Sequence

from django.conf import settings
from slack_sdk.webhook import WebhookClient

from breakers.slack.linking import SlackIdentity, link_url, suggested_user
from breakers.slack.sync import bot_mode
from breakers.transports.slack import validate_webhook_url
from breakers.transports.slack_bot import SlackBot
from breakers.transports.slack_messages import escape_mrkdwn

__all__ = ("ephemeral_text", "send_ephemeral")

logger = logging.getLogger(__name__)
_sdk_logger = logging.getLogger("breakers.slack.respond.sdk")
_sdk_logger.setLevel(logging.WARNING)


def ephemeral_text(text: str, suggest: Sequence[str] | None, *, bot: SlackBot | None) -> str:
    """``text``, and for an unlinked user the link to link themselves (and a hint, by email,
    of which dashboard user to log in as)."""
    out = escape_mrkdwn(text, limit=2000)
    if suggest and len(suggest) == 3:
        identity = SlackIdentity(team_id=suggest[0], user_id=suggest[1], name=suggest[2])
        out += f"\n<{link_url(identity)}|Link my Slack account> (log in to the dashboard first)."
        if bot is not None:
            user = suggested_user(user_id=identity.user_id, bot=bot)
            if user is not None:
                name = escape_mrkdwn(user.get_username(), limit=100, one_line=True)
                out += (
                    f"\nYour Slack email matches the dashboard user *{name}*: if that is you, "
                    "log in as them and confirm. Nothing is linked until you do."
                )
    return out


def send_ephemeral(response_url: str, text: str, suggest: Sequence[str] | None = None) -> bool:
    """Post the answer; False (logged) when it could not be delivered. Never retried: an
    answer minutes late would confuse more than it helps."""
    try:
        url = validate_webhook_url(response_url)
    except ValueError:
        return False
    bot = SlackBot.from_settings() if bot_mode() else None
    body = ephemeral_text(text, suggest, bot=bot)
    client = WebhookClient(
        url,
        timeout=float(settings.SLACK_TIMEOUT_SECONDS),  # type: ignore[arg-type]  # a float works
        logger=_sdk_logger,
        retry_handlers=[],
    )
    try:
        response = client.send_dict(
            {"response_type": "ephemeral", "replace_original": False, "text": body}
        )
    except (OSError, ValueError) as exc:
        logger.warning("Slack answer not delivered: %s", type(exc).__name__)
        return False
    return response.status_code == 200
