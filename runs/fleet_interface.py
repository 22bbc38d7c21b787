"""What ingest needs of the fleet breaker (a layer above it): the one tool-call type both share, and
the ``FleetUpdater`` the project hands ingest (``settings.INGEST_FLEET_UPDATER``). No Django here,
so the fleet's Redis store can take the same type. Why: docs/adr/0168-ingest-fleet-wiring.md.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol

__all__ = ("AcceptedModelCall", "AcceptedToolCall", "FleetUpdater", "NoFleet")


@dataclass(frozen=True, slots=True)
class AcceptedToolCall:
    """An accepted ``tool.call`` event on its way from ingest to the fleet breaker (new, or
    ``resent``: stored by an earlier request)."""

    event_id: str
    ts: datetime
    worker_id: str  # who the call counts for in the fleet's quorum (a worker id or a token)
    run_id: str
    tool: str
    outcome: str
    attempts: int
    error: str
    trial: bool = False  # the one call made under a fleet trial lease (set by the SDK)
    dedupe_id: str = ""  # unique across workers and tokens (the ledger key); event_id if empty
    # A resent call stored before: the fleet store recognises it if it counted it already, and
    # it is not counted again in the web process's call metrics.
    resent: bool = False
    # Who made the call, for the trial lease: the worker, not the voter. Several workers may share
    # one unbound token (one voter), yet only one of them holds a trial; "" means ``worker_id``.
    holder: str = ""
    # The run, unique across workers and tokens (its worker's ledger prefix and run id): the
    # spend rule follows each run's calls to a tool. "" (a backlog row from before) skips it.
    run_key: str = ""

    @property
    def lease_holder(self) -> str:
        return self.holder or self.worker_id


@dataclass(frozen=True, slots=True)
class AcceptedModelCall:
    """An accepted ``model.call`` event on its way to the fleet's spend rule (new, or resent)."""

    event_id: str
    ts: datetime
    voter: str  # who the run counts for in the fleet's quorum, as ``AcceptedToolCall.worker_id``
    run_key: str
    cost_usd: float
    dedupe_id: str = ""  # unique across workers and tokens; event_id if empty


class FleetUpdater(Protocol):
    """The fleet as ingest calls it: before a batch, after its commit, and for its reply."""

    @property
    def store_errors(self) -> tuple[type[Exception], ...]:
        """What the fleet store raises when it is failing."""

    def ready(self) -> None:
        """Raise (one of ``store_errors``) while the fleet store is unreachable."""

    def record_tool_calls(self, calls: Sequence[AcceptedToolCall]) -> object:
        """Count accepted calls towards their tools' breakers."""

    def record_spend(
        self, tool_calls: Sequence[AcceptedToolCall], model_calls: Sequence[AcceptedModelCall]
    ) -> object:
        """Count the model spend of runs whose calls to a tool all failed (the spend rule)."""

    def state(self) -> dict[str, Any]:
        """The fleet state in the shape of ``GET /api/v1/fleet``."""

    def state_from_database(self) -> dict[str, Any]:
        """The same, when the store cannot answer."""


class NoFleet:
    """Ingest alone: nothing to wait for, nothing to record, an empty fleet state."""

    store_errors: tuple[type[Exception], ...] = ()

    def ready(self) -> None:
        return None

    def record_tool_calls(self, calls: Sequence[AcceptedToolCall]) -> None:
        return None

    def record_spend(
        self, tool_calls: Sequence[AcceptedToolCall], model_calls: Sequence[AcceptedModelCall]
    ) -> None:
        return None

    def state(self) -> dict[str, Any]:
        return {"version": 0, "tools": {}}

    def state_from_database(self) -> dict[str, Any]:
        return self.state()
