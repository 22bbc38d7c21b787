"""Fleet breaker services, the Django shell around the Redis store: operators' and agents' commands,
the beat's maintenance (tick, rebuild, reconcile), and read-only selectors. Redis decides, the
database records each transition (``transitions``). Why: the fleet breaker records in docs/adr/,
from docs/adr/0024-the-fleet-rules-exist-twice-a.md.
"""

from __future__ import annotations

from breakers.fleet_service.commands import (
    POLICY_FIELDS,
    fleet_operator_action,
    fleet_policy_sync,
    fleet_probe,
    fleet_record_tool_calls,
    fleet_trial_acquire,
    tool_policy_update,
)
from breakers.fleet_service.errors import (
    MAX_REASON_CHARS,
    FleetError,
    FleetInputError,
    NotForcedError,
    UnknownToolError,
)
from breakers.fleet_service.maintenance import ProbeOrder, fleet_rebuild, fleet_tick
from breakers.fleet_service.selectors import (
    FleetView,
    fleet_state,
    fleet_state_from_database,
    fleet_tool_details,
    fleet_view,
)
from breakers.fleet_service.spend import fleet_record_spend
from breakers.fleet_service.transitions import FLEET_STORE_ERRORS, existing_tool, fleet_store

__all__ = [
    "FLEET_STORE_ERRORS",
    "MAX_REASON_CHARS",
    "POLICY_FIELDS",
    "FleetError",
    "FleetInputError",
    "FleetView",
    "NotForcedError",
    "ProbeOrder",
    "UnknownToolError",
    "existing_tool",
    "fleet_operator_action",
    "fleet_policy_sync",
    "fleet_probe",
    "fleet_rebuild",
    "fleet_record_spend",
    "fleet_record_tool_calls",
    "fleet_state",
    "fleet_state_from_database",
    "fleet_store",
    "fleet_tick",
    "fleet_tool_details",
    "fleet_trial_acquire",
    "fleet_view",
    "tool_policy_update",
]
