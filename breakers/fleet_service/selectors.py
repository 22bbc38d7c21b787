"""Read-only views of the fleet: the agents' fleet state (Redis or database), a tool's details."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from breaker_panel.core import State
from breakers.fleet.rules import Forced, TrialMode
from breakers.fleet.store import FleetStore, ToolState
from breakers.fleet_service.maintenance import fleet_rebuild
from breakers.fleet_service.transitions import existing_tool, fleet_store, policy_of
from breakers.models import Tool, ToolPolicy, default_policy, ms_to_datetime


@dataclass(frozen=True, slots=True)
class FleetView:
    """``GET /api/v1/fleet`` and the ``fleet`` object of every ingest reply."""

    version: int
    generation: str
    tools: dict[str, dict[str, Any]]

    @property
    def etag(self) -> str:
        # The generation changes whenever Redis is rebuilt, so a version that restarts from the
        # database's numbers can never be mistaken for an older snapshot's.
        return f'"{self.generation}.{self.version}"'

    def as_json(self) -> dict[str, Any]:
        return {"version": self.version, "tools": self.tools}


def _fleet_entry(state: str, since: datetime | None, reason: str, forced: bool) -> dict[str, Any]:
    """One tool in ``GET /api/v1/fleet``'s shape."""
    stamp = since.isoformat(timespec="milliseconds").replace("+00:00", "Z") if since else None
    return {"state": state, "since": stamp, "reason": reason, "forced": forced}


def fleet_state_from_database() -> FleetView:
    """The fleet state as the database mirrors it: the answer when Redis cannot give one."""
    tools: dict[str, dict[str, Any]] = {}
    version = 0
    default_trial = default_policy().trial
    tools_with_probes = set(
        ToolPolicy.objects.exclude(probe_kind="").values_list("tool__name", flat=True)
    )
    for tool in Tool.objects.only(
        "name", "state", "since", "auto_reason", "forced_reason", "forced", "seq"
    ):
        forced = bool(tool.forced)
        reason = tool.forced_reason if forced else tool.auto_reason
        entry = _fleet_entry(tool.state, tool.since, reason, forced)
        if tool.state == State.HALF_OPEN:
            # As Redis's view says it: an entry without it would look like a new window to the
            # SDK, which would forget a trial it already made (and could make another).
            trial = TrialMode.PROBE if tool.name in tools_with_probes else default_trial
            entry["trial"] = trial.value
        tools[tool.name] = entry
        version += tool.seq
    return FleetView(version, "db", tools)


def fleet_state() -> FleetView:
    """Every known tool's fleet state; ``version`` is the sum of the tools' change counters."""
    store = fleet_store()
    generation, states = store.snapshot()
    if generation is None:
        fleet_rebuild()
        generation, states = store.snapshot()
    return fleet_view(generation, states, store=store)


def fleet_view(
    generation: str | None, states: dict[str, ToolState], *, store: FleetStore | None = None
) -> FleetView:
    """The ``FleetView`` of one ``FleetStore.snapshot()``."""
    store = store or fleet_store()
    tools: dict[str, dict[str, Any]] = {}
    version = 0
    for name, tool in states.items():
        since = ms_to_datetime(tool.since)
        entry = _fleet_entry(tool.state.value, since, tool.reason, bool(tool.forced))
        if tool.state is State.HALF_OPEN:
            entry["trial"] = tool.trial or store.defaults.trial.value
        tools[name] = entry
        version += tool.seq
    return FleetView(version, generation or "", tools)


def fleet_tool_details(*, tool_name: str) -> dict[str, Any]:
    """One tool's live breaker for people: state, streak (count, workers, events), policy."""
    tool = existing_tool(tool_name)
    live = fleet_store().details(tool.name)
    policy = policy_of(tool)
    effective = policy.fleet_policy() if policy is not None else default_policy()
    state = live.state or ToolState(auto=State.CLOSED, forced=Forced.NONE)
    return {
        "tool": tool.name,
        "state": state.state.value if live.state is not None else tool.state,
        "consecutive": state.consecutive,
        "workers": live.workers,
        "streak_events": live.streak,
        "window": state.window,
        "cooldown_ms": state.cooldown_ms or effective.cooldown_ms,
        "open_until": ms_to_datetime(state.open_until),
        "lease_holder": state.lease_holder,
        # The spend rule's count so far (as of the last batch that touched it).
        "spend_usd": live.spend_micro / 1_000_000,
        "spend_workers": live.spend_workers,
        "policy": {
            "threshold": effective.threshold,
            "min_workers": effective.min_workers,
            "cooldown_ms": effective.cooldown_ms,
            "max_cooldown_ms": effective.max_cooldown_ms,
            "trial": effective.trial.value,
            "spend_amount_usd": effective.spend_amount_micro / 1_000_000,
            "spend_window_seconds": effective.spend_window_ms / 1000,
        },
    }
