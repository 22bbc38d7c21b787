"""This process's fleet store, and each transition it reports recorded as rows (and incidents)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from functools import lru_cache
from typing import Any

import redis
from django.conf import settings
from django.core.signals import setting_changed
from django.db import transaction
from django.utils import timezone

from breaker_panel.core import State
from breakers.alerts.creation import alerts_for_fleet_changes
from breakers.fleet.rules import OUT_STATES, FleetPolicy, Forced
from breakers.fleet.store import (
    FleetStore,
    Missing,
    PolicyOverrides,
    ToolState,
    TrackedTransition,
    redis_client,
)
from breakers.fleet_service.errors import UnknownToolError
from breakers.models import (
    FleetTransition,
    Incident,
    OperatorAction,
    Probe,
    Tool,
    ToolPolicy,
    datetime_from_ms,
    datetime_to_ms,
    default_policy,
    ms_to_datetime,
)


@lru_cache(maxsize=4)
def _redis_client(url: str, timeout: float) -> redis.Redis:
    # One pool per process. A slow or dead Redis fails the request within the timeout (ingest
    # answers 503 and the agent resends) instead of hanging it.
    return redis_client(url, timeout=timeout)


@lru_cache(maxsize=4)
def _store(url: str, timeout: float, defaults: FleetPolicy, dedupe_ttl_ms: int) -> FleetStore:
    return FleetStore(_redis_client(url, timeout), defaults=defaults, dedupe_ttl_ms=dedupe_ttl_ms)


_current_store: FleetStore | None = None


def fleet_store() -> FleetStore:
    """The process's store, built from settings (built again after a setting changes).

    Ingest asks for it several times a batch; building ``default_policy()`` and hashing the
    arguments each time cost more than the rest of a call, so the store is kept until a setting
    changes (``override_settings`` and the tests' ``settings`` fixture say so).
    """
    global _current_store
    store = _current_store
    if store is None:
        store = _current_store = _store(
            settings.REDIS_URL,
            settings.REDIS_SOCKET_TIMEOUT,
            default_policy(),
            round(settings.BREAKER_DEDUPE_TTL_SECONDS * 1000),
        )
    return store


def _forget_store(**_kwargs: object) -> None:
    global _current_store
    _current_store = None


setting_changed.connect(_forget_store, dispatch_uid="breakers.fleet_store")


def epoch_ms(now: datetime | None) -> int:
    return datetime_to_ms(now or timezone.now())


def with_restore[T](tool: str, step: Callable[[], T]) -> T:
    """Run a store step; if Redis has no state for the tool, restore it and run it again."""
    try:
        return step()
    except Missing:
        restore_tool(tool)
        return step()


def restore_tool(name: str) -> None:
    tool, _ = Tool.objects.get_or_create(name=name)
    fleet_store().restore(name, saved_state(tool), saved_policy(tool))


def policy_of(tool: Tool) -> ToolPolicy | None:
    try:
        return tool.policy
    except ToolPolicy.DoesNotExist:
        return None


def saved_state(tool: Tool) -> ToolState:
    """A tool's state as the database knows it (no counters, no lease)."""
    return ToolState(
        auto=State(tool.auto_state),
        forced=Forced(tool.forced),
        cooldown_ms=tool.cooldown_ms,
        open_until=datetime_to_ms(tool.open_until),
        window=tool.window,
        seq=tool.seq,
        since=datetime_to_ms(tool.since),
        auto_reason=tool.auto_reason,
        forced_reason=tool.forced_reason,
    )


def saved_policy(tool: Tool) -> PolicyOverrides | None:
    policy = policy_of(tool)
    return policy.overrides() if policy is not None else None


def persist_transitions(
    tool_name: str,
    tracked: Sequence[TrackedTransition],
    *,
    probe: Probe | None = None,
    operator_action: OperatorAction | None = None,
    extra_cause: Mapping[str, Any] | None = None,
) -> list[FleetTransition]:
    """Write the transitions, mirror the newest state on the tool, open/close its incident, and
    make the Slack alerts of the transitions and operator action (sent once this commits)."""
    if not tracked and operator_action is None:
        return []
    if tracked:
        # The store has the new state already: wake the long-poll waiters before the rows and
        # alerts below are written (they are the pages' record, not the agents').
        fleet_store().announce_change()
    rows = []
    with transaction.atomic():
        tool, _ = Tool.objects.get_or_create(name=tool_name)
        for item in tracked:
            rows.append(_persist_one(tool, item, probe, operator_action, extra_cause or {}))
        alerts_for_fleet_changes(tool=tool, transitions=rows, operator_action=operator_action)
    return rows


def _persist_one(
    tool: Tool,
    item: TrackedTransition,
    probe: Probe | None,
    operator_action: OperatorAction | None,
    extra_cause: Mapping[str, Any],
) -> FleetTransition:
    change, after = item.transition, item.after
    row = FleetTransition.objects.create(
        tool=tool,
        seq=change.seq,
        at=datetime_from_ms(change.at),
        from_state=change.from_state,
        to_state=change.to_state,
        auto_from=change.auto_from,
        auto_to=change.auto_to,
        forced=change.forced,
        cause_kind=change.kind,
        cause={**change.cause, **extra_cause},
        reason=change.reason,
        probe=probe,
        operator_action=operator_action,
    )
    # Two processes may persist one tool's transitions out of order: the newest seq wins.
    Tool.objects.filter(pk=tool.pk, seq__lt=after.seq).update(
        state=after.state,
        auto_state=after.auto,
        forced=after.forced,
        since=ms_to_datetime(after.since),
        auto_reason=after.auto_reason,
        forced_reason=after.forced_reason,
        cooldown_ms=after.cooldown_ms,
        open_until=ms_to_datetime(after.open_until),
        window=after.window,
        seq=after.seq,
    )
    _track_incident(tool, row)
    return row


def _track_incident(tool: Tool, row: FleetTransition) -> None:
    was_out, is_out = row.from_state in OUT_STATES, row.to_state in OUT_STATES
    if is_out and not was_out:
        if not Incident.objects.filter(tool=tool, closed_at__isnull=True).exists():
            Incident.objects.create(tool=tool, opened_at=row.at, opened_by=row, reason=row.reason)
    elif was_out and not is_out:
        Incident.objects.filter(tool=tool, closed_at__isnull=True).update(
            closed_at=row.at, closed_by=row
        )


# What the fleet store raises when Redis is unreachable or failing.
FLEET_STORE_ERRORS: tuple[type[Exception], ...] = (redis.RedisError,)


def existing_tool(name: str) -> Tool:
    # No tool has a NUL in its name (ingest refuses control characters), and PostgreSQL could
    # not even compare one: it is simply unknown.
    if "\x00" in name or len(name) > Tool._meta.get_field("name").max_length:  # type: ignore[operator]
        raise UnknownToolError(f"no tool named {name!r} has reported to the fleet")
    tool = Tool.objects.select_related("policy").filter(name=name).first()
    if tool is None:
        raise UnknownToolError(f"no tool named {name!r} has reported to the fleet")
    return tool
