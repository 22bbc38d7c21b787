"""System checks for the alert settings: a configuration mistake shows at start-up, with an id."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.checks import CheckMessage, Error, register

from breakers.transports.slack import validate_webhook_url
from breakers.transports.slack_bot import validate_api_url


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
    errors += _bot_mode_errors()
    if settings.ALERT_FLAP_COUNT < 2 or not settings.ALERT_FLAP_WINDOW_SECONDS > 0:
        errors.append(
            Error(
                "ALERT_FLAP_COUNT must be at least 2 and ALERT_FLAP_WINDOW_SECONDS positive",
                id="breakers.E005",
            )
        )
    return errors


def _bot_mode_errors() -> list[CheckMessage]:
    """Bot mode (SLACK_BOT_TOKEN) puts buttons in Slack: without the signing secret their
    presses could not be verified, so the whole mode refuses to start half-configured."""
    if not settings.SLACK_BOT_TOKEN.strip():
        return []
    errors: list[CheckMessage] = []
    if not settings.SLACK_SIGNING_SECRET.strip():
        errors.append(
            Error(
                "SLACK_BOT_TOKEN is set but SLACK_SIGNING_SECRET is not: button presses from "
                "Slack could not be verified",
                hint="copy the app's Signing Secret (Basic Information) into SLACK_SIGNING_SECRET",
                id="breakers.E010",
            )
        )
    if not settings.SLACK_CHANNEL.strip():
        errors.append(
            Error(
                "SLACK_BOT_TOKEN is set but SLACK_CHANNEL is not: incident messages need a channel",
                hint="a channel id (C0123…) or #name the bot is a member of",
                id="breakers.E011",
            )
        )
    try:
        validate_api_url(settings.SLACK_API_URL)
    except ValueError as exc:
        errors.append(Error(f"SLACK_API_URL is not usable: {exc}", id="breakers.E012"))
    return errors


# The fleet settings an operator deploys with, bounded like the per-tool policy fields
# (``breakers.models.POLICY_BOUNDS``): an unbounded one once made Redis write numbers in
# exponent form and stopped every tool's recovery.
_SETTING_BOUNDS: dict[str, tuple[str | None, float, float]] = {
    "BREAKER_THRESHOLD": ("threshold", 0, 0),
    "BREAKER_MIN_WORKERS": ("min_workers", 0, 0),
    "BREAKER_COOLDOWN_SECONDS": ("cooldown_seconds", 0, 0),
    "BREAKER_MAX_COOLDOWN_SECONDS": ("max_cooldown_seconds", 0, 0),
    "BREAKER_SPEND_AMOUNT_USD": ("spend_amount_usd", 0, 0),
    "BREAKER_SPEND_WINDOW_SECONDS": ("spend_window_seconds", 0, 0),
    "BREAKER_TRIAL_LEASE_SECONDS": (None, 1.0, 3600.0),
    "BREAKER_DEDUPE_TTL_SECONDS": (None, 60.0, 30 * 86_400.0),
    "BREAKER_STALE_OUTCOME_SECONDS": (None, 0.0, 3600.0),
    "BREAKER_TICK_SECONDS": (None, 0.1, 60.0),
}


@register()
def check_breaker_settings(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    from breakers.models import POLICY_BOUNDS

    errors: list[CheckMessage] = []
    for name, (policy_field, low, high) in _SETTING_BOUNDS.items():
        if policy_field is not None:
            low, high = POLICY_BOUNDS[policy_field]
        value = getattr(settings, name)
        if not low <= value <= high:
            errors.append(
                Error(
                    f"{name} must be between {low:g} and {high:g}, got {value!r}",
                    id="breakers.E006",
                )
            )
    if not settings.BREAKER_COOLDOWN_SECONDS <= settings.BREAKER_MAX_COOLDOWN_SECONDS:
        errors.append(
            Error(
                "need BREAKER_COOLDOWN_SECONDS <= BREAKER_MAX_COOLDOWN_SECONDS", id="breakers.E007"
            )
        )
    return errors
