"""Apply the tool calls that committed while the fleet store was failing (``FleetBacklog``)."""

from __future__ import annotations

from django.db import transaction

from breakers.fleet_service import FLEET_STORE_ERRORS, fleet_record_tool_calls
from runs.ingest_fleet import from_backlog
from runs.models import FleetBacklog

__all__ = ["apply_fleet_backlog"]

_ROWS_PER_TICK = 100


def apply_fleet_backlog() -> int:
    """Apply waiting calls, oldest first, and delete them; returns how many rows were applied.

    The store recognises event ids it has already counted, so a row applied in part before a
    failure is applied again safely. Rows are locked (skipped by a concurrent tick).
    """
    applied = 0
    for pk in FleetBacklog.objects.order_by("pk").values_list("pk", flat=True)[:_ROWS_PER_TICK]:
        with transaction.atomic():
            row = FleetBacklog.objects.select_for_update(skip_locked=True).filter(pk=pk).first()
            if row is None:
                continue
            try:
                fleet_record_tool_calls(calls=[from_backlog(item) for item in row.calls])
            except FLEET_STORE_ERRORS:
                return applied  # still failing: the next tick tries again
            row.delete()
        applied += 1
    return applied
