"""Bearer-token auth for the API: ``AgentAuth`` (any active token) and ``OperatorAuth``.

``request.auth`` is then the ``AgentToken`` row. Tokens are this app's (``runs.models``).
"""

from __future__ import annotations

from datetime import timedelta

from django.http import HttpRequest
from django.utils import timezone
from ninja.errors import AuthorizationError
from ninja.security import HttpBearer

from runs.models import AgentToken, hash_token

__all__ = ("AgentAuth", "OperatorAuth")

# last_used_at is for people ("is this token still in use?"): one write a minute is plenty,
# and ingest should not pay an UPDATE per batch for it.
_LAST_USED_GRANULARITY = timedelta(minutes=1)
_MAX_TOKEN_CHARS = 200


class AgentAuth(HttpBearer):
    """``Authorization: Bearer <token>`` with an active (not revoked) agent or operator token."""

    def authenticate(self, request: HttpRequest, token: str) -> AgentToken | None:
        if not token or len(token) > _MAX_TOKEN_CHARS:
            return None
        try:
            row = AgentToken.objects.active().get(token_hash=hash_token(token))
        except AgentToken.DoesNotExist:
            return None
        self.check(row)
        now = timezone.now()
        if row.last_used_at is None or now - row.last_used_at > _LAST_USED_GRANULARITY:
            AgentToken.objects.filter(pk=row.pk).update(last_used_at=now)
        return row

    def check(self, token: AgentToken) -> None:
        """Hook for narrower classes: raise to refuse a valid token."""


class OperatorAuth(AgentAuth):
    """Like ``AgentAuth`` but only for operator tokens; an agent token gets 403."""

    def check(self, token: AgentToken) -> None:
        if not token.is_operator:
            raise AuthorizationError(message="this action needs an operator token")
