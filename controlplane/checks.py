"""System checks of the deployment's settings, with ids (the apps' own are in their checks.py)."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.checks import CheckMessage, Error, Warning, register

from controlplane.env import weak_secret_key


@register()
def check_secret_key(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    """A production SECRET_KEY that is short, repetitive or guessable (controlplane.env).

    The settings module refuses such a key at import already, because gunicorn and Celery run no
    checks; this check holds a key set any other way (another settings module, an override).
    """
    if settings.DEBUG or not (why := weak_secret_key(settings.SECRET_KEY)):
        return []
    return [Error(f"SECRET_KEY is too weak for production: {why}", id="controlplane.E001")]


@register(deploy=True)
def check_trusted_proxies(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    """Behind a TLS proxy with no TRUSTED_PROXIES every client has the proxy's address: one
    address's failed logins (LOGIN_MAX_FAILURES_PER_ADDRESS) then lock everyone out."""
    if not settings.TLS_PROXY or settings.TRUSTED_PROXIES:
        return []
    return [
        Warning(
            "TLS_PROXY is on but TRUSTED_PROXIES is empty: every client is seen as the proxy",
            hint="set TRUSTED_PROXIES to the proxy's networks (and CLIENT_ADDRESS_HEADER)",
            id="controlplane.W001",
        )
    ]
