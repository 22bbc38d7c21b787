"""Login throttling: wrong passwords are counted per username and per client address in Redis.

Past the limit every login for that username (or from that address) is refused, the right
password included, until the window has passed; the form says so and the page answers 429.
If Redis cannot be reached the login works unthrottled (logged): operators must be able to get
in during an outage, which is when Redis may be the thing that is down.
"""

from __future__ import annotations

import hashlib
import logging
from typing import Any

import redis
from django.conf import settings
from django.contrib.auth import views as auth_views
from django.contrib.auth.forms import AuthenticationForm
from django.core.exceptions import ValidationError
from django.http import HttpRequest, HttpResponse

from breakers.access.ops_endpoints import ops_redis

__all__ = ("ThrottledAuthenticationForm", "ThrottledLoginView", "client_address")

logger = logging.getLogger(__name__)
THROTTLED = "throttled"


def client_address(request: HttpRequest) -> str:
    """REMOTE_ADDR, or behind the TLS proxy the address it appended to X-Forwarded-For."""
    if settings.TLS_PROXY and (forwarded := request.META.get("HTTP_X_FORWARDED_FOR")):
        return forwarded.rsplit(",", 1)[-1].strip()
    return str(request.META.get("REMOTE_ADDR", ""))


def _keys(username: str, address: str) -> list[tuple[str, int]]:
    user = hashlib.sha256(username.strip().lower().encode()).hexdigest()[:32]
    return [
        (f"bp:login:fail:user:{user}", settings.LOGIN_MAX_FAILURES),
        (f"bp:login:fail:addr:{address}", settings.LOGIN_MAX_FAILURES_PER_ADDRESS),
    ]


def _locked_for(keys: list[tuple[str, int]]) -> int:
    """Seconds until a login may be tried again (0: now)."""
    client = ops_redis()
    with client.pipeline(transaction=False) as pipe:
        for key, _limit in keys:
            pipe.get(key)
            pipe.ttl(key)
        replies = pipe.execute()
    wait = 0
    for (_key, limit), count, ttl in zip(keys, replies[::2], replies[1::2], strict=True):
        if count is not None and int(count) >= limit:
            wait = max(wait, int(ttl), 1)
    return wait


def _record_failure(keys: list[tuple[str, int]]) -> None:
    window = settings.LOGIN_FAILURE_WINDOW_SECONDS
    with ops_redis().pipeline(transaction=False) as pipe:
        for key, _limit in keys:
            pipe.incr(key)
            pipe.expire(key, window, nx=True)  # the window starts at the first failure
        pipe.execute()


class ThrottledAuthenticationForm(AuthenticationForm):
    def clean(self) -> dict[str, Any]:
        username = self.cleaned_data.get("username") or ""
        keys = _keys(username, client_address(self.request)) if self.request else []
        try:
            wait = _locked_for(keys) if keys else 0
        except redis.RedisError:
            logger.exception("login throttling is off: Redis unavailable")
            return super().clean()
        if wait:
            minutes = max(1, round(wait / 60))
            raise ValidationError(
                f"Too many failed logins. Try again in about {minutes} minute(s).",
                code=THROTTLED,
            )
        try:
            return super().clean()
        except ValidationError:
            try:
                _record_failure(keys)
            except redis.RedisError:
                logger.exception("could not count a failed login: Redis unavailable")
            raise


class ThrottledLoginView(auth_views.LoginView):
    form_class = ThrottledAuthenticationForm

    def form_invalid(self, form: AuthenticationForm) -> HttpResponse:
        response = super().form_invalid(form)
        if any(error.code == THROTTLED for error in form.non_field_errors().as_data()):
            response.status_code = 429
        return response
