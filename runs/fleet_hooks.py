"""The hook through which ingest tells the fleet breaker (a layer above it) about tool calls.

The fleet registers its functions in its ``AppConfig.ready()``; without it ingest runs alone
(no fleet: nothing to wait for, an empty fleet state). Why:
docs/adr/0129-ingest-tells-the-fleet-through-runs.md.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

__all__ = ("AcceptedToolCall", "FleetHooks", "fleet_hooks", "register_fleet_hooks")


@dataclass(frozen=True, slots=True)
class AcceptedToolCall:
    """A new (non-duplicate) ``tool.call`` event, as handed to the fleet hook."""

    event_id: str
    ts: datetime
    worker_id: str
    run_id: str
    tool: str
    outcome: str
    attempts: int
    error: str
    trial: bool = False  # the one call made under a fleet trial lease (set by the SDK)
    dedupe_id: str = ""  # unique across workers and tokens (the ledger key); event_id if empty


@dataclass(frozen=True, slots=True)
class FleetHooks:
    ready: Callable[[], None]  # raise while the fleet store is unreachable
    record_tool_calls: Callable[[Sequence[AcceptedToolCall]], object]
    state: Callable[[], dict[str, Any]]  # the fleet state in the shape of GET /api/v1/fleet
    state_from_database: Callable[[], dict[str, Any]]  # the same, when the store cannot answer
    store_errors: tuple[type[Exception], ...]  # what the fleet store raises when it is failing


def _no_fleet() -> dict[str, Any]:
    return {"version": 0, "tools": {}}


_NO_FLEET = FleetHooks(
    ready=lambda: None,
    record_tool_calls=lambda calls: None,
    state=_no_fleet,
    state_from_database=_no_fleet,
    store_errors=(),
)
_registered: FleetHooks = _NO_FLEET


def register_fleet_hooks(hooks: FleetHooks) -> None:
    global _registered
    _registered = hooks


def fleet_hooks() -> FleetHooks:
    return _registered
