"""Slack's Web API with a bot token, through ``slack_sdk``'s ``WebClient``: post and update one
message, open a modal, look a user up. Every call has a timeout and one attempt; failures become
``TransportError`` (retries belong to the caller). ``SLACK_API_URL`` may point it at the local
stand-in (https, or plain http to a loopback address, like webhook URLs).
"""

from __future__ import annotations

import http.client
import logging
import math
from dataclasses import dataclass
from typing import Any
from urllib.error import URLError

from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError, SlackClientError

from breakers.transports import TransportError
from breakers.transports.slack import CHANNEL_ERRORS, parse_retry_after, validate_webhook_url
from breakers.transports.slack_messages import SlackMessage

__all__ = ("PostedMessage", "SlackBot", "validate_api_url")

# slack_sdk logs request bodies and headers at DEBUG: its own logger, pinned above DEBUG.
_sdk_logger = logging.getLogger("breakers.transports.slack_bot.sdk")
_sdk_logger.setLevel(logging.WARNING)
# The message is gone (deleted by someone): post a new one instead of updating.
MESSAGE_GONE = frozenset({"message_not_found", "cant_update_message", "edit_window_closed"})
# The press's trigger_id is used or older than 3 s: the modal cannot open any more.
TRIGGER_GONE = frozenset({"expired_trigger_id", "invalid_trigger_id", "exchanged_trigger_id"})


def validate_api_url(url: str) -> str:
    """``url`` with a trailing slash if it can be Slack's Web API; ``ValueError`` otherwise."""
    url = validate_webhook_url(url)  # the same rules: https, or http to loopback; a path
    return url if url.endswith("/") else url + "/"


@dataclass(frozen=True, slots=True)
class PostedMessage:
    channel: str
    ts: str


class SlackBot:
    """One bot token's Web API client."""

    def __init__(self, token: str, *, base_url: str, timeout: float) -> None:
        if not token.strip():
            raise ValueError("a bot token is required")
        if not (math.isfinite(timeout) and timeout > 0):
            raise ValueError(f"timeout must be a positive number of seconds, got {timeout!r}")
        self.timeout = timeout
        self.client = WebClient(
            token=token.strip(),
            base_url=validate_api_url(base_url),
            timeout=timeout,  # type: ignore[arg-type]  # annotated int, used as a float
            logger=_sdk_logger,
            retry_handlers=[],
        )

    def __repr__(self) -> str:
        return f"SlackBot({self.client.base_url!r}, timeout={self.timeout})"  # never the token

    @classmethod
    def from_settings(cls, *, timeout: float | None = None) -> SlackBot:
        from django.conf import settings

        return cls(
            settings.SLACK_BOT_TOKEN,
            base_url=settings.SLACK_API_URL,
            timeout=float(timeout if timeout is not None else settings.SLACK_TIMEOUT_SECONDS),
        )

    def post(self, channel: str, message: SlackMessage) -> PostedMessage:
        data = self._call("chat_postMessage", channel=channel, **message.as_payload())
        return PostedMessage(channel=str(data.get("channel") or channel), ts=str(data["ts"]))

    def update(self, posted: PostedMessage, message: SlackMessage) -> None:
        payload = message.as_payload()
        payload.pop("unfurl_links", None)  # chat.update takes no unfurl options
        payload.pop("unfurl_media", None)
        # An empty list replaces the other kind of body: a card never keeps stale blocks.
        payload.setdefault("blocks", [])
        payload.setdefault("attachments", [])
        self._call("chat_update", channel=posted.channel, ts=posted.ts, **payload)

    def open_view(self, trigger_id: str, view: dict[str, Any]) -> None:
        self._call("views_open", trigger_id=trigger_id, view=view)

    def user_email(self, user_id: str) -> str:
        """The user's profile email ('' when the token lacks ``users:read.email``)."""
        data = self._call("users_info", user=user_id)
        profile = (data.get("user") or {}).get("profile") or {}
        return str(profile.get("email") or "")

    def _call(self, method: str, **kwargs: Any) -> dict[str, Any]:
        try:
            response = getattr(self.client, method)(**kwargs)
        except SlackApiError as exc:
            raise self._api_error(exc) from None
        except TimeoutError:
            raise TransportError(
                f"Slack did not answer within {self.timeout:g} s", code="timeout"
            ) from None
        except URLError as exc:
            if isinstance(exc.reason, TimeoutError):
                raise TransportError(
                    f"Slack did not answer within {self.timeout:g} s", code="timeout"
                ) from None
            raise TransportError("could not reach Slack", code="connection") from None
        except (OSError, http.client.HTTPException) as exc:
            raise TransportError(
                f"connection to Slack failed: {type(exc).__name__}", code="connection"
            ) from None
        except (SlackClientError, ValueError) as exc:  # not JSON, or refused by the client
            raise TransportError(
                f"unexpected answer from Slack: {exc}", code="bad_answer"
            ) from None
        return dict(response.data) if isinstance(response.data, dict) else {}

    def _api_error(self, exc: SlackApiError) -> TransportError:
        response = exc.response
        status = int(getattr(response, "status_code", 0) or 0)
        data = response.data if isinstance(response.data, dict) else {}
        code = str(data.get("error") or f"http_{status}")[:64]
        if status == 429 or code == "ratelimited":
            headers = {k.lower(): v for k, v in (response.headers or {}).items()}
            retry = headers.get("retry-after")
            retry_after = parse_retry_after(retry[0] if isinstance(retry, list) else retry)
            return TransportError(
                "rate limited by Slack", retry_after=retry_after, code="rate_limited"
            )
        if status >= 500:
            return TransportError(f"Slack answered {status}", code=code)
        if code in CHANNEL_ERRORS or code in {
            "not_authed",
            "invalid_auth",
            "account_inactive",
            "token_revoked",
        }:
            return TransportError(f"Slack refused the bot: {code}", channel_broken=True, code=code)
        return TransportError(f"Slack refused the call: {code}", permanent=True, code=code)
