"""System checks for the alert settings: a configuration mistake shows at start-up, with an id."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.checks import CheckMessage, Error, register

from breakers.transports.slack import validate_webhook_url


@register()
def check_alert_settings(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    errors: list[CheckMessage] = []
    url = settings.SLACK_WEBHOOK_URL
    if url.strip():
        try:
            validate_webhook_url(url)
        except ValueError as exc:
            # The message says what is wrong, never the URL itself: it is a secret.
            errors.append(
                Error(f"SLACK_WEBHOOK_URL is not a webhook URL: {exc}", id="breakers.E001")
            )
    if not settings.SLACK_MIN_INTERVAL_SECONDS > 0:
        errors.append(Error("SLACK_MIN_INTERVAL_SECONDS must be positive", id="breakers.E002"))
    if settings.SLACK_MAX_ATTEMPTS < 1:
        errors.append(Error("SLACK_MAX_ATTEMPTS must be at least 1", id="breakers.E003"))
    if not 0 < settings.SLACK_RETRY_BASE_SECONDS <= settings.SLACK_RETRY_MAX_SECONDS:
        errors.append(
            Error(
                "need 0 < SLACK_RETRY_BASE_SECONDS <= SLACK_RETRY_MAX_SECONDS", id="breakers.E004"
            )
        )
    if settings.ALERT_FLAP_COUNT < 2 or not settings.ALERT_FLAP_WINDOW_SECONDS > 0:
        errors.append(
            Error(
                "ALERT_FLAP_COUNT must be at least 2 and ALERT_FLAP_WINDOW_SECONDS positive",
                id="breakers.E005",
            )
        )
    return errors
