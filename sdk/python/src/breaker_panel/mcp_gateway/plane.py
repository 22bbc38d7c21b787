"""The gateway's ControlPlane: it wakes the gateway when the fleet state changes, and asks for
fleet trial leases while idle. The per-call breakers it serves with are `breaker_panel.per_call`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from breaker_panel.client import ControlPlane
from breaker_panel.vocabulary import Scope

__all__ = ["GatewayPlane"]


class GatewayPlane(ControlPlane):
    """A ControlPlane that tells the gateway when the fleet state changed, and that asks for
    fleet trial leases whether or not a call is in flight: a gateway is always serving, and a
    tool it offers for its trial is called by whichever client comes next.

    The fleet state arrives by the SDK's long-poll (`fleet_wait`): the control plane answers
    the held request as soon as an operator or a breaker changes it, and `update_fleet` wakes
    the gateway, which re-checks its offered set and tells its clients at once.
    """

    def _may_ask_for_trials(self) -> bool:
        # A gateway is always serving: it asks for a half-open tool's trial (and polls at the
        # polling cadence while one is half-open) with or without a call in flight.
        return Scope.FLEET in self.scopes

    on_fleet_change: Callable[[], None] | None = None

    def update_fleet(self, snapshot: Mapping[str, Any], *, authoritative: bool = False) -> None:
        before = self.fleet.version
        super().update_fleet(snapshot, authoritative=authoritative)
        if self.fleet.version != before and self.on_fleet_change is not None:
            self.on_fleet_change()

    def _ask_for_trials(self) -> None:
        before = self.fleet.version
        super()._ask_for_trials()
        if self.fleet.version != before and self.on_fleet_change is not None:
            self.on_fleet_change()
