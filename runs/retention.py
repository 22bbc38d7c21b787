"""Retention: the ingest ledger and old tool and model calls are deleted in small batches.

Each batch is its own short transaction found through the time index, so no long lock is held
and ingest keeps writing meanwhile; a run's totals stay on the run row, so run pages still add
up after their calls are gone. Beat runs ``runs.purge_expired`` every RETENTION_PURGE_SECONDS.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta

from celery import shared_task
from django.conf import settings
from django.db import models, router
from django.utils import timezone

from runs.models import IngestedEvent, ModelCall, ToolCall

__all__ = ("PurgeResult", "purge_expired", "purge_expired_task", "purge_table")


@dataclass
class PurgeResult:
    deleted: dict[str, int] = field(default_factory=dict)
    finished: bool = True  # False: stopped at max_batches, the next run continues


def _purge(model: type[models.Model], time_field: str, cutoff: datetime, *, batch: int) -> int:
    """Delete one batch of rows older than ``cutoff``; the number deleted."""
    pks = list(
        model._default_manager.filter(**{f"{time_field}__lt": cutoff}).values_list("pk", flat=True)[
            :batch
        ]
    )
    if not pks:
        return 0
    # A raw DELETE: these rows have no dependants and no signals, so Django's collector (which
    # would load every row first) has nothing to do.
    queryset = model._default_manager.filter(pk__in=pks)
    return int(queryset._raw_delete(router.db_for_write(model)))


def purge_expired(
    *,
    now: datetime | None = None,
    batch_size: int | None = None,
    max_batches: int | None = None,
) -> PurgeResult:
    """Delete what is older than its retention, at most ``max_batches`` batches per table."""
    now = now or timezone.now()
    batch = batch_size or settings.RETENTION_BATCH_SIZE
    limit = max_batches or settings.RETENTION_MAX_BATCHES
    calls_cutoff = now - timedelta(days=settings.RETENTION_CALLS_DAYS)
    ledger_cutoff = now - timedelta(days=settings.RETENTION_LEDGER_DAYS)
    tables: list[tuple[type[models.Model], str, datetime]] = [
        (IngestedEvent, "received_at", ledger_cutoff),
        (ToolCall, "ts", calls_cutoff),
        (ModelCall, "ts", calls_cutoff),
    ]
    result = PurgeResult()
    for model, time_field, cutoff in tables:
        purge_table(model, time_field, cutoff, batch=batch, max_batches=limit, into=result)
    return result


def purge_table(
    model: type[models.Model],
    time_field: str,
    cutoff: datetime,
    *,
    batch: int,
    max_batches: int,
    into: PurgeResult,
) -> None:
    """Delete ``model``'s rows older than ``cutoff`` (rows without dependants: a raw DELETE), at
    most ``max_batches`` batches; add the count to ``into``, and clear its ``finished`` when it
    stopped short. The apps above (breakers) purge their own tables with it."""
    total = 0
    for _ in range(max_batches):
        deleted = _purge(model, time_field, cutoff, batch=batch)
        total += deleted
        if deleted < batch:
            break
    else:
        into.finished = False
    into.deleted[model._meta.label] = total


@shared_task(name="runs.purge_expired", ignore_result=True)
def purge_expired_task() -> int:
    return sum(purge_expired().deleted.values())
