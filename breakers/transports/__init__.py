"""Integrations are transports (healthchecks' ``hc/api/transports.py`` shape).

A transport delivers one already-built message to one destination and either returns or raises
:class:`TransportError`. It never retries and never sleeps: retries, backoff and rate limiting
belong to the caller (the Celery delivery task), which counts attempts on the alert row. One
provider per module; this package holds only the shared base.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from breakers.transports.slack_messages import SlackMessage

__all__ = ("Transport", "TransportError")


class TransportError(Exception):
    """A message was not delivered.

    ``permanent``: sending the same message again cannot succeed (stop retrying).
    ``retry_after``: seconds the destination asked us to wait (429 ``Retry-After``), if it said.
    ``channel_broken``: the destination itself is gone or refuses us (removed webhook, revoked
    token, archived channel), as opposed to this one message being rejected; the dashboard shows
    it on the channel.
    ``code``: a short machine-readable reason (Slack's error string, ``http_503``, ``timeout``…).
    """

    def __init__(
        self,
        message: str,
        permanent: bool = False,
        retry_after: float | None = None,
        *,
        channel_broken: bool = False,
        code: str = "",
    ) -> None:
        super().__init__(message)
        self.message = message
        self.permanent = permanent
        self.retry_after = retry_after
        # A broken channel can never take this message, so it is permanent by definition.
        self.channel_broken = channel_broken
        if channel_broken:
            self.permanent = True
        self.code = code

    def __repr__(self) -> str:
        return (
            f"TransportError({self.message!r}, permanent={self.permanent}, "
            f"retry_after={self.retry_after}, channel_broken={self.channel_broken}, "
            f"code={self.code!r})"
        )


class Transport:
    """Delivers one message to one destination. Subclasses implement :meth:`notify`."""

    def notify(self, message: SlackMessage) -> None:
        """Deliver ``message`` once; raise :class:`TransportError` when it was not delivered."""
        raise NotImplementedError
