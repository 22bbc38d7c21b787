"""What the project composes: the fleet updater ingest calls, built from the fleet breaker's
services (named by ``settings.INGEST_FLEET_UPDATER``; docs/adr/0168-ingest-fleet-wiring.md)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from breakers.fleet_service import (
    FLEET_STORE_ERRORS,
    fleet_record_spend,
    fleet_record_tool_calls,
    fleet_state,
    fleet_state_from_database,
    fleet_store,
)
from runs.fleet_interface import AcceptedModelCall, AcceptedToolCall

__all__ = ("FleetBreakerUpdater",)


class FleetBreakerUpdater:
    """Ingest's ``FleetUpdater``: the fleet breaker in Redis, mirrored in the database."""

    store_errors: tuple[type[Exception], ...] = FLEET_STORE_ERRORS

    def ready(self) -> None:
        fleet_store().ping()

    def record_tool_calls(self, calls: Sequence[AcceptedToolCall]) -> object:
        return fleet_record_tool_calls(calls=calls)

    def record_spend(
        self, tool_calls: Sequence[AcceptedToolCall], model_calls: Sequence[AcceptedModelCall]
    ) -> object:
        return fleet_record_spend(tool_calls=tool_calls, model_calls=model_calls)

    def state(self) -> dict[str, Any]:
        return fleet_state().as_json()

    def state_from_database(self) -> dict[str, Any]:
        return fleet_state_from_database().as_json()
