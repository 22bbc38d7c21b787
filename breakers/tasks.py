"""Celery tasks: thin wrappers that call a service (cookiecutter-django / Styleguide shape).

``fleet_tick`` runs from beat every ``BREAKER_TICK_SECONDS``. Running it twice at once (a
duplicated beat) or on several workers is harmless: each state change is one atomic Redis step
and each half-open window grants its probe lease once. A lost probe task needs no retry: the
next tick sends another while the window has no live lease.

``deliver_alert`` sends one Slack alert; it is enqueued with ``transaction.on_commit`` by
``breakers.alerts`` and retries itself with the countdown the service asks for (backoff,
``Retry-After``, the channel's rate limit). Duplicates are harmless: each alert row is claimed
once. ``sweep_alerts`` runs from beat and re-enqueues what was lost.
"""

from __future__ import annotations

from celery import Task, shared_task

from breakers import alerts, backlog, services

# A probe that waited this long in the queue is stale: the next tick sends a fresh one.
PROBE_EXPIRES_SECONDS = 60


@shared_task(name="breakers.fleet_tick", ignore_result=True)
def fleet_tick() -> int:
    backlog.apply_fleet_backlog()  # first: outcomes that committed while Redis was failing
    orders = services.fleet_tick()
    for order in orders:
        fleet_probe.apply_async((order.tool, order.window), expires=PROBE_EXPIRES_SECONDS)
    return len(orders)


@shared_task(name="breakers.fleet_probe", ignore_result=True)
def fleet_probe(tool: str, window: int) -> bool:
    """True when this task made the window's probe (False: no probe, or another one had it)."""
    return services.fleet_probe(tool_name=tool, window=window) is not None


@shared_task(name="breakers.fleet_rebuild", ignore_result=True)
def fleet_rebuild() -> int:
    return services.fleet_rebuild()


@shared_task(name="breakers.deliver_alert", bind=True, ignore_result=True, max_retries=None)
def deliver_alert(self: Task, alert_id: int) -> str:
    """Deliver one alert; the service decides whether and when to try again."""
    delivery = alerts.deliver_alert(alert_id=alert_id)
    if delivery.retry_in is not None:
        raise self.retry(countdown=delivery.retry_in)
    return delivery.outcome


@shared_task(name="breakers.sweep_alerts", ignore_result=True)
def sweep_alerts() -> int:
    result = alerts.sweep_alerts()
    return result.unstuck + len(result.requeued) + result.settled
