"""The Alerts page: each Slack channel's health and every alert's delivery state.

Webhook URLs are secrets: only ``AlertChannel.masked_url`` ever reaches a page.
"""

from __future__ import annotations

from dataclasses import dataclass

from breakers.models import Alert, AlertChannel

MAX_ALERTS = 200


@dataclass(frozen=True)
class AlertsPage:
    channels: list[AlertChannel]
    alerts: list[Alert]
    truncated: bool


def alerts_page(*, state: str = "") -> AlertsPage:
    """Channels (broken first) and the newest alerts, optionally of one state: 2 queries."""
    # Broken channels first: they are what on-call must fix.
    channels = sorted(AlertChannel.objects.all(), key=lambda c: (not c.is_broken, c.name))
    alerts = Alert.objects.select_related("channel", "tool").order_by("-created_at", "-id")
    if state:
        alerts = alerts.filter(state=state)
    rows = list(alerts[: MAX_ALERTS + 1])
    return AlertsPage(channels=channels, alerts=rows[:MAX_ALERTS], truncated=len(rows) > MAX_ALERTS)
