"""Login throttling: failed logins are counted per username and per client address in Redis.

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
from django.http import HttpResponse

from breakers.access.ops_endpoints import client_address, ops_redis

__all__ = ("ThrottledAuthenticationForm", "ThrottledLoginView", "client_address")

logger = logging.getLogger(__name__)
THROTTLED = "throttled"


def _keys(username: str, address: str) -> list[tuple[str, int]]:
    user = hashlib.sha256(username.strip().lower().encode()).hexdigest()[:32]
    return [
        (f"bp:login:fail:user:{user}", settings.LOGIN_MAX_FAILURES),
        (f"bp:login:fail:addr:{address}", settings.LOGIN_MAX_FAILURES_PER_ADDRESS),
    ]


def _count_attempt(keys: list[tuple[str, int]]) -> int:
    """Count this attempt as a failure before its password is checked; the seconds until a login
    may be tried again if that put a key past its limit (0: check the password).

    Counting first, in one round trip whose INCR answers each request with its own count, is
    what makes the limit hold for a burst: of 100 concurrent attempts only the first ``limit``
    see a count within it (a check, then an increment after the hash, let 23 through).
    """
    window = settings.LOGIN_FAILURE_WINDOW_SECONDS
    with ops_redis().pipeline(transaction=False) as pipe:
        for key, _limit in keys:
            pipe.incr(key)
            pipe.expire(key, window, nx=True)  # the window starts at the first attempt
            pipe.ttl(key)
        replies = pipe.execute()
    wait = 0
    for (_key, limit), count, ttl in zip(keys, replies[::3], replies[2::3], strict=True):
        if int(count) > limit:
            wait = max(wait, int(ttl), 1)
    return wait


def _forgive(keys: list[tuple[str, int]]) -> None:
    """The attempt counted in advance logged in: it was not a failure."""
    with ops_redis().pipeline(transaction=False) as pipe:
        for key, _limit in keys:
            pipe.decr(key)
        pipe.execute()


class ThrottledAuthenticationForm(AuthenticationForm):
    def clean(self) -> dict[str, Any]:
        username = self.cleaned_data.get("username") or ""
        keys = _keys(username, client_address(self.request)) if self.request else []
        try:
            wait = _count_attempt(keys) if keys else 0
        except redis.RedisError:
            logger.exception("login throttling is off: Redis unavailable")
            return super().clean()
        if wait:
            minutes = max(1, round(wait / 60))
            raise ValidationError(
                f"Too many failed logins. Try again in about {minutes} minute(s).",
                code=THROTTLED,
            )
        cleaned = super().clean()  # a wrong password raises: its attempt stays counted
        try:
            _forgive(keys)
        except redis.RedisError:
            logger.exception("could not uncount a successful login: Redis unavailable")
        return cleaned


class ThrottledLoginView(auth_views.LoginView):
    form_class = ThrottledAuthenticationForm

    def form_invalid(self, form: AuthenticationForm) -> HttpResponse:
        response = super().form_invalid(form)
        if any(error.code == THROTTLED for error in form.non_field_errors().as_data()):
            response.status_code = 429
        return response
