"""Synthetic accepted tool calls (``runs.fleet_interface.AcceptedToolCall``) for the tests and
benchmarks that drive the fleet breaker without going through ingest."""

from __future__ import annotations

from datetime import UTC, datetime

from runs.fleet_interface import AcceptedToolCall

# Synthetic calls say nothing about when they happened: never older than a transition.
NEVER_STALE = datetime.max.replace(tzinfo=UTC)


def fleet_call(
    event_id: str,
    tool: str,
    worker_id: str,
    outcome: str,
    *,
    trial: bool = False,
    dedupe_id: str = "",
    ts: datetime = NEVER_STALE,
    holder: str = "",
) -> AcceptedToolCall:
    """One accepted call of ``tool`` by ``worker_id``; callers drive time through ``now``."""
    return AcceptedToolCall(
        event_id=event_id,
        ts=ts,
        worker_id=worker_id,
        run_id="",
        tool=tool,
        outcome=outcome,
        attempts=1,
        error="",
        trial=trial,
        dedupe_id=dedupe_id,
        holder=holder,
    )
