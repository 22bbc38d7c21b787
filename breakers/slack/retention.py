"""Slack's press records (``SlackAction``) are kept ``RETENTION_SLACK_ACTIONS_DAYS``: each done
press has its audit row (``OperatorAction``, kept), so the press row only explains a recent
refusal. Beat runs ``breakers.purge_slack_actions`` with the other retention sweeps."""

from __future__ import annotations

from datetime import datetime, timedelta

from django.conf import settings
from django.utils import timezone

from breakers.models import SlackAction
from runs.retention import PurgeResult, purge_table

__all__ = ("purge_slack_actions",)


def purge_slack_actions(
    *,
    now: datetime | None = None,
    batch_size: int | None = None,
    max_batches: int | None = None,
) -> PurgeResult:
    """Delete the press records received before their retention, in batches."""
    now = now or timezone.now()
    result = PurgeResult()
    purge_table(
        SlackAction,
        "received_at",
        now - timedelta(days=settings.RETENTION_SLACK_ACTIONS_DAYS),
        batch=batch_size or settings.RETENTION_BATCH_SIZE,
        max_batches=max_batches or settings.RETENTION_MAX_BATCHES,
        into=result,
    )
    return result
