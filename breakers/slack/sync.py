"""Make Slack show an incident's card as it is now: post it once, then ``chat.update`` it.

The message row is locked while Slack is called (one HTTP call, bounded by its timeout), so two
syncs of one incident never post two messages; each renders the rows as they are when it runs,
so the last sync to finish shows the newest state whatever order the events came in.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Literal

from django.conf import settings
from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from breakers.alerts.delivery import retry_delay
from breakers.alerts.silences import active_silence
from breakers.models import Incident, SlackIncidentMessage
from breakers.slack.cards import incident_card
from breakers.transports import TransportError
from breakers.transports.slack_bot import MESSAGE_GONE, PostedMessage, SlackBot
from breakers.transports.slack_cards import build_incident_card

__all__ = ("SyncResult", "bot_mode", "cards_to_resync", "sync_incident_message")

# A card sync is queued on commit and done within a second; one still missing or failed this
# long after lost its task (broker down at commit, worker lost): beat's sweep queues it again.
RESYNC_AFTER_SECONDS = 30.0
RESYNC_BATCH = 100

logger = logging.getLogger(__name__)

SyncOutcome = Literal["posted", "updated", "silenced", "skipped", "retry", "failed"]


@dataclass(frozen=True, slots=True)
class SyncResult:
    outcome: SyncOutcome
    retry_in: float | None = None
    detail: str = ""


def bot_mode() -> bool:
    return bool(settings.SLACK_BOT_TOKEN.strip() and settings.SLACK_CHANNEL.strip())


def sync_incident_message(
    *, incident_id: int, bot: SlackBot | None = None, now: datetime | None = None
) -> SyncResult:
    if not bot_mode() and bot is None:
        return SyncResult("skipped", detail="bot mode is off")
    incident = Incident.objects.select_related("tool", "opened_by").filter(pk=incident_id).first()
    if incident is None:
        return SyncResult("skipped", detail="no such incident")
    row, _ = SlackIncidentMessage.objects.get_or_create(incident=incident)
    bot = bot or SlackBot.from_settings()
    with transaction.atomic():
        row = SlackIncidentMessage.objects.select_for_update().get(pk=row.pk)
        if not row.ts and incident.closed_at is None:
            silence = active_silence(incident.tool_id, now=now)
            if silence is not None and silence.incident_id != incident.pk:
                # A repeat alert while the tool is silenced: recorded, not posted.
                row.last_error = f"not posted: {incident.tool.name} is silenced by {silence.set_by}"
                row.save(update_fields=["last_error"])
                return SyncResult("silenced", detail=row.last_error)
        message = build_incident_card(incident_card(incident, now=now))
        try:
            if row.ts:
                try:
                    bot.update(PostedMessage(row.channel, row.ts), message)
                    outcome: SyncOutcome = "updated"
                except TransportError as exc:
                    if exc.code not in MESSAGE_GONE:
                        raise
                    row.ts = ""  # deleted in Slack: the incident gets a new message
            if not row.ts:
                posted = bot.post(settings.SLACK_CHANNEL.strip(), message)
                row.channel, row.ts, row.posted_at = posted.channel, posted.ts, timezone.now()
                outcome = "posted"
        except TransportError as exc:
            return _failed(row, exc)
        row.updated_at, row.last_error, row.attempts = timezone.now(), "", 0
        row.save(
            update_fields=["channel", "ts", "posted_at", "updated_at", "last_error", "attempts"]
        )
    return SyncResult(outcome)


def _failed(row: SlackIncidentMessage, exc: TransportError) -> SyncResult:
    error = f"{exc.code}: {exc.message}"[:2000] if exc.code else exc.message[:2000]
    attempts = row.attempts + 1
    # A permanent error uses up the attempts: the sweep never tries that card again.
    used = int(settings.SLACK_MAX_ATTEMPTS) if exc.permanent else attempts
    SlackIncidentMessage.objects.filter(pk=row.pk).update(attempts=used, last_error=error)
    if exc.permanent or attempts >= int(settings.SLACK_MAX_ATTEMPTS):
        logger.warning("Slack card of incident %s not sent: %s", row.incident_id, error)
        return SyncResult("failed", detail=error)
    delay = exc.retry_after if exc.retry_after is not None else retry_delay(attempts)
    return SyncResult("retry", retry_in=delay, detail=error)


def cards_to_resync(*, now: datetime | None = None) -> list[int]:
    """Incidents whose card Slack should show but does not: an open incident with no message
    (or one whose last sync failed), older than ``RESYNC_AFTER_SECONDS``; none outside bot mode.

    A silenced tool's incident is left alone while the silence lasts (its card is deliberately
    not posted); once the silence is over, an incident still open gets its card.
    """
    if not bot_mode():
        return []
    now = now or timezone.now()
    cutoff = now - timedelta(seconds=RESYNC_AFTER_SECONDS)
    unposted = Incident.objects.filter(closed_at__isnull=True, opened_at__lte=cutoff).filter(
        Q(slack_message__isnull=True) | Q(slack_message__ts="", slack_message__last_error="")
    )
    failed = (
        SlackIncidentMessage.objects.exclude(last_error="")
        .exclude(last_error__startswith="not posted:")
        .filter(attempts__lt=int(settings.SLACK_MAX_ATTEMPTS), incident__opened_at__lte=cutoff)
    )
    held = SlackIncidentMessage.objects.filter(
        ts="", last_error__startswith="not posted:", incident__closed_at__isnull=True
    ).values_list("incident_id", "incident__tool_id")[:RESYNC_BATCH]
    ids = set(unposted.values_list("pk", flat=True)[:RESYNC_BATCH])
    ids |= set(failed.values_list("incident_id", flat=True)[:RESYNC_BATCH])
    ids |= {pk for pk, tool_id in held if active_silence(tool_id, now=now) is None}
    return sorted(ids)[:RESYNC_BATCH]
