from __future__ import annotations

from django.apps import AppConfig

# Ingest's PING before a batch with tool calls is skipped when the fleet store answered a round
# trip this recently (seconds): a store that fails in between is caught after the commit and
# repaired from the backlog (docs/decisions.md).
INGEST_PING_FRESH_S = 1.0


class BreakersConfig(AppConfig):
    name = "breakers"
    verbose_name = "Fleet breakers"

    def ready(self) -> None:
        from breakers import checks  # noqa: F401 - registers the alert settings checks
        from breakers.services import (
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
                # A store that answered within the last second is not asked again.
                ready=lambda: fleet_store().ping(unless_answered_within_s=INGEST_PING_FRESH_S),
                record_tool_calls=lambda calls: fleet_record_tool_calls(calls=calls),
                state=lambda: fleet_state().as_json(),
                state_from_database=lambda: fleet_state_from_database().as_json(),
                store_errors=FLEET_STORE_ERRORS,
            )
        )
