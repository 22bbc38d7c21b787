"""Synthetic accepted tool calls for the fleet breaker's services (``fleet_record_tool_calls``),
for the tests and benchmarks that drive the fleet without going through ingest."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

# Synthetic calls say nothing about when they happened: never older than a transition.
NEVER_STALE = datetime.max.replace(tzinfo=UTC)


@dataclass(frozen=True)
class Call:
    """A ``breakers.fleet_service.FleetCall``."""

    event_id: str
    tool: str
    worker_id: str
    outcome: str
    trial: bool = False  # FleetCall.trial (a half-open trial call)
    dedupe_id: str = ""  # FleetCall.dedupe_id (event_id when empty)
    ts: datetime = NEVER_STALE  # when it happened: callers drive time through ``now``
