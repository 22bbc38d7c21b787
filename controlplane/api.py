"""The one HTTP API (django-ninja) under ``/api/v1/``, its docs page and its bearer-token auth.

``AgentAuth`` accepts any active agent token; ``OperatorAuth`` only tokens made with
``--operator``. ``request.auth`` is then the ``AgentToken`` row. Routers are listed in ``ROUTERS``
and imported when the URLconf first asks for ``api.urls``, not when this module is imported, so
a router module can import ``AgentAuth``/``OperatorAuth``/``api`` from here without a cycle.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.db import InterfaceError, OperationalError
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.utils import timezone
from django.utils.module_loading import import_string
from ninja import NinjaAPI
from ninja.errors import AuthorizationError
from ninja.security import HttpBearer

from runs.models import AgentToken, hash_token

__all__ = ("ROUTERS", "AgentAuth", "OperatorAuth", "api", "service_unavailable")

# (prefix, dotted path of a ninja Router). Each app adds its own line.
ROUTERS: list[tuple[str, str]] = [
    ("", "runs.api.router"),
    ("", "breakers.api.router"),
]

# last_used_at is for people ("is this token still in use?"): one write a minute is plenty,
# and ingest should not pay an UPDATE per batch for it.
_LAST_USED_GRANULARITY = timedelta(minutes=1)
_MAX_TOKEN_CHARS = 200
DB_UNAVAILABLE_RETRY_AFTER_S = 5


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


def service_unavailable(detail: str, *, retry_after: int) -> HttpResponse:
    response = JsonResponse({"detail": detail}, status=503)
    response["Retry-After"] = str(retry_after)
    return response


class ControlPlaneAPI(NinjaAPI):
    _routers_mounted = False

    @property
    def urls(self) -> Any:
        if not self._routers_mounted:
            self._routers_mounted = True
            for prefix, dotted in ROUTERS:
                self.add_router(prefix, import_string(dotted))
        return super().urls


api = ControlPlaneAPI(
    title="Breaker Panel control plane",
    version="1",
    description="Agents report run events and read the fleet breaker state. See docs/api.md.",
    urls_namespace="api-v1",
    docs_url="/docs",
)


@api.exception_handler(OperationalError)
@api.exception_handler(InterfaceError)
def _database_unavailable(request: HttpRequest, exc: Exception) -> HttpResponse:
    # The database is down, overloaded (lock/statement timeout) or chose this transaction as a
    # deadlock victim: the transaction was rolled back, so resending is safe.
    return service_unavailable(
        "database unavailable, nothing was written; retry later",
        retry_after=DB_UNAVAILABLE_RETRY_AFTER_S,
    )
