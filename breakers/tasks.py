"""Celery tasks: thin wrappers that call a service. Running any of them twice is harmless (atomic
Redis steps, alert rows claimed once); beat's tick and sweep re-send what was lost.
"""

from __future__ import annotations

import logging

import redis
from celery import Task, shared_task
from django.conf import settings

from breakers import fleet_service
from breakers.alerts import delivery, sweep
from breakers.fleet_service import backlog
from breakers.observability import health
from breakers.slack import actions as slack_actions
from breakers.slack import respond as slack_respond_service
from breakers.slack import retention as slack_retention
from breakers.slack import sync as slack_sync

logger = logging.getLogger(__name__)

# A probe that waited this long in the queue is stale: the next tick sends a fresh one.
PROBE_EXPIRES_SECONDS = 60


@shared_task(name="breakers.fleet_tick", ignore_result=True)
def fleet_tick() -> int:
    # The heartbeat /readyz reads: a tick that ran proves beat, the broker and a worker work
    # (one task per tick, not two: ADR 0193's note on beat's load).
    try:
        health.write_beat_heartbeat()
    except redis.RedisError:  # a health note: the tick's own work must not wait on it
        logger.warning("fleet tick: could not write the beat heartbeat", exc_info=True)
    backlog.apply_fleet_backlog()  # first: outcomes that committed while Redis was failing
    orders = fleet_service.fleet_tick()
    for order in orders:
        fleet_probe.apply_async((order.tool, order.window), expires=PROBE_EXPIRES_SECONDS)
    return len(orders)


@shared_task(name="breakers.fleet_probe", ignore_result=True)
def fleet_probe(tool: str, window: int) -> bool:
    """True when this task made the window's probe (False: no probe, or another one had it)."""
    return fleet_service.fleet_probe(tool_name=tool, window=window) is not None


@shared_task(name="breakers.fleet_rebuild", ignore_result=True)
def fleet_rebuild() -> int:
    return fleet_service.fleet_rebuild()


@shared_task(name="breakers.deliver_alert", bind=True, ignore_result=True, max_retries=None)
def deliver_alert(self: Task, alert_id: int) -> str:
    """Deliver one alert; the service decides whether and when to try again."""
    result = delivery.deliver_alert(alert_id=alert_id)
    if result.retry_in is not None:
        raise self.retry(countdown=result.retry_in)
    return result.outcome


@shared_task(name="breakers.sweep_alerts", ignore_result=True)
def sweep_alerts() -> int:
    result = sweep.sweep_alerts()
    return result.unstuck + len(result.requeued) + result.settled


@shared_task(name="breakers.slack_sync_incident", bind=True, ignore_result=True, max_retries=None)
def slack_sync_incident(self: Task, incident_id: int) -> str:
    """Post or update the incident's one Slack message (bot mode)."""
    result = slack_sync.sync_incident_message(incident_id=incident_id)
    if result.retry_in is not None:
        raise self.retry(countdown=result.retry_in)
    return result.outcome


@shared_task(name="breakers.slack_perform_action", ignore_result=True)
def slack_perform_action(action_id: int) -> bool:
    """Do one accepted press from Slack, then update its card here (one hop less than a task;
    a card update that must wait is handed to the sync task), unless the fleet's change already
    queued that card's sync (force and release)."""
    row = slack_actions.perform_slack_action(action_id=action_id)
    if row is None:
        return False
    if slack_actions.card_synced_by_fleet(row):
        return True  # one chat.update per press: the fleet's own sync task updates the card
    result = slack_sync.sync_incident_message(incident_id=row.incident_id)
    if result.retry_in is not None:
        slack_sync_incident.apply_async(
            (row.incident_id,),
            countdown=result.retry_in,
            queue=settings.SLACK_TASK_QUEUE or None,
        )
    return True


@shared_task(name="breakers.slack_respond", ignore_result=True)
def slack_respond(response_url: str, text: str, suggest: list[str] | None = None) -> bool:
    """Answer one Slack user alone (an ephemeral message)."""
    return slack_respond_service.send_ephemeral(response_url, text, suggest)


@shared_task(name="breakers.slack_sweep_cards", ignore_result=True)
def slack_sweep_cards() -> int:
    """Beat: queue again the card syncs that were lost (bot mode only)."""
    ids = slack_sync.cards_to_resync()
    for incident_id in ids:
        slack_sync_incident.apply_async((incident_id,), queue=settings.SLACK_TASK_QUEUE or None)
    return len(ids)


@shared_task(name="breakers.purge_slack_actions", ignore_result=True)
def purge_slack_actions() -> int:
    """Beat: delete Slack's press records older than RETENTION_SLACK_ACTIONS_DAYS."""
    return sum(slack_retention.purge_slack_actions().deleted.values())
