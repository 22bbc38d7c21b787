"""Slack alerts on fleet breaker events: made with the transitions (creation), worded from
what happened (facts), delivered once each (delivery), and swept on beat (sweep).

The rules and their reasons: the Slack alerts records in docs/adr/, from
docs/adr/0048-alert-rows-in-the-transition-s.md.
"""

from __future__ import annotations

from breakers.alerts.creation import (
    SETTINGS_CHANNEL_NAME,
    alert_channels,
    alerts_for_fleet_changes,
    enqueue_on_commit,
    ensure_settings_channel,
)
from breakers.alerts.delivery import Delivery, channel_limiter, deliver_alert, retry_delay
from breakers.alerts.facts import build_alert_message, incident_cost
from breakers.alerts.sweep import SweepResult, sweep_alerts

__all__ = [
    "SETTINGS_CHANNEL_NAME",
    "Delivery",
    "SweepResult",
    "alert_channels",
    "alerts_for_fleet_changes",
    "build_alert_message",
    "channel_limiter",
    "deliver_alert",
    "enqueue_on_commit",
    "ensure_settings_channel",
    "incident_cost",
    "retry_delay",
    "sweep_alerts",
]
