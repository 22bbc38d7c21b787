from __future__ import annotations

from django.apps import AppConfig


class BreakersConfig(AppConfig):
    name = "breakers"
    verbose_name = "Fleet breakers"

    def ready(self) -> None:
        from breakers import checks  # noqa: F401 - registers the alert settings checks
        from breakers.fleet_service import (
            FLEET_STORE_ERRORS,
            fleet_record_tool_calls,
            fleet_state,
            fleet_state_from_database,
            fleet_store,
        )
        from runs.fleet_hooks import FleetHooks, register_fleet_hooks

        # Ingest (below the fleet) tells it about accepted tool calls through these.
        register_fleet_hooks(
            FleetHooks(
                ready=lambda: fleet_store().ping(),
                record_tool_calls=lambda calls: fleet_record_tool_calls(calls=calls),
                state=lambda: fleet_state().as_json(),
                state_from_database=lambda: fleet_state_from_database().as_json(),
                store_errors=FLEET_STORE_ERRORS,
            )
        )
